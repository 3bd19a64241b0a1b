//! The writer's plan stage: which members a batch carries to this connection and what
//! it codes them against (the acknowledged baseline, its prediction, the default
//! state), and whether it nominates a new baseline — decided per (object, connection)
//! from snapshot ids, without touching any state on the common path.

use super::ReplicationWriter;
use crate::object::{InternalIndex, ObjectTable};
use crate::replication::baseline::{
    BaselineStorage, DeltaPlan, MAX_BASELINE_COUNT, is_subset, prediction_steps,
};
use crate::replication::record::INVALID_BASELINE_INDEX;
use crate::state::{ChangeMask, Condition};

impl ReplicationWriter {
    /// Whether an owner change altered which conditional members this connection
    /// receives, compared with what its baselines hold in sync.
    pub(super) fn owner_change_affects_baselines(
        &self,
        table: &ObjectTable,
        index: InternalIndex,
    ) -> bool {
        let Some(entry) = table.entry_at(index) else {
            return false;
        };
        let desc = entry.descriptor();
        let mut cond_bits = ChangeMask::new(desc.change_mask_bits);
        for (c, m) in &desc.condition_masks {
            if !matches!(
                c,
                Condition::InitialOnly | Condition::Never | Condition::Custom
            ) {
                cond_bits.or_with(m);
            }
        }
        let mut allowed = ChangeMask::all(desc.change_mask_bits);
        let is_owner = entry.owner_connection() == Some(self.connection);
        desc.restrict_to_role(
            &mut allowed,
            crate::state::ConditionContext {
                is_owner,
                is_autonomous: is_owner && entry.is_autonomous(),
                is_initial: false,
            },
        );
        allowed.and_with(&cond_bits);
        (0..MAX_BASELINE_COUNT).any(|k| {
            self.baselines.slot(index, k).is_some_and(|slot| {
                let mut synced = slot.synced.clone();
                synced.and_with(&cond_bits);
                synced != allowed
            })
        })
    }

    /// Decides the delta encoding of a batch (None: written without delta compression)
    /// and adds to `mask` what a nominated baseline needs.
    pub(super) fn plan_delta(
        &mut self,
        st: &mut BaselineStorage,
        table: &ObjectTable,
        index: InternalIndex,
        creating: bool,
        is_owner: bool,
        mask: &mut ChangeMask,
    ) -> Option<DeltaPlan> {
        let entry = table.entry_at(index)?;
        let desc = entry.descriptor();
        let new_state = table.registry().get(entry.protocol())?.new_state;
        if !st.is_enabled(entry.protocol(), desc.delta_compression) {
            return None;
        }
        let mut allowed = ChangeMask::all(desc.change_mask_bits);
        self.restrict_members(table, index, creating, is_owner, &mut allowed);
        let acked = self.infos[index as usize].last_acked_baseline();
        // The reference and its prior, by snapshot: no state is touched here.
        let mut reference: Option<(u8, u32)> = None;
        let mut prior = None;
        if acked < MAX_BASELINE_COUNT {
            match self.baselines.slot(index, acked) {
                Some(slot) if is_subset(&allowed, slot.synced) => {
                    reference = st
                        .state_address(slot.snapshot)
                        .map(|_| (acked, slot.snapshot));
                    prior = reference
                        .and(slot.prior)
                        .filter(|&p| st.state_address(p).is_some());
                }
                Some(_) => {
                    // A member the client's baseline does not hold is now allowed.
                    if let Some(mut merged) = self.baselines.release_object(st, index) {
                        merged.and_with(&allowed);
                        mask.or_with(&merged);
                    }
                }
                None => {}
            }
            if reference.is_none() {
                self.infos[index as usize]
                    .set_baselines(INVALID_BASELINE_INDEX, INVALID_BASELINE_INDEX);
            }
        }
        // Decided before this batch's own nomination: the client's newest baseline is
        // the reference when nothing was nominated since.
        let newest = reference.is_some() && self.baselines.is_last_nomination_acked(index);
        let slot = match &reference {
            Some((k, _)) => {
                self.baselines.note_reference(index, *k);
                (k + 1) % MAX_BASELINE_COUNT
            }
            None => self.baselines.full_path_slot(index),
        };
        // A new baseline in every packet while acknowledgements flow (one in flight
        // at a time); after a lost nomination, the frame throttle.
        let unthrottled = self.baselines.unthrottled(index, st.settings());
        let nominate = (self.baselines.pending(index).is_none()
            && st.may_create(index, entry.handle(), unthrottled))
        .then_some(slot);
        let default = reference
            .is_none()
            .then(|| st.default_state(entry.protocol(), new_state));
        st.count_batch(reference.is_some());
        if nominate.is_some() {
            // The client builds the new baseline from the reference and this batch:
            // carry every allowed member that differs from the reference. The
            // difference is the same for every connection with that reference: found
            // once per tick.
            let against = match (reference, &default) {
                (Some((_, snapshot)), _) => st.state_arc(snapshot),
                (None, Some(default)) => Some(default),
                (None, None) => None,
            };
            if let Some(against) = against {
                let mut d = self
                    .segments
                    .difference(index, entry.handle(), against, |against| {
                        let mut d = ChangeMask::new(desc.change_mask_bits);
                        entry.state().diff(against, &mut d);
                        d
                    });
                d.and_with(&allowed);
                mask.or_with(&d);
            }
        }
        // With two acknowledged baselines (the reference and the one it was built
        // from), code against their constant-velocity prediction where the type wants
        // it; the batch says which in one bit.
        let predicted = match (reference, prior) {
            (Some((_, snapshot)), Some(prior)) => {
                Some(if st.is_prediction_enabled(entry.protocol()) {
                    let prior_frame = st.snapshot_frame(prior).unwrap_or(0);
                    let frame = st.snapshot_frame(snapshot).unwrap_or(prior_frame);
                    let steps = prediction_steps(prior_frame, frame, st.frame());
                    st.prediction(snapshot, prior, mask, steps)
                        .map(|p| (steps, p))
                } else {
                    None
                })
            }
            _ => None,
        };
        Some(DeltaPlan {
            reference,
            predicted,
            nominate,
            allowed,
            default,
            vs_default: st.settings().compress_initial_state,
            newest,
        })
    }
}
