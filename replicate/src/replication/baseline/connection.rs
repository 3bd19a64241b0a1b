//! [`ConnectionBaselines`]: one connection's baselines. Per object, 8 bytes stored
//! densely by object index (the acknowledged baseline's lineage and synced mask, the
//! slots in flight); the nominations themselves wait in a queue ordered by packet, so
//! a packet's fate settles them by popping its entries from the front. Nominations made
//! while a pass writes are settled after it; a replayed section's nominations join the
//! leader's lineages by count.

use super::*;

/// One baseline of one (object, connection), as the writer reads it.
#[derive(Debug, Clone, Copy)]
pub struct BaselineSlot<'a> {
    /// Its lineage in the [`BaselineStorage`] (the snapshot and priors below).
    pub lineage: u32,
    /// The snapshot in the [`BaselineStorage`].
    pub snapshot: u32,
    /// The members the client holds equal to the snapshot.
    pub synced: &'a ChangeMask,
    /// The snapshot of the acknowledged baseline this one was built from (delta path),
    /// which the client also holds: with the snapshot, the two states a prediction
    /// extrapolates. The slot holds a reference on it.
    pub prior: Option<u32>,
    /// The prior's own prior, the third state of a quadratic prediction (the slot
    /// holds a reference on it too).
    pub prior2: Option<u32>,
}

/// One (object, connection)'s baselines: the acknowledged one and which slots packets
/// in flight nominate. 8 bytes, stored densely by object index, so that a
/// connection's state for 10 000 objects is 80 KB; the nominations themselves wait
/// in [`ConnectionBaselines`]'s queue of nominations in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObjectBaselines {
    /// The acknowledged baseline: its lineage in the storage ([`NO_SNAPSHOT`]: none),
    /// which holds its snapshot and priors.
    acked: u32,
    /// Index of its synced mask in [`ConnectionBaselines::synced`].
    synced: u8,
    /// The acknowledged baseline's slot on the wire (low nibble) and the slot of the
    /// newest nomination since the last release (high nibble), each
    /// [`INVALID_BASELINE_INDEX`] when there is none. The newest nomination was
    /// acknowledged when both name one slot: a new one never takes the acknowledged
    /// slot.
    slots: u8,
    /// The slots nominated by packets in flight, one bit each.
    pending: u8,
    /// Counts the releases of the object's baselines: a nomination in flight from an
    /// older epoch changes nothing when its packet's fate is known.
    epoch: u8,
}

const EMPTY: ObjectBaselines = ObjectBaselines {
    acked: NO_SNAPSHOT,
    synced: 0,
    slots: INVALID_BASELINE_INDEX << 4 | INVALID_BASELINE_INDEX,
    pending: 0,
    epoch: 0,
};

/// A connection's [`ObjectBaselines`] by object index: what connections in step
/// share (see `group`), since their acks move them the same way.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ObjectWords(Chunked<ObjectBaselines>);

impl CopyOnWrite for ObjectWords {
    fn freeze(&mut self) {
        self.0.freeze();
    }
}

impl std::ops::Deref for ObjectWords {
    type Target = Chunked<ObjectBaselines>;

    #[inline(always)]
    fn deref(&self) -> &Chunked<ObjectBaselines> {
        &self.0
    }
}

impl ObjectWords {
    /// An object's baselines, made room for if need be.
    #[inline(always)]
    fn entry(&mut self, object: InternalIndex) -> Option<&mut ObjectBaselines> {
        self.0.get_mut_or_grow(object as usize, EMPTY)
    }

    /// An object's baselines, if it has room.
    #[inline(always)]
    fn get_mut(&mut self, object: InternalIndex) -> Option<&mut ObjectBaselines> {
        self.0.get_mut(object as usize)
    }

    /// Sets an object's 8 bytes from what [`ConnectionBaselines::word`] read.
    #[inline]
    pub(crate) fn set_word(&mut self, object: InternalIndex, word: u64) {
        let o = ObjectBaselines::from_word(word);
        match self.get_mut(object) {
            Some(slot) => *slot = o,
            // An object never touched reads as empty: only another value makes room.
            None if o != EMPTY => {
                if let Some(slot) = self.entry(object) {
                    *slot = o;
                }
            }
            None => {}
        }
    }
}

impl ObjectBaselines {
    /// The 8 bytes as one word ([`ConnectionBaselines::word`]).
    #[inline]
    const fn to_word(self) -> u64 {
        self.acked as u64
            | (self.synced as u64) << 32
            | (self.slots as u64) << 40
            | (self.pending as u64) << 48
            | (self.epoch as u64) << 56
    }

    /// The 8 bytes [`to_word`](Self::to_word) made a word of.
    #[inline]
    const fn from_word(word: u64) -> Self {
        Self {
            acked: word as u32,
            synced: (word >> 32) as u8,
            slots: (word >> 40) as u8,
            pending: (word >> 48) as u8,
            epoch: (word >> 56) as u8,
        }
    }

    fn live(&self) -> usize {
        usize::from(self.has_acked()) + self.pending.count_ones() as usize
    }

    /// See [`ConnectionBaselines::unthrottled`].
    #[inline]
    pub(crate) fn unthrottled(&self, settings: &DeltaSettings) -> bool {
        settings.baseline_every_packet || self.live() == 0
    }

    /// See [`ConnectionBaselines::is_last_nomination_acked`].
    #[inline]
    pub(crate) fn is_last_nomination_acked(&self) -> bool {
        self.is_newest_acked() && self.pending == 0
    }

    /// See [`ConnectionBaselines::free_slot`].
    #[inline]
    pub(crate) fn free_slot(&self, ordinal: u64) -> Option<u8> {
        let acked = if self.acked_slot() < MAX_BASELINE_COUNT {
            1 << self.acked_slot()
        } else {
            0
        };
        let taken = self.pending | acked;
        // The free slots (one bit each in a byte) rotated so that bit 0 is the
        // packet's own: the lowest set bit is the first free slot from it on.
        const _: () = assert!(MAX_BASELINE_COUNT as u32 == u8::BITS);
        let first = (ordinal % u64::from(MAX_BASELINE_COUNT)) as u8;
        let free = (!taken).rotate_right(u32::from(first));
        (free != 0).then(|| (first + free.trailing_zeros() as u8) % MAX_BASELINE_COUNT)
    }

    fn has_acked(&self) -> bool {
        self.acked != NO_SNAPSHOT
    }

    /// The acknowledged baseline's slot ([`INVALID_BASELINE_INDEX`]: none).
    fn acked_slot(&self) -> u8 {
        self.slots & 0xF
    }

    /// The newest nomination's slot ([`INVALID_BASELINE_INDEX`]: none since the last
    /// release).
    fn newest(&self) -> u8 {
        self.slots >> 4
    }

    /// Whether the newest nomination was acknowledged: the client's newest stored
    /// baseline is then the acknowledged one.
    fn is_newest_acked(&self) -> bool {
        self.newest() < MAX_BASELINE_COUNT && self.newest() == self.acked_slot()
    }

    fn set_newest(&mut self, slot: u8) {
        self.slots = slot << 4 | self.acked_slot();
    }

    /// Makes the nomination `n` the acknowledged baseline; returns the previous one's
    /// lineage ([`NO_SNAPSHOT`]: none).
    fn promote(&mut self, n: &Nomination) -> u32 {
        let old = self.acked;
        self.acked = n.lineage;
        self.synced = n.synced;
        self.slots = self.newest() << 4 | n.slot;
        old
    }
}

/// A new baseline nominated by a packet in flight: 12 bytes (a connection far from
/// its acknowledgements holds one per object of every packet in flight). Which packet
/// nominated it is kept per packet ([`ConnectionBaselines::packets`]); the snapshots
/// it is built from are its lineage's, and until the write pass is settled they wait
/// beside its object's handle ([`Unsettled`]).
#[derive(Debug, Clone, Copy, Eq)]
#[repr(C)]
struct Nomination {
    object: InternalIndex,
    /// Its lineage in the storage, on which it holds a reference ([`NO_SNAPSHOT`]
    /// until the write pass is settled).
    lineage: u32,
    /// Index of its synced mask in [`ConnectionBaselines::synced`].
    synced: u8,
    slot: u8,
    epoch: u8,
    /// Always 0: the last four bytes compare as one word ([`Nomination::packed`]).
    pad: u8,
}

impl PartialEq for Nomination {
    /// Every field, packed in two words (queues of them are compared).
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.packed() == other.packed()
    }
}

impl Nomination {
    #[inline(always)]
    fn packed(&self) -> (u64, u32) {
        (
            u64::from(self.object) | u64::from(self.lineage) << 32,
            u32::from_le_bytes([self.synced, self.slot, self.epoch, self.pad]),
        )
    }

    /// Takes the snapshot and lineage of a nomination made while packets were
    /// written (the plan checked the creation throttle when it nominated).
    fn settle(&mut self, storage: &mut BaselineStorage, u: &Unsettled) {
        if let Some(l) = storage.nominated_lineage(self.object, u.handle, u.prior, u.prior2) {
            self.lineage = l;
        }
    }
}

/// What a nomination made while packets are written needs to take its snapshot and
/// lineage when the pass is settled: its object's handle and the snapshots the new
/// baseline is built from (each [`NO_SNAPSHOT`] when absent).
#[derive(Debug, Clone, Copy)]
struct Unsettled {
    handle: NetRefHandle,
    prior: u32,
    prior2: u32,
}

/// One connection's baselines per object: the acknowledged one and the nominations in
/// flight, up to [`MAX_BASELINE_COUNT`] slots per object.
///
/// A baseline is a reference on a lineage in the storage (a snapshot and the two it
/// was built from, shared by the connections that hold the same three) and the index
/// of its synced mask in a per-connection table of the distinct masks seen (a handful:
/// one per type and role, at most [`MAX_SYNCED_MASKS`]). Per object the connection
/// keeps 8 bytes; each nomination in flight waits in a queue ordered by packet, so a
/// packet's fate is settled by popping its nominations from the front.
#[derive(Debug, Default)]
pub struct ConnectionBaselines {
    /// Per object, shared with the connections in step (see `group`).
    objects: Shared<ObjectWords>,
    in_flight: std::collections::VecDeque<Nomination>,
    /// The packets with nominations in flight, in order: their nominations are in
    /// `in_flight`, but those of packets with [`SharedNominations`].
    packets: std::collections::VecDeque<QueuedPacket>,
    /// How many of `packets` have [`SharedNominations`].
    shared_packets: usize,
    /// For the last nominations in `in_flight`, made while packets were written, their
    /// objects' handles and priors: they take their snapshot and lineage when the write
    /// pass is settled ([`settle`](Self::settle)); while packets are written the storage
    /// is only read.
    unsettled: Vec<Unsettled>,
    /// Lineages this connection stopped holding while a packet was written, released
    /// when the write pass is settled.
    released: Vec<u32>,
    /// The distinct synced masks, by index (never shrinks; see [`Self::intern`]).
    synced: Vec<ChangeMask>,
    synced_index: HashMap<ChangeMask, u8>,
    /// The last mask interned (most nominations repeat it).
    last_synced: Option<u8>,
    /// Where in `in_flight` [`creation`](Self::creation) found the last creation, plus
    /// one: the next is searched for from there (a new client's creations are queued
    /// in object order, and its updates are written in object order).
    creation_hint: usize,
    /// The nominations of this pass taken from another connection's packet (a replayed
    /// section): they settle on that connection's lineages.
    mirror: Option<Mirror>,
    /// Where in `in_flight` the nominations settled last began, and how many: what a
    /// connection that replayed this one's section settles on.
    settled: (usize, usize),
    /// Fates of packets with nominations, reported and not yet applied
    /// ([`defer_delivery`](Self::defer_delivery)), in send order.
    fates: Vec<(u64, DeliveryStatus)>,
    /// The lineages of the nominations settled last, in order, for the connections
    /// that replayed this one's section (made when the first of them settles).
    settled_lineages: Option<Arc<[u32]>>,
    /// How many of those connections hold each of the nominations settled last, as
    /// differences: the count at `k` is the sum of `joins[..=k]`. Added to the
    /// lineages' holders at once by [`add_joins`](Self::add_joins).
    joins: Vec<i32>,
    /// The nominations this connection copied from other connections' packets,
    /// settled on those connections' lineages, in queue order: they take them when
    /// their lineages are first read ([`take_joined`](Self::take_joined)). Most never
    /// are: their packets' fates are taken from a connection in step (see
    /// [`catch_up_in_pass`](Self::catch_up_in_pass)).
    joined: Vec<Joined>,
    /// The lineages let go of when the pass was last settled, kept for the connections
    /// that replayed this one's section: theirs are most often the same (they held the
    /// same lineages and took the same fates).
    released_settled: Vec<u32>,
    /// How many of those connections let go of exactly `released_settled`: released
    /// that many times more at once by [`add_joins`](Self::add_joins).
    release_repeats: u32,
    /// The packets the fates being caught up with settle (kept for its allocation).
    settling: Vec<(u32, Settle)>,
}

