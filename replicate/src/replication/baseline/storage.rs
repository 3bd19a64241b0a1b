//! [`BaselineStorage`]: the server's snapshots and lineages, shared by every
//! connection. A snapshot created in a frame is reserved, referenced by each
//! connection that takes it and committed (copied once) or cancelled at the end of the
//! write pass; a lineage holds a snapshot with the two it was built from, shared by the
//! connections that nominated it from the same priors. Also the per-object creation
//! throttle and the per-type switches.

use super::*;

/// A map keyed by [`InternalIndex`], stored densely: object indices are small and
/// reused, and a lookup is on the writer's path for every (object, connection) pair.
#[derive(Debug)]
struct IndexMap<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for IndexMap<T> {
    fn default() -> Self {
        Self { slots: Vec::new() }
    }
}

impl<T> IndexMap<T> {
    fn get(&self, i: InternalIndex) -> Option<&T> {
        self.slots.get(i as usize)?.as_ref()
    }

    fn get_mut(&mut self, i: InternalIndex) -> Option<&mut T> {
        self.slots.get_mut(i as usize)?.as_mut()
    }

    fn slot(&mut self, i: InternalIndex) -> &mut Option<T> {
        let i = i as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        &mut self.slots[i]
    }

    fn get_or_default(&mut self, i: InternalIndex) -> &mut T
    where
        T: Default,
    {
        self.slot(i).get_or_insert_with(T::default)
    }

    fn remove(&mut self, i: InternalIndex) -> Option<T> {
        self.slots.get_mut(i as usize)?.take()
    }
}

/// 32 bytes, aligned to 32: an entry never straddles two cache lines (the state and
/// the `live` flag read together are on one).
#[repr(align(32))]
pub(super) struct StateInfo {
    pub(super) object: InternalIndex,
    pub(super) state: Option<Arc<dyn ErasedState>>,
    refs: u32,
    pub(super) live: bool,
    /// The object's type, set when the state is taken: where the state goes once it is
    /// let go of (see [`SpareStates`]).
    protocol: ProtocolIndex,
    /// The frame the snapshot was taken in.
    pub(super) frame: u32,
}

#[derive(Default)]
struct ObjectShared {
    handle: NetRefHandle,
    prev_creation_frame: u32,
    /// The snapshot created for the object this frame (the sharing context).
    shared: Option<(u32, u32)>,
    /// The last lineage made for the object: the next connection that nominates the
    /// same snapshot from the same priors shares it.
    lineage: Option<u32>,
}

/// A baseline as connections hold it: a snapshot and the two it was built from (its
/// prior and the prior's prior, [`NO_SNAPSHOT`] when absent), on each of which it
/// holds one reference. Connections that nominate the same snapshot from the same
/// priors (acks in step) share one, so a connection keeps only its index per object.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lineage {
    pub(super) snapshot: u32,
    pub(super) prior: u32,
    pub(super) prior2: u32,
    /// Counts the lineages made: tells this one from an earlier one at its index.
    pub(super) generation: u32,
    /// The baselines that hold it (acknowledged or in flight); freed at zero.
    pub(super) refs: u32,
}

impl Lineage {
    /// Every snapshot it holds a reference on.
    fn snapshots(&self) -> impl Iterator<Item = u32> {
        [self.snapshot, self.prior, self.prior2]
            .into_iter()
            .filter(|&s| names_snapshot(s))
    }
}

/// The server's baseline snapshots and per-object creation state, shared by every
/// connection's writer (Iris's storage plus the shared half of its manager).
///
/// ```
/// use replicate::internals::replication::{BaselineStorage, DeltaSettings};
/// let mut s = BaselineStorage::new(DeltaSettings::default());
/// let snapshot = s.reserve(7);
/// s.add_ref(snapshot); // one connection keeps it
/// assert_eq!(s.ref_count(snapshot), 2);
/// ```
pub struct BaselineStorage {
    pub(super) settings: DeltaSettings,
    pub(super) infos: Vec<StateInfo>,
    free: Vec<u32>,
    lineages: Vec<Lineage>,
    free_lineages: Vec<u32>,
    lineage_generation: u32,
    pub(super) frame: u32,
    objects: IndexMap<ObjectShared>,
    reservations: Vec<u32>,
    type_overrides: HashMap<ProtocolIndex, bool>,
    pub(super) prediction_overrides: HashMap<ProtocolIndex, bool>,
    /// Per protocol index, the bits prediction saved per sampled change, decayed (see
    /// [`learn_predictions`](Self::learn_predictions)): a type is predicted while its
    /// gain is not negative.
    pub(super) prediction_gains: Vec<i64>,
    /// The samples of this frame's write passes, not learned from yet.
    pub(super) prediction_samples: Vec<PredictionSample>,
    /// Snapshot states let go of, for the next snapshots to be copied into.
    spares: SpareStates,
    stats: BaselineStats,
}

