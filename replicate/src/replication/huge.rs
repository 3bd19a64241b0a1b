//! Huge objects: creations and updates that do not fit in one packet (Iris's huge-object
//! path, `FNetObjectBlob` split into `FPartialNetBlob`s).
//!
//! When a batch does not fit in an empty packet, the [`ReplicationWriter`] parks the
//! object in [`ReplicatedObjectState::HugeObject`](super::super::ReplicatedObjectState)
//! and, at its next write, serializes the batch into a blob:
//!
//! ```text
//! blob:    [object count: 16] [0: no destroys] [index width: 5]
//!          [1][object index][batch with a wide size] [0]
//! batch:   exactly the replication stream's batch (see `wire`), a long form with the
//!          size escape [0xFFFF: 16][size: 32] so it may exceed 2^16 bits
//! ```
//!
//! The blob is split into [`PartialBlob`]s of at most `max_part_bits` (only the first
//! carries the part count) that travel on the huge-object stream, a reliable ordered
//! channel ([`HugeObjectStream`] on the server, [`HugeObjectReceiver`] on the client).
//! At most `max_huge_in_transit` (default 16) transfers are in transit per connection;
//! the others wait in the send queue while the replication of other objects goes on.
//! Channel messages of the stream:
//!
//! ```text
//! [kind: 2]  0 = part:   [transfer id: 16][part (see blob::partial)]
//!            1 = cancel: [transfer id: 16]
//!            2 = no-op   (a queued part replaced before it ever went out)
//! ```
//!
//! The receiver keeps one [`BlobAssembler`] per transfer id (at most
//! `max_huge_in_transit`, under a total memory cap), and applies a completed blob as one
//! batch through the normal [`ReplicationReader`] path. The sender confirms the object
//! (creation confirmed, state `Created`) once every channel message up to the last part
//! is acknowledged — the receiver has applied it by then, so subobjects and object
//! messages released afterwards find the object there.
//!
//! An object destroyed (or leaving scope) while its transfer is in flight cancels it:
//! parts never sent are replaced by no-ops; if any part went out, a cancel message
//! follows (the receiver drops the partial blob) and the object's destroy is held back
//! until everything up to the cancel is acknowledged, so a blob completed just before
//! the cancel can never be applied after the destroy.
//!
//! An object torn off while huge (its creation or an update in transit) keeps going
//! through this path: the transfer in transit is cancelled and the final state follows
//! as a huge tear-off on the same ordered channel, so nothing older can land after it;
//! a tear-off whose final state alone is too large for a packet takes the path too.
//! Its delivery ends the object's replication (the client keeps the object).
//!
//! This module is a child of `writer` (it reaches the writer's internals); it owns the
//! send queue, the two streams and the writer's huge-object pump.

use super::{BatchError, PacketRecord, RecordKind, ReplicationWriter, S};
use crate::bits::{BitReader, BitWriter};
use crate::blob::{
    BlobAssembler, BlobError, ChannelConfig, ChannelReceiver, ChannelRecord, ChannelSender,
    DeliveryMode, NetBlob, PartAccepted, PartialBlob, SplitConfig, split_blob,
};
use crate::connection::DeliveryStatus;
use crate::handle::NetRefHandle;
use crate::object::{InternalIndex, ObjectTable};
use crate::replication::reader::{ClientWorld, ReplicationReader};
use crate::replication::wire::SectionFrame;
use crate::stream::flagged::{Flag, FlaggedMutex};
use crate::stream::{DataStream, StreamError, WriteResult};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

