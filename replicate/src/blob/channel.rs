//! Message channels: reliable ordered, reliable unordered and unreliable delivery of
//! [`NetBlob`]s over packets that may be lost, duplicated or reordered.
//!
//! The sender keeps every reliable message until a packet carrying it is acknowledged;
//! when that packet is reported lost the message is queued again (each message is in
//! at most one packet in flight). The receiver delivers each reliable message exactly
//! once — in id order for [`DeliveryMode::ReliableOrdered`] — and unreliable messages
//! at most once (duplicate packets are dropped by the connection).
//!
//! Wire form of a channel's section of a packet:
//!
//! ```text
//! ([1] [id: 16, reliable modes only] [len: 5 + n] [payload: len bits])*  [0]
//! ```
//!
//! Message ids are 64-bit internally and 16 bits on the wire; at most `window` (at
//! most 32768) messages are unacknowledged at once, so the receiver reconstructs ids
//! without ambiguity.

use super::{BlobError, NetBlob, read_len, write_len};
use crate::bits::{BitReader, BitWriter};
use crate::connection::DeliveryStatus;
use std::collections::{BTreeMap, VecDeque};
use thiserror::Error;

/// How a channel delivers messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryMode {
    /// Re-sent until acknowledged; delivered exactly once, in send order.
    ReliableOrdered,
    /// Re-sent until acknowledged; delivered exactly once, in arrival order.
    ReliableUnordered,
    /// Sent once; delivered at most once; may be lost.
    Unreliable,
}

impl DeliveryMode {
    /// Whether messages are re-sent until acknowledged.
    pub fn is_reliable(self) -> bool {
        !matches!(self, DeliveryMode::Unreliable)
    }
}

/// Limits of one channel; sender and receiver must use the same values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelConfig {
    /// The delivery mode.
    pub mode: DeliveryMode,
    /// Largest message in bits (default 8192 bytes); larger data must be split.
    pub max_message_bits: u32,
    /// Most messages queued on the sender (default 4096); pushing more is an error.
    pub max_queued: usize,
    /// Most unacknowledged reliable messages (default 1024, at most 32768).
    pub window: u32,
    /// Most bits the receiver buffers for out-of-order reliable messages
    /// (default 4 MiB).
    pub max_buffered_bits: u64,
}

impl ChannelConfig {
    /// Defaults for `mode`.
    pub const fn new(mode: DeliveryMode) -> Self {
        Self {
            mode,
            max_message_bits: 8192 * 8,
            max_queued: 4096,
            window: 1024,
            max_buffered_bits: 4 * 1024 * 1024 * 8,
        }
    }

    fn window(&self) -> u64 {
        self.window.clamp(1, 32768) as u64
    }
}

/// Errors of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChannelError {
    /// A message is larger than `max_message_bits`.
    #[error(
        "message of {bits} bits exceeds the channel maximum of {max} bits; split it or raise max_message_bits"
    )]
    MessageTooLarge {
        /// The message size.
        bits: u64,
        /// The cap.
        max: u64,
    },
    /// The sender's queue is full.
    #[error("channel queue full ({0} messages); the peer is not acknowledging fast enough")]
    QueueFull(usize),
    /// A received message id lies outside the receive window (a protocol violation).
    #[error("message id outside the receive window")]
    OutsideWindow,
    /// The receiver's out-of-order buffer exceeded its cap.
    #[error("receive buffer above its cap of {0} bits")]
    BufferFull(u64),
    /// Received data was malformed.
    #[error(transparent)]
    Blob(#[from] BlobError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendState {
    Waiting,
    InFlight,
    Acked,
}

#[derive(Debug)]
struct Outgoing {
    blob: Option<NetBlob>,
    state: SendState,
    /// Whether the message was ever written into a packet.
    sent: bool,
}

/// What a packet carried for one channel: the ids of the reliable messages in it.
pub type ChannelRecord = Vec<u64>;

