//! Attachments: typed messages and RPCs, server to client and client to server (Iris's
//! NetBlob attachments), plus the configuration of the huge-object path.
//!
//! # Messages are replicated types
//!
//! A message is any type registered in the [`ProtocolRegistry`] — in practice a
//! `#[derive(Replicated)]` struct — so it gets the same serializers, configs and
//! validation as object state. Sending serializes the *full* quantized state (an
//! all-ones change mask) after the type's wire id; the receiver builds a fresh state,
//! deserializes it, runs [`ReplicatedState::validate`](crate::ReplicatedState::validate)
//! on it, and builds the value with `from_state`. Game code gets a [`ReceivedMessage`]
//! and downcasts it ([`ReceivedMessage::get`], [`ReceivedMessage::take`]).
//!
//! Wire form of one message (a [`NetBlob`] on a channel):
//!
//! ```text
//! [has_target: 1][target handle]?  [protocol index: registry.index_bits()]  [full state]
//! ```
//!
//! # Delivery
//!
//! Each connection has one [`MessageStream`] with three channels, one per
//! [`DeliveryMode`]: reliable ordered and reliable unordered messages are re-sent
//! until acknowledged and delivered exactly once (in send order for the ordered one);
//! unreliable ones are sent once and delivered at most once (the connection drops
//! duplicate packets). Stream section: `([has: 1][channel section])` for each channel,
//! unreliable first (so bulk reliable traffic cannot starve it), then reliable ordered,
//! then reliable unordered. A channel payload is `[0][message]`, or `[1][part]` for a
//! part of a large message (below).
//!
//! # Large messages
//!
//! A reliable message larger than one part (`split.max_part_bits`, default 1024 bits) is
//! split like a huge object ([`split_blob`]) and its parts queued, all or none,
//! back to back on the reliable ordered channel (whatever its reliable mode: it then
//! arrives in order with the ordered messages, reported as `ReliableOrdered`); the
//! receiver reassembles it within `max_message_bits` and a part out of sequence, on
//! another channel, or interrupted by another message drops it. So a message is never
//! too large for a packet. An unreliable message larger than a part is refused at the
//! send ([`MessageError::UnreliableTooLarge`]).
//!
//! # Object messages (RPCs)
//!
//! A message may target an object. On the server it is queued only for connections
//! that have the object in scope: when the object is `Created` there it goes out at
//! once; while its creation is in flight (or it travels as a huge object) it is held
//! back until the creation is acknowledged, so the client always has the object when
//! the message arrives; otherwise it is dropped (with a warning when
//! [`AttachmentConfig::warn_dropped_messages`] is on, default off). The receiver drops
//! an object message whose object it does not have (destroyed in between).
//!
//! # Client to server
//!
//! The client sends with the same API. The server decodes and validates the state,
//! drops messages targeting objects it does not have (or, when game code drains them,
//! that are not in that client's scope), then runs the connection's
//! [`MessageValidator`] (if any) before game code sees anything. Messages are values
//! handed to game code: nothing a client sends ever writes server state.
//!
//! # Entry points
//!
//! Server ([`ReplicationServer`]): [`send_message`](ReplicationServer::send_message),
//! [`send_object_message`](ReplicationServer::send_object_message),
//! [`broadcast_message`](ReplicationServer::broadcast_message),
//! [`send_object_message_to_scope`](ReplicationServer::send_object_message_to_scope),
//! [`drain_messages`](ReplicationServer::drain_messages),
//! [`set_message_validator`](ReplicationServer::set_message_validator).
//! Client ([`ReplicationClient`]): [`send_message`](ReplicationClient::send_message),
//! [`send_object_message`](ReplicationClient::send_object_message),
//! [`drain_messages`](ReplicationClient::drain_messages).
//!
//! ```
//! use replicate::Replicated;
//! use replicate::bits::{BitReader, BitWriter};
//! use replicate::internals::blob::DeliveryMode;
//! use replicate::internals::connection::{DeliveryStatus, PacketSequence};
//! use replicate::internals::protocol::ProtocolRegistry;
//! use replicate::internals::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! #[derive(Replicated, Debug, Clone, Default, PartialEq)]
//! struct Chat {
//!     #[net(max_len = 64)]
//!     text: String,
//! }
//!
//! let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
//! let mut server = ReplicationServer::new(registry.clone(), ReplicationConfig::default());
//! let mut client = ReplicationClient::new(registry, ReplicationConfig::default());
//! let conn = server.add_connection();
//!
//! server.send_message(conn, &Chat { text: "welcome".into() }, DeliveryMode::ReliableOrdered).unwrap();
//! server.tick(Duration::ZERO);
//! let mut w = BitWriter::with_capacity_bytes(1200);
//! server.write_packet(conn, PacketSequence(0), &mut w);
//! let bytes = w.finish().unwrap();
//! client.read_packet(Duration::ZERO, PacketSequence(0), &mut BitReader::new(&bytes)).unwrap();
//! server.process_delivery(conn, PacketSequence(0), DeliveryStatus::Delivered);
//!
//! let got = client.drain_messages();
//! assert_eq!(got[0].get::<Chat>().unwrap().text, "welcome");
//!
//! // And back: the server validates before game code sees it.
//! client.send_message(&Chat { text: "hi".into() }, DeliveryMode::Unreliable).unwrap();
//! let mut w = BitWriter::with_capacity_bytes(1200);
//! client.write_packet(PacketSequence(0), &mut w);
//! let bytes = w.finish().unwrap();
//! server.read_packet(conn, &mut BitReader::new(&bytes)).unwrap();
//! let msg = server.drain_messages(conn).remove(0);
//! assert_eq!(msg.from, Some(conn));
//! assert_eq!(msg.take::<Chat>().unwrap().text, "hi");
//! ```
//!
//! # Ordering with state
//!
//! On the client a message *executes* — runs its type's handler
//! ([`ReplicationClient::on_message`]) or joins the queue
//! ([`ReplicationClient::drain_messages`]) — at a defined point of the packet that
//! delivers it. Reliable messages execute before the packet's state is applied to the
//! game objects (Iris's `ExecuteReliableRPCsBeforeApplyState`, default on:
//! [`AttachmentConfig::reliable_before_state`]), so an RPC sent before a state change
//! sees the objects as they were and an RPC to an object destroyed by the same packet
//! still finds it; an object message whose object that packet creates waits until it
//! is spawned. Unreliable messages, and all messages with the setting off, execute
//! after the packet's state, destroys and huge objects are applied. The mechanism is
//! the stream manager's two phases: every stream reads its section, then
//! [`DataStream::end_packet`] runs in stream order; the replication reader applies
//! state in its `end_packet`, and the message stream (a later stream) runs its
//! deferred messages in its own.