const KIND_BITS: u32 = 2;
const KIND_PART: u64 = 0;
const KIND_CANCEL: u64 = 1;
const KIND_NOOP: u64 = 2;
/// Settings of attachments and huge objects; both ends must use the same values.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachmentConfig {
    /// How huge objects are split: at most `max_part_bits` (default 1024) per part and
    /// `max_part_count` (default 8192) parts per blob.
    pub split: SplitConfig,
    /// Huge objects in transit at once per connection (default 16, at least 1).
    pub max_huge_in_transit: usize,
    /// Most bits a client reserves for partly assembled huge objects (default 16 MiB).
    pub max_huge_receive_bits: u64,
    /// Share of each packet the replication writer leaves to huge-object parts while
    /// some wait to be sent (default 0.25, at most 0.9), so a busy world cannot starve
    /// them (0 turns the reservation off: parts then get what the writer leaves).
    pub huge_packet_share: f32,
    /// Largest message in bits (default 8 KiB). A reliable message larger than
    /// `split.max_part_bits` travels in parts (see the module docs); an unreliable one
    /// may not exceed a part.
    pub max_message_bits: u32,
    /// Most messages queued per channel on the sender (default 4096).
    pub max_queued_messages: usize,
    /// Most received messages waiting for game code (default 4096); beyond it new
    /// ones are refused (counted in [`MessageStats::rejected`](crate::replication::attachment::MessageStats::rejected), summarised in the log
    /// at most once per interval by the facade).
    pub max_received_messages: usize,
    /// Most bytes of received messages waiting for game code, per connection
    /// (default 1 MiB; each message counts its wire size plus its bookkeeping, see
    /// [`MessageStream::received_bytes`](crate::replication::attachment::MessageStream::received_bytes)); beyond it new ones are refused like above.
    /// A peer that floods messages game code does not drain holds at most this much.
    pub max_received_bytes: usize,
    /// Most bytes a receiving channel buffers for reliable messages that arrived
    /// ahead of an earlier one (default 256 KiB per channel). The channel window
    /// (1024 messages of at most one part each) bounds it too; a peer exceeding it
    /// sends data that cannot be read, and the facade closes its connection.
    pub max_out_of_order_bytes: usize,
    /// Warn when an object message is dropped because the object is not in scope
    /// (default off, as in Iris).
    pub warn_dropped_messages: bool,
    /// Reliable messages run *before* the state of the packet that delivers them is
    /// applied to the game objects (default on, Iris's
    /// `ExecuteReliableRPCsBeforeApplyState`), except object messages whose object is
    /// not spawned yet, which run right after it is. Off, every message runs after
    /// the packet's state. Unreliable messages always run after it. Only the side
    /// that receives state (the client) reads this setting.
    pub reliable_before_state: bool,
}

impl Default for AttachmentConfig {
    fn default() -> Self {
        Self {
            split: SplitConfig::default(),
            max_huge_in_transit: 16,
            max_huge_receive_bits: 16 * 1024 * 1024 * 8,
            huge_packet_share: 0.25,
            max_message_bits: 8192 * 8,
            max_queued_messages: 4096,
            max_received_messages: 4096,
            max_received_bytes: 1024 * 1024,
            max_out_of_order_bytes: 256 * 1024,
            warn_dropped_messages: false,
            reliable_before_state: true,
        }
    }
}

/// Most objects a blob may announce.
pub const MAX_BLOB_OBJECTS: u64 = 1024;
/// Parts kept queued in the channel ahead of the packets (the rest wait in the
/// transfers, so a cancel can still drop them cheaply).
const FILL_TARGET: usize = 64;

/// The channel configuration of the huge-object stream for `config`.
pub fn huge_channel_config(config: &AttachmentConfig) -> ChannelConfig {
    let mut c = ChannelConfig::new(DeliveryMode::ReliableOrdered);
    c.max_message_bits = config.split.max_part_bits.min(u16::MAX as u32) + 128;
    c.window = 1024;
    c.max_queued = 1024;
    c.max_buffered_bits = c.max_message_bits as u64 * 1024;
    c
}

/// Counters of the huge-object send queue of one connection (part of Iris's
/// `NetStats`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HugeSendStats {
    /// Transfers in transit now.
    pub active: usize,
    /// Transfers waiting for a free slot now.
    pub queued: usize,
    /// Transfers whose parts were all sent and that wait for acknowledgement now.
    pub waiting_for_ack: usize,
    /// Transfers started.
    pub started: u64,
    /// Transfers acknowledged in full.
    pub completed: u64,
    /// Transfers cancelled (object destroyed or out of scope).
    pub cancelled: u64,
    /// Objects that could not be sent at all (larger than the split limits allow).
    pub too_large: u64,
    /// Times the queue began stalling (a transfer waiting because every slot is busy).
    pub stalls: u64,
    /// Total time spent stalling.
    pub stall_time: Duration,
    /// Parts pushed into the channel.
    pub parts_sent: u64,
    /// Bits of blobs handed to the queue.
    pub blob_bits: u64,
}

#[derive(Debug)]
struct Transfer {
    id: u16,
    index: InternalIndex,
    handle: NetRefHandle,
    parts: VecDeque<PartialBlob>,
    /// Channel ids of the parts pushed so far.
    pushed: Vec<u64>,
    record: PacketRecord,
}

impl Transfer {
    /// Whether this transfer carries `index`'s tear-off.
    fn is_tear_off(&self, index: InternalIndex) -> bool {
        self.record
            .infos
            .iter()
            .any(|ri| ri.index == index && ri.kind == RecordKind::TearOff)
    }
}

/// What the writer learns from the queue.
#[derive(Debug)]
enum Finished {
    Delivered {
        index: InternalIndex,
        handle: NetRefHandle,
        record: PacketRecord,
    },
    CancelAcked {
        index: InternalIndex,
        handle: NetRefHandle,
    },
}