/// The sending half of a channel.
///
/// ```
/// use replicate::bits::{BitReader, BitWriter};
/// use replicate::internals::blob::{ChannelConfig, ChannelReceiver, ChannelSender, DeliveryMode, NetBlob};
/// use replicate::internals::connection::DeliveryStatus;
///
/// let config = ChannelConfig::new(DeliveryMode::ReliableOrdered);
/// let (mut tx, mut rx) = (ChannelSender::new(config), ChannelReceiver::new(config));
/// tx.push(NetBlob::from_bytes(b"hello".to_vec())).unwrap();
///
/// let mut w = BitWriter::with_capacity_bytes(1200);
/// let mut record = Vec::new();
/// assert_eq!(tx.write(&mut w, &mut record), 1);
/// // the packet is lost: the message is queued again and goes out in the next one
/// tx.on_delivery(&record, DeliveryStatus::Lost);
/// let mut w = BitWriter::with_capacity_bytes(1200);
/// let mut record = Vec::new();
/// tx.write(&mut w, &mut record);
/// let bytes = w.finish().unwrap();
/// rx.read(&mut BitReader::new(&bytes)).unwrap();
/// assert_eq!(rx.receive().unwrap().bytes(), b"hello");
/// tx.on_delivery(&record, DeliveryStatus::Delivered);
/// assert!(tx.is_idle());
/// ```
#[derive(Debug)]
pub struct ChannelSender {
    config: ChannelConfig,
    /// `entries[i]` is message `base + i` (reliable) or the i-th queued (unreliable).
    entries: VecDeque<Outgoing>,
    base: u64,
    waiting: usize,
}

impl ChannelSender {
    /// An empty sender.
    pub fn new(config: ChannelConfig) -> Self {
        Self {
            config,
            entries: VecDeque::new(),
            base: 0,
            waiting: 0,
        }
    }

    /// The channel's configuration.
    pub fn config(&self) -> &ChannelConfig {
        &self.config
    }

    /// Queues a message. Returns its id (reliable modes: ids count up from 0 in push
    /// order; see [`is_acked`](Self::is_acked)).
    pub fn push(&mut self, blob: NetBlob) -> Result<u64, ChannelError> {
        if blob.bit_len() as u64 > self.config.max_message_bits as u64 {
            return Err(ChannelError::MessageTooLarge {
                bits: blob.bit_len() as u64,
                max: self.config.max_message_bits as u64,
            });
        }
        if self.entries.len() >= self.config.max_queued {
            return Err(ChannelError::QueueFull(self.entries.len()));
        }
        let id = self.base + self.entries.len() as u64;
        self.entries.push_back(Outgoing {
            blob: Some(blob),
            state: SendState::Waiting,
            sent: false,
        });
        self.waiting += 1;
        Ok(id)
    }

    /// The lowest reliable message id not yet acknowledged (every id below it was).
    pub fn first_unacked(&self) -> u64 {
        self.base
    }

    /// Replaces the payload of reliable message `id` if it was never written into a
    /// packet (the peer cannot know it), keeping its place in the sequence. Returns
    /// whether it was replaced. Used to cancel queued data without leaving a hole in
    /// an ordered channel.
    pub fn replace_unsent(&mut self, id: u64, blob: NetBlob) -> bool {
        let Some(i) = id.checked_sub(self.base) else {
            return false;
        };
        match self.entries.get_mut(i as usize) {
            Some(e) if !e.sent && e.state == SendState::Waiting => {
                e.blob = Some(blob);
                true
            }
            _ => false,
        }
    }

    /// Whether reliable message `id` was ever written into a packet.
    pub fn was_sent(&self, id: u64) -> bool {
        match id.checked_sub(self.base) {
            None => true,
            Some(i) => self.entries.get(i as usize).is_some_and(|e| e.sent),
        }
    }

    /// Whether reliable message `id` was acknowledged.
    pub fn is_acked(&self, id: u64) -> bool {
        match id.checked_sub(self.base) {
            None => true,
            Some(i) => self
                .entries
                .get(i as usize)
                .is_some_and(|e| e.state == SendState::Acked),
        }
    }

    /// Messages not yet acknowledged (reliable) or not yet sent (unreliable).
    pub fn pending(&self) -> usize {
        self.entries.len()
    }

    /// Bits of the messages queued or unacknowledged.
    pub fn queued_bits(&self) -> usize {
        self.entries
            .iter()
            .filter_map(|e| e.blob.as_ref())
            .map(NetBlob::bit_len)
            .sum()
    }

