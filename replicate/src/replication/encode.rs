//! [`EncodedSegments`]: the tick's encoded batch segments, shared by every connection
//! (the "encode once" stage of the object-major pipeline).
//!
//! A batch is a per-connection frame (object index, flags, head, change mask) followed
//! by a *segment*: the members, coded in full, against the type's default state, or
//! against a reference (an acknowledged baseline or its prediction). Its bits depend
//! only on the object's quantized state, the mask and what it is coded against
//! ([`SegmentKind`]), so connections whose acks are in step share one encoding:
//! the first connection that writes an (object, mask, kind) encodes it and stores its
//! bits here; the others copy them a word at a time.
//!
//! Identity of what a segment is coded against is the address of the state; every
//! entry keeps that state alive, so an address cannot be reused for another state
//! while the entry exists. The store is emptied whenever the objects' states may change
//! ([`clear`](EncodedSegments::clear): each server tick, and each mutable access to the
//! object table).

use super::baseline::{FateMoves, ObjectWords};
use super::baseline::{PlanStates, SegmentKind};
use super::group::Transitions;
use super::insights::MemberMeasure;
use super::replay::Replays;
use crate::bits::{BitWriter, WriterMark};
use crate::handle::NetRefHandle;
use crate::object::InternalIndex;
use crate::protocol::ErasedState;
use crate::state::ChangeMask;
use std::sync::Arc;

/// What one writer thread keeps for a tick besides the baseline storage it reads: the
/// tick's encoded segments, the predictions made from baselines, the types' default
/// states and the batches it counted. The server keeps one per writer thread and lends
/// it to each connection's writer it writes, so connections written by one thread
/// share its encodings, and threads share nothing they change.
#[derive(Default)]
// Each on cache lines of its own: the writer threads update theirs for every batch.
#[repr(align(128))]
pub(crate) struct TickCache {
    pub(crate) segments: EncodedSegments,
    /// The predictions made from baselines and the types' default states.
    pub(crate) states: PlanStates,
    /// Batches planned on the delta path and on the full path, not yet counted in the
    /// storage's statistics.
    batches: (u64, u64),
    /// The pass's recorded objects sections, for connections in step to replay.
    pub(crate) replays: Replays,
    /// How the pass moved shared send states, for the connections holding the same
    /// copy (see `group`).
    pub(crate) transitions: Transitions,
    /// The same for shared per-object baselines, moved by a replayed section.
    pub(crate) word_moves: Transitions<ObjectWords>,
    /// How the pass's catching up with packet fates moved shared per-object
    /// baselines.
    pub(crate) fates: FateMoves,
    /// The writer a sized batch body goes into before its size prefix, and its empty
    /// mark (made on the first such batch).
    pub(crate) scratch: Option<(BitWriter, WriterMark)>,
}

impl std::fmt::Debug for TickCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TickCache")
            .field("segments", &self.segments)
            .finish_non_exhaustive()
    }
}

impl TickCache {
    /// Forgets what the tick encoded and predicted (the objects' states change).
    pub(crate) fn clear(&mut self) {
        self.segments.clear();
        self.states.clear();
        self.end_pass();
    }

    /// Starts a write pass of `packets` packets (see [`Replays::begin_pass`]).
    pub(crate) fn begin_pass(&mut self, packets: usize) {
        self.replays.begin_pass(packets);
        self.transitions.clear();
        self.word_moves.clear();
        self.fates.clear();
    }

    /// Ends a write pass: what it recorded read the storage and the table as they
    /// stood during the pass.
    pub(crate) fn end_pass(&mut self) {
        self.replays.end_pass();
        self.transitions.clear();
        self.word_moves.clear();
        self.fates.clear();
    }

    /// Adds batches counted elsewhere: (delta, full).
    pub(crate) fn add_batch_counts(&mut self, (delta, full): (u64, u64)) {
        self.batches.0 += delta;
        self.batches.1 += full;
    }

    /// The batches counted so far: (delta, full).
    pub(crate) fn batch_counts(&self) -> (u64, u64) {
        self.batches
    }

    /// Counts a batch planned with delta compression: against a reference (`delta`)
    /// or not.
    pub(crate) fn count_batch(&mut self, delta: bool) {
        if delta {
            self.batches.0 += 1;
        } else {
            self.batches.1 += 1;
        }
    }

    /// The batches counted since the last call: (delta, full).
    pub(crate) fn take_batch_counts(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.batches)
    }
}

