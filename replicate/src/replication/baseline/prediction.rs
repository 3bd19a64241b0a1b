//! Prediction from baselines: the linear and quadratic extrapolations both ends
//! compute bit for bit ([`extrapolate`]), the predictions cached per snapshot and
//! frame, and the samples that decide per type whether prediction pays
//! ([`BaselineStorage::learn_predictions`]).

use super::*;

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
pub(super) struct PredictionSample {
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
    pub(super) fn chosen(&self, r: PredictionRef) -> Option<&Arc<dyn ErasedState>> {
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
pub(super) const QUADRATIC_MIN_INTERVAL: u32 = 2;

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

/// Prediction: what the storage decides and caches per type, lineage and snapshot.
impl BaselineStorage {
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
}
