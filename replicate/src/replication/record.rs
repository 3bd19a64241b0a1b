//! Per-connection bookkeeping of the replication writer: the 8-byte per-object send
//! state ([`ReplicationInfo`]) with its lifecycle state machine
//! ([`ReplicatedObjectState`]), the per-packet records of what was sent
//! ([`PacketRecord`]), and a growable bit array ([`BitArray`]) for the dirty, scope and
//! subobject sets.
//!
//! This module owns data layout and state validation only; the decisions (what to send,
//! what a loss means) live in [`super::writer`].

use crate::state::ChangeMask;

/// The lifecycle of one object as seen by one connection's writer (Iris's
/// `EReplicatedObjectState`, the same 14 values in the same order).
///
/// Allowed transitions are Iris's union of edges plus the few this implementation
/// needs and documents in [`ReplicatedObjectState::can_transition_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReplicatedObjectState {
    /// Not replicated to this connection.
    Invalid = 0,
    /// Reserved: an attachment targets an object that is not in scope.
    AttachmentToObjectNotInScope,
    /// The creation does not fit in an empty packet; waiting for the huge-object path.
    HugeObject,
    /// The creation must be written.
    PendingCreate,
    /// The creation was written; waiting for its packet's ack.
    WaitOnCreateConfirmation,
    /// Created on the remote; normal replication.
    Created,
    /// About to leave (destroy or scope loss); outstanding state is being flushed.
    WaitOnFlush,
    /// A tear-off (final state + end of replication, client keeps the object) must be
    /// written.
    PendingTearOff,
    /// A subobject destroyed on its own while its owner lives.
    SubObjectPendingDestroy,
    /// The object came back into scope while its destroy was in flight.
    CancelPendingDestroy,
    /// A destroy must be written.
    PendingDestroy,
    /// A destroy (or tear-off) was written; waiting for its packet's ack.
    WaitOnDestroyConfirmation,
    /// The remote confirmed the destroy.
    Destroyed,
    /// Terminal: never replicated again.
    PermanentlyDestroyed,
}

impl ReplicatedObjectState {
    /// All states in declaration order.
    pub const ALL: [ReplicatedObjectState; 14] = [
        Self::Invalid,
        Self::AttachmentToObjectNotInScope,
        Self::HugeObject,
        Self::PendingCreate,
        Self::WaitOnCreateConfirmation,
        Self::Created,
        Self::WaitOnFlush,
        Self::PendingTearOff,
        Self::SubObjectPendingDestroy,
        Self::CancelPendingDestroy,
        Self::PendingDestroy,
        Self::WaitOnDestroyConfirmation,
        Self::Destroyed,
        Self::PermanentlyDestroyed,
    ];

    fn from_bits(bits: u64) -> Self {
        Self::ALL
            .get(bits as usize)
            .copied()
            .unwrap_or(Self::Invalid)
    }

    /// Whether the object is in a creation state (Iris's `IsInitialState`).
    pub const fn is_initial(self) -> bool {
        matches!(self, Self::PendingCreate | Self::WaitOnCreateConfirmation)
    }