/// No entry (end of an object's chain).
const NONE: u32 = u32::MAX;

struct Entry {
    handle: NetRefHandle,
    mask: ChangeMask,
    kind: SegmentKind,
    /// The state the segment is coded against, alive while the entry is.
    _against: Option<Arc<dyn ErasedState>>,
    /// First word in `words`.
    start: u32,
    bits: u32,
    /// The object's next entry.
    next: u32,
    /// Network insights at the `Members` level: each member measured alone.
    measures: Option<Box<[MemberMeasure]>>,
}

/// The members of an object that differ from a state (what a nominating batch must
/// carry besides the owed ones).
struct Difference {
    handle: NetRefHandle,
    against: usize,
    _keep: Arc<dyn ErasedState>,
    mask: ChangeMask,
    next: u32,
}

/// One encoded segment: its member values, `bits` of them in `words`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment<'a> {
    /// Names the segment in [`EncodedSegments::measures`].
    pub id: u32,
    pub words: &'a [u64],
    pub bits: usize,
}

/// The tick's encoded segments, per object.
#[derive(Default)]
pub struct EncodedSegments {
    /// Per object index: (generation, first entry) — an entry chain is valid only in
    /// the generation it was made in, so clearing is O(1).
    heads: Vec<(u32, u32)>,
    entries: Vec<Entry>,
    words: Vec<u64>,
    /// Per object index: (generation, first difference).
    difference_heads: Vec<(u32, u32)>,
    differences: Vec<Difference>,
    generation: u32,
    /// Whether segments are kept at all: only worth it where another connection may
    /// copy them (off for a writer alone, see [`set_shared`](Self::set_shared)).
    shared: bool,
    /// The write pass under way has a single connection that writes its own section
    /// (every other replays it): what it encodes is not kept (see
    /// [`set_lone_writer`](Self::set_lone_writer)).
    lone_writer: bool,
    hits: u64,
    misses: u64,
}

impl std::fmt::Debug for EncodedSegments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedSegments")
            .field("entries", &self.entries.len())
            .field("hits", &self.hits)
            .field("misses", &self.misses)
            .finish()
    }
}

/// Shrinks `v` to twice its length when it holds more than four times that (and more
/// than a few pages' worth): the store keeps the room a tick like the last one needs.
fn trim<T>(v: &mut Vec<T>) {
    const FLOOR_BYTES: usize = 16 << 10;
    let keep = (v.len() * 2).max(FLOOR_BYTES / std::mem::size_of::<T>().max(1));
    if v.capacity() > 2 * keep {
        v.shrink_to(keep);
    }
}

impl EncodedSegments {
    /// Whether segments are kept for other connections to copy.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Keeps segments (and differences) for other connections to copy, or not: a
    /// store with a single connection only pays for the copies.
    pub fn set_shared(&mut self, shared: bool) {
        if !shared {
            self.clear();
        }
        self.shared = shared;
    }

    /// Whether the write pass about to run has a single connection that writes its
    /// own section, every other being in step with it: connections in step replay
    /// their leader's section and never look a segment up, so what the leader encodes
    /// is not kept (segments and differences). What earlier passes kept is still found.
    pub(crate) fn set_lone_writer(&mut self, lone: bool) {
        self.lone_writer = lone;
    }

