//! The replication core: the per-connection [`ReplicationWriter`] (server) and
//! [`ReplicationReader`] (client), their scheduling and records, and two sans-IO
//! drivers that tie them to the object table and the stream manager:
//! [`ReplicationServer`] and [`ReplicationClient`].
//!
//! The drivers never touch a socket or a clock. A server tick is
//!
//! ```text
//! server.tick(now)                       // quantize dirty objects once, hand changes to every connection
//! for each connection, for each packet:  // the transport writes its header, then
//!     server.write_packet(conn, seq, &mut writer)
//! on each delivery notification:         // in send order
//!     server.process_delivery(conn, seq, status)
//! ```
//!
//! Or, for many connections at once, in passes of one packet each:
//! [`ReplicationServer::write_packets`] writes every connection of a pass on
//! [`ReplicationConfig::writer_threads`] threads. While a pass is written each
//! connection's writer reads the object table, the baseline storage and the interest
//! state, and changes only its own state and its thread's tick cache (`encode`: the
//! tick's encoded segments and predictions, the pass's recorded objects sections,
//! which a connection in step with an earlier one of the pass replays instead of
//! writing its own). Connections in step also hold one copy of their send states and
//! of their per-object baselines between them, copy-on-write (`group`): a connection
//! holding the copy another moved in the pass (with the tick's changes, a replayed
//! section or the fates of its packets) takes the result. The threads (`threads`)
//! write each group's leader first, then its followers, on the leader's thread unless
//! a thread out of work steals them (replaying the leader's section there); a small
//! pass of one group stays on the calling thread. What connections change in common —
//! the snapshots their nominations take, references, budgets — is settled after the
//! pass, in the order of the packets, so the bytes do not depend on the thread count.
//! A connection that replayed another's section settles on that one's lineages in
//! bulk: the leader counts its holders, and the follower takes the lineage ids when it
//! first reads them (most never: its packets' fates are taken from a connection in
//! step, whose packets have the same origins).
//! [`ReplicationServer::tick`] runs each writer's lifecycle stage; a writer takes the
//! tick's change masks, and the baselines its delivered packets promote, when it is
//! next written, on the same threads, right before it reads the send states and
//! baselines they change (or sooner, when anything else reaches it). So the work per
//! connection between passes is small, and the writer threads do the rest.
//!
//! and the client feeds each received packet (after the connection header, with the
//! header's sequence) to [`ReplicationClient::read_packet`], then drains
//! [`ReplicationEvent`]s. The client also writes its streams into every packet it sends
//! ([`ReplicationClient::write_packet`]: it reports objects it could not decode, so the
//! server stops sending them) and is told each packet's fate.
//!
//! Hooks for the layers above:
//! - interest management is built in: every connection's writer gets
//!   [`InterestHooks`] over the server's [`InterestManager`](crate::interest::InterestManager);
//!   game code steers it with the `ReplicationServer` methods `set_object_filter`,
//!   `set_object_groups`, `set_object_position` / `set_location_fn`,
//!   `set_view_position`, `set_group_subscription`, `set_object_allowed` /
//!   `set_object_denied`, `set_object_prioritizer`, `set_owner` (with the autonomous
//!   flag), `set_custom_condition`, `set_connection_budget`, `set_max_extra_packets`
//!   and `set_interest_config` (see `interest_hooks.rs`);
//! - scope: [`ReplicationServer::set_in_scope`] (per connection, per root object);
//! - priority and per-member filtering: [`WriterHooks`], installed with
//!   [`ReplicationServer::set_writer_hooks`]; the built-in conditions are
//!   [`apply_conditions`]; [`ReplicationServer::mark_members_dirty`] re-owes members;
//! - delta compression ([`baseline`]): [`ReplicationConfig::delta`],
//!   [`ReplicationServer::set_type_delta_compression`] and
//!   [`ReplicationServer::invalidate_baselines`] (for condition changes);
//! - huge objects: a batch that does not fit in an empty packet parks the object in
//!   [`ReplicatedObjectState::HugeObject`] and travels as a blob split into parts on the
//!   huge-object stream (`writer::huge`: [`HugeObjectStream`], [`HugeObjectReceiver`]);
//! - messages and RPCs: the [`crate::replication::attachment`] message stream of every connection.
//!
//! Packets may be lost, duplicated or reordered on the way: the connection hands the
//! reader each packet once and in send order (dropping, unacknowledged, one older than
//! the newest received), and the writer re-sends the *current* values of lost members.
//! Packets fed to the reader directly in another order are still safe: it never lets
//! an older packet overwrite a newer value (see [`ReplicationReader`]), though a plain
//! update in such a packet may not decode (see [`wire`]).
//!
//! ```
//! use replicate::bits::{BitReader, BitWriter};
//! use replicate::internals::connection::{DeliveryStatus, PacketSequence};
//! use replicate::internals::protocol::ProtocolRegistry;
//! use replicate::internals::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let registry = Arc::new(ProtocolRegistry::default());
//! let mut server = ReplicationServer::new(registry.clone(), ReplicationConfig::default());
//! let mut client = ReplicationClient::new(registry, ReplicationConfig::default());
//! let conn = server.add_connection();
//! // let door = server.objects_mut().spawn(Door::default())?;
//! server.tick(Duration::ZERO);
//! let mut w = BitWriter::with_capacity_bytes(1200);
//! server.write_packet(conn, PacketSequence(0), &mut w);
//! let bytes = w.finish().unwrap();
//! client.read_packet(Duration::ZERO, PacketSequence(0), &mut BitReader::new(&bytes)).unwrap();
//! server.process_delivery(conn, PacketSequence(0), DeliveryStatus::Delivered);
//! assert!(client.drain_events().is_empty());
//! ```

pub mod attachment;
pub mod baseline;
mod encode;
mod group;
mod insights;
mod interest_hooks;
mod reader;
mod record;
mod replay;
mod scheduler;
mod streams;
mod threads;
use streams::{ClientStreamManager, ClientStreams, ServerStreamManager, ServerStreams};
use threads::Share;
pub mod wire;
mod writer;

pub use baseline::{
    BaselineStats, BaselineStorage, DeltaSettings, MAX_BASELINE_COUNT, SharedBaselineStorage,
    extrapolate,
};
pub use group::{GroupCopies, StateCopies};
pub use interest_hooks::{InterestHooks, SharedInterest};
pub use reader::{ClientObject, ClientWorld, ReaderStats, ReferenceResolver, ReplicationReader};
pub use record::{
    INLINE_MASK_BITS, INVALID_BASELINE_INDEX, MaskPool, PacketRecord, RecordInfo, RecordKind,
    ReplicatedObjectState, ReplicationInfo,
};
pub use scheduler::{ScheduledObject, sort_scheduled_objects};
pub use threads::PassTimes;
pub use wire::{
    BATCH_SIZE_BITS, ObjectReadError, SHORT_BATCH_SIZE_BITS, WIDE_BATCH_SIZE, read_batch_size,
    write_batch_size,
};
pub use writer::huge::{
    HugeObjectReceiver, HugeObjectStream, HugeReceiveStats, HugeSendQueue, HugeSendStats,
    SharedHugeQueue,
};
pub use writer::{
    FramingBits, MAX_RECOVERIES, MAX_REPORTS_PER_PACKET, RETAINED_OBJECT_BYTES, ReplicationWriter,
    TypeTraffic, WriterHooks, WriterStats, apply_conditions,
};