    /// Whether `self -> to` is a legal transition.
    ///
    /// Iris's union of edges:
    /// `Invalid→PendingCreate`, `WaitOnCreateConfirmation→PendingCreate`,
    /// `PendingCreate→WaitOnCreateConfirmation`, `CancelPendingDestroy→WaitOnCreateConfirmation`,
    /// `PendingCreate→Created`, `WaitOnCreateConfirmation→Created`,
    /// `CancelPendingDestroy→Created`, `WaitOnFlush→Created`, `Created→WaitOnFlush`,
    /// `Created→PendingTearOff`, `Created→SubObjectPendingDestroy`,
    /// `WaitOnFlush→PendingDestroy`, `PendingTearOff→PendingDestroy`,
    /// `SubObjectPendingDestroy→PendingDestroy`, `WaitOnFlush→PendingTearOff`,
    /// `PendingDestroy→WaitOnDestroyConfirmation`, `WaitOnDestroyConfirmation→Destroyed`,
    /// `PendingTearOff→Destroyed`, `WaitOnDestroyConfirmation→CancelPendingDestroy`,
    /// `Destroyed→PermanentlyDestroyed`, `Destroyed→Invalid`.
    ///
    /// Added here (each with the situation that needs it):
    /// - `PendingCreate→Invalid`: destroyed or out of scope before any creation was sent;
    /// - `PendingCreate→PendingDestroy|PendingTearOff`: destroyed or torn off after a
    ///   creation was sent (and lost: another may still be in flight);
    /// - `PendingCreate|WaitOnCreateConfirmation→HugeObject`, `HugeObject→PendingCreate|Invalid|PendingDestroy`:
    ///   a creation too large for a packet;
    /// - `WaitOnCreateConfirmation→PendingDestroy|PendingTearOff`: destroyed or torn off
    ///   while the creation is in flight;
    /// - `PendingTearOff→WaitOnDestroyConfirmation`: the tear-off batch was written;
    /// - `PendingTearOff→HugeObject`, `HugeObject→Destroyed`: a tear-off too large for a
    ///   packet travels as a huge object; its delivery ends the replication;
    /// - `WaitOnDestroyConfirmation→PendingDestroy|PendingTearOff`: the destroy (tear-off)
    ///   packet was lost, write it again;
    /// - `PendingDestroy→CancelPendingDestroy`: back in scope before the destroy was sent;
    /// - `CancelPendingDestroy→PendingCreate`: the destroy's fate is known, re-create;
    /// - `CancelPendingDestroy→PendingDestroy|WaitOnDestroyConfirmation`: destroyed on the
    ///   server while the cancelled destroy was in flight.
    pub fn can_transition_to(self, to: Self) -> bool {
        use ReplicatedObjectState::*;
        matches!(
            (self, to),
            (Invalid, PendingCreate)
                | (WaitOnCreateConfirmation, PendingCreate)
                | (PendingCreate, WaitOnCreateConfirmation)
                | (CancelPendingDestroy, WaitOnCreateConfirmation)
                | (PendingCreate, Created)
                | (WaitOnCreateConfirmation, Created)
                | (CancelPendingDestroy, Created)
                | (WaitOnFlush, Created)
                | (Created, WaitOnFlush)
                | (Created, PendingTearOff)
                | (Created, SubObjectPendingDestroy)
                | (WaitOnFlush, PendingDestroy)
                | (PendingTearOff, PendingDestroy)
                | (SubObjectPendingDestroy, PendingDestroy)
                | (WaitOnFlush, PendingTearOff)
                | (PendingDestroy, WaitOnDestroyConfirmation)
                | (WaitOnDestroyConfirmation, Destroyed)
                | (PendingTearOff, Destroyed)
                | (WaitOnDestroyConfirmation, CancelPendingDestroy)
                | (Destroyed, PermanentlyDestroyed)
                | (Destroyed, Invalid)
                // additions, see above
                | (PendingCreate, Invalid)
                | (PendingCreate, PendingDestroy)
                | (PendingCreate, PendingTearOff)
                | (HugeObject, PendingDestroy)
                | (PendingCreate, HugeObject)
                | (WaitOnCreateConfirmation, HugeObject)
                | (HugeObject, PendingCreate)
                | (HugeObject, Created)
                | (Created, HugeObject)
                | (HugeObject, Invalid)
                | (WaitOnCreateConfirmation, PendingDestroy)
                | (WaitOnCreateConfirmation, PendingTearOff)
                | (PendingTearOff, WaitOnDestroyConfirmation)
                | (PendingTearOff, HugeObject)
                | (HugeObject, Destroyed)
                | (WaitOnDestroyConfirmation, PendingDestroy)
                | (WaitOnDestroyConfirmation, PendingTearOff)
                | (PendingDestroy, CancelPendingDestroy)
                | (CancelPendingDestroy, PendingCreate)
                | (CancelPendingDestroy, PendingDestroy)
                | (CancelPendingDestroy, WaitOnDestroyConfirmation)
        )
    }
}

/// Where the change masks wider than [`INLINE_MASK_BITS`] live: one writer's pool of
/// words. A mask takes a header word (its width in words) and its words, at an offset
/// the [`ReplicationInfo`] keeps; released masks are reused by width.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MaskPool {
    words: Vec<u64>,
    /// Released offsets, by width in words.
    free: Vec<(u32, Vec<u32>)>,
    in_use: usize,
}

/// The most words a pool holds: its offsets fit the bits an info has left.
const POOL_WORDS: usize = 1 << INLINE_MASK_BITS;

