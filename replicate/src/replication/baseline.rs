//! Delta compression against acknowledged baselines (Iris's
//! `DeltaCompressionBaselineManager`, `DeltaCompressionBaselineStorage` and the
//! reader's stored baselines).
//!
//! A *baseline* is a snapshot of an object's quantized state that a connection's client
//! also holds. Each (object, connection) has at most [`MAX_BASELINE_COUNT`] = 2 baseline
//! slots, named on the wire by a 2-bit index ([`INVALID_BASELINE_INDEX`] = 2 = none).
//! The writer delta-encodes an object against the slot its client acknowledged; a batch
//! may *nominate* a new baseline in the other slot; the nominating packet's ack promotes
//! it (and destroys the previously acked one), its loss releases it and keeps the acked
//! one (the members the lost batch carried are owed again through its packet record,
//! like any lost batch's).
//!
//! This module owns:
//! - [`BaselineStorage`]: the server's snapshots, shared by every connection through a
//!   [`SharedBaselineStorage`]. A snapshot created in a frame is *reserved* (no copy),
//!   every connection that takes it in the same frame adds a reference, and at the end
//!   of the write pass the reservation is *committed* (cloned exactly once) if someone
//!   kept it, or *cancelled* (never copied) if nobody did. It also owns the per-object
//!   creation throttle (`min_frames_between_baselines`, a connection's first baseline is
//!   always allowed), the per-type switches and the types' default states.
//! - [`ConnectionBaselines`]: one connection's slots per object, 32 bytes each, stored
//!   densely by object index: per slot the snapshot, the prior snapshot it was built
//!   from and the members the client holds in sync (an index into the connection's
//!   few distinct masks), plus the nomination in flight.
//! - [`ReceiverBaselines`] and the client-side decoding of a delta batch.
//!
//! # Baselines the client can rebuild exactly
//!
//! The client builds a nominated baseline as *reference + the batch's members*, where
//! the reference is the acknowledged baseline (delta path) or the type's default state
//! (full path), never its live state: the live state may hold members of newer
//! (reordered) packets. So a nominating batch carries, besides the owed members, every
//! member allowed to this connection whose current value differs from the reference
//! (`synced` members); the server remembers which members those were. A later batch
//! that needs a member outside the acknowledged baseline's `synced` set (a member newly
//! allowed after an owner or condition change) releases the baselines (their masks
//! merged back) and takes the full path.
//!
//! # A baseline every packet
//!
//! With [`DeltaSettings::baseline_every_packet`] (the default) a connection nominates a
//! new baseline of an object in every packet that carries it, as long as none of its
//! nominations of that object is in flight and its last one was not lost; so with acks
//! in step the reference is the previous packet's state. With acks `n` packets late, one
//! nomination is in flight at a time and a new baseline is taken every `n + 1` packets.
//! After a lost nomination the connection falls back to the frame throttle
//! (`min_frames_between_baselines`) for that object until one is acknowledged.
//!
//! # Prediction
//!
//! A baseline nominated on the delta path is built from the acknowledged baseline it was
//! coded against, and both ends keep that one as its *prior*. When a batch's reference
//! has a prior, the members can be coded against the constant-velocity extrapolation
//! `reference + k · (reference − prior)` of each member ([`extrapolate`]) instead of the
//! reference itself: with steady motion the residuals are second differences, close to
//! zero. `k`, 1 to 3, is the number of prior-to-reference intervals from the reference's
//! frame to now, rounded (1 with acks in step; with acks late, baselines are several
//! frames apart and used several frames after they were taken). The server decides per
//! type ([`DeltaSettings::predict`], [`BaselineStorage::set_type_prediction`]) and
//! writes `k` in each batch (`[1]` for 1, `[0][1][0]` / `[0][1][1]` for 2 / 3, `[0][0]`
//! for no prediction); the receiver needs no setting. The prediction of a snapshot is
//! cached on it, so connections whose acks are in step compute it once per tick.
//!
//! On the wire a batch's head ([`BatchHead`], see `wire`) names the reference slot,
//! whether the batch nominates the other slot, and the prediction code (only when the
//! reference has a prior), or, with no reference, the slot it creates and whether it is
//! coded against the default state. After the change mask come the members: each delta
//! against the prediction if predicted, else against the reference; or against the
//! type's default state, or in full.

use super::record::INVALID_BASELINE_INDEX;
use super::wire::{BatchHead, ObjectReadError};
use crate::bits::{BitReader, BitWriter};
use crate::object::{InternalIndex, ObjectTable};
use crate::protocol::{ErasedState, ProtocolIndex};
use crate::serialize::SerializeError;
use crate::state::ChangeMask;
use crate::{connection::DeliveryStatus, handle::NetRefHandle};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most baselines per (object, connection).
pub const MAX_BASELINE_COUNT: u8 = 2;