use super::{
    ClientWorld, ReplicatedObjectState, ReplicationClient, ReplicationServer, ReplicationWriter,
};
use crate::bits::{BitReader, BitWriter};
use crate::blob::{
    BlobAssembler, BlobError, ChannelConfig, ChannelError, ChannelReceiver, ChannelRecord,
    ChannelSender, DeliveryMode, NetBlob, PartAccepted, PartialBlob, split_blob,
};
use crate::connection::DeliveryStatus;
use crate::handle::NetRefHandle;
use crate::object::{ConnectionId, ObjectTable};
use crate::protocol::{ErasedObject, ProtocolIndex, ProtocolRegistry};
use crate::state::{ChangeMask, Replicated};
use crate::stream::{DataStream, StreamError, WriteResult};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;
use thiserror::Error;

pub use super::writer::huge::AttachmentConfig;

impl AttachmentConfig {
    fn channel(&self, mode: DeliveryMode) -> ChannelConfig {
        let mut c = ChannelConfig::new(mode);
        // The channels carry whole messages up to a part and the parts of larger ones.
        c.max_message_bits = self.part_bits() + PART_FRAMING_BITS;
        c.max_queued = self.max_queued_messages.max(1);
        c.max_buffered_bits = (self.max_out_of_order_bytes as u64).saturating_mul(8);
        c
    }

    /// Payload bits of one message part (`split.max_part_bits`, within 1..=65535).
    fn part_bits(&self) -> u32 {
        self.split.max_part_bits.clamp(1, u16::MAX as u32)
    }
}

/// Errors of sending a message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MessageError {
    /// The message type is not in the registry.
    #[error("message type `{0}` is not registered in the protocol registry")]
    NotRegistered(&'static str),
    /// The serialized message exceeds `max_message_bits`.
    #[error("message of type `{ty}` exceeds {max} bits")]
    TooLarge {
        /// The type.
        ty: &'static str,
        /// The cap.
        max: u32,
    },
    /// No such connection (or it has no message stream).
    #[error("no connection {0}")]
    NoConnection(ConnectionId),
    /// An unreliable message larger than one part.
    #[error(
        "an unreliable message of {bits} bits exceeds one part ({max} bits): send it reliably \
         (large reliable messages are split into parts) or raise `AttachmentConfig::split.max_part_bits`"
    )]
    UnreliableTooLarge {
        /// The message's size.
        bits: usize,
        /// The part size.
        max: u32,
    },
    /// The message needs more parts than `split.max_part_count`.
    #[error(transparent)]
    Split(#[from] BlobError),
    /// The channel refused the message.
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

/// What happened to an object message on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageOutcome {
    /// Queued for sending.
    Queued,
    /// Held until the object's creation is acknowledged on that connection.
    Held,
    /// Dropped: the object is not in that connection's scope.
    NotInScope,
}

/// A message received from the peer.
pub struct ReceivedMessage {
    /// The sending connection (server side; `None` on the client).
    pub from: Option<ConnectionId>,
    /// The object it targets, if any.
    pub target: Option<NetRefHandle>,
    /// How it was delivered.
    pub mode: DeliveryMode,
    /// The message type's wire id.
    pub protocol: ProtocolIndex,
    value: Box<dyn ErasedObject>,
    /// Bits the message took on the wire (for the receive caps).
    wire_bits: usize,
}

impl std::fmt::Debug for ReceivedMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedMessage")
            .field("from", &self.from)
            .field("target", &self.target)
            .field("mode", &self.mode)
            .field("protocol", &self.protocol)
            .finish()
    }
}

/// Everything about a received message but its value (what a
/// [`ReplicationClient::on_message`] handler gets beside the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    /// The sending connection (server side; `None` on the client).
    pub from: Option<ConnectionId>,
    /// The object it targets, if any.
    pub target: Option<NetRefHandle>,
    /// How it was delivered.
    pub mode: DeliveryMode,
    /// The message type's wire id.
    pub protocol: ProtocolIndex,
}

impl ReceivedMessage {
    /// Where the message came from and how.
    pub fn info(&self) -> MessageInfo {
        MessageInfo {
            from: self.from,
            target: self.target,
            mode: self.mode,
            protocol: self.protocol,
        }
    }

    /// Whether the message is a `T`.
    pub fn is<T: Replicated>(&self) -> bool {
        self.value.as_any().is::<T>()
    }

    /// The message as a `T`.
    pub fn get<T: Replicated>(&self) -> Option<&T> {
        self.value.as_any().downcast_ref::<T>()
    }

    /// Takes the message as a `T` (`None` if it is another type; check with
    /// [`is`](Self::is) first to keep it).
    pub fn take<T: Replicated>(self) -> Option<T> {
        let any: Box<dyn Any> = self.value;
        any.downcast::<T>().ok().map(|b| *b)
    }

    /// The value, type-erased.
    pub fn value(&self) -> &dyn ErasedObject {
        self.value.as_ref()
    }
}

/// A server-side check run on every message a client sends, after decoding and state
/// validation, before game code sees it; `false` drops the message.
pub type MessageValidator = Arc<dyn Fn(ConnectionId, &ReceivedMessage) -> bool + Send + Sync>;