impl MaskPool {
    /// A cleared mask of `words` words, or `None` when the pool is full.
    fn alloc(&mut self, words: u32) -> Option<u32> {
        let reused = self
            .free
            .iter_mut()
            .find(|(w, _)| *w == words)
            .and_then(|(_, free)| free.pop());
        let offset = match reused {
            Some(offset) => {
                self.get_mut(offset).fill(0);
                offset
            }
            None => {
                let offset = self.words.len();
                if offset + 1 + words as usize > POOL_WORDS {
                    return None;
                }
                self.words.push(u64::from(words));
                self.words.resize(offset + 1 + words as usize, 0);
                offset as u32
            }
        };
        self.in_use += 1;
        Some(offset)
    }

    fn release(&mut self, offset: u32) {
        let words = self.words.get(offset as usize).map_or(0, |w| *w as u32);
        match self.free.iter_mut().find(|(w, _)| *w == words) {
            Some((_, free)) => free.push(offset),
            None => self.free.push((words, vec![offset])),
        }
        self.in_use -= 1;
    }

    fn range(&self, offset: u32) -> std::ops::Range<usize> {
        let start = offset as usize + 1;
        let words = self.words.get(offset as usize).map_or(0, |w| *w as usize);
        start..(start + words).min(self.words.len())
    }

    fn get(&self, offset: u32) -> &[u64] {
        &self.words[self.range(offset)]
    }

    fn get_mut(&mut self, offset: u32) -> &mut [u64] {
        let range = self.range(offset);
        &mut self.words[range]
    }

    /// Number of pooled masks in use.
    pub fn in_use(&self) -> usize {
        self.in_use
    }
}

// Bit layout of `ReplicationInfo::bits`.
const STATE_SHIFT: u32 = 0; // 5 bits
const IS_SUBOBJECT: u64 = 1 << 5;
const HAS_DIRTY_MASK: u64 = 1 << 6;
const CREATION_CONFIRMED: u64 = 1 << 7;
const TEAR_OFF: u64 = 1 << 8;
const CREATION_RESENT: u64 = 1 << 9;
const HAS_DIRTY_SUBOBJECTS: u64 = 1 << 10;
const CREATION_SENT: u64 = 1 << 11;
const MASK_POOLED: u64 = 1 << 12;
const TAGS_DIRTY: u64 = 1 << 13;
const LOCAL_SHIFT: u32 = 14; // 24 bits: the connection-local object index + 1 (0: none)
const LOCAL_MASK: u64 = (1 << 24) - 1;
const MASK_SHIFT: u32 = LOCAL_SHIFT + 24; // the rest: the inline mask or the pool offset

/// The widest change mask a [`ReplicationInfo`] holds inline; a wider one lives in the
/// writer's [`MaskPool`].
pub const INLINE_MASK_BITS: u32 = 64 - MASK_SHIFT;
const INLINE_MASK: u64 = (1 << INLINE_MASK_BITS) - 1;

/// "No baseline" where a baseline slot is stored in a byte (= the slot count,
/// [`MAX_BASELINE_COUNT`](super::MAX_BASELINE_COUNT)).
pub const INVALID_BASELINE_INDEX: u8 = 1 << super::wire::BASELINE_SLOT_BITS;

/// One object's send state for one connection (Iris's `FReplicationInfo`) in one
/// 64-bit word — the lifecycle state, flags, the connection-local index, and the
/// accumulated change mask, inline up to [`INLINE_MASK_BITS`] bits or else the offset
/// of its words in a [`MaskPool`] — and beside it the scheduling priority the object
/// accumulates while it has something to send. The mask's width is the object type's
/// (its descriptor's `change_mask_bits`), which the caller passes.
///
/// Twelve bytes: a pair's state and priority are read together for every dirty
/// object of every connection, so they share a cache line.
///
/// ```
/// use replicate::internals::replication::ReplicationInfo;
/// assert_eq!(std::mem::size_of::<ReplicationInfo>(), 12);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicationInfo {
    /// The send state word, in halves so that the priority packs beside it.
    word: [u32; 2],
    /// The priority's bits (compared exactly).
    priority: u32,
}

impl ReplicationInfo {
    #[inline(always)]
    fn bits(&self) -> u64 {
        u64::from(self.word[0]) | u64::from(self.word[1]) << 32
    }

