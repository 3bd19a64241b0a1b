//! Delta compression against acknowledged baselines (Iris's
//! `DeltaCompressionBaselineManager`, `DeltaCompressionBaselineStorage` and the
//! reader's stored baselines).
//!
//! A *baseline* is a snapshot of an object's quantized state that a connection's client
//! also holds. Each (object, connection) has up to [`MAX_BASELINE_COUNT`] = 8 baseline
//! slots, named on the wire in 3 bits: the acknowledged baseline, and the new ones that
//! packets in flight *nominate*. The writer delta-encodes an object against its
//! acknowledged baseline; a nominating packet's ack makes its baseline the acknowledged
//! one (and destroys the previous), its loss releases it (the members the lost batch
//! carried are owed again through its packet record, like any lost batch's).
//!
//! This module owns:
//! - [`BaselineStorage`]: the server's snapshots, shared by every connection through a
//!   [`SharedBaselineStorage`]. A snapshot created in a frame is *reserved* (no copy),
//!   every connection that takes it in the same frame adds a reference, and at the end
//!   of the write pass the reservation is *committed* (cloned exactly once, into the
//!   state of a snapshot released in the same frame when there is one) if someone
//!   kept it, or *cancelled* (never copied) if nobody did. It also owns the per-object
//!   creation throttle (`min_frames_between_baselines`, a connection's first baseline is
//!   always allowed), the per-type switches, the types' default states and the
//!   predictions made from each snapshot. A baseline's snapshot and its priors are
//!   held once as a *lineage*, shared by every connection that nominated the same
//!   snapshot from the same priors; connections hold lineage indices.
//! - [`ConnectionBaselines`]: one connection's baselines. Per object, 8 bytes stored
//!   densely by object index: the acknowledged baseline (its lineage in the storage,
//!   which holds its snapshot and the two it was built from; and the members the
//!   client holds in sync, an index into the connection's few distinct masks) and
//!   which slots are in flight. The nominations
//!   themselves wait in a queue ordered by packet, so a packet's fate settles them by
//!   popping its entries from the front. A delivered packet's promotions can wait
//!   ([`ConnectionBaselines::defer_delivery`]) until the connection is next written,
//!   so that they run on its writer thread; the nominations a replayed section copied
//!   join the leader's lineages by count, once per pass, and the lineages such a
//!   connection lets go of, when they are the leader's, are dropped with the leader's
//!   ([`ConnectionBaselines::add_joins`]).
//! - [`ReceiverBaselines`] and the client-side decoding of a delta batch.
//!
//! # Baselines the client can rebuild exactly
//!
//! The client builds a nominated baseline as *reference + the batch's members*, where
//! the reference is the acknowledged baseline (delta path) or the type's default state
//! (full path), never its live state, which holds the members of every packet since.
//! So a nominating batch carries, besides the owed members, every member allowed to
//! this connection whose current value differs from the reference (`synced` members);
//! the server remembers which members those were. A later batch that needs a member
//! outside the acknowledged baseline's `synced` set (a member newly allowed after an
//! owner or condition change) releases the baselines (their masks merged back) and
//! takes the full path.
//!
//! # A baseline every packet
//!
//! With [`DeltaSettings::baseline_every_packet`] (the default) a connection nominates a
//! new baseline of an object in every packet that carries it, in the slot the packet's
//! ordinal names (modulo 8, so that every object of a packet shares one batch head) or,
//! when that one is taken, the next free one. With acks in step the reference is the
//! previous packet's state; with acks `n` packets late it is the state of `n + 1`
//! packets ago, every packet, and a loss costs nothing but its own slot. Seven slots in
//! flight cover a round trip of seven packets (230 ms at 30 Hz); beyond that,
//! nominations wait for a slot. Without `baseline_every_packet`, the frame throttle
//! (`min_frames_between_baselines`) decides.
//!
//! While an object's creation is in flight its updates nominate nothing. They are
//! coded against the baseline the creation nominated, which a client that knows the
//! object holds (it came in the same packet), and go in the long form, which a client
//! whose creation packet was lost skips by its size (the server resends the
//! creation). After a creation counted lost, the client may know the object from it
//! without the new creation's baseline: those updates take the full path.
//!
//! # Prediction
//!
//! A baseline nominated on the delta path is built from the acknowledged baseline it was
//! coded against (its *prior*), which was built from another (the prior's prior); the
//! client keeps all three. When a batch's reference has a prior, the members can be
//! coded against a prediction ([`extrapolate`], [`Prediction`]) instead of the
//! reference itself:
//! - **linear**, `reference + k · (reference − prior)`: with steady motion the
//!   residuals are second differences, close to zero. `k`, 1 to 3, is the number of
//!   prior-to-reference intervals from the reference's frame to now, rounded (1 with
//!   acks in step or every packet nominating);
//! - **quadratic**, from the three evenly spaced baselines one interval on: exact for a
//!   ballistic arc or a steady turn, where a linear prediction misses by the
//!   acceleration times the interval squared, which late acks make large.
//!
//! The server decides per type whether to predict: where the settings allow it
//! ([`DeltaSettings::predict`], [`BaselineStorage::set_type_prediction`]) and where it
//! pays, learned from samples ([`BaselineStorage::learn_predictions`]: a steady motion
//! is predicted, a random walk, which prediction codes longer, is not). Once per
//! frame and snapshot it decides which prediction codes the object's current state in
//! fewer bits; each batch says whether it was predicted and how
//! (`wire::write_prediction_code`), so the receiver needs no setting. Predictions are
//! cached on their snapshot, so connections whose acks are in step compute them once
//! per tick.
//!
//! The server keeps a new baseline's priors only where they may be read
//! (`BaselineStorage::keeps_priors`): while its type is predicted, and for the
//! objects whose batches sample prediction for a type that is not. Elsewhere the
//! baseline holds its own snapshot alone and names its prior as not kept:
//! its batches still carry the prediction code the client expects (saying "not
//! predicted"), and the server reads, references and frees one snapshot per
//! baseline instead of two or three.
//!
//! On the wire a batch's head ([`BatchHead`], see `wire`) names the reference slot,
//! the slot the batch nominates, if any, and the prediction code (only when the
//! reference has a prior), or, with no reference, the slot it creates and whether it is
//! coded against the default state. After the change mask come the members: each delta
//! against the prediction if predicted, else against the reference; or against the
//! type's default state, or in full.

use super::group::{Chunked, CopyOnWrite, LoggedMove, MoveLog, Shared};
use super::record::INVALID_BASELINE_INDEX;
use super::wire::{BASELINE_SLOT_BITS, BatchHead, ObjectReadError, Prediction};
use crate::bits::{BitReader, BitWriter};
use crate::object::{ConnectionId, InternalIndex, ObjectTable};
use crate::protocol::{ErasedState, ProtocolIndex};
use crate::read_ahead::READ_AHEAD;
use crate::serialize::SerializeError;
use crate::state::ChangeMask;
use crate::{connection::DeliveryStatus, handle::NetRefHandle};
use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Most baselines per (object, connection): the acknowledged one and the nominations
/// in flight, which cover a round trip of up to seven packets (slots `0..8`, named on
/// the wire in [`BASELINE_SLOT_BITS`] bits).
pub const MAX_BASELINE_COUNT: u8 = 1 << BASELINE_SLOT_BITS;

