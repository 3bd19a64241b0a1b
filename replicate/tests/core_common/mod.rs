//! Shared helpers of the `core_*` tests: hand-written `Replicated` types stamped out by
//! a `macro_rules!` (the `Door` pattern of `handwritten.rs`, until the derive lands), a
//! packet-by-packet server/client pair ([`Manual`]) and a simulation over the real
//! connection and link simulator ([`Sim`]).

#![allow(dead_code)]

use replicate::__private::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::connection::{Connection, ConnectionConfig, DeliveryStatus, PacketSequence};
use replicate::link::{LinkConditioner, LinkSimulator};
use replicate::object::ConnectionId;
use replicate::protocol::ProtocolRegistry;
use replicate::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub fn fp<S: NetSerializer>(c: &S::Config) -> u64 {
    let mut h = StableHasher::new();
    S::fingerprint(c, &mut h);
    h.finish()
}

pub fn cfg<S: NetSerializer>() -> S::Config {
    <S::Config as NetSerializerConfig>::DEFAULT
}

/// Stamps out a replicated type whose members use their default serializer and config,
/// one change-mask bit each, plus a skipped `notifications` field that records every
/// applied change as `(member, old value)` (the notify hooks with old values).
macro_rules! replicated_type {
    ($name:ident, $state:ident, $wire:literal { $($field:ident : $ty:ty),* $(,)? }) => {
        #[derive(Debug, Default, Clone, PartialEq)]
        pub struct $name {
            $(pub $field: $ty,)*
            pub notifications: Vec<(&'static str, String)>,
        }

        #[derive(Debug, Default, Clone, PartialEq)]
        pub struct $state {
            $(pub $field: <<$ty as NetDefault>::Serializer as NetSerializer>::Quantized,)*
        }

        impl $name {
            pub fn quantize_counter() -> &'static AtomicUsize {
                static C: AtomicUsize = AtomicUsize::new(0);
                &C
            }
        }

        impl ReplicatedState for $state {
            fn descriptor() -> &'static StateDescriptor {
                static D: OnceLock<StateDescriptor> = OnceLock::new();
                D.get_or_init(|| {
                    let mut members = Vec::new();
                    let mut offset = 0u32;
                    $({
                        type S = <$ty as NetDefault>::Serializer;
                        let c = cfg::<S>();
                        members.push(MemberDescriptor {
                            name: stringify!($field),
                            serializer: <S as NetSerializer>::NAME,
                            change_mask_offset: offset,
                            change_mask_bits: 1,
                            condition: member_condition($wire, stringify!($field)).0,
                            init_only: member_condition($wire, stringify!($field)).1,
                            has_notify: true,
                            group: None,
                            has_object_references: <S as NetSerializer>::HAS_OBJECT_REFERENCES,
                            has_dynamic_state: <S as NetSerializer>::HAS_DYNAMIC_STATE,
                            max_bits: <S as NetSerializer>::max_bits(&c),
                            fingerprint: fp::<S>(&c),
                        });
                        offset += 1;
                    })*
                    let _ = offset;
                    StateDescriptor::new($wire, members, true)
                })
            }
            #[allow(unused_assignments, unused_mut)]
            fn diff(&self, prev: &Self, mask: &mut ChangeMask, offset: u32) -> bool {
                let mut any = false;
                let mut bit = offset;
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    any |= S::diff(&cfg::<S>(), &self.$field, &prev.$field, mask, bit);
                    bit += 1;
                })*
                any
            }
            #[allow(unused_assignments, unused_mut)]
            fn serialize(&self, mask: &ChangeMask, offset: u32, w: &mut BitWriter) {
                let mut bit = offset;
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    if mask.get(bit) {
                        S::serialize_masked(&cfg::<S>(), &self.$field, mask, bit, w);
                    }
                    bit += 1;
                })*
            }
            #[allow(unused_assignments, unused_mut)]
            fn deserialize(&mut self, mask: &ChangeMask, offset: u32, r: &mut BitReader) -> Result<()> {
                let mut bit = offset;
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    if mask.get(bit) {
                        S::deserialize_masked(&cfg::<S>(), &mut self.$field, mask, bit, r)?;
                    }
                    bit += 1;
                })*
                Ok(())
            }
            #[allow(unused_assignments, unused_mut)]
            fn serialize_delta(&self, base: &Self, mask: &ChangeMask, offset: u32, w: &mut BitWriter) {
                let mut bit = offset;
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    if mask.get(bit) {
                        S::serialize_masked_delta(&cfg::<S>(), &self.$field, &base.$field, mask, bit, w);
                    }
                    bit += 1;
                })*
            }
            #[allow(unused_assignments, unused_mut)]
            fn deserialize_delta(&mut self, base: &Self, mask: &ChangeMask, offset: u32, r: &mut BitReader) -> Result<()> {
                let mut bit = offset;
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    if mask.get(bit) {
                        S::deserialize_masked_delta(&cfg::<S>(), &mut self.$field, &base.$field, mask, bit, r)?;
                    }
                    bit += 1;
                })*
                Ok(())
            }
            fn validate(&self, _mask: &ChangeMask, _offset: u32) -> Result<()> {
                Ok(())
            }
            fn collect_references(&self, out: &mut Vec<NetRefHandle>) {
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    S::collect_references(&cfg::<S>(), &self.$field, out);
                })*
            }
        }

        impl Replicated for $name {
            type State = $state;
            fn quantize(&self, out: &mut $state) {
                Self::quantize_counter().fetch_add(1, Ordering::Relaxed);
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    out.$field = S::quantize(&cfg::<S>(), &self.$field);
                })*
            }
            #[allow(unused_assignments, unused_mut)]
            fn apply(&mut self, s: &$state, mask: &ChangeMask) {
                let mut bit = 0u32;
                $({
                    type S = <$ty as NetDefault>::Serializer;
                    if mask.get(bit) {
                        let v = S::dequantize(&cfg::<S>(), &s.$field);
                        if v != self.$field {
                            let old = std::mem::replace(&mut self.$field, v);
                            self.notifications.push((stringify!($field), format!("{old:?}")));
                        }
                    }
                    bit += 1;
                })*
            }
            fn from_state(s: &$state) -> Self {
                $name {
                    $($field: {
                        type S = <$ty as NetDefault>::Serializer;
                        S::dequantize(&cfg::<S>(), &s.$field)
                    },)*
                    notifications: Vec::new(),
                }
            }
        }

        impl ValidateConfigs for $name {
            fn validate_configs() -> std::result::Result<(), String> {
                Ok(())
            }
        }
    };
}

