//! Data streams: the [`DataStream`] trait and the [`DataStreamManager`] that multiplexes
//! up to 32 streams into one packet (Iris's `UDataStream` / `UDataStreamManager`).
//!
//! Wire format of the manager's part of a packet:
//!
//! ```text
//! [stream count - 1 : 5 bits][mask : stream count bits][data of stream i, for each set bit i, in order]
//! ```
//!
//! Each stream's data must be self-delimiting. A stream that has nothing to send costs
//! only its mask bit. The manager keeps, per packet, which streams wrote into it, and
//! routes the packet's delivery status to each of them (in send order), so each stream
//! keeps its own per-packet records in a FIFO.
//!
//! Streams are generic over a context `C` the owner passes in: the server's streams get
//! the [`ObjectTable`](crate::object::ObjectTable), the client's the
//! [`ClientWorld`](crate::replication::ClientWorld).
//!
//! A manager holds two kinds of streams. Those it is built with form a [`StreamSet`]:
//! a struct whose fields are the streams, which the owner reaches as typed fields
//! ([`DataStreamManager::fixed_mut`]). Streams added later
//! ([`DataStreamManager::add_stream`]) follow them and are reached through the typed
//! [`StreamKey`] their addition returns.
//!
//! This module owns the multiplexing only; it knows nothing of objects.

use crate::bits::{BitReader, BitWriter};
use crate::connection::{DeliveryStatus, PacketSequence};
use std::any::Any;
use std::collections::VecDeque;
use std::marker::PhantomData;
use thiserror::Error;

pub mod flagged;
pub mod tokens;

/// What a stream's [`write_data`](DataStream::write_data) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    /// Nothing written; the stream keeps no record for this packet.
    NoData,
    /// Data written; everything pending was sent.
    Ok,
    /// Data written, and more is waiting (another packet could be sent now).
    HasMoreData,
}

impl WriteResult {
    fn combine(self, other: WriteResult) -> WriteResult {
        match (self, other) {
            (WriteResult::HasMoreData, _) | (_, WriteResult::HasMoreData) => {
                WriteResult::HasMoreData
            }
            (WriteResult::Ok, _) | (_, WriteResult::Ok) => WriteResult::Ok,
            _ => WriteResult::NoData,
        }
    }
}

/// Whether a stream may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendStatus {
    /// Writes normally.
    #[default]
    Send,
    /// Skipped (mask bit 0) until resumed.
    Pause,
}

/// An error reading a packet's stream data.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StreamError {
    /// The bit stream ended early or a value was malformed.
    #[error("stream `{stream}`: malformed data: {reason}")]
    Malformed {
        /// Which stream.
        stream: String,
        /// What went wrong.
        reason: String,
    },
    /// The peer has a different set of streams.
    #[error("the peer sent {got} streams, this side has {expected}")]
    StreamCountMismatch {
        /// The count in the packet.
        got: u32,
        /// The local count.
        expected: u32,
    },
}