/// Most distinct synced masks one connection records (see
/// [`ConnectionBaselines::can_sync`]): a type's members restricted by a role or a
/// member filter hook make a handful.
pub const MAX_SYNCED_MASKS: usize = 256;

/// Settings of delta compression (part of
/// [`ReplicationConfig`](super::ReplicationConfig)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaSettings {
    /// Global switch (Iris's `net.Iris.EnableDeltaCompression`, default true).
    pub enabled: bool,
    /// Nominate a new baseline in every packet (default true) while a slot is free:
    /// deltas then run against the state of one round trip ago instead of up to
    /// `min_frames_between_baselines` ago. When this is false, the frame throttle
    /// below decides.
    pub baseline_every_packet: bool,
    /// Frames between two baseline creations for one object
    /// (`net.Iris.MinimumNumberOfFramesBetweenBaselines`, default 60), without
    /// `baseline_every_packet`.
    pub min_frames_between_baselines: u32,
    /// Encode the initial state against the type's default state
    /// (`net.Iris.DeltaCompressInitialState`, default true).
    pub compress_initial_state: bool,
    /// Code members against a prediction (constant velocity or acceleration) from the
    /// acknowledged baseline and the ones it was built from, where they exist and it
    /// pays: every tick a few of each type's changed objects are coded both ways, and
    /// a type whose samples prediction lengthens (a random walk, say) is coded against
    /// the baselines themselves until its samples say otherwise (default true; per
    /// type with [`BaselineStorage::set_type_prediction`]). See the module docs.
    pub predict: bool,
}

impl Default for DeltaSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            baseline_every_packet: true,
            min_frames_between_baselines: 60,
            compress_initial_state: true,
            predict: true,
        }
    }
}

/// Counters of the baseline storage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaselineStats {
    /// Snapshots reserved (new baselines, one per object per frame at most).
    pub reserved: u64,
    /// Reservations committed: each is exactly one clone of an object's state.
    pub clones: u64,
    /// Of the clones, those copied into the state of a snapshot released before
    /// (reusing its memory) instead of a new one.
    pub reused: u64,
    /// Reservations nobody kept, cancelled without a copy.
    pub cancelled: u64,
    /// Connection references taken on a snapshot (a new baseline of one connection).
    pub baselines_created: u64,
    /// Baselines created in the current frame (Iris's `CreatedBaselineCount`).
    pub created_this_frame: u32,
    /// Batches planned against an acknowledged baseline (delta path).
    pub delta_batches: u64,
    /// Batches of delta-enabled objects planned without a baseline (full path).
    pub full_batches: u64,
}

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
struct StateInfo {
    object: InternalIndex,
    state: Option<Arc<dyn ErasedState>>,
    refs: u32,
    live: bool,
    /// The object's type, set when the state is taken: where the state goes once it is
    /// let go of (see [`SpareStates`]).
    protocol: ProtocolIndex,
    /// The frame the snapshot was taken in.
    frame: u32,
}

/// The prediction a lineage's batches code against in a frame (see
/// [`BaselineStorage::best_prediction`]), for the lineage (by index and generation:
/// an index freed and reused names another) and members it was chosen for:
/// connections in step look it up instead of choosing again.
struct BestPrediction {
    generation: u32,
    frame: u32,
    mask: ChangeMask,
    chosen: Option<(Prediction, Arc<dyn ErasedState>)>,
}

/// A prediction made from a snapshot: what it was made from (the priors, by
/// address, kept alive so that no other state takes their address while cached), for
/// which members and how, and the prediction (`None` when it could not be made).
struct PredictionCache {
    priors: (usize, usize),
    _keep: (Arc<dyn ErasedState>, Option<Arc<dyn ErasedState>>),
    mask: ChangeMask,
    kind: Prediction,
    predicted: Option<Arc<dyn ErasedState>>,
}

/// The predictions made from one snapshot this tick.
#[derive(Default)]
struct SnapshotPredictions {
    /// The snapshot's state: the entry is valid only for it (kept alive, so its
    /// address names it).
    base: Option<Arc<dyn ErasedState>>,
    /// The last predictions made: linear, quadratic. Connections with acks in step
    /// share them.
    predicted: [Option<PredictionCache>; 2],
}

/// The predictions made this tick, per snapshot: each writer thread keeps its own,
/// so that connections are written reading the [`BaselineStorage`] only. Emptied
/// every tick ([`clear`](Self::clear)), which lets go of the states they hold.
#[derive(Default)]
pub(crate) struct Predictions {
    /// Per snapshot index, the predictions made from it.
    snapshots: TickSlots<SnapshotPredictions>,
    /// Per lineage index, the prediction chosen for it.
    best: TickSlots<BestPrediction>,
    /// The tick's generation: a slot names a position only in the one it was given in,
    /// so clearing is O(1) in the slots.
    generation: u32,
    /// What prediction saved in the batches sampled in this write pass, for
    /// [`BaselineStorage::learn_predictions`].
    samples: Vec<PredictionSample>,
}

/// What coding a sampled batch against its prediction saved over coding it against
/// its reference, in bits (negative: what it cost).
#[derive(Debug, Clone, Copy)]
struct PredictionSample {
    key: SampleKey,
    protocol: ProtocolIndex,
    saved: i64,
}

/// Names a sample (see [`BaselineStorage::sample_key`]): the object, and the frames of
/// its reference and the reference's priors (`u32::MAX` for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SampleKey {
    object: InternalIndex,
    frames: [u32; 3],
}

/// Entries made this tick for a few of many indices (snapshot or lineage indices run
/// over every baseline alive, while a tick uses a few per object that changed): an
/// 8-byte slot per index, (generation, position), and the entries dense.
struct TickSlots<T> {
    slots: Vec<(u32, u32)>,
    entries: Vec<T>,
}

impl<T> Default for TickSlots<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            entries: Vec::new(),
        }
    }
}

impl<T> TickSlots<T> {
    /// The position of index `i`'s entry in `generation`.
    fn position(&self, i: u32, generation: u32) -> Option<usize> {
        match self.slots.get(i as usize) {
            Some(&(g, at)) if g == generation && at != u32::MAX => Some(at as usize),
            _ => None,
        }
    }

    /// Index `i`'s entry in `generation`.
    fn get(&self, i: u32, generation: u32) -> Option<&T> {
        self.entries.get(self.position(i, generation)?)
    }

    /// Makes `entry` index `i`'s in `generation`, in place of any it had.
    fn set(&mut self, i: u32, generation: u32, entry: T) {
        match self.position(i, generation) {
            Some(at) => self.entries[at] = entry,
            None => {
                self.push(i, generation, entry);
            }
        }
    }

    /// Adds `entry` as index `i`'s in `generation`; returns its position.
    fn push(&mut self, i: u32, generation: u32, entry: T) -> usize {
        let (i, at) = (i as usize, self.entries.len());
        if self.slots.len() <= i {
            self.slots.resize(i + 1, (0, u32::MAX));
        }
        self.slots[i] = (generation, at as u32);
        self.entries.push(entry);
        at
    }
}