replicated_type!(Pawn, PawnState, "Pawn" { x: i32, y: i32, hp: u8, alive: bool });
replicated_type!(Crate, CrateState, "Crate" { kind: u16, open: bool, amount: u32 });
replicated_type!(Tag, TagState, "Tag" { value: u64, target: NetRefHandle });
replicated_type!(Soldier, SoldierState, "Soldier" { hp: u8, captain: NetRefHandle });
replicated_type!(Captain, CaptainState, "Captain" { rank: u8 });
replicated_type!(Counted, CountedState, "Counted" { n: u32 });
replicated_type!(Big, BigState, "Big" { a: u64, b: u64, c: u64, d: u64, e: u64, f: u64 });

replicated_type!(Secret, SecretState, "Secret" { public: u8, mine: u8, theirs: u8, initial: u8 });
replicated_type!(Flag, FlagState, "Flag" { up: bool });
replicated_type!(Squad, SquadState, "Squad" { a: NetRefHandle, b: NetRefHandle, n: u8 });

/// Per-member condition overrides of the test types: (condition, init only).
pub fn member_condition(ty: &str, field: &str) -> (Condition, bool) {
    match (ty, field) {
        ("Secret", "mine") => (Condition::OwnerOnly, false),
        ("Secret", "theirs") => (Condition::SkipOwner, false),
        ("Secret", "initial") => (Condition::None, true),
        _ => (Condition::None, false),
    }
}

