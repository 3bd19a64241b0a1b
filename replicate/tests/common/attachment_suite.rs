//! The `attachment_*` and `huge_*` suites: derived message and object types (registered
//! through `inventory`), their registry and [`setup`] for a [`Sim`](super::Sim).

use super::Setup;
use replicate::Replicated;
use replicate::protocol::ProtocolRegistry;
use replicate::replication::ReplicationConfig;
use std::sync::Arc;

/// A chat line (a message type).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Chat {
    pub seq: u32,
    #[net(max_len = 64)]
    pub text: String,
}

/// A request a client may send; the server only accepts `amount <= 10`.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Buy {
    pub item: u16,
    pub amount: u8,
}

/// A small replicated object.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Door {
    pub open: bool,
    pub code: u32,
}

/// An object whose state may exceed a packet by far.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Blobby {
    pub id: u32,
    #[net(max_len = 65535)]
    pub data: Vec<u64>,
}

pub fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(ProtocolRegistry::from_inventory().expect("registry"))
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