    /// The bits of message `id` (reliable), while it is queued or unacknowledged.
    pub fn message_bits(&self, id: u64) -> Option<usize> {
        let i = id.checked_sub(self.base)?;
        self.entries
            .get(usize::try_from(i).ok()?)?
            .blob
            .as_ref()
            .map(NetBlob::bit_len)
    }

    /// Messages waiting to be written.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// How many more messages the queue takes (`max_queued` minus those queued or
    /// unacknowledged).
    pub fn free_slots(&self) -> usize {
        self.config.max_queued.saturating_sub(self.entries.len())
    }

    /// Whether everything was sent and (for reliable modes) acknowledged.
    pub fn is_idle(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes as many waiting messages as fit, then the terminator, and records the
    /// reliable ids in `record`. Returns the number written; when 0, nothing at all is
    /// written (not even the terminator).
    pub fn write(&mut self, w: &mut BitWriter, record: &mut ChannelRecord) -> usize {
        if self.waiting == 0 || w.bits_left() < 2 {
            return 0;
        }
        let start = w.mark();
        let body = w.begin_substream(w.bits_left() - 1);
        let reliable = self.config.mode.is_reliable();
        let window = if reliable {
            self.config.window()
        } else {
            u64::MAX
        };
        let mut written = 0;
        let mut i = 0;
        while i < self.entries.len() && (i as u64) < window && self.waiting > 0 {
            if self.entries[i].state != SendState::Waiting {
                i += 1;
                continue;
            }
            let Some(blob) = self.entries[i].blob.as_ref() else {
                i += 1;
                continue;
            };
            let mark = w.mark();
            w.write_bool(true);
            if reliable {
                w.write_bits(self.base.wrapping_add(i as u64), 16);
            }
            write_len(w, blob.bit_len() as u64);
            blob.write_to(w);
            if w.is_overflown() {
                w.rollback(mark);
                break;
            }
            written += 1;
            self.waiting -= 1;
            if reliable {
                self.entries[i].state = SendState::InFlight;
                self.entries[i].sent = true;
                record.push(self.base + i as u64);
                i += 1;
            } else {
                self.entries.remove(i);
            }
        }
        if written == 0 {
            w.rollback(start);
            return 0;
        }
        // The body fit its substream, so committing cannot fail; the spare bit it
        // left holds the terminator.
        let _ = w.commit_substream(body);
        w.write_bool(false);
        written
    }

    /// Acts on the fate of a packet whose record for this channel is `record`.
    pub fn on_delivery(&mut self, record: &[u64], status: DeliveryStatus) {
        for &id in record {
            let Some(index) = id.checked_sub(self.base) else {
                continue;
            };
            let Some(entry) = self.entries.get_mut(index as usize) else {
                continue;
            };
            if entry.state != SendState::InFlight {
                continue;
            }
            match status {
                DeliveryStatus::Delivered => {
                    entry.state = SendState::Acked;
                    entry.blob = None;
                }
                DeliveryStatus::Lost => {
                    entry.state = SendState::Waiting;
                    self.waiting += 1;
                }
                DeliveryStatus::Discard => {}
            }
        }
        while self
            .entries
            .front()
            .is_some_and(|e| e.state == SendState::Acked)
        {
            self.entries.pop_front();
            self.base += 1;
        }
    }
}

/// The receiving half of a channel.
#[derive(Debug)]
pub struct ChannelReceiver {
    config: ChannelConfig,
    /// Lowest id not yet received.
    base: u64,
    /// Ordered: messages above `base` waiting for the gap to close.
    buffered: BTreeMap<u64, NetBlob>,
    buffered_bits: u64,
    /// Unordered: which ids above `base` were already delivered.
    seen: VecDeque<bool>,
    ready: VecDeque<NetBlob>,
}

impl ChannelReceiver {
    /// An empty receiver.
    pub fn new(config: ChannelConfig) -> Self {
        Self {
            config,
            base: 0,
            buffered: BTreeMap::new(),
            buffered_bits: 0,
            seen: VecDeque::new(),
            ready: VecDeque::new(),
        }
    }

