//! Connection groups: connections in step share one copy of their per-object states.
//!
//! A writer's send states (one [`ReplicationInfo`] per object, the dirty set and the
//! pool of wide change masks) and its per-object baselines (see `baseline`) are the
//! per-object state every packet reads and most packets change. Connections whose acks
//! are in step hold equal states and move them the same way, so each keeping its own
//! copy costs a cache miss per dirty object and connection for nothing. Here the copy
//! is shared, copy-on-write:
//!
//! - [`Shared`] is a writer's handle: its own copy, or one shared with the connections
//!   in step. Reading is the same either way; the first change made to a shared copy
//!   makes it the writer's own ([`DerefMut`](std::ops::DerefMut)), so a writer that
//!   leaves step never changes anyone else's state.
//! - In a write pass, the first connection to move a shared copy with an event (the
//!   tick's changes, a replayed objects section, the fates of its packets) logs the
//!   copy before and after in its thread's log ([`Transitions`], and the baselines'
//!   own log of fates). A connection holding the very same copy (by pointer) meets the
//!   same event and takes the logged result instead of working through its objects.
//!   Moving the states is a pure function of the states and the event, so what it
//!   takes is what it would have computed ([`replay_move`]).
//! - A connection joins a group by equality: after it replays an objects section on
//!   its own copy, a copy equal to the section leader's result is dropped for the
//!   leader's (now and then, [`JoinWait`]).
//! - A large per-object table is [`Chunked`]: a group's leader moving it on copies the
//!   chunks its packet changed, not the whole table.
//!
//! Every copy a log or a handle names is kept alive by it, so pointer identity never
//! confuses a freed copy with a new one.

use super::record::{MaskPool, ReplicationInfo};
use crate::serialize::BitArray;
use std::sync::Arc;

/// A writer's per-object send states.
#[derive(Debug, Default, Clone)]
pub(crate) struct SendStates {
    /// Per object (by internal index): lifecycle state, owed change mask, priority.
    pub infos: InfoTable,
    /// The objects with something to send.
    pub dirty: BitArray,
    /// The change masks too wide for an info's inline bits.
    pub pool: MaskPool,
}

impl PartialEq for SendStates {
    fn eq(&self, other: &Self) -> bool {
        // The cheap parts first.
        self.dirty.same_bits(&other.dirty) && self.pool == other.pool && self.infos == other.infos
    }
}

impl CopyOnWrite for SendStates {
    fn freeze(&mut self) {
        self.infos.freeze();
    }
}

/// The per-object [`ReplicationInfo`]s of a writer's send states, by internal index:
/// a packet changes those of the objects it carries, so a group's leader moving a
/// shared copy on copies their chunks only.
pub(crate) type InfoTable = Chunked<ReplicationInfo>;

impl InfoTable {
    /// The accumulated priority of object `index` (0 for none).
    #[inline]
    pub(crate) fn priority(&self, index: u32) -> f32 {
        self.get(index as usize)
            .map_or(0.0, ReplicationInfo::priority)
    }
}

/// A writer's send states: its own copy, or one shared with connections in step.
pub(crate) type SharedSendStates = Shared<SendStates>;

/// What a [`Shared`] handle holds: copied when a shared copy is to change.
pub(crate) trait CopyOnWrite: Clone + Default {
    /// Readies the states to be shared: parts that copies of them can share (see
    /// [`Chunked`]) are made shareable.
    fn freeze(&mut self) {}
}

/// Per-connection state that connections in step share, copy-on-write: the
/// connection's own copy, or one shared with others.
#[derive(Debug)]
pub(crate) struct Shared<T> {
    states: Holding<T>,
    /// Copies made of a shared copy so that it could change.
    copies: u64,
}

#[derive(Debug)]
enum Holding<T> {
    Own(T),
    Shared(Arc<T>),
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Self {
            states: Holding::Own(T::default()),
            copies: 0,
        }
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        match &self.states {
            Holding::Own(s) => s,
            Holding::Shared(s) => s,
        }
    }
}

impl<T: CopyOnWrite> std::ops::DerefMut for Shared<T> {
    /// The writer's own copy, made from the shared one first if need be.
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        match self.states {
            Holding::Own(ref mut s) => s,
            Holding::Shared(_) => self.unshare(),
        }
    }
}

