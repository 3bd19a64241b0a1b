//! One S2 configuration at full size (10 000 objects, 100 connections), for profilers:
//!
//! ```text
//! cargo build --release -p replicate-bench --example s2_profile
//! perf record -g target/release/examples/s2_profile [delta|nodelta] [all|grid|spread|crowd|idle] [passes|per-connection|parallel] [churn] [objects=N] [players=N] [connections=N] [ticks=N]
//! ```
//!
//! Prints the configuration's figures on one line (thread CPU time, as in S2's table).

use replicate_bench::scenarios::DeltaMode;
use replicate_bench::scenarios::s2::{AckTiming, ScopeMode, Setup, Writers, measure, measure_idle};

fn main() {
    let mut setup = Setup {
        objects: 10_000,
        players: 100,
        connections: 100,
        dirty_fraction: 0.1,
        scope: ScopeMode::All,
        ticks: 30,
        seed: 0x5EED_0002,
        delta: DeltaMode::On,
        acks: AckTiming::Instant,
        writers: Writers::Passes(1),
        churn: 0,
    };
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "delta" => setup.delta = DeltaMode::On,
            "nodelta" => setup.delta = DeltaMode::Off,
            "all" => {}
            "grid" => setup.scope = ScopeMode::Grid,
            "spread" => {
                setup.acks = AckTiming::Spread {
                    min_ms: 20,
                    max_ms: 200,
                }
            }
            "passes" => setup.writers = Writers::Passes(1),
            "per-connection" => setup.writers = Writers::PerConnection,
            "parallel" => setup.writers = Writers::Passes(2),
            "idle" => {
                // The idle tick at 100 000 objects × 100 connections.
                match measure_idle(100_000, 100, setup.ticks) {
                    Ok(m) => println!(
                        "idle tick {:.1} µs CPU / {:.1} µs wall",
                        m.tick_ns / 1e3,
                        m.tick_wall_ns / 1e3
                    ),
                    Err(e) => {
                        eprintln!("S2 idle failed its sanity check: {e}");
                        std::process::exit(1);
                    }
                }
                return;
            }
            "churn" => setup.churn = 1,
            "crowd" => {
                setup.objects = setup.connections;
                setup.dirty_fraction = 1.0;
                setup.scope = ScopeMode::Crowd;
            }
            other if other.starts_with("ticks=") => match other["ticks=".len()..].parse() {
                Ok(n) => setup.ticks = n,
                Err(e) => {
                    eprintln!("ticks=N: {e}");
                    std::process::exit(2);
                }
            },
            other if other.starts_with("players=") => match other["players=".len()..].parse() {
                Ok(n) => setup.players = n,
                Err(e) => {
                    eprintln!("players=N: {e}");
                    std::process::exit(2);
                }
            },
            other if other.starts_with("objects=") => match other["objects=".len()..].parse() {
                Ok(n) => setup.objects = n,
                Err(e) => {
                    eprintln!("objects=N: {e}");
                    std::process::exit(2);
                }
            },
            other if other.starts_with("connections=") => {
                match other["connections=".len()..].parse() {
                    Ok(n) => setup.connections = n,
                    Err(e) => {
                        eprintln!("connections=N: {e}");
                        std::process::exit(2);
                    }
                }
            }
            other => {
                eprintln!(
                    "unknown argument {other:?}; usage: s2_profile [delta|nodelta] [all|grid|spread|crowd|idle] [passes|per-connection|parallel] [churn] [objects=N] [players=N] [connections=N] [ticks=N]"
                );
                std::process::exit(2);
            }
        }
    }
    match measure(setup) {
        Ok(m) => println!(
            "{:.1} ns per dirty obj×conn, tick {:.2} ms CPU / {:.2} ms wall / {:.2} ms all threads, idle {:.3} ms, \
             {:.2} B per pair, postcard {:.1} ns per pair, {:.1} segments copied per encoding, \
             {:.0} % of batches replayed, peak RSS {} MiB, {} send-state copies held, {:.1} made per tick, \
             {} baseline copies held, {:.1} made per tick, {:.0} % of the tick writing",
            m.ns_per_pair(),
            m.tick_ns / 1e6,
            m.tick_wall_ns / 1e6,
            m.tick_process_ns / 1e6,
            m.idle_ns / 1e6,
            m.bytes_per_pair(),
            m.baseline_ns_per_pair(),
            m.copies_per_encoding,
            m.replayed_share * 100.0,
            m.peak_rss
                .map_or("?".into(), |b| format!("{:.1}", b as f64 / 1_048_576.0)),
            m.send_state_copies,
            m.send_state_copies_made,
            m.baseline_copies,
            m.baseline_copies_made,
            m.writing_share * 100.0,
        ),
        Err(e) => {
            eprintln!("S2 failed its sanity check: {e}");
            std::process::exit(1);
        }
    }
}
