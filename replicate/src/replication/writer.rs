//! [`ReplicationWriter`]: the sending half of the replication stream, one per
//! connection (Iris's `FReplicationWriter`).
//!
//! Per object it keeps an 8-byte [`ReplicationInfo`] (lifecycle state + accumulated
//! change mask) and a scheduling priority: its send states, one copy shared by the
//! connections in step (see `group`). Each tick it takes the object table's changes
//! (only the objects that changed: cost follows dirty data); each packet it writes
//! pending destroys first, then the scheduled objects in priority order, each as a
//! batch, and keeps a [`PacketRecord`] of what went out. The order is
//! scheduled once per tick and continued by the tick's later packets (see
//! `scheduler::Schedule`); anything that could change it between two
//! packets (an object owed anew, a loss, a priority change) makes the next packet
//! schedule afresh. Before it writes a run of scheduled objects, the writer reads
//! their send states, baseline words, lineages and snapshots ahead, level by level
//! (`read_ahead`), so a large world's cache misses overlap. When the packet's
//! fate is known it confirms creations and destroys (delivered), ORs the recorded change
//! masks back and bumps the priority (lost: the *current* values are sent again), or
//! just drops the record (discarded).
//!
//! Batches are written object-major in what they share: a batch is a per-connection
//! frame (object index, form, head, change mask) around a *segment* (the members) that
//! depends only on the object's state, the mask and what it is coded against. Each
//! segment is encoded once per tick and copied a word at a time into every other
//! connection's packet that needs the same one (see `encode`); the delta plan names its
//! reference and prior by snapshot id and touches no state on that path. Whole objects
//! sections are shared too: in a write pass, a connection in step with one written
//! before it (same budget, dirty set, schedule and per-object state) takes that
//! connection's section, its bits and its state changes, instead of writing its own
//! (see `replay`; `follow` records and takes the traces). The stages of
//! one batch live in submodules: `plan` (what the batch carries and codes against),
//! `body` (frame and encode), `local` (the connection-local object indices), and this
//! module (schedule, write, record); `delivery` settles a packet's fate, `lifecycle`
//! takes the tick's changes and starts, stops and rescopes objects, and `huge` sends
//! objects too large for a packet.
//!
//! Wire format of the stream section (the objects section and a batch are in `wire`):
//!
//! ```text
//! destroys: ([1][handle])* [0]
//! objects:  [index width: 5] ([1][object index][batch][exports if has_exports])* [0]
//! exports:  the net token exports the batch references that the peer has not acked
//!           (see `stream::tokens`), placed after a long-form body and read first
//! ```
//!
//! Until its creation is confirmed an object's batches carry the creation and the full
//! state, so whichever arrives first creates a complete object. Conditions (`init`,
//! `OwnerOnly`, ...) are applied per connection when a batch is written.

use super::ReplicationConfig;
use super::baseline::{
    BaselineStorage, ConnectionBaselines, DeltaPlan, ObjectWords, SharedBaselineStorage,
    read_storage, write_storage,
};
use super::encode::TickCache;
use super::group::{InfoTable, JoinWait, SendStates, SharedSendStates};
use super::insights::{BatchLayout, WriterAttribution};
pub use super::record::{FramingBits, TypeTraffic, WriterStats};
use super::record::{
    INVALID_BASELINE_INDEX, PacketRecord, RecordInfo, RecordKind, ReplicatedObjectState as S,
    ReplicationInfo,
};
use super::scheduler::{EntryFate, Schedule, ScheduledObject};
use super::wire::{SectionFrame, WIDE_BATCH_SIZE};
use crate::bits::BitWriter;
use crate::connection::DeliveryStatus;
use crate::handle::NetRefHandle;
use crate::object::{ConnectionId, InternalIndex, ObjectEntry, ObjectTable};
use crate::read_ahead::READ_AHEAD;
use crate::serialize::BitArray;
use crate::state::{ChangeMask, StateDescriptor};
use crate::stream::tokens::SharedExports;
use crate::stream::{DataStream, StreamError, WriteResult};
use std::collections::VecDeque;
use std::sync::Arc;

#[path = "body.rs"]
mod body;
#[path = "delivery.rs"]
mod delivery;
#[path = "follow.rs"]
mod follow;
#[path = "huge.rs"]
pub mod huge;
#[path = "lifecycle.rs"]
mod lifecycle;
#[path = "local.rs"]
mod local;
#[path = "plan.rs"]
mod plan;
use plan::CreationStage;

use body::{BatchCoding, FramedBatch, encoding_of};
use local::LocalIndices;

/// The shared copies of a connection's send states and per-object baselines, held by
/// the connections of a group in step.
pub(crate) type GroupCopy = (Arc<SendStates>, Arc<ObjectWords>);

/// Whether two groups' copies hold equal states: one group can take the other's.
/// The baselines first: groups at other round trips differ there from the first
/// chunk on, while their send states may be equal throughout.
pub(crate) fn same_states((sa, wa): &GroupCopy, (sb, wb): &GroupCopy) -> bool {
    (Arc::ptr_eq(wa, wb) || **wa == **wb) && (Arc::ptr_eq(sa, sb) || **sa == **sb)
}

/// What [`ReplicationWriter::pending_bytes`] counts for an object kept alive only
/// because a connection has not confirmed its destroy: the object table entry, its
/// quantized state and the game object (about 0.9 KiB measured for a small type;
/// an estimate, not a measurement of each object).
pub const RETAINED_OBJECT_BYTES: usize = 1024;

/// How often one root is destroyed and created again on a client that reports it
/// broken; reported once more, it is no longer replicated to that client.
pub const MAX_RECOVERIES: u8 = 3;

/// Capacity of the scratch writer a batch body is written into before its size prefix
/// (one bit more than the largest non-huge body, so that a body reaching the escape
/// value is told apart from one that did not fit).
const SCRATCH_BITS: usize = WIDE_BATCH_SIZE as usize + 1;

