//! The `attachment_*` and `huge_*` suites: derived message and object types, their
//! registry and [`setup`] for a [`Sim`](super::Sim).
//!
//! The types are not registered through `inventory` (`register = false`), so that every
//! test binary including the harness keeps its own inventory: tests built on
//! [`Link`](super::Link) take every registered type of their binary.

use super::Setup;
use replicate::Replicated;
use replicate::internals::protocol::{ProtocolRegistry, Registration};
use replicate::internals::replication::ReplicationConfig;
use std::sync::Arc;

/// A chat line (a message type).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
pub struct Chat {
    pub seq: u32,
    #[net(max_len = 64)]
    pub text: String,
}

/// A request a client may send; the server only accepts `amount <= 10`.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
pub struct Buy {
    pub item: u16,
    pub amount: u8,
}

/// A small replicated object.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
pub struct Door {
    pub open: bool,
    pub code: u32,
}

/// An object whose state may exceed a packet by far.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
pub struct Blobby {
    pub id: u32,
    #[net(max_len = 65535)]
    pub data: Vec<u64>,
}

pub fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(
        ProtocolRegistry::from_registrations([
            Registration::of::<Chat>(),
            Registration::of::<Buy>(),
            Registration::of::<Door>(),
            Registration::of::<Blobby>(),
        ])
        .expect("registry"),
    )
}

/// Deterministic data of `len` bytes (rounded up to whole words).
pub fn bytes(seed: u64, len: usize) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len.div_ceil(8))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect()
}

/// A [`Sim`](super::Sim) of these types with `config`: one client, 8 server packets and
/// up to 2 client packets (messages) per tick.
pub fn setup(config: ReplicationConfig) -> Setup {
    Setup {
        config,
        packets_per_tick: 8,
        client_packets_per_tick: 2,
        ..Setup::new(registry())
    }
}