/// The huge-object send queue of one connection, shared by its writer (which fills
/// it) and its [`HugeObjectStream`] (which sends the parts).
#[derive(Debug)]
pub struct HugeSendQueue {
    split: SplitConfig,
    max_in_transit: usize,
    packet_share: f32,
    channel: ChannelSender,
    waiting: VecDeque<Transfer>,
    active: Vec<Transfer>,
    /// Cancels that went out: (channel id of the cancel, object).
    cancels: Vec<(u64, InternalIndex, NetRefHandle)>,
    finished: Vec<Finished>,
    next_id: u16,
    rr: usize,
    now: Duration,
    stalled_since: Option<Duration>,
    stats: HugeSendStats,
}

/// A [`HugeSendQueue`] shared by a writer and its stream. Whether the queue is idle
/// is kept beside the lock ([`FlaggedMutex`]): a packet written while no huge object
/// is in transit (nearly every packet) takes no lock.
pub type SharedHugeQueue = Arc<FlaggedMutex<HugeSendQueue>>;

impl Flag for HugeSendQueue {
    /// Whether the queue is idle ([`HugeSendQueue::is_idle`]).
    fn flag(&self) -> bool {
        self.is_idle()
    }
}

fn message(kind: u64, id: u16, part: Option<&PartialBlob>) -> NetBlob {
    let mut w = BitWriter::with_capacity_bits(
        KIND_BITS as usize + 16 + part.map_or(0, PartialBlob::wire_bits),
    );
    w.write_bits(kind, KIND_BITS);
    if kind != KIND_NOOP {
        w.write_bits(id as u64, 16);
    }
    if let Some(p) = part {
        p.write(&mut w);
    }
    NetBlob::from_writer(&w)
}

impl HugeSendQueue {
    /// An empty queue for `config`.
    pub fn new(config: &AttachmentConfig) -> Self {
        Self {
            split: config.split,
            max_in_transit: config.max_huge_in_transit.max(1),
            packet_share: config.huge_packet_share,
            channel: ChannelSender::new(huge_channel_config(config)),
            waiting: VecDeque::new(),
            active: Vec::new(),
            cancels: Vec::new(),
            finished: Vec::new(),
            next_id: 0,
            rr: 0,
            now: Duration::ZERO,
            stalled_since: None,
            stats: HugeSendStats::default(),
        }
    }

    /// A new shared queue.
    pub fn shared(config: &AttachmentConfig) -> SharedHugeQueue {
        Arc::new(FlaggedMutex::new(Self::new(config)))
    }

    /// Counters, with the current gauges.
    pub fn stats(&self) -> HugeSendStats {
        let mut s = self.stats.clone();
        s.active = self.active.len();
        s.queued = self.waiting.len();
        s.waiting_for_ack = self.active.iter().filter(|t| t.parts.is_empty()).count();
        if let Some(since) = self.stalled_since {
            s.stall_time += self.now.saturating_sub(since);
        }
        s
    }

    /// Transfers in transit.
    pub fn in_transit(&self) -> usize {
        self.active.len()
    }