    /// Forgets every segment (the objects' states may change).
    pub fn clear(&mut self) {
        if self.entries.is_empty() && self.differences.is_empty() {
            return;
        }
        // A burst (every object's creation at once) leaves no lasting footprint: room
        // far beyond this tick's use is handed back.
        trim(&mut self.entries);
        trim(&mut self.words);
        trim(&mut self.differences);
        self.entries.clear();
        self.words.clear();
        self.differences.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: old heads could look current again.
            self.heads.clear();
            self.difference_heads.clear();
        }
    }

    /// The members of object `index` whose value differs from `against`, computed by
    /// `diff` the first time in the tick and remembered.
    pub(crate) fn difference(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        against: &Arc<dyn ErasedState>,
        diff: impl FnOnce(&dyn ErasedState) -> ChangeMask,
    ) -> ChangeMask {
        if !self.shared || self.lone_writer {
            return diff(against.as_ref());
        }
        let address = super::baseline::address(against);
        let slot = index as usize;
        let mut at = self.difference_head(index);
        let first = at;
        while at != NONE {
            let d = &self.differences[at as usize];
            if d.handle == handle && d.against == address {
                return d.mask.clone();
            }
            at = d.next;
        }
        if self.difference_heads.len() <= slot {
            self.difference_heads.resize(slot + 1, (0, NONE));
        }
        let at = self.differences.len();
        self.difference_heads[slot] = (self.generation, at as u32);
        self.differences.push(Difference {
            handle,
            against: address,
            _keep: against.clone(),
            mask: diff(against.as_ref()),
            next: first,
        });
        self.differences[at].mask.clone()
    }

    /// Reads object `index`'s chain heads (for a read-ahead, see `writer`): none
    /// while the store keeps nothing this tick.
    pub(crate) fn read_ahead(&self, index: InternalIndex) -> usize {
        (self.head(index) ^ self.difference_head(index)) as usize
    }

    /// Segments found (copied instead of encoded) and encoded, since the start.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Object `index`'s first segment this tick. While nothing is kept, no chain can
    /// be current: the per-object heads (cold at 100 000 objects) are not read.
    fn head(&self, index: InternalIndex) -> u32 {
        if self.entries.is_empty() {
            return NONE;
        }
        chain_head(&self.heads, index, self.generation)
    }

    /// Object `index`'s first difference this tick (see [`head`](Self::head)).
    fn difference_head(&self, index: InternalIndex) -> u32 {
        if self.differences.is_empty() {
            return NONE;
        }
        chain_head(&self.difference_heads, index, self.generation)
    }

    /// The segment of `index` for `(mask, kind)`, if one was encoded since the last
    /// [`clear`](Self::clear).
    pub(crate) fn find(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        mask: &ChangeMask,
        kind: &SegmentKind,
    ) -> Option<Segment<'_>> {
        if !self.shared {
            return None;
        }
        let mut at = self.head(index);
        while at != NONE {
            let e = &self.entries[at as usize];
            if e.handle == handle && e.kind == *kind && e.mask == *mask {
                self.hits += 1;
                let start = e.start as usize;
                return Some(Segment {
                    id: at,
                    words: &self.words[start..start + (e.bits as usize).div_ceil(64)],
                    bits: e.bits as usize,
                });
            }
            at = e.next;
        }
        None
    }

    /// Stores a segment just encoded: `copy` appends its bits to the word store (as
    /// [`BitWriter::copy_bits`](crate::bits::BitWriter::copy_bits) does); `against`
    /// gives the state it was coded against, kept alive with it (called only when the
    /// segment is kept).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        mask: &ChangeMask,
        kind: SegmentKind,
        against: impl FnOnce() -> Option<Arc<dyn ErasedState>>,
        bits: usize,
        copy: impl FnOnce(&mut Vec<u64>),
    ) -> Option<u32> {
        self.misses += 1;
        if !self.shared || self.lone_writer {
            return None;
        }
        let (Ok(bits32), Ok(start)) = (u32::try_from(bits), u32::try_from(self.words.len())) else {
            return None;
        };
        copy(&mut self.words);
        if self.words.len() != start as usize + bits.div_ceil(64) {
            // Not what was announced: keep nothing rather than a wrong segment.
            self.words.truncate(start as usize);
            return None;
        }
        let slot = index as usize;
        if self.heads.len() <= slot {
            self.heads.resize(slot + 1, (0, NONE));
        }
        let next = self.head(index);
        let id = self.entries.len() as u32;
        self.heads[slot] = (self.generation, id);
        self.entries.push(Entry {
            handle,
            mask: mask.clone(),
            kind,
            _against: against(),
            start,
            bits: bits32,
            next,
            measures: None,
        });
        Some(id)
    }

    /// The member measures stored with segment `id` (network insights).
    pub(crate) fn measures(&self, id: u32) -> Option<&[MemberMeasure]> {
        self.entries.get(id as usize)?.measures.as_deref()
    }

    /// Stores the member measures of segment `id`.
    pub(crate) fn set_measures(&mut self, id: u32, measures: Vec<MemberMeasure>) {
        if let Some(e) = self.entries.get_mut(id as usize) {
            e.measures = Some(measures.into_boxed_slice());
        }
    }
}