    #[inline(always)]
    fn set_bits(&mut self, bits: u64) {
        self.word = [bits as u32, (bits >> 32) as u32];
    }

    /// The scheduling priority accumulated while the object has something to send.
    #[inline]
    pub fn priority(&self) -> f32 {
        f32::from_bits(self.priority)
    }

    #[inline]
    pub(crate) fn set_priority(&mut self, priority: f32) {
        self.priority = priority.to_bits();
    }

    /// Adds `gain` to the accumulated priority.
    #[inline]
    pub(crate) fn add_priority(&mut self, gain: f32) {
        self.set_priority(self.priority() + gain);
    }

    /// The lifecycle state.
    #[inline]
    pub fn state(&self) -> ReplicatedObjectState {
        ReplicatedObjectState::from_bits((self.bits() >> STATE_SHIFT) & 0x1F)
    }

    /// Sets the state, validating the transition: an illegal one is a debug assertion
    /// and an error log (the state is stored regardless, like Iris).
    pub fn set_state(&mut self, to: ReplicatedObjectState) {
        let from = self.state();
        if from != to && !from.can_transition_to(to) {
            tracing::error!("replication writer: illegal state transition {from:?} -> {to:?}");
            debug_assert!(false, "illegal state transition {from:?} -> {to:?}");
        }
        self.force_state(to);
    }

    pub(crate) fn force_invalid(&mut self) {
        self.force_state(ReplicatedObjectState::Invalid);
    }

    fn force_state(&mut self, to: ReplicatedObjectState) {
        self.set_bits((self.bits() & !(0x1F << STATE_SHIFT)) | ((to as u64) << STATE_SHIFT));
    }

    fn flag(&self, f: u64) -> bool {
        self.bits() & f != 0
    }

    fn set_flag(&mut self, f: u64, on: bool) {
        if on {
            self.set_bits(self.bits() | f);
        } else {
            self.set_bits(self.bits() & !f);
        }
    }

    /// Whether the object is a subobject (written with its owner).
    pub fn is_subobject(&self) -> bool {
        self.flag(IS_SUBOBJECT)
    }
    /// Whether the change mask has any bit set.
    pub fn has_dirty_mask(&self) -> bool {
        self.flag(HAS_DIRTY_MASK)
    }
    /// Whether the remote confirmed the creation.
    pub fn is_creation_confirmed(&self) -> bool {
        self.flag(CREATION_CONFIRMED)
    }
    /// Whether the object is being torn off.
    pub fn is_tear_off(&self) -> bool {
        self.flag(TEAR_OFF)
    }
    /// Whether one of the object's subobjects has something to send.
    pub fn has_dirty_subobjects(&self) -> bool {
        self.flag(HAS_DIRTY_SUBOBJECTS)
    }
    /// Whether the object's tags must be sent.
    pub fn has_dirty_tags(&self) -> bool {
        self.flag(TAGS_DIRTY)
    }
    /// Whether a creation was ever written (it may be in flight or delivered).
    pub fn is_creation_sent(&self) -> bool {
        self.flag(CREATION_SENT)
    }

    pub(crate) fn set_subobject(&mut self, on: bool) {
        self.set_flag(IS_SUBOBJECT, on)
    }
    pub(crate) fn set_creation_confirmed(&mut self, on: bool) {
        self.set_flag(CREATION_CONFIRMED, on)
    }
    pub(crate) fn set_tear_off(&mut self, on: bool) {
        self.set_flag(TEAR_OFF, on)
    }
    pub(crate) fn set_dirty_subobjects(&mut self, on: bool) {
        self.set_flag(HAS_DIRTY_SUBOBJECTS, on)
    }
    pub(crate) fn set_tags_dirty(&mut self, on: bool) {
        self.set_flag(TAGS_DIRTY, on)
    }
    /// Whether the creation in flight is not the first: an earlier one may have
    /// arrived though the writer counted it lost.
    pub fn is_creation_resent(&self) -> bool {
        self.flag(CREATION_RESENT)
    }
    pub(crate) fn set_creation_resent(&mut self, on: bool) {
        self.set_flag(CREATION_RESENT, on)
    }
    pub(crate) fn set_creation_sent(&mut self, on: bool) {
        self.set_flag(CREATION_SENT, on)
    }
    /// The connection-local index the object is named by on the wire, once assigned.
    pub fn local_index(&self) -> Option<u32> {
        let stored = (self.bits() >> LOCAL_SHIFT) & LOCAL_MASK;
        (stored != 0).then(|| stored as u32 - 1)
    }