/// Whether the front of `queue` is `nominations`, each nomination with the lineage
/// it takes from `joined` if it is one of theirs (see
/// [`ConnectionBaselines::take_joined`]).
#[cfg(debug_assertions)]
fn front_is(
    queue: &std::collections::VecDeque<Nomination>,
    joined: &[Joined],
    nominations: &[Nomination],
) -> bool {
    let joined_lineage = |k: usize| {
        joined
            .iter()
            .find(|j| (j.at..j.at + j.len).contains(&k))
            .and_then(|j| j.lineages.get(j.from + k - j.at).copied())
    };
    nominations.len() <= queue.len()
        && queue
            .iter()
            .zip(nominations)
            .enumerate()
            .all(|(k, (n, m))| {
                let mut n = *n;
                if let Some(l) = joined_lineage(k) {
                    n.lineage = l;
                }
                n == *m
            })
}

/// A packet with nominations in flight.
#[derive(Debug, Clone)]
struct QueuedPacket {
    /// The writer's count of packets when it was written.
    ordinal: u64,
    /// How many of the nominations in flight are its.
    count: u32,
    /// Names its nominations: packets of the same origin hold the same nominations. A
    /// packet a connection writes itself takes a fresh origin ([`fresh_origin`]); one
    /// that replayed another's section takes that one's (see
    /// [`BaselinesTail`]). So a catching-up compares packets, not nominations.
    origin: u64,
    /// Its nominations so far are all of the connection's own writing, so more of
    /// them keep the origin (once copied to another connection, or joined by copied
    /// ones, they take a fresh one).
    own: bool,
    /// Its nominations, when they are another connection's packet's, shared rather
    /// than copied into the queue (see [`SharedNominations`]).
    shared: Option<SharedNominations>,
}

/// The nominations of a packet that replayed another connection's objects section,
/// when they are all of that connection's packet: kept shared with it, outside the
/// queue of nominations in flight, until something reads the queue by position
/// ([`ConnectionBaselines::unshare_packets`]). Most packets of connections in step
/// never are: their fates are taken from a connection in step, whole packets at a
/// time.
#[derive(Debug, Clone)]
struct SharedNominations {
    nominations: Arc<Vec<Nomination>>,
    /// The other connection's lineages of the pass, and where these nominations'
    /// begin among them, once the pass is settled.
    lineages: Option<(Arc<[u32]>, usize)>,
}

impl SharedNominations {
    /// The nominations, each with its lineage once settled.
    fn iter(&self) -> impl Iterator<Item = Nomination> + '_ {
        let lineages = self
            .lineages
            .as_ref()
            .and_then(|(l, from)| l.get(*from..))
            .unwrap_or_default();
        self.nominations
            .iter()
            .enumerate()
            .map(|(k, n)| Nomination {
                lineage: lineages.get(k).copied().unwrap_or(n.lineage),
                ..*n
            })
    }
}

/// Who made nominations being queued ([`ConnectionBaselines::count_nominations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Author {
    /// The connection, writing its packet.
    Own,
    /// Another connection: copied from its packet (of `origin` when they are all of
    /// it).
    Copied { origin: Option<u64> },
}

/// An origin no packet has had ([`QueuedPacket::origin`]): unique in the process,
/// whatever the server or thread.
fn fresh_origin() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How a packet's nominations are settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// The packet was delivered: they become their objects' acknowledged baselines.
    Delivered,
    /// The packet was lost or discarded: they are released.
    Dropped,
    /// An older packet whose fate was never reported: they are released, and
    /// their slots stay taken until the object's next release.
    Stale,
}

impl Settle {
    fn of(current: bool, status: DeliveryStatus) -> Self {
        match (current, status) {
            (false, _) => Self::Stale,
            (true, DeliveryStatus::Delivered) => Self::Delivered,
            (true, _) => Self::Dropped,
        }
    }
}

/// How a write pass's catching up with packet fates moved shared baselines, on one
/// writer thread (see `group`): a connection holding the same copy and the same
/// nominations settled the same way takes the logged result.
pub(crate) type FateMoves = MoveLog<FateMove>;

/// One logged catching up: the shared copy before, the packets settled (each with
/// its count of nominations and how) and their origins (which name their
/// nominations), the copy after and the lineages let go of.
#[derive(Debug, Clone)]
pub(crate) struct FateMove {
    before: Arc<ObjectWords>,
    packets: Vec<(u32, Settle)>,
    origins: Vec<u64>,
    /// The nominations settled, to check in debug builds that packets of the same
    /// origins held the same ones.
    #[cfg(debug_assertions)]
    nominations: Vec<Nomination>,
    after: Arc<ObjectWords>,
    released: Vec<u32>,
}

impl LoggedMove for FateMove {
    type States = ObjectWords;

    fn before(&self) -> &Arc<ObjectWords> {
        &self.before
    }

    fn for_copy(&self, before: Arc<ObjectWords>) -> Self {
        Self {
            before,
            ..self.clone()
        }
    }

    fn after(&self) -> &Arc<ObjectWords> {
        &self.after
    }
}

/// Nominations of a connection that settled on another's lineages
/// ([`ConnectionBaselines::settle`]), waiting to take them.
#[derive(Debug, Clone)]
struct Joined {
    /// The other connection's settled lineages.
    lineages: Arc<[u32]>,
    /// Where the copied ones begin among them.
    from: usize,
    /// Where they begin in this connection's `in_flight`.
    at: usize,
    len: usize,
}

/// Nominations a connection took from another's packet in the same write pass
/// ([`ConnectionBaselines::append_tail`]): the same objects, snapshots and priors, so
/// once that connection is settled they hold its lineages.
///
/// Their handles and priors are the leader's tail's, shared rather than copied: they
/// are read only if the nominations are looked up after all (see
/// [`ConnectionBaselines::unsettled_parts`]).
#[derive(Debug, Clone)]
struct Mirror {
    /// The connection whose packet they come from.
    leader: ConnectionId,
    /// Their position among the leader's nominations of the pass.
    from: usize,
    /// Their position among this connection's nominations of the pass.
    start: usize,
    /// Their handles and priors (the tail's).
    unsettled: Arc<Vec<Unsettled>>,
    /// They are the newest packet's [`SharedNominations`], not in the queue.
    shared: bool,
}

impl Mirror {
    fn len(&self) -> usize {
        self.unsettled.len()
    }
}

/// The handles and priors of a connection's nominations of the pass, in order, in up
/// to three parts: its own (`own`) before a mirrored tail, the tail's, its own after.
fn unsettled_parts<'a>(own: &'a [Unsettled], mirror: Option<&'a Mirror>) -> [&'a [Unsettled]; 3] {
    match mirror {
        Some(m) => {
            let (before, after) = own.split_at(m.start.min(own.len()));
            [before, &m.unsettled, after]
        }
        None => [own, &[], &[]],
    }
}

/// The value behind `arc`, to fill anew: the same allocation when nobody else holds
/// it, else a new one (never a copy of what is to be overwritten).
fn refill<T: Default + Clone>(arc: &mut Arc<T>) -> &mut T {
    if Arc::get_mut(arc).is_none() {
        *arc = Arc::default();
    }
    Arc::make_mut(arc)
}

/// Entry `k` of the [`unsettled_parts`].
fn unsettled_at<'a>(parts: &[&'a [Unsettled]; 3], mut k: usize) -> Option<&'a Unsettled> {
    for part in parts {
        match part.get(k) {
            Some(u) => return Some(u),
            None => k -= part.len(),
        }
    }
    None
}

/// Where a connection's baselines stood when a packet began: what the packet added to
/// them since is [`ConnectionBaselines::tail_since`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BaselinesMark {
    in_flight: usize,
    unsettled: usize,
    released: usize,
    synced: usize,
}

/// What one packet added to a connection's baselines besides its objects' words: the
/// nominations it queued, the handles they settle with, the lineages it let go of and
/// the synced masks it interned. Applied to another connection in the same state, it
/// makes that connection's baselines what the packet made of this one's
/// ([`ConnectionBaselines::append_tail`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct BaselinesTail {
    /// Shared with the connections whose packets are all of them (see
    /// [`SharedNominations`]).
    nominations: Arc<Vec<Nomination>>,
    /// Shared with the connections that append the tail (see [`Mirror`]).
    unsettled: Arc<Vec<Unsettled>>,
    /// Where the nominations begin among the pass's nominations of the connection that
    /// recorded the tail.
    unsettled_from: usize,
    released: Vec<u32>,
    synced: Vec<ChangeMask>,
    last_synced: Option<u8>,
    /// The origin of the packet the nominations are, when they are all of it (see
    /// [`QueuedPacket::origin`]).
    origin: Option<u64>,
}

impl ConnectionBaselines {
    /// An object's 8 bytes as one word (an object never touched reads as empty).
    #[inline]
    pub(crate) fn word(&self, object: InternalIndex) -> u64 {
        self.get(object).copied().unwrap_or(EMPTY).to_word()
    }

    /// The per-object baselines, shared with the connections in step.
    pub(crate) fn words(&self) -> &Shared<ObjectWords> {
        &self.objects
    }

    /// The per-object baselines, to move them.
    pub(crate) fn words_mut(&mut self) -> &mut Shared<ObjectWords> {
        &mut self.objects
    }

    /// The table of synced masks: equal tables give equal words equal meanings.
    pub(crate) fn synced_table(&self) -> &[ChangeMask] {
        &self.synced
    }

    /// Marks where the baselines stand before a packet (the packets in flight that
    /// share their nominations are unshared first: the mark is a position).
    pub(crate) fn mark(&mut self) -> BaselinesMark {
        self.unshare_packets();
        BaselinesMark {
            in_flight: self.in_flight.len(),
            unsettled: self.unsettled_len(),
            released: self.released.len(),
            synced: self.synced.len(),
        }
    }

    /// What the packet written since `mark` added (see [`BaselinesTail`]), into `out`.
    /// Nominations this connection adds to the packet after it are no longer the
    /// tail's: the packet then takes a fresh origin.
    pub(crate) fn tail_since(&mut self, mark: BaselinesMark, out: &mut BaselinesTail) {
        let added = self.in_flight.len() - mark.in_flight;
        out.origin = match self.packets.back_mut() {
            Some(p) if added > 0 && p.count as usize == added => {
                p.own = false;
                Some(p.origin)
            }
            _ => None,
        };
        let nominations = refill(&mut out.nominations);
        nominations.clear();
        nominations.extend(self.in_flight.range(mark.in_flight..).copied());
        let unsettled = refill(&mut out.unsettled);
        unsettled.clear();
        let mut skip = mark.unsettled;
        for part in self.unsettled_parts() {
            unsettled.extend_from_slice(part.get(skip..).unwrap_or_default());
            skip = skip.saturating_sub(part.len());
        }
        out.unsettled_from = mark.unsettled;
        out.released.clear();
        out.released
            .extend_from_slice(&self.released[mark.released..]);
        out.synced.clear();
        out.synced.extend_from_slice(&self.synced[mark.synced..]);
        out.last_synced = self.last_synced;
    }

