//! The client's side: [`ReceiverBaselines`], the baselines a reader keeps per object,
//! and the decoding of a delta batch against them.

use super::*;

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
pub(super) fn shared_copy<E>(
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