    pub(crate) fn set_local_index(&mut self, index: Option<u32>) {
        let stored = index.map_or(0, |i| u64::from(i) + 1) & LOCAL_MASK;
        self.set_bits((self.bits() & !(LOCAL_MASK << LOCAL_SHIFT)) | stored << LOCAL_SHIFT);
    }

    /// The mask field: the inline mask, or the pool offset.
    fn mask_field(&self) -> u64 {
        self.bits() >> MASK_SHIFT
    }

    fn set_mask_field(&mut self, value: u64) {
        self.set_bits(
            (self.bits() & !(INLINE_MASK << MASK_SHIFT)) | (value & INLINE_MASK) << MASK_SHIFT,
        );
    }

    /// Starts tracking an object whose type has `mask_bits` change-mask bits; the state
    /// is `Invalid` and the mask clear. `false` when the mask needs the pool and the
    /// pool is full (2²⁶ words, 512 MiB of masks).
    #[must_use]
    pub(crate) fn init(&mut self, mask_bits: u32, pool: &mut MaskPool) -> bool {
        self.release(pool);
        if mask_bits > INLINE_MASK_BITS {
            let Some(offset) = pool.alloc(mask_bits.div_ceil(64)) else {
                return false;
            };
            self.set_mask_field(u64::from(offset));
            self.set_bits(self.bits() | MASK_POOLED);
        }
        true
    }

    /// Forgets the object (state `Invalid`, pooled mask returned to the pool).
    pub(crate) fn release(&mut self, pool: &mut MaskPool) {
        if self.flag(MASK_POOLED) {
            pool.release(self.mask_field() as u32);
        }
        *self = Self::default();
    }

    /// Whether the change mask lives in the writer's pool (wider than
    /// [`INLINE_MASK_BITS`]).
    pub(crate) fn is_mask_pooled(&self) -> bool {
        self.flag(MASK_POOLED)
    }

    /// The accumulated change mask, `mask_bits` wide (the object type's).
    pub fn change_mask(&self, mask_bits: u32, pool: &MaskPool) -> ChangeMask {
        if self.flag(MASK_POOLED) {
            ChangeMask::from_words(mask_bits, pool.get(self.mask_field() as u32))
        } else {
            ChangeMask::from_u64(mask_bits, self.mask_field())
        }
    }

    /// ORs `mask` into the accumulated change mask.
    #[inline]
    pub(crate) fn or_mask(&mut self, mask: &ChangeMask, pool: &mut MaskPool) {
        let any = if self.flag(MASK_POOLED) {
            Self::or_pooled(pool.get_mut(self.mask_field() as u32), mask)
        } else {
            let merged = self.mask_field() | mask.words().first().copied().unwrap_or(0);
            self.set_mask_field(merged);
            merged & INLINE_MASK != 0
        };
        self.set_flag(HAS_DIRTY_MASK, any);
    }

    /// [`or_mask`](Self::or_mask) for a mask in the pool: whether any bit is set after.
    #[cold]
    fn or_pooled(words: &mut [u64], mask: &ChangeMask) -> bool {
        for (a, b) in words.iter_mut().zip(mask.words()) {
            *a |= *b;
        }
        words.iter().any(|w| *w != 0)
    }

    /// Sets every bit of the change mask, `mask_bits` wide.
    pub(crate) fn set_all(&mut self, mask_bits: u32, pool: &mut MaskPool) {
        self.or_mask(&ChangeMask::all(mask_bits), pool);
        // A type without members still has "something to send" when asked.
        self.set_flag(HAS_DIRTY_MASK, true);
    }

    /// Clears the change mask.
    pub(crate) fn clear_mask(&mut self, pool: &mut MaskPool) {
        if self.flag(MASK_POOLED) {
            pool.get_mut(self.mask_field() as u32).fill(0);
        } else {
            self.set_mask_field(0);
        }
        self.set_flag(HAS_DIRTY_MASK, false);
    }
}

/// What one record entry says was written for an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A state batch (change mask in the record).
    State,
    /// A state batch that also carried the creation.
    Creation,
    /// A destroy.
    Destroy,
    /// A tear-off batch (final state + end of replication).
    TearOff,
}