    /// Adds what connection `leader`'s packet of this write pass added to its
    /// baselines, which stood as these do now (same synced table, same words for the
    /// packet's objects), as the nominations of this connection's packet `ordinal`.
    /// They settle on the lineages `leader`'s nominations take
    /// ([`settle`](Self::settle)).
    pub(crate) fn append_tail(&mut self, tail: &BaselinesTail, ordinal: u64, leader: ConnectionId) {
        // The whole of another packet, as this packet's first nominations: shared.
        let whole = tail.origin.filter(|_| {
            self.mirror.is_none()
                && self.unsettled.is_empty()
                && !tail.nominations.is_empty()
                && self.packets.back().is_none_or(|p| p.ordinal != ordinal)
        });
        // One packet per connection and pass: a second tail (never written today)
        // settles the ordinary way, the first's handles and priors copied in place.
        match self.mirror.take() {
            None => {
                self.mirror = Some(Mirror {
                    leader,
                    from: tail.unsettled_from,
                    start: self.unsettled.len(),
                    unsettled: Arc::clone(&tail.unsettled),
                    shared: whole.is_some(),
                });
            }
            Some(m) => {
                if m.shared {
                    // Nominations go on after them: they move into the queue.
                    self.unshare_packets();
                }
                let at = m.start.min(self.unsettled.len());
                self.unsettled.splice(at..at, m.unsettled.iter().copied());
                self.unsettled.extend_from_slice(&tail.unsettled);
            }
        }
        match whole {
            Some(origin) => {
                self.packets.push_back(QueuedPacket {
                    ordinal,
                    count: tail.nominations.len() as u32,
                    origin,
                    own: false,
                    shared: Some(SharedNominations {
                        nominations: Arc::clone(&tail.nominations),
                        lineages: None,
                    }),
                });
                self.shared_packets += 1;
            }
            None => {
                // By reference: copied as slices, not nomination by nomination.
                self.in_flight.extend(tail.nominations.iter());
                self.count_nominations(
                    ordinal,
                    tail.nominations.len(),
                    Author::Copied {
                        origin: tail.origin,
                    },
                );
            }
        }
        self.released.extend_from_slice(&tail.released);
        for m in &tail.synced {
            self.synced_index.insert(m.clone(), self.synced.len() as u8);
            self.synced.push(m.clone());
        }
        self.last_synced = tail.last_synced;
    }

    #[inline(always)]
    fn get(&self, object: InternalIndex) -> Option<&ObjectBaselines> {
        self.objects.get(object as usize)
    }

    /// The index of `mask` in the table of synced masks (added if new; `None` when
    /// the table is full). Distinct masks are few (a type's members restricted by a
    /// role, or by a member filter hook), and the table keeps each once.
    fn intern(&mut self, mask: &ChangeMask) -> Option<u8> {
        if let Some(i) = self.last_synced
            && self.synced[i as usize] == *mask
        {
            return Some(i);
        }
        // Few distinct masks (a type's members restricted by a role): a scan beats
        // hashing the mask.
        const SCANNED: usize = 16;
        let i = if self.synced.len() <= SCANNED
            && let Some(i) = self.synced.iter().position(|m| m == mask)
        {
            i as u8
        } else {
            match self.synced_index.get(mask) {
                Some(&i) => i,
                None => {
                    let i = u8::try_from(self.synced.len()).ok()?;
                    self.synced.push(mask.clone());
                    self.synced_index.insert(mask.clone(), i);
                    i
                }
            }
        };
        self.last_synced = Some(i);
        Some(i)
    }

    /// Whether a baseline holding `mask` in sync can be recorded: the connection
    /// keeps up to [`MAX_SYNCED_MASKS`] distinct synced masks (a handful in practice);
    /// past them, a batch with a new one nominates no baseline.
    #[inline]
    pub fn can_sync(&self, mask: &ChangeMask) -> bool {
        self.synced.len() < MAX_SYNCED_MASKS
            || self
                .last_synced
                .is_some_and(|i| self.synced[i as usize] == *mask)
            || self.synced_index.contains_key(mask)
    }