    /// Transfers waiting for a slot.
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// Whether nothing is queued, in transit or unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty()
            && self.active.is_empty()
            && self.cancels.is_empty()
            && self.finished.is_empty()
            && self.channel.is_idle()
    }

    /// Sets the current time (for the stall times).
    pub fn set_now(&mut self, now: Duration) {
        self.now = now;
        self.update_stall();
    }

    fn update_stall(&mut self) {
        let stalled = !self.waiting.is_empty() && self.active.len() >= self.max_in_transit;
        match (stalled, self.stalled_since) {
            (true, None) => {
                self.stats.stalls += 1;
                self.stalled_since = Some(self.now);
            }
            (false, Some(since)) => {
                self.stats.stall_time += self.now.saturating_sub(since);
                self.stalled_since = None;
            }
            _ => {}
        }
    }

    fn enqueue(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        blob: &NetBlob,
        record: PacketRecord,
    ) -> Result<(), BlobError> {
        let parts = split_blob(blob, &self.split)?;
        self.stats.blob_bits += blob.bit_len() as u64;
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.waiting.push_back(Transfer {
            id,
            index,
            handle,
            parts: parts.into(),
            pushed: Vec::new(),
            record,
        });
        Ok(())
    }

    /// Starts waiting transfers while slots are free, then tops the channel up with
    /// parts, round-robin over the transfers in transit.
    fn fill(&mut self) {
        while self.active.len() < self.max_in_transit {
            let Some(t) = self.waiting.pop_front() else {
                break;
            };
            self.stats.started += 1;
            self.active.push(t);
        }
        self.update_stall();
        let room = |c: &ChannelSender| {
            let cfg = c.config();
            c.waiting() < FILL_TARGET
                && c.pending() + 16 < (cfg.window as usize).min(cfg.max_queued)
        };
        let mut idle_rounds = 0;
        while room(&self.channel) && !self.active.is_empty() && idle_rounds < self.active.len() {
            let i = self.rr % self.active.len();
            self.rr = self.rr.wrapping_add(1);
            let t = &mut self.active[i];
            let Some(part) = t.parts.pop_front() else {
                idle_rounds += 1;
                continue;
            };
            idle_rounds = 0;
            match self.channel.push(message(KIND_PART, t.id, Some(&part))) {
                Ok(id) => {
                    t.pushed.push(id);
                    self.stats.parts_sent += 1;
                }
                Err(e) => {
                    // Cannot happen with the room check; keep the part for later.
                    tracing::warn!("huge-object queue: {e}");
                    t.parts.push_front(part);
                    break;
                }
            }
        }
    }

    /// Moves transfers whose every message up to the last part was acknowledged (the
    /// receiver has applied them) to `finished`, and likewise acknowledged cancels.
    fn collect_finished(&mut self) {
        let acked_below = self.channel.first_unacked();
        let mut i = 0;
        while i < self.active.len() {
            let t = &self.active[i];
            let done = t.parts.is_empty() && t.pushed.last().is_some_and(|&l| l < acked_below);
            if done {
                let t = self.active.swap_remove(i);
                self.stats.completed += 1;
                self.finished.push(Finished::Delivered {
                    index: t.index,
                    handle: t.handle,
                    record: t.record,
                });
            } else {
                i += 1;
            }
        }
        let finished = &mut self.finished;
        self.cancels.retain(|&(id, index, handle)| {
            if id < acked_below {
                finished.push(Finished::CancelAcked { index, handle });
                false
            } else {
                true
            }
        });
    }

    /// Cancels every transfer for which `keep` is false. Returns, per cancelled
    /// transfer, the object, its record (for the exports) and whether the remote may
    /// have seen a part (then the object's destroy must wait for the cancel's ack,
    /// which comes back as a finished cancel).
    fn cancel_where(
        &mut self,
        mut keep: impl FnMut(&Transfer) -> bool,
    ) -> Vec<(InternalIndex, PacketRecord, bool)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.waiting.len() {
            let t = &self.waiting[i];
            if keep(t) {
                i += 1;
                continue;
            }
            if let Some(t) = self.waiting.remove(i) {
                self.stats.cancelled += 1;
                out.push((t.index, t.record, false));
            }
        }
        let mut i = 0;
        while i < self.active.len() {
            let t = &self.active[i];
            if keep(t) {
                i += 1;
                continue;
            }
            let t = self.active.swap_remove(i);
            self.stats.cancelled += 1;
            let mut seen = false;
            for &id in &t.pushed {
                if !self.channel.replace_unsent(id, message(KIND_NOOP, 0, None)) {
                    seen = true;
                }
            }
            if seen {
                match self.channel.push(message(KIND_CANCEL, t.id, None)) {
                    Ok(id) => self.cancels.push((id, t.index, t.handle)),
                    Err(e) => tracing::error!("huge-object queue: cancel not queued: {e}"),
                }
            }
            out.push((t.index, t.record, seen));
        }
        out
    }
}

/// The writer's side of the huge-object path (a field of [`ReplicationWriter`]).
#[derive(Debug, Default)]
pub(super) struct WriterHuge {
    queue: Option<SharedHugeQueue>,
    parked: Vec<InternalIndex>,
    /// Objects whose huge tear-off was delivered (state `Destroyed`), released at the
    /// writer's next update or delivery report (which hold the table mutably).
    torn_off: Vec<InternalIndex>,
    /// Set while a batch is written into a blob: batches get the wide size.
    pub(super) wide: bool,
}

impl WriterHuge {
    /// Whether no object waits to become a blob and no batch goes into one.
    pub(super) fn is_quiet(&self) -> bool {
        self.parked.is_empty() && !self.wide
    }

    /// Whether huge objects go through a queue (otherwise they are only parked).
    pub(super) fn enabled(&self) -> bool {
        self.queue.is_some()
    }

    pub(super) fn park(&mut self, index: InternalIndex) {
        if !self.parked.contains(&index) {
            self.parked.push(index);
        }
    }
}

impl ReplicationWriter {
    /// Releases the objects whose huge tear-off was delivered.
    pub(super) fn release_huge_tear_offs(&mut self, table: &mut ObjectTable) {
        for index in std::mem::take(&mut self.huge.torn_off) {
            if self.object_state(index) == S::Destroyed {
                self.sends.infos[index as usize].set_state(S::Invalid);
                self.release(table, index);
            }
        }
    }

    /// Connects the writer to a huge-object send queue (shared with the connection's
    /// [`HugeObjectStream`]). Without one, an object that does not fit in a packet is
    /// parked in `HugeObject` and never sent.
    pub fn set_huge_queue(&mut self, queue: SharedHugeQueue) {
        self.huge.queue = Some(queue);
    }