impl<T: CopyOnWrite> Shared<T> {
    /// Makes the shared copy these states' own: taken as it is when nothing else
    /// holds it, copied otherwise.
    #[cold]
    #[inline(never)]
    fn unshare(&mut self) -> &mut T {
        let own = match std::mem::replace(&mut self.states, Holding::Own(T::default())) {
            Holding::Own(s) => s,
            Holding::Shared(s) => Arc::try_unwrap(s).unwrap_or_else(|s| {
                self.copies += 1;
                T::clone(&s)
            }),
        };
        self.states = Holding::Own(own);
        match &mut self.states {
            Holding::Own(s) => s,
            // (Not reached: made own above.)
            Holding::Shared(s) => Arc::make_mut(s),
        }
    }

    /// Makes these states shareable (the own copy moves behind an `Arc`: no copy) and
    /// returns the shared copy.
    pub(crate) fn publish(&mut self) -> Arc<T> {
        let shared = match std::mem::replace(&mut self.states, Holding::Own(T::default())) {
            Holding::Own(s) => Arc::new(s),
            Holding::Shared(s) => s,
        };
        self.states = Holding::Shared(Arc::clone(&shared));
        shared
    }

    /// [`publish`](Self::publish) for states that others are expected to take: their
    /// parts that copies can share are made shareable first
    /// ([`CopyOnWrite::freeze`]), so that this writer's next change copies only what
    /// it changes. (Freezing states nobody takes would make that change copy them.)
    pub(crate) fn publish_frozen(&mut self) -> Arc<T> {
        if let Holding::Own(s) = &mut self.states {
            s.freeze();
        }
        self.publish()
    }

    /// Takes the states out, leaving empty ones of its own.
    pub(crate) fn take(&mut self) -> T {
        match std::mem::replace(&mut self.states, Holding::Own(T::default())) {
            Holding::Own(s) => s,
            Holding::Shared(s) => Arc::unwrap_or_clone(s),
        }
    }
}

impl<T> Shared<T> {
    /// The shared copy, if these states are one.
    #[inline]
    pub(crate) fn shared(&self) -> Option<&Arc<T>> {
        match &self.states {
            Holding::Shared(s) => Some(s),
            Holding::Own(_) => None,
        }
    }

    /// The shared copy, if another holder shares it (a connection, a trace or a log):
    /// a change would copy it.
    #[inline]
    pub(crate) fn shared_with_others(&self) -> Option<&Arc<T>> {
        self.shared().filter(|s| Arc::strong_count(s) > 1)
    }

    /// Whether these states are the shared copy `other`, by pointer.
    #[inline]
    pub(crate) fn is(&self, other: &Arc<T>) -> bool {
        self.shared().is_some_and(|s| Arc::ptr_eq(s, other))
    }

    /// Takes the shared copy `states` for these states (they are equal to it).
    pub(crate) fn adopt(&mut self, states: Arc<T>) {
        self.states = Holding::Shared(states);
    }

    /// Copies made of a shared copy so that it could change, since the writer started.
    pub(crate) fn copies(&self) -> u64 {
        self.copies
    }
}

/// Copies of one kind of per-connection state (see [`GroupCopies`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateCopies {
    /// Distinct copies the open connections hold: one per group of connections in
    /// step, one per connection out of step.
    pub held: usize,
    /// Copies made of a shared copy so that it could change, since the connections
    /// opened (a group's leader moving it on, or a connection leaving step).
    pub made: u64,
}

/// Connection groups: copies of the per-connection states that connections in step
/// share ([`ReplicationServer::group_copies`](super::ReplicationServer::group_copies)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCopies {
    /// Send states (per object: lifecycle, owed changes, priority; the dirty set).
    pub send_states: StateCopies,
    /// Per-object baselines (the acknowledged baseline and the slots in flight).
    pub baselines: StateCopies,
}

/// The copies `handles` hold (shared ones counted once) and made.
pub(crate) fn count_copies<'a, T: 'a>(handles: impl Iterator<Item = &'a Shared<T>>) -> StateCopies {
    let mut shared = Vec::new();
    let mut copies = StateCopies::default();
    for h in handles {
        copies.made += h.copies();
        match h.shared() {
            Some(s) => shared.push(Arc::as_ptr(s)),
            None => copies.held += 1,
        }
    }
    shared.sort_unstable();
    shared.dedup();
    copies.held += shared.len();
    copies
}

/// Entries per chunk of a [`Chunked`] vector. A packet changes the entries of a few
/// hundred objects, so in a table of many objects most chunks stay shared.
const CHUNK: usize = 512;

/// A block of a [`Chunked`] vector.
#[derive(Debug)]
enum Chunk<T> {
    /// Changed since the vector was last frozen: its own.
    Own(Box<[T; CHUNK]>),
    /// Shared with copies of the vector: copied before it changes.
    Shared(Arc<[T; CHUNK]>),
}