/// Bits of a baseline index on the wire.
pub const BASELINE_INDEX_BITS: u32 = 2;

/// Settings of delta compression (part of
/// [`ReplicationConfig`](super::ReplicationConfig)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaSettings {
    /// Global switch (Iris's `net.Iris.EnableDeltaCompression`, default true).
    pub enabled: bool,
    /// Nominate a new baseline in every packet while acknowledgements flow (default
    /// true): a connection may take a new baseline of an object whenever none of its
    /// nominations of that object is in flight (the slot limit: one acknowledged, one
    /// pending) and its last one was not lost. Deltas then run against the state of
    /// about one round trip ago instead of up to `min_frames_between_baselines` ago.
    /// After a lost nomination, and always when this is false, creation falls back to
    /// the frame throttle below.
    pub baseline_every_packet: bool,
    /// Frames between two baseline creations for one object
    /// (`net.Iris.MinimumNumberOfFramesBetweenBaselines`, default 60): the fallback
    /// under loss, or the only rule without `baseline_every_packet`.
    pub min_frames_between_baselines: u32,
    /// Encode the initial state against the type's default state
    /// (`net.Iris.DeltaCompressInitialState`, default true).
    pub compress_initial_state: bool,
    /// Code members against a constant-velocity prediction from the two latest
    /// acknowledged baselines where both exist (default true; per type with
    /// [`BaselineStorage::set_type_prediction`]). See the module docs.
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

struct StateInfo {
    object: InternalIndex,
    state: Option<Arc<dyn ErasedState>>,
    refs: u32,
    live: bool,
    /// The frame the snapshot was taken in.
    frame: u32,
    /// The last prediction made from this snapshot: (prior, mask, prediction or `None`
    /// when it could not be made). Connections with acks in step share it.
    predicted: Option<PredictionCache>,
}

type PredictionCache = (
    Arc<dyn ErasedState>,
    ChangeMask,
    u32,
    Option<Arc<dyn ErasedState>>,
);

