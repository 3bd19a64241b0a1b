//! `replicate-insights report SESSION [-o report.html]`: the network-insights report
//! of a recorded session (HTML file, and a text summary on stdout).

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: replicate-insights report SESSION [-o REPORT.html] [--quiet]

  SESSION          a session recorded by the server (ServerConfig::record, or
                   `cargo run --example arena -- --record SESSION`)
  -o, --out PATH   where to write the HTML report (default: SESSION with .html)
  -q, --quiet      no text summary on stdout";

struct Args {
    session: PathBuf,
    out: PathBuf,
    quiet: bool,
}

fn parse_args() -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let mut command = None;
    let mut session: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut quiet = false;
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('o') | Long("out") => {
                out = Some(parser.value().map_err(|e| e.to_string())?.into());
            }
            Short('q') | Long("quiet") => quiet = true,
            Short('h') | Long("help") => return Err(String::new()),
            Value(v) if command.is_none() => {
                let v = v.string().map_err(|e| e.to_string())?;
                if v != "report" {
                    return Err(format!("unknown command `{v}` (the command is `report`)"));
                }
                command = Some(v);
            }
            Value(v) if session.is_none() => session = Some(v.into()),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if command.is_none() {
        return Err("missing the command (`report`)".into());
    }
    let session = session.ok_or("missing the session file")?;
    let out = out.unwrap_or_else(|| session.with_extension("html"));
    Ok(Args {
        session,
        out,
        quiet,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}\n");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let session = match replicate::insights::read_session(&args.session) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}: {e}", args.session.display());
            return ExitCode::FAILURE;
        }
    };
    let analysis = replicate_insights::Analysis::new(&session);
    if let Err(e) = std::fs::write(&args.out, replicate_insights::html::render(&analysis)) {
        eprintln!("error: writing {}: {e}", args.out.display());
        return ExitCode::FAILURE;
    }
    if !args.quiet {
        print!("{}", replicate_insights::text::summary(&analysis));
    }
    eprintln!("report written to {}", args.out.display());
    ExitCode::SUCCESS
}