impl<T: Copy> Clone for Chunk<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Own(b) => Self::Own(b.clone()),
            Self::Shared(a) => Self::Shared(Arc::clone(a)),
        }
    }
}

impl<T> Chunk<T> {
    #[inline(always)]
    fn block(&self) -> &[T; CHUNK] {
        match self {
            Self::Own(b) => b,
            Self::Shared(a) => a,
        }
    }
}

/// A vector of plain entries that its copies share by chunks: copying it copies the
/// chunks changed since it was last [frozen](Self::freeze) and shares the others, and
/// changing an entry of a shared chunk copies that chunk only. A large per-object
/// table that connections in step share (see [`Shared`]) then costs its leader a copy
/// of what a packet changed, not of the whole table.
#[derive(Debug)]
pub(crate) struct Chunked<T> {
    chunks: Vec<Chunk<T>>,
    len: usize,
    /// The chunks made own since the last freeze, by index.
    own: Vec<u32>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
            own: Vec::new(),
        }
    }
}

impl<T: Copy> Clone for Chunked<T> {
    fn clone(&self) -> Self {
        Self {
            chunks: self.chunks.clone(),
            len: self.len,
            own: self.own.clone(),
        }
    }
}

impl<T: Copy + PartialEq> PartialEq for Chunked<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .chunks
                .iter()
                .zip(&other.chunks)
                .enumerate()
                .all(|(k, (a, b))| {
                    let used = (self.len - k * CHUNK).min(CHUNK);
                    matches!((a, b), (Chunk::Shared(a), Chunk::Shared(b)) if Arc::ptr_eq(a, b))
                        || a.block()[..used] == b.block()[..used]
                })
    }
}

impl<T: Copy> Chunked<T> {
    /// The number of entries.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The entry at `i`.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        let chunk = self.chunks.get(i / CHUNK)?;
        (i < self.len).then(|| &chunk.block()[i % CHUNK])
    }

    /// The entry at `i`, its chunk made own first if shared.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        Some(&mut self.chunk_mut(i / CHUNK)?[i % CHUNK])
    }

    /// The entry at `i`, grown to it with `value` first if need be.
    #[inline(always)]
    pub(crate) fn get_mut_or_grow(&mut self, i: usize, value: T) -> Option<&mut T> {
        if i >= self.len {
            self.grow(i + 1, value);
        }
        self.get_mut(i)
    }

    /// Chunk `k`, made own first if shared.
    #[inline(always)]
    fn chunk_mut(&mut self, k: usize) -> Option<&mut [T; CHUNK]> {
        if let Some(Chunk::Shared(_)) = self.chunks.get(k) {
            self.own_chunk(k);
        }
        match self.chunks.get_mut(k)? {
            Chunk::Own(b) => Some(b),
            Chunk::Shared(_) => None,
        }
    }

    /// Makes shared chunk `k` this vector's own (a copy).
    #[cold]
    #[inline(never)]
    fn own_chunk(&mut self, k: usize) {
        if let Some(Chunk::Shared(a)) = self.chunks.get(k) {
            self.chunks[k] = Chunk::Own(Box::new(**a));
            self.own.push(k as u32);
        }
    }

    /// Grows to `len` entries, the new ones `value`.
    #[inline(never)]
    pub(crate) fn grow(&mut self, len: usize, value: T) {
        while self.len < len {
            let k = self.len / CHUNK;
            let end = (len - k * CHUNK).min(CHUNK);
            if k == self.chunks.len() {
                self.chunks.push(Chunk::Own(Box::new([value; CHUNK])));
                self.own.push(k as u32);
            } else {
                let from = self.len % CHUNK;
                if let Some(chunk) = self.chunk_mut(k) {
                    chunk[from..end].fill(value);
                }
            }
            self.len = k * CHUNK + end;
        }
    }

    /// The entries, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks
            .iter()
            .flat_map(|c| c.block().iter())
            .take(self.len)
    }

    /// Makes the chunks changed since the last freeze shareable: copies of the
    /// vector made from now on share them.
    pub(crate) fn freeze(&mut self) {
        for k in self.own.drain(..) {
            if let Some(c) = self.chunks.get_mut(k as usize)
                && let Chunk::Own(b) = c
            {
                *c = Chunk::Shared(Arc::new(**b));
            }
        }
    }
}

impl<T: Copy> std::ops::Index<usize> for Chunked<T> {
    type Output = T;