use crate::bits::{BitReader, BitWriter};
use crate::connection::{DeliveryStatus, PacketSequence};
use crate::handle::NetRefHandle;
use crate::object::{ConnectionId, ObjectTable};
use crate::protocol::{ErasedObject, ErasedState, ProtocolIndex, ProtocolRegistry};
use crate::state::{ChangeMask, Replicated};
use crate::stream::tokens::{SharedExports, SharedImports, TokenStream};
use crate::stream::{DataStream, SendStatus, StreamError, StreamKey, TooManyStreams, WriteResult};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings of the replication core (Iris's CVars, with their defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicationConfig {
    /// Dirty objects with a lower accumulated priority wait (default 1.0).
    pub scheduling_threshold: f32,
    /// How many objects each partial-sort chunk orders (default 64).
    pub partial_sort_count: usize,
    /// Added to an object's priority when a packet carrying it is lost (default 1.0).
    pub lost_priority_bump: f32,
    /// Consecutive objects that may fail to fit before a packet is closed (default 8).
    pub max_fit_failures: u32,
    /// Below this many free bits no further batch is attempted (default 24).
    pub min_batch_bits: usize,
    /// End of replication (destroy, tear-off) runs after the packet's state is applied
    /// (default true).
    pub defer_end_replication: bool,
    /// Parked references use the hot/cold caches (default true); otherwise every
    /// reference is retried on every pass.
    pub use_resolving_cache: bool,
    /// How long a parked reference stays hot (default 1000 ms).
    pub hot_resolving_lifetime: Duration,
    /// How often cold references are retried (default 200 ms).
    pub cold_resolving_retry: Duration,
    /// Most objects a client accepts (default 2^20).
    pub max_client_objects: usize,
    /// Messages and huge objects (see [`crate::replication::attachment`]).
    pub attachments: crate::replication::attachment::AttachmentConfig,
    /// Delta compression against acknowledged baselines (on by default).
    pub delta: DeltaSettings,
    /// Threads [`ReplicationServer::write_packets`] writes connections on (default 1:
    /// the calling thread only). The packets are the same bytes whatever the count.
    /// Connections in step (same scope, same acknowledgements) are written after one
    /// leader, mostly on one thread, so more threads pay off where connections
    /// differ: clients at different round trips form a group each, and connections
    /// with their own scope write their own sections. A pass of fewer than 160
    /// connections all in step stays on the calling thread: the others could only
    /// replay its leader's section, at more than it saves. The server keeps the threads
    /// besides the calling one in a pool of its own, started with it, so a write pass
    /// starts none; they stay awake (spinning) for up to a millisecond after a pass,
    /// for the tick's next one, unless [`ReplicationServer::write_passes`] ended the
    /// tick's passes.
    pub writer_threads: usize,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            scheduling_threshold: 1.0,
            partial_sort_count: 64,
            lost_priority_bump: 1.0,
            max_fit_failures: 8,
            min_batch_bits: 24,
            defer_end_replication: true,
            use_resolving_cache: true,
            hot_resolving_lifetime: Duration::from_millis(1000),
            cold_resolving_retry: Duration::from_millis(200),
            max_client_objects: 1 << 20,
            attachments: Default::default(),
            delta: DeltaSettings::default(),
            writer_threads: 1,
        }
    }
}

/// What happened to replicated objects on the receiving side, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicationEvent {
    /// A new object was created from the network.
    Spawned {
        /// Its handle.
        handle: NetRefHandle,
        /// Its type's wire index.
        protocol: ProtocolIndex,
    },
    /// Members of an object were updated (notify hooks already ran).
    MembersChanged {
        /// The object.
        handle: NetRefHandle,
        /// The members applied.
        mask: ChangeMask,
    },
    /// Reference members withheld until their targets arrived were applied.
    ReferencesResolved {
        /// The object holding the references.
        handle: NetRefHandle,
        /// The members applied.
        mask: ChangeMask,
    },
    /// An object was destroyed.
    Destroyed {
        /// Its handle.
        handle: NetRefHandle,
    },
    /// The server stopped replicating an object; the game keeps it with its last state
    /// ([`ReplicationClient::take_torn_off`]).
    TornOff {
        /// Its handle.
        handle: NetRefHandle,
    },
    /// An object's tags changed (after its creation).
    TagsChanged {
        /// The object.
        handle: NetRefHandle,
    },
    /// An object's batch could not be used; a broken object's later batches are skipped.
    ObjectError {
        /// The object.
        handle: NetRefHandle,
        /// What went wrong.
        error: ObjectReadError,
    },
}

/// Why a stream could not be added to a server connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddStreamError {
    /// No open connection has this id.
    #[error("no open connection {0}: add streams after `add_connection`")]
    NoConnection(ConnectionId),
    /// The connection already has the most streams a packet can carry.
    #[error(transparent)]
    TooMany(#[from] TooManyStreams),
}

/// One connection on the server.
struct ServerConnection {
    streams: ServerStreamManager,
}

impl ServerConnection {
    fn writer(&self) -> &ReplicationWriter {
        &self.streams.fixed().writer
    }

    fn writer_mut(&mut self) -> &mut ReplicationWriter {
        &mut self.streams.fixed_mut().writer
    }
}

/// A packet for [`ReplicationServer::write_packets`] to write: the connection, the
/// packet's sequence, the writer (after the transport's header) and, once written,
/// the result.
#[derive(Debug)]
pub struct PacketWrite {
    /// The connection.
    pub connection: ConnectionId,
    /// The packet's sequence (call [`ReplicationServer::process_delivery`] with it).
    pub sequence: PacketSequence,
    /// Where the packet's streams go, up to its capacity.
    pub writer: BitWriter,
    /// What was written (`NoData` before).
    pub result: WriteResult,
}

impl PacketWrite {
    /// A packet to write for `connection` into `writer`.
    pub fn new(connection: ConnectionId, sequence: PacketSequence, writer: BitWriter) -> Self {
        Self {
            connection,
            sequence,
            writer,
            result: WriteResult::NoData,
        }
    }
}

/// One packet of a write pass.
struct WriteJob<'w> {
    connection: ConnectionId,
    sequence: PacketSequence,
    writer: &'w mut BitWriter,
    result: WriteResult,
}

