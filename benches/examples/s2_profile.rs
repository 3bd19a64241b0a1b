//! One S2 configuration, for a profiler: 10 000 objects, 16 connections, 10% dirty,
//! everything in scope, delta on or off.
//!
//! ```sh
//! cargo build --release -p replicate-bench --example s2_profile
//! valgrind --tool=callgrind target/release/examples/s2_profile delta
//! ```

use replicate_bench::scenarios::DeltaMode;
use replicate_bench::scenarios::s2::{ScopeMode, Setup, measure};

fn main() {
    let delta = match std::env::args().nth(1).as_deref() {
        Some("delta") | None => DeltaMode::On,
        Some("nodelta") => DeltaMode::Off,
        Some(other) => {
            eprintln!("usage: s2_profile [delta|nodelta] (got `{other}`)");
            std::process::exit(2);
        }
    };
    let setup = Setup {
        objects: 10_000,
        players: 16,
        connections: 16,
        dirty_fraction: 0.1,
        scope: ScopeMode::All,
        ticks: 4,
        seed: 0x5EED_0002,
        delta,
    };
    match measure(setup) {
        Ok(m) => println!(
            "{delta:?}: {:.0} ns per dirty object x connection, {:.1} B per pair",
            m.ns_per_pair(),
            m.bytes_per_pair()
        ),
        Err(e) => {
            eprintln!("sanity check failed: {e}");
            std::process::exit(1);
        }
    }
}