    /// The entry at `i` (panics past the end, as a slice does).
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(entry) => entry,
            None => panic!("index {i} past {} entries", self.len),
        }
    }
}

impl<T: Copy> std::ops::IndexMut<usize> for Chunked<T> {
    /// The entry at `i`, its chunk made own first if shared (panics past the end, as a
    /// slice does).
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        let len = self.len;
        match self.get_mut(i) {
            Some(entry) => entry,
            None => panic!("index {i} past {len} entries"),
        }
    }
}

/// An event a write pass moves send states with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event<'a> {
    /// The tick's changes taken by a connection with this scope (the excluded roots),
    /// whose schedule was valid or not before.
    CatchUp {
        excluded: &'a BitArray,
        schedule_valid: bool,
    },
    /// The objects section of a trace, replayed: the trace is named by its serial
    /// number, unique in the process (a trace's place is recorded over once all are
    /// in use, and a thread replays other threads' traces too).
    Replay { serial: u64 },
}

/// An [`Event`] as the log keeps it.
#[derive(Debug, Clone)]
enum LoggedEvent {
    CatchUp {
        excluded: BitArray,
        schedule_valid: bool,
    },
    Replay {
        serial: u64,
    },
}

impl LoggedEvent {
    fn new(event: Event<'_>) -> Self {
        match event {
            Event::CatchUp {
                excluded,
                schedule_valid,
            } => Self::CatchUp {
                excluded: excluded.clone(),
                schedule_valid,
            },
            Event::Replay { serial } => Self::Replay { serial },
        }
    }

    fn matches(&self, event: Event<'_>) -> bool {
        match (self, event) {
            (
                Self::CatchUp {
                    excluded: a,
                    schedule_valid: va,
                },
                Event::CatchUp {
                    excluded: b,
                    schedule_valid: vb,
                },
            ) => *va == vb && a.same_bits(b),
            (Self::Replay { serial }, Event::Replay { serial: n }) => *serial == n,
            _ => false,
        }
    }
}

/// A move of a shared copy logged in a write pass (see [`MoveLog`]).
pub(crate) trait LoggedMove {
    /// What the copies hold.
    type States;
    /// The copy the move started from.
    fn before(&self) -> &Arc<Self::States>;
    /// The same move, logged from `before`, another copy holding the same states.
    fn for_copy(&self, before: Arc<Self::States>) -> Self;
    /// The copy the move ended at.
    fn after(&self) -> &Arc<Self::States>;
}

/// The moves of shared copies logged in a write pass on one thread: the first
/// connection to move a copy shared with others logs the move, and the others
/// holding the copy find it and take its result. A thread that writes followers of a
/// group another thread leads imports that thread's log ([`import`](Self::import)).
#[derive(Debug)]
pub(crate) struct MoveLog<M> {
    moves: Vec<M>,
}

impl<M> Default for MoveLog<M> {
    fn default() -> Self {
        Self { moves: Vec::new() }
    }
}

/// The most moves logged per pass and thread: one per group in step.
const MAX_MOVES: usize = 16;