pub fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(
        ProtocolRegistry::from_registrations([
            Registration::of::<Pawn>(),
            Registration::of::<Crate>(),
            Registration::of::<Tag>(),
            Registration::of::<Soldier>(),
            Registration::of::<Captain>(),
            Registration::of::<Counted>(),
            Registration::of::<Big>(),
            Registration::of::<Secret>(),
            Registration::of::<Flag>(),
            Registration::of::<Squad>(),
        ])
        .expect("test registry"),
    )
}

/// A server with one connection and a client, driven packet by packet by the test
/// (no connection, no link): the test decides which packets arrive and what the
/// sender is told.
pub struct Manual {
    pub server: ReplicationServer,
    pub client: ReplicationClient,
    pub conn: ConnectionId,
    pub seq: u16,
    pub now: Duration,
    pub mtu: usize,
}

impl Manual {
    pub fn new() -> Self {
        Self::with_config(ReplicationConfig::default())
    }

    pub fn with_config(config: ReplicationConfig) -> Self {
        let reg = registry();
        let mut server = ReplicationServer::new(reg.clone(), config.clone());
        let conn = server.add_connection();
        Self {
            server,
            client: ReplicationClient::new(reg, config),
            conn,
            seq: 100,
            now: Duration::ZERO,
            mtu: 1200,
        }
    }

    /// Ticks the server and writes one packet; returns its sequence and bytes.
    pub fn tick_and_write(&mut self) -> (PacketSequence, Vec<u8>) {
        self.now += Duration::from_millis(16);
        self.server.tick(self.now);
        self.write()
    }

    /// Writes one packet without ticking: a 16-bit sequence (standing in for the
    /// connection header), then the streams, within `mtu` bytes of payload.
    pub fn write(&mut self) -> (PacketSequence, Vec<u8>) {
        let seq = PacketSequence(self.seq);
        self.seq = self.seq.wrapping_add(1);
        let mut w = BitWriter::with_capacity_bits(16 + self.mtu * 8);
        w.write_bits(seq.0 as u64, 16);
        self.server.write_packet(self.conn, seq, &mut w);
        (seq, w.finish().expect("packet fits"))
    }

    pub fn deliver_to_client(&mut self, bytes: &[u8]) {
        read_manual_packet(&mut self.client, self.now, bytes).expect("well-formed packet");
    }

    pub fn ack(&mut self, seq: PacketSequence, status: DeliveryStatus) {
        self.server.process_delivery(self.conn, seq, status);
    }

    /// Tick, write, deliver and ack one packet.
    pub fn round_trip(&mut self) -> PacketSequence {
        let (seq, bytes) = self.tick_and_write();
        self.deliver_to_client(&bytes);
        self.ack(seq, DeliveryStatus::Delivered);
        seq
    }
}

/// Reads a packet made by [`Manual::write`] (16-bit sequence, then the streams).
pub fn read_manual_packet(
    client: &mut ReplicationClient,
    now: Duration,
    bytes: &[u8],
) -> Result<(), replicate::stream::StreamError> {
    let mut r = BitReader::new(bytes);
    let seq = PacketSequence(r.read_bits(16) as u16);
    client.read_packet(now, seq, &mut r)
}

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

/// One client of a [`Sim`]: its connection on both ends and its two links.
pub struct Peer {
    pub conn: ConnectionId,
    pub client: ReplicationClient,
    pub server_conn: Connection,
    pub client_conn: Connection,
    pub down: LinkSimulator,
    pub up: LinkSimulator,
    pub stream_errors: usize,
    pub header_errors: usize,
}

/// A server and clients over the crate's sans-IO [`Connection`]s and seeded
/// [`LinkSimulator`]s (loss, duplication, jitter and reordering).
pub struct Sim {
    pub server: ReplicationServer,
    pub peers: Vec<Peer>,
    pub now: Duration,
    pub mtu: usize,
    pub packets_per_tick: usize,
    seed: u64,
    conditioner: LinkConditioner,
}