    /// Reads a channel section written by [`ChannelSender::write`]. Messages become
    /// available through [`receive`](Self::receive). An error leaves the reader at an
    /// unknown position: treat the rest of the packet as unreadable.
    pub fn read(&mut self, r: &mut BitReader) -> Result<usize, ChannelError> {
        let reliable = self.config.mode.is_reliable();
        let mut count = 0;
        loop {
            let more = r.read_bool();
            r.check().map_err(|_| BlobError::Truncated)?;
            if !more {
                return Ok(count);
            }
            let wire_id = if reliable { r.read_bits(16) as u16 } else { 0 };
            let len = read_len(r);
            r.check().map_err(|_| BlobError::Truncated)?;
            if len > self.config.max_message_bits as u64 {
                return Err(ChannelError::MessageTooLarge {
                    bits: len,
                    max: self.config.max_message_bits as u64,
                });
            }
            let blob = NetBlob::read_from(r, len as usize)?;
            count += 1;
            if reliable {
                self.accept(wire_id, blob)?;
            } else {
                self.ready.push_back(blob);
            }
        }
    }

    fn accept(&mut self, wire_id: u16, blob: NetBlob) -> Result<(), ChannelError> {
        let diff = wire_id.wrapping_sub(self.base as u16) as i16;
        if diff < 0 {
            return Ok(()); // already delivered: a resend whose ack was lost
        }
        let offset = diff as u64;
        if offset >= self.config.window() {
            return Err(ChannelError::OutsideWindow);
        }
        let id = self.base + offset;
        match self.config.mode {
            DeliveryMode::ReliableOrdered => {
                if id == self.base {
                    self.ready.push_back(blob);
                    self.base += 1;
                    while let Some(next) = self.buffered.remove(&self.base) {
                        self.buffered_bits -= next.bit_len() as u64;
                        self.ready.push_back(next);
                        self.base += 1;
                    }
                } else if !self.buffered.contains_key(&id) {
                    let bits = blob.bit_len() as u64;
                    if self.buffered_bits + bits > self.config.max_buffered_bits {
                        return Err(ChannelError::BufferFull(self.config.max_buffered_bits));
                    }
                    self.buffered_bits += bits;
                    self.buffered.insert(id, blob);
                }
            }
            DeliveryMode::ReliableUnordered => {
                let index = offset as usize;
                if self.seen.len() <= index {
                    self.seen.resize(index + 1, false);
                }
                if !self.seen[index] {
                    self.seen[index] = true;
                    self.ready.push_back(blob);
                }
                while self.seen.front() == Some(&true) {
                    self.seen.pop_front();
                    self.base += 1;
                }
            }
            DeliveryMode::Unreliable => self.ready.push_back(blob),
        }
        Ok(())
    }

    /// The next delivered message.
    pub fn receive(&mut self) -> Option<NetBlob> {
        self.ready.pop_front()
    }