/// Per-connection hooks the interest layer plugs into a writer: the priority an object
/// accumulates each tick it is dirty, and which members a batch may carry. Both default
/// to the built-in behaviour (the object's static priority; the descriptor's
/// conditions against the owning connection).
pub trait WriterHooks: Send {
    /// Priority added to a dirty root object's accumulated priority this tick.
    fn priority(&mut self, table: &ObjectTable, index: InternalIndex) -> f32 {
        table.priority(index)
    }

    /// [`priority`](Self::priority) of each of `objects`, pushed onto `out` in order
    /// (override to take a lock once per tick rather than once per object).
    fn priorities(&mut self, table: &ObjectTable, objects: &[InternalIndex], out: &mut Vec<f32>) {
        out.extend(objects.iter().map(|&i| self.priority(table, i)));
    }

    /// Whether, this tick, [`priority`](Self::priority) is every object's static one
    /// ([`ObjectTable::priority`]): the writer then reads those itself, without asking
    /// for them. The default, `false`, always asks.
    fn static_priorities(&self) -> bool {
        false
    }

    /// Restricts the members this connection may receive of an object, after the
    /// built-in conditions: `mask` holds the members they allow; clear the bits of
    /// those to withhold (setting bits has no effect). A batch carries the owed
    /// members the mask leaves. A member filtered out is not owed any more: when the
    /// hook allows it again, call
    /// [`ReplicationWriter::mark_members_dirty`] (or
    /// [`ReplicationServer::mark_members_dirty`](super::ReplicationServer::mark_members_dirty)).
    fn filter_members(
        &mut self,
        _table: &ObjectTable,
        _index: InternalIndex,
        _creating: bool,
        _mask: &mut ChangeMask,
    ) {
    }

    /// Whether [`filter_members`](Self::filter_members) leaves alone every object whose
    /// type has no `Custom` condition. Connections in step may then share one written
    /// objects section (written once, copied for the others); the default, `false`,
    /// has every connection write its own.
    fn filters_only_custom(&self) -> bool {
        false
    }
}

struct Hooks(Option<Box<dyn WriterHooks>>);

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Hooks(custom)"
        } else {
            "Hooks(default)"
        })
    }
}

/// Most broken-object reports read from one packet.
pub const MAX_REPORTS_PER_PACKET: usize = 1024;

enum Fit {
    Wrote,
    Nothing,
    NoRoom,
}

enum BatchError {
    DidNotFit,
    TooLarge,
}

/// One batch that went into the packet, as the record stage needs it.
struct WrittenBatch<'a> {
    index: InternalIndex,
    entry: &'a ObjectEntry,
    /// The object's state before the batch.
    state: S,
    creating: bool,
    tear_off: bool,
    send_tags: bool,
    mask: ChangeMask,
    plan: Option<DeltaPlan>,
}

/// The sending half of the replication stream for one connection.
///
/// Driven by [`ReplicationServer`](super::ReplicationServer); usable alone with an
/// [`ObjectTable`]:
///
/// ```
/// use replicate::internals::object::ObjectTable;
/// use replicate::internals::protocol::ProtocolRegistry;
/// use replicate::internals::replication::{ReplicationConfig, ReplicationWriter};
/// use replicate::bits::BitWriter;
/// use replicate::internals::stream::WriteResult;
/// use std::sync::Arc;
///
/// let mut table = ObjectTable::new(Arc::new(ProtocolRegistry::default()), 0);
/// let mut writer = ReplicationWriter::new(0, ReplicationConfig::default());
/// writer.update(&mut table);
/// let mut w = BitWriter::with_capacity_bytes(1200);
/// assert_eq!(writer.write(&table, &mut w), WriteResult::NoData);
/// ```
#[derive(Debug)]
pub struct ReplicationWriter {
    connection: ConnectionId,
    config: ReplicationConfig,
    /// Per object: send state, priority, the dirty set and wide masks; shared with
    /// the connections in step (see `group`).
    sends: SharedSendStates,
    /// The table's latest tick changes are still to be taken
    /// ([`catch_up`](Self::catch_up)).
    changes_pending: bool,
    excluded: BitArray,
    pending_destroys: Vec<InternalIndex>,
    /// The records of the packets in flight, oldest first (shared with the
    /// connections that replayed the same section).
    records: VecDeque<std::sync::Arc<PacketRecord>>,
    schedule: Schedule,
    reuse_schedule: bool,
    tracked: usize,
    stats: WriterStats,
    exports: SharedExports,
    hooks: Hooks,
    huge: huge::WriterHuge,
    storage: Option<SharedBaselineStorage>,
    baselines: ConnectionBaselines,
    records_popped: u64,
    /// Objects reported broken by the client, waiting for their destroy to be
    /// acknowledged before they are created again.
    recovering: BitArray,
    /// Roots reported broken since [`take_recovered`](Self::take_recovered).
    recovered: Vec<NetRefHandle>,
    /// Estimated heap bytes of `records` (see [`pending_bytes`](Self::pending_bytes)).
    record_bytes: usize,
    /// Entries of the last packet's record: the next one is made that large at once
    /// instead of growing entry by entry.
    record_entries: usize,
    /// Times each root was reported broken (a root reported more than
    /// [`MAX_RECOVERIES`] times leaves this connection's scope for good).
    recoveries: std::collections::HashMap<NetRefHandle, u8>,
    /// The connection-local object indices (see `wire`).
    locals: LocalIndices,
    /// The objects section being written.
    frame: SectionFrame,
    /// Network insights: where the section's bits go (off: `None`).
    attribution: Option<Box<WriterAttribution>>,
    /// The tick's encodings and predictions: this writer's own, or, while the server
    /// writes this connection's packet, the cache of the thread writing it (see
    /// `encode`).
    cache: Box<TickCache>,
    /// Scratch of [`update_dirty`](Self::update_dirty): the dirty roots and the
    /// priorities they gain.
    roots: Vec<InternalIndex>,
    added: Vec<f32>,
    /// What the write stages note while the section is recorded for replay.
    trace: follow::TraceNotes,
    /// When this connection next compares its send states, and its per-object
    /// baselines, with a leader's (see `group`).
    joins: [JoinWait; 2],
}

