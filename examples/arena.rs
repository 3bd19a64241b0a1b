//! The arena demo: a server simulating the S1 arena (32 players, 50 projectiles,
//! 8 vehicles at 30 Hz) and N headless bot clients over netcode.io UDP on localhost,
//! with an optional link conditioner. A live view while it runs, a summary at the end;
//! exits 0 only if every client converged to the server's state.
//!
//! ```text
//! cargo run --release --example arena
//! cargo run --release --example arena -- --clients 8 --seconds 10 --loss 0.05 --latency-ms 40
//! cargo run --release --example arena -- --quick      # a few seconds, for CI
//! cargo run --release --example arena -- --latency-ms 40 --jitter-ms 20 --loss 0.05 --interpolate --predict
//! cargo run --release --example arena -- --record arena.session   # then:
//! cargo run -p replicate-insights -- report arena.session -o report.html
//! ```

use replicate_examples::arena_session::{Session, SessionConfig, SessionPhase};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: arena [--clients N] [--seconds S] [--loss P] [--latency-ms MS] [--jitter-ms MS]
             [--seed N] [--no-delta] [--interpolate] [--predict] [--quick] [--plain]
             [--record PATH]

  --clients N       bot clients (default 8)
  --seconds S       seconds the world moves (default 10; 3 with --quick)
  --loss P          packet loss per direction, 0..1 (default 0)
  --latency-ms MS   one-way latency added per direction (default 0)
  --jitter-ms MS    up to this much extra latency (default 0)
  --seed N          world and link seed (default 1)
  --no-delta        send full values instead of deltas against acked baselines
  --interpolate     client 1 presents the players by snapshot interpolation; the
                    summary reports stalls and the error against the server's history
  --predict         client 1 controls an avatar with inputs and predicts it; the
                    summary reports the server's corrections
  --quick           a short run for CI smoke tests
  --plain           periodic lines instead of the live view
  --record PATH     record the session (where every bit went) for
                    `cargo run -p replicate-insights -- report PATH`";

/// What the command line asked for: the session, and whether to print plain lines.
struct Args {
    config: SessionConfig,
    plain: bool,
}

fn parse_args() -> Result<Args, String> {
    use lexopt::prelude::*;
    fn number<T: std::str::FromStr>(parser: &mut lexopt::Parser, name: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        let raw = parser.value().map_err(|e| e.to_string())?;
        let text = raw.string().map_err(|e| e.to_string())?;
        text.parse().map_err(|e| format!("--{name} {text}: {e}"))
    }
    let mut config = SessionConfig::s1(8);
    let mut seconds: Option<f64> = None;
    let mut quick = false;
    let mut plain = false;
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("clients") => config.clients = number(&mut parser, "clients")?,
            Long("seconds") => seconds = Some(number(&mut parser, "seconds")?),
            Long("loss") => {
                let loss: f32 = number(&mut parser, "loss")?;
                if !(0.0..1.0).contains(&loss) {
                    return Err("--loss must be in 0..1".into());
                }
                config.conditioner.loss = loss;
            }
            Long("latency-ms") => {
                config.conditioner.latency =
                    Duration::from_millis(number(&mut parser, "latency-ms")?)
            }
            Long("jitter-ms") => {
                config.conditioner.jitter = Duration::from_millis(number(&mut parser, "jitter-ms")?)
            }
            Long("seed") => config.seed = number(&mut parser, "seed")?,
            Long("quick") => quick = true,
            Long("no-delta") => config.delta = false,
            Long("interpolate") => config.interpolate = true,
            Long("predict") => config.predict = true,
            Long("plain") => plain = true,
            Long("record") => {
                let path = parser.value().map_err(|e| e.to_string())?;
                config.record = Some(path.into());
            }
            Short('h') | Long("help") => return Err(String::new()),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if !(1..=32).contains(&config.clients) {
        return Err("--clients must be 1..=32".into());
    }
    let seconds = seconds.unwrap_or(if quick { 3.0 } else { 10.0 });
    if !(seconds > 0.0 && seconds <= 3600.0) {
        return Err("--seconds must be in (0, 3600]".into());
    }
    config.run_for = Duration::from_secs_f64(seconds);
    if quick {
        config.settle_timeout = Duration::from_secs(20);
    }
    Ok(Args { config, plain })
}