/// Writes a chunk of a pass's packets on one thread, lending `cache` to each
/// connection's writer: `allowed` is the connection's allowance in bits.
///
/// With `publish`, the chunk's first packet leads a group whose other packets other
/// threads may write: what they need of the leader's (see [`Published`]) is
/// published there once it is written (or skipped).
fn write_chunk(
    objects: &ObjectTable,
    cache: &mut Box<encode::TickCache>,
    chunk: &mut [Grouped<'_, '_, '_>],
    publish: Option<&PublishedLeader>,
) {
    // The first packet's trace, if it records one, is the one recorded after these,
    // and its moves the ones logged after these.
    let publish = publish.map(|slot| {
        let logged = (cache.transitions.len(), cache.fates.len());
        (slot, cache.replays.recorded(), logged)
    });
    for (k, (_, (job, conn, allowed, _))) in chunk.iter_mut().enumerate() {
        if let Some(conn) = conn.as_deref_mut().filter(|_| *allowed != Some(0)) {
            let writer = &mut *job.writer;
            let sub = writer.begin_substream(allowed.unwrap_or(usize::MAX));
            // The tick's changes and the fates of delivered packets meet the send
            // states and baselines right before the write reads them.
            conn.writer_mut().catch_up_in_pass(objects, Some(cache));
            std::mem::swap(conn.writer_mut().cache_mut(), cache);
            job.result = conn.streams.write_packet(objects, job.sequence, writer);
            std::mem::swap(conn.writer_mut().cache_mut(), cache);
            if writer.commit_substream(sub).is_err() {
                // Every stream rolls back its own overflow; nothing is left to pay for.
                tracing::error!(
                    "connection {}: the packet's streams overflowed the budget",
                    job.connection
                );
            }
        }
        if let Some((slot, recorded, (transitions, fates))) = publish.filter(|_| k == 0) {
            // Set once: only this thread writes the group's leader.
            let _ = slot.set(Published {
                trace: cache.replays.recorded_since(recorded),
                transitions: cache.transitions.since(transitions),
                fates: cache.fates.since(fates),
            });
        }
    }
}

/// What a group's leader left on its thread that the threads writing its followers
/// need: the trace it recorded (`None`: it recorded none), and how its catching up
/// with the tick's changes and with packet fates moved the group's shared copies. A
/// follower holding the copy the leader held finds its move by pointer instead of
/// making it again (taking the tick's changes, settling fates) on an own copy.
struct Published {
    trace: Option<Arc<replay::PacketTrace>>,
    transitions: group::Transitions,
    fates: baseline::FateMoves,
}

impl Published {
    /// Lets `cache`'s thread write the group's followers as the leader's thread does.
    fn adopt_into(&self, cache: &mut encode::TickCache) {
        cache.replays.adopt(self.trace.clone());
        cache.transitions.import(&self.transitions);
        cache.fates.import(&self.fates);
    }
}

/// A group leader's [`Published`], once written.
type PublishedLeader = std::sync::OnceLock<Published>;

/// One packet of a write pass: the job, its connection (`None`: not open, or named
/// twice), the bits the interest layer allows it and where it started.
type PacketWork<'j, 'w> = (
    &'j mut WriteJob<'w>,
    Option<&'j mut ServerConnection>,
    Option<usize>,
    usize,
);

/// Groups of connections in step whose copies hold the same states as a larger
/// group's take its copies (groups part when their connections are written on
/// different threads, each following a section of its own): one group again, its
/// connections written after one leader.
fn join_parted_groups(work: &mut [PacketWork<'_, '_>]) {
    let writers = || {
        work.iter()
            .filter_map(|w| w.1.as_deref().map(ServerConnection::writer))
    };
    // Each group's copies, by how many hold them, largest first.
    let mut copies: Vec<(usize, writer::GroupCopy)> = Vec::new();
    for w in writers() {
        match copies.iter_mut().find(|(_, c)| w.holds(c)) {
            Some((n, _)) => *n += 1,
            None => copies.extend(w.copies().map(|c| (1, c))),
        }
    }
    copies.sort_by_key(|&(n, _)| std::cmp::Reverse(n));
    // Each group joins the first larger one it equals (one that joined none itself).
    let mut kept: Vec<&writer::GroupCopy> = Vec::with_capacity(copies.len());
    for (_, c) in &copies {
        match kept.iter().find(|k| writer::same_states(c, k)) {
            Some(into) => {
                for w in work.iter_mut() {
                    if let Some(conn) = w.1.as_deref_mut() {
                        conn.writer_mut().swap_copies(c, into);
                    }
                }
            }
            None => kept.push(c),
        }
    }
}

/// A pass's packet with the rank of its group (see [`in_groups`]).
type Grouped<'a, 'j, 'w> = (usize, &'a mut PacketWork<'j, 'w>);

/// A pass's packets in groups of connections in step (those that share a copy of
/// their send states as the pass begins; a connection with its own copy is alone),
/// each with its group's rank: the largest group first, each group in job order.
/// Writer threads take whole groups where they can ([`on_writer_threads`]), so a
/// group's followers replay its leader's section on the leader's thread.
fn in_groups<'a, 'j, 'w>(work: &'a mut [PacketWork<'j, 'w>]) -> Vec<Grouped<'a, 'j, 'w>> {
    join_parted_groups(work);
    let copy = |w: &PacketWork<'_, '_>| {
        let conn = w.1.as_deref()?;
        let shared = conn.writer().send_states().shared()?;
        Some(std::sync::Arc::as_ptr(shared) as usize)
    };
    // (alone, copy or job), job: a group's packets next to each other, in job order.
    let mut keyed: Vec<_> = work
        .iter_mut()
        .enumerate()
        .map(|(k, w)| (copy(w).map_or((true, k), |c| (false, c)), k, Some(w)))
        .collect();
    keyed.sort_unstable_by_key(|&(key, k, _)| (key, k));
    // Each group's size (largest first) and first job, and where it starts.
    let mut groups = Vec::new();
    let mut start = 0;
    while let Some(&(key, k, _)) = keyed.get(start) {
        let len = keyed[start..].iter().take_while(|e| e.0 == key).count();
        groups.push((std::cmp::Reverse(len), k, start));
        start += len;
    }
    groups.sort_unstable();
    let mut grouped = Vec::with_capacity(keyed.len());
    for (rank, &(std::cmp::Reverse(len), _, start)) in groups.iter().enumerate() {
        for (_, _, w) in &mut keyed[start..start + len] {
            grouped.extend(w.take().map(|w| (rank, w)));
        }
    }
    grouped
}

/// Whether a pass's connections (two or more) all hold the same shared copy of their
/// send states: in step, all but one replay the section that one writes.
fn all_in_step(work: &[PacketWork<'_, '_>]) -> bool {
    one_shared_copy(work.iter().filter_map(|w| {
        let shared = w.1.as_deref()?.writer().send_states().shared();
        Some(shared.map(|s| std::sync::Arc::as_ptr(s) as usize))
    }))
}

/// Whether there are two or more `copies` (each a shared copy's address, or `None`
/// for a connection's own), all the same shared one.
fn one_shared_copy(mut copies: impl Iterator<Item = Option<usize>>) -> bool {
    match (copies.next(), copies.next()) {
        (Some(Some(first)), Some(second)) => {
            second == Some(first) && copies.all(|c| c == Some(first))
        }
        _ => false,
    }
}

/// Items `a` and `b` of `items`, both mutably (`None` when they are the same or one is
/// out of range).
fn two_mut<T>(items: &mut [T], a: usize, b: usize) -> Option<(&mut T, &mut T)> {
    if a == b || a.max(b) >= items.len() {
        return None;
    }
    let (low, high) = items.split_at_mut(a.max(b));
    let (first, second) = (&mut low[a.min(b)], &mut high[0]);
    Some(if a < b {
        (first, second)
    } else {
        (second, first)
    })
}

/// Connection `id`, borrowed apart from the object table the caller also needs,
/// caught up with what was put off until it is next reached: the latest tick's changes
/// (see [`ReplicationServer::tick`]) and the fates of delivered packets (see
/// [`ReplicationServer::process_delivery`]). Whatever reaches a connection's state goes
/// through here, but the write path, the tick and deliveries, which catch up
/// themselves as far as they need.
fn open_connection<'c>(
    connections: &'c mut [Option<ServerConnection>],
    objects: &ObjectTable,
    id: ConnectionId,
) -> Option<&'c mut ServerConnection> {
    let conn = connections.get_mut(id as usize).and_then(Option::as_mut)?;
    conn.writer_mut().catch_up(objects);
    Some(conn)
}

/// Connection `id`'s writer ([`open_connection`]).
fn writer_of<'c>(
    connections: &'c mut [Option<ServerConnection>],
    objects: &ObjectTable,
    id: ConnectionId,
) -> Option<&'c mut ReplicationWriter> {
    open_connection(connections, objects, id).map(ServerConnection::writer_mut)
}

