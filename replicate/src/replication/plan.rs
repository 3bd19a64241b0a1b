//! The writer's plan stage: which members a batch carries to this connection and what
//! it codes them against (the acknowledged baseline, its prediction, the default
//! state), and whether it nominates a new baseline — decided per (object, connection)
//! from snapshot ids, without touching any state on the common path.

use super::ReplicationWriter;
use crate::object::{InternalIndex, ObjectTable};
use crate::replication::baseline::{BaselineStorage, DeltaPlan, PRIOR_NOT_KEPT, is_subset};
use crate::state::{ChangeMask, Condition};

/// Where an object's creation stands for a connection when a batch is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CreationStage {
    /// This batch carries the creation.
    Writing,
    /// The creation is in flight: this batch is an update the client skips if the
    /// creation was lost.
    InFlight,
    /// The client has the object.
    Confirmed,
}

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
        self.baselines.synced_masks(index).any(|synced| {
            let mut synced = synced.clone();
            synced.and_with(&cond_bits);
            synced != allowed
        })
    }

    /// Decides the delta encoding of a batch (None: written without delta compression)
    /// and adds to `mask` what a nominated baseline needs; `allowed` holds the members
    /// the connection may receive now.
    pub(super) fn plan_delta(
        &mut self,
        st: &BaselineStorage,
        table: &ObjectTable,
        index: InternalIndex,
        creation: CreationStage,
        allowed: ChangeMask,
        mask: &mut ChangeMask,
    ) -> Option<DeltaPlan> {
        let entry = table.entry_at(index)?;
        let desc = entry.descriptor();
        let new_state = table.registry().get(entry.protocol())?.new_state;
        if !st.is_enabled(entry.protocol(), desc.delta_compression) {
            return None;
        }
        // The reference and its prior, by snapshot (a prediction reads the prior's
        // prior from the lineage): no state is touched here.
        let mut reference: Option<(u8, u32)> = None;
        let mut prior = None;
        // The reference's lineage (its snapshot and priors in the storage).
        let mut lineage = None;
        if creation == CreationStage::InFlight {
            // The creation is in flight: code against the baseline it nominated, and
            // nominate nothing (the client may not know the object, see `wire`). Not
            // after a creation counted lost: the client may know the object from it,
            // without the baseline of the one in flight.
            reference = (!self.sends.infos[index as usize].is_creation_resent())
                .then(|| self.baselines.creation(st, index))
                .flatten()
                .filter(|(_, b)| {
                    st.state_address(b.snapshot).is_some() && is_subset(&allowed, b.synced)
                })
                .map(|(k, b)| (k, b.snapshot));
            let default = reference
                .is_none()
                .then(|| self.cache.states.default_state(entry.protocol(), new_state));
            self.cache.count_batch(reference.is_some());
            return Some(DeltaPlan {
                reference,
                predicted: None,
                priors: (None, None),
                nominate: None,
                allowed,
                default,
                vs_default: st.settings().compress_initial_state,
                newest: false,
            });
        }
        // The object's baselines, read once.
        let mut words = self.baselines.object(index);
        match self.baselines.acked_of(st, words) {
            Some((acked, slot)) if is_subset(&allowed, slot.synced) => {
                reference = st
                    .state_address(slot.snapshot)
                    .map(|_| (acked, slot.snapshot));
                // (A prior the storage did not keep is the client's still: the batch
                // carries the prediction code, saying it was not predicted.)
                prior = reference
                    .and(slot.prior)
                    .filter(|&p| p == PRIOR_NOT_KEPT || st.state_address(p).is_some());
                lineage = Some(slot.lineage);
            }
            Some(_) => {
                // (Read from the nominations in flight, which a trace does not compare.)
                self.trace.spoil();
                // A member the client's baseline does not hold is now allowed.
                if let Some(mut merged) = self.baselines.synced_union(index) {
                    merged.and_with(&allowed);
                    mask.or_with(&merged);
                }
                self.baselines.release_object_later(index);
                words = self.baselines.object(index);
            }
            None => {}
        }
        // Decided before this batch's own nomination: the client's newest baseline is
        // the reference when nothing was nominated since.
        let newest = reference.is_some() && words.is_last_nomination_acked();
        // A new baseline in every packet while a slot is free (the nominations in
        // flight cover the round trip); without `baseline_every_packet`, the frame
        // throttle.
        let unthrottled = words.unthrottled(st.settings());
        let nominate = words
            .free_slot(self.packet_ordinal())
            .filter(|_| self.baselines.can_sync(&allowed))
            .filter(|_| st.may_create(index, entry.handle(), unthrottled));
        let default = reference
            .is_none()
            .then(|| self.cache.states.default_state(entry.protocol(), new_state));
        self.cache.count_batch(reference.is_some());
        if nominate.is_some() {
            // The client builds the new baseline from the reference and this batch:
            // carry every allowed member that differs from the reference. The
            // difference is the same for every connection with that reference: found
            // once per tick.
            let against = match (reference, default) {
                (Some((_, snapshot)), _) => st.state_arc(snapshot),
                (None, Some(protocol)) => self.cache.states.default_of(protocol),
                (None, None) => None,
            };
            if let Some(against) = against {
                let mut d =
                    self.cache
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
        // from, and maybe that one's), code against their prediction where the type
        // wants it; the batch says which.
        let predicted = match (lineage, prior) {
            (Some(lineage), Some(_)) => {
                let (protocol, cache) = (entry.protocol(), &mut self.cache.states.predictions);
                Some(if st.is_prediction_enabled(protocol) {
                    st.best_prediction(cache, protocol, lineage, mask, entry.state())
                } else {
                    st.sample_unpredicted(cache, protocol, lineage, mask, entry.state());
                    None
                })
            }
            _ => None,
        };
        // A baseline this batch nominates is built from the reference and its prior,
        // kept where they may be read.
        let priors = match reference {
            Some((_, snapshot)) if st.keeps_priors(entry.protocol(), index) => {
                (Some(snapshot), prior.filter(|&p| p != PRIOR_NOT_KEPT))
            }
            Some(_) => (Some(PRIOR_NOT_KEPT), None),
            None => (None, None),
        };
        Some(DeltaPlan {
            reference,
            predicted,
            priors,
            nominate,
            allowed,
            default,
            vs_default: st.settings().compress_initial_state,
            newest,
        })
    }
}
