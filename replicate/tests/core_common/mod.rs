//! Shared helpers of the `core_*` tests: hand-written `Replicated` types stamped out by
//! a `macro_rules!` (the `Door` pattern of `handwritten.rs`, until the derive lands), a
//! minimal sans-IO ack connection and a seeded lossy link, and a server/client pair.

#![allow(dead_code)]

use replicate::__private::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::connection::{DeliveryStatus, PacketSequence};
use replicate::object::ConnectionId;
use replicate::protocol::ProtocolRegistry;
use replicate::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
use std::collections::VecDeque;
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
                            condition: Condition::None,
                            init_only: false,
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

/// A seeded lossy link: loss, duplication, latency and jitter (which reorders).
#[derive(Debug)]
pub struct Link {
    pub rng: Rng,
    pub loss: f64,
    pub duplicate: f64,
    pub latency: Duration,
    pub jitter: Duration,
    queue: Vec<(Duration, u64, Vec<u8>)>,
    order: u64,
}

impl Link {
    pub fn new(seed: u64, loss: f64, duplicate: f64, latency: Duration, jitter: Duration) -> Self {
        Self {
            rng: Rng(seed),
            loss,
            duplicate,
            latency,
            jitter,
            queue: Vec::new(),
            order: 0,
        }
    }

    pub fn send(&mut self, now: Duration, bytes: Vec<u8>) {
        let copies = if self.rng.chance(self.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            if self.rng.chance(self.loss) {
                continue;
            }
            let j = self.rng.below(self.jitter.as_micros() as u64 + 1);
            let at = now + self.latency + Duration::from_micros(j);
            self.order += 1;
            self.queue.push((at, self.order, bytes.clone()));
        }
    }

    pub fn receive(&mut self, now: Duration) -> Vec<Vec<u8>> {
        self.queue.sort_by_key(|(at, o, _)| (*at, *o));
        let n = self
            .queue
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .count();
        self.queue.drain(..n).map(|(_, _, b)| b).collect()
    }

    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}

/// A minimal stand-in for the sans-IO connection (sequence, ack + 32-bit ack field,
/// reordered packets accepted inside the ack window, duplicates and older ones dropped, statuses in send order, loss by ack window or
/// timeout).
#[derive(Debug, Default)]
pub struct AckConnection {
    next_seq: u16,
    sent: VecDeque<(u16, Duration, Option<DeliveryStatus>)>,
    latest_received: Option<u16>,
    received_bits: u32,
    pub timeout: Duration,
}

impl AckConnection {
    pub fn new() -> Self {
        Self {
            timeout: Duration::from_millis(1000),
            ..Default::default()
        }
    }

    pub fn write_header(&mut self, now: Duration, w: &mut BitWriter) -> PacketSequence {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        w.write_bits(seq as u64, 16);
        if w.write_bool(self.latest_received.is_some()) {
            w.write_bits(self.latest_received.unwrap_or(0) as u64, 16);
            w.write_bits(self.received_bits as u64, 32);
        }
        self.sent.push_back((seq, now, None));
        PacketSequence(seq)
    }

    /// `None` for a stale or duplicate packet (dropped, not acked).
    pub fn read_header(&mut self, _now: Duration, r: &mut BitReader) -> Option<PacketSequence> {
        let seq = r.read_bits(16) as u16;
        let ack = if r.read_bool() {
            Some((r.read_bits(16) as u16, r.read_bits(32) as u32))
        } else {
            None
        };
        if r.check().is_err() {
            return None;
        }
        if let Some((ack, bits)) = ack {
            for entry in self.sent.iter_mut() {
                let d = ack.wrapping_sub(entry.0);
                if entry.2.is_none()
                    && (d == 0 || ((1..=32).contains(&d) && (bits >> (d - 1)) & 1 == 1))
                {
                    entry.2 = Some(DeliveryStatus::Delivered);
                }
            }
        }
        let seq_p = PacketSequence(seq);
        match self.latest_received {
            None => {
                self.latest_received = Some(seq);
                self.received_bits = 0;
                Some(seq_p)
            }
            Some(latest) if seq_p.is_newer_than(PacketSequence(latest)) => {
                let d = seq.wrapping_sub(latest) as u32;
                self.received_bits = if d > 32 {
                    0
                } else {
                    // bit n = latest - 1 - n received; the old latest becomes bit d - 1
                    ((self.received_bits as u64) << d | 1u64 << (d - 1)) as u32
                };
                self.latest_received = Some(seq);
                Some(seq_p)
            }
            Some(latest) => {
                // Older than the newest: accepted once inside the window (reordering).
                let d = latest.wrapping_sub(seq) as u32;
                if d == 0 || d > 32 || self.received_bits >> (d - 1) & 1 == 1 {
                    return None;
                }
                self.received_bits |= 1 << (d - 1);
                Some(seq_p)
            }
        }
    }