/// The server-side driver: the object table plus, per connection, a stream manager
/// with the connection's streams (replication writer, tokens, huge
/// objects, messages) and any added later.
pub struct ReplicationServer {
    objects: ObjectTable,
    connections: Vec<Option<ServerConnection>>,
    config: ReplicationConfig,
    now: Duration,
    baselines: SharedBaselineStorage,
    /// Filters, prioritizers, conditions switches, budgets (see `interest_hooks`).
    interest: SharedInterest,
    /// Network insights: how much of each packet is attributed.
    attribution: crate::insights::AttributionLevel,
    /// One tick cache per writer thread, lent to each connection's writer the thread
    /// writes: each batch segment is encoded once per tick and thread and copied for
    /// the other connections. Boxed: each is swapped with the writer's own for a
    /// packet, by pointer.
    #[allow(clippy::vec_box)]
    caches: Vec<Box<encode::TickCache>>,
    /// The writer threads besides the calling one (none with one writer thread, or
    /// when the system would not start them: then each pass starts its own).
    pool: Option<threads::WriterPool>,
    /// Where the write passes spent their time.
    pass_times: PassTimes,
}

impl std::fmt::Debug for ReplicationServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationServer")
            .field("objects", &self.objects)
            .field("connections", &self.connections.iter().flatten().count())
            .finish()
    }
}

impl ReplicationServer {
    /// A server replicating the types in `registry`.
    pub fn new(registry: Arc<ProtocolRegistry>, config: ReplicationConfig) -> Self {
        Self {
            objects: ObjectTable::new(registry, 0),
            connections: Vec::new(),
            baselines: Arc::new(std::sync::RwLock::new(BaselineStorage::new(config.delta))),
            caches: (0..config.writer_threads.max(1))
                .map(|_| Box::default())
                .collect(),
            pool: (config.writer_threads > 1)
                .then(|| threads::WriterPool::new(config.writer_threads - 1))
                .flatten(),
            config,
            now: Duration::ZERO,
            interest: Self::new_interest(),
            attribution: crate::insights::AttributionLevel::Off,
            pass_times: PassTimes::default(),
        }
    }

    /// Turns network-insights attribution on or off for every connection, present and
    /// future (see [`crate::insights`]); read each packet's split with
    /// [`packet_attribution`](Self::packet_attribution).
    pub fn set_attribution(&mut self, level: crate::insights::AttributionLevel) {
        if self.attribution == level {
            return;
        }
        self.attribution = level;
        for conn in self.connections.iter_mut().flatten() {
            Self::apply_attribution(conn, level);
        }
    }

    fn apply_attribution(conn: &mut ServerConnection, level: crate::insights::AttributionLevel) {
        conn.streams.set_section_bits(level.is_on());
        conn.writer_mut().set_attribution(level);
    }

    /// The attribution level.
    pub fn attribution(&self) -> crate::insights::AttributionLevel {
        self.attribution
    }

    /// The split of the last packet written for connection `id` (stream framing, each
    /// stream, the replication stream's parts), when attribution is on. The caller
    /// adds what lies outside the streams: the header, the padding and the wire size.
    pub fn packet_attribution(&self, id: ConnectionId) -> Option<crate::insights::PacketBits> {
        let conn = self.conn(id)?;
        let sections = conn.streams.section_bits()?;
        let wrote = |index: usize| sections.streams.get(index).is_some_and(|&bits| bits > 0);
        let replication = if wrote(ServerStreams::REPLICATION) {
            conn.writer().packet_attribution().cloned()
        } else {
            None
        };
        // The huge-object stream's parts per type, when it wrote into this packet.
        let huge_types = if wrote(ServerStreams::HUGE) {
            conn.streams
                .fixed()
                .huge
                .last_packet_types()
                .iter()
                .map(|&(protocol, parts, bits)| crate::insights::TypeBits {
                    protocol,
                    batches: parts,
                    creations: 0,
                    bits,
                })
                .collect()
        } else {
            Vec::new()
        };
        Some(crate::insights::PacketBits {
            stream_framing: sections.framing,
            streams: sections.streams.clone(),
            replication,
            huge_types,
            ..Default::default()
        })
    }

    /// The split of the last packet read from connection `id` (stream framing and each
    /// stream's section), when attribution is on. The caller adds the header, the
    /// padding and the wire size.
    pub fn received_attribution(&self, id: ConnectionId) -> Option<crate::insights::PacketBits> {
        let sections = self.conn(id)?.streams.read_section_bits()?;
        Some(crate::insights::PacketBits {
            stream_framing: sections.framing,
            streams: sections.streams.clone(),
            ..Default::default()
        })
    }

    /// Takes the member value ranges connection `id`'s writer observed since the last
    /// call (attribution at the `Members` level).
    pub fn take_member_ranges(&mut self, id: ConnectionId) -> Vec<crate::insights::MemberRange> {
        writer_of(&mut self.connections, &self.objects, id)
            .map(ReplicationWriter::take_member_ranges)
            .unwrap_or_default()
    }

    /// The names of a connection's data streams, by index.
    pub fn stream_names(&self, id: ConnectionId) -> Vec<String> {
        self.conn(id)
            .map(|c| c.streams.stream_names())
            .unwrap_or_default()
    }

    /// The object table.
    pub fn objects(&self) -> &ObjectTable {
        &self.objects
    }

    /// The object table, to spawn, change, poll and destroy objects.
    pub fn objects_mut(&mut self) -> &mut ObjectTable {
        // States may change: segments encoded from them are void.
        for cache in &mut self.caches {
            cache.clear();
        }
        &mut self.objects
    }

    /// The time of the last tick.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The configuration.
    pub fn config(&self) -> &ReplicationConfig {
        &self.config
    }

    /// The ids of the open connections.
    pub fn connection_ids(&self) -> Vec<ConnectionId> {
        (0..self.connections.len())
            .filter(|&i| self.connections[i].is_some())
            .map(|i| i as ConnectionId)
            .collect()
    }