impl StreamError {
    /// Shorthand for [`StreamError::Malformed`].
    pub fn malformed(stream: &str, reason: impl std::fmt::Display) -> Self {
        Self::Malformed {
            stream: stream.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// One logical channel inside packets.
///
/// Contract: `write_data` returning [`WriteResult::Ok`] or
/// [`WriteResult::HasMoreData`] records what it wrote (one record per such packet);
/// `process_delivery` is then called exactly once per such packet, in send order, and
/// consumes the oldest record. `NoData` must leave no record and no bits.
pub trait DataStream<C: ?Sized>: Any + Send {
    /// The stream's name (used to pause and resume it).
    fn name(&self) -> &str;

    /// Writes what fits in `writer` (whose capacity is the stream's budget).
    fn write_data(&mut self, ctx: &C, writer: &mut BitWriter) -> WriteResult;

    /// Reads the stream's section of a received packet.
    fn read_data(&mut self, ctx: &mut C, reader: &mut BitReader) -> Result<(), StreamError>;

    /// Called once every section of a received packet was read (also when a later
    /// section failed), for every stream whose section was read, in stream order.
    ///
    /// Streams that must act after the whole packet is known do it here: the
    /// replication reader applies the packet's state to the game objects, so another
    /// stream can run work *before* that state is applied (in its `read_data`) or
    /// *after* it (here, being later in the stream order).
    fn end_packet(&mut self, _ctx: &mut C) {}

    /// The fate of the oldest packet this stream wrote into.
    fn process_delivery(&mut self, ctx: &mut C, status: DeliveryStatus);

    /// Whether everything reliable was acknowledged.
    fn has_acknowledged_all_reliable_data(&self) -> bool {
        true
    }
}

/// Bits of the stream count field.
pub const STREAM_COUNT_BITS: u32 = 5;

#[derive(Debug, Clone, Copy)]
struct ManagerRecord {
    sequence: PacketSequence,
    /// The streams with a section in the packet.
    mask: u32,
    /// The streams whose section overflowed and was dropped: told `Lost` whatever
    /// the packet's fate.
    dropped: u32,
}

/// The streams a [`DataStreamManager`] is built with, as the fields of one struct: the
/// owner reaches each through its field ([`DataStreamManager::fixed`]), with its type,
/// and the manager reaches them by index to multiplex them. They take the first
/// [`LEN`](Self::LEN) indices of every packet, in index order.
///
/// ```
/// use replicate::bits::{BitReader, BitWriter};
/// use replicate::internals::connection::DeliveryStatus;
/// use replicate::internals::stream::{DataStream, StreamError, StreamSet, WriteResult};
///
/// struct Ping;
/// impl DataStream<()> for Ping {
///     fn name(&self) -> &str { "ping" }
///     fn write_data(&mut self, _: &(), _: &mut BitWriter) -> WriteResult { WriteResult::NoData }
///     fn read_data(&mut self, _: &mut (), _: &mut BitReader) -> Result<(), StreamError> { Ok(()) }
///     fn process_delivery(&mut self, _: &mut (), _: DeliveryStatus) {}
/// }
///
/// /// Two pings, reached as `streams.fixed().first` and `.second`.
/// struct Pings { first: Ping, second: Ping }
/// impl StreamSet<()> for Pings {
///     const LEN: usize = 2;
///     fn stream(&self, index: usize) -> Option<&dyn DataStream<()>> {
///         match index { 0 => Some(&self.first), 1 => Some(&self.second), _ => None }
///     }
///     fn stream_mut(&mut self, index: usize) -> Option<&mut dyn DataStream<()>> {
///         match index { 0 => Some(&mut self.first), 1 => Some(&mut self.second), _ => None }
///     }
/// }
/// ```
pub trait StreamSet<C: ?Sized + 'static>: Send + 'static {
    /// How many streams the set holds (at most
    /// [`MAX_STREAM_COUNT`](DataStreamManager::MAX_STREAM_COUNT)).
    const LEN: usize;

    /// Stream `index`: `Some` for every index below [`LEN`](Self::LEN).
    fn stream(&self, index: usize) -> Option<&dyn DataStream<C>>;

    /// Stream `index`, mutably: `Some` for every index below [`LEN`](Self::LEN).
    fn stream_mut(&mut self, index: usize) -> Option<&mut dyn DataStream<C>>;
}

/// No fixed streams: a manager whose streams are all added.
impl<C: ?Sized + 'static> StreamSet<C> for () {
    const LEN: usize = 0;

    fn stream(&self, _: usize) -> Option<&dyn DataStream<C>> {
        None
    }

    fn stream_mut(&mut self, _: usize) -> Option<&mut dyn DataStream<C>> {
        None
    }
}

/// A stream added to a [`DataStreamManager`], by its index and type: what
/// [`add_stream`](DataStreamManager::add_stream) returns, to reach the stream again
/// with [`stream`](DataStreamManager::stream). Managers built alike (the same fixed
/// set, the same streams added in the same order) give equal keys.
pub struct StreamKey<T> {
    index: usize,
    stream: PhantomData<fn() -> T>,
}

impl<T> StreamKey<T> {
    /// The key of the first stream added to a manager without fixed streams.
    pub const fn first() -> Self {
        Self {
            index: 0,
            stream: PhantomData,
        }
    }

    /// The stream's index in every packet's stream mask.
    pub fn index(self) -> usize {
        self.index
    }
}

impl<T> Clone for StreamKey<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for StreamKey<T> {}

impl<T> PartialEq for StreamKey<T> {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}

impl<T> Eq for StreamKey<T> {}

impl<T> std::fmt::Debug for StreamKey<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StreamKey<{}>({})",
            std::any::type_name::<T>(),
            self.index
        )
    }
}

/// Stream `index` of a manager: of its fixed set, then of those added.
fn nth_stream<'a, C: ?Sized + 'static, S: StreamSet<C>>(
    fixed: &'a mut S,
    added: &'a mut [Box<dyn DataStream<C>>],
    index: usize,
) -> Option<&'a mut dyn DataStream<C>> {
    match index.checked_sub(S::LEN) {
        None => fixed.stream_mut(index),
        Some(i) => added.get_mut(i).map(|s| &mut **s as &mut dyn DataStream<C>),
    }
}