impl Predictions {
    /// Forgets every prediction.
    pub(crate) fn clear(&mut self) {
        if self.snapshots.entries.is_empty() && self.best.entries.is_empty() {
            return;
        }
        self.snapshots.entries.clear();
        self.best.entries.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: old slots could look current again.
            self.snapshots.slots.clear();
            self.best.slots.clear();
        }
    }

    /// The prediction chosen for lineage `l` this tick.
    fn best(&self, l: u32) -> Option<&BestPrediction> {
        self.best.get(l, self.generation)
    }

    /// Records the prediction chosen for lineage `l`.
    fn set_best(&mut self, l: u32, best: BestPrediction) {
        self.best.set(l, self.generation, best);
    }

    /// The entry of snapshot `info`, whose state is `base`: emptied if it was made for
    /// another state.
    fn entry(&mut self, info: u32, base: &Arc<dyn ErasedState>) -> &mut SnapshotPredictions {
        let at = match self.snapshots.position(info, self.generation) {
            Some(at) => at,
            None => self
                .snapshots
                .push(info, self.generation, SnapshotPredictions::default()),
        };
        let e = &mut self.snapshots.entries[at];
        if e.base.as_ref().map(address) != Some(address(base)) {
            *e = SnapshotPredictions {
                base: Some(base.clone()),
                predicted: [None, None],
            };
        }
        e
    }
}

/// Names the prediction a plan codes against: the one chosen this tick for a lineage
/// in a writer thread's [`Predictions`]. Valid while the thread's choice for the
/// lineage stands (the tick), so a batch holds no reference count on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PredictionRef {
    lineage: u32,
}

impl Predictions {
    /// The prediction `r` names.
    fn chosen(&self, r: PredictionRef) -> Option<&Arc<dyn ErasedState>> {
        self.best(r.lineage)?.chosen.as_ref().map(|(_, p)| p)
    }
}

/// The states a writer thread's plans code against besides the storage's snapshots:
/// the predictions made this tick and the types' default states. A plan names them
/// ([`PredictionRef`], a protocol index) and [`DeltaPlan::against`] looks them up, so
/// planning a batch takes no reference count.
#[derive(Default)]
pub(crate) struct PlanStates {
    pub(crate) predictions: Predictions,
    /// Per protocol index.
    defaults: Vec<Option<Arc<dyn ErasedState>>>,
}

impl PlanStates {
    /// Forgets the tick's predictions (the objects' states change); default states
    /// stay.
    pub(crate) fn clear(&mut self) {
        self.predictions.clear();
    }

    /// Makes the type's default state (once per type) and names it.
    pub(crate) fn default_state(
        &mut self,
        protocol: ProtocolIndex,
        new_state: impl FnOnce() -> Box<dyn ErasedState>,
    ) -> ProtocolIndex {
        let i = usize::from(protocol);
        if self.defaults.len() <= i {
            self.defaults.resize(i + 1, None);
        }
        self.defaults[i].get_or_insert_with(|| Arc::from(new_state()));
        protocol
    }

    /// A type's default state, once made.
    pub(crate) fn default_of(&self, protocol: ProtocolIndex) -> Option<&Arc<dyn ErasedState>> {
        self.defaults.get(usize::from(protocol))?.as_ref()
    }
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
struct Lineage {
    snapshot: u32,
    prior: u32,
    prior2: u32,
    /// Counts the lineages made: tells this one from an earlier one at its index.
    generation: u32,
    /// The baselines that hold it (acknowledged or in flight); freed at zero.
    refs: u32,
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
    settings: DeltaSettings,
    infos: Vec<StateInfo>,
    free: Vec<u32>,
    lineages: Vec<Lineage>,
    free_lineages: Vec<u32>,
    lineage_generation: u32,
    frame: u32,
    objects: IndexMap<ObjectShared>,
    reservations: Vec<u32>,
    type_overrides: HashMap<ProtocolIndex, bool>,
    prediction_overrides: HashMap<ProtocolIndex, bool>,
    /// Per protocol index, the bits prediction saved per sampled change, decayed (see
    /// [`learn_predictions`](Self::learn_predictions)): a type is predicted while its
    /// gain is not negative.
    prediction_gains: Vec<i64>,
    /// The samples of this frame's write passes, not learned from yet.
    prediction_samples: Vec<PredictionSample>,
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
/// [`ReplicationConfig::writer_threads`](super::ReplicationConfig::writer_threads)),
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

    /// Allows or forbids prediction for one type at run time (overrides
    /// [`DeltaSettings::predict`]); an allowed type is predicted while it pays (see
    /// [`learn_predictions`](Self::learn_predictions)). The receiver needs no setting:
    /// each batch says whether it was coded against the prediction.
    pub fn set_type_prediction(&mut self, protocol: ProtocolIndex, enabled: bool) {
        self.prediction_overrides.insert(protocol, enabled);
    }

    /// Whether objects of `protocol` are coded against predictions where possible:
    /// allowed ([`DeltaSettings::predict`], [`set_type_prediction`](Self::set_type_prediction))
    /// and found to pay (see [`learn_predictions`](Self::learn_predictions)).
    #[inline]
    pub fn is_prediction_enabled(&self, protocol: ProtocolIndex) -> bool {
        self.prediction_pays(protocol) && self.is_prediction_allowed(protocol)
    }

    /// Whether the samples of `protocol` say prediction pays (its gain is not
    /// negative; none yet counts as paying).
    #[inline]
    fn prediction_pays(&self, protocol: ProtocolIndex) -> bool {
        self.prediction_gains
            .get(usize::from(protocol))
            .is_none_or(|&gain| gain >= 0)
    }

    /// Whether the settings let objects of `protocol` be predicted.
    fn is_prediction_allowed(&self, protocol: ProtocolIndex) -> bool {
        self.prediction_overrides
            .get(&protocol)
            .copied()
            .unwrap_or(self.settings.predict)
    }

    /// The key of a sample of a batch coded from lineage `l` when its object is
    /// sampled this frame (see [`learn_predictions`](Self::learn_predictions)): a
    /// witness of this frame's sampling period ([`is_witness`]). A sample is named by
    /// what is the same however connections are spread over writer threads: the
    /// object, and the frames of the baselines coded from (not the lineage's or
    /// snapshots' indices, which follow the order baselines were made in).
    #[inline]
    fn sample_key(&self, l: &Lineage) -> Option<SampleKey> {
        let info = self.infos.get(l.snapshot as usize)?;
        if !is_witness(info.object, self.frame / SAMPLE_PERIOD) {
            return None;
        }
        let frame_of = |s: u32| self.infos.get(s as usize).map_or(u32::MAX, |i| i.frame);
        Some(SampleKey {
            object: info.object,
            frames: [info.frame, frame_of(l.prior), frame_of(l.prior2)],
        })
    }

    /// Whether a baseline of object `object`, of type `protocol`, nominated this frame
    /// keeps the baselines it is built from (else it names its prior as
    /// [`PRIOR_NOT_KEPT`]): while the type is predicted, which reads them, and, while
    /// the settings allow the type prediction, for the witnesses of this sampling
    /// period and the next ([`is_witness`]), whose batches sample it (the next
    /// period's have their priors by the time it starts).
    #[inline]
    pub(crate) fn keeps_priors(&self, protocol: ProtocolIndex, object: InternalIndex) -> bool {
        let period = self.frame / SAMPLE_PERIOD;
        self.is_prediction_allowed(protocol)
            && (self.prediction_pays(protocol)
                || is_witness(object, period)
                || is_witness(object, period.wrapping_add(1)))
    }