impl ReplicationWriter {
    /// The stream's name.
    pub const NAME: &'static str = super::wire::REPLICATION_STREAM_NAME;

    /// A writer for connection `connection` (conditions such as `OwnerOnly` compare it
    /// with objects' owning connection).
    pub fn new(connection: ConnectionId, config: ReplicationConfig) -> Self {
        Self::with_exports(connection, config, SharedExports::default())
    }

    /// A writer whose batch exports use `exports` (shared with the connection's
    /// [`TokenStream`](crate::stream::tokens::TokenStream)).
    pub fn with_exports(
        connection: ConnectionId,
        config: ReplicationConfig,
        exports: SharedExports,
    ) -> Self {
        Self {
            exports,
            hooks: Hooks(None),
            huge: huge::WriterHuge::default(),
            connection,
            config,
            sends: SharedSendStates::default(),
            changes_pending: false,
            excluded: BitArray::default(),
            pending_destroys: Vec::new(),
            records: VecDeque::new(),
            schedule: Schedule::default(),
            reuse_schedule: true,
            tracked: 0,
            stats: WriterStats::default(),
            storage: None,
            baselines: ConnectionBaselines::default(),
            records_popped: 0,
            recovering: BitArray::default(),
            recovered: Vec::new(),
            record_bytes: 0,
            record_entries: 0,
            recoveries: std::collections::HashMap::new(),
            locals: LocalIndices::default(),
            frame: SectionFrame::default(),
            attribution: None,
            cache: Box::default(),
            roots: Vec::new(),
            added: Vec::new(),
            trace: follow::TraceNotes::default(),
            joins: Default::default(),
        }
    }

    /// Enables delta compression with the server's shared baseline storage (without
    /// one, every batch is written in full).
    pub fn set_baseline_storage(&mut self, storage: SharedBaselineStorage) {
        self.storage = Some(storage);
    }

    /// This connection's baselines.
    pub fn baselines(&self) -> &ConnectionBaselines {
        &self.baselines
    }

    /// Releases this connection's baselines of an object and its subobjects, merging
    /// their change masks back into the owed mask (a condition that decides what this
    /// connection receives changed). The next batch takes the full path.
    pub fn invalidate_baselines(&mut self, table: &ObjectTable, index: InternalIndex) {
        let subs = table
            .entry_at(index)
            .map(|e| e.subobjects().to_vec())
            .unwrap_or_default();
        for j in std::iter::once(index).chain(subs) {
            if let Some(merged) = self.take_baselines(j) {
                self.mark_members_dirty(table, j, &merged);
            }
        }
    }

    /// Releases an object's baselines for this connection.
    fn drop_baselines(&mut self, index: InternalIndex) {
        if let Some(s) = &self.storage {
            self.baselines.release_object(&mut write_storage(s), index);
        }
    }

    /// Releases an object's baselines for this connection; returns the members they
    /// held in sync, merged (owed again).
    fn take_baselines(&mut self, index: InternalIndex) -> Option<ChangeMask> {
        let merged = self.baselines.synced_union(index);
        self.drop_baselines(index);
        merged
    }

    /// The ordinal of the packet being written (the count of packets written before).
    pub(super) fn packet_ordinal(&self) -> u64 {
        self.records_popped + self.records.len() as u64
    }

    /// Clears from `mask` the members this connection may not receive in a batch of
    /// `index`: the descriptor's conditions for its role, then the hooks' member filter
    /// (which can only clear bits).
    fn restrict_members(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        creating: bool,
        is_owner: bool,
        mask: &mut ChangeMask,
    ) {
        let Some(entry) = table.entry_at(index) else {
            return;
        };
        entry.descriptor().restrict_to_role(
            mask,
            crate::state::ConditionContext {
                is_owner,
                is_autonomous: is_owner && entry.is_autonomous(),
                is_initial: creating,
            },
        );
        if let Some(h) = self.hooks.0.as_mut() {
            let before = mask.clone();
            h.filter_members(table, index, creating, mask);
            mask.and_with(&before);
        }
    }

    /// Installs the interest layer's hooks (priority, member filter).
    pub fn set_hooks(&mut self, hooks: Box<dyn WriterHooks>) {
        self.hooks = Hooks(Some(hooks));
        self.schedule.invalidate();
    }

    /// Whether the packets of one tick continue the tick's schedule (default `true`)
    /// or each packet schedules and sorts every dirty root afresh (`false`: the
    /// reference behaviour, for differential tests and measurements; the packets are
    /// the same, only slower when a tick needs many packets).
    pub fn set_schedule_reuse(&mut self, reuse: bool) {
        self.reuse_schedule = reuse;
        self.schedule.invalidate();
    }

    /// Turns network-insights attribution of this writer's packets on or off (see
    /// [`crate::insights`]).
    pub fn set_attribution(&mut self, level: crate::insights::AttributionLevel) {
        self.attribution = level
            .is_on()
            .then(|| Box::new(WriterAttribution::new(level)));
    }

    /// The split of the last packet this writer wrote into, when attribution is on
    /// (empty when it wrote nothing).
    pub fn packet_attribution(&self) -> Option<&crate::insights::ReplicationBits> {
        self.attribution.as_ref().map(|a| &a.packet)
    }

