//! Shared code for the examples and the benchmark harness: the game worlds of the fixed
//! benchmark scenarios (`BENCHMARKS.md`), with their replicated types and seeded
//! motion, so the demo and the measurements replicate exactly the same thing.

pub mod arena_recorded;
pub mod arena_session;
pub mod arena_world;