    /// Adds a connection; every live object starts replicating to it.
    pub fn add_connection(&mut self) -> ConnectionId {
        let id = self
            .connections
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.connections.len()) as ConnectionId;
        let exports = SharedExports::default();
        let mut writer = ReplicationWriter::with_exports(id, self.config.clone(), exports.clone());
        let huge = HugeSendQueue::shared(&self.config.attachments);
        writer.set_huge_queue(huge.clone());
        writer.set_baseline_storage(self.baselines.clone());
        self.interest_add_connection(id, &mut writer);
        writer.start_all(&mut self.objects);
        let streams = ServerStreamManager::with_fixed(ServerStreams {
            writer,
            tokens: TokenStream::with_tables(exports, SharedImports::default()),
            huge: HugeObjectStream::new(huge),
            messages: crate::replication::attachment::MessageStream::new(
                self.objects.registry().clone(),
                &self.config.attachments,
                Some(id),
            ),
        });
        let mut conn = ServerConnection { streams };
        if self.attribution.is_on() {
            Self::apply_attribution(&mut conn, self.attribution);
        }
        if (id as usize) < self.connections.len() {
            self.connections[id as usize] = Some(conn);
        } else {
            self.connections.push(Some(conn));
        }
        id
    }

    /// Removes a connection, discarding its in-flight records.
    pub fn remove_connection(&mut self, id: ConnectionId) {
        let Some(mut conn) = self.connections.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        self.interest_remove_connection(id);
        conn.streams.discard_all(&mut self.objects);
        conn.writer_mut().release_all(&mut self.objects);
    }

    fn conn(&self, id: ConnectionId) -> Option<&ServerConnection> {
        self.connections.get(id as usize).and_then(Option::as_ref)
    }

    fn conn_mut(&mut self, id: ConnectionId) -> Option<&mut ServerConnection> {
        open_connection(&mut self.connections, &self.objects, id)
    }

    /// The replication writer of a connection. Its send states hold the latest
    /// tick's change masks, and its baselines the promotions of delivered packets,
    /// once the connection was written or reached mutably since (see
    /// [`tick`](Self::tick) and [`process_delivery`](Self::process_delivery)).
    pub fn writer(&self, id: ConnectionId) -> Option<&ReplicationWriter> {
        self.conn(id).map(ServerConnection::writer)
    }

    /// The token stream of a connection (export strings to it); it shares its export
    /// table with the connection's writer.
    pub fn tokens_mut(&mut self, id: ConnectionId) -> Option<&mut TokenStream> {
        Some(&mut self.conn_mut(id)?.streams.fixed_mut().tokens)
    }

    /// The replication writer of a connection, mutably.
    pub fn writer_mut(&mut self, id: ConnectionId) -> Option<&mut ReplicationWriter> {
        self.conn_mut(id).map(ServerConnection::writer_mut)
    }

    /// The huge-object stream of a connection (its parts in flight and counters).
    pub fn huge_stream(&self, id: ConnectionId) -> Option<&HugeObjectStream> {
        Some(&self.conn(id)?.streams.fixed().huge)
    }

    /// The message stream of a connection.
    pub fn messages_mut(
        &mut self,
        id: ConnectionId,
    ) -> Option<&mut crate::replication::attachment::MessageStream> {
        Some(&mut self.conn_mut(id)?.streams.fixed_mut().messages)
    }

    /// Adds a stream to a connection, after the replication, token, huge-object and
    /// message streams. The client must add the matching stream at the
    /// same position ([`ReplicationClient::add_stream`]). Connections given the same
    /// streams in the same order get equal keys.
    pub fn add_stream<T: DataStream<ObjectTable>>(
        &mut self,
        id: ConnectionId,
        stream: T,
    ) -> Result<StreamKey<T>, AddStreamError> {
        self.conn_mut(id)
            .ok_or(AddStreamError::NoConnection(id))?
            .streams
            .add_stream(stream)
            .map_err(AddStreamError::from)
    }

    /// A stream added to connection `id` ([`add_stream`](Self::add_stream)).
    pub fn stream_mut<T: DataStream<ObjectTable>>(
        &mut self,
        id: ConnectionId,
        key: StreamKey<T>,
    ) -> Option<&mut T> {
        self.conn_mut(id)?.streams.stream_mut(key)
    }

    /// Replaces the hooks of a connection's writer. Every connection starts with the
    /// interest layer's [`InterestHooks`]; replacing them turns the prioritizers and
    /// `Custom` switches off for that connection (filters and budgets stay).
    pub fn set_writer_hooks(&mut self, id: ConnectionId, hooks: Box<dyn WriterHooks>) -> bool {
        match self.writer_mut(id) {
            Some(w) => {
                w.set_hooks(hooks);
                true
            }
            None => false,
        }
    }

    /// Marks members of an object as owed to one connection (see
    /// [`WriterHooks::filter_members`]).
    pub fn mark_members_dirty(
        &mut self,
        id: ConnectionId,
        handle: NetRefHandle,
        mask: &ChangeMask,
    ) {
        let Some(index) = self.objects.index_of(handle) else {
            return;
        };
        if let Some(w) = writer_of(&mut self.connections, &self.objects, id) {
            w.mark_members_dirty(&self.objects, index, mask);
        }
    }

    /// Pauses or resumes a stream of a connection by name.
    pub fn set_stream_status(&mut self, id: ConnectionId, name: &str, status: SendStatus) -> bool {
        self.conn_mut(id)
            .is_some_and(|c| c.streams.set_send_status(name, status))
    }

    /// Puts a root object in or out of a connection's scope (all objects are in scope
    /// by default).
    pub fn set_in_scope(&mut self, id: ConnectionId, handle: NetRefHandle, in_scope: bool) {
        let Some(index) = self.objects.index_of(handle) else {
            return;
        };
        if let Some(w) = writer_of(&mut self.connections, &self.objects, id) {
            w.set_in_scope(&mut self.objects, index, in_scope);
        }
    }

    /// One server tick: quantizes every dirty push-mode object once, hands the tick's
    /// changes (creations, destroys, change masks) to every connection, then clears
    /// them. Poll-mode objects must have been polled before.
    ///
    /// A connection takes the change masks (and the priorities its objects gain) when
    /// it is next written, or sooner if anything else reads or changes its state
    /// through the server; [`writer`](Self::writer) shows its state without them until
    /// then.
    pub fn tick(&mut self, now: Duration) {
        // Changes of the last tick not taken yet (a connection not written since);
        // fates of delivered packets can wait for the next write.
        for conn in self.connections.iter_mut().flatten() {
            conn.writer_mut().take_tick_changes(&self.objects);
        }
        self.now = now;
        // Segments are kept for other connections to copy: worth it with two or more
        // per thread.
        let shared = self.connections.iter().flatten().count() > self.caches.len();
        for cache in &mut self.caches {
            cache.clear();
            cache.segments.set_shared(shared);
        }
        {
            let mut storage = baseline::write_storage(&self.baselines);
            storage.learn_predictions();
            storage.begin_frame();
        }
        self.objects.begin_tick();
        self.interest_begin_tick();
        // The tick's changes: what changes the table one connection after another;
        // the change masks wait for each connection's next write (on the writer
        // threads).
        for conn in self.connections.iter_mut().flatten() {
            conn.writer_mut().update_lifecycle(&mut self.objects);
        }
        self.objects.seal_tick();
        for conn in self.connections.iter_mut().flatten() {
            conn.writer_mut().defer_tick_changes(&self.objects);
            conn.streams.fixed_mut().after_tick(&self.objects, now);
        }
        self.objects.end_tick();
    }

    /// Writes connection `id`'s streams for packet `sequence` into `writer` (after the
    /// transport's header). Call [`process_delivery`](Self::process_delivery) for every
    /// sequence written, in send order. The streams write at most what the connection's
    /// bandwidth budget allows, and nothing once the tick's packets
    /// (`1 + max_extra_packets`) are used up: then the result is `NoData`.
    ///
    /// [`write_packets`](Self::write_packets) writes many connections' packets at once
    /// (on [`ReplicationConfig::writer_threads`] threads).
    pub fn write_packet(
        &mut self,
        id: ConnectionId,
        sequence: PacketSequence,
        writer: &mut BitWriter,
    ) -> WriteResult {
        let mut jobs = [WriteJob {
            connection: id,
            sequence,
            writer,
            result: WriteResult::NoData,
        }];
        self.write_jobs(&mut jobs);
        jobs[0].result
    }

    /// Writes one packet for each of several connections, as
    /// [`write_packet`](Self::write_packet) would one after the other, on up to
    /// [`ReplicationConfig::writer_threads`] threads: the connections are written
    /// reading the object table and the baseline storage only, and what they change in
    /// common (baselines nominated, budgets spent) is settled after them, in the
    /// order of `packets`. The bytes are the same whatever the thread count. A
    /// connection named twice, or not open, writes nothing (`NoData`).
    ///
    /// Connections in step (their acknowledgements, dirty objects and budgets alike)
    /// write the same objects section: the first one (the leader) writes it, the
    /// others copy it and take its state changes ([`replayed_sections`](Self::replayed_sections)
    /// counts them), on the leader's thread or on another that ran out of work.
    /// Passing the connections together is what lets them share it.
    ///
    /// ```
    /// use replicate::bits::BitWriter;
    /// use replicate::internals::connection::PacketSequence;
    /// use replicate::internals::protocol::ProtocolRegistry;
    /// use replicate::internals::replication::{PacketWrite, ReplicationConfig, ReplicationServer};
    /// use replicate::internals::stream::WriteResult;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let config = ReplicationConfig { writer_threads: 2, ..Default::default() };
    /// let mut server = ReplicationServer::new(Arc::new(ProtocolRegistry::default()), config);
    /// let a = server.add_connection();
    /// let b = server.add_connection();
    /// server.tick(Duration::ZERO);
    /// let mut packets: Vec<PacketWrite> = [a, b]
    ///     .into_iter()
    ///     .map(|c| PacketWrite::new(c, PacketSequence(0), BitWriter::with_capacity_bytes(1200)))
    ///     .collect();
    /// server.write_packets(&mut packets);
    /// // Nothing is replicated yet: nothing to write.
    /// assert!(packets.iter().all(|p| p.result == WriteResult::NoData));
    /// ```
    pub fn write_packets(&mut self, packets: &mut [PacketWrite]) {
        let mut jobs: Vec<WriteJob<'_>> = packets
            .iter_mut()
            .map(|p| WriteJob {
                connection: p.connection,
                sequence: p.sequence,
                writer: &mut p.writer,
                result: WriteResult::NoData,
            })
            .collect();
        self.write_jobs(&mut jobs);
        let results: Vec<WriteResult> = jobs.iter().map(|j| j.result).collect();
        for (p, result) in packets.iter_mut().zip(results) {
            p.result = result;
        }
    }

    /// Writes a tick's packets for several peers in passes: each pass asks `begin` for
    /// a packet of every peer still writing (`None`: none for this peer, which then
    /// stops), writes them all with [`write_packets`](Self::write_packets), and hands
    /// each to `end` with the server (to send it, report its fate, …); `end` says
    /// whether the peer writes another. At most `max_passes` passes.
    ///
    /// ```
    /// use replicate::bits::BitWriter;
    /// use replicate::internals::connection::{DeliveryStatus, PacketSequence};
    /// use replicate::internals::protocol::ProtocolRegistry;
    /// use replicate::internals::replication::{PacketWrite, ReplicationConfig, ReplicationServer};
    /// use replicate::internals::stream::WriteResult;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let mut server =
    ///     ReplicationServer::new(Arc::new(ProtocolRegistry::default()), ReplicationConfig::default());
    /// // A peer: its connection, its next sequence and the packets it sent.
    /// let mut peers: Vec<_> = (0..2).map(|_| (server.add_connection(), 0u16, 0usize)).collect();
    /// server.tick(Duration::ZERO);
    /// server.write_passes(
    ///     &mut peers,
    ///     8,
    ///     |(conn, seq, _)| {
    ///         Some(PacketWrite::new(*conn, PacketSequence(*seq), BitWriter::with_capacity_bytes(1200)))
    ///     },
    ///     |server, (_, seq, sent), packet| {
    ///         if packet.result == WriteResult::NoData {
    ///             return false;
    ///         }
    ///         *seq = seq.wrapping_add(1);
    ///         *sent += 1;
    ///         server.process_delivery(packet.connection, packet.sequence, DeliveryStatus::Delivered);
    ///         packet.result == WriteResult::HasMoreData
    ///     },
    /// );
    /// // Nothing is replicated yet: nothing was sent.
    /// assert!(peers.iter().all(|&(_, _, sent)| sent == 0));
    /// ```
    pub fn write_passes<P>(
        &mut self,
        peers: &mut [P],
        max_passes: usize,
        mut begin: impl FnMut(&mut P) -> Option<PacketWrite>,
        mut end: impl FnMut(&mut Self, &mut P, PacketWrite) -> bool,
    ) {
        let mut writing: Vec<usize> = (0..peers.len()).collect();
        let mut packets = Vec::with_capacity(peers.len());
        let mut owners = Vec::with_capacity(peers.len());
        for _ in 0..max_passes {
            if writing.is_empty() {
                break;
            }
            owners.clear();
            for &i in &writing {
                if let Some(packet) = begin(&mut peers[i]) {
                    packets.push(packet);
                    owners.push(i);
                }
            }
            self.write_packets(&mut packets);
            writing.clear();
            for (&i, packet) in owners.iter().zip(packets.drain(..)) {
                if end(self, &mut peers[i], packet) {
                    writing.push(i);
                }
            }
        }
        // The tick's passes are over: the writer threads need not stay awake.
        if let Some(pool) = &self.pool {
            pool.release();
        }
    }

    /// The write pass behind [`write_packets`](Self::write_packets): budgets, then the
    /// connections (in parallel), then what they changed in common, in job order.
    fn write_jobs(&mut self, jobs: &mut [WriteJob<'_>]) {
        // Each connection's allowance (interest layer: budget, packets per tick) and
        // each open connection once, borrowed apart from the table and the caches.
        let began = Instant::now();
        let connection_count = self.connections.len();
        let mut work: Vec<PacketWork<'_, '_>> = Vec::with_capacity(jobs.len());
        {
            let mut interest = interest_hooks::lock(&self.interest);
            let mut admit =
                |job: &WriteJob<'_>| (interest.begin_packet(job.connection), job.writer.position());
            if let [job] = jobs {
                // A pass of one: no walk over every connection.
                let conn = self
                    .connections
                    .get_mut(job.connection as usize)
                    .and_then(Option::as_mut);
                let (allowed, start) = admit(job);
                work.push((job, conn, allowed, start));
            } else {
                let mut open: Vec<Option<&mut ServerConnection>> =
                    self.connections.iter_mut().map(Option::as_mut).collect();
                for job in jobs.iter_mut() {
                    let conn = open.get_mut(job.connection as usize).and_then(Option::take);
                    let (allowed, start) = admit(job);
                    work.push((job, conn, allowed, start));
                }
            }
        }
        let objects = &self.objects;
        let lone_writer = all_in_step(&work);
        for cache in &mut self.caches {
            cache.begin_pass(work.len());
            cache.segments.set_lone_writer(lone_writer);
        }
        // On one thread, the packets in job order.
        let mut grouped = if self.caches.len() > 1 {
            in_groups(&mut work)
        } else {
            work.iter_mut().map(|w| (0, w)).collect()
        };
        let threads = threads::pass_threads(grouped.iter().map(|&(g, _)| g), self.caches.len());
        // What each group's leader leaves for the other threads (none on one thread).
        let groups = grouped
            .last()
            .filter(|_| threads > 1)
            .map_or(0, |&(g, _)| g + 1);
        let leaders: Vec<PublishedLeader> = (0..groups).map(|_| PublishedLeader::new()).collect();
        let writing = Instant::now();
        threads::on_writer_threads(
            self.pool.as_ref(),
            &mut grouped,
            &mut self.caches[..threads],
            |&(g, _)| g,
            |cache, chunk, share| {
                let leader = chunk.first().and_then(|&(g, _)| leaders.get(g));
                match share {
                    Share::Head { publishes } => {
                        write_chunk(objects, cache, chunk, leader.filter(|_| publishes));
                    }
                    Share::Rest => write_chunk(objects, cache, chunk, None),
                    Share::Stolen => {
                        // Published before the chunk was released.
                        match leader.and_then(|l| l.get()) {
                            Some(published) => published.adopt_into(cache),
                            None => cache.replays.adopt(None),
                        }
                        write_chunk(objects, cache, chunk, None);
                    }
                }
            },
        );
        drop(grouped);
        let settling = Instant::now();
        // The pass's traces read the storage as it stands until it is settled.
        for cache in &mut self.caches {
            cache.end_pass();
        }
        // Settled in job order: nominations take their snapshots, budgets are paid. A
        // connection that replayed another's section settles after every one that
        // wrote its own (its leader among them), on its leader's lineages.
        let mut storage = baseline::write_storage(&self.baselines);
        let mut interest = interest_hooks::lock(&self.interest);
        let mut settled_at: Vec<Option<usize>> = vec![None; connection_count];
        // Connections that wrote their own section first, then those that replayed
        // one (a thread may have written a follower before its leader in job order).
        for followers in [false, true] {
            for k in 0..work.len() {
                let Some((job, Some(conn), _, start)) = work.get_mut(k) else {
                    continue;
                };
                let replayed_from = conn.writer().replayed_from();
                if replayed_from.is_some() != followers {
                    continue;
                }
                let connection = job.connection;
                let bits = job.writer.position().saturating_sub(*start);
                let leader_at =
                    replayed_from.and_then(|id| settled_at.get(id as usize).copied().flatten());
                let (conn, leader) = match leader_at.and_then(|j| two_mut(&mut work, k, j)) {
                    Some((ours, theirs)) => (ours.1.as_deref_mut(), theirs.1.as_deref_mut()),
                    None => (work[k].1.as_deref_mut(), None),
                };
                let Some(conn) = conn else { continue };
                let leader = leader.map(ServerConnection::writer_mut);
                conn.writer_mut().settle(&mut storage, leader);
                if let Some(at) = settled_at.get_mut(connection as usize) {
                    *at = Some(k);
                }
                interest.end_packet(connection, bits);
            }
        }
        // The nominations replayed sections copied join their leaders' lineages, a
        // leader's at once (nothing to add for the others).
        for (_, conn, _, _) in &mut work {
            if let Some(conn) = conn.as_deref_mut() {
                conn.writer_mut().add_joins(&mut storage);
            }
        }
        for cache in &mut self.caches {
            let (delta, full) = cache.take_batch_counts();
            storage.count_batches(delta, full);
            storage.add_prediction_samples(&mut cache.states.predictions);
        }
        // Baselines reserved by these packets are cloned (once) or cancelled now, while
        // the objects' state is still the one written.
        storage.commit_reservations(&self.objects);
        let times = &mut self.pass_times;
        times.passes += 1;
        times.threaded_passes += u64::from(threads > 1);
        times.preparing += writing - began;
        times.writing += settling - writing;
        times.settling += settling.elapsed();
    }

    /// Batch segments copied from another connection's encoding in the same tick, and
    /// segments encoded, since the server started (see [`write_packet`](Self::write_packet)).
    pub fn segment_counts(&self) -> (u64, u64) {
        self.caches.iter().fold((0, 0), |(h, m), c| {
            let (ch, cm) = c.segments.counts();
            (h + ch, m + cm)
        })
    }

    /// Objects sections replayed from a connection in step (written once, copied for
    /// the others) and the batches in them, since the server started.
    pub fn replayed_sections(&self) -> (u64, u64) {
        self.caches.iter().fold((0, 0), |(s, b), c| {
            let (cs, cb) = c.replays.counts();
            (s + cs, b + cb)
        })
    }

    /// Where the write passes spent their time since the server started: what was
    /// spread over the writer threads and what ran on the calling thread.
    pub fn pass_times(&self) -> PassTimes {
        self.pass_times
    }

    /// Connection groups: the copies of their send states and of their per-object
    /// baselines the open connections hold (connections in step share one) and made.
    pub fn group_copies(&self) -> GroupCopies {
        let writers = || self.connections.iter().flatten().map(|c| c.writer());
        GroupCopies {
            send_states: group::count_copies(writers().map(|w| w.send_states())),
            baselines: group::count_copies(writers().map(|w| w.baselines().words())),
        }
    }

    /// The baseline storage shared by every connection (counters, run-time settings).
    pub fn baselines(&self) -> std::sync::RwLockReadGuard<'_, BaselineStorage> {
        baseline::read_storage(&self.baselines)
    }

    /// The baseline storage, to change its run-time settings.
    pub fn baselines_mut(&mut self) -> std::sync::RwLockWriteGuard<'_, BaselineStorage> {
        baseline::write_storage(&self.baselines)
    }

    /// Allows or forbids prediction (coding against an extrapolation of the latest
    /// acknowledged baselines) for type `T` at run time; the global default is
    /// [`DeltaSettings::predict`]. Where it is allowed, the server predicts `T` while
    /// its samples say prediction shortens it ([`BaselineStorage::learn_predictions`]).
    /// Only the server decides: each batch says whether it was predicted. Returns
    /// false when `T` is not registered.
    pub fn set_type_prediction<T: 'static>(&mut self, enabled: bool) -> bool {
        match self.objects.registry().index_of::<T>() {
            Some(p) => {
                baseline::write_storage(&self.baselines).set_type_prediction(p, enabled);
                true
            }
            None => false,
        }
    }

    /// Turns delta compression on or off for type `T` at run time (overrides
    /// `#[net(delta = false)]`; the global switch is [`ReplicationConfig::delta`]).
    /// Returns false when `T` is not registered.
    pub fn set_type_delta_compression<T: 'static>(&mut self, enabled: bool) -> bool {
        match self.objects.registry().index_of::<T>() {
            Some(p) => {
                baseline::write_storage(&self.baselines).set_type_enabled(p, enabled);
                true
            }
            None => false,
        }
    }

    /// Releases connection `id`'s baselines of an object and its subobjects, merging
    /// their masks back (call when a condition that decides what the connection
    /// receives changed: owner, custom switch). Owner changes call it by themselves.
    pub fn invalidate_baselines(&mut self, id: ConnectionId, handle: NetRefHandle) {
        let Some(index) = self.objects.index_of(handle) else {
            return;
        };
        if let Some(w) = writer_of(&mut self.connections, &self.objects, id) {
            w.invalidate_baselines(&self.objects, index);
        }
    }

    /// The fate of packet `sequence` of connection `id`.
    ///
    /// A delivered packet of plain updates only promotes the baselines it nominated,
    /// and that waits until the connection is next written (on the writer threads,
    /// where its baselines are read right after) or otherwise reached through the
    /// server; [`writer`](Self::writer) shows the baselines without it until then. Any
    /// other fate is settled at once.
    pub fn process_delivery(
        &mut self,
        id: ConnectionId,
        sequence: PacketSequence,
        status: DeliveryStatus,
    ) {
        // The writer catches up itself where the fate needs it.
        let Some(conn) = self
            .connections
            .get_mut(id as usize)
            .and_then(Option::as_mut)
        else {
            return;
        };
        conn.streams
            .process_delivery(&mut self.objects, sequence, status);
        // A creation acknowledged just now frees the object messages held for it.
        conn.streams.fixed_mut().release_held(&self.objects);
    }

    /// An estimate of the bytes the server keeps for connection `id` only because
    /// that client has not acknowledged them: the writer's records in flight and the
    /// destroyed objects awaiting its destroy confirmation
    /// ([`ReplicationWriter::pending_bytes`]), and the messages queued to it and not
    /// yet acknowledged. 0 for an unknown connection.
    pub fn pending_bytes(&self, id: ConnectionId) -> usize {
        let Some(conn) = self.conn(id) else {
            return 0;
        };
        let streams = conn.streams.fixed();
        streams.writer.pending_bytes() + streams.messages.queued_send_bytes()
    }

    /// Bytes held in connection `id`'s receive buffers (received messages waiting
    /// for game code, out-of-order reliable messages, a partly reassembled message;
    /// see [`MessageStream::buffered_receive_bytes`](crate::replication::attachment::MessageStream::buffered_receive_bytes)).
    pub fn buffered_receive_bytes(&self, id: ConnectionId) -> usize {
        self.conn(id)
            .map_or(0, |c| c.streams.fixed().messages.buffered_receive_bytes())
    }

    /// The roots connection `id`'s client reported broken since the last call; each
    /// is destroyed on that client and created again.
    pub fn take_recovered(&mut self, id: ConnectionId) -> Vec<NetRefHandle> {
        writer_of(&mut self.connections, &self.objects, id)
            .map_or_else(Vec::new, ReplicationWriter::take_recovered)
    }

    /// Reads a packet received from connection `id` (after the transport's header).
    pub fn read_packet(
        &mut self,
        id: ConnectionId,
        reader: &mut BitReader,
    ) -> Result<(), StreamError> {
        let Some(conn) = open_connection(&mut self.connections, &self.objects, id) else {
            return Ok(());
        };
        conn.streams.read_packet(&mut self.objects, reader)
    }
}