    /// Bits of a packet with `bits_left` free that the writer leaves to the huge-object
    /// stream: `huge_packet_share` of it while parts wait to be sent, else 0.
    pub(super) fn huge_reserve_bits(&self, bits_left: usize) -> usize {
        // (The queue's flag: idle, read without locking.)
        let Some(queue) = self.huge.queue.as_ref().filter(|q| !q.flag()) else {
            return 0;
        };
        let q = queue.lock();
        let busy = q.channel.waiting() > 0 || q.active.iter().any(|t| !t.parts.is_empty());
        if !busy {
            return 0;
        }
        let share = q.packet_share.clamp(0.0, 0.9) as f64;
        (bits_left as f64 * share) as usize
    }

    /// Exchanges with the huge-object queue before a packet: confirms finished
    /// transfers, cancels those whose object went away, and turns newly parked objects
    /// into blobs.
    pub(super) fn pump_huge(&mut self, table: &ObjectTable) {
        let Some(queue) = self.huge.queue.as_ref() else {
            return;
        };
        // Nothing parked and the queue idle (its flag, read without locking).
        if self.huge.parked.is_empty() && queue.flag() {
            return;
        }
        // (Its own handle: the writer changes itself while it holds the lock.)
        let queue = queue.clone();
        let mut q = queue.lock();
        q.collect_finished();
        for f in std::mem::take(&mut q.finished) {
            match f {
                Finished::Delivered {
                    index,
                    handle,
                    record,
                } => self.huge_delivered(table, index, handle, record),
                Finished::CancelAcked { index, handle } => {
                    let same = table.entry_at(index).map(|e| e.handle()) == Some(handle);
                    if same && self.object_state(index) == S::PendingDestroy {
                        self.push_destroy(index);
                    }
                }
            }
        }
        let infos = &self.sends.infos;
        // A transfer goes on while its object stays huge and, once torn off, only if it
        // is the tear-off itself.
        let cancelled = q.cancel_where(|t| {
            table.entry_at(t.index).map(|e| e.handle()) == Some(t.handle)
                && infos.get(t.index as usize).is_some_and(|i| {
                    i.state() == S::HugeObject && t.is_tear_off(t.index) == i.is_tear_off()
                })
        });
        for (index, record, hold_destroy) in cancelled {
            if !record.exports.is_empty() {
                self.exports
                    .lock()
                    .on_delivery(&record.exports, DeliveryStatus::Lost);
            }
            if hold_destroy && self.object_state(index) == S::PendingDestroy {
                self.pending_destroys.retain(|&i| i != index);
            }
        }
        for index in std::mem::take(&mut self.huge.parked) {
            if self.object_state(index) != S::HugeObject {
                continue;
            }
            let Some(handle) = table.entry_at(index).map(|e| e.handle()) else {
                continue;
            };
            match self.write_huge_blob(table, index, &q.split) {
                Some((blob, record)) => {
                    if let Err(e) = q.enqueue(index, handle, &blob, record) {
                        tracing::error!(
                            "replication writer (connection {}): object {handle} is too large even for the huge-object path: {e}",
                            self.connection
                        );
                        q.stats.too_large += 1;
                    }
                }
                None => {
                    // Nothing to send after all (conditions filtered everything).
                    if let Some(info) = self.sends.infos.get_mut(index as usize) {
                        if info.is_creation_confirmed() {
                            info.set_state(S::Created);
                        }
                    }
                }
            }
        }
        q.fill();
    }

    /// Serializes the object's batch into a blob (see the module docs).
    fn write_huge_blob(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        split: &SplitConfig,
    ) -> Option<(NetBlob, PacketRecord)> {
        let cap = split.max_blob_bits().min(usize::MAX as u64) as usize;
        let mut w = BitWriter::with_capacity_bits(cap);
        let mut record = PacketRecord::default();
        w.write_bits(1, 16);
        w.write_bool(false);
        let section = SectionFrame::begin_write(&mut w, self.locals.end());
        let packet_section = std::mem::replace(&mut self.frame, section);
        self.huge.wide = true;
        // A huge object's blob is never a delta: no baseline storage.
        let result = self.write_batch(table, index, &mut w, &mut record, None);
        self.huge.wide = false;
        let section = std::mem::replace(&mut self.frame, packet_section);
        section.write_end(&mut w);
        match result {
            Ok(true) if !w.is_overflown() => Some((NetBlob::from_writer(&w), record)),
            Ok(_) => None,
            Err(BatchError::DidNotFit | BatchError::TooLarge) => {
                tracing::error!(
                    "replication writer (connection {}): object at index {index} exceeds the \
                     largest blob ({cap} bits); it is not replicated",
                    self.connection
                );
                None
            }
        }
    }