fn human_bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.2} MB/s", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB/s", b / 1e3)
    } else {
        format!("{b:.0} B/s")
    }
}

/// The live view: one line per client and a progress line.
fn view(session: &Session) -> Vec<String> {
    let c = session.config();
    let mut lines = vec![format!(
        "{:>6} | {:>12} | {:>7} | {:>11} | {:>11} | {:>7} | {:>6}",
        "client", "state", "objects", "down", "up", "rtt", "loss"
    )];
    for bot in &session.bots {
        let s = session.server.stats(bot.id);
        let state = match bot.client.state() {
            replicate::ClientState::Connecting => "connecting".to_string(),
            replicate::ClientState::Handshaking => "handshaking".to_string(),
            replicate::ClientState::Connected if bot.converged => "converged".into(),
            replicate::ClientState::Connected => "connected".into(),
            replicate::ClientState::Disconnected(_) => "disconnected".into(),
        };
        let cs = bot.client.stats();
        lines.push(format!(
            "{:>6} | {:>12} | {:>7} | {:>11} | {:>11} | {:>5}ms | {:>5.1}%",
            bot.id,
            state,
            bot.client.object_count(),
            human_bytes(cs.bytes_in_per_sec),
            human_bytes(cs.bytes_out_per_sec),
            s.map_or(0, |s| s.rtt.as_millis()),
            s.map_or(0.0, |s| s.packet_loss * 100.0),
        ));
    }
    let elapsed = session.elapsed().as_secs_f64();
    let phase = match session.phase() {
        SessionPhase::Running => format!(
            "running {:>5.1}/{:.1} s",
            elapsed.min(c.run_for.as_secs_f64()),
            c.run_for.as_secs_f64()
        ),
        SessionPhase::Settling => format!(
            "settling: {}/{} clients converged",
            session.bots.iter().filter(|b| b.converged).count(),
            session.bots.len()
        ),
        SessionPhase::Done => "done".into(),
    };
    lines.push(format!(
        "[{phase}] tick {} | {} objects on the server | {} clients connected",
        session.ticks(),
        session.server_objects(),
        session.server.client_count()
    ));
    lines
}

