//! Packet replay: connections in step share a whole objects section.
//!
//! A writer's objects section is a pure function of what it reads: the tick's object
//! table and baseline storage (shared by every connection of a write pass), the
//! connection's own state for its dirty objects (send state, baselines, priority), a
//! few per-connection values (packet budget, the packet ordinal's baseline-slot phase,
//! index width, configuration) and the role each conditional object gives the
//! connection. Connections whose acks are in step hold the same state, so they would
//! write the same bits and move their states the same way (the nominations a replayed
//! section queues take the replaying connection's own packet ordinal).
//!
//! The first connection of a pass that writes a section records a [`PacketTrace`]: what
//! it read (its inputs) and what it did (the bits, and every state it changed, before
//! and after). A later connection of the same pass whose inputs equal a trace's does not
//! plan, frame or encode anything: it copies the bits and takes the trace's states.
//! Each writer thread keeps its own traces; a group leader's is shared with the
//! pass's other threads, which adopt it to write the group's followers
//! ([`Replays::adopt`]).
//! Equal inputs are checked exactly, never by hash, so a replayed section is the
//! section the writer would have written, bit for bit (a test writes every packet both
//! ways and compares them).
//!
//! What a trace can hold is deliberately narrow: plain updates only (no creation,
//! destroy, tear-off, tags or huge object), no network insights, no member filter that
//! depends on the connection. Anything else is written the ordinary way.

use super::baseline::{BaselinesTail, ObjectWords};
use super::group::{Event, SendStates, Transitions};
use super::record::{PacketRecord, ReplicationInfo, WriterStats};
use super::scheduler::Schedule;
use crate::object::{ConnectionId, InternalIndex};
use crate::serialize::BitArray;
use crate::state::ChangeMask;
use crate::stream::WriteResult;
use std::sync::Arc;

/// Traces kept per write pass: one per group of connections in step (connections at
/// different round-trip times form a group per ack delay).
pub const MAX_TRACES: usize = 8;

/// A trace stops being recorded after this many traces in a row that no connection
/// replayed (connections not in step: recording would only cost).
const MAX_UNUSED_TRACES: u32 = MAX_TRACES as u32;

/// The next trace serial number (see [`PacketTrace::serial`]).
static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One dirty object in a trace: its index and its state before and after the packet
/// (send state with priority, and baselines).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TracedObject {
    pub index: InternalIndex,
    /// The write looked at the object (scheduled it and reached it, or wrote it as a
    /// subobject). One it did not look at only had its priority read, for the
    /// schedule: its baselines are neither compared nor taken (they were left as
    /// they were).
    pub visited: bool,
    pub info: [ReplicationInfo; 2],
    pub baselines: [u64; 2],
}

/// The per-connection values a section depends on besides its objects' states and
/// its synced masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SectionInputs {
    /// Bits the packet had left when the section began.
    pub bits_left: usize,
    /// The width of the connection's local object indices in the section.
    pub index_width: u32,
    /// The packet's ordinal modulo the baseline slots: a nomination takes its slot
    /// from it. (Connections that joined at other times number their packets
    /// differently; what a packet writes depends only on this phase.)
    pub slot_phase: u8,
    /// The configuration the write reads: scheduling threshold (its bits), partial
    /// sort count, smallest batch, fit failures.
    pub config: (u32, usize, usize, u32),
    /// The write schedules the dirty objects afresh (otherwise it continues the
    /// schedule of the tick's earlier packets, which is compared by the id of its
    /// contents).
    pub rebuilds: bool,
}

/// A connection about to write a section, as a trace compares it.
pub(crate) struct Candidate<'a> {
    pub connection: ConnectionId,
    pub inputs: SectionInputs,
    /// Its synced masks (baseline words name them by index).
    pub synced: &'a [ChangeMask],
    pub dirty: &'a BitArray,
    pub schedule: &'a Schedule,
    /// Its send states, when it holds a shared copy (see `group`).
    pub sends: Option<&'a Arc<SendStates>>,
    /// Its per-object baselines, when it holds a shared copy.
    pub baseline_words: Option<&'a Arc<ObjectWords>>,
    /// The moves of shared states logged on its writer thread in the pass: a copy
    /// logged as moved by a trace's section passed that trace's comparison of states
    /// (a group of another thread, found equal to the leader's copy by value once).
    pub moves: Option<(&'a Transitions, &'a Transitions<ObjectWords>)>,
}