/// A client-side handler of one message type, run when the message executes (see
/// [`ReplicationClient::on_message`]).
type MessageHandler = Box<dyn FnMut(ReceivedMessage, &mut ClientWorld) + Send>;

/// Counters of a [`MessageStream`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageStats {
    /// Messages queued for sending.
    pub queued: u64,
    /// Message copies written into packets (re-sends included).
    pub written: u64,
    /// Messages received and handed to game code.
    pub received: u64,
    /// Of `rejected`, the messages refused because the received queue was at
    /// [`AttachmentConfig::max_received_messages`] or
    /// [`AttachmentConfig::max_received_bytes`].
    pub refused_over_cap: u64,
    /// Bytes of the refused messages (their wire size).
    pub refused_bytes: u64,
    /// Object messages dropped because the object was not in scope (either end).
    pub dropped_not_in_scope: u64,
    /// Received messages rejected (undecodable, invalid state, validator, full queue).
    pub rejected: u64,
    /// Object messages held now, waiting for their object's creation to be acked.
    pub held: usize,
}

/// Serializes `value` as a message (see the module docs).
pub fn encode_message<T: Replicated>(
    registry: &ProtocolRegistry,
    target: Option<NetRefHandle>,
    value: &T,
    max_bits: u32,
) -> Result<NetBlob, MessageError> {
    let ty = std::any::type_name::<T>();
    let index = registry
        .index_of::<T>()
        .ok_or(MessageError::NotRegistered(ty))?;
    let state = value.to_state();
    let mask = ChangeMask::all(T::descriptor().change_mask_bits);
    let mut w = BitWriter::with_capacity_bits(max_bits as usize);
    if w.write_bool(target.is_some()) {
        target.unwrap_or(NetRefHandle::INVALID).write(&mut w);
    }
    w.write_bits(index as u64, registry.index_bits());
    crate::state::ReplicatedState::serialize(&state, &mask, 0, &mut w);
    if w.is_overflown() {
        return Err(MessageError::TooLarge { ty, max: max_bits });
    }
    Ok(NetBlob::from_writer(&w))
}

/// Decodes a message written by [`encode_message`], validating its state.
pub fn decode_message(
    registry: &ProtocolRegistry,
    blob: &NetBlob,
    mode: DeliveryMode,
) -> Result<ReceivedMessage, String> {
    decode_message_from(registry, &mut blob.reader(), mode)
}

/// [`decode_message`] from a reader positioned at the message.
fn decode_message_from(
    registry: &ProtocolRegistry,
    r: &mut BitReader,
    mode: DeliveryMode,
) -> Result<ReceivedMessage, String> {
    let start = r.position();
    let target = if r.read_bool() {
        Some(NetRefHandle::read(r).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let protocol = r.read_bits(registry.index_bits()) as ProtocolIndex;
    r.check().map_err(|e| e.to_string())?;
    let reg = registry
        .get(protocol)
        .ok_or_else(|| format!("unknown message type {protocol}"))?;
    let mask = ChangeMask::all((reg.descriptor)().change_mask_bits);
    let mut state = (reg.new_state)();
    state.deserialize(&mask, r).map_err(|e| e.to_string())?;
    r.check().map_err(|e| e.to_string())?;
    state.validate(&mask).map_err(|e| e.to_string())?;
    let value = (reg.create)(state.as_ref()).ok_or("message factory failed")?;
    Ok(ReceivedMessage {
        from: None,
        target,
        mode,
        protocol,
        value,
        wire_bits: r.position().saturating_sub(start),
    })
}

/// Bits a message part adds to its payload on a channel: the frame flag and the
/// part header (index, count, payload length).
const PART_FRAMING_BITS: u32 = 1 + 48;

/// Frames a whole message for a channel: `[0][message]`.
fn frame_whole(blob: &NetBlob) -> NetBlob {
    let mut w = BitWriter::with_capacity_bits(blob.bit_len() + 1);
    w.write_bool(false);
    blob.write_to(&mut w);
    NetBlob::from_writer(&w)
}

/// Frames one part of a large message for the ordered channel: `[1][part]`.
fn frame_part(part: &PartialBlob) -> NetBlob {
    let mut w = BitWriter::with_capacity_bits(part.wire_bits() + 1);
    w.write_bool(true);
    part.write(&mut w);
    NetBlob::from_writer(&w)
}

/// The channels in section order. Unreliable messages (at most a part each) go first,
/// so a large reliable transfer cannot starve them.
const MODES: [DeliveryMode; 3] = [
    DeliveryMode::Unreliable,
    DeliveryMode::ReliableOrdered,
    DeliveryMode::ReliableUnordered,
];

fn mode_index(mode: DeliveryMode) -> usize {
    match mode {
        DeliveryMode::Unreliable => 0,
        DeliveryMode::ReliableOrdered => 1,
        DeliveryMode::ReliableUnordered => 2,
    }
}

struct Held {
    handle: NetRefHandle,
    mode: DeliveryMode,
    blob: NetBlob,
}

/// Where an object message may go on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Send,
    Hold,
    Drop,
}

fn object_gate(writer: &ReplicationWriter, table: &ObjectTable, handle: NetRefHandle) -> Gate {
    use ReplicatedObjectState as S;
    let Some(index) = table.index_of(handle) else {
        return Gate::Drop;
    };
    match writer.object_state(index) {
        S::Created => Gate::Send,
        S::PendingCreate | S::WaitOnCreateConfirmation | S::HugeObject => Gate::Hold,
        // Spawned since the last tick: the writer decides on its scope at the next one.
        S::Invalid if table.tick_created().contains(&index) => Gate::Hold,
        _ => Gate::Drop,
    }
}

/// What a [`MessageStream`] checks about the objects messages target.
pub trait MessageContext {
    /// Whether the object exists here and game code can see it (on the client: it
    /// was spawned, not only read from the packet being processed).
    fn has_object(&self, handle: NetRefHandle) -> bool;
}

impl MessageContext for ObjectTable {
    fn has_object(&self, handle: NetRefHandle) -> bool {
        self.contains(handle)
    }
}

impl MessageContext for ClientWorld {
    fn has_object(&self, handle: NetRefHandle) -> bool {
        self.object(handle).is_some_and(|o| o.instance().is_some())
    }
}

/// The message stream of one connection (one on each end): three channels, held
/// object messages (server) and the received queue.
pub struct MessageStream {
    registry: Arc<ProtocolRegistry>,
    config: AttachmentConfig,
    connection: Option<ConnectionId>,
    senders: [ChannelSender; 3],
    receivers: [ChannelReceiver; 3],
    records: VecDeque<[ChannelRecord; 3]>,
    held: Vec<Held>,
    /// Reassembles large messages from the ordered channel.
    assembler: BlobAssembler,
    /// Decoded this packet, to run at its end (after the state is applied).
    deferred: Vec<ReceivedMessage>,
    received: VecDeque<ReceivedMessage>,
    /// Accounted bytes of `received` (see [`Self::received_bytes`]).
    received_bytes: usize,
    validator: Option<MessageValidator>,
    handlers: Vec<(ProtocolIndex, MessageHandler)>,
    stats: MessageStats,
}

impl std::fmt::Debug for MessageStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStream")
            .field("connection", &self.connection)
            .field("stats", &self.stats)
            .finish()
    }
}