#[derive(Default)]
struct ObjectShared {
    handle: NetRefHandle,
    prev_creation_frame: u32,
    /// The snapshot created for the object this frame (the sharing context).
    shared: Option<(u32, u32)>,
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
    frame: u32,
    objects: IndexMap<ObjectShared>,
    reservations: Vec<u32>,
    type_overrides: HashMap<ProtocolIndex, bool>,
    prediction_overrides: HashMap<ProtocolIndex, bool>,
    /// Per protocol index.
    defaults: Vec<Option<Arc<dyn ErasedState>>>,
    stats: BaselineStats,
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

/// A [`BaselineStorage`] shared by the writers of one server.
pub type SharedBaselineStorage = Arc<Mutex<BaselineStorage>>;

/// Locks a shared storage (a poisoned lock still yields the data: the storage has no
/// invariant a panic elsewhere could half-update in a harmful way).
pub fn lock_storage(s: &SharedBaselineStorage) -> std::sync::MutexGuard<'_, BaselineStorage> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

impl BaselineStorage {
    /// An empty storage.
    pub fn new(settings: DeltaSettings) -> Self {
        Self {
            settings,
            infos: Vec::new(),
            free: Vec::new(),
            frame: 0,
            objects: IndexMap::default(),
            reservations: Vec::new(),
            type_overrides: HashMap::new(),
            prediction_overrides: HashMap::new(),
            defaults: Vec::new(),
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
    pub fn is_enabled(&self, protocol: ProtocolIndex, descriptor_default: bool) -> bool {
        self.settings.enabled
            && self
                .type_overrides
                .get(&protocol)
                .copied()
                .unwrap_or(descriptor_default)
    }

    /// Turns prediction on or off for one type at run time (overrides
    /// [`DeltaSettings::predict`]). The receiver needs no setting: each batch says
    /// whether it was coded against the prediction.
    pub fn set_type_prediction(&mut self, protocol: ProtocolIndex, enabled: bool) {
        self.prediction_overrides.insert(protocol, enabled);
    }

    /// Whether objects of `protocol` are coded against predictions where possible.
    pub fn is_prediction_enabled(&self, protocol: ProtocolIndex) -> bool {
        self.prediction_overrides
            .get(&protocol)
            .copied()
            .unwrap_or(self.settings.predict)
    }

    /// The frame a live snapshot was taken in.
    pub fn snapshot_frame(&self, info: u32) -> Option<u32> {
        self.infos
            .get(info as usize)
            .filter(|i| i.live)
            .map(|i| i.frame)
    }

    /// The constant-velocity prediction `steps` steps on from snapshot `info` and its
    /// `prior` for the members in `mask` (see [`extrapolate`]), cached on the snapshot
    /// so connections whose acks are in step compute it once.
    pub(crate) fn prediction(
        &mut self,
        info: u32,
        prior: u32,
        mask: &ChangeMask,
        steps: u32,
    ) -> Option<Arc<dyn ErasedState>> {
        let prior_address = self.state_address(prior)?;
        let i = self.infos.get(info as usize).filter(|i| i.live)?;
        if let Some((p, m, k, predicted)) = &i.predicted
            && address(p) == prior_address
            && m == mask
            && *k == steps
        {
            return predicted.clone();
        }
        let state = i.state.clone()?;
        let prior = self.state(prior)?;
        let predicted = extrapolate(state.as_ref(), prior.as_ref(), mask, steps).map(Arc::from);
        if let Some(i) = self.infos.get_mut(info as usize) {
            i.predicted = Some((prior, mask.clone(), steps, predicted.clone()));
        }
        predicted
    }

    /// The current frame (advanced once per server tick).
    pub fn frame(&self) -> u32 {
        self.frame
    }

    /// Starts a new frame: the sharing context is reset.
    pub fn begin_frame(&mut self) {
        self.frame = self.frame.wrapping_add(1);
        self.stats.created_this_frame = 0;
    }

    /// Counters.
    pub fn stats(&self) -> &BaselineStats {
        &self.stats
    }

    pub(crate) fn count_batch(&mut self, delta: bool) {
        if delta {
            self.stats.delta_batches += 1;
        } else {
            self.stats.full_batches += 1;
        }
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

    /// The type's default state (cached per type).
    pub fn default_state(
        &mut self,
        protocol: ProtocolIndex,
        new_state: impl FnOnce() -> Box<dyn ErasedState>,
    ) -> Arc<dyn ErasedState> {
        let i = usize::from(protocol);
        if self.defaults.len() <= i {
            self.defaults.resize(i + 1, None);
        }
        self.defaults[i]
            .get_or_insert_with(|| Arc::from(new_state()))
            .clone()
    }

    /// Phase 1: reserves a snapshot of an object's current state without copying it
    /// (the reservation holds one reference).
    pub fn reserve(&mut self, object: InternalIndex) -> u32 {
        let info = StateInfo {
            object,
            state: None,
            refs: 1,
            live: true,
            frame: self.frame,
            predicted: None,
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
            i.state = None;
            i.predicted = None;
            self.free.push(info);
            if let Some(o) = self.objects.get_mut(object)
                && o.shared.is_some_and(|(_, s)| s == info)
            {
                o.shared = None;
            }
        }
    }

    /// Phase 2, at the end of a write pass: each reservation drops its own reference;
    /// one nobody kept is cancelled (no copy), one that was kept is cloned exactly once
    /// from the object's current state in `table`.
    pub fn commit_reservations(&mut self, table: &ObjectTable) {
        for idx in std::mem::take(&mut self.reservations) {
            let Some(i) = self.infos.get(idx as usize).filter(|i| i.live) else {
                continue;
            };
            if i.refs <= 1 {
                self.stats.cancelled += 1;
                self.release(idx);
                continue;
            }
            let object = i.object;
            let snapshot = table
                .entry_at(object)
                .map(|e| Arc::<dyn ErasedState>::from(e.state().clone_box()));
            self.stats.clones += 1;
            if let Some(i) = self.infos.get_mut(idx as usize) {
                i.state = snapshot;
            }
            self.release(idx);
        }
    }

    /// Whether a connection may create a baseline for an object now: always when
    /// `unthrottled` (its first baseline, or one taken in every packet while
    /// acknowledgements flow, see [`DeltaSettings::baseline_every_packet`]), a snapshot
    /// already created this frame (shared), or `min_frames_between_baselines` frames
    /// since the object's last creation.
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
        let shared = self
            .objects
            .get(object)
            .filter(|o| o.handle == handle)
            .and_then(|o| o.shared)
            .filter(|(f, _)| *f == frame)
            .map(|(_, s)| s);
        let info = match shared {
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

/// One baseline of one (object, connection), as the writer reads it.
#[derive(Debug, Clone, Copy)]
pub struct BaselineSlot<'a> {
    /// The snapshot in the [`BaselineStorage`].
    pub snapshot: u32,
    /// The members the client holds equal to the snapshot.
    pub synced: &'a ChangeMask,
    /// The snapshot of the acknowledged baseline this one was built from (delta path),
    /// which the client also holds: with the snapshot, the two states a prediction
    /// extrapolates. The slot holds a reference on it.
    pub prior: Option<u32>,
}

/// A slot as stored: 12 bytes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    snapshot: u32,
    prior: u32,
    /// Index of the synced mask in [`ConnectionBaselines::synced`].
    synced: u32,
}

const EMPTY_SLOT: Slot = Slot {
    snapshot: NO_SNAPSHOT,
    prior: NO_SNAPSHOT,
    synced: 0,
};

impl Slot {
    fn is_live(&self) -> bool {
        self.snapshot != NO_SNAPSHOT
    }
}

/// One (object, connection)'s baselines: 32 bytes, stored densely by object index so
/// that a connection's state for 10 000 objects is 320 KB.
#[derive(Debug, Clone, Copy)]
struct ObjectBaselines {
    slots: [Slot; 2],
    /// The low 32 bits of the ordinal of the packet in flight that nominated
    /// `pending` (packets in flight are far fewer than 2^32).
    pending_ordinal: u32,
    /// The slot nominated by a packet in flight ([`INVALID_BASELINE_INDEX`]: none).
    pending: u8,
    /// The last nomination was lost: creation falls back to the frame throttle until
    /// one is acknowledged.
    lost: bool,
    /// The slot the object's last delta batch referenced ([`INVALID_BASELINE_INDEX`]:
    /// none): a full-path nomination (after an invalidation) goes in the other one,
    /// so packets still in flight that reference it decode against the content they
    /// were written for.
    last_reference: u8,
}

const EMPTY: ObjectBaselines = ObjectBaselines {
    slots: [EMPTY_SLOT; 2],
    pending_ordinal: 0,
    pending: INVALID_BASELINE_INDEX,
    lost: false,
    last_reference: INVALID_BASELINE_INDEX,
};

impl ObjectBaselines {
    fn live(&self) -> usize {
        self.slots.iter().filter(|s| s.is_live()).count()
    }
}

/// One connection's baselines per object (at most two each), and the packet in flight
/// that nominated a new one.
///
/// A slot is a snapshot reference, the reference on its prior, and the index of its
/// synced mask in a per-connection table of the distinct masks seen (a handful: one
/// per type and role), so a connection keeps 32 bytes per object.
#[derive(Debug, Default)]
pub struct ConnectionBaselines {
    objects: Vec<ObjectBaselines>,
    /// The distinct synced masks, by index (never shrinks; see [`Self::intern`]).
    synced: Vec<ChangeMask>,
    synced_index: HashMap<ChangeMask, u32>,
    /// The last mask interned (most nominations repeat it).
    last_synced: Option<u32>,
}

/// What a packet's fate did to an object's baselines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaselineOutcome {
    /// The record nominated nothing still pending for the object.
    None,
    /// The nominated slot is now the acknowledged one.
    Promoted(u8),
    /// The nomination was lost (or discarded): the slot was released. The members the
    /// batch carried are owed again through the packet record.
    Lost,
}

impl ConnectionBaselines {
    fn get(&self, object: InternalIndex) -> Option<&ObjectBaselines> {
        self.objects.get(object as usize)
    }

    fn get_mut(&mut self, object: InternalIndex) -> &mut ObjectBaselines {
        let i = object as usize;
        if self.objects.len() <= i {
            self.objects.resize(i + 1, EMPTY);
        }
        &mut self.objects[i]
    }

    /// The index of `mask` in the table of synced masks (added if new). Distinct masks
    /// are few (a type's members restricted by a role, or by a member filter hook),
    /// and the table keeps each once.
    fn intern(&mut self, mask: &ChangeMask) -> u32 {
        if let Some(i) = self.last_synced
            && self.synced[i as usize] == *mask
        {
            return i;
        }
        let i = match self.synced_index.get(mask) {
            Some(&i) => i,
            None => {
                let i = self.synced.len() as u32;
                self.synced.push(mask.clone());
                self.synced_index.insert(mask.clone(), i);
                i
            }
        };
        self.last_synced = Some(i);
        i
    }

    /// A slot of an object.
    pub fn slot(&self, object: InternalIndex, index: u8) -> Option<BaselineSlot<'_>> {
        let slot = self.get(object)?.slots.get(index as usize)?;
        slot.is_live().then(|| BaselineSlot {
            snapshot: slot.snapshot,
            synced: &self.synced[slot.synced as usize],
            prior: (slot.prior != NO_SNAPSHOT).then_some(slot.prior),
        })
    }

    /// Remembers the slot a delta batch of `object` referenced.
    pub fn note_reference(&mut self, object: InternalIndex, index: u8) {
        self.get_mut(object).last_reference = index;
    }

    /// The slot a full-path nomination of `object` uses: the one its last delta batch
    /// did not reference (0 for an object never delta-encoded).
    pub fn full_path_slot(&self, object: InternalIndex) -> u8 {
        match self.get(object).map(|o| o.last_reference) {
            Some(k) if k < MAX_BASELINE_COUNT => (k + 1) % MAX_BASELINE_COUNT,
            _ => 0,
        }
    }

    /// Forgets an object (it leaves the remote): the next nomination starts at slot 0.
    pub fn forget(&mut self, object: InternalIndex) {
        if let Some(o) = self.objects.get_mut(object as usize) {
            o.last_reference = INVALID_BASELINE_INDEX;
        }
    }

    /// Number of live slots of an object (at most 2).
    pub fn count(&self, object: InternalIndex) -> usize {
        self.get(object).map_or(0, ObjectBaselines::live)
    }

    /// Whether this connection may nominate a new baseline of `object` in this packet
    /// without the frame throttle: its first baseline, or
    /// [`DeltaSettings::baseline_every_packet`] and no lost nomination since the last
    /// acknowledged one.
    pub fn unthrottled(&self, object: InternalIndex, settings: &DeltaSettings) -> bool {
        match self.get(object) {
            None => true,
            Some(o) => o.live() == 0 || (settings.baseline_every_packet && !o.lost),
        }
    }

    /// Whether the last nomination of `object` was acknowledged and none is in flight
    /// (its acknowledged baseline is then the newest the client stored).
    pub fn is_last_nomination_acked(&self, object: InternalIndex) -> bool {
        self.get(object)
            .is_some_and(|o| o.pending == INVALID_BASELINE_INDEX && !o.lost)
    }

    /// The slot a packet in flight nominated for `object`, if any.
    pub fn pending(&self, object: InternalIndex) -> Option<u8> {
        self.get(object)
            .map(|o| o.pending)
            .filter(|&p| p < MAX_BASELINE_COUNT)
    }

    /// Total live slots over all objects.
    pub fn total(&self) -> usize {
        self.objects.iter().map(ObjectBaselines::live).sum()
    }

    /// Stores a new baseline of `snapshot` (on which the caller holds a reference) in
    /// slot `index`, nominated by the packet with `ordinal`; it holds `synced` in sync
    /// and was built from the snapshot `prior` (a reference is taken on it).
    #[allow(clippy::too_many_arguments)]
    pub fn nominate(
        &mut self,
        storage: &mut BaselineStorage,
        object: InternalIndex,
        index: u8,
        snapshot: u32,
        synced: &ChangeMask,
        prior: Option<u32>,
        ordinal: u64,
    ) {
        if index >= MAX_BASELINE_COUNT {
            storage.release(snapshot);
            return;
        }
        let synced = self.intern(synced);
        if let Some(p) = prior {
            storage.add_ref(p);
        }
        let o = self.get_mut(object);
        let old = std::mem::replace(
            &mut o.slots[index as usize],
            Slot {
                snapshot,
                prior: prior.unwrap_or(NO_SNAPSHOT),
                synced,
            },
        );
        o.pending = index;
        o.pending_ordinal = ordinal as u32;
        release(storage, old);
    }

    /// Releases one slot; returns its synced mask.
    pub fn release_slot(
        &mut self,
        storage: &mut BaselineStorage,
        object: InternalIndex,
        index: u8,
    ) -> Option<ChangeMask> {
        let o = self.objects.get_mut(object as usize)?;
        let slot = o.slots.get_mut(index as usize)?;
        if !slot.is_live() {
            return None;
        }
        let old = std::mem::replace(slot, EMPTY_SLOT);
        release(storage, old);
        Some(self.synced[old.synced as usize].clone())
    }

    /// Releases every slot of an object (the pending nomination is forgotten, so its
    /// packet's fate changes nothing); returns the members its baselines held in sync,
    /// merged (owed again: the next batch takes the full path).
    pub fn release_object(
        &mut self,
        storage: &mut BaselineStorage,
        object: InternalIndex,
    ) -> Option<ChangeMask> {
        let o = self.objects.get_mut(object as usize)?;
        let slots = o.slots;
        let last_reference = o.last_reference;
        *o = ObjectBaselines {
            last_reference,
            ..EMPTY
        };
        let mut merged: Option<ChangeMask> = None;
        for slot in slots.into_iter().filter(Slot::is_live) {
            release(storage, slot);
            let synced = &self.synced[slot.synced as usize];
            match merged.as_mut() {
                Some(m) => m.or_with(synced),
                None => merged = Some(synced.clone()),
            }
        }
        merged
    }

    /// Releases everything (the connection goes away).
    pub fn release_all(&mut self, storage: &mut BaselineStorage) {
        for o in std::mem::take(&mut self.objects) {
            for slot in o.slots {
                release(storage, slot);
            }
        }
    }

    /// The fate of the packet with `ordinal` for one object: an ack promotes its
    /// nomination (destroying the previously acknowledged slot `acked`), a loss or a
    /// discard releases it.
    pub fn on_delivery(
        &mut self,
        storage: &mut BaselineStorage,
        object: InternalIndex,
        ordinal: u64,
        acked: u8,
        status: DeliveryStatus,
    ) -> BaselineOutcome {
        let Some(o) = self.objects.get_mut(object as usize) else {
            return BaselineOutcome::None;
        };
        let index = o.pending;
        if index >= MAX_BASELINE_COUNT || o.pending_ordinal != ordinal as u32 {
            return BaselineOutcome::None;
        }
        o.pending = INVALID_BASELINE_INDEX;
        o.lost = matches!(status, DeliveryStatus::Lost);
        match status {
            DeliveryStatus::Delivered => {
                if acked < MAX_BASELINE_COUNT && acked != index {
                    let old = std::mem::replace(&mut o.slots[acked as usize], EMPTY_SLOT);
                    release(storage, old);
                }
                if o.slots[index as usize].is_live() {
                    BaselineOutcome::Promoted(index)
                } else {
                    BaselineOutcome::None
                }
            }
            DeliveryStatus::Lost | DeliveryStatus::Discard => {
                match self.release_slot(storage, object, index) {
                    Some(_) => BaselineOutcome::Lost,
                    None => BaselineOutcome::None,
                }
            }
        }
    }
}

/// Drops a slot's references (its snapshot and its prior).
fn release(storage: &mut BaselineStorage, slot: Slot) {
    if slot.is_live() {
        storage.release(slot.snapshot);
        if slot.prior != NO_SNAPSHOT {
            storage.release(slot.prior);
        }
    }
}

/// Whether every bit of `a` is set in `b`.
pub(crate) fn is_subset(a: &ChangeMask, b: &ChangeMask) -> bool {
    let b = b.words();
    a.words()
        .iter()
        .enumerate()
        .all(|(i, &w)| w & !b.get(i).copied().unwrap_or(0) == 0)
}

/// The constant-velocity prediction of the members in `mask` from two states of the
/// same object, `b` (the newer) and `prior`: each residual-coded member's components
/// continue the step they took from `prior` to `b`, `steps` times
/// (`b + steps · (b − prior)`, wrapping in the component's width); other members
/// predict `b`. `None` when it cannot be made (a predicted component leaves its range,
/// or the states differ in type).
///
/// It runs the members' own delta code: `b` written against `prior` gives the
/// residuals `b − prior` (or, for a member that takes the escape, its full value),
/// and reading those bits back against `b` adds them to `b` (`steps` times). So every serializer's
/// notion of a step (wrapping angles, smallest-three components) is respected, both
/// ends compute bit-identical predictions from bit-identical baselines, and members
/// that do not use the residual code (strings, containers, enums) predict no change.
pub fn extrapolate(
    b: &dyn ErasedState,
    prior: &dyn ErasedState,
    mask: &ChangeMask,
    steps: u32,
) -> Option<Box<dyn ErasedState>> {
    if !std::ptr::eq(b.type_descriptor(), prior.type_descriptor()) {
        return None;
    }
    // The residuals go through a scratch writer kept per thread (a prediction is made
    // once per object and tick on the server, once per predicted batch on the client).
    let (bytes, bits) = PREDICTION_SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (w, origin) = cell.get_or_insert_with(|| {
            let w = BitWriter::with_capacity_bits(PREDICTION_SCRATCH_BITS);
            let origin = w.mark();
            (w, origin)
        });
        w.rollback(*origin);
        b.serialize_delta(prior, mask, w);
        if w.is_overflown() {
            return None;
        }
        Some((w.to_bytes(), w.position()))
    })?;
    let mut out = b.clone_box();
    for _ in 0..steps.clamp(1, MAX_PREDICTION_STEPS) {
        let mut r = BitReader::with_bit_len(&bytes, bits);
        let mut next = out.clone_box();
        next.deserialize_delta(out.as_ref(), mask, &mut r).ok()?;
        next.validate(mask).ok()?;
        out = next;
    }
    Some(out)
}

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