    fn huge_delivered(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        handle: NetRefHandle,
        record: PacketRecord,
    ) {
        if !record.exports.is_empty() {
            self.exports
                .lock()
                .on_delivery(&record.exports, DeliveryStatus::Delivered);
        }
        if table.entry_at(index).map(|e| e.handle()) != Some(handle) {
            return;
        }
        let sends = &mut *self.sends;
        let Some(info) = sends.infos.get_mut(index as usize) else {
            return;
        };
        if info.state() != S::HugeObject {
            return;
        }
        if record
            .infos
            .iter()
            .any(|ri| ri.index == index && ri.kind == RecordKind::TearOff)
        {
            // The final state arrived: the remote keeps the object, replication ends.
            info.set_state(S::Destroyed);
            self.huge.torn_off.push(index);
            return;
        }
        if record
            .infos
            .iter()
            .any(|ri| ri.index == index && ri.kind == RecordKind::Creation)
        {
            info.set_creation_confirmed(true);
        }
        if info.is_creation_confirmed() {
            info.set_state(S::Created);
        } else {
            info.set_state(S::PendingCreate);
            info.set_all(super::mask_bits(table, index), &mut sends.pool);
        }
        if info.has_dirty_mask() || info.has_dirty_subobjects() || info.has_dirty_tags() {
            self.mark_dirty(table, index);
        }
    }
}

/// The server's huge-object stream of one connection: sends the queue's parts.
#[derive(Debug)]
pub struct HugeObjectStream {
    queue: SharedHugeQueue,
    records: VecDeque<ChannelRecord>,
    /// The last written packet's part bits per type: (protocol, parts, bits).
    last_types: Vec<(u16, u32, u64)>,
}

impl HugeObjectStream {
    /// The stream's name.
    pub const NAME: &'static str = "huge_objects";

    /// A stream sending `queue`'s parts.
    pub fn new(queue: SharedHugeQueue) -> Self {
        Self {
            queue,
            records: VecDeque::new(),
            last_types: Vec::new(),
        }
    }

    /// The parts the last packet carried, per replicated type: (protocol index,
    /// parts, their bits without the channel's framing). Network insights.
    pub fn last_packet_types(&self) -> &[(u16, u32, u64)] {
        &self.last_types
    }

    /// The shared queue.
    pub fn queue(&self) -> &SharedHugeQueue {
        &self.queue
    }

    /// Counters of the queue.
    pub fn stats(&self) -> HugeSendStats {
        self.queue.lock().stats()
    }
}

impl DataStream<ObjectTable> for HugeObjectStream {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn write_data(&mut self, ctx: &ObjectTable, w: &mut BitWriter) -> WriteResult {
        self.last_types.clear();
        if self.queue.flag() {
            // Idle: nothing waits or is in transit: nothing to fill or write.
            return WriteResult::NoData;
        }
        let mut q = self.queue.lock();
        q.fill();
        let mut record = Vec::new();
        if q.channel.write(w, &mut record) == 0 {
            return WriteResult::NoData;
        }
        // Which object (type) each part belongs to (insights).
        for &id in &record {
            let Some(bits) = q.channel.message_bits(id) else {
                continue;
            };
            let Some(protocol) = q
                .active
                .iter()
                .find(|t| t.pushed.contains(&id))
                .and_then(|t| ctx.entry_at(t.index).filter(|e| e.handle() == t.handle))
                .map(|e| e.protocol())
            else {
                continue;
            };
            match self.last_types.iter_mut().find(|t| t.0 == protocol) {
                Some(t) => {
                    t.1 += 1;
                    t.2 += bits as u64;
                }
                None => self.last_types.push((protocol, 1, bits as u64)),
            }
        }
        self.records.push_back(record);
        if q.channel.waiting() > 0 {
            WriteResult::HasMoreData
        } else {
            WriteResult::Ok
        }
    }

    fn read_data(&mut self, _ctx: &mut ObjectTable, _r: &mut BitReader) -> Result<(), StreamError> {
        Err(StreamError::malformed(
            Self::NAME,
            "the client sends no huge objects",
        ))
    }

    fn process_delivery(&mut self, _ctx: &mut ObjectTable, status: DeliveryStatus) {
        let Some(record) = self.records.pop_front() else {
            return;
        };
        let mut q = self.queue.lock();
        q.channel.on_delivery(&record, status);
        q.collect_finished();
    }

    fn has_acknowledged_all_reliable_data(&self) -> bool {
        // (The flag: idle.)
        self.queue.flag()
    }
}

/// Counters of a [`HugeObjectReceiver`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HugeReceiveStats {
    /// Parts accepted.
    pub parts: u64,
    /// Blobs assembled and applied.
    pub blobs: u64,
    /// Objects applied from blobs.
    pub objects: u64,
    /// Transfers cancelled by the sender.
    pub cancelled: u64,
    /// Parts rejected (wrong index, count or size, too many transfers, memory cap);
    /// each drops its partial blob.
    pub rejected: u64,
    /// Blobs whose content could not be applied.
    pub bad_blobs: u64,
}