/// The client-side driver: the client's world plus a stream manager with the
/// receiving ends of the server's streams and any added later.
pub struct ReplicationClient {
    world: ClientWorld,
    streams: ClientStreamManager,
}

impl std::fmt::Debug for ReplicationClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationClient")
            .field("world", &self.world)
            .finish()
    }
}

impl ReplicationClient {
    /// A client for the types in `registry` (must equal the server's).
    pub fn new(registry: Arc<ProtocolRegistry>, config: ReplicationConfig) -> Self {
        let attachments = config.attachments.clone();
        let world = ClientWorld::new(registry.clone(), config);
        let streams = ClientStreamManager::with_fixed(ClientStreams {
            reader: ReplicationReader::default(),
            tokens: TokenStream::with_tables(SharedExports::default(), world.shared_imports()),
            huge: HugeObjectReceiver::new(&attachments),
            messages: crate::replication::attachment::MessageStream::new(
                registry,
                &attachments,
                None,
            ),
        });
        Self { world, streams }
    }

    /// The client's world (objects, events, stats).
    pub fn world(&self) -> &ClientWorld {
        &self.world
    }

    /// The client's world, mutably.
    pub fn world_mut(&mut self) -> &mut ClientWorld {
        &mut self.world
    }

    /// Reads a received packet (after the transport's header) at time `now`.
    ///
    /// `sequence` is the packet's sequence from the connection header. Packets are read
    /// in send order: one older than a packet already read is dropped unread
    /// ([`ReaderStats::stale_packets`]), as the
    /// connection does before it gets here.
    pub fn read_packet(
        &mut self,
        now: Duration,
        sequence: PacketSequence,
        reader: &mut BitReader,
    ) -> Result<(), StreamError> {
        self.world.set_now(now);
        if !self.world.begin_packet(sequence) {
            return Ok(());
        }
        self.streams.read_packet(&mut self.world, reader)
    }

