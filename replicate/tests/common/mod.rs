//! The integration tests' shared harness, one module for every suite:
//!
//! - [`Sim`]: a server and clients over the real sans-IO connections and seeded link
//!   simulators (loss, duplication, jitter, reordering), with [`settle`] and
//!   [`quiet_bad_link`] for the convergence checks;
//! - [`write_manual_packet`] / [`read_manual_packet`]: packets driven by hand, without a
//!   connection; [`Link`]: one server and one client joined by such packets, with every
//!   type the test binary registers;
//! - [`Rng`]: a tiny seeded generator;
//! - one module per suite with its types, its registry and the [`Setup`] of its [`Sim`]:
//!   [`core_suite`] (hand-written types, [`core_suite::Manual`]), [`interest_suite`]
//!   (every condition, the wire decoder, [`interest_suite::Net`]) and
//!   [`attachment_suite`] (messages and huge objects), and [`robust_suite`] (the facade
//!   over the in-memory transport, for the robustness suites).
//!
//! A test file declares `mod common;` and imports `common::*` plus its suite's module.

// Each test binary uses only part of the harness.
#![allow(dead_code, unused_imports)]

pub mod attachment_suite;
pub mod core_suite;
pub mod interest_suite;
mod link;
mod packet;
pub mod robust_suite;
mod sim;

pub use link::Link;
pub use packet::{read_manual_packet, write_manual_packet};
pub use sim::{Peer, SETTLED_IDLE_TICKS, Setup, Sim, quiet_bad_link, settle};

/// SplitMix64: a tiny seeded generator for the simulations.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}