/// The client's huge-object stream: reassembles parts and applies completed blobs.
#[derive(Debug)]
pub struct HugeObjectReceiver {
    split: SplitConfig,
    max_in_transit: usize,
    max_total_bits: u64,
    channel: ChannelReceiver,
    assemblers: HashMap<u16, (BlobAssembler, u64)>,
    reserved_bits: u64,
    /// Blobs completed by this packet, applied at its end.
    completed: Vec<NetBlob>,
    stats: HugeReceiveStats,
}

impl HugeObjectReceiver {
    /// The stream's name (same as the sender's).
    pub const NAME: &'static str = HugeObjectStream::NAME;

    /// A receiver for `config` (must equal the server's).
    pub fn new(config: &AttachmentConfig) -> Self {
        Self {
            split: config.split,
            max_in_transit: config.max_huge_in_transit.max(1),
            max_total_bits: config.max_huge_receive_bits,
            channel: ChannelReceiver::new(huge_channel_config(config)),
            assemblers: HashMap::new(),
            reserved_bits: 0,
            completed: Vec::new(),
            stats: HugeReceiveStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &HugeReceiveStats {
        &self.stats
    }

    /// Partly assembled blobs.
    pub fn assembling(&self) -> usize {
        self.assemblers.len()
    }

    /// Bits reserved by partly assembled blobs (never above the memory cap).
    pub fn reserved_bits(&self) -> u64 {
        self.reserved_bits
    }

    fn drop_transfer(&mut self, id: u16) {
        if let Some((_, reserved)) = self.assemblers.remove(&id) {
            self.reserved_bits -= reserved;
        }
    }

    fn reject(&mut self, id: u16, why: impl std::fmt::Display) {
        tracing::warn!("huge-object receiver: transfer {id}: {why}; the partial blob is dropped");
        self.stats.rejected += 1;
        self.drop_transfer(id);
    }

    /// Handles one channel message; returns a completed blob.
    pub fn accept_message(&mut self, msg: &NetBlob) -> Option<NetBlob> {
        let mut r = msg.reader();
        let kind = r.read_bits(KIND_BITS);
        if kind == KIND_NOOP {
            return None;
        }
        let id = r.read_bits(16) as u16;
        if r.check().is_err() {
            self.stats.rejected += 1;
            return None;
        }
        if kind == KIND_CANCEL {
            if self.assemblers.contains_key(&id) {
                self.stats.cancelled += 1;
            }
            self.drop_transfer(id);
            return None;
        }
        if kind != KIND_PART {
            self.stats.rejected += 1;
            return None;
        }
        let part = match PartialBlob::read(&mut r, &self.split) {
            Ok(p) => p,
            Err(e) => {
                self.reject(id, e);
                return None;
            }
        };
        if part.is_first_part() {
            // A first part restarts the transfer.
            self.drop_transfer(id);
            if self.assemblers.len() >= self.max_in_transit {
                self.reject(id, "more transfers than max_huge_in_transit");
                return None;
            }
            let count = part.part_count.unwrap_or(1) as u64;
            let reserve = count.saturating_mul(self.split.max_part_bits as u64);
            if self.reserved_bits + reserve > self.max_total_bits {
                self.reject(id, "the announced blob exceeds the receive memory cap");
                return None;
            }
            self.reserved_bits += reserve;
            self.assemblers
                .insert(id, (BlobAssembler::new(self.split), reserve));
        }
        let Some((asm, _)) = self.assemblers.get_mut(&id) else {
            self.reject(id, "a part of a transfer that has not started");
            return None;
        };
        match asm.add_part(part) {
            Ok(PartAccepted::NeedMore) => {
                self.stats.parts += 1;
                None
            }
            Ok(PartAccepted::Complete(blob)) => {
                self.stats.parts += 1;
                self.drop_transfer(id);
                Some(blob)
            }
            Err(e) => {
                self.reject(id, e);
                None
            }
        }
    }

    /// Applies a completed blob to `world` through the replication reader.
    pub fn apply_blob(&mut self, world: &mut ClientWorld, blob: &NetBlob) {
        let mut r = blob.reader();
        let count = r.read_bits(16);
        if r.check().is_err() || count == 0 || count > MAX_BLOB_OBJECTS {
            tracing::warn!("huge-object receiver: blob announces {count} objects");
            self.stats.bad_blobs += 1;
            return;
        }
        let mut reader = ReplicationReader::default();
        match reader.read(world, &mut r) {
            Ok(()) => {
                self.stats.blobs += 1;
                self.stats.objects += count;
            }
            Err(e) => {
                tracing::warn!("huge-object receiver: blob could not be applied: {e}");
                self.stats.bad_blobs += 1;
            }
        }
    }
}

impl DataStream<ClientWorld> for HugeObjectReceiver {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn write_data(&mut self, _ctx: &ClientWorld, _w: &mut BitWriter) -> WriteResult {
        WriteResult::NoData
    }

    fn read_data(&mut self, _ctx: &mut ClientWorld, r: &mut BitReader) -> Result<(), StreamError> {
        let result = self
            .channel
            .read(r)
            .map_err(|e| StreamError::malformed(Self::NAME, e));
        // Whatever arrived before an error is still delivered.
        while let Some(msg) = self.channel.receive() {
            if let Some(blob) = self.accept_message(&msg) {
                self.completed.push(blob);
            }
        }
        result.map(|_| ())
    }

    /// Completed huge objects are applied after the packet's other state, as before
    /// the end-of-packet split: the replication reader (an earlier stream) has
    /// dispatched by now.
    fn end_packet(&mut self, ctx: &mut ClientWorld) {
        for blob in std::mem::take(&mut self.completed) {
            self.apply_blob(ctx, &blob);
        }
    }

    fn process_delivery(&mut self, _ctx: &mut ClientWorld, _status: DeliveryStatus) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part_msg(id: u16, part: &PartialBlob) -> NetBlob {
        message(KIND_PART, id, Some(part))
    }

    #[test]
    fn the_idle_flag_follows_the_queue_through_every_unlock() {
        let queue = HugeSendQueue::shared(&AttachmentConfig::default());
        let mut stream = HugeObjectStream::new(queue.clone());
        assert!(queue.flag());
        let handle = NetRefHandle::new(1, false, 0);
        queue
            .lock()
            .finished
            .push(Finished::CancelAcked { index: 0, handle });
        assert!(!queue.flag(), "work left: not idle");
        assert!(!stream.has_acknowledged_all_reliable_data());
        queue.lock().finished.clear();
        assert!(queue.flag() && stream.has_acknowledged_all_reliable_data());
        // Idle: the stream writes nothing.
        let mut w = BitWriter::with_capacity_bytes(64);
        let table = ObjectTable::new(Arc::new(crate::protocol::ProtocolRegistry::default()), 0);
        assert_eq!(stream.write_data(&table, &mut w), WriteResult::NoData);
        assert_eq!(w.position(), 0);
    }

    #[test]
    fn receiver_assembles_interleaved_transfers_and_honours_cancel() {
        let config = AttachmentConfig::default();
        let mut rx = HugeObjectReceiver::new(&config);
        let a = NetBlob::from_bytes((0..400u32).map(|i| i as u8).collect());
        let b = NetBlob::from_bytes((0..300u32).map(|i| (i * 3) as u8).collect());
        let pa = split_blob(&a, &config.split).unwrap();
        let pb = split_blob(&b, &config.split).unwrap();
        assert!(rx.accept_message(&part_msg(1, &pa[0])).is_none());
        assert!(rx.accept_message(&part_msg(2, &pb[0])).is_none());
        assert_eq!(rx.assembling(), 2);
        assert!(rx.accept_message(&message(KIND_CANCEL, 2, None)).is_none());
        assert_eq!(rx.assembling(), 1);
        assert!(rx.accept_message(&part_msg(2, &pb[1])).is_none());
        assert_eq!(rx.stats().rejected, 1, "a part after a cancel is rejected");
        let mut done = None;
        for p in &pa[1..] {
            done = rx.accept_message(&part_msg(1, p)).or(done);
        }
        assert_eq!(done, Some(a));
        assert_eq!(rx.reserved_bits(), 0);
    }

    #[test]
    fn receiver_limits_transfers_and_memory() {
        let config = AttachmentConfig {
            max_huge_in_transit: 2,
            max_huge_receive_bits: 10 * 1024,
            ..AttachmentConfig::default()
        };
        let mut rx = HugeObjectReceiver::new(&config);
        let first = |count| PartialBlob {
            part_index: 0,
            part_count: Some(count),
            payload: NetBlob::from_bytes(vec![1; 128]),
        };
        assert!(rx.accept_message(&part_msg(1, &first(4))).is_none());
        assert!(rx.accept_message(&part_msg(2, &first(4))).is_none());
        assert_eq!(rx.assembling(), 2);
        rx.accept_message(&part_msg(3, &first(2)));
        assert_eq!(rx.assembling(), 2, "a third transfer is refused");
        rx.accept_message(&message(KIND_CANCEL, 1, None));
        rx.accept_message(&part_msg(3, &first(7)));
        assert_eq!(
            rx.assembling(),
            1,
            "4 + 7 parts exceed the 10-part memory cap"
        );
        assert!(rx.reserved_bits() <= 10 * 1024);
        assert_eq!(rx.stats().rejected, 2);
    }
}