impl MessageStream {
    /// The stream's name.
    pub const NAME: &'static str = "messages";

    /// A stream; `connection` is the peer's id on the server, `None` on the client.
    pub fn new(
        registry: Arc<ProtocolRegistry>,
        config: &AttachmentConfig,
        connection: Option<ConnectionId>,
    ) -> Self {
        Self {
            senders: MODES.map(|m| ChannelSender::new(config.channel(m))),
            receivers: MODES.map(|m| ChannelReceiver::new(config.channel(m))),
            registry,
            config: config.clone(),
            connection,
            records: VecDeque::new(),
            held: Vec::new(),
            assembler: BlobAssembler::new(config.split)
                .with_max_blob_bits(config.max_message_bits as u64),
            deferred: Vec::new(),
            received: VecDeque::new(),
            received_bytes: 0,
            validator: None,
            handlers: Vec::new(),
            stats: MessageStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> MessageStats {
        let mut s = self.stats.clone();
        s.held = self.held.len();
        s
    }

    /// Installs the check run on every received message (server side).
    pub fn set_validator(&mut self, validator: Option<MessageValidator>) {
        self.validator = validator;
    }

    /// Queues a serialized message ([`encode_message`]'s output). One larger than a
    /// part (`split.max_part_bits`) is split and its parts queued on the reliable
    /// ordered channel, whatever its reliable mode; an unreliable one that large is
    /// refused.
    pub fn push(&mut self, mode: DeliveryMode, blob: NetBlob) -> Result<(), MessageError> {
        self.check_size(mode, &blob)?;
        self.queue_blob(mode, blob)?;
        self.stats.queued += 1;
        Ok(())
    }

    /// Whether `blob` may be sent with `mode` at all.
    fn check_size(&self, mode: DeliveryMode, blob: &NetBlob) -> Result<(), MessageError> {
        let bits = blob.bit_len();
        if bits as u64 > self.config.max_message_bits as u64 {
            return Err(ChannelError::MessageTooLarge {
                bits: bits as u64,
                max: self.config.max_message_bits as u64,
            }
            .into());
        }
        let part = self.config.part_bits();
        if mode == DeliveryMode::Unreliable && bits > part as usize {
            return Err(MessageError::UnreliableTooLarge { bits, max: part });
        }
        Ok(())
    }

    /// Frames (and, when larger than a part, splits) a message onto its channel; all
    /// parts or none are queued.
    fn queue_blob(&mut self, mode: DeliveryMode, blob: NetBlob) -> Result<(), MessageError> {
        if blob.bit_len() <= self.config.part_bits() as usize {
            self.senders[mode_index(mode)].push(frame_whole(&blob))?;
            return Ok(());
        }
        let parts = split_blob(&blob, &self.config.split)?;
        let ordered = &mut self.senders[mode_index(DeliveryMode::ReliableOrdered)];
        if ordered.free_slots() < parts.len() {
            return Err(ChannelError::QueueFull(parts.len()).into());
        }
        for part in &parts {
            ordered.push(frame_part(part))?;
        }
        Ok(())
    }

    /// Serializes and queues a connection-level message.
    pub fn send<T: Replicated>(
        &mut self,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        let blob = encode_message(&self.registry, None, value, self.config.max_message_bits)?;
        self.push(mode, blob)
    }

    /// Takes the next received message.
    pub fn receive(&mut self) -> Option<ReceivedMessage> {
        self.received.pop_front()
    }

    /// Takes every received message.
    pub fn drain(&mut self) -> Vec<ReceivedMessage> {
        self.received_bytes = 0;
        self.received.drain(..).collect()
    }

    /// Bytes the received messages waiting for game code account for: per message
    /// its wire size twice (the decoded value holds about as much again) plus the
    /// queue entry. Capped by [`AttachmentConfig::max_received_bytes`].
    pub fn received_bytes(&self) -> usize {
        self.received_bytes
    }

    /// Bytes this side holds for the peer in its receive buffers: queued received
    /// messages, out-of-order reliable messages, a partly reassembled message.
    pub fn buffered_receive_bytes(&self) -> usize {
        let ooo: u64 = self.receivers.iter().map(|r| r.buffered_bits()).sum();
        self.received_bytes + (ooo / 8) as usize + self.assembler.buffered_bits() / 8
    }

    /// Bytes of messages queued to the peer and not yet acknowledged.
    pub fn queued_send_bytes(&self) -> usize {
        self.senders
            .iter()
            .map(ChannelSender::queued_bits)
            .sum::<usize>()
            / 8
    }

    fn message_bytes(msg: &ReceivedMessage) -> usize {
        msg.wire_bits.div_ceil(8) * 2 + std::mem::size_of::<ReceivedMessage>()
    }

    /// Whether nothing is queued or unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.held.is_empty() && self.senders.iter().all(ChannelSender::is_idle)
    }

    fn drop_not_in_scope(&mut self, handle: NetRefHandle, side: &str) {
        self.stats.dropped_not_in_scope += 1;
        if self.config.warn_dropped_messages {
            tracing::warn!("{side}: a message to {handle} was dropped: the object is not in scope");
        }
    }

    /// Releases held object messages whose object is now created on the connection
    /// `writer` serves (or drops those whose object left its scope), in their order.
    /// Called on every tick and after every delivery report, so a message goes out in
    /// the first packet written after its object's creation is acknowledged.
    pub(crate) fn release_held(&mut self, writer: &ReplicationWriter, table: &ObjectTable) {
        if self.held.is_empty() {
            return;
        }
        for h in std::mem::take(&mut self.held) {
            match object_gate(writer, table, h.handle) {
                Gate::Send => {
                    if let Err(e) = self.queue_blob(h.mode, h.blob) {
                        tracing::warn!("message to {} not queued: {e}", h.handle);
                    }
                }
                Gate::Hold => self.held.push(h),
                Gate::Drop => self.drop_not_in_scope(h.handle, "server"),
            }
        }
    }

    fn write_channels(&mut self, w: &mut BitWriter) -> WriteResult {
        if w.bits_left() < 3 || self.senders.iter().all(|s| s.waiting() == 0) {
            return WriteResult::NoData;
        }
        let start = w.mark();
        let mut record: [ChannelRecord; 3] = Default::default();
        let mut wrote = 0;
        for (i, sender) in self.senders.iter_mut().enumerate() {
            // Keep room for the flags of the channels after this one.
            let later = 2 - i;
            let flag = w.mark();
            let sub = w.begin_substream(w.bits_left().saturating_sub(later));
            w.write_bool(true);
            let n = if w.is_overflown() {
                0
            } else {
                sender.write(w, &mut record[i])
            };
            let _ = w.commit_substream(sub);
            if n == 0 {
                w.rollback(flag);
                w.write_bool(false);
            }
            wrote += n;
        }
        if wrote == 0 || w.is_overflown() {
            w.rollback(start);
            // Anything recorded was rolled back with the bits: re-queue it.
            for (i, rec) in record.iter().enumerate() {
                self.senders[i].on_delivery(rec, DeliveryStatus::Lost);
            }
            return WriteResult::NoData;
        }
        self.stats.written += wrote as u64;
        self.records.push_back(record);
        if self.senders.iter().any(|s| s.waiting() > 0) {
            WriteResult::HasMoreData
        } else {
            WriteResult::Ok
        }
    }

    fn side(&self) -> &'static str {
        if self.connection.is_some() {
            "server"
        } else {
            "client"
        }
    }