/// Whether `held` (a candidate's shared copy) passes a trace's comparison of states:
/// it is the leader's copy from `before`, or one `log` holds a move of with the
/// trace's `event`.
fn holds_leaders<T: PartialEq>(
    held: Option<&Arc<T>>,
    before: Option<&Arc<T>>,
    log: Option<&Transitions<T>>,
    event: Event<'_>,
) -> bool {
    held.is_some_and(|held| {
        before.is_some_and(|b| Arc::ptr_eq(held, b)) || log.is_some_and(|l| l.logged(held, event))
    })
}

/// One recorded objects section: its inputs, its bits and the states it left.
#[derive(Debug, Default, Clone)]
pub(crate) struct PacketTrace {
    /// The connection that wrote it.
    pub leader: ConnectionId,
    /// `None`: the trace matches nothing (being recorded, or not a section a trace
    /// can hold).
    pub inputs: Option<SectionInputs>,
    /// The leader's synced masks.
    pub synced: Vec<ChangeMask>,
    /// The dirty set before the packet, and after.
    pub dirty: [BitArray; 2],
    /// A continued schedule's section reads and changes the dirty bits only in these
    /// words (by index, before and after): they are compared and taken instead of the
    /// whole set.
    pub dirty_words: Vec<(u32, [u64; 2])>,
    /// The dirty objects, in index order.
    pub objects: Vec<TracedObject>,
    /// The positions in [`objects`](Self::objects) of those whose state the section
    /// changed: a replay takes only theirs (the others' it compared equal).
    pub changed: Vec<u32>,
    /// The owners of the conditional objects written (a connection among them would
    /// receive other members).
    pub owners: Vec<ConnectionId>,
    /// The section's bits.
    pub words: Vec<u64>,
    pub bits: usize,
    pub result: Option<WriteResult>,
    /// The schedule before the packet (compared when continued), and after.
    pub schedule: [Schedule; 2],
    /// The packet record, shared by every connection that replays the section.
    pub record: Option<std::sync::Arc<PacketRecord>>,
    /// What the packet added to the counters.
    pub stats: WriterStats,
    pub baselines: BaselinesTail,
    /// Batches planned with and without a reference (the tick cache's counts).
    pub batch_counts: (u64, u64),
    /// The recording's number, unique in the process (a trace's place is recorded
    /// over once all are in use, and a thread adopts the traces of others).
    pub serial: u64,
    /// The leader's send states before the section, if shared, and after (see
    /// `group`): a connection holding the same copy before takes the copy after.
    pub states: [Option<Arc<SendStates>>; 2],
    /// The same for the leader's per-object baselines.
    pub baseline_words: [Option<Arc<ObjectWords>>; 2],
}

impl PacketTrace {
    /// Whether `candidate`'s dirty set is the leader's where the section reads it: all
    /// of it for a fresh schedule, the noted words for a continued one.
    fn same_dirty(&self, candidate: &Candidate<'_>) -> bool {
        if candidate.inputs.rebuilds {
            candidate.dirty.same_bits(&self.dirty[0])
        } else {
            self.dirty_words
                .iter()
                .all(|&(k, [before, _])| candidate.dirty.word(k as usize) == before)
        }
    }

    /// Makes `dirty` the dirty set the section leaves (see [`same_dirty`](Self::same_dirty)).
    pub(crate) fn take_dirty(&self, dirty: &mut BitArray, rebuilds: bool) {
        if rebuilds {
            dirty.clone_from(&self.dirty[1]);
        } else {
            for &(k, [_, after]) in &self.dirty_words {
                dirty.set_word(k as usize, after);
            }
        }
    }