/// The most bits of residuals a prediction may take (larger states predict nothing).
const PREDICTION_SCRATCH_BITS: usize = 1 << 16;

thread_local! {
    static PREDICTION_SCRATCH: std::cell::RefCell<Option<(BitWriter, crate::bits::WriterMark)>> =
        const { std::cell::RefCell::new(None) };
}

/// What the writer decided for one delta batch.
pub(crate) struct DeltaPlan {
    /// The acknowledged slot and its (committed) snapshot (delta path), or none (full
    /// path).
    pub reference: Option<(u8, u32)>,
    /// On the delta path, when the acknowledged slot has a prior: `Some((steps,
    /// prediction))` to code against it, `Some(None)` to code against the slot (the
    /// batch says which, see the module docs); `None` without a prior (no code).
    pub predicted: Option<Option<(u32, Arc<dyn ErasedState>)>>,
    /// The slot to nominate.
    pub nominate: Option<u8>,
    /// The members allowed to this connection now (the new baseline's synced set).
    pub allowed: ChangeMask,
    /// The type's default state (full path only).
    pub default: Option<Arc<dyn ErasedState>>,
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
    /// The reference's snapshot (the prior of a baseline this batch nominates).
    pub(crate) fn reference_snapshot(&self) -> Option<u32> {
        self.reference.map(|(_, snapshot)| snapshot)
    }