impl<M: LoggedMove> MoveLog<M>
where
    M::States: PartialEq,
{
    /// Forgets the pass's moves (and lets go of the copies they kept).
    pub(crate) fn clear(&mut self) {
        self.moves.clear();
    }

    /// Logs `m`, when there is room.
    pub(crate) fn push(&mut self, m: M) {
        if self.moves.len() < MAX_MOVES {
            self.moves.push(m);
        }
    }

    /// The copy to log a move of `before` from: one shared with another holder, when
    /// there is room.
    pub(crate) fn loggable(&self, before: &Shared<M::States>) -> Option<Arc<M::States>> {
        before
            .shared_with_others()
            .filter(|_| self.moves.len() < MAX_MOVES)
            .cloned()
    }

    /// How many moves are logged.
    pub(crate) fn len(&self) -> usize {
        self.moves.len()
    }

    /// The moves logged from the `from`th on (those of one connection's catching up,
    /// say), as a log of their own.
    pub(crate) fn since(&self, from: usize) -> Self
    where
        M: Clone,
    {
        Self {
            moves: self.moves.get(from..).unwrap_or_default().to_vec(),
        }
    }

    /// Logs the moves of `other` (another thread's log) that this log lacks, while
    /// there is room: the connections this thread writes find by pointer what
    /// connections in step with them moved on that thread.
    pub(crate) fn import(&mut self, other: &Self)
    where
        M: Clone,
    {
        for m in &other.moves {
            let known = self
                .moves
                .iter()
                .any(|n| Arc::ptr_eq(n.before(), m.before()) && Arc::ptr_eq(n.after(), m.after()));
            if !known {
                self.push(m.clone());
            }
        }
    }

    /// Whether a move from the copy `before` that is `same` is logged.
    pub(crate) fn logged(&self, before: &Arc<M::States>, same: impl Fn(&M) -> bool) -> bool {
        self.moves
            .iter()
            .any(|m| Arc::ptr_eq(m.before(), before) && same(m))
    }

    /// The move logged from the copy `before` that is `same`: by pointer, else from
    /// another copy holding the same states (a group of another writer thread
    /// reaching this one, say), which is then logged for `before`'s copy too, so that
    /// the others holding it find it by pointer.
    pub(crate) fn find(
        &mut self,
        before: &Arc<M::States>,
        same: impl Fn(&M) -> bool,
    ) -> Option<&M> {
        let by_pointer = |m: &M| Arc::ptr_eq(m.before(), before) && same(m);
        let k = match self.moves.iter().position(by_pointer) {
            Some(k) => k,
            None => {
                let k = self
                    .moves
                    .iter()
                    .position(|m| same(m) && **m.before() == **before)?;
                let again = self.moves[k].for_copy(Arc::clone(before));
                self.push(again);
                k
            }
        };
        self.moves.get(k)
    }

    /// The moves logged, oldest first.
    #[cfg(test)]
    pub(crate) fn moves(&self) -> &[M] {
        &self.moves
    }
}

/// One logged move: shared states before, the event, the states after and whether
/// the move invalidated the schedule.
#[derive(Debug)]
struct Transition<T> {
    before: Arc<T>,
    event: LoggedEvent,
    after: Arc<T>,
    schedule_valid: bool,
}

impl<T> LoggedMove for Transition<T> {
    type States = T;

    fn before(&self) -> &Arc<T> {
        &self.before
    }

    fn for_copy(&self, before: Arc<T>) -> Self {
        Self {
            before,
            event: self.event.clone(),
            after: Arc::clone(&self.after),
            schedule_valid: self.schedule_valid,
        }
    }

    fn after(&self) -> &Arc<T> {
        &self.after
    }
}

impl<T> Clone for Transition<T> {
    fn clone(&self) -> Self {
        self.for_copy(Arc::clone(&self.before))
    }
}

/// The moves of shared states logged in a write pass on one thread, each with the
/// event that made it.
#[derive(Debug)]
pub(crate) struct Transitions<T = SendStates> {
    log: MoveLog<Transition<T>>,
}

impl<T> Default for Transitions<T> {
    fn default() -> Self {
        Self {
            log: MoveLog::default(),
        }
    }
}

impl<T: PartialEq> Transitions<T> {
    /// Forgets the pass's moves (and lets go of the copies they kept).
    pub(crate) fn clear(&mut self) {
        self.log.clear();
    }

    /// Logs the moves of another thread's log that this one lacks (see
    /// [`MoveLog::import`]).
    pub(crate) fn import(&mut self, other: &Self) {
        self.log.import(&other.log);
    }

    /// How many moves are logged.
    pub(crate) fn len(&self) -> usize {
        self.log.len()
    }

    /// The moves logged from the `from`th on (see [`MoveLog::since`]).
    pub(crate) fn since(&self, from: usize) -> Self {
        Self {
            log: self.log.since(from),
        }
    }

    /// The states `before` (a shared copy) moves to with `event`, if logged, and whether
    /// the schedule is still valid after (found by value from another copy holding
    /// the same states too, see [`MoveLog::find`]).
    pub(crate) fn find(&mut self, before: &Shared<T>, event: Event<'_>) -> Option<(Arc<T>, bool)> {
        let t = self
            .log
            .find(before.shared()?, |t| t.event.matches(event))?;
        Some((Arc::clone(&t.after), t.schedule_valid))
    }

    /// The states `before` moves to with `event` when a leader recorded the move
    /// (its states before and after, which another thread may have recorded): the
    /// leader's after when `before` is the leader's copy from before, else
    /// [`find`](Self::find), else the recorded move when `before` holds the same
    /// states as its start (then logged for `before`'s copy).
    pub(crate) fn find_or_recorded(
        &mut self,
        before: &Shared<T>,
        event: Event<'_>,
        recorded: [Option<&Arc<T>>; 2],
    ) -> Option<Arc<T>> {
        if let [Some(start), Some(after)] = recorded
            && before.is(start)
        {
            return Some(Arc::clone(after));
        }
        if let Some((after, _)) = self.find(before, event) {
            return Some(after);
        }
        let shared = before.shared()?;
        let [Some(start), Some(after)] = recorded else {
            return None;
        };
        if **start != **shared {
            return None;
        }
        self.log(Arc::clone(shared), event, Arc::clone(after), true);
        Some(Arc::clone(after))
    }