    /// For a batch of an object whose type is not predicted now, coded from `lineage`
    /// against the members in `mask`: when the object is sampled this frame and the
    /// settings allow the type prediction, records what the prediction would have
    /// saved (see [`learn_predictions`](Self::learn_predictions)).
    pub(crate) fn sample_unpredicted(
        &self,
        cache: &mut Predictions,
        protocol: ProtocolIndex,
        lineage: u32,
        mask: &ChangeMask,
        state: &dyn ErasedState,
    ) {
        let Some(l) = self.lineage(lineage).copied() else {
            return;
        };
        if self.sample_key(&l).is_some()
            && self.is_prediction_allowed(protocol)
            // Else sampled already on this thread (connections in step code alike).
            && !self.chosen_in_frame(cache, lineage, &l, mask)
        {
            // (Not predicted this frame: the choice only marks the lineage sampled.)
            self.choose_in_frame(cache, protocol, lineage, &l, mask, state);
        }
    }

    /// Whether `cache` holds the prediction chosen this frame for lineage `lineage`
    /// (live as `l`) and the members in `mask`.
    fn chosen_in_frame(
        &self,
        cache: &Predictions,
        lineage: u32,
        l: &Lineage,
        mask: &ChangeMask,
    ) -> bool {
        cache.best(lineage).is_some_and(|best| {
            best.generation == l.generation && best.frame == self.frame && best.mask == *mask
        })
    }

    /// Records what coding `state`'s members in `mask` against `predicted` saves over
    /// coding them against snapshot `info` (the sample `key`'s reference).
    #[allow(clippy::too_many_arguments)]
    fn sample(
        &self,
        cache: &mut Predictions,
        protocol: ProtocolIndex,
        key: SampleKey,
        info: u32,
        predicted: &Arc<dyn ErasedState>,
        mask: &ChangeMask,
        state: &dyn ErasedState,
    ) {
        let Some(base) = self.state_arc(info) else {
            return;
        };
        let plain = delta_bits(state, base.as_ref(), mask);
        let coded = delta_bits(state, predicted.as_ref(), mask);
        if plain != usize::MAX && coded != usize::MAX {
            cache.samples.push(PredictionSample {
                key,
                protocol,
                saved: plain as i64 - coded as i64,
            });
        }
    }

    /// Takes the samples a writer thread recorded in a write pass (see
    /// [`learn_predictions`](Self::learn_predictions)).
    pub(crate) fn add_prediction_samples(&mut self, cache: &mut Predictions) {
        self.prediction_samples.append(&mut cache.samples);
    }

    /// Learns, from the samples of the last frame, whether coding each type against
    /// predictions pays. A sampled batch (every batch of a sampling period's
    /// witnesses: one object in [`SAMPLE_ONE_IN`], drawn afresh every
    /// [`SAMPLE_PERIOD`] frames) is also coded against its reference itself, or,
    /// when its type is not predicted now, against the prediction; the bits the
    /// prediction saved (negative when it cost) are added to the type's decayed
    /// gain, and a type is predicted while its gain is not negative. Called once per
    /// tick, before packets are written, so that every connection and writer thread
    /// makes the same choice for a type in a frame. A sample counts once per frame
    /// (connections in step code alike, and several writer threads may sample the
    /// same), taken in the order of their keys: the choices are the same whatever the
    /// thread count.
    ///
    /// Steady motion (a projectile, a vehicle at speed) leaves second differences
    /// near zero, and prediction pays; a random walk doubles the residuals' variance,
    /// and the baselines themselves code it shorter. Samples go on while a type is
    /// not predicted, so it is predicted again once its motion turns steady.
    pub fn learn_predictions(&mut self) {
        let mut samples = std::mem::take(&mut self.prediction_samples);
        samples.sort_unstable_by_key(|s| (s.key, usize::from(s.protocol), s.saved));
        samples.dedup_by_key(|s| s.key);
        for s in &samples {
            let p = usize::from(s.protocol);
            if self.prediction_gains.len() <= p {
                self.prediction_gains.resize(p + 1, 0);
            }
            let gain = &mut self.prediction_gains[p];
            *gain = *gain - *gain / GAIN_DECAY + s.saved;
        }
        samples.clear();
        self.prediction_samples = samples;
    }

    /// The frame a live snapshot was taken in.
    pub fn snapshot_frame(&self, info: u32) -> Option<u32> {
        self.infos
            .get(info as usize)
            .filter(|i| i.live)
            .map(|i| i.frame)
    }

    /// The prediction `kind` from snapshot `info`, its `prior` and (quadratic) the
    /// prior's prior `prior2` for the members in `mask` (see [`extrapolate`]), cached in
    /// `cache` so connections whose acks are in step compute it once.
    pub(crate) fn prediction(
        &self,
        cache: &mut Predictions,
        info: u32,
        prior: u32,
        prior2: Option<u32>,
        mask: &ChangeMask,
        kind: Prediction,
    ) -> Option<Arc<dyn ErasedState>> {
        let prior2 = match (kind, prior2) {
            (Prediction::Quadratic, None) => return None,
            (Prediction::Quadratic, p) => p,
            _ => None,
        };
        let base = self.state_arc(info)?;
        let prior_state = self.state_arc(prior)?;
        let prior2_state = match prior2 {
            Some(p) => Some(self.state_arc(p)?),
            None => None,
        };
        let priors = (address(prior_state), prior2_state.map_or(0, address));
        let entry = cache.entry(info, base);
        let cached = usize::from(kind == Prediction::Quadratic);
        if let Some(c) = &entry.predicted[cached]
            && c.kind == kind
            && c.priors == priors
            && c.mask == *mask
        {
            return c.predicted.clone();
        }
        // A quadratic prediction starts from the linear one over one interval: taken
        // from the cache when it was made (as `choose_prediction` does first).
        let continued = match &entry.predicted[0] {
            Some(c)
                if kind == Prediction::Quadratic
                    && c.kind == Prediction::Linear(1)
                    && c.priors.0 == priors.0
                    && c.mask == *mask =>
            {
                c.predicted.clone()
            }
            _ => None,
        };
        let predicted = match (kind, continued, prior2_state) {
            (Prediction::Quadratic, Some(continued), Some(prior2)) => extrapolate_quadratic(
                base.as_ref(),
                prior_state.as_ref(),
                prior2.as_ref(),
                continued,
                mask,
            ),
            _ => extrapolate(
                base.as_ref(),
                prior_state.as_ref(),
                prior2_state.map(|p| p.as_ref()),
                mask,
                kind,
            ),
        };
        entry.predicted[cached] = Some(PredictionCache {
            priors,
            _keep: (prior_state.clone(), prior2_state.cloned()),
            mask: mask.clone(),
            kind,
            predicted: predicted.clone(),
        });
        predicted
    }