    /// The state the members are coded against (the prediction, the reference or the
    /// type's default state), or none (coded in full).
    pub(crate) fn against<'a>(
        &'a self,
        st: &'a BaselineStorage,
    ) -> Option<&'a Arc<dyn ErasedState>> {
        match self.reference {
            Some((_, snapshot)) => match &self.predicted {
                Some(Some((_, predicted))) => Some(predicted),
                _ => st.state_arc(snapshot),
            },
            None if self.vs_default => self.default.as_ref(),
            None => None,
        }
    }

    /// The segment this plan codes (what decides its bits besides the state and the
    /// mask), named without touching any state.
    pub(crate) fn segment(&self, st: &BaselineStorage) -> SegmentKind {
        self.against(st)
            .map_or(SegmentKind::Full, |a| SegmentKind::Against(address(a)))
    }

    /// The batch head this plan writes (see `wire`).
    pub(crate) fn head(&self) -> BatchHead {
        match self.reference {
            Some((reference, _)) => BatchHead::Reference {
                reference: (!self.newest).then_some(reference),
                nominate: self.nominate.is_some(),
                prediction: self
                    .predicted
                    .as_ref()
                    .map(|p| p.as_ref().map(|(steps, _)| *steps)),
            },
            None => BatchHead::Fresh {
                created: self.nominate.unwrap_or(INVALID_BASELINE_INDEX),
                vs_default: self.vs_default,
            },
        }
    }

    /// Writes the members of the segment [`segment`](Self::segment) names; returns
    /// their bits.
    pub(crate) fn write_segment(
        &self,
        st: &BaselineStorage,
        state: &dyn ErasedState,
        mask: &ChangeMask,
        w: &mut BitWriter,
    ) -> usize {
        let start = w.position();
        match self.against(st) {
            Some(against) => state.serialize_delta(against.as_ref(), mask, w),
            // Only on the full path without the default state: the writer plans a
            // reference only when its snapshot is committed.
            None => state.serialize(mask, w),
        }
        w.position() - start
    }
}