    /// Whether a move of the copy `before` with `event` is logged. For a replayed
    /// section, the copy then passed the trace's comparison of states (every holder
    /// of it would).
    pub(crate) fn logged(&self, before: &Arc<T>, event: Event<'_>) -> bool {
        self.log.logged(before, |t| t.event.matches(event))
    }

    /// The copy to log a move of `before` from: one shared with another holder, when
    /// there is room.
    pub(crate) fn loggable(&self, before: &Shared<T>) -> Option<Arc<T>> {
        self.log.loggable(before)
    }

    /// Logs that `before` moved to `after` with `event`.
    pub(crate) fn log(
        &mut self,
        before: Arc<T>,
        event: Event<'_>,
        after: Arc<T>,
        schedule_valid: bool,
    ) {
        self.log.push(Transition {
            before,
            event: LoggedEvent::new(event),
            after,
            schedule_valid,
        });
    }
}

/// The most replays a connection that is not in a group waits between two
/// comparisons of its states with its leader's.
const MAX_JOIN_WAIT: u8 = 64;

/// When a connection that replays on its own states next compares them with the
/// leader's ([`replay_move`]).
#[derive(Debug, Default)]
pub(crate) struct JoinWait {
    wait: u8,
    countdown: u8,
}

impl JoinWait {
    /// Joins the group holding `leaders` (a leader's states after the section this
    /// connection just replayed on its own copy) if the two are equal. Compared now
    /// and then: after a failed comparison, the next waits twice as many replays, up
    /// to [`MAX_JOIN_WAIT`].
    fn join<T: PartialEq>(&mut self, states: &mut Shared<T>, leaders: Option<&Arc<T>>) {
        let Some(leaders) = leaders else {
            return;
        };
        if self.countdown > 0 {
            self.countdown -= 1;
            return;
        }
        if **leaders == **states {
            states.adopt(Arc::clone(leaders));
            self.wait = 0;
        } else {
            self.wait = (self.wait * 2).clamp(1, MAX_JOIN_WAIT);
            self.countdown = self.wait;
        }
    }
}