    /// Takes the member value ranges observed since the last call (attribution at the
    /// `Members` level; see [`crate::insights::MemberRange`]).
    pub fn take_member_ranges(&mut self) -> Vec<crate::insights::MemberRange> {
        self.attribution
            .as_mut()
            .map(|a| a.take_ranges())
            .unwrap_or_default()
    }

    /// The connection id.
    pub fn connection(&self) -> ConnectionId {
        self.connection
    }

    /// The tick cache this writer writes with (the server swaps a writer thread's in
    /// for the time it writes this connection's packet: boxed, so that the swap moves
    /// a pointer, not the cache).
    pub(crate) fn cache_mut(&mut self) -> &mut Box<TickCache> {
        &mut self.cache
    }

    /// Settles the packet just written (no packet is being written now): its
    /// nominations take their snapshots and the baselines it let go of are released,
    /// in `storage`, which only this writer changes now. Then the storage's
    /// reservations can be committed.
    ///
    /// `leader` is the writer of the connection this one replayed a section of in the
    /// pass ([`replayed_from`](Self::replayed_from)), settled already.
    pub(crate) fn settle(&mut self, storage: &mut BaselineStorage, leader: Option<&mut Self>) {
        self.baselines
            .settle(storage, leader.map(|l| &mut l.baselines));
    }

    /// Adds the holders of this writer's settled nominations counted while the pass
    /// was settled, and drops the holders that let go of what it let go of (see
    /// [`ConnectionBaselines::add_joins`]).
    pub(crate) fn add_joins(&mut self, storage: &mut BaselineStorage) {
        self.baselines.add_joins(storage);
    }

    /// The connection whose section this writer replayed in the write pass being
    /// settled, if any.
    pub(crate) fn replayed_from(&self) -> Option<ConnectionId> {
        self.baselines.mirrored_leader()
    }

    /// Counters.
    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Objects this connection currently tracks (in any state but `Invalid`).
    pub fn tracked_objects(&self) -> usize {
        self.tracked
    }

    /// Packets written whose fate is unknown.
    pub fn packets_in_flight(&self) -> usize {
        self.records.len()
    }

    /// An estimate of the bytes this writer keeps only because the client has not
    /// acknowledged them: the records of the packets in flight, and the objects
    /// destroyed on the server that stay in the object table until this client
    /// confirms their destroy (each counted as 1 KiB, an estimate of the table entry,
    /// quantized state and game object it keeps alive). O(1).
    pub fn pending_bytes(&self) -> usize {
        self.record_bytes + self.pending_destroys.len() * RETAINED_OBJECT_BYTES
    }

    /// The roots the client reported broken since the last call (each is destroyed
    /// on the client and created again).
    pub fn take_recovered(&mut self) -> Vec<NetRefHandle> {
        std::mem::take(&mut self.recovered)
    }

    /// Objects with something to write.
    pub fn dirty_objects(&self) -> usize {
        self.sends.dirty.count()
    }

    /// Whether nothing is left to write or confirm: every tracked object is `Created`
    /// with a clean mask (or gone) and no packet is in flight.
    pub fn is_idle(&self) -> bool {
        !self.changes_pending
            && self.records.is_empty()
            && self.sends.dirty.none()
            && self.pending_destroys.is_empty()
            && self
                .sends
                .infos
                .iter()
                .all(|i| matches!(i.state(), S::Invalid | S::Created | S::HugeObject))
    }

    /// The send states (see `group`).
    pub(crate) fn send_states(&self) -> &SharedSendStates {
        &self.sends
    }

    /// The shared copies of the send states and per-object baselines this writer
    /// holds, when both are shared ones.
    pub(crate) fn copies(&self) -> Option<GroupCopy> {
        Some((
            Arc::clone(self.sends.shared()?),
            Arc::clone(self.baselines.words().shared()?),
        ))
    }

    /// Whether this writer holds the copies `group` (by pointer).
    pub(crate) fn holds(&self, (sends, words): &GroupCopy) -> bool {
        self.sends.is(sends) && self.baselines.words().is(words)
    }

    /// Takes the copies `to` when it holds the copies `from`, equal to them (a group
    /// of connections in step that parted on writer threads joins another).
    pub(crate) fn swap_copies(&mut self, from: &GroupCopy, (sends, words): &GroupCopy) {
        if self.holds(from) {
            self.sends.adopt(Arc::clone(sends));
            self.baselines.words_mut().adopt(Arc::clone(words));
        }
    }

    /// The send state of an object.
    pub fn info(&self, index: InternalIndex) -> Option<&ReplicationInfo> {
        self.sends.infos.get(index as usize)
    }

    /// The lifecycle state of an object (`Invalid` when untracked).
    pub fn object_state(&self, index: InternalIndex) -> S {
        self.sends
            .infos
            .get(index as usize)
            .map_or(S::Invalid, |i| i.state())
    }

    /// The accumulated scheduling priority of an object.
    pub fn priority(&self, index: InternalIndex) -> f32 {
        self.sends.infos.priority(index)
    }

    /// The accumulated (unsent) change mask of an object.
    pub fn change_mask(&self, table: &ObjectTable, index: InternalIndex) -> Option<ChangeMask> {
        self.sends
            .infos
            .get(index as usize)
            .map(|i| i.change_mask(mask_bits(table, index), &self.sends.pool))
    }

    fn ensure(&mut self, index: InternalIndex) {
        let n = index as usize + 1;
        if self.sends.infos.len() < n {
            self.sends.infos.grow(n, ReplicationInfo::default());
        }
    }

    fn in_scope(&self, table: &ObjectTable, index: InternalIndex) -> bool {
        let root = table
            .entry_at(index)
            .and_then(|e| e.root())
            .unwrap_or(index);
        !self.excluded.get(root)
    }