    /// Reads the channel sections and decodes (and validates) what they complete, in
    /// channel order; the messages are passed to `run` one by one.
    fn read_channels(
        &mut self,
        r: &mut BitReader,
        mut run: impl FnMut(&mut Self, ReceivedMessage),
    ) -> Result<(), StreamError> {
        let mut result = Ok(());
        for i in 0..3 {
            let has = r.read_bool();
            if r.check().is_err() {
                result = Err(StreamError::malformed(Self::NAME, "truncated channel flag"));
                break;
            }
            if !has {
                continue;
            }
            if let Err(e) = self.receivers[i].read(r) {
                result = Err(StreamError::malformed(Self::NAME, e));
                break;
            }
        }
        // Whatever was read completely is delivered, even after an error.
        let side = self.side();
        for (i, mode) in MODES.into_iter().enumerate() {
            while let Some(blob) = self.receivers[i].receive() {
                let decoded = match self.unframe(&blob, mode) {
                    Ok(Some(m)) => Ok(m),
                    Ok(None) => continue,
                    Err(e) => Err(e),
                };
                let mut msg = match decoded {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::trace!("{side}: undecodable message dropped: {e}");
                        self.stats.rejected += 1;
                        continue;
                    }
                };
                msg.from = self.connection;
                if let (Some(v), Some(conn)) = (&self.validator, self.connection)
                    && !v(conn, &msg)
                {
                    self.stats.rejected += 1;
                    continue;
                }
                run(self, msg);
            }
        }
        result
    }

    /// Decodes a channel payload: a whole message, or a part of a large one (`None`
    /// until its last part arrives). A bad part drops the message being assembled.
    fn unframe(
        &mut self,
        blob: &NetBlob,
        mode: DeliveryMode,
    ) -> Result<Option<ReceivedMessage>, String> {
        let mut r = blob.reader();
        if !r.read_bool() {
            if self.assembler.is_assembling() {
                // Parts of one message are contiguous in the ordered channel.
                self.assembler.reset();
                return Err("a message interrupted the parts of another".into());
            }
            return decode_message_from(&self.registry, &mut r, mode).map(Some);
        }
        if mode != DeliveryMode::ReliableOrdered {
            return Err(format!("a message part on the {mode:?} channel"));
        }
        let part = match PartialBlob::read(&mut r, &self.config.split) {
            Ok(p) => p,
            Err(e) => {
                self.assembler.reset();
                return Err(e.to_string());
            }
        };
        match self.assembler.add_part(part).map_err(|e| e.to_string())? {
            PartAccepted::NeedMore => Ok(None),
            PartAccepted::Complete(whole) => decode_message(&self.registry, &whole, mode).map(Some),
        }
    }

    /// Whether `msg`'s target (if any) exists here; counts and drops it if not.
    fn target_present<C: MessageContext>(&mut self, ctx: &C, msg: &ReceivedMessage) -> bool {
        match msg.target {
            Some(h) if !ctx.has_object(h) => {
                let side = self.side();
                self.drop_not_in_scope(h, side);
                false
            }
            _ => true,
        }
    }

    /// Queues a message for game code (`drain`), within the queue's cap.
    fn enqueue(&mut self, msg: ReceivedMessage) {
        let bytes = Self::message_bytes(&msg);
        if self.received.len() >= self.config.max_received_messages
            || self.received_bytes + bytes > self.config.max_received_bytes
        {
            // No log line per message: a flooding peer would flood the log. The facade
            // summarises `rejected` at most once per interval.
            tracing::trace!(
                "{}: received-message queue full; a message is refused",
                self.side()
            );
            self.stats.rejected += 1;
            self.stats.refused_over_cap += 1;
            self.stats.refused_bytes += msg.wire_bits.div_ceil(8) as u64;
            return;
        }
        self.stats.received += 1;
        self.received_bytes += bytes;
        self.received.push_back(msg);
    }

    /// Executes a message on the client: its type's handler if one is installed, the
    /// queue otherwise; dropped if its object is not here.
    fn execute(&mut self, world: &mut ClientWorld, msg: ReceivedMessage) {
        if !self.target_present(&*world, &msg) {
            return;
        }
        match self.handlers.iter_mut().find(|(p, _)| *p == msg.protocol) {
            Some((_, handler)) => {
                self.stats.received += 1;
                handler(msg, world);
            }
            None => self.enqueue(msg),
        }
    }

    /// Whether a message received by the client runs now, before the packet's state
    /// is applied (see [`AttachmentConfig::reliable_before_state`]).
    fn runs_before_state(&self, world: &ClientWorld, msg: &ReceivedMessage) -> bool {
        self.config.reliable_before_state
            && msg.mode != DeliveryMode::Unreliable
            && msg.target.is_none_or(|h| world.has_object(h))
    }

    /// Installs `handler` for message type `protocol`, replacing any earlier one.
    fn set_handler(&mut self, protocol: ProtocolIndex, handler: MessageHandler) {
        self.handlers.retain(|(p, _)| *p != protocol);
        self.handlers.push((protocol, handler));
    }

    fn delivery(&mut self, status: DeliveryStatus) {
        if let Some(record) = self.records.pop_front() {
            for (i, rec) in record.iter().enumerate() {
                self.senders[i].on_delivery(rec, status);
            }
        }
    }
}