impl Sim {
    /// A server with one client.
    pub fn new(seed: u64, conditioner: LinkConditioner) -> Self {
        let mut sim = Self {
            server: ReplicationServer::new(registry(), ReplicationConfig::default()),
            peers: Vec::new(),
            now: Duration::ZERO,
            mtu: 1200,
            packets_per_tick: 3,
            seed,
            conditioner,
        };
        sim.add_peer();
        sim
    }

    /// Connects another client; returns its index in `peers`.
    pub fn add_peer(&mut self) -> usize {
        let n = self.peers.len() as u64;
        let seed = self.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9));
        let conn = self.server.add_connection();
        self.peers.push(Peer {
            conn,
            client: ReplicationClient::new(registry(), ReplicationConfig::default()),
            server_conn: Connection::new(ConnectionConfig::default()),
            client_conn: Connection::new(ConnectionConfig::default()),
            down: LinkSimulator::new(self.conditioner.clone(), seed),
            up: LinkSimulator::new(self.conditioner.clone(), seed ^ 0xABCD),
            stream_errors: 0,
            header_errors: 0,
        });
        self.peers.len() - 1
    }

    /// Replaces every link's conditions (for example to let the links quiet).
    pub fn set_conditioner(&mut self, c: LinkConditioner) {
        for p in &mut self.peers {
            p.down.set_conditioner(c.clone());
            p.up.set_conditioner(c.clone());
        }
    }

    /// One tick of `dt`: deliver arrived packets both ways, process delivery
    /// notifications, tick the server once, then for every client write up to
    /// `packets_per_tick` packets and one client packet (which carries the acks).
    pub fn step(&mut self, dt: Duration) {
        self.now += dt;
        let now = self.now;
        for p in &mut self.peers {
            let arrived: Vec<Vec<u8>> = p.down.drain(now).collect();
            for bytes in arrived {
                let mut r = BitReader::new(&bytes);
                match p.client_conn.read_header(now, &mut r) {
                    Ok(seq) => {
                        if p.client.read_packet(now, seq, &mut r).is_err() {
                            p.stream_errors += 1;
                        }
                    }
                    Err(e) if e.is_benign() => {}
                    Err(_) => p.header_errors += 1,
                }
            }
            let arrived: Vec<Vec<u8>> = p.up.drain(now).collect();
            for bytes in arrived {
                let mut r = BitReader::new(&bytes);
                match p.server_conn.read_header(now, &mut r) {
                    Ok(_) => {
                        if self.server.read_packet(p.conn, &mut r).is_err() {
                            p.stream_errors += 1;
                        }
                    }
                    Err(e) if e.is_benign() => {}
                    Err(_) => p.header_errors += 1,
                }
            }
            p.server_conn.update(now);
            while let Some((seq, status)) = p.server_conn.poll_delivery() {
                self.server.process_delivery(p.conn, seq, status);
            }
            p.client_conn.update(now);
            while let Some((seq, status)) = p.client_conn.poll_delivery() {
                p.client.process_delivery(seq, status);
            }
        }
        self.server.tick(now);
        for p in &mut self.peers {
            for _ in 0..self.packets_per_tick {
                let mut w = BitWriter::with_capacity_bytes(self.mtu);
                let seq = p.server_conn.write_header(now, &mut w);
                let result = self.server.write_packet(p.conn, seq, &mut w);
                p.down.send(now, &w.finish().expect("fits"));
                if result != replicate::stream::WriteResult::HasMoreData {
                    break;
                }
            }
            let mut w = BitWriter::with_capacity_bytes(self.mtu);
            let seq = p.client_conn.write_header(now, &mut w);
            p.client.write_packet(seq, &mut w);
            p.up.send(now, &w.finish().expect("fits"));
            p.client.update(now);
        }
    }
}