    /// Writes destroys, then scheduled objects, into `w` (up to its capacity). Returns
    /// `NoData` (and writes nothing) when there was nothing to send or nothing fit.
    pub fn write(&mut self, table: &ObjectTable, w: &mut BitWriter) -> WriteResult {
        debug_assert!(
            !self.changes_pending && !self.baselines.is_behind(),
            "the tick's change masks and delivered packets' fates are taken before the connection is written"
        );
        self.pump_huge(table);
        if self.pending_destroys.is_empty() && self.sends.dirty.none() {
            // Nothing to write (the common case of a quiet connection).
            return WriteResult::NoData;
        }
        self.write_shared(table, w)
    }

    /// Writes the destroys and objects sections of one packet (see [`write`](Self::write)).
    fn write_sections(&mut self, table: &ObjectTable, w: &mut BitWriter) -> WriteResult {
        let start = w.mark();
        let mut record = PacketRecord::default();
        record.infos.reserve_exact(self.record_entries);
        let mut more = false;
        if let Some(a) = self.attribution.as_mut() {
            a.begin_packet();
        }

        // 1. Destroys, first, so the remote cleans up promptly.
        let outer = w.begin_substream(w.bits_left().saturating_sub(2));
        let list = std::mem::take(&mut self.pending_destroys);
        let mut left = Vec::new();
        let mut full = false;
        for index in list {
            let Some(info) = self.sends.infos.get(index as usize) else {
                continue;
            };
            if info.state() != S::PendingDestroy {
                continue;
            }
            let Some(handle) = table.entry_at(index).map(|e| e.handle()) else {
                continue;
            };
            if full {
                left.push(index);
                continue;
            }
            let m = w.mark();
            w.write_bool(true);
            handle.write(w);
            if w.is_overflown() {
                w.rollback(m);
                left.push(index);
                full = true;
                continue;
            }
            self.sends.infos[index as usize].set_state(S::WaitOnDestroyConfirmation);
            record.infos.push(RecordInfo {
                index,
                handle,
                kind: RecordKind::Destroy,
                mask: ChangeMask::new(0),
                baseline: INVALID_BASELINE_INDEX,
                tags: false,
            });
            self.stats.destroys += 1;
        }
        self.pending_destroys = left;
        let _ = w.commit_substream(outer);
        w.write_bool(false);
        if let Some(a) = self.attribution.as_mut() {
            a.add(
                crate::insights::ReplicationPart::Destroys,
                w.position() - start.position() - 1,
            );
            // The destroy list's end.
            a.add(crate::insights::ReplicationPart::EndMarkers, 1);
        }

        // 2. Objects in priority order: the tick's schedule, continued from the last
        //    packet (see `scheduler::Schedule`), built afresh only when invalid. The
        //    shared baseline storage is locked once for the packet.
        let storage = self.storage.clone();
        let guard = storage.as_ref().map(read_storage);
        let st = guard.as_deref();
        self.frame = SectionFrame::begin_write(w, self.locals.end());
        let outer = w.begin_substream(w.bits_left().saturating_sub(self.frame.end_bits()));
        if !self.schedule.is_valid() || !self.reuse_schedule {
            let sends = &mut *self.sends;
            self.schedule.rebuild(
                table,
                &mut sends.infos,
                &sends.dirty,
                self.config.scheduling_threshold,
            );
            self.stats.schedules += 1;
        }
        let chunk = self.config.partial_sort_count.max(1);
        let threshold = self.config.scheduling_threshold;
        let mut pos = self.schedule.start();
        let mut failures = 0;
        let mut read_until = pos;
        while let Some(entry) = self.schedule.get(pos, chunk) {
            if pos >= read_until {
                read_until = pos + self.read_ahead(table, st, pos).max(1);
            }
            self.note_visit(entry.index);
            if entry_fate(
                &self.sends.dirty,
                &self.sends.infos,
                threshold,
                table,
                &entry,
            ) != EntryFate::Keep
            {
                // Written by an earlier packet of the tick (or cleaned since).
                pos += 1;
                continue;
            }
            if w.bits_left() < self.config.min_batch_bits {
                more = true;
                break;
            }
            pos += 1;
            match self.write_root(table, entry.index, w, &mut record, st) {
                Fit::Wrote => failures = 0,
                Fit::Nothing => {}
                Fit::NoRoom => {
                    more = true;
                    failures += 1;
                    if failures >= self.config.max_fit_failures {
                        break;
                    }
                }
            }
        }
        // Entries passed over but still owed stay in front for the next packet. (Were
        // an object marked dirty while writing, the schedule is invalid already, and
        // `retire` never makes it valid again.)
        let (dirty, infos) = (&self.sends.dirty, &self.sends.infos);
        self.schedule
            .retire(pos, |e| entry_fate(dirty, infos, threshold, table, e));
        let _ = w.commit_substream(outer);
        self.frame.write_end(w);
        if let Some(a) = self.attribution.as_mut() {
            // The objects section's index width and end marker.
            a.add(
                crate::insights::ReplicationPart::EndMarkers,
                super::wire::INDEX_WIDTH_BITS as usize + self.frame.end_bits(),
            );
        }

        if record.infos.is_empty() {
            w.rollback(start);
            return WriteResult::NoData;
        }
        // Every item rolled back its own overflow, so `w` is clean here; were it not,
        // the record still goes in and the caller (the stream manager rolls the
        // section back and reports it lost) keeps the states consistent.
        self.stats.packets += 1;
        self.stats.bits += (w.position() - start.position()) as u64;
        self.record_entries = record.infos.len();
        record.seal(RETAINED_OBJECT_BYTES);
        self.record_bytes += record.size();
        self.records.push_back(std::sync::Arc::new(record));
        if more || !self.pending_destroys.is_empty() {
            WriteResult::HasMoreData
        } else {
            WriteResult::Ok
        }
    }