impl DataStream<ObjectTable> for MessageStream {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn write_data(&mut self, _ctx: &ObjectTable, w: &mut BitWriter) -> WriteResult {
        self.write_channels(w)
    }
    fn read_data(&mut self, ctx: &mut ObjectTable, r: &mut BitReader) -> Result<(), StreamError> {
        // The server applies no state from clients: messages are queued at once.
        self.read_channels(r, |ms, msg| {
            if ms.target_present(&*ctx, &msg) {
                ms.enqueue(msg);
            }
        })
    }
    fn process_delivery(&mut self, _ctx: &mut ObjectTable, status: DeliveryStatus) {
        self.delivery(status)
    }
    fn has_acknowledged_all_reliable_data(&self) -> bool {
        self.is_idle()
    }
}

impl DataStream<ClientWorld> for MessageStream {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn write_data(&mut self, _ctx: &ClientWorld, w: &mut BitWriter) -> WriteResult {
        self.write_channels(w)
    }
    fn read_data(&mut self, ctx: &mut ClientWorld, r: &mut BitReader) -> Result<(), StreamError> {
        // Reliable messages run now, before the replication stream applies the
        // packet's state at its `end_packet`; the rest wait for ours (a later stream).
        self.read_channels(r, |ms, msg| {
            if ms.runs_before_state(ctx, &msg) {
                ms.execute(ctx, msg);
            } else {
                ms.deferred.push(msg);
            }
        })
    }
    fn end_packet(&mut self, ctx: &mut ClientWorld) {
        for msg in std::mem::take(&mut self.deferred) {
            self.execute(ctx, msg);
        }
    }
    fn process_delivery(&mut self, _ctx: &mut ClientWorld, status: DeliveryStatus) {
        self.delivery(status)
    }
    fn has_acknowledged_all_reliable_data(&self) -> bool {
        self.is_idle()
    }
}

impl ReplicationServer {
    fn message_stream(&mut self, conn: ConnectionId) -> Result<&mut MessageStream, MessageError> {
        self.messages_mut(conn)
            .ok_or(MessageError::NoConnection(conn))
    }

    /// Sends a connection-level message to one client.
    pub fn send_message<T: Replicated>(
        &mut self,
        conn: ConnectionId,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        let max = self.config().attachments.max_message_bits;
        let blob = encode_message(self.objects().registry(), None, value, max)?;
        self.message_stream(conn)?.push(mode, blob)
    }

    /// Sends a connection-level message to every client.
    pub fn broadcast_message<T: Replicated>(
        &mut self,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        let max = self.config().attachments.max_message_bits;
        let blob = encode_message(self.objects().registry(), None, value, max)?;
        for conn in self.connection_ids() {
            self.message_stream(conn)?.push(mode, blob.clone())?;
        }
        Ok(())
    }

