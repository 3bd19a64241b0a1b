//! Scheduling for one connection: which dirty root objects go into the next packet and
//! in which order (Iris's `ScheduleObjects`, `ScheduleDependentObjects`,
//! `SortScheduledObjects`).
//!
//! Priorities accumulate each tick an object is dirty and reset when it is sent; only
//! objects at or above the threshold are scheduled; dependents that must precede their
//! parent get a priority just above it; a partial sort orders the top N, chunk by chunk.
//!
//! A tick's order is computed once and kept across the packets of the tick
//! ([`Schedule`]): each packet continues where the previous one stopped, skipping the
//! entries written since, instead of re-scheduling and re-sorting every dirty root per
//! packet (which made a tick that needs many packets cost quadratically). The writer
//! invalidates the schedule whenever the set of scheduled roots or their priorities may
//! have changed other than by writing (a new tick, a newly dirty object, a loss).
//!
//! Pure functions over the writer's arrays; no I/O, no object access beyond the
//! table's dependent lists.

use super::group::InfoTable;
use super::record::ReplicationInfo;
use crate::object::{InternalIndex, ObjectTable, SchedulingHint};
use crate::serialize::BitArray;
use std::sync::Arc;

/// One scheduled object.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScheduledObject {
    /// Internal index of the root object.
    pub index: InternalIndex,
    /// Its priority when scheduled (the sort key).
    pub sort_key: f32,
    /// Breaks ties: the object's connection-local index, so equal priorities go out in
    /// index order, whose runs the wire codes in a bit each (see `wire`).
    pub tie: u32,
}

/// The next representable `f32` above `x` (`f32::next_up`, stable only since 1.86).
pub fn next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let b = x.to_bits();
    if x > 0.0 {
        f32::from_bits(b + 1)
    } else {
        f32::from_bits(b - 1)
    }
}

/// Raises the priority of `parent`'s dirty dependents that must be written before it
/// to just above `parent_priority` (recursing into their own dependents).
fn bump_dependents(
    table: &ObjectTable,
    infos: &mut InfoTable,
    dirty: &BitArray,
    parent: InternalIndex,
    parent_priority: f32,
    depth: u32,
) {
    // Dependency chains are game-made; a cycle must not recurse forever.
    if depth > 16 {
        return;
    }
    let Some(entry) = table.entry_at(parent) else {
        return;
    };
    for dep in entry.dependents() {
        let d = dep.index;
        let mut updated = parent_priority;
        if dirty.get(d) {
            let initial = infos
                .get(d as usize)
                .is_some_and(|i| i.state().is_initial());
            let before = match dep.hint {
                SchedulingHint::ScheduleBeforeParent => true,
                SchedulingHint::ScheduleBeforeParentIfInitialState => initial,
                SchedulingHint::Default => false,
            };
            if before && let Some(info) = infos.get_mut(d as usize) {
                updated = next_up(parent_priority).max(info.priority());
                info.set_priority(updated);
            }
        }
        bump_dependents(table, infos, dirty, d, updated, depth + 1);
    }
}

/// Collects the dirty root objects (dirty and not subobjects) whose priority is at
/// least `threshold`, after raising dependents that must precede their parents.
pub(crate) fn schedule_objects(
    table: &ObjectTable,
    infos: &mut InfoTable,
    dirty: &BitArray,
    threshold: f32,
    out: &mut Vec<ScheduledObject>,
) {
    out.clear();
    let subobjects = table.subobject_set();
    for index in dirty.iter_and_not(Some(subobjects)) {
        let p = infos.priority(index);
        if p >= threshold && table.has_dependents(index) {
            bump_dependents(table, infos, dirty, index, p, 0);
        }
    }
    for index in dirty.iter_and_not(Some(subobjects)) {
        let info = infos.get(index as usize);
        let p = info.map_or(0.0, ReplicationInfo::priority);
        if p >= threshold {
            let tie = info.and_then(ReplicationInfo::local_index).unwrap_or(index);
            out.push(ScheduledObject {
                index,
                sort_key: p,
                tie,
            });
        }
    }
}