    pub fn poll_delivery(&mut self, now: Duration) -> Option<(PacketSequence, DeliveryStatus)> {
        let newest = self.next_seq.wrapping_sub(1);
        for entry in self.sent.iter_mut() {
            if entry.2.is_none()
                && (now.saturating_sub(entry.1) > self.timeout
                    || newest.wrapping_sub(entry.0) > 200)
            {
                entry.2 = Some(DeliveryStatus::Lost);
            }
        }
        match self.sent.front() {
            Some((seq, _, Some(status))) => {
                let r = (PacketSequence(*seq), *status);
                self.sent.pop_front();
                Some(r)
            }
            _ => None,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }
}

/// Server + client over two lossy links with ack connections.
pub struct Sim {
    pub server: ReplicationServer,
    pub client: ReplicationClient,
    pub conn: ConnectionId,
    pub server_conn: AckConnection,
    pub client_conn: AckConnection,
    pub down: Link,
    pub up: Link,
    pub now: Duration,
    pub mtu: usize,
    pub packets_per_tick: usize,
    pub stream_errors: usize,
}

impl Sim {
    pub fn new(seed: u64, loss: f64, dup: f64, latency: Duration, jitter: Duration) -> Self {
        let reg = registry();
        let config = ReplicationConfig::default();
        let mut server = ReplicationServer::new(reg.clone(), config.clone());
        let conn = server.add_connection();
        Self {
            server,
            client: ReplicationClient::new(reg, config),
            conn,
            server_conn: AckConnection::new(),
            client_conn: AckConnection::new(),
            down: Link::new(seed, loss, dup, latency, jitter),
            up: Link::new(seed ^ 0xABCD, loss, dup, latency, jitter),
            now: Duration::ZERO,
            mtu: 1200,
            packets_per_tick: 3,
            stream_errors: 0,
        }
    }

    /// One tick of `dt`: deliver arrived packets both ways, process acks, tick the
    /// server, write up to `packets_per_tick` packets, and one client (ack) packet.
    pub fn step(&mut self, dt: Duration) {
        self.now += dt;
        let now = self.now;
        for bytes in self.down.receive(now) {
            let mut r = BitReader::new(&bytes);
            if let Some(seq) = self.client_conn.read_header(now, &mut r)
                && self.client.read_packet(now, seq, &mut r).is_err()
            {
                self.stream_errors += 1;
            }
        }
        for bytes in self.up.receive(now) {
            let mut r = BitReader::new(&bytes);
            if self.server_conn.read_header(now, &mut r).is_some() {
                let _ = self.server.read_packet(self.conn, &mut r);
            }
        }
        while let Some((seq, status)) = self.server_conn.poll_delivery(now) {
            self.server.process_delivery(self.conn, seq, status);
        }
        while let Some((seq, status)) = self.client_conn.poll_delivery(now) {
            self.client.process_delivery(seq, status);
        }
        self.server.tick(now);
        for _ in 0..self.packets_per_tick {
            let mut w = BitWriter::with_capacity_bytes(self.mtu);
            let seq = self.server_conn.write_header(now, &mut w);
            let result = self.server.write_packet(self.conn, seq, &mut w);
            self.down.send(now, w.finish().expect("fits"));
            if result != replicate::stream::WriteResult::HasMoreData {
                break;
            }
        }
        let mut w = BitWriter::with_capacity_bytes(self.mtu);
        let seq = self.client_conn.write_header(now, &mut w);
        self.client.write_packet(seq, &mut w);
        self.up.send(now, w.finish().expect("fits"));
        self.client.update(now);
    }
}