/// The first entry of object `index`'s chain in `heads`, if it was made in
/// `generation` (older chains are void).
fn chain_head(heads: &[(u32, u32)], index: InternalIndex, generation: u32) -> u32 {
    match heads.get(index as usize) {
        Some(&(g, first)) if g == generation => first,
        _ => NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::BitWriter;

    fn handle(id: u64) -> NetRefHandle {
        NetRefHandle::from_id(id, 0)
    }

    fn mask(bits: u64) -> ChangeMask {
        let mut m = ChangeMask::new(8);
        for i in 0..8 {
            if bits >> i & 1 == 1 {
                m.set(i);
            }
        }
        m
    }

    fn store(s: &mut EncodedSegments, index: InternalIndex, bits: u64, kind: SegmentKind) {
        let mut w = BitWriter::with_capacity_bits(256);
        w.write_bits(bits, 64);
        w.write_bits(index as u64, 7);
        s.insert(
            index,
            handle(index as u64),
            &mask(bits),
            kind,
            || None,
            71,
            |out| w.copy_bits(0, 71, out),
        );
    }

    #[test]
    fn finds_by_object_mask_and_kind_until_cleared() {
        let mut s = EncodedSegments::default();
        s.set_shared(true);
        let delta = SegmentKind::Against(64);
        store(&mut s, 3, 0b101, SegmentKind::Full);
        store(&mut s, 3, 0b101, delta);
        store(&mut s, 5, 0b1, SegmentKind::Full);
        let m = mask(0b101);
        let seg = s.find(3, handle(3), &m, &delta).expect("stored");
        assert_eq!(seg.bits, 71);
        assert_eq!(seg.words[0], 0b101);
        assert_eq!(seg.words[1], 3);
        assert!(s.find(3, handle(3), &mask(0b1), &delta).is_none());
        assert!(
            s.find(3, handle(3), &m, &SegmentKind::Against(128))
                .is_none()
        );
        assert!(
            s.find(3, handle(99), &m, &delta).is_none(),
            "another object"
        );
        assert!(s.find(4, handle(3), &m, &delta).is_none());
        assert_eq!(s.counts(), (1, 3));
        s.clear();
        assert!(s.find(3, handle(3), &m, &delta).is_none());
        assert!(s.find(5, handle(5), &mask(1), &SegmentKind::Full).is_none());
    }

    #[test]
    fn a_store_not_shared_keeps_nothing() {
        let mut s = EncodedSegments::default();
        store(&mut s, 3, 0b101, SegmentKind::Full);
        assert!(
            s.find(3, handle(3), &mask(0b101), &SegmentKind::Full)
                .is_none()
        );
        assert_eq!(s.counts(), (0, 1));
    }

    #[test]
    fn a_lone_writers_pass_keeps_nothing_but_finds_what_earlier_passes_kept() {
        let mut s = EncodedSegments::default();
        s.set_shared(true);
        store(&mut s, 3, 0b101, SegmentKind::Full);
        s.set_lone_writer(true);
        store(&mut s, 5, 0b1, SegmentKind::Full);
        assert!(
            s.find(3, handle(3), &mask(0b101), &SegmentKind::Full)
                .is_some(),
            "kept by an earlier pass"
        );
        assert!(
            s.find(5, handle(5), &mask(0b1), &SegmentKind::Full)
                .is_none()
        );
        // Differences are computed each time, not remembered.
        let against: Arc<dyn ErasedState> = Arc::new(crate::nested::support::StubState);
        let mut diffs = 0;
        for _ in 0..2 {
            s.difference(5, handle(5), &against, |_| {
                diffs += 1;
                mask(0b1)
            });
        }
        assert_eq!(diffs, 2);
        // The next pass with two writers keeps again.
        s.set_lone_writer(false);
        store(&mut s, 5, 0b1, SegmentKind::Full);
        assert!(
            s.find(5, handle(5), &mask(0b1), &SegmentKind::Full)
                .is_some()
        );
        for _ in 0..2 {
            s.difference(5, handle(5), &against, |_| {
                diffs += 1;
                mask(0b1)
            });
        }
        assert_eq!(diffs, 3, "remembered once kept");
        assert_eq!(s.counts(), (2, 3));
    }

    #[test]
    fn a_copy_of_the_wrong_length_is_not_kept() {
        let mut s = EncodedSegments::default();
        s.set_shared(true);
        s.insert(
            1,
            handle(1),
            &mask(1),
            SegmentKind::Full,
            || None,
            130,
            |out| out.push(0),
        );
        assert!(s.find(1, handle(1), &mask(1), &SegmentKind::Full).is_none());
    }
}