    /// Whether `candidate`, with per-object state read by `info` (send state with
    /// priority) and `baselines` (baseline word), would write this section.
    pub(crate) fn matches(
        &self,
        candidate: &Candidate<'_>,
        info: impl Fn(InternalIndex) -> Option<ReplicationInfo>,
        baselines: impl Fn(InternalIndex) -> u64,
    ) -> bool {
        // Holding the leader's send states from before the section (the same copy, or
        // one that passed), the candidate's dirty set and send states are the leader's
        // where the section reads them.
        let event = Event::Replay {
            serial: self.serial,
        };
        let (sends_log, words_log) = candidate.moves.unzip();
        let leaders_sends =
            holds_leaders(candidate.sends, self.states[0].as_ref(), sends_log, event);
        if candidate.connection == self.leader
            || self.inputs != Some(candidate.inputs)
            || candidate.synced != self.synced.as_slice()
            || (!leaders_sends && !self.same_dirty(candidate))
            || (!candidate.inputs.rebuilds && !candidate.schedule.same_remaining(&self.schedule[0]))
            || self.owners.binary_search(&candidate.connection).is_ok()
        {
            return false;
        }
        // Likewise for its baselines.
        let leaders_words = holds_leaders(
            candidate.baseline_words,
            self.baseline_words[0].as_ref(),
            words_log,
            event,
        );
        // What it holds of the leader's passes as a whole; the rest, object by object.
        (leaders_sends && leaders_words)
            || self.objects.iter().all(|o| {
                (leaders_sends || info(o.index) == Some(o.info[0]))
                    && (leaders_words || !o.visited || baselines(o.index) == o.baselines[0])
            })
    }
}

/// A trace [`Replays::find`] found: one this thread recorded (by index), or the one
/// it adopted from another thread ([`Replays::adopt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TraceRef {
    Own(usize),
    Adopted,
}

/// A write pass's traces (see the module documentation), reused from pass to pass.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    /// Shared with the pass's other writer threads once published (see
    /// [`recorded_since`](Self::recorded_since)); unique again once they end the pass.
    traces: Vec<Arc<PacketTrace>>,
    /// Another writer thread's trace of the pass, replayed like this thread's own.
    adopted: Option<Arc<PacketTrace>>,
    /// Traces in use this pass (the others are spare allocations).
    live: usize,
    /// The next trace to record over when all are in use.
    next: usize,
    /// The trace recorded last.
    newest: usize,
    /// Traces recorded in a row that nobody replayed.
    unused: u32,
    /// Sections replayed, and batches in them, since the server started.
    replayed: (u64, u64),
    /// The pass writes one packet: nothing to record.
    alone: bool,
    /// Traces recorded since the server started.
    recorded: u64,
    /// A trace may hold states to let go of: one was written since the last
    /// [`end_pass`](Self::end_pass), or another thread held one then. (Otherwise
    /// ending a pass checks no trace: the server ends passes for every change of an
    /// object's state, and checking a trace takes an atomic operation.)
    written: bool,
}

impl Replays {
    /// Starts a write pass's share of `packets` packets: with fewer than two, no
    /// connection could replay a trace, and none is recorded.
    pub(crate) fn begin_pass(&mut self, packets: usize) {
        self.end_pass();
        self.alone = packets < 2;
    }

    /// Forgets the pass's traces (the storage and tables they read change between
    /// passes), and lets go of the send states they hold where no other thread holds
    /// the trace still (a leader's next change would copy them).
    pub(crate) fn end_pass(&mut self) {
        self.live = 0;
        self.next = 0;
        self.unused = 0;
        self.adopted = None;
        if !self.written {
            return;
        }
        // A trace another thread still holds lets go of its states at a later end.
        self.written = false;
        for t in &mut self.traces {
            match Arc::get_mut(t) {
                Some(t) => {
                    t.states = [None, None];
                    t.baseline_words = [None, None];
                }
                None => self.written = true,
            }
        }
    }