    fn needs_batch(info: &ReplicationInfo) -> bool {
        match info.state() {
            S::PendingCreate | S::PendingTearOff => true,
            S::WaitOnCreateConfirmation | S::Created => {
                info.has_dirty_mask() || info.has_dirty_tags()
            }
            _ => false,
        }
    }

    fn write_root(
        &mut self,
        table: &ObjectTable,
        root: InternalIndex,
        w: &mut BitWriter,
        record: &mut PacketRecord,
        st: Option<&BaselineStorage>,
    ) -> Fit {
        let Some(info) = self.sends.infos.get(root as usize).copied() else {
            self.sends.dirty.clear(root);
            return Fit::Nothing;
        };
        if info.state() == S::Invalid {
            self.sends.dirty.clear(root);
            return Fit::Nothing;
        }
        let priority = info.priority();
        let mut wrote = false;
        if Self::needs_batch(&info) {
            match self.write_batch(table, root, w, record, st) {
                Ok(true) => wrote = true,
                Ok(false) => {}
                Err(e) => {
                    self.handle_batch_error(root, e, record.infos.is_empty());
                    return Fit::NoRoom;
                }
            }
        }
        let mut subs_left = false;
        // Subobjects wait for their owner's creation (a huge owner blocks them).
        let mut blocked = false;
        if self.sends.infos[root as usize].has_dirty_subobjects() {
            let root_state = self.sends.infos[root as usize].state();
            let root_on_remote = matches!(
                root_state,
                S::WaitOnCreateConfirmation | S::Created | S::WaitOnDestroyConfirmation
            );
            if let Some(entry) = table.entry_at(root) {
                for &s in entry.subobjects() {
                    self.note_visit(s);
                    if !self.sends.dirty.get(s) {
                        continue;
                    }
                    if !root_on_remote {
                        blocked = true;
                        continue;
                    }
                    if subs_left {
                        continue;
                    }
                    let needs = self
                        .sends
                        .infos
                        .get(s as usize)
                        .is_some_and(Self::needs_batch);
                    if !needs {
                        self.sends.dirty.clear(s);
                        continue;
                    }
                    match self.write_batch(table, s, w, record, st) {
                        Ok(true) => wrote = true,
                        Ok(false) => {}
                        Err(e) => {
                            self.handle_batch_error(s, e, record.infos.is_empty());
                            subs_left = self.sends.dirty.get(s);
                        }
                    }
                }
            }
            self.sends.infos[root as usize].set_dirty_subobjects(subs_left || blocked);
        }
        let root_info = self.sends.infos[root as usize];
        if !Self::needs_batch(&root_info) && !subs_left && !blocked {
            self.sends.dirty.clear(root);
        }
        if blocked && !subs_left && !wrote {
            // Nothing can go until the owner is created: wait for more priority.
            self.sends.infos[root as usize].set_priority(0.0);
            return Fit::Nothing;
        }
        if subs_left {
            // The root's own batch, if written, cleared its dirty bit and priority: the
            // subobjects left keep it scheduled, with its priority, so the rest goes
            // out soon (they were stuck until the root changed again).
            self.sends.dirty.set(root);
            self.sends.infos[root as usize].set_priority(priority);
            if wrote { Fit::Wrote } else { Fit::NoRoom }
        } else if wrote {
            self.sends.infos[root as usize].set_priority(0.0);
            Fit::Wrote
        } else {
            Fit::Nothing
        }
    }

    fn handle_batch_error(&mut self, index: InternalIndex, e: BatchError, packet_empty: bool) {
        let huge = matches!(e, BatchError::TooLarge) || packet_empty;
        if !huge {
            return;
        }
        self.trace.spoil();
        let sends = &mut *self.sends;
        let info = &mut sends.infos[index as usize];
        match info.state() {
            S::PendingCreate | S::WaitOnCreateConfirmation | S::Created | S::PendingTearOff
                if self.huge.enabled() =>
            {
                // Sent as a blob in parts on the huge-object stream (see `huge`).
                info.set_state(S::HugeObject);
                sends.dirty.clear(index);
                self.stats.huge_objects += 1;
                self.huge.park(index);
            }
            S::PendingCreate | S::WaitOnCreateConfirmation => {
                tracing::error!(
                    "replication writer (connection {}): object at index {index} does not fit in a packet; \
                     it waits for huge-object support and is not replicated",
                    self.connection
                );
                info.set_state(S::HugeObject);
                info.clear_mask(&mut sends.pool);
                sends.dirty.clear(index);
                self.stats.huge_objects += 1;
            }
            _ => {
                tracing::error!(
                    "replication writer (connection {}): an update of object at index {index} does not fit in a packet",
                    self.connection
                );
                if let Some(info) = sends.infos.get_mut(index as usize) {
                    info.set_priority(0.0);
                }
            }
        }
    }

    /// Reads what writing the next scheduled objects (from `pos`, at most
    /// [`READ_AHEAD`]) reads first, level by level, so their cache misses overlap
    /// (see [`BaselineStorage::read_ahead`]). Returns how many objects it read.
    fn read_ahead(&self, table: &ObjectTable, st: Option<&BaselineStorage>, pos: usize) -> usize {
        let ahead = self.schedule.sorted_from(pos, READ_AHEAD);
        let mut seen = 0;
        for e in ahead {
            let i = e.index;
            seen ^= table.entry_at(i).map_or(0, ObjectEntry::read_ahead);
            seen ^= self
                .sends
                .infos
                .get(i as usize)
                .map_or(0, |info| info.state() as usize);
            seen ^= self.cache.segments.read_ahead(i);
        }
        if let Some(st) = st {
            let objects = ahead.iter().map(|e| e.index);
            seen ^= st.read_ahead(self.baselines.acked_lineages(objects));
        }
        std::hint::black_box(seen);
        ahead.len()
    }

