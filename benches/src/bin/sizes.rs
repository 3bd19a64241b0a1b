//! Prints the encoded-size table of the game struct (criterion reports only times):
//! `cargo run --release -p replicate-bench --bin sizes`.

use replicate_bench::game::{make_states, size_table};

/// Same states as the `game_struct` benchmark.
const STATES: usize = 256;
const SEED: u64 = 42;

fn main() {
    print!("{}", size_table(&make_states(STATES, SEED)));
}
