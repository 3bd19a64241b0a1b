//! The `core_*` and `delta_*` suites: hand-written `Replicated` types stamped out by a
//! `macro_rules!` (the `Door` pattern of `handwritten.rs`), their registry and [`setup`]
//! for a [`Sim`](super::Sim), and a packet-by-packet server/client pair ([`Manual`]).

use super::{Setup, read_manual_packet, write_manual_packet};
use replicate::__private::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::object::ConnectionId;
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::{
    ReplicationClient, ReplicationConfig, ReplicationEvent, ReplicationServer,
};
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

/// A [`Sim`](super::Sim) of these types: one client, 3 server packets per tick.
pub fn setup() -> Setup {
    Setup::new(registry())
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
        let (_, bytes) = write_manual_packet(&mut self.server, self.conn, seq, self.mtu);
        (seq, bytes)
    }

    pub fn deliver_to_client(&mut self, bytes: &[u8]) {
        read_manual_packet(&mut self.client, self.now, bytes).expect("well-formed packet");
    }

    /// Reports packet `seq`'s fate, then reaches the connection mutably: a delivered
    /// update's baselines are promoted when the connection is next reached, and the
    /// tests read them through the read-only [`ReplicationServer::writer`].
    pub fn ack(&mut self, seq: PacketSequence, status: DeliveryStatus) {
        self.server.process_delivery(self.conn, seq, status);
        self.server.writer_mut(self.conn);
    }

    /// Tick, write, deliver and ack one packet.
    pub fn round_trip(&mut self) -> PacketSequence {
        let (seq, bytes) = self.tick_and_write();
        self.deliver_to_client(&bytes);
        self.ack(seq, DeliveryStatus::Delivered);
        seq
    }

    /// Reads a hand-made packet (streams only, see [`packet_start`]) on the client with
    /// the next sequence.
    pub fn read_raw(
        &mut self,
        w: BitWriter,
    ) -> Result<(), replicate::internals::stream::StreamError> {
        let bytes = w.finish().expect("hand-made packet");
        let seq = PacketSequence(self.seq);
        self.seq += 1;
        self.client
            .read_packet(self.now, seq, &mut BitReader::new(&bytes))
    }
}

// ---- hand-made packets ----

/// `[streams - 1: 5 = 3][mask: 4 = replication only]` (replication, tokens, huge
/// objects, messages), then the destroy list.
pub fn packet_start(w: &mut BitWriter, destroys: &[NetRefHandle]) {
    w.write_bits(3, 5);
    w.write_bits(0b0001, 4);
    for d in destroys {
        w.write_bool(true);
        d.write(w);
    }
    w.write_bool(false);
    // The objects section's index width: hand-made batches name their objects by
    // absolute index (see `batch`).
    w.write_bits(u64::from(HAND_MADE_INDEX_WIDTH), 5);
}

/// The index width hand-made packets announce.
const HAND_MADE_INDEX_WIDTH: u32 = 16;

/// Ends a hand-made packet's objects section (the end marker: the largest index).
pub fn packet_end(w: &mut BitWriter) {
    w.write_bits(0b11, 2);
    w.write_bits((1 << HAND_MADE_INDEX_WIDTH) - 1, HAND_MADE_INDEX_WIDTH);
}

/// One long-form batch for `handle`, named by the object index `handle.counter()`: the
/// index, the form bit and size prefix
/// ([`replicate::internals::replication::write_batch_size`]), then the body `body`
/// writes: `[1: long form][exports][creating][protocol][owner]...`. The form bit moves
/// in front of the size prefix and a creation's handle is spliced in after its creation
/// flag, where the wire carries them.
pub fn batch(w: &mut BitWriter, handle: NetRefHandle, body: impl FnOnce(&mut BitWriter)) {
    batch_at(w, handle.counter() as u32, handle, body)
}

/// [`batch`] for an object the writer named `index` (a server-created object: see
/// [`local_index`]).
pub fn batch_at(
    w: &mut BitWriter,
    index: u32,
    handle: NetRefHandle,
    body: impl FnOnce(&mut BitWriter),
) {
    w.write_bits(0b11, 2); // absolute index
    w.write_bits(u64::from(index), HAND_MADE_INDEX_WIDTH);
    let mut b = BitWriter::with_capacity_bits(1 << 16);
    body(&mut b);
    let len = b.position();
    let bytes = b.finish().unwrap();
    let mut r = BitReader::with_bit_len(&bytes, len);
    assert!(r.read_bool(), "hand-made batches are long forms");
    let exports = r.read_bool();
    let creating = r.read_bool();
    let mut framed = BitWriter::with_capacity_bits(1 << 16);
    framed.write_bool(exports);
    framed.write_bool(creating);
    if creating {
        handle.write(&mut framed);
    }
    while r.bits_left() > 0 {
        let n = r.bits_left().min(32) as u32;
        framed.write_bits(r.read_bits(n), n);
    }
    w.write_bool(true); // long form
    assert!(replicate::internals::replication::write_batch_size(
        w,
        framed.position()
    ));
    w.write_from(&framed);
}

/// The connection-local index `server`'s writer for `conn` names `handle` by.
pub fn local_index(server: &ReplicationServer, conn: ConnectionId, handle: NetRefHandle) -> u32 {
    let index = server.objects().index_of(handle).unwrap();
    let writer = server.writer(conn).unwrap();
    writer.info(index).and_then(|i| i.local_index()).unwrap()
}

/// The handles of the events `pick` selects, in order.
fn handles_of(
    events: &[ReplicationEvent],
    pick: impl Fn(&ReplicationEvent) -> Option<NetRefHandle>,
) -> Vec<NetRefHandle> {
    events.iter().filter_map(pick).collect()
}

/// The objects spawned, in event order.
pub fn spawned(events: &[ReplicationEvent]) -> Vec<NetRefHandle> {
    handles_of(events, |e| match e {
        ReplicationEvent::Spawned { handle, .. } => Some(*handle),
        _ => None,
    })
}

/// The objects whose members changed, in event order.
pub fn changed(events: &[ReplicationEvent]) -> Vec<NetRefHandle> {
    handles_of(events, |e| match e {
        ReplicationEvent::MembersChanged { handle, .. } => Some(*handle),
        _ => None,
    })
}

/// The objects destroyed, in event order.
pub fn destroyed(events: &[ReplicationEvent]) -> Vec<NetRefHandle> {
    handles_of(events, |e| match e {
        ReplicationEvent::Destroyed { handle } => Some(*handle),
        _ => None,
    })
}