    /// Writes one object's batch: plan, frame, record. `Ok(false)` when there was
    /// nothing to send; on an error nothing of the batch is left in `w`.
    fn write_batch(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        w: &mut BitWriter,
        record: &mut PacketRecord,
        st: Option<&BaselineStorage>,
    ) -> Result<bool, BatchError> {
        let Some(entry) = table.entry_at(index) else {
            self.sends.dirty.clear(index);
            return Ok(false);
        };
        let info = self.sends.infos[index as usize];
        let state = info.state();
        let tear_off = state == S::PendingTearOff || (state == S::HugeObject && info.is_tear_off());
        // Once the creation is written, updates until it is acknowledged carry only
        // their members (the creation's packet brings the rest, or its loss resends it).
        let unconfirmed = state == S::WaitOnCreateConfirmation;
        let creating = !info.is_creation_confirmed() && !unconfirmed;
        let desc = entry.descriptor();
        let full = creating || tear_off;
        // The members this connection may receive now: the batch carries those of
        // them that are owed (all of them in full).
        let is_owner = entry.owner_connection() == Some(self.connection);
        let mut allowed = ChangeMask::all(desc.change_mask_bits);
        self.restrict_members(table, index, creating, is_owner, &mut allowed);
        let mut mask = if full {
            allowed.clone()
        } else {
            let mut owed = info.change_mask(desc.change_mask_bits, &self.sends.pool);
            owed.and_with(&allowed);
            owed
        };
        let send_tags = info.has_dirty_tags() || (creating && !entry.tags().is_empty());
        if self.trace.on {
            let long = creating || unconfirmed || tear_off || send_tags;
            self.note_batch(entry, is_owner, long);
        }
        if !full && !mask.any() && !send_tags {
            let sends = &mut *self.sends;
            let info = &mut sends.infos[index as usize];
            info.clear_mask(&mut sends.pool);
            sends.dirty.clear(index);
            return Ok(false);
        }
        // A huge object's blob is never a delta: its baseline could not be tied to a packet.
        let plan = match st {
            Some(st) if !tear_off && !self.huge.wide => {
                let creation = if creating {
                    CreationStage::Writing
                } else if unconfirmed {
                    CreationStage::InFlight
                } else {
                    CreationStage::Confirmed
                };
                self.plan_delta(st, table, index, creation, allowed, &mut mask)
            }
            _ => None,
        };
        let Some(local) = self.sends.infos[index as usize].local_index() else {
            // Every replicated object has an index from `start_replication`.
            self.sends.dirty.clear(index);
            return Ok(false);
        };
        let coding = BatchCoding {
            table,
            index,
            entry,
            creating,
            unconfirmed,
            tear_off,
            send_tags,
            plan: plan.as_ref(),
            st,
            mask: &mask,
        };
        // Everything the frame stage wrote is undone here, whatever failed.
        let m = w.mark();
        let frame_mark = self.frame.mark();
        let framed = match self.frame_batch(w, &coding, local) {
            Ok(framed) => framed,
            Err(e) => {
                w.rollback(m);
                self.frame.rewind(frame_mark);
                return Err(e);
            }
        };
        let batch = WrittenBatch {
            index,
            entry,
            state,
            creating,
            tear_off,
            send_tags,
            mask,
            plan,
        };
        self.record_batch(batch, st, framed, record);
        Ok(true)
    }

    /// Records a batch that went in: statistics, network insights, the baseline it
    /// nominates, the packet record and the object's state.
    fn record_batch(
        &mut self,
        batch: WrittenBatch<'_>,
        st: Option<&BaselineStorage>,
        framed: FramedBatch,
        record: &mut PacketRecord,
    ) {
        let WrittenBatch {
            index,
            entry,
            state,
            creating,
            tear_off,
            send_tags,
            mask,
            plan,
        } = batch;
        let desc = entry.descriptor();
        let handle = entry.handle();
        let total_bits = framed.total_bits();
        let FramedBatch {
            handle_bits,
            prefix_bits,
            exports_bits,
            bits,
            segment,
            exported,
            ..
        } = framed;
        record.exports.extend(exported);
        let member_bits = bits.members;
        if !self.huge.wide {
            let f = &mut self.stats.framing;
            f.index += handle_bits as u64;
            f.form += prefix_bits as u64;
            f.flags += (bits.flags + bits.tags) as u64;
            f.head += bits.head as u64;
            f.mask += bits.mask as u64;
        }
        // A huge object's batch goes into its blob, not this packet: the huge-object
        // stream's section counts it.
        if let Some(a) = self.attribution.as_mut().filter(|_| !self.huge.wide) {
            // Member measures are the segment's: taken by the first connection that
            // writes it this tick.
            let measured = segment.and_then(|id| self.cache.segments.measures(id));
            let measures = a.on_batch(
                desc,
                entry.protocol(),
                entry.state(),
                &mask,
                encoding_of(plan.as_ref(), st, &self.cache.states),
                creating,
                BatchLayout {
                    handle: handle_bits,
                    prefix: prefix_bits,
                    flags: bits.flags,
                    tags: bits.tags,
                    head: bits.head,
                    mask: bits.mask,
                    members: bits.members,
                    exports: exports_bits,
                },
                measured,
            );
            if let (Some(id), Some(measures)) = (segment, measures) {
                self.cache.segments.set_measures(id, measures);
            }
        }

        let mut reference_index = INVALID_BASELINE_INDEX;
        if let Some(plan) = plan {
            if let Some((k, _)) = plan.reference {
                reference_index = k;
            }
            if let (Some(slot), Some(st)) = (plan.nominate, st) {
                let ordinal = self.packet_ordinal();
                self.baselines.nominate_later(
                    st,
                    index,
                    handle,
                    slot,
                    &plan.allowed,
                    plan.priors.0,
                    plan.priors.1,
                    ordinal,
                );
            }
        }

        let kind = if tear_off {
            RecordKind::TearOff
        } else if creating {
            RecordKind::Creation
        } else {
            RecordKind::State
        };
        record.infos.push(RecordInfo {
            index,
            handle,
            kind,
            mask,
            baseline: reference_index,
            tags: send_tags,
        });
        let sends = &mut *self.sends;
        let info = &mut sends.infos[index as usize];
        info.clear_mask(&mut sends.pool);
        info.set_tags_dirty(false);
        if creating {
            info.set_creation_resent(info.is_creation_sent());
            info.set_creation_sent(true);
        }
        match state {
            S::PendingCreate => info.set_state(S::WaitOnCreateConfirmation),
            S::PendingTearOff => info.set_state(S::WaitOnDestroyConfirmation),
            _ => {}
        }
        sends.dirty.clear(index);
        info.set_priority(0.0);
        self.stats.batches += 1;
        let protocol = usize::from(entry.protocol());
        let per_type = &mut self.stats.per_type;
        if per_type.len() <= protocol {
            per_type.resize(protocol + 1, TypeTraffic::default());
        }
        let t = &mut per_type[protocol];
        t.batches += 1;
        t.bits += total_bits as u64;
        t.member_bits += member_bits as u64;
        if creating {
            self.stats.creations += 1;
        }
        if tear_off {
            self.stats.tear_offs += 1;
        }
    }
}