    /// Sends a message targeting `object` to one client: queued if the object is
    /// created there, held until its creation is acknowledged if that is in flight,
    /// dropped if the object is not in that client's scope.
    pub fn send_object_message<T: Replicated>(
        &mut self,
        conn: ConnectionId,
        object: NetRefHandle,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<MessageOutcome, MessageError> {
        let max = self.config().attachments.max_message_bits;
        let blob = encode_message(self.objects().registry(), Some(object), value, max)?;
        self.send_object_blob(conn, object, blob, mode)
    }

    fn send_object_blob(
        &mut self,
        conn: ConnectionId,
        object: NetRefHandle,
        blob: NetBlob,
        mode: DeliveryMode,
    ) -> Result<MessageOutcome, MessageError> {
        let gate = self
            .writer(conn)
            .map(|w| object_gate(w, self.objects(), object))
            .ok_or(MessageError::NoConnection(conn))?;
        let ms = self.message_stream(conn)?;
        ms.check_size(mode, &blob)?;
        match gate {
            Gate::Send => {
                // Size already checked above.
                ms.queue_blob(mode, blob)?;
                ms.stats.queued += 1;
                Ok(MessageOutcome::Queued)
            }
            Gate::Hold => {
                ms.stats.queued += 1;
                ms.held.push(Held {
                    handle: object,
                    mode,
                    blob,
                });
                Ok(MessageOutcome::Held)
            }
            Gate::Drop => {
                ms.drop_not_in_scope(object, "server");
                Ok(MessageOutcome::NotInScope)
            }
        }
    }

    /// Sends a message targeting `object` to every client that has it in scope;
    /// returns how many connections it was queued or held for.
    pub fn send_object_message_to_scope<T: Replicated>(
        &mut self,
        object: NetRefHandle,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<usize, MessageError> {
        let max = self.config().attachments.max_message_bits;
        let blob = encode_message(self.objects().registry(), Some(object), value, max)?;
        let mut n = 0;
        for conn in self.connection_ids() {
            if self.send_object_blob(conn, object, blob.clone(), mode)?
                != MessageOutcome::NotInScope
            {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Takes the messages received from one client (already validated). A message
    /// targeting an object that is not in that client's scope is dropped here.
    pub fn drain_messages(&mut self, conn: ConnectionId) -> Vec<ReceivedMessage> {
        let msgs = self
            .messages_mut(conn)
            .map(|m| m.drain())
            .unwrap_or_default();
        if msgs.iter().all(|m| m.target.is_none()) {
            return msgs;
        }
        let mut keep = Vec::with_capacity(msgs.len());
        let mut dropped = Vec::new();
        for m in msgs {
            let visible = match (m.target, self.writer(conn)) {
                (None, _) => true,
                (Some(h), Some(w)) => object_gate(w, self.objects(), h) != Gate::Drop,
                (Some(_), None) => false,
            };
            if visible {
                keep.push(m);
            } else if let Some(h) = m.target {
                dropped.push(h);
            }
        }
        if let Ok(ms) = self.message_stream(conn) {
            for h in dropped {
                ms.drop_not_in_scope(h, "server");
            }
        }
        keep
    }

    /// Installs (or removes) the validator of one client's messages.
    pub fn set_message_validator(
        &mut self,
        conn: ConnectionId,
        validator: Option<MessageValidator>,
    ) -> bool {
        match self.message_stream(conn) {
            Ok(m) => {
                m.set_validator(validator);
                true
            }
            Err(_) => false,
        }
    }

    /// The message counters of one connection.
    pub fn message_stats(&self, conn: ConnectionId) -> Option<MessageStats> {
        self.conn(conn).map(|c| c.streams.fixed().messages.stats())
    }
}

impl ReplicationClient {
    fn messages_mut(&mut self) -> &mut MessageStream {
        &mut self.streams.fixed_mut().messages
    }

    /// Sends a connection-level message to the server.
    pub fn send_message<T: Replicated>(
        &mut self,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        self.messages_mut().send(value, mode)
    }

    /// Sends a message targeting a replicated object to the server (dropped there if
    /// the server has no such object).
    pub fn send_object_message<T: Replicated>(
        &mut self,
        object: NetRefHandle,
        value: &T,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        let ms = self.messages_mut();
        let blob = encode_message(
            &ms.registry,
            Some(object),
            value,
            ms.config.max_message_bits,
        )?;
        ms.push(mode, blob)
    }

    /// Runs `handler` for every message of type `M` from the server, at the moment
    /// the message executes, instead of queueing it for
    /// [`drain_messages`](Self::drain_messages) (an RPC: the handler gets the value,
    /// its [`MessageInfo`] and the world, and may look at or change the target object
    /// with [`ClientWorld::get`] / [`ClientWorld::get_mut`]). Replaces an earlier
    /// handler of `M`.
    ///
    /// When it runs: a reliable message runs *before* the state of the packet that
    /// delivers it is applied, so the handler sees the game objects as they were
    /// (quantized states, [`ReplicationClient::state`], already hold the new values);
    /// an object message whose object is created by that packet runs right after it
    /// is spawned. Unreliable messages, and every message when
    /// [`AttachmentConfig::reliable_before_state`] is off, run after the packet's
    /// state (and its destroys) are applied; an object message whose object is gone
    /// by then is dropped.
    ///
    /// ```
    /// use replicate::Replicated;
    /// use replicate::internals::protocol::ProtocolRegistry;
    /// use replicate::internals::replication::{ReplicationClient, ReplicationConfig};
    /// use std::sync::{Arc, Mutex};
    ///
    /// #[derive(Replicated, Debug, Clone, Default, PartialEq)]
    /// struct Explode {
    ///     #[net(bits = 8)]
    ///     radius: u32,
    /// }
    ///
    /// let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    /// let mut client = ReplicationClient::new(registry, ReplicationConfig::default());
    /// let radii = Arc::new(Mutex::new(Vec::new()));
    /// let seen = radii.clone();
    /// client
    ///     .on_message(move |m: Explode, info, _world| {
    ///         assert!(info.target.is_some(), "explosions target an object");
    ///         seen.lock().unwrap().push(m.radius);
    ///     })
    ///     .unwrap();
    /// ```
    pub fn on_message<M: Replicated>(
        &mut self,
        mut handler: impl FnMut(M, MessageInfo, &mut ClientWorld) + Send + 'static,
    ) -> Result<(), MessageError> {
        let ms = self.messages_mut();
        let protocol = ms
            .registry
            .index_of::<M>()
            .ok_or(MessageError::NotRegistered(std::any::type_name::<M>()))?;
        ms.set_handler(
            protocol,
            Box::new(move |msg, world| {
                let info = msg.info();
                if let Some(value) = msg.take::<M>() {
                    handler(value, info, world);
                }
            }),
        );
        Ok(())
    }

    /// Removes the handler of message type `M` (its messages are queued again);
    /// returns whether there was one.
    pub fn remove_message_handler<M: Replicated>(&mut self) -> bool {
        let ms = self.messages_mut();
        let Some(protocol) = ms.registry.index_of::<M>() else {
            return false;
        };
        let before = ms.handlers.len();
        ms.handlers.retain(|(p, _)| *p != protocol);
        ms.handlers.len() != before
    }

    /// Takes the messages received from the server (those without a handler), in the
    /// order they executed (see [`on_message`](Self::on_message)).
    pub fn drain_messages(&mut self) -> Vec<ReceivedMessage> {
        self.messages_mut().drain()
    }

    /// The message counters.
    pub fn message_stats(&self) -> MessageStats {
        self.streams.fixed().messages.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keep_every_channel_flag_even_when_the_packet_is_tight() {
        let registry = Arc::new(ProtocolRegistry::default());
        let config = AttachmentConfig::default();
        let mut tx = MessageStream::new(registry.clone(), &config, None);
        let mut rx = MessageStream::new(registry, &config, Some(0));
        for mode in MODES {
            tx.push(mode, NetBlob::from_bytes(vec![0xAB; 4])).unwrap();
        }
        // Room for about one message: the section must still carry three flags.
        for budget in 3..200 {
            let mut w = BitWriter::with_capacity_bits(budget);
            if tx.write_channels(&mut w) == WriteResult::NoData {
                assert_eq!(w.position(), 0);
                continue;
            }
            assert!(!w.is_overflown());
            let bytes = w.finish().unwrap();
            let mut r = BitReader::with_bit_len(&bytes, w.position());
            let table = ObjectTable::new(Arc::new(ProtocolRegistry::default()), 0);
            // Payloads are not valid messages (rejected after framing), but the
            // framing must read back exactly.
            rx.read_channels(&mut r, |ms, m| {
                if ms.target_present(&table, &m) {
                    ms.enqueue(m);
                }
            })
            .unwrap();
            assert_eq!(r.bits_left(), 0, "budget {budget}");
            tx.delivery(DeliveryStatus::Lost);
        }
        assert!(rx.stats().rejected > 0);
    }

    /// Sends whatever `tx` has queued into `rx` in one packet; returns what `rx` queued.
    fn transfer(tx: &mut MessageStream, rx: &mut MessageStream) -> usize {
        let mut w = BitWriter::with_capacity_bits(1 << 20);
        assert_ne!(tx.write_channels(&mut w), WriteResult::NoData);
        let bits = w.position();
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, bits);
        rx.read_channels(&mut r, |ms, m| ms.enqueue(m)).unwrap();
        tx.delivery(DeliveryStatus::Delivered);
        rx.drain().len()
    }

    #[test]
    fn bad_message_parts_are_rejected_and_later_messages_still_arrive() {
        let registry = Arc::new(ProtocolRegistry::default());
        let config = AttachmentConfig {
            max_message_bits: 4096,
            ..AttachmentConfig::default()
        };
        let mut tx = MessageStream::new(registry.clone(), &config, None);
        let mut rx = MessageStream::new(registry, &config, Some(0));
        let ordered = mode_index(DeliveryMode::ReliableOrdered);
        let parts = split_blob(&NetBlob::from_bytes(vec![5; 400]), &config.split).unwrap();
        assert_eq!(parts.len(), 4);

        // A part on the unreliable channel.
        tx.senders[mode_index(DeliveryMode::Unreliable)]
            .push(frame_part(&parts[0]))
            .unwrap();
        assert_eq!(transfer(&mut tx, &mut rx), 0);
        assert_eq!(rx.stats().rejected, 1);

        // A whole message between two parts of another: both dropped.
        tx.senders[ordered].push(frame_part(&parts[0])).unwrap();
        tx.senders[ordered]
            .push(frame_whole(&NetBlob::from_bytes(vec![1])))
            .unwrap();
        tx.senders[ordered].push(frame_part(&parts[1])).unwrap();
        assert_eq!(transfer(&mut tx, &mut rx), 0);
        assert_eq!(
            rx.stats().rejected,
            3,
            "the interruption and the orphan part"
        );
        assert!(!rx.assembler.is_assembling());

        // A first part announcing more than max_message_bits: refused up front.
        let mut huge = parts[0].clone();
        huge.part_count = Some(1000);
        tx.senders[ordered].push(frame_part(&huge)).unwrap();
        assert_eq!(transfer(&mut tx, &mut rx), 0);
        assert_eq!(rx.stats().rejected, 4);
        assert_eq!(rx.assembler.buffered_bits(), 0);

        // The stream still works: a split message whose payload is not a valid message
        // (an empty registry) is assembled, then rejected by the decoder only.
        tx.push(
            DeliveryMode::ReliableOrdered,
            NetBlob::from_bytes(vec![0; 300]),
        )
        .unwrap();
        assert_eq!(transfer(&mut tx, &mut rx), 0);
        assert_eq!(rx.stats().rejected, 5);
        assert!(!rx.assembler.is_assembling());
    }

    #[test]
    fn large_reliable_messages_queue_all_parts_or_none() {
        let registry = Arc::new(ProtocolRegistry::default());
        let config = AttachmentConfig {
            max_queued_messages: 5,
            ..AttachmentConfig::default()
        };
        let mut tx = MessageStream::new(registry, &config, None);
        let big = NetBlob::from_bytes(vec![9; 700]); // 6 parts
        let err = tx.push(DeliveryMode::ReliableUnordered, big).unwrap_err();
        assert!(
            matches!(err, MessageError::Channel(ChannelError::QueueFull(6))),
            "{err}"
        );
        assert!(tx.is_idle(), "no part was queued");
        tx.push(
            DeliveryMode::ReliableUnordered,
            NetBlob::from_bytes(vec![9; 500]),
        )
        .unwrap();
        assert_eq!(
            tx.senders[mode_index(DeliveryMode::ReliableOrdered)].waiting(),
            4
        );
        assert_eq!(tx.stats().queued, 1);
    }
}