/// Sorts the next chunk: orders (descending by priority, ties by `tie`) the highest
/// `chunk` entries of `scheduled[start..]` into `scheduled[start..start + n]` and returns
/// `n = min(len - start, chunk)`. O(len · log chunk)-ish via selection then sort.
pub fn sort_scheduled_objects(
    scheduled: &mut [ScheduledObject],
    start: usize,
    chunk: usize,
) -> usize {
    if start >= scheduled.len() || chunk == 0 {
        return 0;
    }
    let rest = &mut scheduled[start..];
    let n = rest.len().min(chunk);
    if n < rest.len() {
        rest.select_nth_unstable_by_key(n - 1, order_key);
    }
    rest[..n].sort_unstable_by_key(order_key);
    n
}

/// The fewest unsorted entries [`Schedule::get`] sorts by radix (fewer sort faster by
/// comparison).
const RADIX_MIN: usize = 48;
/// The most (more are sorted chunk by chunk, as packets reach them).
const RADIX_MAX: usize = 4096;

/// Sorts `entries` by [`order_key`]: a least-significant-byte-first radix sort over the
/// bytes in which the keys differ (with equal priorities, the two low bytes of the
/// ties). Keys are distinct (ties are connection-local indices), so the order is the
/// one any sort gives.
fn radix_sort(entries: &mut [ScheduledObject], scratch: &mut Vec<(u64, ScheduledObject)>) {
    scratch.clear();
    scratch.extend(entries.iter().map(|e| (order_key(e), *e)));
    let (any, all) = scratch
        .iter()
        .fold((0u64, u64::MAX), |(any, all), &(k, _)| (any | k, all & k));
    let differ = any ^ all;
    let mut from = std::mem::take(scratch);
    let mut to = Vec::with_capacity(from.len());
    for byte in (0..8).filter(|b| (differ >> (8 * b)) & 0xFF != 0) {
        let shift = 8 * byte;
        let mut counts = [0usize; 256];
        for &(k, _) in &from {
            counts[((k >> shift) & 0xFF) as usize] += 1;
        }
        let mut at = 0;
        for c in &mut counts {
            let n = *c;
            *c = at;
            at += n;
        }
        to.clear();
        to.resize(from.len(), (0, ScheduledObject::default()));
        for &(k, e) in &from {
            let slot = &mut counts[((k >> shift) & 0xFF) as usize];
            to[*slot] = (k, e);
            *slot += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    for (dst, &(_, e)) in entries.iter_mut().zip(&from) {
        *dst = e;
    }
    *scratch = from;
}

/// The schedule's order as one integer, ascending: descending priority
/// (`f32::total_cmp`), then ascending index.
fn order_key(e: &ScheduledObject) -> u64 {
    // `total_cmp`'s key: flip the magnitude bits of negatives, then the sign bit, so
    // the unsigned order of the bits is the total order of the floats.
    let bits = e.sort_key.to_bits();
    let total = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    };
    u64::from(!total) << 32 | u64::from(e.tie)
}

/// What became of a scheduled entry, judged after a packet (see [`Schedule::retire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryFate {
    /// Still owed with the priority it was scheduled with: it keeps its place.
    Keep,
    /// Written, cleaned or below the threshold now: it leaves the schedule.
    Drop,
    /// Still owed but with another priority: its place is wrong, schedule again.
    Reschedule,
}

/// The scheduled order of one tick, kept across the packets of the tick.
///
/// `entries[head..sorted_end]` is in final order (descending priority, ties by `tie`);
/// `entries[sorted_end..]` is not sorted yet and is ordered chunk by chunk
/// ([`sort_scheduled_objects`]) as packets reach it. Since the sort key is a total
/// order that does not change while the schedule is valid, the chunks concatenate to
/// the order a full sort of the remaining entries would give, whichever packet sorts
/// them and however large the chunks are. The first chunk has the configured size
/// (`partial_sort_count`); each further chunk of the same schedule is twice the size
/// of the previous one. Each chunk selects its entries out of all the remaining ones,
/// so fixed chunks would cost `O(n² / chunk)` for a tick that writes all its `n` dirty
/// roots over many packets; doubling keeps that at `O(n log n)` and a tick that needs
/// one packet at one small chunk, as before. Entries before `head` are gone: a packet that stops early keeps the entries it
/// passed over but did not write (compacted in place, order kept), so the next packet
/// starts with them.
/// The entries a used-up schedule keeps room for; a larger buffer is let go.
const KEPT_CAPACITY: usize = 4096;