/// A stored baseline on the client: the state, the sequence of the packet that stored
/// it, and the baseline it was built from (delta path) for predictions.
type StoredBaseline = (Box<dyn ErasedState>, u64, Option<Box<dyn ErasedState>>);

/// The client's stored baselines of one object (quantized snapshots, with the
/// sequence of the packet that stored each and, for baselines built on the delta path,
/// the acknowledged baseline they were built from).
#[derive(Debug, Default)]
pub struct ReceiverBaselines {
    slots: [Option<StoredBaseline>; 2],
}

impl ReceiverBaselines {
    /// A stored baseline.
    pub fn get(&self, index: u8) -> Option<&dyn ErasedState> {
        self.slots
            .get(index as usize)?
            .as_ref()
            .map(|(s, _, _)| s.as_ref())
    }

    /// The baseline a stored one was built from, if it was built on the delta path.
    pub fn prior(&self, index: u8) -> Option<&dyn ErasedState> {
        self.slots.get(index as usize)?.as_ref()?.2.as_deref()
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
            None => self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(k, s)| s.as_ref().map(|s| (s.1, k as u8)))
                .max()
                .map(|(_, k)| k),
        }
    }

    /// Number of stored baselines.
    pub fn count(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    fn store(&mut self, index: u8, stored: NewBaseline, seq: u64) {
        if let Some(slot) = self.slots.get_mut(index as usize)
            && slot.as_ref().is_none_or(|(_, s, _)| *s < seq)
        {
            *slot = Some((stored.0, seq, stored.1));
        }
    }
}