    /// The prediction a batch of an object whose current state is `state` codes
    /// against, from the baseline `lineage` (its snapshot, prior and the prior's
    /// prior): the constant-velocity one over the intervals from the snapshot to now,
    /// or, one interval on from baselines evenly spaced at least
    /// [`QUADRATIC_MIN_INTERVAL`] frames apart, the quadratic one if it codes the
    /// members in `mask` in fewer bits (a steady turn or a ballistic arc; a random
    /// walk favours the linear one). Decided once per frame for the lineage (in
    /// `cache`), so connections in step share the choice. `None` when no prediction
    /// can be made.
    pub(crate) fn best_prediction(
        &self,
        cache: &mut Predictions,
        protocol: ProtocolIndex,
        lineage: u32,
        mask: &ChangeMask,
        state: &dyn ErasedState,
    ) -> Option<(Prediction, PredictionRef)> {
        let l = *self.lineage(lineage)?;
        let named = PredictionRef { lineage };
        let kind = if self.chosen_in_frame(cache, lineage, &l, mask) {
            cache.best(lineage)?.chosen.as_ref().map(|(kind, _)| *kind)
        } else {
            self.choose_in_frame(cache, protocol, lineage, &l, mask, state)
        };
        kind.map(|kind| (kind, named))
    }

    /// Chooses the prediction of lineage `lineage` (live as `l`) for this frame and
    /// the members in `mask` and records it in `cache`; samples it when its object
    /// is sampled this frame (see [`learn_predictions`](Self::learn_predictions)).
    fn choose_in_frame(
        &self,
        cache: &mut Predictions,
        protocol: ProtocolIndex,
        lineage: u32,
        l: &Lineage,
        mask: &ChangeMask,
        state: &dyn ErasedState,
    ) -> Option<Prediction> {
        let prior2 = (l.prior2 != NO_SNAPSHOT).then_some(l.prior2);
        let chosen = self.choose_prediction(cache, l.snapshot, l.prior, prior2, mask, state);
        if let Some((_, predicted)) = &chosen
            && let Some(key) = self.sample_key(l)
        {
            self.sample(cache, protocol, key, l.snapshot, predicted, mask, state);
        }
        let kind = chosen.as_ref().map(|(kind, _)| *kind);
        cache.set_best(
            lineage,
            BestPrediction {
                generation: l.generation,
                frame: self.frame,
                mask: mask.clone(),
                chosen,
            },
        );
        kind
    }