/// Moves `states` with a replayed section (`event`) whose leader moved its own from
/// `recorded[0]` to `recorded[1]`: the result is taken by pointer where it can be
/// ([`Transitions::find_or_recorded`]); otherwise `apply` makes the move on these
/// states, which is logged for the connections holding the same copy, or, on an own
/// copy, followed by an attempt to join the leader's group.
pub(crate) fn replay_move<T: CopyOnWrite + PartialEq>(
    states: &mut Shared<T>,
    log: &mut Transitions<T>,
    joins: &mut JoinWait,
    event: Event<'_>,
    recorded: [Option<&Arc<T>>; 2],
    apply: impl FnOnce(&mut T),
) {
    if let Some(after) = log.find_or_recorded(states, event, recorded) {
        states.adopt(after);
        return;
    }
    let before = log.loggable(states);
    apply(states);
    match before {
        Some(before) => {
            let after = states.publish_frozen();
            log.log(before, event, after, true);
        }
        None => joins.join(states, recorded[1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(n: usize) -> SendStates {
        let mut s = SendStates::default();
        s.infos.grow(n, ReplicationInfo::default());
        s.dirty.set(1);
        s
    }

    #[test]
    fn a_change_to_a_shared_copy_is_made_on_an_own_copy() {
        let mut a = SharedSendStates::default();
        *a = states(4);
        let shared = a.publish();
        let mut b = SharedSendStates::default();
        b.adopt(Arc::clone(&shared));
        assert!(a.is(&shared) && b.is(&shared));
        b.dirty.set(3);
        assert_eq!(b.copies(), 1);
        assert!(!b.is(&shared), "b changed its own copy");
        assert!(a.is(&shared) && !a.dirty.get(3), "a's states are untouched");
        assert!(b.dirty.get(3) && b.dirty.get(1));
        // Reading makes no copy.
        assert_eq!(a.infos.len(), 4);
        assert_eq!(a.copies(), 0);
        // A shared copy nothing else holds becomes the writer's own as it is.
        drop((shared, b));
        a.dirty.set(0);
        assert_eq!(a.copies(), 0);
        assert!(a.shared().is_none() && a.dirty.get(0) && a.dirty.get(1));
    }

    #[test]
    fn a_move_is_found_from_the_same_states_with_the_same_event() {
        let mut leader = SharedSendStates::default();
        *leader = states(4);
        let before = leader.publish();
        let mut follower = SharedSendStates::default();
        follower.adopt(Arc::clone(&before));
        // Equal states in another copy, and other states.
        let twin = Arc::new(states(4));
        let mut twins = [(); 2].map(|_| SharedSendStates::default());
        for t in &mut twins {
            t.adopt(Arc::clone(&twin));
        }
        let mut stranger = SharedSendStates::default();
        stranger.adopt(Arc::new(states(5)));
        let none = BitArray::default();
        let event = Event::CatchUp {
            excluded: &none,
            schedule_valid: true,
        };
        let mut log = Transitions::default();
        assert!(log.loggable(&leader).is_some());
        leader.dirty.set(2);
        let after = leader.publish();
        log.log(before, event, Arc::clone(&after), false);
        let (found, valid) = log.find(&follower, event).expect("same copy, same event");
        assert!(Arc::ptr_eq(&found, &after) && !valid);
        assert!(log.find(&stranger, event).is_none(), "other states");
        // The twin's copy is found by value, then logged: the other twin finds it by
        // pointer.
        let (found, _) = log.find(&twins[0], event).expect("equal states");
        assert!(Arc::ptr_eq(&found, &after));
        assert_eq!(log.log.moves().len(), 2);
        assert!(log.find(&twins[1], event).is_some());
        assert_eq!(
            log.log.moves().len(),
            2,
            "found by pointer: nothing more logged"
        );
        let mut excluded = BitArray::default();
        excluded.set(0);
        let other_scope = Event::CatchUp {
            excluded: &excluded,
            schedule_valid: true,
        };
        assert!(log.find(&follower, other_scope).is_none());
        let other_schedule = Event::CatchUp {
            excluded: &none,
            schedule_valid: false,
        };
        assert!(log.find(&follower, other_schedule).is_none());
        let replay = Event::Replay { serial: 0 };
        assert!(log.find(&follower, replay).is_none());
        log.clear();
        assert!(log.find(&follower, event).is_none());
    }

    #[test]
    fn another_threads_moves_are_imported_once_and_found_by_pointer() {
        let none = BitArray::default();
        let event = Event::CatchUp {
            excluded: &none,
            schedule_valid: true,
        };
        let mut holder = SharedSendStates::default();
        holder.adopt(Arc::new(states(4)));
        let before = Arc::clone(holder.shared().expect("shared"));
        let mut moved = states(4);
        moved.dirty.set(2);
        let after = Arc::new(moved);
        // The leader's thread logged another group's move, then the leader's.
        let mut leaders = Transitions::default();
        leaders.log(Arc::new(states(6)), event, Arc::new(states(6)), true);
        let from = leaders.len();
        leaders.log(Arc::clone(&before), event, Arc::clone(&after), true);
        let published = leaders.since(from);
        assert_eq!(published.len(), 1, "the leader's move only");
        // The other thread imports it (once, however often) and finds it by pointer.
        let mut other = Transitions::default();
        other.import(&published);
        other.import(&published);
        assert_eq!(other.len(), 1);
        let (found, valid) = other.find(&holder, event).expect("imported");
        assert!(Arc::ptr_eq(&found, &after) && valid);
        assert_eq!(other.len(), 1, "found by pointer: nothing more logged");
        assert_eq!(leaders.since(leaders.len() + 1).len(), 0);
    }

    #[test]
    fn a_recorded_move_is_taken_from_the_same_states_only() {
        let start = Arc::new(states(4));
        let mut moved = states(4);
        moved.dirty.set(3);
        let after = Arc::new(moved);
        let event = Event::Replay { serial: 7 };
        let recorded = [Some(&start), Some(&after)];
        let mut log = Transitions::default();
        // Equal states in another copy take the move, and log it for that copy.
        let mut twin = SharedSendStates::default();
        twin.adopt(Arc::new(states(4)));
        let taken = log.find_or_recorded(&twin, event, recorded);
        assert!(taken.is_some_and(|a| Arc::ptr_eq(&a, &after)));
        assert_eq!(log.log.moves().len(), 1);
        assert!(log.find(&twin, event).is_some());
        // Other states, an own copy, or no recorded start: nothing.
        let mut stranger = SharedSendStates::default();
        stranger.adopt(Arc::new(states(5)));
        assert!(log.find_or_recorded(&stranger, event, recorded).is_none());
        let mut own = SharedSendStates::default();
        *own = states(4);
        assert!(log.find_or_recorded(&own, event, recorded).is_none());
        assert_eq!(log.log.moves().len(), 1);
        let mut fresh = Transitions::default();
        let mut other = SharedSendStates::default();
        other.adopt(Arc::new(states(4)));
        let unrecorded = fresh.find_or_recorded(&other, event, [None, Some(&after)]);
        assert!(unrecorded.is_none() && fresh.log.moves().is_empty());
    }

    #[test]
    fn a_chunked_copy_shares_the_frozen_chunks_and_copies_only_the_one_it_changes() {
        let mut a = Chunked::default();
        a.grow(2 * CHUNK + 5, 7u32);
        assert_eq!(a.len, 2 * CHUNK + 5);
        assert_eq!(
            (a.get(2 * CHUNK + 4), a.get(2 * CHUNK + 5)),
            (Some(&7), None)
        );
        if let Some(e) = a.get_mut(CHUNK) {
            *e = 1;
        }
        a.freeze();
        let mut b = a.clone();
        assert!(a == b);
        let shared = |v: &Chunked<u32>| -> Vec<bool> {
            v.chunks
                .iter()
                .map(|c| matches!(c, Chunk::Shared(_)))
                .collect()
        };
        assert_eq!(shared(&b), [true; 3], "a frozen copy shares every chunk");
        if let Some(e) = b.get_mut(CHUNK + 1) {
            *e = 2;
        }
        assert_eq!(
            shared(&b),
            [true, false, true],
            "only the changed chunk is copied"
        );
        assert_eq!((a.get(CHUNK + 1), b.get(CHUNK + 1)), (Some(&7), Some(&2)));
        assert_eq!(b.get(CHUNK), Some(&1), "the copied chunk keeps the rest");
        assert!(a != b);
        if let Some(e) = b.get_mut(CHUNK + 1) {
            *e = 7;
        }
        assert!(a == b, "equal by content where not by pointer");
        // Growing into the shared last chunk copies it, and fills only new entries.
        b.grow(2 * CHUNK + 9, 3);
        assert_eq!(shared(&b), [true, false, false]);
        assert_eq!(
            (b.get(2 * CHUNK + 4), b.get(2 * CHUNK + 5)),
            (Some(&7), Some(&3))
        );
        assert_eq!(a.len, 2 * CHUNK + 5);
        assert!(a != b, "other lengths");
        assert_eq!(b.iter().filter(|&&e| e == 3).count(), 4);
        // A clone before freezing copies the chunks changed since.
        let c = b.clone();
        assert_eq!(shared(&c), [true, false, false]);
    }

    #[test]
    fn chunked_entries_index_like_a_slice() {
        let mut a = Chunked::default();
        a.grow(CHUNK + 2, 0u8);
        a.freeze();
        let mut b = a.clone();
        b[CHUNK + 1] = 9;
        assert_eq!((a[CHUNK + 1], b[CHUNK + 1], b.len()), (0, 9, CHUNK + 2));
        assert!(
            matches!(b.chunks[0], Chunk::Shared(_)),
            "indexing copies its chunk only"
        );
        let past = std::panic::catch_unwind(|| a[CHUNK + 2]);
        assert!(past.is_err(), "past the end panics, as a slice does");
    }

    #[test]
    fn a_leader_moving_frozen_send_states_copies_the_chunks_it_changes() {
        let mut leader = SharedSendStates::default();
        *leader = states(3 * CHUNK);
        let before = leader.publish_frozen();
        let mut follower = SharedSendStates::default();
        follower.adopt(Arc::clone(&before));
        leader.infos[CHUNK].set_priority(2.0);
        leader.dirty.set(CHUNK as u32);
        let after = leader.publish_frozen();
        let shared_with_before = |k: usize| match (&after.infos.chunks[k], &before.infos.chunks[k])
        {
            (Chunk::Shared(x), Chunk::Shared(y)) => Arc::ptr_eq(x, y),
            _ => false,
        };
        assert_eq!(
            (0..3).map(shared_with_before).collect::<Vec<_>>(),
            [true, false, true]
        );
        assert_eq!(
            follower.infos.priority(CHUNK as u32),
            0.0,
            "the follower's copy is untouched"
        );
        assert_eq!(after.infos.priority(CHUNK as u32), 2.0);
    }
}