/// A baseline to store: the state and the baseline it was built from.
pub(crate) type NewBaseline = (Box<dyn ErasedState>, Option<Box<dyn ErasedState>>);

/// A decoded delta batch body (client side).
pub(crate) struct DeltaBody {
    /// The members carried.
    pub mask: ChangeMask,
    /// The live state with the members applied (from `live`, or from the default
    /// state for a new object).
    pub state: Box<dyn ErasedState>,
    /// A baseline to store: (slot, (reference + the batch's members, the reference)).
    pub store: Option<(u8, NewBaseline)>,
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
            let slot = baselines
                .and_then(|b| b.slots.get(index as usize))
                .and_then(Option::as_ref)
                .ok_or(ObjectReadError::MissingBaseline(index))?;
            if slot.1 > seq {
                return Ok(None);
            }
            let reference = slot.0.as_ref();
            // With a prior, the head's code says whether (and over how many steps) the
            // members are coded against the prediction from the two baselines.
            let predicted = match (slot.2.as_deref(), prediction) {
                (Some(prior), Some(Some(steps))) => {
                    Some(extrapolate(reference, prior, &mask, steps).ok_or(
                        ObjectReadError::Decode(SerializeError::invalid(
                            "baseline prediction",
                            "the prediction the batch is coded against cannot be made",
                        )),
                    )?)
                }
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
            let store = if nominate {
                let mut again = start;
                let mut b = reference.clone_box();
                b.deserialize_delta(against, &mask, &mut again)?;
                Some((
                    (index + 1) % MAX_BASELINE_COUNT,
                    (b, Some(reference.clone_box())),
                ))
            } else {
                None
            };
            Ok(Some(DeltaBody { mask, state, store }))
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
            let store = if created < MAX_BASELINE_COUNT {
                let mut again = start;
                let mut b = default.clone_box();
                if vs_default {
                    b.deserialize_delta(default.as_ref(), &mask, &mut again)?;
                } else {
                    b.deserialize(&mask, &mut again)?;
                }
                Some((created, (b, None)))
            } else {
                None
            };
            Ok(Some(DeltaBody { mask, state, store }))
        }
    }
}