    /// Traces recorded since the server started (see [`recorded_since`](Self::recorded_since)).
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded
    }

    /// The trace recorded last, if complete and recorded after `recorded` traces
    /// ([`recorded`](Self::recorded)): to share with the pass's other writer threads
    /// ([`adopt`](Self::adopt)).
    pub(crate) fn recorded_since(&self, recorded: u64) -> Option<Arc<PacketTrace>> {
        let t = self
            .traces
            .get(self.newest)
            .filter(|_| self.recorded > recorded)?;
        t.inputs.is_some().then(|| Arc::clone(t))
    }

    /// Replays another writer thread's trace of the pass too.
    pub(crate) fn adopt(&mut self, trace: Option<Arc<PacketTrace>>) {
        self.adopted = trace;
    }

    /// The index of the first live trace a connection's section matches: this
    /// thread's, newest first, then the adopted one.
    pub(crate) fn find(
        &self,
        candidate: &Candidate<'_>,
        info: impl Fn(InternalIndex) -> Option<ReplicationInfo>,
        baselines: impl Fn(InternalIndex) -> u64,
    ) -> Option<TraceRef> {
        // The newest first: connections in step are written one after the other.
        (0..self.live)
            .rev()
            .find(|&i| self.traces[i].matches(candidate, &info, &baselines))
            .map(TraceRef::Own)
            .or_else(|| {
                self.adopted
                    .as_ref()
                    .filter(|t| t.matches(candidate, &info, &baselines))
                    .map(|_| TraceRef::Adopted)
            })
    }

    /// The trace `found` names ([`find`](Self::find)), counted as replayed.
    pub(crate) fn replay(&mut self, found: TraceRef) -> Option<&PacketTrace> {
        self.unused = 0;
        let t = match found {
            TraceRef::Own(i) => self.traces.get(i)?,
            TraceRef::Adopted => self.adopted.as_deref()?,
        };
        self.replayed.0 += 1;
        self.replayed.1 += t.record.as_ref().map_or(0, |r| r.infos.len() as u64);
        Some(t)
    }

    /// A trace to record into, by index (its previous contents are overwritten by the
    /// caller); `None` when recording is not worth it now.
    pub(crate) fn begin(&mut self) -> Option<usize> {
        if self.alone || self.unused >= MAX_UNUSED_TRACES {
            return None;
        }
        let i = if self.live < MAX_TRACES {
            self.live += 1;
            self.live - 1
        } else {
            let i = self.next;
            self.next = (self.next + 1) % MAX_TRACES;
            i
        };
        if self.traces.len() <= i {
            self.traces.resize_with(i + 1, Arc::default);
        }
        self.recorded += 1;
        self.newest = i;
        let t = self.trace_mut(i);
        t.inputs = None;
        // Unique in the process: a thread may adopt traces of several others.
        t.serial = SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        t.states = [None, None];
        Some(i)
    }

    /// The trace at `i`, being recorded (a copy if another thread still held it: it
    /// does not, once every thread ended the pass it was shared in).
    pub(crate) fn trace_mut(&mut self, i: usize) -> &mut PacketTrace {
        self.written = true;
        Arc::make_mut(&mut self.traces[i])
    }

    /// Ends a recording `begin` started: a complete trace (one that holds its inputs)
    /// counts as unused until a connection replays it; an incomplete one matches
    /// nothing (`begin` cleared its inputs).
    pub(crate) fn end(&mut self, complete: bool) {
        if complete {
            self.unused += 1;
        }
    }

    /// Sections replayed and the batches in them, since the server started.
    pub(crate) fn counts(&self) -> (u64, u64) {
        self.replayed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> SectionInputs {
        SectionInputs {
            bits_left: 9000,
            index_width: 7,
            slot_phase: 7,
            config: (0, 64, 24, 8),
            rebuilds: true,
        }
    }

    /// A fresh send state with priority `p`.
    fn prioritized(p: f32) -> ReplicationInfo {
        let mut info = ReplicationInfo::default();
        info.set_priority(p);
        info
    }

    /// Records a trace of connection `leader` with dirty objects 2 and 5.
    fn record(r: &mut Replays, leader: ConnectionId, dirty: &BitArray) -> Option<usize> {
        let i = r.begin()?;
        let t = r.trace_mut(i);
        t.leader = leader;
        t.dirty[0].clone_from(dirty);
        t.objects.clear();
        for index in dirty.iter() {
            t.objects.push(TracedObject {
                index,
                // Object 5 was only scheduled: the write did not reach it.
                visited: index != 5,
                info: [prioritized(1.0); 2],
                baselines: [u64::from(index); 2],
            });
        }
        t.inputs = Some(inputs());
        r.end(true);
        Some(i)
    }

    fn dirty() -> BitArray {
        let mut d = BitArray::default();
        d.set(2);
        d.set(5);
        d
    }

    #[test]
    fn a_trace_another_thread_held_lets_go_of_its_states_at_a_later_end() {
        let mut r = Replays::default();
        r.begin_pass(3);
        let i = record(&mut r, 0, &dirty()).unwrap();
        let states = Arc::new(SendStates::default());
        r.trace_mut(i).states = [Some(Arc::clone(&states)), None];
        let held = r.recorded_since(0);
        assert!(held.is_some(), "shared with another thread");
        r.end_pass();
        assert_eq!(
            Arc::strong_count(&states),
            2,
            "kept while the other holds it"
        );
        drop(held);
        // No trace written since: the end still lets go of the states.
        r.end_pass();
        assert_eq!(Arc::strong_count(&states), 1);
        r.end_pass();
        assert!(!r.written, "nothing left to let go of");
    }

    #[test]
    fn another_threads_trace_is_replayed_once_adopted_until_the_pass_ends() {
        let d = dirty();
        let mut calling = Replays::default();
        calling.begin_pass(3);
        let before = calling.recorded();
        assert!(
            calling.recorded_since(before).is_none(),
            "nothing recorded yet"
        );
        record(&mut calling, 0, &d).unwrap();
        let shared = calling.recorded_since(before);
        assert!(shared.is_some());
        assert!(
            calling.recorded_since(before + 1).is_none(),
            "recorded before"
        );
        let mut other = Replays::default();
        other.begin_pass(3);
        let schedule = Schedule::default();
        let candidate = Candidate {
            connection: 2,
            inputs: inputs(),
            synced: &[],
            dirty: &d,
            schedule: &schedule,
            sends: None,
            baseline_words: None,
            moves: None,
        };
        let same = |_| Some(prioritized(1.0));
        let own = |index: InternalIndex| u64::from(index);
        assert_eq!(other.find(&candidate, same, own), None);
        other.adopt(shared);
        let i = other.find(&candidate, same, own);
        assert_eq!(i, Some(TraceRef::Adopted));
        assert_eq!(other.replay(TraceRef::Adopted).map(|t| t.leader), Some(0));
        assert_eq!(other.counts().0, 1, "counted where it was replayed");
        other.end_pass();
        assert_eq!(other.find(&candidate, same, own), None, "the pass ended");
        // Shared no more: the calling thread records over it in place.
        calling.begin_pass(3);
        let j = calling.begin().unwrap();
        assert!(Arc::get_mut(&mut calling.traces[j]).is_some());
    }

    #[test]
    fn a_trace_matches_another_connection_with_equal_inputs_and_states() {
        let mut r = Replays::default();
        r.begin_pass(3);
        let d = dirty();
        let i = record(&mut r, 0, &d).unwrap();
        let schedule = Schedule::default();
        let candidate = |connection, inputs, dirty| Candidate {
            connection,
            inputs,
            synced: &[],
            dirty,
            schedule: &schedule,
            sends: None,
            baseline_words: None,
            moves: None,
        };
        let same = |_| Some(prioritized(1.0));
        let own = |index: InternalIndex| u64::from(index);
        assert_eq!(
            r.find(&candidate(1, inputs(), &d), same, own),
            Some(TraceRef::Own(i))
        );
        assert_eq!(
            r.find(&candidate(0, inputs(), &d), same, own),
            None,
            "not its own"
        );
        let other = SectionInputs {
            slot_phase: 0,
            ..inputs()
        };
        assert_eq!(r.find(&candidate(1, other, &d), same, own), None);
        let mut more = dirty();
        more.set(6);
        assert_eq!(r.find(&candidate(1, inputs(), &more), same, own), None);
        let lower = |_| Some(prioritized(0.5));
        assert_eq!(r.find(&candidate(1, inputs(), &d), lower, own), None);
        // Baselines count only where the write looked.
        let other_at = |at: InternalIndex| {
            move |index: InternalIndex| u64::from(index) + u64::from(index == at)
        };
        assert_eq!(
            r.find(&candidate(1, inputs(), &d), same, other_at(2)),
            None,
            "a written object's baselines differ"
        );
        assert_eq!(
            r.find(&candidate(1, inputs(), &d), same, other_at(5)),
            Some(TraceRef::Own(i)),
            "only an unvisited object's baselines differ"
        );
        assert!(
            r.replay(TraceRef::Own(i))
                .is_some_and(|t| t.record.is_none())
        );
        assert_eq!(
            r.counts(),
            (1, 0),
            "a trace without a record has no batches"
        );
        // The pass ends: nothing left to match.
        r.end_pass();
        assert_eq!(r.find(&candidate(1, inputs(), &d), same, own), None);
    }

    #[test]
    fn a_candidate_holding_the_leaders_states_compares_only_what_it_does_not_share() {
        let mut r = Replays::default();
        r.begin_pass(3);
        let d = dirty();
        let i = record(&mut r, 0, &d).unwrap();
        let leaders = Arc::new(SendStates::default());
        let leaders_words = Arc::new(ObjectWords::default());
        r.trace_mut(i).states[0] = Some(Arc::clone(&leaders));
        r.trace_mut(i).baseline_words[0] = Some(Arc::clone(&leaders_words));
        let schedule = Schedule::default();
        let empty = BitArray::default();
        let candidate = |sends, baseline_words| Candidate {
            connection: 1,
            inputs: inputs(),
            synced: &[],
            // Neither the dirty set nor the send states below are the leader's: they
            // are read only by a candidate holding another copy.
            dirty: &empty,
            schedule: &schedule,
            sends,
            baseline_words,
            moves: None,
        };
        let other = |_| Some(prioritized(9.0));
        let same = |_| Some(prioritized(1.0));
        let own = |index: InternalIndex| u64::from(index);
        let moved = |index: InternalIndex| u64::from(index) + 1;
        let found = Some(TraceRef::Own(i));
        assert_eq!(r.find(&candidate(Some(&leaders), None), other, own), found);
        let copy = Arc::new(SendStates::default());
        assert_eq!(r.find(&candidate(Some(&copy), None), other, own), None);
        assert_eq!(r.find(&candidate(None, None), other, own), None);
        // The baselines are the candidate's own: compared still.
        assert_eq!(r.find(&candidate(Some(&leaders), None), other, moved), None);
        // Holding the leader's baselines too, it compares nothing per object.
        let both = candidate(Some(&leaders), Some(&leaders_words));
        assert_eq!(r.find(&both, other, moved), found);
        // Holding only the leader's baselines, it compares its send states.
        let words_only = candidate(None, Some(&leaders_words));
        let dirty_too = Candidate {
            dirty: &d,
            ..words_only
        };
        assert_eq!(r.find(&dirty_too, same, moved), found);
        assert_eq!(r.find(&dirty_too, other, moved), None);
        let copy_words = Arc::new(ObjectWords::default());
        let stranger = Candidate {
            dirty: &d,
            ..candidate(None, Some(&copy_words))
        };
        assert_eq!(r.find(&stranger, same, moved), None);
        // Copies the thread logged as moved by this trace's section passed its
        // comparison: they compare nothing per object either. Moved by another
        // section, they compare.
        let serial = r.trace_mut(i).serial;
        let mut sends_log = Transitions::default();
        let mut words_log = Transitions::<ObjectWords>::default();
        let moved_by = |serial| Event::Replay { serial };
        fn logged<'a>(
            c: Candidate<'a>,
            sends: &'a Transitions,
            words: &'a Transitions<ObjectWords>,
        ) -> Candidate<'a> {
            Candidate {
                moves: Some((sends, words)),
                ..c
            }
        }
        let held = || candidate(Some(&copy), Some(&copy_words));
        assert_eq!(
            r.find(&logged(held(), &sends_log, &words_log), other, moved),
            None
        );
        sends_log.log(
            Arc::clone(&copy),
            moved_by(serial + 1),
            Arc::clone(&copy),
            true,
        );
        words_log.log(
            Arc::clone(&copy_words),
            moved_by(serial + 1),
            Arc::clone(&copy_words),
            true,
        );
        assert_eq!(
            r.find(&logged(held(), &sends_log, &words_log), other, moved),
            None
        );
        sends_log.log(Arc::clone(&copy), moved_by(serial), Arc::clone(&copy), true);
        assert_eq!(
            r.find(&logged(held(), &sends_log, &words_log), other, moved),
            None
        );
        assert_eq!(
            r.find(&logged(held(), &sends_log, &words_log), other, own),
            found
        );
        words_log.log(
            Arc::clone(&copy_words),
            moved_by(serial),
            Arc::clone(&copy_words),
            true,
        );
        assert_eq!(
            r.find(&logged(held(), &sends_log, &words_log), other, moved),
            found
        );
    }

    #[test]
    fn a_continued_section_compares_and_takes_only_the_dirty_words_it_read() {
        let mut r = Replays::default();
        r.begin_pass(3);
        let continued = SectionInputs {
            rebuilds: false,
            ..inputs()
        };
        let d = dirty();
        let i = r.begin().unwrap();
        let t = r.trace_mut(i);
        t.leader = 0;
        t.dirty[0].clone_from(&d);
        t.objects.clear();
        // The write read word 0 (objects 2 and 5, written: both clean after).
        t.dirty_words = vec![(0, [0b10_0100, 0])];
        t.inputs = Some(continued);
        r.end(true);
        let schedule = Schedule::default();
        let find = |dirty: &BitArray| {
            let c = Candidate {
                connection: 1,
                inputs: continued,
                synced: &[],
                dirty,
                schedule: &schedule,
                sends: None,
                baseline_words: None,
                moves: None,
            };
            r.find(&c, |_| None, |_| 0)
        };
        // Another word differs: not read, not compared.
        let mut elsewhere = dirty();
        elsewhere.set(700);
        assert_eq!(find(&elsewhere), Some(TraceRef::Own(i)));
        // Object 3, in the word read, is dirty here only: the write would have seen it.
        let mut more = dirty();
        more.set(3);
        assert_eq!(find(&more), None);
        // Taking the section clears the word and leaves the rest.
        r.replay(TraceRef::Own(i))
            .expect("the trace found")
            .take_dirty(&mut elsewhere, false);
        assert_eq!(elsewhere.iter().collect::<Vec<_>>(), [700]);
    }

    #[test]
    fn passes_of_one_and_traces_nobody_takes_stop_the_recording() {
        let mut r = Replays::default();
        r.begin_pass(1);
        assert_eq!(r.begin(), None, "a pass of one packet");
        r.begin_pass(100);
        let d = dirty();
        for _ in 0..MAX_UNUSED_TRACES {
            assert!(record(&mut r, 0, &d).is_some());
        }
        assert_eq!(r.begin(), None, "too many traces went unused");
        // A replay resets the count; the ring reuses its oldest trace.
        r.replay(TraceRef::Own(0));
        assert!(record(&mut r, 0, &d).is_some());
        // A spoiled recording matches nothing.
        let i = r.begin().unwrap();
        r.end(false);
        assert!(r.trace_mut(i).inputs.is_none());
    }
}