/// Multiplexes up to [`MAX_STREAM_COUNT`](DataStreamManager::MAX_STREAM_COUNT) streams
/// into each packet: its fixed [`StreamSet`] `S`, then the streams added to it.
///
/// ```
/// use replicate::bits::{BitReader, BitWriter};
/// use replicate::internals::connection::{DeliveryStatus, PacketSequence};
/// use replicate::internals::stream::{DataStream, DataStreamManager, StreamError, WriteResult};
///
/// /// Sends a counter when asked.
/// struct Counter { next: u8, pending: Option<u8>, got: Vec<u8>, acked: u32 }
/// impl DataStream<()> for Counter {
///     fn name(&self) -> &str { "counter" }
///     fn write_data(&mut self, _: &(), w: &mut BitWriter) -> WriteResult {
///         let Some(v) = self.pending.take() else { return WriteResult::NoData };
///         w.write_bits(v as u64, 8);
///         WriteResult::Ok
///     }
///     fn read_data(&mut self, _: &mut (), r: &mut BitReader) -> Result<(), StreamError> {
///         self.got.push(r.read_bits(8) as u8);
///         r.check().map_err(|e| StreamError::malformed("counter", e))
///     }
///     fn process_delivery(&mut self, _: &mut (), s: DeliveryStatus) {
///         if s == DeliveryStatus::Delivered { self.acked += 1 }
///     }
/// }
///
/// let mut tx = DataStreamManager::new();
/// let counter = tx.add_stream(Counter { next: 0, pending: Some(7), got: vec![], acked: 0 }).unwrap();
/// let mut rx = DataStreamManager::new();
/// rx.add_stream(Counter { next: 0, pending: None, got: vec![], acked: 0 }).unwrap();
///
/// let mut w = BitWriter::with_capacity_bytes(64);
/// tx.write_packet(&(), PacketSequence(1), &mut w);
/// let bytes = w.finish().unwrap();
/// rx.read_packet(&mut (), &mut BitReader::new(&bytes)).unwrap();
/// // Both managers were built alike: one key reaches the counter in each.
/// assert_eq!(rx.stream(counter).unwrap().got, vec![7]);
/// tx.process_delivery(&mut (), PacketSequence(1), DeliveryStatus::Delivered);
/// assert_eq!(tx.stream(counter).unwrap().acked, 1);
/// ```
pub struct DataStreamManager<C: ?Sized + 'static, S: StreamSet<C> = ()> {
    /// The streams the manager was built with, first in every packet.
    fixed: S,
    /// The streams added, after them.
    added: Vec<Box<dyn DataStream<C>>>,
    status: Vec<SendStatus>,
    records: VecDeque<ManagerRecord>,
    /// Per stream: losses owed for records dropped while writing (too many in
    /// flight), told before the next delivery.
    owed_losses: Vec<u32>,
    /// What the last written packet's sections took (network insights), when on.
    sections: Option<Box<SectionBits>>,
    /// What the last read packet's sections took, when on.
    read_sections: Option<Box<SectionBits>>,
}

/// The bits of the last packet a [`DataStreamManager`] wrote, per part (kept only
/// when [`DataStreamManager::set_section_bits`] turned it on).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SectionBits {
    /// The stream count and mask.
    pub framing: u64,
    /// Each stream's section, by stream index (0 for a stream that wrote nothing or
    /// was rolled back).
    pub streams: Vec<u64>,
}

impl<C: ?Sized + 'static, S: StreamSet<C>> std::fmt::Debug for DataStreamManager<C, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataStreamManager")
            .field("streams", &self.stream_names())
            .field("status", &self.status)
            .field("records", &self.records.len())
            .finish()
    }
}

impl<C: ?Sized + 'static> Default for DataStreamManager<C> {
    fn default() -> Self {
        Self::new()
    }
}

/// Registering more than [`DataStreamManager::MAX_STREAM_COUNT`] streams.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("a data stream manager holds at most 32 streams")]
pub struct TooManyStreams;

impl<C: ?Sized + 'static> DataStreamManager<C> {
    /// A manager without streams.
    pub fn new() -> Self {
        Self::with_fixed(())
    }
}