/// Stores a decoded body's new baseline.
pub(crate) fn store_baseline(
    baselines: &mut ReceiverBaselines,
    store: Option<(u8, NewBaseline)>,
    seq: u64,
) {
    if let Some((index, stored)) = store {
        baselines.store(index, stored, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn lost_nomination_is_released_and_ack_promotes() {
        let mut s = BaselineStorage::new(DeltaSettings::default());
        let mut c = ConnectionBaselines::default();
        let h = NetRefHandle::new(9, false, 0);
        let all = ChangeMask::all(4);
        let snap = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 0, snap, &all, None, 5);
        assert_eq!(
            c.on_delivery(&mut s, 1, 4, 2, DeliveryStatus::Lost),
            BaselineOutcome::None,
            "another packet"
        );
        assert_eq!(
            c.on_delivery(&mut s, 1, 5, 2, DeliveryStatus::Lost),
            BaselineOutcome::Lost
        );
        assert_eq!(c.count(1), 0);
        assert_eq!(s.ref_count(snap), 1, "only the reservation is left");
        let snap = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 0, snap, &all, None, 6);
        assert_eq!(
            c.on_delivery(&mut s, 1, 6, 2, DeliveryStatus::Delivered),
            BaselineOutcome::Promoted(0)
        );
        s.begin_frame();
        // Built from the acknowledged one: it holds a reference on its prior.
        let snap2 = s.create_baseline(1, h, true).unwrap();
        c.nominate(&mut s, 1, 1, snap2, &all, Some(snap), 7);
        assert_eq!(c.count(1), 2);
        assert_eq!(c.slot(1, 1).unwrap().prior, Some(snap));
        assert_eq!(s.ref_count(snap), 3, "reservation, slot 0, prior of slot 1");
        assert_eq!(
            c.on_delivery(&mut s, 1, 7, 0, DeliveryStatus::Delivered),
            BaselineOutcome::Promoted(1)
        );
        assert_eq!(c.count(1), 1, "the previous acked baseline is destroyed");
        assert!(c.slot(1, 1).is_some());
        assert_eq!(s.ref_count(snap), 2, "still the prior of slot 1");
        // Releasing the object drops both the slot and its prior.
        assert_eq!(c.release_object(&mut s, 1), Some(all));
        assert_eq!(s.ref_count(snap), 1);
        assert_eq!(s.ref_count(snap2), 1);
    }

    #[test]
    fn a_connection_keeps_32_bytes_per_object() {
        assert_eq!(std::mem::size_of::<ObjectBaselines>(), 32);
    }
}