    /// The baseline of `lineage` (live in `storage`) holding synced mask `synced`.
    #[inline]
    fn view(
        &self,
        storage: &BaselineStorage,
        lineage: u32,
        synced: u8,
    ) -> Option<BaselineSlot<'_>> {
        let l = storage.lineage(lineage)?;
        let some = |s: u32| (s != NO_SNAPSHOT).then_some(s);
        Some(BaselineSlot {
            lineage,
            snapshot: l.snapshot,
            synced: &self.synced[synced as usize],
            prior: some(l.prior),
            prior2: some(l.prior2),
        })
    }

    /// The acknowledged baseline of an object and its slot.
    #[inline]
    pub fn acked(
        &self,
        storage: &BaselineStorage,
        object: InternalIndex,
    ) -> Option<(u8, BaselineSlot<'_>)> {
        self.acked_of(storage, self.object(object))
    }

    /// The acknowledged lineage of each of `objects` ([`NO_SNAPSHOT`]: none), for
    /// [`BaselineStorage::read_ahead`].
    pub(crate) fn acked_lineages<'a>(
        &'a self,
        objects: impl Iterator<Item = InternalIndex> + 'a,
    ) -> impl Iterator<Item = u32> + 'a {
        objects.map(|o| self.object(o).acked)
    }

    /// An object's baselines as they stand (read once for a batch's plan).
    #[inline]
    pub(crate) fn object(&self, object: InternalIndex) -> ObjectBaselines {
        self.get(object).copied().unwrap_or(EMPTY)
    }

    /// [`acked`](Self::acked) from the object's baselines `o`.
    #[inline]
    pub(crate) fn acked_of(
        &self,
        storage: &BaselineStorage,
        o: ObjectBaselines,
    ) -> Option<(u8, BaselineSlot<'_>)> {
        if !o.has_acked() {
            return None;
        }
        let view = self.view(storage, o.acked, o.synced)?;
        Some((o.acked_slot(), view))
    }

    /// The baseline an object's creation nominated, while it is the object's only one
    /// (the creation is in flight): its slot and snapshot. A client that knows the
    /// object holds it, since both came in one packet; so updates written before the
    /// creation is acknowledged can be coded against it (in a form the client skips
    /// when it does not know the object, see `wire`).
    pub fn creation(
        &mut self,
        storage: &BaselineStorage,
        object: InternalIndex,
    ) -> Option<(u8, BaselineSlot<'_>)> {
        let o = *self.get(object)?;
        let newest = o.newest();
        if newest >= MAX_BASELINE_COUNT || o.has_acked() || o.pending != 1 << newest {
            return None;
        }
        // Its entry is its only one of this epoch in the queue: searched for from where
        // the last one was found, forward, then back. (Its lineage is read.)
        self.unshare_packets();
        self.take_joined();
        let q = &self.in_flight;
        let from = self.creation_hint.min(q.len());
        let i = (from..q.len())
            .chain((0..from).rev())
            .find(|&i| q[i].object == object && q[i].epoch == o.epoch)?;
        self.creation_hint = i + 1;
        let n = &q[i];
        Some((n.slot, self.view(storage, n.lineage, n.synced)?))
    }

    /// The slots packets in flight nominated for an object, one bit each.
    pub fn pending(&self, object: InternalIndex) -> u8 {
        self.get(object).map_or(0, |o| o.pending)
    }

    /// The synced masks of an object's baselines: the acknowledged one and those in
    /// flight (the queue is searched only when the object has some).
    pub fn synced_masks(&self, object: InternalIndex) -> impl Iterator<Item = &ChangeMask> {
        let o = self.get(object).copied().unwrap_or(EMPTY);
        let acked = o.has_acked().then_some(o.synced);
        let shared = self
            .packets
            .iter()
            .filter_map(|p| p.shared.as_ref())
            .flat_map(|s| s.nominations.iter());
        let in_flight = self
            .in_flight
            .iter()
            .chain(shared)
            .take(if o.pending == 0 { 0 } else { usize::MAX })
            .filter(move |n| n.object == object && n.epoch == o.epoch)
            .map(|n| n.synced);
        acked
            .into_iter()
            .chain(in_flight)
            .map(|i| &self.synced[i as usize])
    }

    /// Number of live baselines of an object (acknowledged and in flight).
    pub fn count(&self, object: InternalIndex) -> usize {
        self.get(object).map_or(0, ObjectBaselines::live)
    }

    /// Whether this connection may nominate a new baseline of `object` in this packet
    /// without the frame throttle: its first baseline, or
    /// [`DeltaSettings::baseline_every_packet`].
    #[inline]
    pub fn unthrottled(&self, object: InternalIndex, settings: &DeltaSettings) -> bool {
        self.object(object).unthrottled(settings)
    }

    /// Whether the last nomination of `object` was acknowledged and none followed (its
    /// acknowledged baseline is then the newest the client stored).
    #[inline]
    pub fn is_last_nomination_acked(&self, object: InternalIndex) -> bool {
        self.object(object).is_last_nomination_acked()
    }

    /// The slot a nomination of `object` by the packet with `ordinal` takes: the
    /// packet's own (`ordinal` modulo [`MAX_BASELINE_COUNT`], so that the objects a
    /// packet nominates share one batch head) unless it is taken, then the next free
    /// one; `None` when every slot is taken (nominations cover the round trip).
    #[inline]
    pub fn free_slot(&self, object: InternalIndex, ordinal: u64) -> Option<u8> {
        self.object(object).free_slot(ordinal)
    }

    /// Total live baselines over all objects.
    pub fn total(&self) -> usize {
        self.objects.iter().map(ObjectBaselines::live).sum()
    }

    /// Nominations waiting for their packet's fate.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
            + self
                .packets
                .iter()
                .filter(|p| p.shared.is_some())
                .map(|p| p.count as usize)
                .sum::<usize>()
    }

    /// Records a new baseline of `snapshot` (on which the caller holds a reference) in
    /// slot `index` (one [`free_slot`](Self::free_slot) gave), nominated by the packet
    /// with `ordinal`; it holds `synced` in sync and was built from the snapshot `prior`,
    /// whose own prior was `prior2` (references are taken on both; `prior2` is kept only
    /// for baselines far enough apart for a quadratic prediction). The tests' eager form
    /// of [`nominate_later`](Self::nominate_later) and [`settle`](Self::settle).
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    fn nominate(
        &mut self,
        storage: &mut BaselineStorage,
        object: InternalIndex,
        index: u8,
        snapshot: u32,
        synced: &ChangeMask,
        prior: Option<u32>,
        prior2: Option<u32>,
        ordinal: u64,
    ) {
        let priors = if self.is_slot_taken(object, index) {
            None
        } else {
            self.push_nomination(storage, object, index, synced, prior, prior2, ordinal)
        };
        match (priors, self.in_flight.back_mut()) {
            (Some((prior, prior2)), Some(n)) => {
                n.lineage = storage.take_lineage(snapshot, prior, prior2);
            }
            _ => storage.release(snapshot),
        }
    }

    /// Whether `index` names no slot, or one of the object's in use (acknowledged or
    /// nominated in flight).
    fn is_slot_taken(&self, object: InternalIndex, index: u8) -> bool {
        index >= MAX_BASELINE_COUNT
            || self
                .get(object)
                .is_some_and(|o| o.pending & (1 << index) != 0 || o.acked_slot() == index)
    }

    /// Records a nomination in flight, with no lineage yet (no reference taken), and
    /// returns the snapshots its lineage is to be built from (each [`NO_SNAPSHOT`]
    /// when absent); `None` when the table of synced masks is full (see
    /// [`Self::can_sync`]).
    #[allow(clippy::too_many_arguments)]
    fn push_nomination(
        &mut self,
        storage: &BaselineStorage,
        object: InternalIndex,
        index: u8,
        synced: &ChangeMask,
        prior: Option<u32>,
        prior2: Option<u32>,
        ordinal: u64,
    ) -> Option<(u32, u32)> {
        let Some(synced) = self.intern(synced) else {
            debug_assert!(false, "the plan nominates only a mask the table can hold");
            return None;
        };
        // The prior's prior serves only a quadratic prediction, which needs baselines
        // at least `QUADRATIC_MIN_INTERVAL` frames apart: with acks in step, none is kept.
        let prior2 = prior
            .and_then(|p| storage.snapshot_frame(p))
            .filter(|&f| storage.frame().wrapping_sub(f) >= QUADRATIC_MIN_INTERVAL)
            .and(prior2);
        if self.shared_packets > 0 && self.packets.back().is_some_and(|p| p.ordinal == ordinal) {
            // Added to a packet whose nominations may be shared.
            self.unshare_packets();
        }
        let Some(o) = self.objects.entry(object) else {
            debug_assert!(false, "an object's baselines always have room");
            return None;
        };
        o.pending |= 1 << index;
        o.set_newest(index);
        let epoch = o.epoch;
        self.in_flight.push_back(Nomination {
            object,
            lineage: NO_SNAPSHOT,
            synced,
            slot: index,
            epoch,
            pad: 0,
        });
        self.count_nominations(ordinal, 1, Author::Own);
        Some((prior.unwrap_or(NO_SNAPSHOT), prior2.unwrap_or(NO_SNAPSHOT)))
    }

    /// Moves the nominations of the packets that share them (see
    /// [`SharedNominations`]) into the queue, in packet order, with their lineages:
    /// for whatever reads or changes the queue by position. Positions kept into the
    /// queue move with their nominations.
    fn unshare_packets(&mut self) {
        if self.shared_packets == 0 {
            return;
        }
        self.shared_packets = 0;
        if let Some(m) = &mut self.mirror {
            // (A mirrored packet is the newest: its nominations go last.)
            m.shared = false;
        }
        let mut old = std::mem::take(&mut self.in_flight);
        let mut queue = std::collections::VecDeque::with_capacity(
            old.len() + self.packets.iter().map(|p| p.count as usize).sum::<usize>(),
        );
        // Where each run of the old queue begins, in it and in the new one.
        let mut moved: Vec<(usize, usize)> = Vec::new();
        let mut from = 0;
        for p in &mut self.packets {
            match p.shared.take() {
                Some(shared) => queue.extend(shared.iter()),
                None => {
                    moved.push((from, queue.len()));
                    let count = (p.count as usize).min(old.len());
                    queue.extend(old.drain(..count));
                    from += count;
                }
            }
        }
        // (Nominations of no packet: none, but they keep their place last.)
        moved.push((from, queue.len()));
        queue.append(&mut old);
        let at = |position: usize| {
            let run = moved.partition_point(|&(start, _)| start <= position);
            moved
                .get(run.wrapping_sub(1))
                .map_or(position, |&(start, to)| position - start + to)
        };
        for j in &mut self.joined {
            j.at = at(j.at);
        }
        self.creation_hint = at(self.creation_hint);
        self.settled.0 = at(self.settled.0);
        self.in_flight = queue;
    }

    /// Whether the front `packets` packets hold `nominations`, in order, each with
    /// the lineage it takes (see [`front_is`]).
    #[cfg(debug_assertions)]
    fn front_holds(&self, packets: usize, nominations: &[Nomination]) -> bool {
        let mut queued = Vec::new();
        let mut at = 0;
        for p in self.packets.iter().take(packets) {
            let Some(theirs) = nominations.get(at..at + p.count as usize) else {
                return false;
            };
            match &p.shared {
                Some(shared) if !shared.iter().eq(theirs.iter().copied()) => return false,
                Some(_) => {}
                None => queued.extend_from_slice(theirs),
            }
            at += p.count as usize;
        }
        at == nominations.len() && front_is(&self.in_flight, &self.joined, &queued)
    }

    /// How many of the nominations of the front `packets` packets are in the queue
    /// (the others are shared).
    fn queued_count(&self, packets: usize) -> usize {
        self.packets
            .iter()
            .take(packets)
            .filter(|p| p.shared.is_none())
            .map(|p| p.count as usize)
            .sum()
    }

    /// Gives the packets holding the newest `count` nominations fresh origins.
    fn refresh_origins(&mut self, count: usize) {
        let mut left = count;
        for p in self.packets.iter_mut().rev() {
            if left == 0 {
                break;
            }
            p.origin = fresh_origin();
            p.own = false;
            left = left.saturating_sub(p.count as usize);
        }
    }

    /// Counts `count` nominations just queued as packet `ordinal`'s (the newest).
    fn count_nominations(&mut self, ordinal: u64, count: usize, author: Author) {
        if count == 0 {
            return;
        }
        let count = count as u32;
        match self.packets.back_mut() {
            Some(p) if p.ordinal == ordinal => {
                p.count += count;
                // Own ones added to own ones keep the origin; any other mix is new.
                if !(p.own && author == Author::Own) {
                    p.origin = fresh_origin();
                    p.own = false;
                }
            }
            _ => self.packets.push_back(QueuedPacket {
                ordinal,
                count,
                origin: match author {
                    Author::Copied {
                        origin: Some(origin),
                    } => origin,
                    _ => fresh_origin(),
                },
                own: author == Author::Own,
                shared: None,
            }),
        }
    }

    /// The members an object's baselines hold in sync, merged: what is owed again when
    /// they are released because what the connection may receive changed.
    pub fn synced_union(&self, object: InternalIndex) -> Option<ChangeMask> {
        let mut merged: Option<ChangeMask> = None;
        for synced in self.synced_masks(object) {
            match merged.as_mut() {
                Some(m) => m.or_with(synced),
                None => merged = Some(synced.clone()),
            }
        }
        merged
    }

    /// Releases every baseline of an object (nominations in flight change nothing when
    /// their packet's fate is known): the next batch takes the full path.
    pub fn release_object(&mut self, storage: &mut BaselineStorage, object: InternalIndex) {
        if let Some(acked) = self.forget_object(object) {
            storage.release_lineage(acked, 1);
        }
    }

    /// [`release_object`](Self::release_object) while a packet is written: the
    /// connection's baselines of the object are gone at once, its hold on their
    /// lineage is dropped when the write pass is settled.
    pub fn release_object_later(&mut self, object: InternalIndex) {
        if let Some(acked) = self.forget_object(object) {
            self.released.push(acked);
        }
    }

    /// Empties an object's baselines (a new epoch makes its nominations in flight
    /// stale); returns the acknowledged one's lineage, which the caller releases.
    fn forget_object(&mut self, object: InternalIndex) -> Option<u32> {
        let o = self.objects.get_mut(object)?;
        let acked = o.acked;
        *o = ObjectBaselines {
            epoch: o.epoch.wrapping_add(1),
            ..EMPTY
        };
        (acked != NO_SNAPSHOT).then_some(acked)
    }

    /// Nominates, while packet `ordinal` is written, a new baseline of an object (its
    /// state now, `handle` naming it) in `slot`; built from the acknowledged baseline
    /// `prior` (and its own `prior2`), holding `synced` in sync. The storage is only
    /// read: the nomination takes its snapshot when the write pass is settled
    /// ([`settle`](Self::settle)). A slot in use is not nominated.
    #[allow(clippy::too_many_arguments)]
    pub fn nominate_later(
        &mut self,
        storage: &BaselineStorage,
        object: InternalIndex,
        handle: NetRefHandle,
        slot: u8,
        synced: &ChangeMask,
        prior: Option<u32>,
        prior2: Option<u32>,
        ordinal: u64,
    ) {
        if self.is_slot_taken(object, slot) {
            return;
        }
        // The snapshot and lineage are taken when settled.
        if let Some((prior, prior2)) =
            self.push_nomination(storage, object, slot, synced, prior, prior2, ordinal)
        {
            self.unsettled.push(Unsettled {
                handle,
                prior,
                prior2,
            });
        }
    }

    /// The connection whose packet this pass's nominations were partly taken from
    /// (a replayed section), to be settled before this one.
    pub(crate) fn mirrored_leader(&self) -> Option<ConnectionId> {
        self.mirror.as_ref().map(|m| m.leader)
    }

    /// The handles and priors of the pass's nominations ([`unsettled_parts`]).
    fn unsettled_parts(&self) -> [&[Unsettled]; 3] {
        unsettled_parts(&self.unsettled, self.mirror.as_ref())
    }

    /// How many of the nominations in flight are the pass's, waiting to settle.
    fn unsettled_len(&self) -> usize {
        self.unsettled.len() + self.mirror.as_ref().map_or(0, Mirror::len)
    }

    /// Settles the write pass (no packet is being written now): each nomination made
    /// takes the snapshot of its object's state in this frame (created by the first
    /// connection settled, shared by the others; committed by
    /// [`BaselineStorage::commit_reservations`]) and its lineage (shared with the
    /// connections that nominated it from the same priors); then the lineages let go
    /// of are released (after the nominations took theirs: a prior they name stays
    /// alive).
    ///
    /// `leader` is the [`mirrored_leader`](Self::mirrored_leader), settled already.
    /// The nominations taken from its packet join its lineages in bulk, without looking
    /// them up: the leader counts them ([`add_joins`](Self::add_joins) adds them to the
    /// lineages' holders once every connection of the pass is settled), and this
    /// connection takes the lineage ids when it first reads them
    /// ([`take_joined`](Self::take_joined)). Same objects, snapshots and priors: the
    /// leader's nominations, so the packet keeps the leader's origin. (Looked up
    /// instead, they could take other lineages, since the storage shares a lineage
    /// with an object's newest only: such a packet takes a fresh origin.)
    pub fn settle(
        &mut self,
        storage: &mut BaselineStorage,
        mut leader: Option<&mut ConnectionBaselines>,
    ) {
        let count = self.unsettled_len();
        // The nominations copied from the leader's packet join its lineages, when they
        // are among the leader's settled ones.
        let joinable = match (&self.mirror, leader.as_deref()) {
            (Some(m), Some(leader)) => {
                let (settled, settled_count) = leader.settled;
                m.start + m.len() <= count
                    && m.from + m.len() <= settled_count
                    && settled + settled_count <= leader.in_flight.len()
            }
            _ => false,
        };
        if !joinable && self.mirror.as_ref().is_some_and(|m| m.shared) {
            // Looked up: by position in the queue.
            self.unshare_packets();
        }
        // A mirrored packet's shared nominations are not in the queue (and it has no
        // others: see `append_tail`).
        let shared = self
            .mirror
            .as_ref()
            .filter(|m| m.shared)
            .map_or(0, Mirror::len);
        debug_assert!(
            shared == 0 || shared == count,
            "a shared packet is all copied"
        );
        // The pass's nominations are the newest in flight: no delivery settles a
        // packet before its pass is settled.
        let in_queue = count - shared;
        let start = self.in_flight.len() - in_queue;
        debug_assert!(
            self.in_flight
                .range(start..)
                .all(|n| n.lineage == NO_SNAPSHOT),
            "the unsettled nominations are not the newest in flight"
        );
        self.settled = (start, in_queue);
        self.settled_lineages = None;
        self.joins.clear();
        self.release_repeats = 0;
        let own = std::mem::take(&mut self.unsettled);
        let mirror = self.mirror.take();
        let mut copied = 0..0;
        if let (Some(m), Some(leader), true) = (&mirror, leader.as_deref_mut(), joinable) {
            let (settled, _) = leader.settled;
            copied = m.start..m.start + m.len();
            let lineages = (leader.settled_lineages(), m.from);
            match self.packets.back_mut().and_then(|p| p.shared.as_mut()) {
                Some(nominations) if m.shared => {
                    debug_assert!(
                        nominations
                            .nominations
                            .iter()
                            .zip(leader.in_flight.range(settled + m.from..))
                            .all(|(n, l)| n.object == l.object),
                        "a replayed section's nominations are the leader's"
                    );
                    nominations.lineages = Some(lineages);
                }
                _ => {
                    debug_assert!(
                        self.in_flight
                            .range(start + copied.start..start + copied.end)
                            .zip(leader.in_flight.range(settled + m.from..))
                            .all(|(n, l)| n.object == l.object),
                        "a replayed section's nominations are the leader's"
                    );
                    self.joined.push(Joined {
                        lineages: lineages.0,
                        from: m.from,
                        at: start + copied.start,
                        len: m.len(),
                    });
                }
            }
            leader.count_joins(m.from, m.len());
        }
        // The others are looked up.
        let parts = unsettled_parts(&own, mirror.as_ref());
        for k in (0..copied.start).chain(copied.end..count) {
            if let (Some(n), Some(u)) = (self.in_flight.get_mut(start + k), unsettled_at(&parts, k))
            {
                n.settle(storage, u);
            }
        }
        if mirror.is_some() && copied.is_empty() {
            // Copied but looked up: the lineages may not be the leader's, so the
            // packets are no longer known to hold its nominations.
            self.refresh_origins(count);
        }
        self.unsettled = own;
        self.unsettled.clear();
        // What a connection in step with its leader lets go of is what the leader let go
        // of: counted, and released with the leader's.
        self.released_settled.clear();
        match leader {
            Some(leader)
                if !self.released.is_empty() && self.released == leader.released_settled =>
            {
                leader.release_repeats += 1;
                self.released.clear();
            }
            _ => {
                for &l in &self.released {
                    storage.release_lineage(l, 1);
                }
                std::mem::swap(&mut self.released, &mut self.released_settled);
            }
        }
    }

    /// The lineages of the nominations settled last, shared.
    fn settled_lineages(&mut self) -> Arc<[u32]> {
        let (start, count) = self.settled;
        let in_flight = &self.in_flight;
        self.settled_lineages
            .get_or_insert_with(|| {
                in_flight
                    .range(start..start + count)
                    .map(|n| n.lineage)
                    .collect()
            })
            .clone()
    }

    /// Counts one more holder of the `len` nominations settled last from `from` on.
    fn count_joins(&mut self, from: usize, len: usize) {
        if len == 0 {
            return;
        }
        if self.joins.is_empty() {
            self.joins.resize(self.settled.1 + 1, 0);
        }
        self.joins[from] += 1;
        self.joins[from + len] -= 1;
    }

    /// Adds the holders counted while the pass was settled (connections that replayed
    /// this one's section) to the lineages of the nominations settled last, and drops
    /// the holders those connections let go of with this one's. Call once every
    /// connection of the pass is settled.
    pub fn add_joins(&mut self, storage: &mut BaselineStorage) {
        if self.release_repeats > 0 {
            for run in self.released_settled.chunks(READ_AHEAD) {
                std::hint::black_box(storage.read_ahead(run.iter().copied()));
                for &l in run {
                    storage.release_lineage(l, self.release_repeats);
                }
            }
            self.release_repeats = 0;
        }
        if self.joins.is_empty() {
            return;
        }
        let (start, count) = self.settled;
        let mut holders = 0i32;
        for (n, &d) in self.in_flight.range(start..start + count).zip(&self.joins) {
            holders += d;
            if holders > 0 {
                storage.join_nominated(n.lineage, holders as u32);
            }
        }
        self.joins.clear();
    }

    /// Gives the nominations copied from other connections' packets those
    /// connections' lineages (see [`settle`](Self::settle)). Called before anything
    /// reads the lineages of the nominations in flight.
    fn take_joined(&mut self) {
        for j in std::mem::take(&mut self.joined) {
            self.take_one_joined(&j);
        }
    }

    /// The `count` oldest nominations in flight leave the queue without their
    /// lineages read (their packets' fates were taken from another connection): the
    /// joins of those are dropped, the others move with the queue.
    fn skip_joined(&mut self, count: usize) {
        if self
            .joined
            .iter()
            .any(|j| j.at < count && j.at + j.len > count)
        {
            // (A join cut by the drain: never the case with whole packets.)
            self.take_joined();
            return;
        }
        self.joined.retain_mut(|j| {
            let kept = j.at >= count;
            j.at = j.at.saturating_sub(count);
            kept
        });
    }

    fn take_one_joined(&mut self, j: &Joined) {
        // Slice by slice: the queue's range iterator costs more than the stores.
        let lineages = j.lineages.get(j.from..j.from + j.len).unwrap_or_default();
        let end = j.at + j.len;
        let (front, back) = self.in_flight.as_mut_slices();
        let split = front.len();
        let front = front
            .get_mut(j.at.min(split)..end.min(split))
            .unwrap_or_default();
        let back = back
            .get_mut(j.at.saturating_sub(split)..end.saturating_sub(split))
            .unwrap_or_default();
        debug_assert!(
            lineages.len() == j.len && front.len() + back.len() == j.len,
            "the joined nominations are in the queue, with a lineage each"
        );
        let (front_lineages, back_lineages) = lineages.split_at(front.len().min(lineages.len()));
        for (n, &l) in front.iter_mut().zip(front_lineages) {
            n.lineage = l;
        }
        for (n, &l) in back.iter_mut().zip(back_lineages) {
            n.lineage = l;
        }
    }

    /// Releases everything (the connection goes away).
    pub fn release_all(&mut self, storage: &mut BaselineStorage) {
        self.unshare_packets();
        self.take_joined();
        // A fate not applied yet would only move references from the nominations in
        // flight to the acknowledged baselines: every one of both is released below.
        self.fates.clear();
        // Unsettled nominations hold no reference yet.
        self.settle(storage, None);
        for o in self.objects.take().iter() {
            storage.release_lineage(o.acked, 1);
        }
        for n in std::mem::take(&mut self.in_flight) {
            storage.release_lineage(n.lineage, 1);
        }
        self.packets.clear();
    }

    /// The fate of the packet with `ordinal` (packets are settled in order): each
    /// nomination it carried becomes its object's acknowledged baseline (destroying the
    /// previous one) if delivered, or is released if lost or discarded (the members the
    /// batch carried are owed again through the packet record). Returns the number of
    /// baselines promoted.
    ///
    /// Fates put off with [`defer_delivery`](Self::defer_delivery) are applied first.
    pub fn on_delivery(
        &mut self,
        storage: &mut BaselineStorage,
        ordinal: u64,
        status: DeliveryStatus,
    ) -> usize {
        self.catch_up();
        let promoted = self.apply_fate(ordinal, status);
        // No packet is being written: what the fates let go of is released now.
        for l in self.released.drain(..) {
            storage.release_lineage(l, 1);
        }
        promoted
    }

    /// [`on_delivery`](Self::on_delivery) put off until [`catch_up`](Self::catch_up),
    /// which the writer calls right before it next reads these baselines (on its writer
    /// thread, where they are still in cache for the write). Only packets that
    /// nominated something are queued.
    pub fn defer_delivery(&mut self, ordinal: u64, status: DeliveryStatus) {
        if self.packets.front().is_some_and(|p| p.ordinal <= ordinal) {
            self.fates.push((ordinal, status));
        }
    }

    /// Whether anything waits for [`catch_up`](Self::catch_up): fates put off with
    /// [`defer_delivery`](Self::defer_delivery).
    pub fn is_behind(&self) -> bool {
        !self.fates.is_empty()
    }

    /// Applies the fates put off with [`defer_delivery`](Self::defer_delivery), in
    /// order. The storage is
    /// not touched: the lineages the fates let go of are released when the
    /// connection's next write pass is settled (or at its next
    /// [`on_delivery`](Self::on_delivery)).
    pub fn catch_up(&mut self) {
        self.catch_up_in_pass(None);
    }

    /// [`catch_up`](Self::catch_up) in a write pass, with the log of the pass's
    /// catch-ups on this writer thread: a connection holding the same shared
    /// baselines as one caught up before it, with the same nominations settled the
    /// same way (the same packets: see [`QueuedPacket::origin`]), takes that one's
    /// result, and one whose baselines are shared with others logs its own.
    pub(crate) fn catch_up_in_pass(&mut self, moves: Option<&mut FateMoves>) {
        if self.fates.is_empty() {
            return;
        }
        let mut settling = std::mem::take(&mut self.settling);
        self.plan_fates(&self.fates, &mut settling);
        self.fates.clear();
        match moves {
            Some(moves) => self.settle_logged(&settling, moves),
            None => {
                self.settle_packets(&settling);
            }
        }
        self.settling = settling;
    }

    /// The packets `fates` settle, from the front of the queue (a fate settles its
    /// packet and any older one never reported), each with its count of nominations
    /// and how, into `out`.
    fn plan_fates(&self, fates: &[(u64, DeliveryStatus)], out: &mut Vec<(u32, Settle)>) {
        out.clear();
        let mut front = 0;
        for &(ordinal, status) in fates {
            while let Some(p) = self.packets.get(front) {
                if p.ordinal > ordinal {
                    break;
                }
                front += 1;
                out.push((p.count, Settle::of(p.ordinal == ordinal, status)));
            }
        }
    }

    /// Settles the front `packets`, taking the move from `moves` where one is logged
    /// from the same copy with the same nominations (packets of the same origins),
    /// else logging its own when the copy is shared.
    fn settle_logged(&mut self, packets: &[(u32, Settle)], moves: &mut FateMoves) {
        // Those in the queue (the others are shared).
        let in_queue = self.queued_count(packets.len());
        // (The packets always count the nominations in flight.)
        if in_queue > self.in_flight.len() || packets.len() > self.packets.len() {
            self.settle_packets(packets);
            return;
        }
        if let Some(shared) = self.objects.shared() {
            let queued = &self.packets;
            let same_fates = |m: &FateMove| {
                m.packets == packets
                    && m.origins
                        .iter()
                        .eq(queued.iter().take(packets.len()).map(|p| &p.origin))
            };
            if let Some(m) = moves.find(shared, same_fates) {
                #[cfg(debug_assertions)]
                debug_assert!(
                    self.front_holds(packets.len(), &m.nominations),
                    "packets of the same origins hold the same nominations"
                );
                self.objects.adopt(Arc::clone(&m.after));
                self.released.extend_from_slice(&m.released);
                self.skip_joined(in_queue);
                self.in_flight.drain(..in_queue);
                for p in self.packets.drain(..packets.len()) {
                    self.shared_packets -= usize::from(p.shared.is_some());
                }
                self.creation_hint = self.creation_hint.saturating_sub(in_queue);
                return;
            }
        }
        let Some(before) = moves.loggable(&self.objects) else {
            self.settle_packets(packets);
            return;
        };
        // Settling reads the lineages (and the log keeps them, in debug builds).
        self.unshare_packets();
        self.take_joined();
        let origins = self
            .packets
            .iter()
            .take(packets.len())
            .map(|p| p.origin)
            .collect();
        #[cfg(debug_assertions)]
        let nominations = {
            let count: usize = packets.iter().map(|&(count, _)| count as usize).sum();
            self.in_flight.range(..count).copied().collect()
        };
        let released = self.released.len();
        self.settle_packets(packets);
        moves.push(FateMove {
            before,
            packets: packets.to_vec(),
            origins,
            #[cfg(debug_assertions)]
            nominations,
            after: self.objects.publish_frozen(),
            released: self.released[released..].to_vec(),
        });
    }

    /// Settles the front `packets` (see [`settle_packet`](Self::settle_packet));
    /// returns the number of baselines promoted.
    fn settle_packets(&mut self, packets: &[(u32, Settle)]) -> usize {
        // Settling reads the nominations' lineages, in the queue.
        self.unshare_packets();
        self.take_joined();
        let mut promoted = 0;
        for &(count, how) in packets {
            self.packets.pop_front();
            promoted += self.settle_packet(count as usize, how);
        }
        promoted
    }

    /// The fate of packet `ordinal`, its released lineages left in `released`.
    fn apply_fate(&mut self, ordinal: u64, status: DeliveryStatus) -> usize {
        let mut settling = std::mem::take(&mut self.settling);
        self.plan_fates(&[(ordinal, status)], &mut settling);
        let promoted = self.settle_packets(&settling);
        self.settling = settling;
        promoted
    }

    /// Settles the `count` oldest nominations in flight as `how` says. The lineages
    /// let go of wait in `released`.
    fn settle_packet(&mut self, count: usize, how: Settle) -> usize {
        let mut promoted = 0;
        let count = count.min(self.in_flight.len());
        self.creation_hint = self.creation_hint.saturating_sub(count);
        let released = &mut self.released;
        let mut let_go = |l: u32| {
            if l != NO_SNAPSHOT {
                released.push(l);
            }
        };
        let objects = &mut *self.objects;
        let current = how != Settle::Stale;
        for &n in self.in_flight.range(..count) {
            let o = match objects.get_mut(n.object) {
                Some(o) if current && o.epoch == n.epoch && o.pending & (1 << n.slot) != 0 => o,
                _ => {
                    let_go(n.lineage);
                    continue;
                }
            };
            o.pending &= !(1 << n.slot);
            if how == Settle::Delivered {
                let_go(o.promote(&n));
                promoted += 1;
            } else {
                let_go(n.lineage);
            }
        }
        self.in_flight.drain(..count);
        promoted
    }
}