/// One object's part of a packet.
#[derive(Debug, Clone)]
pub struct RecordInfo {
    /// The object's internal index.
    pub index: u32,
    /// The object's handle (a record about a since-reused index is ignored).
    pub handle: crate::handle::NetRefHandle,
    /// What was written.
    pub kind: RecordKind,
    /// The change mask that was written (empty for destroys).
    pub mask: ChangeMask,
    /// The delta baseline the batch was written against ([`INVALID_BASELINE_INDEX`] = none).
    pub baseline: u8,
    /// The batch carried the object's tags.
    pub tags: bool,
}

/// What one packet carried for the replication stream, kept until its delivery status
/// is known.
#[derive(Debug, Clone, Default)]
pub struct PacketRecord {
    /// Per-object entries, in write order.
    pub infos: Vec<RecordInfo>,
    /// Net token exports that travelled with batches of this packet.
    pub exports: Vec<crate::stream::tokens::NetToken>,
    /// What deliveries read of the finished record ([`seal`](Self::seal)), computed
    /// once: a replayed record is shared by every connection that replays it.
    summary: RecordSummary,
}

/// See [`PacketRecord::seal`].
#[derive(Debug, Clone, Copy, Default)]
struct RecordSummary {
    bytes: usize,
    plain: bool,
}

impl PacketRecord {
    /// Notes, once the packet is written, the record's estimated heap size (each
    /// destroy counted as `retained` more bytes: an object whose destroy is in flight
    /// is kept for the connection) and whether every entry is a plain update, whose
    /// delivery settles nothing per object.
    pub(crate) fn seal(&mut self, retained: usize) {
        let destroys = self
            .infos
            .iter()
            .filter(|ri| ri.kind == RecordKind::Destroy)
            .count();
        self.summary = RecordSummary {
            bytes: std::mem::size_of::<Self>()
                + self.infos.capacity() * std::mem::size_of::<RecordInfo>()
                + self.exports.capacity() * std::mem::size_of::<crate::stream::tokens::NetToken>()
                + destroys * retained,
            plain: self.infos.iter().all(|ri| ri.kind == RecordKind::State),
        };
    }

    /// The estimated heap bytes [`seal`](Self::seal) noted (0 before).
    pub(crate) fn size(&self) -> usize {
        self.summary.bytes
    }

    /// Whether [`seal`](Self::seal) found only plain updates (`false` before).
    pub(crate) fn is_plain(&self) -> bool {
        self.summary.plain
    }
}

/// Counters of one writer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Packets the writer wrote into.
    pub packets: u64,
    /// Object batches written.
    pub batches: u64,
    /// Batches that carried a creation.
    pub creations: u64,
    /// Destroys written.
    pub destroys: u64,
    /// Tear-offs written.
    pub tear_offs: u64,
    /// Records of lost packets processed.
    pub lost_records: u64,
    /// Objects set aside because their creation does not fit in a packet.
    pub huge_objects: u64,
    /// Bits written (stream sections).
    pub bits: u64,
    /// Broken-object reports acted on: the object is destroyed on the client and
    /// created again once the destroy is acknowledged, or, reported more than
    /// [`MAX_RECOVERIES`](super::MAX_RECOVERIES) times, no longer replicated there.
    pub disabled_by_remote: u64,
    /// Object batches written and their bits, per protocol index (the replicated
    /// type): one record per type, so counting a batch touches one place.
    pub per_type: Vec<TypeTraffic>,
    /// The framing bits of the batches written into packets, by part.
    pub framing: FramingBits,
    /// Times the dirty roots were scheduled and sorted afresh: once per tick that has
    /// something to send, plus once after each change between the packets of a tick
    /// that could alter the order (a newly dirty object, a loss, a priority change).
    pub schedules: u64,
}

/// What a writer wrote of one replicated type (see [`WriterStats::per_type`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypeTraffic {
    /// Object batches written.
    pub batches: u64,
    /// Bits of those batches.
    pub bits: u64,
    /// Of [`bits`](Self::bits), the bits of member values; the rest is framing
    /// (handle, batch size, header, baseline indices, change mask).
    pub member_bits: u64,
}

impl TypeTraffic {
    fn add(&mut self, gain: &TypeTraffic) {
        self.batches += gain.batches;
        self.bits += gain.bits;
        self.member_bits += gain.member_bits;
    }
}