    /// Bits held for out-of-order messages.
    pub fn buffered_bits(&self) -> u64 {
        self.buffered_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(i: u32) -> NetBlob {
        NetBlob::from_bytes(i.to_le_bytes().to_vec())
    }

    fn packet(tx: &mut ChannelSender, bytes: usize) -> (Vec<u8>, ChannelRecord, usize) {
        let mut w = BitWriter::with_capacity_bytes(bytes);
        let mut rec = Vec::new();
        let n = tx.write(&mut w, &mut rec);
        (w.finish().unwrap(), rec, n)
    }

    #[test]
    fn ordered_delivery_survives_loss_and_reordering() {
        let config = ChannelConfig::new(DeliveryMode::ReliableOrdered);
        let (mut tx, mut rx) = (ChannelSender::new(config), ChannelReceiver::new(config));
        for i in 0..10 {
            tx.push(msg(i)).unwrap();
        }
        // Small packets: 3 messages each (1 + 16 + 5 + 6 + 32 = 60 bits per message).
        let (p1, r1, n1) = packet(&mut tx, 23);
        let (p2, r2, n2) = packet(&mut tx, 23);
        assert_eq!((n1, n2), (3, 3));
        rx.read(&mut BitReader::new(&p2)).unwrap();
        assert!(rx.receive().is_none(), "ordered: waits for the gap");
        tx.on_delivery(&r1, DeliveryStatus::Lost);
        tx.on_delivery(&r2, DeliveryStatus::Delivered);
        rx.read(&mut BitReader::new(&p2)).unwrap(); // duplicate, ignored
        let mut got = Vec::new();
        while !tx.is_idle() {
            let (p, r, _) = packet(&mut tx, 23);
            rx.read(&mut BitReader::new(&p)).unwrap();
            tx.on_delivery(&r, DeliveryStatus::Delivered);
        }
        let _ = p1;
        while let Some(m) = rx.receive() {
            got.push(u32::from_le_bytes(m.bytes().try_into().unwrap()));
        }
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn unordered_exactly_once() {
        let config = ChannelConfig::new(DeliveryMode::ReliableUnordered);
        let (mut tx, mut rx) = (ChannelSender::new(config), ChannelReceiver::new(config));
        for i in 0..6 {
            tx.push(msg(i)).unwrap();
        }
        let (p1, r1, _) = packet(&mut tx, 23);
        let (p2, r2, _) = packet(&mut tx, 23);
        rx.read(&mut BitReader::new(&p2)).unwrap();
        rx.read(&mut BitReader::new(&p1)).unwrap();
        // p1's ack is lost: the sender re-sends; the receiver must not deliver twice.
        tx.on_delivery(&r1, DeliveryStatus::Lost);
        tx.on_delivery(&r2, DeliveryStatus::Delivered);
        let (p3, r3, _) = packet(&mut tx, 23);
        rx.read(&mut BitReader::new(&p3)).unwrap();
        tx.on_delivery(&r3, DeliveryStatus::Delivered);
        assert!(tx.is_idle());
        let mut got: Vec<u32> = std::iter::from_fn(|| rx.receive())
            .map(|m| u32::from_le_bytes(m.bytes().try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![3, 4, 5, 0, 1, 2]);
        got.sort();
        assert_eq!(got, (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn unreliable_sent_once() {
        let config = ChannelConfig::new(DeliveryMode::Unreliable);
        let mut tx = ChannelSender::new(config);
        tx.push(msg(1)).unwrap();
        let (_, rec, n) = packet(&mut tx, 100);
        assert_eq!(n, 1);
        assert!(rec.is_empty());
        tx.on_delivery(&rec, DeliveryStatus::Lost);
        assert!(tx.is_idle());
        assert_eq!(packet(&mut tx, 100).2, 0);
    }

    #[test]
    fn nothing_written_when_nothing_fits() {
        let config = ChannelConfig::new(DeliveryMode::ReliableOrdered);
        let mut tx = ChannelSender::new(config);
        tx.push(NetBlob::from_bytes(vec![0; 100])).unwrap();
        let mut w = BitWriter::with_capacity_bytes(50);
        w.write_bits(0b101, 3);
        let mut rec = Vec::new();
        assert_eq!(tx.write(&mut w, &mut rec), 0);
        assert_eq!(w.position(), 3);
        assert!(!w.is_overflown());
        assert_eq!(tx.waiting(), 1);
    }

    #[test]
    fn caps() {
        let mut config = ChannelConfig::new(DeliveryMode::ReliableOrdered);
        config.max_message_bits = 16;
        config.max_queued = 1;
        let mut tx = ChannelSender::new(config);
        assert!(matches!(
            tx.push(NetBlob::from_bytes(vec![0; 3])),
            Err(ChannelError::MessageTooLarge { .. })
        ));
        tx.push(msg(0).clone()).unwrap_err();
        tx.push(NetBlob::from_bytes(vec![0; 2])).unwrap();
        assert!(matches!(
            tx.push(NetBlob::from_bytes(vec![0; 2])),
            Err(ChannelError::QueueFull(1))
        ));
    }

    #[test]
    fn outside_window_is_an_error() {
        let config = ChannelConfig::new(DeliveryMode::ReliableOrdered);
        let mut rx = ChannelReceiver::new(config);
        let mut w = BitWriter::with_capacity_bytes(64);
        w.write_bool(true);
        w.write_bits(5000, 16);
        write_len(&mut w, 8);
        w.write_bits(0xAB, 8);
        w.write_bool(false);
        let bytes = w.finish().unwrap();
        assert_eq!(
            rx.read(&mut BitReader::new(&bytes)),
            Err(ChannelError::OutsideWindow)
        );
    }
}
