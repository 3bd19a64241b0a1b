//! Shared pieces of the fuzz targets: replicated types that exercise most serializers
//! (quantized vectors, quaternions, references, strings, optional values, arrays of
//! nested structs with per-element change tracking, huge objects), the registry, the
//! input format (several packets per input) and a recorder of real sessions that
//! seeds the corpora (`cargo run --bin seed_corpus`).
//!
//! Input format of the packet targets: `([sequence step: 1][length: 2, LE][bytes])*`;
//! the sequence step lets the fuzzer reorder, repeat and skip packets.

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::blob::DeliveryMode;
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
use replicate::internals::stream::WriteResult;
use replicate::{NetRefHandle, Replicated};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// An inventory slot (nested in a `Vec`, tracked per element).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Item {
    #[net(bits = 10)]
    pub kind: u16,
    pub count: u32,
}

/// A game character: most member kinds in one type.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Pawn {
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: glam::Vec3,
    #[net(bits = 12)]
    pub rotation: glam::Quat,
    #[net(bits = 7)]
    pub health: u8,
    #[net(cond = OwnerOnly)]
    pub ammo: u16,
    #[net(init, max_len = 32)]
    pub name: String,
    pub target: NetRefHandle,
    #[net(max_len = 16)]
    pub inventory: Vec<Item>,
    pub shield: Option<u32>,
}

/// An object far larger than a packet (the huge-object path).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Archive {
    #[net(max_len = 4096)]
    pub data: Vec<u64>,
}

/// A message.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Chat {
    #[net(max_len = 2000)]
    pub text: String,
}

/// The registry of every type above (built once).
pub fn registry() -> Arc<ProtocolRegistry> {
    static REGISTRY: OnceLock<Arc<ProtocolRegistry>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Arc::new(ProtocolRegistry::from_inventory().expect("registry")))
        .clone()
}

/// Splits a fuzz input into `(sequence step, packet)` pairs.
pub fn packets(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (&step, rest) = data.split_first()?;
        let (len, rest) = match rest {
            [a, b, rest @ ..] => (u16::from_le_bytes([*a, *b]) as usize, rest),
            _ => return None,
        };
        let len = len.min(rest.len());
        let (packet, rest) = rest.split_at(len);
        data = rest;
        Some((step, packet))
    })
}

/// Joins packets into one fuzz input (the inverse of [`packets`], step 1 each).
pub fn join(packets: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in packets {
        out.push(1);
        out.extend_from_slice(&(p.len().min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend_from_slice(&p[..p.len().min(u16::MAX as usize)]);
    }
    out
}

/// Packets of a real session, both ways: what the server sent to its client, and
/// what the client sent back (messages). Seeds the packet targets.
pub fn record_session(seed: u64, ticks: u32) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let registry = registry();
    let mut server = ReplicationServer::new(registry.clone(), ReplicationConfig::default());
    let mut client = ReplicationClient::new(registry, ReplicationConfig::default());
    let conn = server.add_connection();
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut pawns = Vec::new();
    let mut to_client = Vec::new();
    let mut to_server = Vec::new();
    let mut now = Duration::ZERO;
    for (seq, tick) in (0..ticks).enumerate() {
        now += Duration::from_millis(16);
        if tick % 4 == 0 {
            let target = pawns.last().copied().unwrap_or_default();
            let pawn = Pawn {
                position: glam::Vec3::new(rnd() as u8 as f32, 1.0, -3.5),
                health: (rnd() % 100) as u8,
                name: format!("pawn {tick}"),
                target,
                inventory: (0..rnd() % 4)
                    .map(|i| Item {
                        kind: i as u16,
                        count: rnd() as u32,
                    })
                    .collect(),
                shield: (tick % 8 == 0).then_some(5),
                ..Pawn::default()
            };
            if let Ok(h) = server.objects_mut().spawn(pawn) {
                pawns.push(h);
            }
        }
        if tick == 3 {
            let _ = server.objects_mut().spawn(Archive {
                data: (0..600).map(|_| rnd()).collect(),
            });
        }
        for &h in &pawns {
            if let Some(p) = server.objects_mut().get_mut::<Pawn>(h) {
                p.position.x += 0.25;
                p.health = (p.health + 1) % 100;
            }
        }
        if tick % 10 == 9 && pawns.len() > 2 {
            let h = pawns.remove(0);
            let _ = if tick % 20 == 9 {
                server.objects_mut().destroy(h)
            } else {
                server.objects_mut().tear_off(h)
            };
        }
        if let Some(&h) = pawns.first() {
            let text = "x".repeat((tick as usize * 37) % 300);
            let _ =
                server.send_object_message(conn, h, &Chat { text }, DeliveryMode::ReliableOrdered);
        }
        let _ = client.send_message(
            &Chat {
                text: format!("hello {tick}"),
            },
            DeliveryMode::ReliableUnordered,
        );
        server.tick(now);
        let sequence = PacketSequence(seq as u16);
        let mut w = BitWriter::with_capacity_bytes(1200);
        if server.write_packet(conn, sequence, &mut w) != WriteResult::NoData {
            let bytes = w.finish().unwrap_or_default();
            let _ = client.read_packet(now, sequence, &mut BitReader::new(&bytes));
            to_client.push(bytes);
        }
        server.process_delivery(conn, sequence, DeliveryStatus::Delivered);
        let mut w = BitWriter::with_capacity_bytes(1200);
        if client.write_packet(sequence, &mut w) != WriteResult::NoData {
            let bytes = w.finish().unwrap_or_default();
            let _ = server.read_packet(conn, &mut BitReader::new(&bytes));
            to_server.push(bytes);
        }
        client.process_delivery(sequence, DeliveryStatus::Delivered);
    }
    (to_client, to_server)
}
