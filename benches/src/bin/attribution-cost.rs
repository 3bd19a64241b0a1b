//! What network-insights attribution costs in S2's main configuration (10 000 objects,
//! 100 connections, 10% dirty, everything in scope, delta on): the median timed tick
//! (thread CPU time) with attribution off, at `Framing` and at `Members`, measured in
//! interleaved rounds; the fastest round of each level is compared (the machine is
//! shared, so the minimum is the least disturbed).
//!
//! ```text
//! cargo run --release -p replicate-bench --bin attribution-cost [-- ROUNDS [OBJECTS CONNECTIONS]]
//! ```

use replicate::insights::AttributionLevel;
use replicate_bench::scenarios::s2::{AckTiming, ScopeMode, Setup, Writers, measure};
use replicate_bench::scenarios::{DeltaMode, set_attribution};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(5);
    let objects = args.get(1).copied().unwrap_or(10_000);
    let connections = args.get(2).copied().unwrap_or(100);
    let setup = Setup {
        objects,
        players: connections,
        connections,
        dirty_fraction: 0.1,
        scope: ScopeMode::All,
        ticks: 30,
        seed: 0x5EED_0002,
        delta: DeltaMode::On,
        acks: AckTiming::Instant,
        writers: Writers::PerConnection,
        churn: 0,
    };
    let levels = [
        AttributionLevel::Off,
        AttributionLevel::Framing,
        AttributionLevel::Members,
    ];
    let mut all: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for (i, &level) in levels.iter().enumerate() {
            set_attribution(level);
            match measure(setup) {
                Ok(m) => {
                    all[i].push(m.tick_ns);
                    println!(
                        "round {round} {level:?}: {:.2} ms per tick",
                        m.tick_ns / 1e6
                    );
                }
                Err(e) => {
                    eprintln!("error: {e:?}");
                    std::process::exit(1);
                }
            }
        }
    }
    let best = all
        .each_ref()
        .map(|v| v.iter().copied().fold(f64::MAX, f64::min));
    let median = all.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    });
    println!(
        "median: off {:.2} ms, framing {:.2} ms ({:+.1}%), members {:.2} ms ({:+.1}%)",
        median[0] / 1e6,
        median[1] / 1e6,
        100.0 * (median[1] / median[0] - 1.0),
        median[2] / 1e6,
        100.0 * (median[2] / median[0] - 1.0)
    );
    println!(
        "fastest: off {:.2} ms, framing {:.2} ms ({:+.1}%), members {:.2} ms ({:+.1}%)",
        best[0] / 1e6,
        best[1] / 1e6,
        100.0 * (best[1] / best[0] - 1.0),
        best[2] / 1e6,
        100.0 * (best[2] / best[0] - 1.0)
    );
}