#[derive(Debug, Default, Clone)]
pub struct Schedule {
    /// Shared by the copies of a schedule (connections in step take the one a packet
    /// left behind) until one changes it.
    entries: Arc<Vec<ScheduledObject>>,
    head: usize,
    sorted_end: usize,
    /// Chunks sorted since the last rebuild (the next one is `chunk << chunks`).
    chunks: u32,
    valid: bool,
    /// Names the schedule's contents: renewed whenever a packet changes them, kept
    /// by a copy, so two schedules with one id are the same (see
    /// [`same_remaining`](Self::same_remaining)).
    id: u64,
    /// The radix sort's buffer.
    scratch: Vec<(u64, ScheduledObject)>,
}

/// A schedule id no schedule had before.
fn fresh_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Schedule {
    /// Whether `other` holds the same remaining entries in the same state (what a
    /// packet continuing either would do is the same): one is a copy of the other
    /// ([`copy_remaining`](Self::copy_remaining)) and neither was changed since, or,
    /// for two built apart (connections that each wrote a packet of their own, say),
    /// the remaining entries and how far they are sorted are the same, bit for bit.
    pub fn same_remaining(&self, other: &Schedule) -> bool {
        self.valid == other.valid && (self.id == other.id || self.same_contents(other))
    }

    /// The entries from the head on, the sorted ones first.
    fn remaining(&self) -> &[ScheduledObject] {
        &self.entries[self.head.min(self.entries.len())..]
    }

    /// The comparison of [`same_remaining`](Self::same_remaining) for schedules of
    /// different ids.
    fn same_contents(&self, other: &Schedule) -> bool {
        let (a, b) = (self.remaining(), other.remaining());
        let sorted = |s: &Schedule| s.sorted_end.saturating_sub(s.head);
        self.chunks == other.chunks
            && sorted(self) == sorted(other)
            && a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.index == y.index && x.tie == y.tie && x.sort_key.to_bits() == y.sort_key.to_bits()
            })
    }

    /// Becomes what `other` is from its remaining entries on (see
    /// [`same_remaining`](Self::same_remaining)), sharing its entries: the first
    /// packet that continues the copy copies them ([`start`](Self::start)).
    pub fn copy_remaining(&mut self, other: &Schedule) {
        self.entries = Arc::clone(&other.entries);
        self.head = other.head;
        self.sorted_end = other.sorted_end;
        self.chunks = other.chunks;
        self.valid = other.valid;
        self.id = other.id;
    }

    /// Whether the schedule may be continued (false: rebuild it before the next use).
    pub fn is_valid(&self) -> bool {
        self.valid
    }

    /// Forces a rebuild before the next use.
    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    /// Schedules the dirty roots afresh ([`schedule_objects`]) and starts at the top.
    pub fn rebuild(
        &mut self,
        table: &ObjectTable,
        infos: &mut InfoTable,
        dirty: &BitArray,
        threshold: f32,
    ) {
        if Arc::get_mut(&mut self.entries).is_none() {
            self.entries = Arc::default();
        }
        schedule_objects(
            table,
            infos,
            dirty,
            threshold,
            Arc::make_mut(&mut self.entries),
        );
        self.head = 0;
        self.sorted_end = 0;
        self.chunks = 0;
        self.valid = true;
        self.id = fresh_id();
    }

    /// Position of the first remaining entry: where a packet starts. Entries shared
    /// with a copy stay shared until the packet changes them (sorts a further chunk,
    /// or keeps entries it passed over): most packets of a large tick do neither, and
    /// copying the remaining entries for every packet made a tick's cost grow with
    /// the square of its dirty roots.
    pub fn start(&mut self) -> usize {
        self.head
    }

    /// The sorted entries from `pos` on, at most `n` of them.
    pub fn sorted_from(&self, pos: usize, n: usize) -> &[ScheduledObject] {
        let end = self
            .sorted_end
            .min(self.entries.len())
            .min(pos.saturating_add(n));
        self.entries.get(pos..end).unwrap_or(&[])
    }

    /// The entry at `pos` (a position reached from [`start`](Self::start) one by one),
    /// sorting the next chunk when `pos` reaches the unsorted part (`chunk` entries
    /// for the first, doubling for each further one); `None` past the end.
    pub fn get(&mut self, pos: usize, chunk: usize) -> Option<ScheduledObject> {
        if pos < self.sorted_end {
            return self.entries.get(pos).copied();
        }
        // Entries shared with a copy are copied here, positions kept.
        let entries = Arc::make_mut(&mut self.entries);
        if entries[self.sorted_end.min(entries.len())..].is_sorted_by_key(order_key) {
            // Already in order (priorities alike, roots in index order): nothing to sort.
            self.sorted_end = entries.len();
        }
        let unsorted = entries.len().saturating_sub(self.sorted_end);
        if pos >= self.sorted_end && (RADIX_MIN..=RADIX_MAX).contains(&unsorted) {
            // A few thousand entries at most: all of them in a few linear passes, not
            // chunk by chunk in O(n log n) (a connection's ties rarely come in order).
            radix_sort(&mut entries[self.sorted_end..], &mut self.scratch);
            self.sorted_end = entries.len();
        }
        while pos >= self.sorted_end {
            let size = chunk
                .max(1)
                .saturating_mul(1usize << self.chunks.min(usize::BITS - 1));
            let n = sort_scheduled_objects(entries, self.sorted_end, size);
            if n == 0 {
                return None;
            }
            self.sorted_end += n;
            self.chunks = self.chunks.saturating_add(1);
        }
        self.entries.get(pos).copied()
    }

    /// Ends a packet that passed over the entries before `end`: keeps those `fate`
    /// says are still owed (in order, right before `end`), drops the rest. Returns
    /// whether an entry asked for a reschedule; the schedule is then invalid.
    pub fn retire(
        &mut self,
        end: usize,
        mut fate: impl FnMut(&ScheduledObject) -> EntryFate,
    ) -> bool {
        // The packet sorted, wrote and passed over entries: other contents now.
        self.id = fresh_id();
        let end = end.min(self.sorted_end);
        // The entries kept already in place (a run right before `end`, as when only
        // the last entry passed over did not fit) change nothing: no copy of entries
        // shared with a copy.
        let passed = self.entries.get(self.head..end).unwrap_or(&[]);
        let mut fates = passed.iter().rev().map(&mut fate).peekable();
        let mut in_place = 0;
        while fates.next_if_eq(&EntryFate::Keep).is_some() {
            in_place += 1;
        }
        if fates.all(|f| f == EntryFate::Drop) {
            self.head = end - in_place;
            self.release_if_done();
            return false;
        }
        let mut dst = end;
        let mut reschedule = false;
        let entries = Arc::make_mut(&mut self.entries);
        for i in (self.head..end).rev() {
            let e = entries[i];
            match fate(&e) {
                EntryFate::Keep => {
                    dst -= 1;
                    entries[dst] = e;
                }
                EntryFate::Drop => {}
                EntryFate::Reschedule => reschedule = true,
            }
        }
        self.head = dst;
        self.release_if_done();
        if reschedule {
            self.valid = false;
        }
        reschedule
    }

    /// Everything written: a tick that scheduled many roots (the creation tick) leaves
    /// no large buffer behind in every connection.
    fn release_if_done(&mut self) {
        if self.head == self.entries.len() && self.entries.capacity() > KEPT_CAPACITY {
            self.entries = Arc::default();
            self.head = 0;
            self.sorted_end = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_key_orders_as_total_cmp_then_index() {
        let keys = [
            f32::NEG_INFINITY,
            -1.5,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            1.0,
            1.0,
            2.5e30,
            f32::INFINITY,
            f32::NAN,
        ];
        let entries: Vec<ScheduledObject> = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| ScheduledObject {
                index: (i * 7 % 10) as InternalIndex,
                sort_key: k,
                tie: (i * 7 % 10) as InternalIndex,
            })
            .collect();
        for a in &entries {
            for b in &entries {
                let want = b
                    .sort_key
                    .total_cmp(&a.sort_key)
                    .then(a.index.cmp(&b.index));
                assert_eq!(order_key(a).cmp(&order_key(b)), want, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn partial_sort_orders_top_chunk_then_next() {
        let mut v: Vec<ScheduledObject> = [3.0, 9.0, 1.0, 7.0, 5.0, 8.0]
            .iter()
            .enumerate()
            .map(|(i, &p)| ScheduledObject {
                index: i as u32,
                sort_key: p,
                tie: i as u32,
            })
            .collect();
        assert_eq!(sort_scheduled_objects(&mut v, 0, 2), 2);
        assert_eq!((v[0].sort_key, v[1].sort_key), (9.0, 8.0));
        assert_eq!(sort_scheduled_objects(&mut v, 2, 2), 2);
        assert_eq!((v[2].sort_key, v[3].sort_key), (7.0, 5.0));
        assert_eq!(sort_scheduled_objects(&mut v, 4, 10), 2);
        assert_eq!((v[4].sort_key, v[5].sort_key), (3.0, 1.0));
        assert_eq!(sort_scheduled_objects(&mut v, 6, 10), 0);
    }

    /// Packets that each pass over a few entries, write some and leave others owed:
    /// what they see, in order, is the full sort of what is still owed, every entry
    /// written exactly once.
    #[test]
    fn schedule_continued_across_packets_follows_the_full_order() {
        let mut seed = 0x1234_5678_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for chunk in [1, 3, 8, 100] {
            let n = 200u32;
            // Few distinct keys: ties are ordered by index.
            let keys: Vec<f32> = (0..n).map(|_| (next() % 17) as f32).collect();
            let mut schedule = Schedule {
                entries: (0..n)
                    .map(|i| ScheduledObject {
                        index: i,
                        sort_key: keys[i as usize],
                        tie: i,
                    })
                    .collect::<Vec<_>>()
                    .into(),
                head: 0,
                sorted_end: 0,
                chunks: 0,
                valid: true,
                id: 0,
                scratch: Vec::new(),
            };
            let mut written = vec![false; n as usize];
            let mut seen_order = Vec::new();
            let mut packets = 0;
            loop {
                packets += 1;
                assert!(packets < 10_000);
                let budget = 1 + next() % 9;
                let mut pos = schedule.start();
                let mut passed = 0;
                let mut owed_seen = Vec::new();
                while let Some(e) = schedule.get(pos, chunk) {
                    if written[e.index as usize] {
                        pos += 1;
                        continue;
                    }
                    if passed == budget {
                        break;
                    }
                    passed += 1;
                    pos += 1;
                    owed_seen.push(e);
                    // Two thirds fit; the others stay owed for the next packet.
                    if next() % 3 != 0 {
                        written[e.index as usize] = true;
                        seen_order.push(e);
                    }
                }
                // The packet saw exactly the top of what is still owed, in order.
                let mut owed: Vec<ScheduledObject> = (0..n)
                    .filter(|&i| !written[i as usize] || owed_seen.iter().any(|e| e.index == i))
                    .map(|i| ScheduledObject {
                        index: i,
                        sort_key: keys[i as usize],
                        tie: i,
                    })
                    .collect();
                owed.sort_by(|a, b| {
                    b.sort_key
                        .total_cmp(&a.sort_key)
                        .then(a.index.cmp(&b.index))
                });
                assert_eq!(owed_seen, owed[..owed_seen.len()].to_vec(), "chunk {chunk}");
                let reschedule = schedule.retire(pos, |e| {
                    if written[e.index as usize] {
                        EntryFate::Drop
                    } else {
                        EntryFate::Keep
                    }
                });
                assert!(!reschedule && schedule.is_valid());
                if owed_seen.is_empty() {
                    break;
                }
            }
            assert_eq!(seen_order.len(), n as usize, "each entry written once");
            assert!(written.iter().all(|&w| w));
        }
    }

    /// A valid schedule of `n` entries whose priorities are a permutation of `0..n`.
    fn shuffled_schedule(n: u32) -> Schedule {
        Schedule {
            entries: (0..n)
                .map(|i| ScheduledObject {
                    index: i,
                    sort_key: ((i * 7919) % n) as f32,
                    tie: i,
                })
                .collect::<Vec<_>>()
                .into(),
            valid: true,
            ..Default::default()
        }
    }

    #[test]
    fn chunks_double_so_a_long_tick_sorts_log_many_times() {
        let n = 10_000u32;
        let mut schedule = shuffled_schedule(n);
        let mut last = f32::INFINITY;
        for pos in 0..n as usize {
            let e = schedule.get(pos, 64).expect("an entry");
            assert!(e.sort_key < last, "descending at {pos}");
            last = e.sort_key;
        }
        assert_eq!(schedule.get(n as usize, 64), None);
        // 64 + 128 + ... + 4096 = 8 128: 7 chunks, then the last 1 872 entries at once
        // (few enough for the radix sort); not 10 000 / 64 = 157 sorts.
        assert_eq!(schedule.chunks, 7);
        // Written in two packets: the first keeps its buffer (entries are left), the
        // second uses the schedule up and lets the large buffer go.
        schedule.retire(n as usize / 2, |_| EntryFate::Drop);
        assert_eq!(schedule.start(), n as usize / 2);
        assert!(schedule.entries.capacity() >= n as usize);
        schedule.retire(n as usize, |_| EntryFate::Drop);
        assert_eq!(schedule.entries.capacity(), 0);
        assert!(schedule.is_valid());
        let start = schedule.start();
        assert_eq!(schedule.get(start, 64), None, "nothing left");
    }

    #[test]
    fn sorted_from_shows_only_entries_already_in_order() {
        // Too many for one radix sort: sorted in chunks, the first of 64.
        let n = 10_000u32;
        let mut schedule = shuffled_schedule(n);
        // Nothing is sorted before the first `get`.
        assert!(schedule.sorted_from(0, 16).is_empty());
        let first = schedule.get(0, 64).expect("an entry");
        let ahead = schedule.sorted_from(0, 16);
        assert_eq!(ahead.len(), 16);
        assert_eq!(ahead[0].index, first.index);
        // What it shows is what `get` returns next, position by position.
        let shown: Vec<InternalIndex> = ahead.iter().map(|e| e.index).collect();
        for (k, &index) in shown.iter().enumerate() {
            assert_eq!(schedule.get(k, 64).map(|e| e.index), Some(index));
        }
        // Never past the sorted chunk (64 entries), nor past the end.
        assert_eq!(schedule.sorted_from(60, 16).len(), 4);
        assert!(schedule.sorted_from(64, 16).is_empty());
        assert!(schedule.sorted_from(usize::MAX, 16).is_empty());
    }

    #[test]
    fn retire_keeps_owed_entries_in_order_and_flags_a_reschedule() {
        let mut schedule = Schedule {
            entries: [5.0, 4.0, 3.0, 2.0, 1.0]
                .iter()
                .enumerate()
                .map(|(i, &p)| ScheduledObject {
                    index: i as u32,
                    sort_key: p,
                    tie: i as u32,
                })
                .collect::<Vec<_>>()
                .into(),
            head: 0,
            sorted_end: 0,
            chunks: 0,
            valid: true,
            id: 0,
            scratch: Vec::new(),
        };
        for pos in 0..4 {
            assert_eq!(schedule.get(pos, 2).map(|e| e.index), Some(pos as u32));
        }
        // Passed over 0..4: 1 and 3 stay owed, 0 and 2 were written.
        assert!(!schedule.retire(4, |e| if e.index % 2 == 1 {
            EntryFate::Keep
        } else {
            EntryFate::Drop
        }));
        let start = schedule.start();
        let rest: Vec<u32> = (start..)
            .map_while(|p| schedule.get(p, 2))
            .map(|e| e.index)
            .collect();
        assert_eq!(rest, vec![1, 3, 4]);
        let start = schedule.start();
        assert!(schedule.retire(start + 1, |_| EntryFate::Reschedule));
        assert!(!schedule.is_valid());
    }

    #[test]
    fn next_up_is_strictly_greater() {
        for p in [0.0f32, 1.0, 3.5, -2.0, 1e30] {
            assert!(next_up(p) > p, "{p}");
        }
        assert!(next_up(1.0) - 1.0 < 1e-6);
    }

    #[test]
    fn a_copy_is_the_same_schedule_until_either_is_written() {
        let entries = |n: u32| -> Vec<ScheduledObject> {
            (0..n)
                .map(|i| ScheduledObject {
                    index: i,
                    sort_key: 1.0,
                    tie: i,
                })
                .collect()
        };
        let mut a = Schedule {
            entries: entries(6).into(),
            valid: true,
            id: fresh_id(),
            ..Schedule::default()
        };
        // A packet wrote the first two entries.
        a.get(0, 4);
        a.retire(2, |e| {
            if e.index < 2 {
                EntryFate::Drop
            } else {
                EntryFate::Keep
            }
        });
        let mut b = Schedule::default();
        b.copy_remaining(&a);
        assert!(b.same_remaining(&a) && a.same_remaining(&b));
        assert!(
            Arc::ptr_eq(&a.entries, &b.entries),
            "a copy shares the entries"
        );
        assert_eq!(b.entries[b.head..], a.entries[a.head..]);
        assert_eq!(b.sorted_end - b.head, a.sorted_end - a.head);
        // A packet continuing the copy shares the entries until it changes them.
        let sb = b.start();
        let sa = a.start();
        assert!(Arc::ptr_eq(&a.entries, &b.entries));
        assert_eq!((sb, sa), (2, 2));
        assert!(
            b.same_remaining(&a),
            "starting changes nothing a packet sees"
        );
        // Both continue alike.
        assert_eq!(a.get(sa, 4), b.get(sb, 4));
        // Another packet on one of them: no longer the same. Keeping only the last
        // entry it passed over, in place, changes no entry: still shared.
        b.retire(sb + 2, |e| match e.index {
            3 => EntryFate::Keep,
            _ => EntryFate::Drop,
        });
        assert!(!b.same_remaining(&a));
        assert!(Arc::ptr_eq(&a.entries, &b.entries));
        assert_eq!(b.remaining()[0].index, 3);
        // Keeping an entry ahead of one it drops moves it: the entries are copied,
        // the original's left as they were.
        let sb = b.start();
        b.retire(sb + 2, |e| match e.index {
            3 => EntryFate::Keep,
            _ => EntryFate::Drop,
        });
        assert!(!Arc::ptr_eq(&a.entries, &b.entries));
        assert_eq!(
            b.remaining().iter().map(|e| e.index).collect::<Vec<_>>(),
            [3, 5]
        );
        assert_eq!(
            a.remaining().iter().map(|e| e.index).collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
        // Built apart, the same entries in the same state are the same; a priority
        // that differs only in its bits (it may sort otherwise) is not.
        let apart = |e: Vec<ScheduledObject>| Schedule {
            entries: e.into(),
            valid: true,
            id: fresh_id(),
            ..Schedule::default()
        };
        let (d, e) = (apart(entries(4)), apart(entries(4)));
        assert!(d.same_remaining(&e));
        let mut zeros = entries(4);
        zeros[1].sort_key = 0.0;
        let mut negative = entries(4);
        negative[1].sort_key = -0.0;
        assert!(!apart(zeros).same_remaining(&apart(negative)));
        assert!(!apart(entries(4)).same_remaining(&apart(entries(5))));
        // A rebuild names new contents too.
        let mut c = Schedule::default();
        c.copy_remaining(&a);
        c.invalidate();
        assert!(
            !c.same_remaining(&a),
            "an invalid schedule is rebuilt, never continued"
        );
    }

    /// A seeded pseudo-random stream for the sort tests.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn the_radix_sort_orders_as_the_comparison_sort() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for round in 0..200 {
            let n = [0, 1, 2, 47, 48, 170, 1000, 4096][round % 8];
            // Distinct ties (a connection's local indices), shuffled; priorities from
            // a few values (many equal), any sign, or any bits.
            let mut ties: Vec<u32> = (0..n as u32)
                .map(|t| t * (1 + (round as u32 % 3)) + (round as u32 % 5) * 70_000)
                .collect();
            for i in (1..ties.len()).rev() {
                ties.swap(i, next(&mut x) as usize % (i + 1));
            }
            let mut entries: Vec<ScheduledObject> = ties
                .iter()
                .enumerate()
                .map(|(i, &tie)| {
                    let r = next(&mut x);
                    let sort_key = match round % 3 {
                        0 => 1.0,
                        1 => [0.5, 1.0, -2.0, 7.25][r as usize % 4],
                        _ => f32::from_bits(r as u32),
                    };
                    ScheduledObject {
                        index: i as InternalIndex,
                        sort_key,
                        tie,
                    }
                })
                .collect();
            let mut want = entries.clone();
            want.sort_unstable_by_key(order_key);
            let mut scratch = Vec::new();
            radix_sort(&mut entries, &mut scratch);
            assert_eq!(
                entries.iter().map(order_key).collect::<Vec<_>>(),
                want.iter().map(order_key).collect::<Vec<_>>(),
                "round {round}"
            );
            assert_eq!(
                entries.iter().map(|e| e.index).collect::<Vec<_>>(),
                want.iter().map(|e| e.index).collect::<Vec<_>>()
            );
        }
    }
}
