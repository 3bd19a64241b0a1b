//! The scenario harness of `BENCHMARKS.md`:
//!
//! ```text
//! cargo run --release -p replicate-bench -- s1|s2|s3|all [--quick] [--out DIR]
//! ```
//!
//! Prints each scenario's markdown tables and writes JSON, markdown and SVG under
//! `target/bench-report/` of the invoking workspace (or `--out DIR`). Exits non-zero when a sanity check fails (no traffic, a
//! client that did not converge, replicate not smaller than the postcard baseline);
//! timings are reported, never asserted.

use replicate_bench::report::{Json, write_file};
use replicate_bench::scenarios::{Outcome, SanityError, s1, s2, s3};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str =
    "usage: replicate-bench [s1|s2|s3|all] [--quick] [--out DIR] [--attribution LEVEL]

  s1, s2, s3, all   the scenarios to run (default all)
  --quick           short runs: a smoke test of the harness, not a measurement
  --out DIR         where the reports go (default target/bench-report/ of this workspace)
  --attribution L   network-insights attribution: off (default), framing or members,
                    to measure its cost";

/// What the command line asked for.
struct Args {
    scenarios: Vec<&'static str>,
    quick: bool,
}

fn parse_args() -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut scenarios = Vec::new();
    let mut quick = false;
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("quick") => quick = true,
            Long("out") => {
                let dir = parser.value().map_err(|e| e.to_string())?;
                replicate_bench::report::set_report_dir(dir.into());
            }
            Long("attribution") => {
                use replicate::insights::AttributionLevel;
                let v = parser.value().map_err(|e| e.to_string())?;
                let level = match v.to_str() {
                    Some("off") => AttributionLevel::Off,
                    Some("framing") => AttributionLevel::Framing,
                    Some("members") => AttributionLevel::Members,
                    _ => return Err(format!("--attribution {v:?}: off, framing or members")),
                };
                replicate_bench::scenarios::set_attribution(level);
            }
            Short('h') | Long("help") => return Err(String::new()),
            Value(v) => match v.to_str() {
                Some("all") => scenarios.extend(["s1", "s2", "s3"]),
                Some("s1") => scenarios.push("s1"),
                Some("s2") => scenarios.push("s2"),
                Some("s3") => scenarios.push("s3"),
                _ => return Err(format!("unknown scenario {v:?} (s1, s2, s3 or all)")),
            },
            other => return Err(other.unexpected().to_string()),
        }
    }
    if scenarios.is_empty() {
        scenarios.extend(["s1", "s2", "s3"]);
    }
    scenarios.dedup();
    Ok(Args { scenarios, quick })
}

fn main() -> ExitCode {
    let Args { scenarios, quick } = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}\n");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut all = Vec::new();
    let mut markdown = String::new();
    for name in scenarios {
        let start = Instant::now();
        let result: Result<Outcome, SanityError> = match name {
            "s1" => s1::run(if quick {
                s1::S1Params::QUICK
            } else {
                s1::S1Params::FULL
            }),
            "s2" => s2::run(&if quick {
                s2::S2Params::quick()
            } else {
                s2::S2Params::full()
            }),
            _ => s3::run(if quick {
                s3::S3Params::QUICK
            } else {
                s3::S3Params::FULL
            }),
        };
        match result {
            Ok(o) => {
                println!("{}", o.markdown);
                println!("({name} took {:.1} s)\n", start.elapsed().as_secs_f64());
                markdown.push_str(&o.markdown);
                markdown.push('\n');
                all.push((name, o.json));
            }
            Err(e) => {
                eprintln!("{name}: sanity check failed: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let json = Json::obj(vec![
        ("quick", Json::Bool(quick)),
        (
            "scenarios",
            Json::Obj(all.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        ),
    ]);
    let _ = write_file("report.md", &markdown);
    match write_file("report.json", &json.render()) {
        Ok(path) => println!(
            "reports in {}",
            path.parent()
                .map_or(path.clone(), |p| p.to_path_buf())
                .display()
        ),
        Err(e) => eprintln!("could not write the report: {e}"),
    }
    ExitCode::SUCCESS
}
