//! [`DeltaPlan`]: what the writer decided for one delta batch — the reference it
//! codes against (an acknowledged baseline, its prediction, or none), the slot it
//! nominates, and the segment kind that names the encoding for sharing.

use super::*;

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
    pub(super) state: Arc<dyn ErasedState>,
    pub(super) prior: Option<Arc<dyn ErasedState>>,
    pub(super) prior2: Option<Arc<dyn ErasedState>>,
}