    /// Writes the client's streams for packet `sequence` (usually nothing).
    pub fn write_packet(
        &mut self,
        sequence: PacketSequence,
        writer: &mut BitWriter,
    ) -> WriteResult {
        self.streams.write_packet(&self.world, sequence, writer)
    }

    /// The fate of a packet the client sent.
    pub fn process_delivery(&mut self, sequence: PacketSequence, status: DeliveryStatus) {
        self.streams
            .process_delivery(&mut self.world, sequence, status);
    }

    /// Advances time without a packet: retries cold parked references when due.
    pub fn update(&mut self, now: Duration) {
        self.world.set_now(now);
        self.world.resolve_references();
    }

    /// Drains the queued events.
    pub fn drain_events(&mut self) -> Vec<ReplicationEvent> {
        self.world.drain_events()
    }

    /// A replicated object as its concrete type.
    pub fn get<T: Replicated>(&self, handle: NetRefHandle) -> Option<&T> {
        self.world.get(handle)
    }

    /// The last received quantized state of an object.
    pub fn state(&self, handle: NetRefHandle) -> Option<&dyn ErasedState> {
        self.world.object(handle).map(|o| o.state())
    }

    /// Whether an object is replicated here.
    pub fn contains(&self, handle: NetRefHandle) -> bool {
        self.world.object(handle).is_some()
    }