/// Snapshot states nothing holds any more, by type, copied over by the next snapshots
/// of that type instead of allocating theirs: a frame releases about as many
/// snapshots as it takes, and at 100 000 objects allocating and freeing a state each
/// (the allocator's bookkeeping on cold memory) cost more than copying it. What a
/// frame does not take is freed when the next one begins.
#[derive(Default)]
struct SpareStates(Vec<Vec<Arc<dyn ErasedState>>>);

/// The most spare snapshot states kept per type (a pass's worth and more; beyond it
/// they are freed).
const SPARE_STATES_PER_TYPE: usize = 1024;

impl SpareStates {
    /// Keeps `state`, of type `protocol`, if nothing else holds it and there is room.
    fn keep(&mut self, protocol: ProtocolIndex, mut state: Arc<dyn ErasedState>) {
        if Arc::get_mut(&mut state).is_none() {
            return;
        }
        let p = usize::from(protocol);
        if self.0.len() <= p {
            self.0.resize_with(p + 1, Vec::new);
        }
        if let Some(spares) = self
            .0
            .get_mut(p)
            .filter(|s| s.len() < SPARE_STATES_PER_TYPE)
        {
            spares.push(state);
        }
    }

    /// A snapshot of `current`, of type `protocol`: a spare state copied over (`true`),
    /// or a new one.
    fn copy(
        &mut self,
        protocol: ProtocolIndex,
        current: &dyn ErasedState,
    ) -> (Arc<dyn ErasedState>, bool) {
        if let Some(mut spare) = self.0.get_mut(usize::from(protocol)).and_then(Vec::pop)
            && Arc::get_mut(&mut spare).is_some_and(|s| s.copy_from(current))
        {
            return (spare, true);
        }
        (current.clone_arc(), false)
    }

    /// Frees the spare states: what a frame released and its snapshots did not take is
    /// not kept beyond it.
    fn clear(&mut self) {
        self.0.iter_mut().for_each(Vec::clear);
    }
}

impl std::fmt::Debug for BaselineStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaselineStorage")
            .field("frame", &self.frame)
            .field("live", &self.live_snapshots())
            .field("stats", &self.stats)
            .finish()
    }
}

/// A [`BaselineStorage`] shared by the writers of one server: read by every writer
/// while packets are written (by several threads at once, see
/// [`ReplicationConfig::writer_threads`](crate::replication::ReplicationConfig::writer_threads)),
/// changed only between write passes (nominations settled, acks, releases).
pub type SharedBaselineStorage = Arc<RwLock<BaselineStorage>>;

/// Reads a shared storage (a poisoned lock still yields the data: the storage has no
/// invariant a panic elsewhere could half-update in a harmful way).
pub fn read_storage(s: &SharedBaselineStorage) -> RwLockReadGuard<'_, BaselineStorage> {
    s.read().unwrap_or_else(|e| e.into_inner())
}

/// Changes a shared storage (see [`read_storage`]).
pub fn write_storage(s: &SharedBaselineStorage) -> RwLockWriteGuard<'_, BaselineStorage> {
    s.write().unwrap_or_else(|e| e.into_inner())
}