/// The framing bits of object batches, by part (see `wire`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FramingBits {
    /// Continuation bits and object indices.
    pub index: u64,
    /// Form bits and size prefixes.
    pub form: u64,
    /// Long-form flags (a creation's handle, protocol and owner), tags and exports.
    pub flags: u64,
    /// Heads (baseline reference, nomination, prediction code).
    pub head: u64,
    /// Change masks.
    pub mask: u64,
}

impl WriterStats {
    /// Adds `gain` (another writer's counters, or what one write counted) to these.
    pub(crate) fn add(&mut self, gain: &WriterStats) {
        self.packets += gain.packets;
        self.batches += gain.batches;
        self.creations += gain.creations;
        self.destroys += gain.destroys;
        self.tear_offs += gain.tear_offs;
        self.lost_records += gain.lost_records;
        self.huge_objects += gain.huge_objects;
        self.bits += gain.bits;
        self.disabled_by_remote += gain.disabled_by_remote;
        if self.per_type.len() < gain.per_type.len() {
            self.per_type
                .resize(gain.per_type.len(), TypeTraffic::default());
        }
        for (t, g) in self.per_type.iter_mut().zip(&gain.per_type) {
            t.add(g);
        }
        self.framing.index += gain.framing.index;
        self.framing.form += gain.framing.form;
        self.framing.flags += gain.framing.flags;
        self.framing.head += gain.framing.head;
        self.framing.mask += gain.framing.mask;
        self.schedules += gain.schedules;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReplicatedObjectState::*;

    #[test]
    fn stats_added_are_summed_field_by_field() {
        let mut a = WriterStats {
            packets: 3,
            bits: 100,
            per_type: [10, 20]
                .map(|bits| TypeTraffic {
                    bits,
                    ..TypeTraffic::default()
                })
                .to_vec(),
            ..WriterStats::default()
        };
        let gain = WriterStats {
            packets: 2,
            bits: 50,
            per_type: vec![
                TypeTraffic {
                    batches: 1,
                    bits: 5,
                    member_bits: 3,
                },
                TypeTraffic::default(),
                TypeTraffic {
                    batches: 2,
                    bits: 7,
                    member_bits: 6,
                },
            ],
            framing: FramingBits {
                mask: 4,
                ..FramingBits::default()
            },
            schedules: 1,
            ..WriterStats::default()
        };
        a.add(&gain);
        assert_eq!(a.packets, 5);
        assert_eq!(a.bits, 150);
        let per_type: Vec<_> = a
            .per_type
            .iter()
            .map(|t| (t.batches, t.bits, t.member_bits))
            .collect();
        assert_eq!(
            per_type,
            vec![(1, 15, 3), (0, 20, 0), (2, 7, 6)],
            "grown to the longer one, each count of a type summed"
        );
        assert_eq!((a.framing.mask, a.schedules), (4, 1));
        assert_eq!(a.batches, 0);
    }

    #[test]
    fn info_is_12_bytes_and_packs_fields() {
        assert_eq!(std::mem::size_of::<ReplicationInfo>(), 12);
        let mut pool = MaskPool::default();
        let mut info = ReplicationInfo::default();
        assert!(info.init(3, &mut pool));
        assert_eq!(info.state(), Invalid);
        info.set_state(PendingCreate);
        info.set_all(3, &mut pool);
        assert_eq!(info.change_mask(3, &pool).to_u64(), 0b111);
        info.set_subobject(true);
        info.set_creation_confirmed(true);
        info.set_local_index(Some((1 << 24) - 2));
        assert_eq!(info.state(), PendingCreate);
        assert!(info.is_subobject() && info.is_creation_confirmed() && info.has_dirty_mask());
        assert_eq!(info.local_index(), Some((1 << 24) - 2));
        info.clear_mask(&mut pool);
        assert!(!info.has_dirty_mask());
        assert_eq!(info.change_mask(3, &pool).to_u64(), 0);
        assert_eq!(
            info.local_index(),
            Some((1 << 24) - 2),
            "the mask leaves the index alone"
        );
        assert_eq!(pool.in_use(), 0, "a narrow mask is inline");
        info.set_priority(2.5);
        assert_eq!(info.priority(), 2.5);
        assert_eq!(
            info.state(),
            PendingCreate,
            "the priority leaves the word alone"
        );
        assert_eq!(info.local_index(), Some((1 << 24) - 2));
        info.release(&mut pool);
        assert_eq!(info.priority(), 0.0, "a released object starts over");
    }

    proptest::proptest! {
        #[test]
        fn info_fields_do_not_overlap(
            bits in 1u32..300,
            state in 0usize..14,
            sub: bool,
            confirmed: bool,
            tear: bool,
            sent: bool,
            resent: bool,
            tags: bool,
            local in proptest::option::of(0u32..(1 << 24) - 1),
            set in proptest::collection::vec(0u32..300, 0..10),
        ) {
            let mut pool = MaskPool::default();
            let mut info = ReplicationInfo::default();
            proptest::prop_assert!(info.init(bits, &mut pool));
            info.force_state(ReplicatedObjectState::ALL[state]);
            info.set_subobject(sub);
            info.set_creation_confirmed(confirmed);
            info.set_tear_off(tear);
            info.set_creation_sent(sent);
            info.set_creation_resent(resent);
            info.set_tags_dirty(tags);
            info.set_local_index(local);
            let mut m = ChangeMask::new(bits);
            for b in &set {
                m.set(*b % bits);
            }
            info.or_mask(&m, &mut pool);
            proptest::prop_assert_eq!(info.state(), ReplicatedObjectState::ALL[state]);
            proptest::prop_assert_eq!(
                (info.is_subobject(), info.is_creation_confirmed(), info.is_tear_off()),
                (sub, confirmed, tear)
            );
            proptest::prop_assert_eq!((info.is_creation_sent(), info.has_dirty_tags()), (sent, tags));
            proptest::prop_assert_eq!(info.is_creation_resent(), resent);
            proptest::prop_assert_eq!(info.local_index(), local);
            proptest::prop_assert_eq!(info.change_mask(bits, &pool), m.clone());
            proptest::prop_assert_eq!(info.has_dirty_mask(), m.any());
            proptest::prop_assert_eq!(pool.in_use(), usize::from(bits > INLINE_MASK_BITS));
        }
    }

    #[test]
    fn wide_masks_live_in_the_pool_and_are_reused_by_width() {
        let mut pool = MaskPool::default();
        let [mut a, mut b, mut c] = [ReplicationInfo::default(); 3];
        assert!(a.init(130, &mut pool) && b.init(40, &mut pool) && c.init(130, &mut pool));
        assert_eq!(pool.in_use(), 3);
        let mut m = ChangeMask::new(130);
        m.set(129);
        m.set(5);
        a.or_mask(&m, &mut pool);
        let mut narrow = ChangeMask::new(40);
        narrow.set(39);
        b.or_mask(&narrow, &mut pool);
        assert_eq!(a.change_mask(130, &pool), m);
        assert_eq!(b.change_mask(40, &pool), narrow);
        assert!(!c.change_mask(130, &pool).any(), "masks do not share words");
        let words = pool.words.len();
        a.release(&mut pool);
        assert_eq!(pool.in_use(), 2);
        // A mask of the released width takes its words back, cleared.
        assert!(a.init(130, &mut pool));
        assert_eq!(pool.words.len(), words);
        assert!(!a.change_mask(130, &pool).any());
        assert_eq!(b.change_mask(40, &pool), narrow);
    }

    #[test]
    fn iris_transitions_are_validated() {
        assert!(Invalid.can_transition_to(PendingCreate));
        assert!(WaitOnCreateConfirmation.can_transition_to(PendingCreate));
        assert!(!Created.can_transition_to(PendingCreate));
        assert!(PendingCreate.can_transition_to(WaitOnCreateConfirmation));
        assert!(CancelPendingDestroy.can_transition_to(WaitOnCreateConfirmation));
        assert!(!Created.can_transition_to(WaitOnCreateConfirmation));
        assert!(!Invalid.can_transition_to(Created));
        assert!(!Destroyed.can_transition_to(Created));
        assert_eq!(ReplicatedObjectState::ALL.len(), 14);
        for (i, s) in ReplicatedObjectState::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert!((*s as u8) < 32, "fits in 5 bits");
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "illegal state transition")]
    fn illegal_transition_asserts_in_debug() {
        let mut info = ReplicationInfo::default();
        info.set_state(Created);
    }
}