    /// Number of replicated objects.
    pub fn len(&self) -> usize {
        self.world.len()
    }

    /// Whether no object is replicated here.
    pub fn is_empty(&self) -> bool {
        self.world.is_empty()
    }

    /// Registers a static object (see [`ClientWorld::register_static`]).
    pub fn register_static<T: Replicated>(&mut self, handle: NetRefHandle, object: T) -> bool {
        self.world.register_static(handle, object)
    }

    /// Takes a torn-off object.
    pub fn take_torn_off(&mut self, handle: NetRefHandle) -> Option<Box<dyn ErasedObject>> {
        self.world.take_torn_off(handle)
    }

    /// Adds a stream after the replication, token, huge-object and message streams (the server adds the
    /// matching one at the same position for this connection).
    pub fn add_stream<T: DataStream<ClientWorld>>(
        &mut self,
        stream: T,
    ) -> Result<StreamKey<T>, TooManyStreams> {
        self.streams.add_stream(stream)
    }

    /// A stream added with [`add_stream`](Self::add_stream).
    pub fn stream_mut<T: DataStream<ClientWorld>>(&mut self, key: StreamKey<T>) -> Option<&mut T> {
        self.streams.stream_mut(key)
    }

    /// The names of the client's data streams, by index.
    pub fn stream_names(&self) -> Vec<String> {
        self.streams.stream_names()
    }

    /// The token stream (strings exported by the server).
    pub fn tokens(&self) -> &TokenStream {
        &self.streams.fixed().tokens
    }

    /// The huge-object receiver (parts reassembled, counters).
    pub fn huge_receiver(&self) -> &HugeObjectReceiver {
        &self.streams.fixed().huge
    }
}

#[cfg(test)]
mod tests {
    use super::{one_shared_copy, two_mut};

    #[test]
    fn a_pass_in_step_has_two_or_more_holders_of_one_shared_copy() {
        let in_step = |copies: &[Option<usize>]| one_shared_copy(copies.iter().copied());
        assert!(in_step(&[Some(7), Some(7)]));
        assert!(in_step(&[Some(7), Some(7), Some(7), Some(7)]));
        // A connection alone writes its own section: nobody replays it.
        assert!(!in_step(&[Some(7)]));
        assert!(!in_step(&[]));
        // Two groups, or a connection with its own copy: two writers.
        assert!(!in_step(&[Some(7), Some(7), Some(9)]));
        assert!(!in_step(&[Some(7), None]));
        assert!(!in_step(&[None, Some(7), Some(7)]));
        assert!(!in_step(&[None, None]));
    }

    #[test]
    fn two_mut_lends_two_distinct_items() {
        let mut v = [1, 2, 3];
        let (a, b) = two_mut(&mut v, 2, 0).unwrap();
        std::mem::swap(a, b);
        assert_eq!(v, [3, 2, 1]);
        assert!(two_mut(&mut v, 1, 1).is_none());
        assert!(two_mut(&mut v, 0, 3).is_none());
    }
}