impl BaselineStorage {
    /// An empty storage.
    pub fn new(settings: DeltaSettings) -> Self {
        Self {
            settings,
            infos: Vec::new(),
            free: Vec::new(),
            lineages: Vec::new(),
            free_lineages: Vec::new(),
            lineage_generation: 0,
            frame: 0,
            objects: IndexMap::default(),
            reservations: Vec::new(),
            type_overrides: HashMap::new(),
            prediction_overrides: HashMap::new(),
            prediction_gains: Vec::new(),
            prediction_samples: Vec::new(),
            spares: SpareStates::default(),
            stats: BaselineStats::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &DeltaSettings {
        &self.settings
    }

    /// Changes the settings at run time.
    pub fn set_settings(&mut self, settings: DeltaSettings) {
        self.settings = settings;
    }

    /// Turns delta compression on or off for one type at run time (overrides
    /// `#[net(delta = false)]`).
    pub fn set_type_enabled(&mut self, protocol: ProtocolIndex, enabled: bool) {
        self.type_overrides.insert(protocol, enabled);
    }

    /// Whether objects of `protocol` (whose descriptor says `descriptor_default`) are
    /// delta-compressed.
    #[inline]
    pub fn is_enabled(&self, protocol: ProtocolIndex, descriptor_default: bool) -> bool {
        self.settings.enabled
            && self
                .type_overrides
                .get(&protocol)
                .copied()
                .unwrap_or(descriptor_default)
    }

    /// The current frame (advanced once per server tick).
    pub fn frame(&self) -> u32 {
        self.frame
    }

    /// Starts a new frame: the sharing context is reset, and the states released
    /// in the last frame that no snapshot took are freed.
    pub fn begin_frame(&mut self) {
        self.spares.clear();
        self.frame = self.frame.wrapping_add(1);
        self.stats.created_this_frame = 0;
    }

    /// Counters.
    pub fn stats(&self) -> &BaselineStats {
        &self.stats
    }

    /// Counts batches written: `delta` on the delta path, `full` on the full path.
    pub(crate) fn count_batches(&mut self, delta: u64, full: u64) {
        self.stats.delta_batches += delta;
        self.stats.full_batches += full;
    }

    /// Snapshots alive (reserved or committed).
    pub fn live_snapshots(&self) -> usize {
        self.infos.iter().filter(|i| i.live).count()
    }

    /// References on a snapshot (0 when freed).
    pub fn ref_count(&self, info: u32) -> u32 {
        self.infos
            .get(info as usize)
            .filter(|i| i.live)
            .map_or(0, |i| i.refs)
    }

    /// A committed snapshot.
    pub fn state(&self, info: u32) -> Option<Arc<dyn ErasedState>> {
        self.state_arc(info).cloned()
    }

    pub(crate) fn state_arc(&self, info: u32) -> Option<&Arc<dyn ErasedState>> {
        self.infos
            .get(info as usize)
            .filter(|i| i.live)
            .and_then(|i| i.state.as_ref())
    }

    /// The address of a committed snapshot's state: its identity while it is alive.
    pub(crate) fn state_address(&self, info: u32) -> Option<usize> {
        self.state_arc(info).map(address)
    }

    /// Phase 1: reserves a snapshot of an object's current state without copying it
    /// (the reservation holds one reference).
    pub fn reserve(&mut self, object: InternalIndex) -> u32 {
        let info = StateInfo {
            object,
            state: None,
            refs: 1,
            live: true,
            protocol: 0,
            frame: self.frame,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.infos[i as usize] = info;
                i
            }
            None => {
                self.infos.push(info);
                (self.infos.len() - 1) as u32
            }
        };
        self.reservations.push(idx);
        self.stats.reserved += 1;
        idx
    }

    /// A connection takes a reference on a snapshot.
    pub fn add_ref(&mut self, info: u32) {
        if let Some(i) = self.infos.get_mut(info as usize).filter(|i| i.live) {
            i.refs += 1;
        }
    }

    /// Drops a reference; the snapshot is freed at zero.
    pub fn release(&mut self, info: u32) {
        let Some(i) = self.infos.get_mut(info as usize).filter(|i| i.live) else {
            return;
        };
        i.refs = i.refs.saturating_sub(1);
        if i.refs == 0 {
            let object = i.object;
            i.live = false;
            if let Some(state) = i.state.take() {
                self.spares.keep(i.protocol, state);
            }
            self.free.push(info);
            if let Some(o) = self.objects.get_mut(object)
                && o.shared.is_some_and(|(_, s)| s == info)
            {
                o.shared = None;
            }
        }
    }

    /// The baseline of `snapshot` built from `prior` and `prior2`, for one more holder:
    /// the object's last one when it is the same three, else a new one, which takes
    /// the caller's reference on `snapshot` and one on each prior. Returns its index.
    pub(crate) fn take_lineage(&mut self, snapshot: u32, prior: u32, prior2: u32) -> u32 {
        let object = self.infos.get(snapshot as usize).map(|i| i.object);
        let last = object
            .and_then(|o| self.objects.get(o))
            .and_then(|o| o.lineage);
        if let Some(l) = last
            && self.join_lineage(l, snapshot, prior, prior2)
        {
            // The lineage holds its own reference on the snapshot.
            self.release(snapshot);
            return l;
        }
        for p in [prior, prior2] {
            if names_snapshot(p) {
                self.add_ref(p);
            }
        }
        self.lineage_generation = self.lineage_generation.wrapping_add(1);
        let lineage = Lineage {
            snapshot,
            prior,
            prior2,
            generation: self.lineage_generation,
            refs: 1,
        };
        let l = match self.free_lineages.pop() {
            Some(l) => {
                self.lineages[l as usize] = lineage;
                l
            }
            None => {
                self.lineages.push(lineage);
                (self.lineages.len() - 1) as u32
            }
        };
        if let Some(o) = object.and_then(|o| self.objects.get_mut(o)) {
            o.lineage = Some(l);
        }
        l
    }

    /// A baseline of an object's state in this frame (see
    /// [`create_baseline`](Self::create_baseline); the creation throttle is the
    /// caller's) built from `prior` and `prior2`, for one more holder: its lineage, or
    /// `None` when the object has none. The connections that nominate the object from
    /// the same priors in one frame (acks in step) share one lineage: after the first,
    /// each costs a reference count.
    pub(crate) fn nominated_lineage(
        &mut self,
        object: InternalIndex,
        handle: NetRefHandle,
        prior: u32,
        prior2: u32,
    ) -> Option<u32> {
        if let Some((snapshot, Some(l))) = self.shared_in_frame(object, handle)
            && self.join_lineage(l, snapshot, prior, prior2)
        {
            self.stats.baselines_created += 1;
            return Some(l);
        }
        let snapshot = self.create_baseline(object, handle, true)?;
        Some(self.take_lineage(snapshot, prior, prior2))
    }

    /// Adds `holders` holders to lineage `l`, which another connection's nomination of
    /// the same object from the same priors took in this frame, for as many
    /// nominations that copy it: what [`nominated_lineage`](Self::nominated_lineage)
    /// would do for each, without looking the lineage up. `false` (nothing changed)
    /// when `l` is not live.
    pub(crate) fn join_nominated(&mut self, l: u32, holders: u32) -> bool {
        match self.lineages.get_mut(l as usize) {
            Some(lineage) if lineage.refs > 0 => {
                lineage.refs += holders;
                self.stats.baselines_created += u64::from(holders);
                true
            }
            _ => false,
        }
    }

    /// Adds a holder to lineage `l` if it is live and is `snapshot` built from `prior`
    /// and `prior2`; `false` (nothing changed) otherwise.
    fn join_lineage(&mut self, l: u32, snapshot: u32, prior: u32, prior2: u32) -> bool {
        match self.lineages.get_mut(l as usize) {
            Some(lineage)
                if lineage.refs > 0
                    && (lineage.snapshot, lineage.prior, lineage.prior2)
                        == (snapshot, prior, prior2) =>
            {
                lineage.refs += 1;
                true
            }
            _ => false,
        }
    }

    /// The snapshot of an object (by index and handle) created in this frame, with the
    /// last lineage made for the object, if any: what the frame's next nominations share.
    fn shared_in_frame(
        &self,
        object: InternalIndex,
        handle: NetRefHandle,
    ) -> Option<(u32, Option<u32>)> {
        let o = self.objects.get(object).filter(|o| o.handle == handle)?;
        let (_, snapshot) = o.shared.filter(|(f, _)| *f == self.frame)?;
        Some((snapshot, o.lineage))
    }

    /// Reads lineages `lineages` (at most [`READ_AHEAD`]) and their snapshots'
    /// entries, level by level, and prefetches the snapshots themselves: the cache
    /// misses of a run of objects overlap, where planning or releasing them one after
    /// another waits for each in turn (at 100 000 objects they are most of that
    /// work). Returns a value of what was read, for [`std::hint::black_box`].
    pub(crate) fn read_ahead(&self, lineages: impl Iterator<Item = u32>) -> usize {
        let mut snapshots = [NO_SNAPSHOT; 3 * READ_AHEAD];
        let mut n = 0;
        let mut seen = 0;
        for l in lineages.take(READ_AHEAD) {
            if let Some(l) = self.lineages.get(l as usize) {
                snapshots[n..n + 3].copy_from_slice(&[l.snapshot, l.prior, l.prior2]);
                n += 3;
                // (Its last field too: an entry may straddle two cache lines.)
                seen ^= l.refs as usize;
            }
        }
        for &s in &snapshots[..n] {
            if let Some(state) = self.infos.get(s as usize).and_then(|i| i.state.as_ref()) {
                state.prefetch();
            }
        }
        seen
    }

    /// A live lineage's snapshot and priors (each [`NO_SNAPSHOT`] when absent).
    pub(super) fn lineage(&self, l: u32) -> Option<&Lineage> {
        self.lineages.get(l as usize).filter(|l| l.refs > 0)
    }

    /// Drops `holders` holders of a lineage; at zero it releases its snapshots.
    pub(crate) fn release_lineage(&mut self, l: u32, holders: u32) {
        let Some(lineage) = self.lineages.get_mut(l as usize).filter(|l| l.refs > 0) else {
            return;
        };
        lineage.refs = lineage.refs.saturating_sub(holders);
        if lineage.refs == 0 {
            let lineage = *lineage;
            self.free_lineages.push(l);
            for s in lineage.snapshots() {
                self.release(s);
            }
        }
    }

    /// Lineages alive (baselines distinct by snapshot and priors, shared by the
    /// connections that hold them).
    pub fn live_lineages(&self) -> usize {
        self.lineages.len() - self.free_lineages.len()
    }

    /// Phase 2, at the end of a write pass: each reservation drops its own reference;
    /// one nobody kept is cancelled (no copy), one that was kept is cloned exactly once
    /// from the object's current state in `table` (into a spare state of its type when
    /// this frame released one).
    pub fn commit_reservations(&mut self, table: &ObjectTable) {
        // (Taken and given back: the list keeps its capacity from pass to pass.)
        let mut reservations = std::mem::take(&mut self.reservations);
        for &idx in &reservations {
            let Some(i) = self.infos.get(idx as usize).filter(|i| i.live) else {
                continue;
            };
            if i.refs <= 1 {
                self.stats.cancelled += 1;
                self.release(idx);
                continue;
            }
            let object = i.object;
            self.stats.clones += 1;
            if let Some(e) = table.entry_at(object) {
                let (state, reused) = self.spares.copy(e.protocol(), e.state());
                self.stats.reused += u64::from(reused);
                if let Some(i) = self.infos.get_mut(idx as usize) {
                    i.protocol = e.protocol();
                    i.state = Some(state);
                }
            }
            self.release(idx);
        }
        reservations.clear();
        self.reservations = reservations;
    }

    /// Whether a connection may create a baseline for an object now: always when
    /// `unthrottled` (its first baseline, or one taken in every packet while
    /// acknowledgements flow, see [`DeltaSettings::baseline_every_packet`]), a snapshot
    /// already created this frame (shared), or `min_frames_between_baselines` frames
    /// since the object's last creation.
    #[inline]
    pub fn may_create(
        &self,
        object: InternalIndex,
        handle: NetRefHandle,
        unthrottled: bool,
    ) -> bool {
        if unthrottled {
            return true;
        }
        match self.objects.get(object).filter(|o| o.handle == handle) {
            None => true,
            Some(o) => {
                o.shared.is_some_and(|(f, _)| f == self.frame)
                    || self.frame.wrapping_sub(o.prev_creation_frame)
                        >= self.settings.min_frames_between_baselines
            }
        }
    }

    /// Creates (or shares, within a frame) a snapshot of an object's current state for
    /// one connection, which holds one reference on it. `None` when throttled (see
    /// [`may_create`](Self::may_create) for `unthrottled`).
    pub fn create_baseline(
        &mut self,
        object: InternalIndex,
        handle: NetRefHandle,
        unthrottled: bool,
    ) -> Option<u32> {
        let frame = self.frame;
        let info = match self.shared_in_frame(object, handle).map(|(s, _)| s) {
            Some(s) => s,
            None => {
                if !self.may_create(object, handle, unthrottled) {
                    return None;
                }
                let s = self.reserve(object);
                let o = self.objects.get_or_default(object);
                if o.handle != handle {
                    *o = ObjectShared {
                        handle,
                        ..ObjectShared::default()
                    };
                }
                o.shared = Some((frame, s));
                o.prev_creation_frame = frame;
                self.stats.created_this_frame += 1;
                s
            }
        };
        self.add_ref(info);
        self.stats.baselines_created += 1;
        tracing::trace!("create baseline: object {object} snapshot {info} frame {frame}");
        Some(info)
    }

    /// Forgets an object's throttle state (its index is being reused).
    pub fn forget_object(&mut self, object: InternalIndex) {
        self.objects.remove(object);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prior_not_kept_names_no_snapshot_and_holds_no_reference() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let other = s.reserve(1);
        let snapshot = s.reserve(1);
        let l = s.take_lineage(snapshot, PRIOR_NOT_KEPT, NO_SNAPSHOT);
        let held: Option<Vec<u32>> = s.lineage(l).map(|l| l.snapshots().collect());
        assert_eq!(
            held,
            Some(vec![snapshot]),
            "the lineage holds its snapshot alone"
        );
        assert!(s.state_address(PRIOR_NOT_KEPT).is_none());
        assert!(s.snapshot_frame(PRIOR_NOT_KEPT).is_none());
        assert_eq!(s.live_snapshots(), 2);
        s.release_lineage(l, 1);
        assert_eq!(s.ref_count(snapshot), 0, "released with its lineage");
        assert_eq!(s.ref_count(other), 1, "no other snapshot was touched");
        assert_eq!(s.live_snapshots(), 1);
    }

    #[test]
    fn reservation_nobody_keeps_is_cancelled_without_a_copy() {
        let table = ObjectTable::new(Arc::new(crate::protocol::ProtocolRegistry::default()), 0);
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let r = s.reserve(3);
        assert_eq!(s.live_snapshots(), 1);
        s.commit_reservations(&table);
        assert_eq!(s.stats().clones, 0);
        assert_eq!(s.stats().cancelled, 1);
        assert_eq!(s.live_snapshots(), 0);
        assert_eq!(s.ref_count(r), 0);
        // The freed index is reused.
        assert_eq!(s.reserve(4), r);
    }

    #[test]
    fn shared_reservation_is_committed_once() {
        let table = ObjectTable::new(Arc::new(crate::protocol::ProtocolRegistry::default()), 0);
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let h = NetRefHandle::new(9, false, 0);
        let first = s.create_baseline(1, h, true).unwrap();
        for _ in 0..9 {
            assert_eq!(s.create_baseline(1, h, false), Some(first));
        }
        assert_eq!(s.ref_count(first), 11);
        s.commit_reservations(&table);
        assert_eq!(s.stats().clones, 1);
        assert_eq!(s.ref_count(first), 10);
        for _ in 0..10 {
            s.release(first);
        }
        assert_eq!(s.live_snapshots(), 0);
    }

    #[test]
    fn throttle_is_per_object_and_first_is_free() {
        let mut s = BaselineStorage::new(DeltaSettings {
            min_frames_between_baselines: 5,
            ..DeltaSettings::default()
        });
        let h = NetRefHandle::new(9, false, 0);
        assert!(s.create_baseline(1, h, true).is_some());
        s.begin_frame();
        assert!(s.create_baseline(1, h, false).is_none());
        assert!(s.create_baseline(1, h, true).is_some(), "first is free");
        for _ in 0..4 {
            s.begin_frame();
        }
        assert!(s.create_baseline(1, h, false).is_none());
        s.begin_frame();
        assert!(s.create_baseline(1, h, false).is_some());
    }

    #[test]
    fn a_snapshot_entry_is_half_a_cache_line() {
        // Aligned to its size: an entry never straddles two lines.
        assert_eq!(std::mem::size_of::<StateInfo>(), 32);
        assert_eq!(std::mem::align_of::<StateInfo>(), 32);
    }
}