/// Whether every bit of `a` is set in `b`.
#[inline]
pub(crate) fn is_subset(a: &ChangeMask, b: &ChangeMask) -> bool {
    let b = b.words();
    a.words()
        .iter()
        .enumerate()
        .all(|(i, &w)| w & !b.get(i).copied().unwrap_or(0) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_baselines_take_8_bytes_and_a_nomination_12() {
        assert_eq!(std::mem::size_of::<ObjectBaselines>(), 8);
        assert_eq!(std::mem::size_of::<Nomination>(), 12);
        let mut o = EMPTY;
        assert_eq!(
            (o.acked_slot(), o.newest()),
            (INVALID_BASELINE_INDEX, INVALID_BASELINE_INDEX)
        );
        assert!(
            !o.is_newest_acked(),
            "no nomination is not an acknowledged one"
        );
        o.set_newest(3);
        assert_eq!((o.acked_slot(), o.newest()), (INVALID_BASELINE_INDEX, 3));
        let n = Nomination {
            object: 0,
            lineage: 7,
            synced: 2,
            slot: 3,
            epoch: 0,
            pad: 0,
        };
        assert_eq!(o.promote(&n), NO_SNAPSHOT);
        assert_eq!((o.acked_slot(), o.newest()), (3, 3));
        assert!(o.is_newest_acked());
        assert_eq!((o.acked, o.synced), (7, 2));
    }

    #[test]
    fn a_read_ahead_reads_the_acknowledged_snapshots_and_skips_what_names_nothing() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let mut c = ConnectionBaselines::default();
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        // Ids that name nothing (no baseline, freed or never made) read nothing.
        let nothing = [NO_SNAPSHOT, u32::MAX, 12_345];
        assert_eq!(s.read_ahead(nothing.into_iter()), 0);
        assert_eq!(
            s.read_ahead(c.acked_lineages([1, 7, u32::MAX].into_iter())),
            0
        );
        let snap = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 1, snap, &all, None, None, 1);
        assert_eq!(c.on_delivery(&mut s, 1, DeliveryStatus::Delivered), 1);
        // Object 1's acknowledged lineage (its holders too) and `snap`'s entry are read,
        // its state (as the pass's end commits it) prefetched; objects without a
        // baseline add nothing.
        let state: Arc<dyn ErasedState> = Arc::new(crate::nested::support::StubState);
        s.infos[snap as usize].state = Some(state.clone());
        let holders = s.lineage(c.object(1).acked).map_or(0, |l| l.refs as usize);
        assert_eq!(holders, 1);
        assert_eq!(
            s.read_ahead(c.acked_lineages([0, 1, 2].into_iter())),
            holders
        );
        // At most a run of READ_AHEAD lineages is read.
        let many = std::iter::repeat_n(c.object(1).acked, READ_AHEAD + 1);
        assert_eq!(s.read_ahead(many), 0, "an even count of the same state");
    }

    #[test]
    fn connections_share_a_lineage_when_snapshot_and_priors_match() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let [mut a, mut b, mut c]: [ConnectionBaselines; 3] = Default::default();
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        let prior = s.create_baseline(1, h, true).unwrap();
        s.release(prior); // Only its reservation holds it now.
        s.begin_frame();
        let nominate = |c: &mut ConnectionBaselines, s: &mut BaselineStorage, p| {
            let snap = s.create_baseline(1, h, true).unwrap();
            c.nominate(s, 1, 1, snap, &all, p, None, 1);
            snap
        };
        let snap = nominate(&mut a, &mut s, Some(prior));
        assert_eq!(
            nominate(&mut b, &mut s, Some(prior)),
            snap,
            "one snapshot a frame"
        );
        assert_eq!(s.live_lineages(), 1, "same snapshot, same prior: shared");
        nominate(&mut c, &mut s, None);
        assert_eq!(s.live_lineages(), 2, "another prior: another lineage");
        // The reservation, and one reference per lineage (not per connection).
        assert_eq!(s.ref_count(snap), 3);
        assert_eq!(
            s.ref_count(prior),
            2,
            "its reservation and the shared lineage"
        );
        for c in [&mut a, &mut b, &mut c] {
            assert_eq!(c.on_delivery(&mut s, 1, DeliveryStatus::Delivered), 1);
        }
        let seen = |c: &ConnectionBaselines| c.acked(&s, 1).map(|(k, b)| (k, b.snapshot, b.prior));
        assert_eq!(seen(&a), Some((1, snap, Some(prior))));
        assert_eq!(seen(&b), seen(&a));
        assert_eq!(seen(&c), Some((1, snap, None)));
        a.release_object(&mut s, 1);
        assert_eq!(s.live_lineages(), 2, "b still holds the shared one");
        b.release_object(&mut s, 1);
        c.release_object(&mut s, 1);
        assert_eq!(s.live_lineages(), 0);
        assert_eq!(
            (s.ref_count(snap), s.ref_count(prior)),
            (1, 1),
            "the reservations"
        );
    }

    #[test]
    fn an_older_nomination_acknowledged_is_not_the_newest() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let mut c = ConnectionBaselines::default();
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        let a = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 1, a, &all, None, None, 1);
        s.begin_frame();
        let b = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 2, b, &all, None, None, 2);
        assert_eq!(c.on_delivery(&mut s, 1, DeliveryStatus::Delivered), 1);
        assert!(
            !c.is_last_nomination_acked(1),
            "slot 2 is newer and in flight"
        );
        assert_eq!(c.on_delivery(&mut s, 2, DeliveryStatus::Delivered), 1);
        assert!(c.is_last_nomination_acked(1));
        assert_eq!(c.acked(&s, 1).map(|(k, b)| (k, b.snapshot)), Some((2, b)));
    }

    #[test]
    fn a_packets_tail_and_words_make_another_connection_what_the_packet_made_of_one() {
        // Two connections in the same state; a packet nominates on the first. Its
        // words and tail, taken by the second, give the second the same baselines:
        // the same nominations settle into the same shared lineages.
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let (mut a, mut b) = (
            ConnectionBaselines::default(),
            ConnectionBaselines::default(),
        );
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        assert_eq!(a.word(1), b.word(1), "untouched objects read alike");
        assert_eq!(a.word(1), b.word(7));
        let mark = a.mark();
        a.nominate_later(&s, 1, h, 3, &all, None, None, 0);
        assert_ne!(a.word(1), b.word(1));
        let mut tail = BaselinesTail::default();
        a.tail_since(mark, &mut tail);
        assert_eq!(tail.nominations.len(), 1);
        assert_eq!(tail.synced, vec![all.clone()], "the mask it interned");
        b.words_mut().set_word(1, a.word(1));
        b.append_tail(&tail, 0, 0);
        assert_eq!(b.mirrored_leader(), Some(0));
        assert_eq!(a.word(1), b.word(1));
        assert_eq!(a.synced_table(), b.synced_table());
        assert_eq!(b.intern(&all), Some(0), "the index knows the mask");
        a.settle(&mut s, None);
        b.settle(&mut s, Some(&mut a));
        a.add_joins(&mut s);
        assert_eq!(b.mirrored_leader(), None, "settled");
        assert_eq!(s.live_lineages(), 1, "both hold the one lineage");
        for c in [&mut a, &mut b] {
            assert_eq!(c.on_delivery(&mut s, 0, DeliveryStatus::Delivered), 1);
        }
        let acked = |c: &ConnectionBaselines| c.acked(&s, 1).map(|(k, b)| (k, b.lineage));
        assert!(acked(&a).is_some());
        assert_eq!(acked(&a), acked(&b));
        assert_eq!(a.word(1), b.word(1));
    }

    #[test]
    fn a_replayed_packets_nominations_settle_on_the_leaders_lineages() {
        // Connection a records a packet that b replays; c, settled between them,
        // nominates the same object from another prior. b joins a's lineage, not a new
        // one built from the object's last lineage (c's).
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let [mut a, mut b, mut c]: [ConnectionBaselines; 3] = Default::default();
        let [h, g, k] = [9, 10, 11].map(|id| NetRefHandle::new(id, false, 0));
        let all = ChangeMask::all(4);
        let prior = s.create_baseline(1, h, true).unwrap();
        s.begin_frame();
        // a's packet: an object outside the section, then the section (objects 1, 2).
        a.nominate_later(&s, 3, k, 0, &all, None, None, 0);
        let mark = a.mark();
        a.nominate_later(&s, 1, h, 1, &all, Some(prior), None, 0);
        a.nominate_later(&s, 2, g, 2, &all, None, None, 0);
        let mut tail = BaselinesTail::default();
        a.tail_since(mark, &mut tail);
        assert_eq!(tail.unsettled_from, 1);
        b.append_tail(&tail, 0, 7);
        c.nominate_later(&s, 1, h, 1, &all, None, None, 0);
        a.settle(&mut s, None);
        c.settle(&mut s, None);
        let created = s.stats().baselines_created;
        b.settle(&mut s, Some(&mut a));
        let lineages =
            |x: &ConnectionBaselines| x.in_flight.iter().map(|n| n.lineage).collect::<Vec<_>>();
        assert!(
            lineages(&b).iter().all(|&l| l == NO_SNAPSHOT),
            "taken when b's lineages are first read"
        );
        assert_eq!(b.joined.len(), 1);
        a.add_joins(&mut s);
        assert_eq!(s.stats().baselines_created, created + 2, "each copy counts");
        let holders = |x: &ConnectionBaselines, s: &BaselineStorage| {
            x.in_flight
                .iter()
                .map(|n| s.lineage(n.lineage).map_or(0, |l| l.refs))
                .collect::<Vec<_>>()
        };
        assert_eq!(holders(&a, &s), [1, 2, 2], "b holds the section's two");
        b.take_joined();
        assert_eq!(lineages(&b), lineages(&a)[1..]);
        assert_ne!(lineages(&c)[0], lineages(&a)[1], "c's prior differs");
        assert_eq!(s.live_lineages(), 4, "a's three and c's one: b made none");
        for x in [&mut a, &mut b, &mut c] {
            x.release_all(&mut s);
        }
        assert_eq!(s.live_lineages(), 0, "every holder let go");
    }

    #[test]
    fn a_tails_handles_are_shared_and_a_second_tail_settles_by_lookup() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let [mut a, mut d, mut b, mut e]: [ConnectionBaselines; 4] = Default::default();
        let handles = [9, 10, 11, 12, 13].map(|id| NetRefHandle::new(id, false, 0));
        let all = ChangeMask::all(4);
        // Each nomination from a prior of its own: a lookup with another's differs.
        let priors = [0, 1, 2, 3, 4].map(|o| s.create_baseline(o, handles[o as usize], true));
        s.begin_frame();
        let nominate = |x: &mut ConnectionBaselines, s: &BaselineStorage, o: u32| {
            x.nominate_later(
                s,
                o,
                handles[o as usize],
                0,
                &all,
                priors[o as usize],
                None,
                0,
            );
        };
        let tail_of = |x: &mut ConnectionBaselines, objects: &[u32]| {
            let mark = x.mark();
            for &o in objects {
                nominate(x, &s, o);
            }
            let mut tail = BaselinesTail::default();
            x.tail_since(mark, &mut tail);
            tail
        };
        let (first, second) = (tail_of(&mut a, &[1, 2]), tail_of(&mut d, &[4]));
        // b: its own nomination, a's tail (shared, not copied), another of its own.
        nominate(&mut b, &s, 3);
        b.append_tail(&first, 0, 0);
        nominate(&mut b, &s, 0);
        assert_eq!(b.unsettled.len(), 2, "only b's own are copied");
        assert_eq!(b.unsettled_len(), 4);
        let mut whole = BaselinesTail::default();
        b.tail_since(
            BaselinesMark {
                in_flight: 0,
                unsettled: 0,
                released: 0,
                synced: 0,
            },
            &mut whole,
        );
        let order: Vec<_> = whole.unsettled.iter().map(|u| u.handle).collect();
        assert_eq!(
            order,
            [3, 1, 2, 0].map(|o| handles[o]),
            "in the order nominated"
        );
        // e: a tail, its own, another tail: the second ends the mirror, and all are
        // looked up.
        e.append_tail(&first, 0, 0);
        nominate(&mut e, &s, 3);
        e.append_tail(&second, 0, 1);
        assert_eq!(e.mirrored_leader(), None);
        assert_eq!(e.unsettled.len(), 4, "the first tail's copied in place");
        a.settle(&mut s, None);
        d.settle(&mut s, None);
        e.settle(&mut s, None);
        b.settle(&mut s, Some(&mut a));
        a.add_joins(&mut s);
        b.take_joined();
        let lineages =
            |x: &ConnectionBaselines| x.in_flight.iter().map(|n| n.lineage).collect::<Vec<_>>();
        let (a_, b_, d_) = (lineages(&a), lineages(&b), lineages(&d));
        assert_eq!(
            lineages(&e),
            [&a_[..], &b_[..1], &d_[..]].concat(),
            "looked up alike"
        );
        assert_eq!(lineages(&b)[1..3], lineages(&a), "joined the leader's");
        assert!(
            lineages(&b).iter().all(|&l| l != NO_SNAPSHOT),
            "all settled"
        );
        for x in [&mut a, &mut d, &mut b, &mut e] {
            x.release_all(&mut s);
        }
        assert_eq!(s.live_lineages(), 0, "every holder let go");
    }

    #[test]
    fn a_full_table_of_synced_masks_takes_no_new_mask() {
        let mut c = ConnectionBaselines::default();
        let mask = |i: usize| {
            let mut m = ChangeMask::new(16);
            for bit in 0..16 {
                if i >> bit & 1 == 1 {
                    m.set(bit);
                }
            }
            m
        };
        for i in 0..MAX_SYNCED_MASKS {
            assert!(c.can_sync(&mask(i)));
            assert_eq!(c.intern(&mask(i)), Some(i as u8));
        }
        let new = mask(MAX_SYNCED_MASKS);
        assert!(!c.can_sync(&new));
        assert_eq!(c.intern(&new), None);
        // The masks it holds are still taken, the last and any other.
        assert!(c.can_sync(&mask(MAX_SYNCED_MASKS - 1)) && c.can_sync(&mask(17)));
        assert_eq!(c.intern(&mask(17)), Some(17));
        assert_eq!(c.intern(&mask(3)), Some(3));
    }

    #[test]
    fn lost_nomination_is_released_and_ack_promotes() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let mut c = ConnectionBaselines::default();
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        let snap = s.create_baseline(1, h, true).unwrap();
        assert_eq!(c.free_slot(1, 5), Some(5));
        c.nominate(&mut s, 1, 5, snap, &all, None, None, 5);
        assert_eq!(c.pending(1), 1 << 5);
        assert_eq!(
            c.on_delivery(&mut s, 4, DeliveryStatus::Lost),
            0,
            "another packet"
        );
        assert_eq!(c.in_flight(), 1);
        assert_eq!(c.on_delivery(&mut s, 5, DeliveryStatus::Lost), 0);
        assert_eq!((c.count(1), c.pending(1), c.in_flight()), (0, 0, 0));
        assert_eq!(s.ref_count(snap), 1, "only the reservation is left");
        let snap = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 6, snap, &all, None, None, 6);
        assert_eq!(c.on_delivery(&mut s, 6, DeliveryStatus::Delivered), 1);
        assert_eq!(
            c.acked(&s, 1).map(|(k, b)| (k, b.snapshot)),
            Some((6, snap))
        );
        assert!(c.is_last_nomination_acked(1));
        // Built from the acknowledged one: it holds a reference on its prior.
        s.begin_frame();
        let snap2 = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 7, snap2, &all, Some(snap), None, 7);
        assert!(!c.is_last_nomination_acked(1));
        assert_eq!(c.count(1), 2);
        assert_eq!(s.ref_count(snap), 3, "reservation, acked, prior of slot 7");
        assert_eq!(c.on_delivery(&mut s, 7, DeliveryStatus::Delivered), 1);
        assert_eq!(c.count(1), 1, "the previous acked baseline is destroyed");
        assert!(c.is_last_nomination_acked(1));
        assert_eq!(c.acked(&s, 1).unwrap().1.prior, Some(snap));
        assert_eq!(s.ref_count(snap), 2, "still the prior of slot 7");
        // Releasing the object drops both the slot and its prior.
        assert_eq!(c.synced_union(1), Some(all));
        c.release_object(&mut s, 1);
        assert_eq!(s.ref_count(snap), 1);
        assert_eq!(s.ref_count(snap2), 1);
    }

    #[test]
    fn nominations_in_flight_take_free_slots_and_settle_in_order() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let mut c = ConnectionBaselines::default();
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        // Seven packets in flight, each nominating: every slot but the acked one.
        let first = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 0, first, &all, None, None, 0);
        c.on_delivery(&mut s, 0, DeliveryStatus::Delivered);
        let mut snaps = Vec::new();
        for ordinal in 1..8u64 {
            s.begin_frame();
            let slot = c.free_slot(1, ordinal).unwrap();
            assert_eq!(
                u64::from(slot),
                ordinal % 8,
                "a packet's own slot when free"
            );
            let snap = s.create_baseline(1, h, true).unwrap();
            c.nominate(&mut s, 1, slot, snap, &all, Some(first), None, ordinal);
            snaps.push(snap);
        }
        assert_eq!(c.free_slot(1, 8), None, "every slot is taken");
        assert_eq!(c.count(1), 8);
        // Packet 1 is lost, packet 2 delivered: slot 1 frees, slot 2 is acknowledged
        // and slot 0 (the previous acknowledged) frees.
        c.on_delivery(&mut s, 1, DeliveryStatus::Lost);
        c.on_delivery(&mut s, 2, DeliveryStatus::Delivered);
        assert_eq!(c.acked(&s, 1).unwrap().0, 2);
        assert_eq!(c.free_slot(1, 8), Some(0));
        assert_eq!(c.free_slot(1, 9), Some(1));
        assert_eq!(
            c.free_slot(1, 10),
            Some(0),
            "slot 2 is taken: the next free"
        );
        // Releasing the object: later fates of its old nominations change nothing.
        c.release_object(&mut s, 1);
        assert_eq!(c.count(1), 0);
        for ordinal in 3..8 {
            assert_eq!(c.on_delivery(&mut s, ordinal, DeliveryStatus::Delivered), 0);
        }
        assert_eq!(c.in_flight(), 0);
        for snap in snaps {
            assert_eq!(s.ref_count(snap), 1, "only the reservation is left");
        }
    }

    #[test]
    fn creations_in_flight_are_found_in_any_order() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let mut c = ConnectionBaselines::default();
        let all = ChangeMask::all(4);
        // Many objects created, one packet each, none acknowledged yet.
        let n = 600u32;
        for o in 0..n {
            let h = NetRefHandle::new(u64::from(o) + 1, false, 0);
            let snap = s.create_baseline(1, h, true).unwrap();
            c.nominate(&mut s, o, 0, snap, &all, None, None, u64::from(o));
        }
        // In object order (the common one), backwards, and strided.
        let orders: [Vec<u32>; 3] = [
            (0..n).collect(),
            (0..n).rev().collect(),
            (0..n).map(|i| i * 7 % n).collect(),
        ];
        for order in orders {
            for o in order {
                let lineage = c.in_flight[o as usize].lineage;
                let (slot, view) = c.creation(&s, o).expect("a creation in flight");
                assert_eq!((slot, view.lineage), (0, lineage));
            }
        }
        // The first half delivered: acknowledged, no longer a creation in flight, and
        // out of the index; the rest still found.
        for ordinal in 0..u64::from(n / 2) {
            c.on_delivery(&mut s, ordinal, DeliveryStatus::Delivered);
        }
        for o in 0..n {
            assert_eq!(c.creation(&s, o).is_some(), o >= n / 2, "object {o}");
        }
        // An object acknowledged, nominating (not indexed), then released: its next
        // nomination is its only one, indexed anew.
        let h = NetRefHandle::new(1, false, 0);
        let snap = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 0, 1, snap, &all, None, None, u64::from(n));
        c.release_object(&mut s, 0);
        let snap = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 0, 2, snap, &all, None, None, u64::from(n) + 1);
        assert_eq!(c.creation(&s, 0).map(|(slot, _)| slot), Some(2));
        // Everything settles: the index empties.
        for ordinal in u64::from(n / 2)..=u64::from(n) + 1 {
            c.on_delivery(&mut s, ordinal, DeliveryStatus::Delivered);
        }
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn connections_in_step_take_a_logged_catch_up_only_with_the_same_nominations() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        // Objects 1 and 2 nominated in slot 3, by packet 3 (by packets 3 and 4 with
        // `split`), object 2 built from `prior`.
        let other_prior = s.create_baseline(7, h, true);
        let mut nominated = |split: bool, prior: Option<u32>| {
            let mut c = ConnectionBaselines::default();
            let snap = s.create_baseline(1, h, true).unwrap();
            c.nominate(&mut s, 1, 3, snap, &all, None, None, 3);
            let snap = s.create_baseline(2, h, true).unwrap();
            let ordinal = if split { 4 } else { 3 };
            c.nominate(&mut s, 2, 3, snap, &all, prior, None, ordinal);
            c
        };
        let mut leader = nominated(false, None);
        let mut follower = nominated(false, None);
        let mut split = nominated(true, None);
        let mut twin = nominated(false, None);
        let mut alone = nominated(false, None);
        let mut lost = nominated(false, None);
        // The same nominations, written independently: not known to be the same.
        let mut independent = nominated(false, None);
        // (Last: the storage shares a lineage with the object's newest only.)
        let mut built_otherwise = nominated(false, other_prior);
        // The follower and the twin took the leader's packet (as replaying its section
        // does): the same origin.
        for c in [&mut follower, &mut twin] {
            assert!(c.in_flight == leader.in_flight);
            c.packets.clone_from(&leader.packets);
        }
        // All but the twin and the one alone hold the leader's copy (equal words: the
        // nominations differ only in the queue).
        let copy = leader.words_mut().publish();
        for c in [
            &mut follower,
            &mut split,
            &mut lost,
            &mut built_otherwise,
            &mut independent,
        ] {
            assert!(*c.objects == *copy);
            c.words_mut().adopt(Arc::clone(&copy));
        }
        let twins_copy = twin.words_mut().publish();
        let mut moves = FateMoves::default();
        let mut caught_up = |c: &mut ConnectionBaselines, status| {
            c.defer_delivery(3, status);
            c.catch_up_in_pass(Some(&mut moves));
        };
        use DeliveryStatus::{Delivered, Lost};
        caught_up(&mut leader, Delivered);
        alone.defer_delivery(3, DeliveryStatus::Delivered);
        alone.catch_up();
        let after = Arc::clone(leader.words().shared().expect("logged, so shared"));
        assert!(*after == *alone.objects, "the move is the one made alone");
        assert_eq!(leader.released, alone.released);
        assert_eq!(leader.in_flight.len(), 0);
        caught_up(&mut follower, Delivered);
        assert!(follower.words().is(&after), "taken by pointer");
        assert_eq!(follower.released, leader.released);
        assert_eq!((follower.in_flight.len(), follower.packets.len()), (0, 0));
        // Other fates, other packets settled, or other lineages: moved on their own.
        caught_up(&mut lost, Lost);
        assert!(!lost.words().is(&after) && lost.count(1) == 0);
        caught_up(&mut split, Delivered);
        assert!(!split.words().is(&after) && split.in_flight.len() == 1);
        assert_eq!(
            split.pending(2),
            1 << 3,
            "object 2's packet is still in flight"
        );
        caught_up(&mut built_otherwise, Delivered);
        assert!(!built_otherwise.words().is(&after));
        let lineage = |c: &ConnectionBaselines| c.object(2).acked;
        assert_ne!(lineage(&built_otherwise), lineage(&leader));
        caught_up(&mut independent, Delivered);
        assert!(!independent.words().is(&after));
        assert!(*independent.objects == *after, "the same move, made again");
        // Equal words in another copy: found by value, then logged for that copy.
        assert!(!Arc::ptr_eq(&twins_copy, &copy));
        caught_up(&mut twin, Delivered);
        assert!(twin.words().is(&after));
        assert_eq!(twin.released, leader.released);
        // (The leader's move, the four that moved on their own, the twin's.)
        assert_eq!(moves.moves().len(), 6);
        assert!(Arc::ptr_eq(&moves.moves()[5].before, &twins_copy));
    }

    #[test]
    fn a_packet_copied_whole_takes_its_origin_and_one_added_to_a_fresh_one() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        let mut leader = ConnectionBaselines::default();
        let origin = |c: &ConnectionBaselines| c.packets.back().map(|p| p.origin);
        // Packet 3 written by the leader, then copied by a follower.
        let mark = leader.mark();
        leader.nominate_later(&s, 1, h, 3, &all, None, None, 3);
        leader.nominate_later(&s, 2, h, 3, &all, None, None, 3);
        let mut tail = BaselinesTail::default();
        leader.tail_since(mark, &mut tail);
        let mut follower = ConnectionBaselines::default();
        follower.append_tail(&tail, 3, 0);
        let mut unjoined = ConnectionBaselines::default();
        unjoined.append_tail(&tail, 3, 0);
        assert!(origin(&leader).is_some());
        assert_eq!(origin(&follower), origin(&leader));
        assert_eq!(origin(&unjoined), origin(&leader));
        // Added to after it was copied: no longer the copy's.
        let copied = origin(&leader);
        leader.nominate_later(&s, 4, h, 3, &all, None, None, 3);
        assert_ne!(origin(&leader), copied);
        // A copy added to a packet with nominations of its own: a new origin too.
        let mut mixed = ConnectionBaselines::default();
        mixed.nominate_later(&s, 5, h, 3, &all, None, None, 3);
        let own = origin(&mixed);
        mixed.append_tail(&tail, 3, 0);
        assert!(origin(&mixed) != own && origin(&mixed) != copied);
        // The tail of a packet partly written before the mark names no origin: its
        // copy takes a fresh one.
        let mut partial = ConnectionBaselines::default();
        partial.nominate_later(&s, 6, h, 3, &all, None, None, 3);
        let mark = partial.mark();
        partial.nominate_later(&s, 7, h, 3, &all, None, None, 3);
        partial.tail_since(mark, &mut tail);
        let mut copy = ConnectionBaselines::default();
        copy.append_tail(&tail, 3, 0);
        assert_ne!(origin(&copy), origin(&partial));
        // Settled on the leader's lineages, the copy keeps the origin; looked up
        // (no leader to join), it is no longer known to hold the same and takes a
        // fresh one.
        leader.settle(&mut s, None);
        let copied = origin(&follower);
        follower.settle(&mut s, Some(&mut leader));
        assert_eq!(origin(&follower), copied);
        unjoined.settle(&mut s, None);
        assert_ne!(origin(&unjoined), copied);
        for c in [&mut mixed, &mut partial, &mut copy] {
            c.settle(&mut s, None);
        }
    }

    #[test]
    fn a_whole_copied_packet_stays_shared_until_the_queue_is_read_by_position() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        let (mut leader, mut f) = (
            ConnectionBaselines::default(),
            ConnectionBaselines::default(),
        );
        // f's own packet 0 (object 3), settled.
        f.nominate_later(&s, 3, h, 0, &all, None, None, 0);
        f.settle(&mut s, None);
        // The leader's packet (objects 1, 2), copied whole as f's packet 1.
        let mark = leader.mark();
        leader.nominate_later(&s, 1, h, 1, &all, None, None, 1);
        leader.nominate_later(&s, 2, h, 1, &all, None, None, 1);
        let mut tail = BaselinesTail::default();
        leader.tail_since(mark, &mut tail);
        f.append_tail(&tail, 1, 0);
        assert_eq!(
            (f.in_flight.len(), f.in_flight(), f.shared_packets),
            (1, 3, 1)
        );
        leader.settle(&mut s, None);
        f.settle(&mut s, Some(&mut leader));
        leader.add_joins(&mut s);
        // f's own packet 2 (object 4) queues after its own packet 0.
        f.nominate_later(&s, 4, h, 2, &all, None, None, 2);
        f.settle(&mut s, None);
        assert_eq!(f.in_flight.len(), 2, "the copied pair is not in the queue");
        // Positions into the queue move with their nominations.
        f.creation_hint = 2;
        f.joined.push(Joined {
            lineages: Arc::from([77]),
            from: 0,
            at: 1,
            len: 1,
        });
        f.unshare_packets();
        assert_eq!(f.shared_packets, 0);
        assert!(f.packets.iter().all(|p| p.shared.is_none()));
        let objects: Vec<_> = f.in_flight.iter().map(|n| n.object).collect();
        assert_eq!(objects, [3, 1, 2, 4], "in packet order");
        assert_eq!((f.joined[0].at, f.creation_hint), (3, 4));
        f.take_joined();
        let lineages: Vec<_> = f.in_flight.iter().map(|n| n.lineage).collect();
        let leaders: Vec<_> = leader.in_flight.iter().map(|n| n.lineage).collect();
        assert_eq!(lineages[1..3], leaders, "the leader's lineages");
        assert_eq!(lineages[3], 77, "its join moved with it");
    }

    #[test]
    fn shared_nominations_settle_and_take_fates_as_copied_ones() {
        // A leader writes packets; a follower keeps their nominations shared, a twin
        // moves them into its queue at once. Through random fates, both hold the same
        // baselines, and every lineage is let go of in the end.
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let [mut leader, mut shared, mut copied]: [ConnectionBaselines; 3] = Default::default();
        let all = ChangeMask::all(4);
        let handle = |o: u32| NetRefHandle::new(10 + u64::from(o), false, 0);
        let mut rng = crate::link::SplitMix64::new(7);
        let mut shared_seen = 0;
        for ordinal in 0..40u64 {
            s.begin_frame();
            let mark = leader.mark();
            for o in 0..8 {
                if rng.next_f64() < 0.5 {
                    continue;
                }
                let Some(slot) = leader.free_slot(o, ordinal) else {
                    continue;
                };
                let prior = leader.acked(&s, o).map(|(_, b)| b.snapshot);
                leader.nominate_later(&s, o, handle(o), slot, &all, prior, None, ordinal);
            }
            let mut tail = BaselinesTail::default();
            leader.tail_since(mark, &mut tail);
            for c in [&mut shared, &mut copied] {
                for o in 0..8 {
                    c.words_mut().set_word(o, leader.word(o));
                }
                c.append_tail(&tail, ordinal, 0);
            }
            copied.unshare_packets();
            leader.settle(&mut s, None);
            shared.settle(&mut s, Some(&mut leader));
            copied.settle(&mut s, Some(&mut leader));
            leader.add_joins(&mut s);
            assert_eq!(shared.in_flight(), copied.in_flight());
            shared_seen += shared.shared_packets;
            // The fate of the packet two before, the same for all three.
            if let Some(fate) = ordinal.checked_sub(2) {
                let status = if rng.next_f64() < 0.7 {
                    DeliveryStatus::Delivered
                } else {
                    DeliveryStatus::Lost
                };
                let promoted: Vec<_> = [&mut leader, &mut shared, &mut copied]
                    .into_iter()
                    .map(|c| c.on_delivery(&mut s, fate, status))
                    .collect();
                assert_eq!(promoted[1], promoted[2], "packet {fate}");
                for o in 0..8 {
                    let acked =
                        |c: &ConnectionBaselines| c.acked(&s, o).map(|(k, b)| (k, b.lineage));
                    assert_eq!(
                        acked(&shared),
                        acked(&copied),
                        "object {o} after packet {fate}"
                    );
                    assert_eq!(
                        acked(&shared),
                        acked(&leader),
                        "object {o} after packet {fate}"
                    );
                }
            }
        }
        assert!(shared_seen > 40, "packets were shared, several at a time");
        for c in [&mut leader, &mut shared, &mut copied] {
            c.release_all(&mut s);
        }
        assert_eq!(s.live_lineages(), 0, "every holder let go");
    }

    #[test]
    fn joins_left_untaken_move_with_the_queue_and_drop_with_their_nominations() {
        let n = |object| Nomination {
            object,
            lineage: NO_SNAPSHOT,
            synced: 0,
            slot: 1,
            epoch: 0,
            pad: 0,
        };
        let join = |at, lineages: &[u32]| Joined {
            lineages: Arc::from(lineages),
            from: 0,
            at,
            len: lineages.len(),
        };
        let lineages =
            |c: &ConnectionBaselines| c.in_flight.iter().map(|n| n.lineage).collect::<Vec<_>>();
        let mut c = ConnectionBaselines::default();
        c.in_flight.extend((0..6).map(n));
        c.joined = vec![join(0, &[10, 11]), join(3, &[13, 14])];
        // The first packet's two leave unread: their join goes, the other moves.
        c.skip_joined(2);
        c.in_flight.drain(..2);
        assert_eq!(c.joined.len(), 1);
        assert_eq!(c.joined[0].at, 1);
        c.take_joined();
        let none = NO_SNAPSHOT;
        assert_eq!(lineages(&c), [none, 13, 14, none]);
        // A drain that cuts a join takes every join first.
        let mut c = ConnectionBaselines::default();
        c.in_flight.extend((0..3).map(n));
        c.joined = vec![join(0, &[10, 11]), join(2, &[12])];
        c.skip_joined(1);
        assert!(c.joined.is_empty());
        assert_eq!(lineages(&c), [10, 11, 12]);
    }

    #[cfg(debug_assertions)]
    #[test]
    fn the_front_of_a_queue_compares_with_the_lineages_joins_give_it() {
        let n = |object, lineage| Nomination {
            object,
            lineage,
            synced: 0,
            slot: 1,
            epoch: 0,
            pad: 0,
        };
        let mut q = std::collections::VecDeque::with_capacity(4);
        q.extend([n(0, 0), n(0, 0), n(0, 0), n(1, 10)]);
        q.drain(..3);
        // Objects 2 and 3 copied from another's packet, their lineages not taken yet.
        q.extend([n(2, NO_SNAPSHOT), n(3, NO_SNAPSHOT)]);
        assert!(!q.as_slices().1.is_empty(), "wrapped");
        let joined = [Joined {
            lineages: Arc::from([7, 20, 30]),
            from: 1,
            at: 1,
            len: 2,
        }];
        let taken = [n(1, 10), n(2, 20), n(3, 30)];
        assert!(front_is(&q, &joined, &taken[..2]));
        assert!(front_is(&q, &joined, &taken));
        assert!(front_is(&q, &joined, &[]));
        assert!(!front_is(&q, &[], &taken), "lineages not taken");
        assert!(!front_is(&q, &joined, &[n(1, 10), n(3, 30)]));
        assert!(
            !front_is(&q, &joined, &[n(1, 10), n(2, 20), n(3, 30), n(4, 40)]),
            "longer than the queue"
        );
    }
}
