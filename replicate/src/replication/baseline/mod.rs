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
//! Its parts:
//! - `storage`, [`BaselineStorage`]: the server's snapshots, shared by every
//!   connection through a [`SharedBaselineStorage`]. A snapshot created in a frame is *reserved* (no copy),
//!   every connection that takes it in the same frame adds a reference, and at the end
//!   of the write pass the reservation is *committed* (cloned exactly once, into the
//!   state of a snapshot released in the same frame when there is one) if someone
//!   kept it, or *cancelled* (never copied) if nobody did. It also owns the per-object
//!   creation throttle (`min_frames_between_baselines`, a connection's first baseline is
//!   always allowed), the per-type switches, the types' default states and the
//!   predictions made from each snapshot. A baseline's snapshot and its priors are
//!   held once as a *lineage*, shared by every connection that nominated the same
//!   snapshot from the same priors; connections hold lineage indices.
//! - `connection`, [`ConnectionBaselines`]: one connection's baselines. Per object, 8
//!   bytes stored densely by object index: the acknowledged baseline (its lineage in the storage,
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
//! - `receiver`, [`ReceiverBaselines`] and the client-side decoding of a delta batch.
//! - `prediction`: the predictions made from baselines (see below), and `plan`: what
//!   the writer decides for one delta batch.
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

mod connection;
mod plan;
mod prediction;
mod receiver;
mod storage;

pub use connection::*;
pub(crate) use plan::*;
pub use prediction::*;
pub use receiver::*;
pub use storage::*;

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