    /// Chooses [`best_prediction`](Self::best_prediction)'s prediction.
    fn choose_prediction(
        &self,
        cache: &mut Predictions,
        info: u32,
        prior: u32,
        prior2: Option<u32>,
        mask: &ChangeMask,
        state: &dyn ErasedState,
    ) -> Option<(Prediction, Arc<dyn ErasedState>)> {
        let frame = self.snapshot_frame(info)?;
        let prior_frame = self.snapshot_frame(prior)?;
        let steps = prediction_steps(prior_frame, frame, self.frame);
        let linear = Prediction::Linear(steps);
        let interval = frame.wrapping_sub(prior_frame);
        let quadratic = steps == 1
            && interval >= QUADRATIC_MIN_INTERVAL
            && prior2
                .and_then(|p| self.snapshot_frame(p))
                .is_some_and(|f| prior_frame.wrapping_sub(f) == interval);
        if !quadratic {
            return self
                .prediction(cache, info, prior, None, mask, linear)
                .map(|p| (linear, p));
        }
        let by_linear = self.prediction(cache, info, prior, None, mask, linear);
        let by_quadratic = self.prediction(cache, info, prior, prior2, mask, Prediction::Quadratic);
        match (by_linear, by_quadratic) {
            (Some(l), Some(q)) => {
                if delta_bits(state, q.as_ref(), mask) < delta_bits(state, l.as_ref(), mask) {
                    Some((Prediction::Quadratic, q))
                } else {
                    Some((linear, l))
                }
            }
            (l, q) => l
                .map(|l| (linear, l))
                .or(q.map(|q| (Prediction::Quadratic, q))),
        }
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
    fn lineage(&self, l: u32) -> Option<&Lineage> {
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

/// No snapshot (an empty slot, no prior).
const NO_SNAPSHOT: u32 = u32::MAX;

/// A baseline's prior that the client holds and the storage does not keep (see
/// [`BaselineStorage::keeps_priors`]): the baseline has a prior, so its batches carry
/// a prediction code, but no prediction can be made from it. Names no snapshot (the
/// storage never holds this many).
pub(crate) const PRIOR_NOT_KEPT: u32 = u32::MAX - 1;

/// Whether a lineage's snapshot or prior `s` names a snapshot it holds a reference
/// on (neither [`NO_SNAPSHOT`] nor [`PRIOR_NOT_KEPT`]).
#[inline]
fn names_snapshot(s: u32) -> bool {
    s != NO_SNAPSHOT && s != PRIOR_NOT_KEPT
}

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
#[derive(Debug, Default)]
pub(crate) struct FateMoves {
    log: MoveLog<FateMove>,
}

/// One logged catching up: the shared copy before, the packets settled (each with
/// its count of nominations and how) and their origins (which name their
/// nominations), the copy after and the lineages let go of.
#[derive(Debug, Clone)]
struct FateMove {
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
}

impl FateMoves {
    /// Forgets the pass's moves (and lets go of the copies they kept).
    pub(crate) fn clear(&mut self) {
        self.log.clear();
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
            if let Some(m) = moves.log.find(shared, same_fates) {
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
        let Some(before) = moves.log.loggable(&self.objects) else {
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
        moves.log.push(FateMove {
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

/// The prediction of the members in `mask` from states of one object: `b` (the
/// reference), `prior` (the baseline `b` was built from) and, for a quadratic
/// prediction, `prior2` (the one `prior` was built from). Each residual-coded member's
/// components continue their motion, wrapping in the component's width:
/// - [`Prediction::Linear`]`(k)`: constant velocity, `b + k · (b − prior)`;
/// - [`Prediction::Quadratic`]: constant acceleration over one interval,
///   `b + (b − prior) + (b − 2 · prior + prior2)` (exact for a ballistic arc or a
///   steady turn however late acknowledgements make the baselines).
///
/// Other members predict `b`. `None` when it cannot be made (a predicted component
/// leaves its range, the states differ in type, or a quadratic prediction has no
/// `prior2`).
///
/// Each step is [`ErasedState::shift`]: the members' own delta code of one state
/// against another (their residuals, or for a member that takes the escape its full
/// value) read back against a third, which the residual-coded built-ins compute
/// without writing it (see [`crate::serialize::shift`]). So every serializer's notion
/// of a step (wrapping angles, smallest-three components) is respected, both ends
/// compute bit-identical predictions from bit-identical baselines, and members that do
/// not use the residual code (strings, containers, enums) predict no change.
pub fn extrapolate(
    b: &dyn ErasedState,
    prior: &dyn ErasedState,
    prior2: Option<&dyn ErasedState>,
    mask: &ChangeMask,
    kind: Prediction,
) -> Option<Arc<dyn ErasedState>> {
    let same_type = |s: &dyn ErasedState| std::ptr::eq(b.type_descriptor(), s.type_descriptor());
    if !same_type(prior) || !prior2.is_none_or(same_type) {
        return None;
    }
    match kind {
        Prediction::Linear(steps) => {
            // b + (b − prior), then again from there for each further step.
            let mut out = shifted(b, b, prior, mask)?;
            for _ in 1..steps.clamp(1, MAX_PREDICTION_STEPS) {
                out = shifted(out.as_ref(), b, prior, mask)?;
            }
            Some(out)
        }
        Prediction::Quadratic => {
            let continued = shifted(b, b, prior, mask)?;
            extrapolate_quadratic(b, prior, prior2?, continued, mask)
        }
    }
}

/// [`extrapolate`]'s quadratic prediction from `continued`, the linear one over one
/// interval (`b + (b − prior)`): `prior` continued at the velocity it came with, then
/// `b`'s distance from that (the change of velocity) added on top of `continued`.
fn extrapolate_quadratic(
    b: &dyn ErasedState,
    prior: &dyn ErasedState,
    prior2: &dyn ErasedState,
    continued: Arc<dyn ErasedState>,
    mask: &ChangeMask,
) -> Option<Arc<dyn ErasedState>> {
    let same_type = |s: &dyn ErasedState| std::ptr::eq(b.type_descriptor(), s.type_descriptor());
    if !same_type(prior2) || !same_type(continued.as_ref()) {
        return None;
    }
    let prior_continued = shifted(prior, prior, prior2, mask)?;
    shifted(continued.as_ref(), b, prior_continued.as_ref(), mask)
}

/// `x` moved by the step from `z` to `y` ([`ErasedState::shift`]), as a new shared
/// state.
fn shifted(
    x: &dyn ErasedState,
    y: &dyn ErasedState,
    z: &dyn ErasedState,
    mask: &ChangeMask,
) -> Option<Arc<dyn ErasedState>> {
    shared_copy(x, |t| t.shift(x, y, z, mask).then_some(()).ok_or(())).ok()
}

/// The bits of the members' delta code of `value` against `baseline`.
fn delta_bits(value: &dyn ErasedState, baseline: &dyn ErasedState, mask: &ChangeMask) -> usize {
    crate::serialize::shift::code_bits(|w| value.serialize_delta(baseline, mask, w))
        .unwrap_or(usize::MAX)
}

/// One object in this many is sampled (see [`BaselineStorage::learn_predictions`]):
/// the witnesses of a sampling period ([`is_witness`]).
const SAMPLE_ONE_IN: u32 = 64;

/// Frames of a sampling period: its witnesses are sampled in every batch of the
/// period. A fixed set for a while, so that only they keep the baselines a
/// prediction is made from where their type is not predicted (see
/// [`BaselineStorage::keeps_priors`]); a new set each period, so that every object,
/// even the one object of a type, is sampled now and then.
const SAMPLE_PERIOD: u32 = 32;

/// Spreads an (object, period) pair over a word (Fibonacci hashing): the pairs whose
/// words are below 2^64 / [`SAMPLE_ONE_IN`] are sampled.
const SAMPLE_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

/// Whether `object` is a witness of sampling period `period` (frame /
/// [`SAMPLE_PERIOD`]): one object in [`SAMPLE_ONE_IN`], drawn afresh every period.
#[inline]
fn is_witness(object: InternalIndex, period: u32) -> bool {
    let h = (u64::from(object) << 32 | u64::from(period)).wrapping_mul(SAMPLE_HASH);
    h < u64::MAX / u64::from(SAMPLE_ONE_IN)
}

/// A type's prediction gain keeps `1 − 1 / GAIN_DECAY` of itself per sample: the
/// last few dozen samples decide.
const GAIN_DECAY: i64 = 16;

/// The shortest baseline interval, in frames, over which a quadratic prediction is
/// tried (with baselines a frame apart, the linear one misses by a frame's
/// acceleration only, and the quadratic one doubles the quantization noise).
const QUADRATIC_MIN_INTERVAL: u32 = 2;

/// The most steps a prediction extrapolates over (the batch's 1-to-3-bit code).
pub const MAX_PREDICTION_STEPS: u32 = 3;

/// The steps from the prior's frame to the snapshot's that cover the frames from the
/// snapshot to now, rounded, in `1..=MAX_PREDICTION_STEPS`: 1 with acks in step
/// (baselines one frame apart, used the next frame).
pub(crate) fn prediction_steps(prior_frame: u32, frame: u32, now: u32) -> u32 {
    let interval = u64::from(frame.wrapping_sub(prior_frame).max(1));
    let ahead = u64::from(now.wrapping_sub(frame));
    ((2 * ahead + interval) / (2 * interval)).clamp(1, u64::from(MAX_PREDICTION_STEPS)) as u32
}

/// What the writer decided for one delta batch.
pub(crate) struct DeltaPlan {
    /// The acknowledged slot and its (committed) snapshot (delta path), or none (full
    /// path).
    pub reference: Option<(u8, u32)>,
    /// On the delta path, when the acknowledged slot has a prior: `Some((kind,
    /// prediction))` to code against it, `Some(None)` to code against the slot (the
    /// batch says which, see the module docs); `None` without a prior (no code).
    pub predicted: Option<Option<(Prediction, PredictionRef)>>,
    /// What a baseline this batch nominates is built from, as the storage keeps it:
    /// the reference's snapshot and the reference's prior, or [`PRIOR_NOT_KEPT`]
    /// alone (see [`BaselineStorage::keeps_priors`]); none on the full path.
    pub priors: (Option<u32>, Option<u32>),
    /// The slot to nominate.
    pub nominate: Option<u8>,
    /// The members allowed to this connection now (the new baseline's synced set).
    pub allowed: ChangeMask,
    /// The type whose default state the full path may code against (full path only;
    /// see [`PlanStates::default`]).
    pub default: Option<ProtocolIndex>,
    /// Whether the full path encodes against the default state.
    pub vs_default: bool,
    /// The reference is this connection's last nomination of the object, acknowledged
    /// and not followed by another: the newest baseline the client stored, which the
    /// head names without a slot.
    pub newest: bool,
}

/// What a batch's members are coded against, which decides their bits besides the
/// object's state and the change mask: the key of a shared encoding (see `encode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegmentKind {
    /// The members in full.
    Full,
    /// The members coded against the state at this address (the reference, its
    /// prediction or the type's default state).
    Against(usize),
}

/// The address of a state, its identity while it is alive.
pub(crate) fn address(state: &Arc<dyn ErasedState>) -> usize {
    Arc::as_ptr(state) as *const () as usize
}

impl DeltaPlan {
    /// The state the members are coded against (the prediction, the reference or the
    /// type's default state), or none (coded in full).
    pub(crate) fn against<'a>(
        &self,
        st: &'a BaselineStorage,
        states: &'a PlanStates,
    ) -> Option<&'a Arc<dyn ErasedState>> {
        match self.reference {
            Some((_, snapshot)) => match self.predicted {
                Some(Some((_, predicted))) => {
                    let p = states.predictions.chosen(predicted);
                    debug_assert!(p.is_some(), "a plan's prediction lives while it is written");
                    p
                }
                _ => st.state_arc(snapshot),
            },
            None if self.vs_default => self.default.and_then(|p| states.default_of(p)),
            None => None,
        }
    }

    /// The segment this plan codes (what decides its bits besides the state and the
    /// mask), named without touching any state.
    pub(crate) fn segment(&self, st: &BaselineStorage, states: &PlanStates) -> SegmentKind {
        self.against(st, states)
            .map_or(SegmentKind::Full, |a| SegmentKind::Against(address(a)))
    }

    /// The batch head this plan writes (see `wire`).
    pub(crate) fn head(&self) -> BatchHead {
        match self.reference {
            Some((reference, _)) => BatchHead::Reference {
                reference: (!self.newest).then_some(reference),
                nominate: self.nominate,
                prediction: self
                    .predicted
                    .as_ref()
                    .map(|p| p.as_ref().map(|(kind, _)| *kind)),
            },
            None => BatchHead::Fresh {
                created: self.nominate,
                vs_default: self.vs_default,
            },
        }
    }

    /// Writes the members of the segment [`segment`](Self::segment) names; returns
    /// their bits.
    pub(crate) fn write_segment(
        &self,
        st: &BaselineStorage,
        states: &PlanStates,
        state: &dyn ErasedState,
        mask: &ChangeMask,
        w: &mut BitWriter,
    ) -> usize {
        let start = w.position();
        match self.against(st, states) {
            Some(against) => state.serialize_delta(against.as_ref(), mask, w),
            // Only on the full path without the default state: the writer plans a
            // reference only when its snapshot is committed.
            None => state.serialize(mask, w),
        }
        w.position() - start
    }
}

/// A baseline as the client holds it: the state, the sequence of the packet that
/// stored it, and (delta path) the baselines it was built from, for predictions.
/// States are shared: a baseline's prior is the very state of the one it was built
/// from.
#[derive(Debug, Clone)]
pub(crate) struct NewBaseline {
    state: Arc<dyn ErasedState>,
    prior: Option<Arc<dyn ErasedState>>,
    prior2: Option<Arc<dyn ErasedState>>,
}

/// The client's stored baselines of one object (quantized snapshots, with the
/// sequence of the packet that stored each and, for baselines built on the delta path,
/// the acknowledged baselines they were built from).
///
/// The server codes against its acknowledged baseline only, and acknowledgements
/// move forward: once a batch is coded against a baseline, none stored before it is
/// named again (a prediction's priors are held by the baseline itself). So a batch
/// coded against a baseline drops the older ones, and an object keeps about as many
/// as the round trip has nominations in flight, not one per slot.
#[derive(Debug, Default)]
pub struct ReceiverBaselines {
    /// At most one per slot, in store order (objects without delta compression keep
    /// none).
    stored: Vec<Stored>,
}

#[derive(Debug)]
struct Stored {
    slot: u8,
    /// The sequence of the packet that stored it.
    seq: u64,
    baseline: NewBaseline,
}

impl ReceiverBaselines {
    fn find(&self, index: u8) -> Option<&Stored> {
        self.stored.iter().find(|s| s.slot == index)
    }

    fn stored(&self, index: u8) -> Option<&NewBaseline> {
        self.find(index).map(|s| &s.baseline)
    }

    /// A stored baseline.
    pub fn get(&self, index: u8) -> Option<&dyn ErasedState> {
        self.stored(index).map(|b| b.state.as_ref())
    }

    /// The baseline a stored one was built from, if it was built on the delta path.
    pub fn prior(&self, index: u8) -> Option<&dyn ErasedState> {
        self.stored(index)?.prior.as_deref()
    }

    /// Whether the baseline `reference` names (see [`resolve`](Self::resolve)) has a
    /// prior (a batch against it carries a prediction code).
    pub fn has_prior(&self, reference: Option<u8>) -> bool {
        self.resolve(reference)
            .is_some_and(|k| self.prior(k).is_some())
    }

    /// The slot a batch head's reference names: the slot itself, or (`None`) the slot
    /// stored last.
    pub fn resolve(&self, reference: Option<u8>) -> Option<u8> {
        match reference {
            Some(k) => Some(k),
            None => self.stored.iter().max_by_key(|s| s.seq).map(|s| s.slot),
        }
    }

    /// Number of stored baselines.
    pub fn count(&self) -> usize {
        self.stored.len()
    }

    fn store(&mut self, index: u8, baseline: NewBaseline, seq: u64) {
        if index >= MAX_BASELINE_COUNT {
            return;
        }
        match self.stored.iter_mut().find(|s| s.slot == index) {
            Some(s) if s.seq < seq => {
                s.seq = seq;
                s.baseline = baseline;
            }
            Some(_) => {}
            None => {
                // Grown one at a time: an object keeps as many as it ever held at once
                // (few), for every object the client has.
                self.stored.reserve_exact(1);
                self.stored.push(Stored {
                    slot: index,
                    seq,
                    baseline,
                });
            }
        }
    }

    /// Drops the baselines stored before `seq`: a batch was coded against the one
    /// stored then, so the server names none of them again.
    fn forget_before(&mut self, seq: u64) {
        self.stored.retain(|s| s.seq >= seq);
    }
}

/// A decoded delta batch body (client side).
pub(crate) struct DeltaBody {
    /// The members carried.
    pub mask: ChangeMask,
    /// The live state with the members applied (from `live`, or from the default
    /// state for a new object).
    pub state: Box<dyn ErasedState>,
    /// A baseline to store: (slot, reference + the batch's members, built from the
    /// reference).
    pub store: Option<(u8, NewBaseline)>,
    /// The sequence of the packet that stored the baseline the batch was coded
    /// against (`None`: coded against the default state or in full).
    pub reference_seq: Option<u64>,
}

/// Reads a delta batch's members (after its head and mask) for an object whose live
/// state is `live` (`None` for a creation), decoding against `baselines` or the default
/// state as `head` says. `Ok(None)`: the packet is older than the baseline it names
/// (reordered past a newer baseline); the batch is skipped.
pub(crate) fn read_delta_body(
    live: Option<&dyn ErasedState>,
    baselines: Option<&ReceiverBaselines>,
    new_state: fn() -> Box<dyn ErasedState>,
    head: BatchHead,
    mask: ChangeMask,
    seq: u64,
    r: &mut BitReader,
) -> Result<Option<DeltaBody>, ObjectReadError> {
    let _span = tracing::trace_span!("DeltaCompressed").entered();
    match head {
        BatchHead::Full => Err(ObjectReadError::Decode(SerializeError::invalid(
            "batch head",
            "not a delta head",
        ))),
        BatchHead::Reference {
            reference,
            nominate,
            prediction,
        } => {
            let index = baselines
                .and_then(|b| b.resolve(reference))
                .ok_or(ObjectReadError::MissingBaseline(reference.unwrap_or(0)))?;
            let Stored {
                seq: stored_seq,
                baseline: slot,
                ..
            } = baselines
                .and_then(|b| b.find(index))
                .ok_or(ObjectReadError::MissingBaseline(index))?;
            if *stored_seq > seq {
                return Ok(None);
            }
            let reference_seq = Some(*stored_seq);
            let reference = slot.state.as_ref();
            // With a prior, the head's code says whether (and how) the members are
            // coded against the prediction from the baselines.
            let predicted = match (slot.prior.as_deref(), prediction) {
                (Some(prior), Some(Some(kind))) => Some(
                    extrapolate(reference, prior, slot.prior2.as_deref(), &mask, kind).ok_or(
                        ObjectReadError::Decode(SerializeError::invalid(
                            "baseline prediction",
                            "the prediction the batch is coded against cannot be made",
                        )),
                    )?,
                ),
                _ => None,
            };
            let against = predicted.as_deref().unwrap_or(reference);
            let start = r.clone();
            let mut state = match live {
                Some(l) => l.clone_box(),
                None => reference.clone_box(),
            };
            state.deserialize_delta(against, &mask, r)?;
            state.validate(&mask)?;
            let store = match nominate {
                Some(nominated) => {
                    let mut again = start;
                    let b = shared_copy(reference, |b| {
                        b.deserialize_delta(against, &mask, &mut again)
                    })?;
                    let stored = NewBaseline {
                        state: b,
                        prior: Some(slot.state.clone()),
                        prior2: slot.prior.clone(),
                    };
                    Some((nominated, stored))
                }
                None => None,
            };
            Ok(Some(DeltaBody {
                mask,
                state,
                store,
                reference_seq,
            }))
        }
        BatchHead::Fresh {
            created,
            vs_default,
        } => {
            let default = new_state();
            let start = r.clone();
            let mut state = match live {
                Some(l) => l.clone_box(),
                None => default.clone_box(),
            };
            if vs_default {
                state.deserialize_delta(default.as_ref(), &mask, r)?;
            } else {
                state.deserialize(&mask, r)?;
            }
            state.validate(&mask)?;
            let store = if let Some(created) = created {
                let mut again = start;
                let b = shared_copy(default.as_ref(), |b| {
                    if vs_default {
                        b.deserialize_delta(default.as_ref(), &mask, &mut again)
                    } else {
                        b.deserialize(&mask, &mut again)
                    }
                })?;
                let stored = NewBaseline {
                    state: b,
                    prior: None,
                    prior2: None,
                };
                Some((created, stored))
            } else {
                None
            };
            Ok(Some(DeltaBody {
                mask,
                state,
                store,
                reference_seq: None,
            }))
        }
    }
}

/// A shared copy of `state` that `change` then changes (before anything else holds it).
fn shared_copy<E>(
    state: &dyn ErasedState,
    change: impl FnOnce(&mut dyn ErasedState) -> Result<(), E>,
) -> Result<Arc<dyn ErasedState>, E> {
    let mut copy = state.clone_arc();
    match Arc::get_mut(&mut copy) {
        Some(c) => change(c)?,
        // A fresh copy has no other holder; were it shared, change a boxed one.
        None => {
            let mut boxed = state.clone_box();
            change(boxed.as_mut())?;
            copy = Arc::from(boxed);
        }
    }
    Ok(copy)
}

/// Files a decoded body's baselines: drops the ones its reference supersedes, then
/// stores its nomination.
pub(crate) fn store_baseline(
    baselines: &mut ReceiverBaselines,
    store: Option<(u8, NewBaseline)>,
    reference_seq: Option<u64>,
    seq: u64,
) {
    if let Some(reference) = reference_seq {
        baselines.forget_before(reference);
    }
    if let Some((index, stored)) = store {
        baselines.store(index, stored, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priors_are_kept_where_a_prediction_or_its_sample_may_read_them() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let (walk, steady, off): (ProtocolIndex, ProtocolIndex, ProtocolIndex) = (0, 1, 2);
        s.prediction_gains = vec![-100, 100];
        s.set_type_prediction(off, false);
        let objects = 0..20_000u32;
        for _ in 0..3 * SAMPLE_PERIOD {
            s.begin_frame();
            let period = s.frame / SAMPLE_PERIOD;
            let witnesses = |p: u32| objects.clone().filter(move |&o| is_witness(o, p));
            // A type not predicted: this period's witnesses and the next one's.
            let kept: Vec<u32> = objects
                .clone()
                .filter(|&o| s.keeps_priors(walk, o))
                .collect();
            let mut expected: Vec<u32> = witnesses(period).chain(witnesses(period + 1)).collect();
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(kept, expected);
            // About one object in SAMPLE_ONE_IN per period, a new draw each period.
            let n = witnesses(period).count() as u32;
            assert!(n.abs_diff(20_000 / SAMPLE_ONE_IN) < 80, "{n} witnesses");
            assert_ne!(
                witnesses(period).collect::<Vec<_>>(),
                witnesses(period + 1).collect::<Vec<_>>()
            );
            // A predicted type keeps every object's; a type never predicted, none.
            assert!(objects.clone().all(|o| s.keeps_priors(steady, o)));
            assert!(!objects.clone().any(|o| s.keeps_priors(off, o)));
        }
    }

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
    fn prediction_steps_round_the_frames_ahead_to_whole_intervals() {
        // Acks in step: baselines a frame apart, used the next frame.
        assert_eq!(prediction_steps(9, 10, 11), 1);
        // Acks 3 ticks late: baselines 3 frames apart, used 3 to 5 frames on.
        assert_eq!(prediction_steps(7, 10, 13), 1);
        assert_eq!(prediction_steps(7, 10, 14), 1);
        assert_eq!(prediction_steps(7, 10, 15), 2);
        // Capped, and never zero (also across frame wraparound).
        assert_eq!(prediction_steps(9, 10, 100), MAX_PREDICTION_STEPS);
        assert_eq!(prediction_steps(10, 10, 10), 1);
        assert_eq!(prediction_steps(u32::MAX, 0, 1), 1);
    }

    #[test]
    fn predictions_forget_their_choices_when_cleared_and_overwrite_in_place() {
        let mut p = Predictions::default();
        let choice = |frame| BestPrediction {
            generation: 1,
            frame,
            mask: ChangeMask::all(3),
            chosen: None,
        };
        assert!(p.best(7).is_none());
        p.set_best(7, choice(1));
        p.set_best(100_000, choice(2));
        assert_eq!(p.best(7).map(|b| b.frame), Some(1));
        assert_eq!(p.best(100_000).map(|b| b.frame), Some(2));
        assert!(p.best(8).is_none());
        p.set_best(7, choice(3));
        assert_eq!(p.best(7).map(|b| b.frame), Some(3));
        assert_eq!(
            p.best.entries.len(),
            2,
            "a second choice for a lineage replaces the first"
        );
        p.clear();
        assert!(p.best(7).is_none() && p.best(100_000).is_none());
        // Across the generation's wraparound, no slot named in the first generation 0
        // (100 000's, at position 1) looks current.
        p.generation = u32::MAX;
        p.set_best(7, choice(5));
        p.clear();
        assert_eq!(p.generation, 0);
        p.set_best(1, choice(6));
        p.set_best(2, choice(7));
        assert!(p.best(100_000).is_none());
        assert_eq!(p.best(2).map(|b| b.frame), Some(7));
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
        let holders = s.lineages[c.object(1).acked as usize].refs as usize;
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
                .map(|n| s.lineages[n.lineage as usize].refs)
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
        assert_eq!(moves.log.moves().len(), 6);
        assert!(Arc::ptr_eq(&moves.log.moves()[5].before, &twins_copy));
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
    fn a_snapshot_entry_is_half_a_cache_line() {
        // Aligned to its size: an entry never straddles two lines.
        assert_eq!(std::mem::size_of::<StateInfo>(), 32);
        assert_eq!(std::mem::align_of::<StateInfo>(), 32);
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