fn main() -> ExitCode {
    let Args { config, plain } = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}\n");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let plain = plain || !std::io::stdout().is_terminal();
    println!(
        "arena: {} clients, {:?} of simulation at {} Hz, loss {:.1}%, latency {:?} (+ up to {:?} jitter), delta {}, netcode.io over UDP on 127.0.0.1",
        config.clients,
        config.run_for,
        config.tick_rate,
        config.conditioner.loss * 100.0,
        config.conditioner.latency,
        config.conditioner.jitter,
        if config.delta { "on" } else { "off" }
    );
    let mut session = match Session::start(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: could not start the session: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let mut drawn = 0usize;
    let mut last_draw = Instant::now() - Duration::from_secs(10);
    loop {
        let phase = match session.tick() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        let interval = if plain {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(200)
        };
        if last_draw.elapsed() >= interval || phase == SessionPhase::Done {
            last_draw = Instant::now();
            let lines = view(&session);
            if plain {
                let _ = writeln!(out, "{}", lines.last().map_or("", String::as_str));
            } else {
                if drawn > 0 {
                    let _ = write!(out, "\x1b[{drawn}A\x1b[J");
                }
                for l in &lines {
                    let _ = writeln!(out, "{l}");
                }
                drawn = lines.len();
            }
            let _ = out.flush();
        }
        if phase == SessionPhase::Done {
            break;
        }
    }
    session.check_convergence();
    let report = session.report();
    let _ = writeln!(out, "\nsummary ({:.1} s):", session.elapsed().as_secs_f64());
    let _ = writeln!(
        out,
        "| client | objects | down (avg) | up (avg) | rtt | loss | converged |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for r in &report {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} ms | {:.1}% | {} |",
            r.id,
            r.objects,
            human_bytes(r.down_bytes_per_sec),
            human_bytes(r.up_bytes_per_sec),
            r.rtt.as_millis(),
            r.loss * 100.0,
            if r.converged { "yes" } else { "NO" }
        );
    }
    if let Some(first) = session.bots.first() {
        let per_type = session.server.bits_per_type(first.id);
        let total: u64 = per_type.iter().map(|(_, b)| b).sum();
        let _ = write!(out, "object data sent to client {} by type:", first.id);
        for (name, bits) in &per_type {
            let _ = write!(
                out,
                " {name} {:.1} kB ({:.0}%)",
                *bits as f64 / 8000.0,
                100.0 * *bits as f64 / total.max(1) as f64
            );
        }
        let _ = writeln!(out);
    }
    if let Some(first) = session.bots.first() {
        let t = &session.time;
        let mut errors = t.clock_errors.clone();
        errors.sort_by(f64::total_cmp);
        let p95 = errors
            .get((errors.len().saturating_sub(1)) * 95 / 100)
            .map_or(f64::NAN, |e| e * 1e3);
        let _ = writeln!(
            out,
            "time (client {}): tick field {:.1} bits per packet; clock error p95 {p95:.2} ms",
            first.id, t.tick_bits_per_packet
        );
        if session.config().interpolate {
            let _ = writeln!(
                out,
                "  interpolation: {} player frames, {} without a fresh value, {} extrapolated; \
                 mean error {:.2} cm against the server's positions; delay {:.0} ms",
                t.interpolated,
                t.stalls,
                t.extrapolated,
                100.0 * t.error_sum / t.error_samples.max(1) as f64,
                t.delay.map_or(0.0, |d| d.as_secs_f64() * 1e3)
            );
        }
        if session.config().predict {
            let _ = writeln!(
                out,
                "  prediction: {} authoritative avatar states compared, {} corrections",
                t.reconciled, t.corrections
            );
        }
    }
    for bot in session.bots.iter().filter(|b| !b.converged) {
        let _ = writeln!(
            out,
            "client {} differs: {}",
            bot.id,
            replicate_examples::arena_session::differences(&session.server, &bot.client)
        );
        if std::env::var_os("ARENA_DEBUG").is_some() {
            let _ = writeln!(out, "client stats {:?}", bot.client.stats());
            let _ = writeln!(out, "reader stats {:?}", bot.client.world().stats());
            let _ = writeln!(out, "server stats {:?}", session.server.stats(bot.id));
            let conn = session.server.connection_id(bot.id).unwrap_or(0);
            let _ = writeln!(
                out,
                "writer stats {:?}",
                session.server.replication().writer(conn).map(|w| w.stats())
            );
            let _ = writeln!(
                out,
                "conn stats {:?}",
                session.server.connection(bot.id).map(|c| c.stats())
            );
            let _ = writeln!(
                out,
                "client conn stats {:?}",
                bot.client.connection().stats()
            );
        }
    }
    if let Err(e) = session.finish() {
        eprintln!("warning: shutdown: {e}");
    }
    if let Some(path) = session.config().record.clone() {
        if session.server.flush_recording() {
            let _ = writeln!(
                out,
                "session recorded in {} (report: cargo run -p replicate-insights -- report {} -o report.html)",
                path.display(),
                path.display()
            );
        } else {
            eprintln!("warning: recording the session failed (see the log)");
        }
    }
    let converged = report.iter().filter(|r| r.converged).count();
    let _ = writeln!(
        out,
        "{converged}/{} clients converged to the server's {} objects",
        report.len(),
        session.server_objects()
    );
    if converged == report.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