impl<C: ?Sized + 'static, S: StreamSet<C>> DataStreamManager<C, S> {
    /// Most streams per manager.
    pub const MAX_STREAM_COUNT: usize = 32;

    /// Most packets whose delivery status may be outstanding; beyond it the oldest is
    /// treated as lost (a connection reports every packet long before this).
    pub const MAX_RECORDS_IN_FLIGHT: usize = 4096;

    /// A manager of the streams of `fixed` (at most
    /// [`MAX_STREAM_COUNT`](Self::MAX_STREAM_COUNT) of them; any beyond are never
    /// written or read).
    pub fn with_fixed(fixed: S) -> Self {
        Self {
            fixed,
            added: Vec::new(),
            status: vec![SendStatus::Send; S::LEN.min(Self::MAX_STREAM_COUNT)],
            records: VecDeque::new(),
            owed_losses: Vec::new(),
            sections: None,
            read_sections: None,
        }
    }

    /// Turns on or off keeping the bits of each packet's sections, written
    /// ([`section_bits`](Self::section_bits)) and read
    /// ([`read_section_bits`](Self::read_section_bits)).
    pub fn set_section_bits(&mut self, on: bool) {
        self.sections = on.then(Box::default);
        self.read_sections = on.then(Box::default);
    }

    /// The bits of the last read packet's sections, when turned on (all zero for a
    /// packet without stream data; a section cut short by a read error counts what
    /// was read).
    pub fn read_section_bits(&self) -> Option<&SectionBits> {
        self.read_sections.as_deref()
    }

    /// The bits of the last written packet's sections, when turned on.
    pub fn section_bits(&self) -> Option<&SectionBits> {
        self.sections.as_deref()
    }

    /// The streams the manager was built with.
    pub fn fixed(&self) -> &S {
        &self.fixed
    }

    /// The streams the manager was built with, mutably.
    pub fn fixed_mut(&mut self) -> &mut S {
        &mut self.fixed
    }

    /// Appends a stream after the fixed ones and those added before (its index is its
    /// position). Both peers must have the same streams in the same order.
    pub fn add_stream<T: DataStream<C>>(
        &mut self,
        stream: T,
    ) -> Result<StreamKey<T>, TooManyStreams> {
        let index = self.len();
        if index >= Self::MAX_STREAM_COUNT {
            return Err(TooManyStreams);
        }
        self.added.push(Box::new(stream));
        self.status.push(SendStatus::Send);
        Ok(StreamKey {
            index,
            stream: PhantomData,
        })
    }

    /// The added stream `key` names (`None` for a key of another manager that names
    /// no stream of that type here).
    pub fn stream<T: DataStream<C>>(&self, key: StreamKey<T>) -> Option<&T> {
        let s = self.added.get(key.index.checked_sub(S::LEN)?)?;
        let any: &dyn Any = s.as_ref();
        any.downcast_ref::<T>()
    }

    /// The added stream `key` names, mutably.
    pub fn stream_mut<T: DataStream<C>>(&mut self, key: StreamKey<T>) -> Option<&mut T> {
        let s = self.added.get_mut(key.index.checked_sub(S::LEN)?)?;
        let any: &mut dyn Any = s.as_mut();
        any.downcast_mut::<T>()
    }

    /// Every stream, by index.
    fn streams(&self) -> impl Iterator<Item = &dyn DataStream<C>> {
        (0..self.fixed_len())
            .filter_map(|i| self.fixed.stream(i))
            .chain(self.added.iter().map(|s| &**s as &dyn DataStream<C>))
    }

    /// How many of the fixed streams are multiplexed.
    fn fixed_len(&self) -> usize {
        S::LEN.min(Self::MAX_STREAM_COUNT)
    }

    /// The streams' names, by index.
    pub fn stream_names(&self) -> Vec<String> {
        self.streams().map(|s| s.name().to_string()).collect()
    }

    /// Number of streams.
    pub fn len(&self) -> usize {
        self.fixed_len() + self.added.len()
    }

    /// Whether there is no stream.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pauses or resumes the stream named `name`. Returns whether it exists.
    pub fn set_send_status(&mut self, name: &str, status: SendStatus) -> bool {
        let index = self.streams().position(|s| s.name() == name);
        match index.and_then(|i| self.status.get_mut(i)) {
            Some(slot) => {
                *slot = status;
                true
            }
            None => false,
        }
    }

    /// The send status of the stream named `name`.
    pub fn send_status(&self, name: &str) -> Option<SendStatus> {
        let i = self.streams().position(|s| s.name() == name)?;
        self.status.get(i).copied()
    }

    /// Packets written whose delivery status is still unknown.
    pub fn packets_in_flight(&self) -> usize {
        self.records.len()
    }

    /// Whether every stream had all its reliable data acknowledged.
    pub fn has_acknowledged_all_reliable_data(&self) -> bool {
        self.streams()
            .all(|s| s.has_acknowledged_all_reliable_data())
    }

    /// Writes the streams' data for packet `sequence` into `writer` (up to its
    /// capacity). A record is kept for every packet, even an empty one, so call
    /// [`process_delivery`](Self::process_delivery) for every sequence written.
    pub fn write_packet(
        &mut self,
        ctx: &C,
        sequence: PacketSequence,
        writer: &mut BitWriter,
    ) -> WriteResult {
        let count = self.len() as u32;
        let mut mask = 0u32;
        let mut dropped = 0u32;
        let mut result = WriteResult::NoData;
        if let Some(s) = self.sections.as_mut() {
            s.framing = 0;
            s.streams.clear();
            s.streams.resize(count as usize, 0);
        }
        if count > 0 {
            let header = writer.mark();
            writer.write_bits((count - 1) as u64, STREAM_COUNT_BITS);
            let mask_pos = writer.position();
            writer.write_bits(0, count);
            if writer.is_overflown() {
                writer.rollback(header);
                tracing::error!("data stream manager: no room for the stream header");
            } else {
                for i in 0..count as usize {
                    let Some(stream) = nth_stream(&mut self.fixed, &mut self.added, i) else {
                        continue;
                    };
                    if self.status[i] == SendStatus::Pause {
                        continue;
                    }
                    let sub = writer.begin_substream(writer.bits_left());
                    let r = stream.write_data(ctx, writer);
                    match (r, writer.commit_substream(sub)) {
                        (WriteResult::NoData, _) => writer.rollback(sub),
                        (r, Ok(())) => {
                            mask |= 1 << i;
                            result = result.combine(r);
                            if let Some(s) = self.sections.as_mut() {
                                s.streams[i] = (writer.position() - sub.position()) as u64;
                            }
                        }
                        (_, Err(e)) => {
                            tracing::error!(
                                "data stream `{}` overflowed its budget ({e}); its data is dropped",
                                stream.name()
                            );
                            // Its record for this packet is told `Lost` in its turn.
                            dropped |= 1 << i;
                        }
                    }
                }
                writer.patch_bits(mask_pos, mask as u64, count);
                if let Some(s) = self.sections.as_mut() {
                    s.framing = u64::from(STREAM_COUNT_BITS + count);
                }
            }
        }
        if mask == 0 {
            // Nothing written: no record (the caller may cancel the packet and reuse
            // its sequence; a record here would then shadow the real packet's). A
            // dropped section is told lost before the next delivery.
            self.owe_losses(dropped);
            return result;
        }
        if self.records.len() >= Self::MAX_RECORDS_IN_FLIGHT
            && let Some(oldest) = self.records.pop_front()
        {
            // A caller that never reports delivery must not grow this without bound;
            // the streams hear of the loss before the next delivery.
            tracing::warn!(
                "data stream manager: packet {:?} never got a delivery status; treating it as lost",
                oldest.sequence
            );
            self.owe_losses(oldest.mask | oldest.dropped);
        }
        self.records.push_back(ManagerRecord {
            sequence,
            mask,
            dropped,
        });
        result
    }

    /// Reads a received packet's stream data, dispatching each section to its stream,
    /// then calls [`DataStream::end_packet`] on every stream whose section was read (in
    /// stream order, also after an error in a later section). A packet with fewer bits
    /// than a stream header carries no stream data (`Ok`).
    pub fn read_packet(&mut self, ctx: &mut C, reader: &mut BitReader) -> Result<(), StreamError> {
        let count = self.len() as u32;
        if let Some(s) = self.read_sections.as_mut() {
            s.framing = 0;
            s.streams.clear();
            s.streams.resize(count as usize, 0);
        }
        if count == 0 || reader.bits_left() < (STREAM_COUNT_BITS + count) as usize {
            // No room for a stream header: a packet without stream data (an ack-only
            // packet's padding).
            return Ok(());
        }
        if reader.bits_left() < 8 {
            // Only zero padding left means no stream data; a real header is never all
            // zero when two or more streams exist, and means "nothing" with one.
            let mut peek = reader.clone();
            if peek.read_bits(peek.bits_left() as u32) == 0 {
                return Ok(());
            }
        }
        let got = reader.read_bits(STREAM_COUNT_BITS) as u32 + 1;
        if reader.is_overflown() {
            return Err(StreamError::malformed("manager", "truncated header"));
        }
        if got != count {
            return Err(StreamError::StreamCountMismatch {
                got,
                expected: count,
            });
        }
        let mask = reader.read_bits(count) as u32;
        if reader.is_overflown() {
            return Err(StreamError::malformed("manager", "truncated stream mask"));
        }
        if let Some(s) = self.read_sections.as_mut() {
            s.framing = u64::from(STREAM_COUNT_BITS + count);
        }
        let mut result = Ok(());
        let mut read = 0u32;
        for i in 0..count as usize {
            let Some(stream) = nth_stream(&mut self.fixed, &mut self.added, i) else {
                continue;
            };
            if mask & (1 << i) != 0 {
                read |= 1 << i;
                let start = reader.position();
                let outcome = stream.read_data(ctx, reader);
                if let Some(s) = self.read_sections.as_mut() {
                    s.streams[i] = reader.position().saturating_sub(start) as u64;
                }
                if let Err(e) = outcome {
                    // The sections after a bad one cannot be found.
                    result = Err(e);
                    break;
                }
            }
        }
        // What was read is acted on, even after an error.
        for i in 0..count as usize {
            if read & (1 << i) != 0
                && let Some(stream) = nth_stream(&mut self.fixed, &mut self.added, i)
            {
                stream.end_packet(ctx);
            }
        }
        result
    }

    /// Routes the delivery status of packet `sequence` to every stream that wrote into
    /// it. Statuses must come in send order; records older than `sequence` that were
    /// never reported are treated as lost; a sequence the manager did not write (an
    /// ack-only packet) is ignored.
    pub fn process_delivery(
        &mut self,
        ctx: &mut C,
        sequence: PacketSequence,
        status: DeliveryStatus,
    ) {
        self.tell_owed_losses(ctx);
        loop {
            let Some(front) = self.records.front().copied() else {
                // A packet written without the manager (an ack-only packet): nothing to do.
                tracing::trace!("data stream manager: no record for packet {sequence:?}");
                return;
            };
            if front.sequence != sequence && !front.sequence.is_newer_than(sequence) {
                // An older packet was never reported: count it as lost.
                tracing::warn!(
                    "data stream manager: packet {:?} had no delivery status, treating it as lost",
                    front.sequence
                );
                self.records.pop_front();
                self.dispatch(ctx, front, DeliveryStatus::Lost);
                continue;
            }
            if front.sequence != sequence {
                tracing::trace!("data stream manager: no record for packet {sequence:?}");
                return;
            }
            self.records.pop_front();
            self.dispatch(ctx, front, status);
            return;
        }
    }

    /// Owes a loss to each stream in `mask` (see `owed_losses`).
    fn owe_losses(&mut self, mask: u32) {
        if mask == 0 {
            return;
        }
        self.owed_losses.resize(self.len(), 0);
        for (i, owed) in self.owed_losses.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                *owed += 1;
            }
        }
    }

    /// Tells each stream the losses owed to it (see `owed_losses`).
    fn tell_owed_losses(&mut self, ctx: &mut C) {
        for (i, owed) in self.owed_losses.iter_mut().enumerate() {
            let owed = std::mem::take(owed);
            if owed == 0 {
                continue;
            }
            let Some(stream) = nth_stream(&mut self.fixed, &mut self.added, i) else {
                continue;
            };
            for _ in 0..owed {
                stream.process_delivery(ctx, DeliveryStatus::Lost);
            }
        }
    }

    /// Tells a packet's fate to the streams it carried (a dropped section is lost
    /// whatever the packet's fate, unless discarded).
    fn dispatch(&mut self, ctx: &mut C, record: ManagerRecord, status: DeliveryStatus) {
        for i in 0..self.len() {
            let bit = 1 << i;
            if (record.dropped | record.mask) & bit == 0 {
                continue;
            }
            let Some(stream) = nth_stream(&mut self.fixed, &mut self.added, i) else {
                continue;
            };
            if record.dropped & bit != 0 {
                let lost = match status {
                    DeliveryStatus::Discard => DeliveryStatus::Discard,
                    _ => DeliveryStatus::Lost,
                };
                stream.process_delivery(ctx, lost);
            } else if record.mask & bit != 0 {
                stream.process_delivery(ctx, status);
            }
        }
    }

    /// Discards every in-flight record (connection closing).
    pub fn discard_all(&mut self, ctx: &mut C) {
        self.tell_owed_losses(ctx);
        while let Some(front) = self.records.pop_front() {
            self.dispatch(ctx, front, DeliveryStatus::Discard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Probe {
        name: String,
        to_send: VecDeque<u8>,
        in_flight: VecDeque<u8>,
        received: Vec<u8>,
        delivered: Vec<u8>,
        lost: Vec<u8>,
    }

    impl DataStream<()> for Probe {
        fn name(&self) -> &str {
            &self.name
        }
        fn write_data(&mut self, _: &(), w: &mut BitWriter) -> WriteResult {
            let Some(v) = self.to_send.pop_front() else {
                return WriteResult::NoData;
            };
            w.write_bits(v as u64, 8);
            self.in_flight.push_back(v);
            if self.to_send.is_empty() {
                WriteResult::Ok
            } else {
                WriteResult::HasMoreData
            }
        }
        fn read_data(&mut self, _: &mut (), r: &mut BitReader) -> Result<(), StreamError> {
            let v = r.read_bits(8) as u8;
            r.check()
                .map_err(|e| StreamError::malformed(&self.name, e))?;
            self.received.push(v);
            Ok(())
        }
        fn process_delivery(&mut self, _: &mut (), s: DeliveryStatus) {
            let Some(v) = self.in_flight.pop_front() else {
                return;
            };
            match s {
                DeliveryStatus::Delivered => self.delivered.push(v),
                DeliveryStatus::Lost => {
                    self.lost.push(v);
                    self.to_send.push_back(v);
                }
                DeliveryStatus::Discard => {}
            }
        }
    }

    fn probe(name: &str, data: &[u8]) -> Probe {
        Probe {
            name: name.into(),
            to_send: data.iter().copied().collect(),
            ..Default::default()
        }
    }

    /// The key of the probe added `index`-th to a manager without fixed streams.
    fn key(index: usize) -> StreamKey<Probe> {
        StreamKey {
            index,
            stream: PhantomData,
        }
    }

    #[test]
    fn header_is_5_bits_plus_mask_and_sections_follow_in_order() {
        let mut tx = DataStreamManager::<()>::new();
        tx.add_stream(probe("a", &[1])).unwrap();
        tx.add_stream(probe("b", &[])).unwrap();
        tx.add_stream(probe("c", &[3])).unwrap();
        let mut w = BitWriter::with_capacity_bytes(64);
        assert_eq!(
            tx.write_packet(&(), PacketSequence(0), &mut w),
            WriteResult::Ok
        );
        assert_eq!(w.position(), 5 + 3 + 8 + 8);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(5), 2);
        assert_eq!(r.read_bits(3), 0b101);

        let mut rx = DataStreamManager::<()>::new();
        rx.add_stream(probe("a", &[])).unwrap();
        rx.add_stream(probe("b", &[])).unwrap();
        rx.add_stream(probe("c", &[])).unwrap();
        rx.read_packet(&mut (), &mut BitReader::new(&bytes))
            .unwrap();
        assert_eq!(rx.stream(key(0)).unwrap().received, vec![1]);
        assert!(rx.stream(key(1)).unwrap().received.is_empty());
        assert_eq!(rx.stream(key(2)).unwrap().received, vec![3]);
    }

    #[test]
    fn paused_stream_is_skipped_and_resumes() {
        let mut tx = DataStreamManager::<()>::new();
        tx.add_stream(probe("replication", &[1])).unwrap();
        tx.add_stream(probe("tokens", &[2])).unwrap();
        assert!(tx.set_send_status("replication", SendStatus::Pause));
        assert!(!tx.set_send_status("nope", SendStatus::Pause));
        let mut w = BitWriter::with_capacity_bytes(64);
        tx.write_packet(&(), PacketSequence(0), &mut w);
        assert_eq!(w.position(), 5 + 2 + 8, "only the token stream wrote");
        tx.set_send_status("replication", SendStatus::Send);
        let mut w = BitWriter::with_capacity_bytes(64);
        tx.write_packet(&(), PacketSequence(1), &mut w);
        assert_eq!(w.position(), 5 + 2 + 8);
        assert_eq!(tx.send_status("replication"), Some(SendStatus::Send));
    }

    #[test]
    fn delivery_is_routed_to_streams_that_wrote() {
        let mut tx = DataStreamManager::<()>::new();
        tx.add_stream(probe("a", &[1, 2])).unwrap();
        tx.add_stream(probe("b", &[9])).unwrap();
        for s in 0..3u16 {
            let mut w = BitWriter::with_capacity_bytes(64);
            tx.write_packet(&(), PacketSequence(s), &mut w);
        }
        // The third packet carried nothing: it has no record.
        assert_eq!(tx.packets_in_flight(), 2);
        tx.process_delivery(&mut (), PacketSequence(0), DeliveryStatus::Delivered);
        tx.process_delivery(&mut (), PacketSequence(1), DeliveryStatus::Lost);
        tx.process_delivery(&mut (), PacketSequence(2), DeliveryStatus::Delivered);
        let a = tx.stream(key(0)).unwrap();
        assert_eq!((a.delivered.clone(), a.lost.clone()), (vec![1], vec![2]));
        let b = tx.stream(key(1)).unwrap();
        assert_eq!(b.delivered, vec![9]);
        assert_eq!(tx.packets_in_flight(), 0);
    }

    #[test]
    fn skipped_sequence_counts_as_lost() {
        let mut tx = DataStreamManager::<()>::new();
        tx.add_stream(probe("a", &[1, 2])).unwrap();
        for s in 0..2u16 {
            let mut w = BitWriter::with_capacity_bytes(64);
            tx.write_packet(&(), PacketSequence(s), &mut w);
        }
        tx.process_delivery(&mut (), PacketSequence(1), DeliveryStatus::Delivered);
        let a = tx.stream(key(0)).unwrap();
        assert_eq!((a.lost.clone(), a.delivered.clone()), (vec![1], vec![2]));
    }

    #[test]
    fn at_most_32_streams_and_count_mismatch_is_an_error() {
        let mut m = DataStreamManager::<()>::new();
        for i in 0..32 {
            m.add_stream(probe(&format!("s{i}"), &[])).unwrap();
        }
        assert_eq!(m.add_stream(probe("x", &[])), Err(TooManyStreams));
        let mut w = BitWriter::with_capacity_bytes(64);
        m.write_packet(&(), PacketSequence(0), &mut w);
        assert_eq!(w.position(), 5 + 32);
        let mut one = DataStreamManager::<()>::new();
        one.add_stream(probe("a", &[])).unwrap();
        let bytes = w.finish().unwrap();
        assert!(matches!(
            one.read_packet(&mut (), &mut BitReader::new(&bytes)),
            Err(StreamError::StreamCountMismatch {
                got: 32,
                expected: 1
            })
        ));
    }

    proptest::proptest! {
        #[test]
        fn any_subset_of_streams_roundtrips(
            data in proptest::collection::vec(proptest::option::of(proptest::num::u8::ANY), 1..32),
            paused in proptest::collection::vec(proptest::bool::ANY, 32),
        ) {
            let mut tx = DataStreamManager::<()>::new();
            let mut rx = DataStreamManager::<()>::new();
            for (i, d) in data.iter().enumerate() {
                let name = format!("s{i}");
                tx.add_stream(probe(&name, d.as_slice())).unwrap();
                rx.add_stream(probe(&name, &[])).unwrap();
                if paused[i] {
                    tx.set_send_status(&name, SendStatus::Pause);
                }
            }
            let mut w = BitWriter::with_capacity_bytes(256);
            tx.write_packet(&(), PacketSequence(0), &mut w);
            let sent = data.iter().zip(&paused).filter(|(d, p)| d.is_some() && !**p).count();
            proptest::prop_assert_eq!(w.position(), 5 + data.len() + 8 * sent);
            let bytes = w.finish().unwrap();
            rx.read_packet(&mut (), &mut BitReader::new(&bytes)).unwrap();
            for (i, d) in data.iter().enumerate() {
                let got = &rx.stream(key(i)).unwrap().received;
                let expect: Vec<u8> = d.iter().copied().filter(|_| !paused[i]).collect();
                proptest::prop_assert_eq!(got, &expect);
            }
        }
    }

    #[test]
    fn ack_only_packets_carry_no_stream_data_and_have_no_record() {
        let mut m = DataStreamManager::<()>::new();
        m.add_stream(probe("a", &[1])).unwrap();
        // Fewer bits than a header: nothing to read.
        m.read_packet(&mut (), &mut BitReader::with_bit_len(&[0], 5))
            .unwrap();
        let mut w = BitWriter::with_capacity_bytes(64);
        m.write_packet(&(), PacketSequence(7), &mut w);
        // Sequence 6 was an ack-only packet the manager never saw.
        m.process_delivery(&mut (), PacketSequence(6), DeliveryStatus::Delivered);
        assert_eq!(m.packets_in_flight(), 1);
        m.process_delivery(&mut (), PacketSequence(7), DeliveryStatus::Delivered);
        assert_eq!(m.stream(key(0)).unwrap().delivered, vec![1]);
    }

    #[test]
    fn overflowing_stream_is_rolled_back_and_told_lost() {
        let mut tx = DataStreamManager::<()>::new();
        tx.add_stream(probe("a", &[5])).unwrap();
        let mut w = BitWriter::with_capacity_bits(5 + 1 + 4);
        assert_eq!(
            tx.write_packet(&(), PacketSequence(0), &mut w),
            WriteResult::NoData
        );
        assert_eq!(w.position(), 6);
        assert!(!w.is_overflown());
        // Told at the next delivery (writing reads the context only).
        assert!(tx.stream(key(0)).unwrap().lost.is_empty());
        tx.process_delivery(&mut (), PacketSequence(1), DeliveryStatus::Delivered);
        assert_eq!(tx.stream(key(0)).unwrap().lost, vec![5]);
    }

    #[test]
    fn a_dropped_section_beside_others_is_lost_in_its_packets_turn() {
        let mut tx = DataStreamManager::<()>::new();
        tx.add_stream(probe("a", &[1])).unwrap();
        tx.add_stream(probe("b", &[7])).unwrap();
        // Header (5 + 2) and stream a's 8 bits fit; b's do not.
        let mut w = BitWriter::with_capacity_bits(5 + 2 + 8 + 4);
        assert_ne!(
            tx.write_packet(&(), PacketSequence(0), &mut w),
            WriteResult::NoData
        );
        assert!(tx.stream(key(1)).unwrap().lost.is_empty());
        tx.process_delivery(&mut (), PacketSequence(0), DeliveryStatus::Delivered);
        assert_eq!(tx.stream(key(0)).unwrap().delivered, vec![1]);
        assert_eq!(tx.stream(key(1)).unwrap().lost, vec![7]);
        assert!(tx.stream(key(1)).unwrap().delivered.is_empty());
    }

    /// Two probes as typed fields.
    #[derive(Default)]
    struct Pair {
        first: Probe,
        second: Probe,
    }

    impl StreamSet<()> for Pair {
        const LEN: usize = 2;

        fn stream(&self, index: usize) -> Option<&dyn DataStream<()>> {
            match index {
                0 => Some(&self.first),
                1 => Some(&self.second),
                _ => None,
            }
        }

        fn stream_mut(&mut self, index: usize) -> Option<&mut dyn DataStream<()>> {
            match index {
                0 => Some(&mut self.first),
                1 => Some(&mut self.second),
                _ => None,
            }
        }
    }

    #[test]
    fn fixed_streams_come_first_and_added_ones_follow_under_their_keys() {
        let pair = |a: &[u8], b: &[u8]| Pair {
            first: probe("first", a),
            second: probe("second", b),
        };
        let mut tx = DataStreamManager::with_fixed(pair(&[1], &[]));
        let extra = tx.add_stream(probe("extra", &[3])).unwrap();
        assert_eq!(extra.index(), 2, "added after the two fixed streams");
        let mut rx = DataStreamManager::with_fixed(pair(&[], &[]));
        assert_eq!(rx.add_stream(probe("extra", &[])).unwrap(), extra);
        assert_eq!(tx.stream_names(), ["first", "second", "extra"]);
        assert!(tx.set_send_status("second", SendStatus::Pause));
        assert_eq!(tx.send_status("second"), Some(SendStatus::Pause));

        let mut w = BitWriter::with_capacity_bytes(64);
        tx.write_packet(&(), PacketSequence(0), &mut w);
        assert_eq!(w.position(), 5 + 3 + 8 + 8);
        let bytes = w.finish().unwrap();
        rx.read_packet(&mut (), &mut BitReader::new(&bytes))
            .unwrap();
        assert_eq!(rx.fixed().first.received, vec![1]);
        assert!(rx.fixed().second.received.is_empty());
        assert_eq!(rx.stream(extra).unwrap().received, vec![3]);

        tx.process_delivery(&mut (), PacketSequence(0), DeliveryStatus::Lost);
        assert_eq!(tx.fixed().first.lost, vec![1]);
        assert_eq!(tx.stream(extra).unwrap().lost, vec![3]);
        // Lost data is queued again, in the fixed stream's own field.
        tx.fixed_mut().first.to_send.push_back(9);
        assert_eq!(tx.fixed().first.to_send, [1, 9]);
        // A key naming a fixed stream's index reaches nothing: those are fields.
        assert!(tx.stream(key(0)).is_none());
        assert!(tx.stream_mut(key(1)).is_none());
    }
}