/// The change-mask width of the object at `index` (its type's; 0 when there is none).
pub(super) fn mask_bits(table: &ObjectTable, index: InternalIndex) -> u32 {
    table
        .entry_at(index)
        .map_or(0, |e| e.descriptor().change_mask_bits)
}

/// Whether a scheduled root is still owed at the priority it was scheduled with (what
/// a fresh [`schedule_objects`](super::scheduler::schedule_objects) would keep at the
/// same place), is done with (written, cleaned, below the threshold), or is owed at
/// another priority (its place in the order is wrong).
fn entry_fate(
    dirty: &BitArray,
    infos: &InfoTable,
    threshold: f32,
    table: &ObjectTable,
    e: &ScheduledObject,
) -> EntryFate {
    if !dirty.get(e.index) || table.subobject_set().get(e.index) {
        return EntryFate::Drop;
    }
    let p = infos.priority(e.index);
    if p.to_bits() == e.sort_key.to_bits() {
        EntryFate::Keep
    } else if p >= threshold {
        EntryFate::Reschedule
    } else {
        EntryFate::Drop
    }
}

/// Removes from `mask` the members this connection must not receive in this batch,
/// for an owner that controls the object (autonomous) or a non-owner (simulated).
/// A shorthand for [`StateDescriptor::restrict_to_role`],
/// which the writer applies with the object's autonomous flag.
pub fn apply_conditions(
    mask: &mut ChangeMask,
    desc: &StateDescriptor,
    creating: bool,
    is_owner: bool,
) {
    desc.restrict_to_role(
        mask,
        crate::state::ConditionContext {
            is_owner,
            is_autonomous: is_owner,
            is_initial: creating,
        },
    );
}

impl DataStream<ObjectTable> for ReplicationWriter {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn write_data(&mut self, ctx: &ObjectTable, writer: &mut BitWriter) -> WriteResult {
        // Leave huge-object parts their share of the packet (see `huge`).
        let reserve = self.huge_reserve_bits(writer.bits_left());
        if reserve == 0 {
            return self.write(ctx, writer);
        }
        let sub = writer.begin_substream(writer.bits_left() - reserve);
        let result = self.write(ctx, writer);
        let _ = writer.commit_substream(sub);
        result
    }

    /// Reads the client's reports of objects it could not decode (Iris's
    /// `ReplicationDisabled`): they leave this connection's scope for good.
    fn read_data(
        &mut self,
        ctx: &mut ObjectTable,
        r: &mut crate::bits::BitReader,
    ) -> Result<(), StreamError> {
        let mut n = 0;
        while r.read_bool() {
            let h = NetRefHandle::read(r).map_err(|e| StreamError::malformed(Self::NAME, e))?;
            n += 1;
            if n > MAX_REPORTS_PER_PACKET {
                return Err(StreamError::malformed(
                    Self::NAME,
                    "too many broken-object reports",
                ));
            }
            let Some(index) = ctx.index_of(h) else {
                continue;
            };
            let root = ctx.entry_at(index).and_then(|e| e.root()).unwrap_or(index);
            let Some(root_handle) = ctx.entry_at(root).map(|e| e.handle()) else {
                continue;
            };
            if self.recovered.contains(&root_handle) || self.recovering.get(root) {
                continue;
            }
            self.stats.disabled_by_remote += 1;
            let attempts = self.recoveries.entry(root_handle).or_insert(0);
            *attempts += 1;
            if *attempts > MAX_RECOVERIES {
                // It breaks every time (a type the client cannot decode): Iris's
                // ReplicationDisabled, for good.
                tracing::warn!(
                    "connection {}: the client could not replicate {h} after {MAX_RECOVERIES} re-creations; it is no longer sent there",
                    self.connection
                );
                self.set_in_scope(ctx, root, false);
                continue;
            }
            tracing::warn!(
                "connection {}: the client could not replicate {h}; destroying and creating it again there",
                self.connection
            );
            self.recovered.push(root_handle);
            self.recover(ctx, root);
        }
        r.check().map_err(|e| StreamError::malformed(Self::NAME, e))
    }

    fn process_delivery(&mut self, ctx: &mut ObjectTable, status: DeliveryStatus) {
        ReplicationWriter::process_delivery(self, ctx, status)
    }

    fn has_acknowledged_all_reliable_data(&self) -> bool {
        self.is_idle()
    }
}
