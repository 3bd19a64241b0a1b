//! The sans-IO connection: packet header with sequence number and acks, delivered and
//! lost notifications in send order, RTT estimation. Never touches a socket or a clock:
//! time comes in as a [`std::time::Duration`] since an arbitrary epoch.
//!
//! This module owns the per-peer packet bookkeeping (Iris' `PacketNotify` /
//! `NetConnection`): it stamps every outgoing packet with a header, reads the header of
//! every incoming packet, and turns the acks it carries into exactly one
//! [`DeliveryStatus`] per sent packet, strictly in send order. It knows nothing about
//! what the payload after the header contains (that is the stream layer's business),
//! nor about how bytes travel (that is the transport's). Both ends of a link run the
//! same, symmetric [`Connection`].
//!
//! # Wire format
//!
//! The header is written with the crate's LSB-first [`BitWriter`] and is followed
//! directly (no byte alignment) by the caller's payload:
//!
//! | bits | field | meaning |
//! |---|---|---|
//! | 8  | tag | [`ConnectionConfig::protocol_tag`] (default [`HEADER_MAGIC_V1`]): rejects packets of another protocol version, another game build or plain garbage before anything else is looked at |
//! | 1  | ack-eliciting | `1` for a normal packet; `0` for an [ack-only](Connection::write_ack_only_header) packet, which the peer acks when it next sends but which never makes the peer [`needs_ack`](Connection::needs_ack) (so two idle peers do not ping-pong acks forever) |
//! | 16 | sequence | this packet's [`PacketSequence`], one more than the previous packet's (wrapping) |
//! | 1  | has-ack | `0` until this side has received a packet; then always `1` |
//! | 16 | ack | only if has-ack: the newest sequence received from the peer |
//! | 32 | ack bits | only if has-ack: bit `n` set means sequence `ack - 1 - n` was received too |
//!
//! That is [`MAX_HEADER_BITS`] (74) bits per packet once acks flow, 26 bits before.
//! The ack scheme is Glenn Fiedler's "reliability over UDP" (Gaffer on Games): every
//! header repeats the receive state of the last 33 sequences, so one ack survives the
//! loss of many reverse packets. 32 bits is enough for the rates this crate targets
//! (33 packets cover 550 ms at 60 Hz, and every reverse packet repeats them); a wider
//! window would only help a peer that receives far more packets than it sends, at 4
//! bytes per packet more for everyone.
//!
//! # Receive rules
//!
//! A packet is accepted (its payload must be processed) exactly once and in order:
//! [`Connection::read_header`] returns [`ConnectionError::Duplicate`] for the newest
//! sequence received again and [`ConnectionError::Stale`] for any older one (reordered,
//! or a late duplicate). A stale packet is never acknowledged, so its sender declares it
//! lost and resends state, as for any loss (Iris drops out-of-order packets the same
//! way). In return every payload is read in send order: the replication reader never
//! sees a packet older than one it already applied, which its wire format relies on
//! (an update carries no size and is decoded against the newest baselines). Both are
//! ordinary on a lossy network ([`ConnectionError::is_benign`]); the caller drops the
//! packet without reading the payload. Malformed headers are
//! rejected too (wrong tag, truncated, a sequence implausibly far ahead, an ack for a
//! packet this side never sent), again without changing any state.
//!
//! # What the notifications mean
//!
//! - [`DeliveryStatus::Delivered`]: the peer's `read_header` accepted the packet, so
//!   (if the peer processes every accepted payload) its payload was processed exactly
//!   once. Never reported for a packet the peer did not accept. The ack covers the
//!   header only: it is recorded before the payload is parsed, so a payload that then
//!   fails to parse is still reported delivered. The caller must not carry on as if it
//!   had been applied: the facade closes the connection on such a read error (Iris
//!   closes on bitstream errors; see
//!   [`facade`](crate::facade#dead-peers-read-errors-and-caps)).
//! - [`DeliveryStatus::Lost`]: no ack came in time. Usually the packet never arrived,
//!   but it may have arrived late or its acks may have been lost: **Lost is not proof
//!   of non-arrival.** Resend state, not packets (Iris ORs the lost change mask back),
//!   and make anything that must not be applied twice idempotent (sequence-numbered
//!   reliable messages).
//! - [`DeliveryStatus::Discard`]: [`Connection::discard_in_flight`] was called.
//!
//! # Loss detection
//!
//! A sent packet is reported [`DeliveryStatus::Lost`] when the first of these happens
//! (see [`ConnectionConfig`] for the knobs):
//! - it was sent more than [`Connection::loss_timeout`] ago (smoothed RTT + 4 × RTT
//!   variance + an ack-delay allowance, clamped; RFC 6298 style);
//! - a packet sent at least [`ConnectionConfig::reorder_threshold`] packets later has
//!   been acked (RFC 9002's packet threshold; as packets are accepted in order only,
//!   such a packet can never be acked any more);
//! - it fell out of the peer's ack window (the peer acked a packet more than 32
//!   sequences newer), so no future header can ack it;
//! - more than [`ConnectionConfig::max_in_flight`] packets were sent after it.
//!
//! An ack arriving after the packet was reported lost does not change its status
//! (counted in [`ConnectionStats::late_acks`]); when it is the newest ack and the loss
//! was by timeout, it still measures the round trip, so a round trip that grew past
//! the loss timeout is learnt instead of every later packet timing out too. Notifications are released in send order: a packet
//! acked early waits until every older one is resolved, which takes at most one loss
//! timeout.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use replicate::bits::{BitReader, BitWriter};
//! use replicate::internals::connection::{Connection, ConnectionConfig, DeliveryStatus};
//!
//! let mut server = Connection::new(ConnectionConfig::default());
//! let mut client = Connection::new(ConnectionConfig::default());
//! let t0 = Duration::ZERO;
//!
//! // Server -> client: header, then the payload.
//! let mut w = BitWriter::with_capacity_bytes(1200);
//! let seq = server.write_header(t0, &mut w);
//! w.write_bits(42, 8);
//! let packet = w.finish().unwrap();
//!
//! let mut r = BitReader::new(&packet);
//! assert_eq!(client.read_header(t0, &mut r), Ok(seq));
//! assert_eq!(r.read_bits(8), 42);
//! // The same bytes again are a duplicate: the payload must not be processed twice.
//! assert!(client.read_header(t0, &mut BitReader::new(&packet)).unwrap_err().is_benign());
//!
//! // The client has nothing to say but owes an ack.
//! assert!(client.needs_ack());
//! let t1 = Duration::from_millis(50);
//! let mut w = BitWriter::with_capacity_bytes(1200);
//! client.write_ack_only_header(t1, &mut w);
//! let ack = w.finish().unwrap();
//!
//! server.read_header(t1, &mut BitReader::new(&ack)).unwrap();
//! assert_eq!(server.poll_delivery(), Some((seq, DeliveryStatus::Delivered)));
//! assert_eq!(server.poll_delivery(), None);
//! assert_eq!(server.rtt(), Duration::from_millis(50));
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use thiserror::Error;

use crate::bits::{BitError, BitReader, BitWriter};

/// A packet sequence number (wraps at 2^16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PacketSequence(pub u16);

impl PacketSequence {
    /// The following sequence number.
    pub const fn next(self) -> Self {
        Self(self.0.wrapping_add(1))
    }

    /// Whether `self` is newer than `other`, modulo wraparound.
    pub const fn is_newer_than(self, other: Self) -> bool {
        let d = self.0.wrapping_sub(other.0);
        d != 0 && d < 0x8000
    }
}

/// What became of a sent packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// The peer acknowledged it.
    Delivered,
    /// It is considered lost (not acknowledged in time, or fell out of the ack window).
    Lost,
    /// The connection is closing; the record should be released without acting on it.
    Discard,
}

/// The default [`ConnectionConfig::protocol_tag`]: high nibble `0xA` is a magic value,
/// low nibble `1` the header format version.
pub const HEADER_MAGIC_V1: u8 = 0xA1;

/// Number of bits in the ack bitfield: a header acknowledges its `ack` sequence and
/// the [`ACK_BITS`] sequences before it.
pub const ACK_BITS: u32 = 32;

/// Size of a header that carries acks (every header once the peer has been heard from).
pub const MAX_HEADER_BITS: usize = 8 + 1 + 16 + 1 + 16 + ACK_BITS as usize;

/// Size of a header sent before anything was received from the peer.
pub const MIN_HEADER_BITS: usize = 8 + 1 + 16 + 1;

/// Tuning of a [`Connection`]. Both peers should use the same `protocol_tag`; the rest
/// is local.
///
/// ```
/// use std::time::Duration;
/// use replicate::internals::connection::ConnectionConfig;
///
/// let config = ConnectionConfig {
///     initial_rtt: Duration::from_millis(200),
///     reorder_threshold: None, // rely on the timeout alone on very jittery links
///     ..ConnectionConfig::default()
/// };
/// # let _ = config;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionConfig {
    /// First byte of every header; packets with another tag are rejected with
    /// [`ConnectionError::ProtocolMismatch`]. Default [`HEADER_MAGIC_V1`].
    pub protocol_tag: u8,
    /// Sequence number of the first packet sent. Default 0. Tests use values near
    /// `u16::MAX` to exercise wraparound.
    pub initial_sequence: u16,
    /// RTT assumed before the first sample. Default 100 ms.
    pub initial_rtt: Duration,
    /// Added to the loss timeout to cover the peer holding an ack until its next
    /// packet (its send interval). Default 25 ms.
    pub ack_delay_allowance: Duration,
    /// Lower bound of the loss timeout. Default 20 ms (clamped to at least 1 ms).
    pub min_loss_timeout: Duration,
    /// Upper bound of the loss timeout. Default 1 s (never below `min_loss_timeout`).
    pub max_loss_timeout: Duration,
    /// Declare a packet lost as soon as a packet sent this many packets later is
    /// acked, without waiting for the timeout. The peer accepts packets in order only,
    /// so such a packet is lost for certain; `None` relies on the timeout and the ack
    /// window alone (slower detection). Default `Some(3)`, RFC 9002's
    /// `kPacketThreshold`. Values above [`ACK_BITS`] + 1 behave like `None`; 0 is
    /// treated as 1.
    pub reorder_threshold: Option<u16>,
    /// At most this many sent packets await an ack; sending one more declares the
    /// oldest lost. Bounds memory and keeps sequence numbers unambiguous. Default
    /// 1024, clamped to `1..=32768`.
    pub max_in_flight: u16,
    /// A received sequence more than this far ahead of the newest received one is
    /// rejected as [`ConnectionError::SequenceOutOfRange`] (a corrupted or forged
    /// packet would otherwise move the receive window and make every genuine packet
    /// stale). Default 4096 (68 s of uninterrupted loss at 60 packets per second),
    /// clamped to `ACK_BITS + 1..=32767`.
    pub max_sequence_jump: u16,
    /// Weight of the newest outcome in the [`Connection::packet_loss`] moving
    /// average. Default 0.05, clamped to `0.001..=1`.
    pub loss_smoothing: f32,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            protocol_tag: HEADER_MAGIC_V1,
            initial_sequence: 0,
            initial_rtt: Duration::from_millis(100),
            ack_delay_allowance: Duration::from_millis(25),
            min_loss_timeout: Duration::from_millis(20),
            max_loss_timeout: Duration::from_secs(1),
            reorder_threshold: Some(3),
            max_in_flight: 1024,
            max_sequence_jump: 4096,
            loss_smoothing: 0.05,
        }
    }
}

impl ConnectionConfig {
    /// The config with every field clamped into its documented range.
    fn sanitized(mut self) -> Self {
        self.min_loss_timeout = self.min_loss_timeout.max(Duration::from_millis(1));
        self.max_loss_timeout = self.max_loss_timeout.max(self.min_loss_timeout);
        self.reorder_threshold = self.reorder_threshold.map(|t| t.max(1));
        self.max_in_flight = self.max_in_flight.clamp(1, 0x8000);
        self.max_sequence_jump = self.max_sequence_jump.clamp(ACK_BITS as u16 + 1, 0x7FFF);
        self.loss_smoothing = if self.loss_smoothing.is_nan() {
            0.05
        } else {
            self.loss_smoothing.clamp(0.001, 1.0)
        };
        self
    }
}

/// Why a received packet was rejected. The caller drops the packet without reading
/// its payload; no state was changed except [`ConnectionStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConnectionError {
    /// The header ended early.
    #[error("truncated packet header: {0}")]
    Truncated(#[from] BitError),
    /// The first byte is not our protocol tag.
    #[error("protocol tag mismatch: expected {expected:#04x}, found {found:#04x}")]
    ProtocolMismatch {
        /// Our [`ConnectionConfig::protocol_tag`].
        expected: u8,
        /// The received tag.
        found: u8,
    },
    /// This sequence was already received.
    #[error("duplicate packet {sequence}")]
    Duplicate {
        /// The duplicated sequence.
        sequence: u16,
    },
    /// The packet is older than the newest received one (reordered or a late
    /// duplicate): dropped unacknowledged.
    #[error("stale packet {sequence}: newest received is {latest}")]
    Stale {
        /// The stale packet's sequence.
        sequence: u16,
        /// The newest sequence received.
        latest: u16,
    },
    /// The sequence jumps implausibly far ahead of the newest received one.
    #[error("packet {sequence} is {jump} ahead of the newest received {latest}")]
    SequenceOutOfRange {
        /// The received sequence.
        sequence: u16,
        /// The newest sequence received before it.
        latest: u16,
        /// How far ahead it is.
        jump: u16,
    },
    /// The header acks a sequence this side has not sent.
    #[error("packet acks {ack}, which was never sent (next sequence {next})")]
    AckOutOfRange {
        /// The acked sequence.
        ack: u16,
        /// This side's next sequence to send.
        next: u16,
    },
}

impl ConnectionError {
    /// True for [`Duplicate`](Self::Duplicate) and [`Stale`](Self::Stale): normal on a
    /// network that duplicates and reorders, to be dropped silently. False for
    /// malformed packets, which a caller may count toward dropping the peer.
    pub fn is_benign(&self) -> bool {
        matches!(self, Self::Duplicate { .. } | Self::Stale { .. })
    }
}

/// Counters of a [`Connection`], all since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Headers written (including ack-only ones, excluding cancelled ones).
    pub packets_sent: u64,
    /// Of `packets_sent`, the ack-only ones.
    pub ack_only_sent: u64,
    /// Packets accepted by [`Connection::read_header`].
    pub packets_received: u64,
    /// Sent packets resolved as [`DeliveryStatus::Delivered`].
    pub packets_delivered: u64,
    /// Sent packets resolved as [`DeliveryStatus::Lost`].
    pub packets_lost: u64,
    /// Sent packets resolved as [`DeliveryStatus::Discard`].
    pub packets_discarded: u64,
    /// Received packets rejected as [`ConnectionError::Duplicate`].
    pub duplicates: u64,
    /// Received packets rejected as [`ConnectionError::Stale`].
    pub stale: u64,
    /// Received packets rejected for any other reason (truncated, wrong tag, bad
    /// sequence or ack).
    pub malformed: u64,
    /// Packets acked after they were declared lost (spurious loss detections), each
    /// counted once. An ack arriving after the notification was polled and 64 more
    /// packets were notified is not counted.
    pub late_acks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Pending,
    Resolved(DeliveryStatus),
}

#[derive(Debug, Clone, Copy)]
struct SentPacket {
    sent_at: Duration,
    state: SlotState,
    ack_eliciting: bool,
    /// Acked after being declared lost (counted in `late_acks` once).
    late_acked: bool,
    /// Declared lost by the reorder threshold alone.
    lost_by_threshold: bool,
}

/// What an ack did to a sent packet.
#[derive(Debug, Clone, Copy)]
enum Acked {
    /// It was pending: now delivered.
    Newly,
    /// It had been reported lost by the loss timeout (sent at `sent_at`).
    LateAfterTimeout { sent_at: Duration },
    /// Nothing (already resolved, unknown, or lost by the reorder threshold).
    Not,
}

/// Where a received sequence falls relative to the receive window.
#[derive(Debug, Clone, Copy)]
enum Arrival {
    /// The first packet ever received.
    First,
    /// Newer than the newest received, by this many sequences (at least 1).
    Newer(u16),
}

/// One peer's end of a connection: stamps outgoing packets, reads incoming headers,
/// reports what became of every sent packet. See the module docs for the wire
/// format and the rules.
///
/// Typical use per tick:
/// 1. for each received packet: [`read_header`](Self::read_header), and on `Ok` hand
///    the rest of the reader to the payload layer;
/// 2. [`update`](Self::update) with the current time, then drain
///    [`poll_delivery`](Self::poll_delivery) into the payload layer's records;
/// 3. if there is payload to send: [`write_header`](Self::write_header) then the
///    payload; otherwise, if [`needs_ack`](Self::needs_ack):
///    [`write_ack_only_header`](Self::write_ack_only_header) then an empty payload.
#[derive(Debug, Clone)]
pub struct Connection {
    config: ConnectionConfig,

    // Send side. Absolute packet indices count every packet ever sent; the sequence of
    // index `i` is `initial_sequence + i` (mod 2^16).
    /// Index of the next packet to send.
    next_index: u64,
    /// Packets `front_index..next_index`, oldest first: unresolved ones and resolved
    /// ones whose notification was not polled yet.
    sent: VecDeque<SentPacket>,
    /// Index of `sent[0]`.
    front_index: u64,
    /// Every packet before this index is resolved.
    first_unresolved: u64,
    /// Number of `Pending` entries in `sent`.
    pending: usize,
    /// Largest index acked by the peer (including late acks of lost packets).
    largest_acked: Option<u64>,
    /// Bit `i`: packet `front_index - 1 - i` was polled as lost and not acked since.
    polled_lost: u64,
    /// Like `polled_lost`, for packets lost by the reorder threshold alone.
    polled_threshold_lost: u64,
    /// Send times of the last 64 polled packets that asked for an ack (by index
    /// modulo 64): a late ack of such a packet lost by timeout still measures the
    /// round trip.
    polled_sent_at: [Option<Duration>; 64],
    /// The reorder threshold in force.
    reorder_threshold: Option<u64>,
    /// `needs_ack` as it was before the last header was written (for `cancel_header`).
    needs_ack_before_write: bool,

    // Receive side.
    /// Newest sequence received.
    recv_latest: Option<u16>,
    /// Bit `n`: sequence `recv_latest - 1 - n` was received.
    recv_bits: u32,
    /// An ack-eliciting packet arrived since the last header was written.
    needs_ack: bool,

    // Estimates.
    srtt: Duration,
    rttvar: Duration,
    latest_rtt: Option<Duration>,
    loss: f32,
    stats: ConnectionStats,
}

impl Default for Connection {
    fn default() -> Self {
        Self::new(ConnectionConfig::default())
    }
}

impl Connection {
    /// A fresh connection. Out-of-range config values are clamped (see
    /// [`ConnectionConfig`]).
    pub fn new(config: ConnectionConfig) -> Self {
        let config = config.sanitized();
        Self {
            srtt: config.initial_rtt,
            rttvar: config.initial_rtt / 2,
            reorder_threshold: config.reorder_threshold.map(u64::from),
            config,
            next_index: 0,
            sent: VecDeque::new(),
            front_index: 0,
            first_unresolved: 0,
            pending: 0,
            largest_acked: None,
            polled_lost: 0,
            polled_threshold_lost: 0,
            polled_sent_at: [None; 64],
            needs_ack_before_write: false,
            recv_latest: None,
            recv_bits: 0,
            needs_ack: false,
            latest_rtt: None,
            loss: 0.0,
            stats: ConnectionStats::default(),
        }
    }

    /// The (sanitized) configuration.
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    fn sequence_of(&self, index: u64) -> PacketSequence {
        PacketSequence(self.config.initial_sequence.wrapping_add(index as u16))
    }

    /// The sequence the next written header will carry.
    pub fn next_sequence(&self) -> PacketSequence {
        self.sequence_of(self.next_index)
    }

    /// The newest sequence received from the peer, if any.
    pub fn latest_received(&self) -> Option<PacketSequence> {
        self.recv_latest.map(PacketSequence)
    }

    /// Stamps a new outgoing packet: writes its header into `w`, records its send time
    /// and returns its sequence. The caller writes the payload after it and must send
    /// the packet (or [`cancel_header`](Self::cancel_header) it): every stamped packet
    /// gets one notification from [`poll_delivery`](Self::poll_delivery).
    ///
    /// `w` needs [`MAX_HEADER_BITS`] free bits; if it has fewer, its overflow flag is
    /// set (and the packet still counts as sent).
    pub fn write_header(&mut self, now: Duration, w: &mut BitWriter) -> PacketSequence {
        self.write(now, w, true)
    }

    /// Like [`write_header`](Self::write_header), for a packet sent only to carry
    /// acks (see [`needs_ack`](Self::needs_ack)). Its header says so, and the peer
    /// will not answer it with an ack-only packet of its own. It is still a packet: it
    /// gets a sequence and a notification, and the payload layer should write its
    /// (empty) framing after the header so the peer can parse it like any other.
    pub fn write_ack_only_header(&mut self, now: Duration, w: &mut BitWriter) -> PacketSequence {
        self.write(now, w, false)
    }

    fn write(&mut self, now: Duration, w: &mut BitWriter, ack_eliciting: bool) -> PacketSequence {
        let index = self.next_index;
        let seq = self.sequence_of(index);
        w.write_bits(u64::from(self.config.protocol_tag), 8);
        w.write_bool(ack_eliciting);
        w.write_bits(u64::from(seq.0), 16);
        match self.recv_latest {
            Some(latest) => {
                w.write_bool(true);
                w.write_bits(u64::from(latest), 16);
                w.write_bits(u64::from(self.recv_bits), ACK_BITS);
            }
            None => {
                w.write_bool(false);
            }
        }
        self.sent.push_back(SentPacket {
            sent_at: now,
            state: SlotState::Pending,
            ack_eliciting,
            late_acked: false,
            lost_by_threshold: false,
        });
        self.pending += 1;
        self.next_index += 1;
        self.stats.packets_sent += 1;
        if !ack_eliciting {
            self.stats.ack_only_sent += 1;
        }
        self.needs_ack_before_write = self.needs_ack;
        self.needs_ack = false;
        self.detect_losses(now);
        seq
    }

    /// Takes back the header just written (the packet was not sent after all, e.g.
    /// the payload layer had nothing to write): its sequence will be reused and it
    /// gets no notification. Only the most recent header can be cancelled, and only
    /// before anything else happened to the connection; returns whether it was.
    pub fn cancel_header(&mut self, sequence: PacketSequence) -> bool {
        let Some(last_index) = self.next_index.checked_sub(1) else {
            return false;
        };
        if self.sequence_of(last_index) != sequence || last_index < self.front_index {
            return false;
        }
        match self.sent.back() {
            Some(p) if p.state == SlotState::Pending => {}
            _ => return false,
        }
        if let Some(p) = self.sent.pop_back() {
            self.pending -= 1;
            self.next_index = last_index;
            self.first_unresolved = self.first_unresolved.min(last_index);
            self.stats.packets_sent = self.stats.packets_sent.saturating_sub(1);
            if !p.ack_eliciting {
                self.stats.ack_only_sent = self.stats.ack_only_sent.saturating_sub(1);
            }
            self.needs_ack = self.needs_ack || self.needs_ack_before_write;
        }
        true
    }

    /// Reads and validates the header at the reader's position, then processes the
    /// acks it carries. On `Ok` the reader is positioned at the payload, which the
    /// caller must process (exactly once per sequence: duplicates are rejected). On
    /// `Err` the packet must be dropped; nothing but [`stats`](Self::stats) changed.
    ///
    /// Fully bounds-checked: any input yields `Ok` or an error, never a panic.
    pub fn read_header(
        &mut self,
        now: Duration,
        r: &mut BitReader,
    ) -> Result<PacketSequence, ConnectionError> {
        match self.read_header_inner(now, r) {
            Ok(seq) => Ok(seq),
            Err(e) => {
                match e {
                    ConnectionError::Duplicate { .. } => self.stats.duplicates += 1,
                    ConnectionError::Stale { .. } => self.stats.stale += 1,
                    _ => self.stats.malformed += 1,
                }
                Err(e)
            }
        }
    }

    fn read_header_inner(
        &mut self,
        now: Duration,
        r: &mut BitReader,
    ) -> Result<PacketSequence, ConnectionError> {
        // Read every field first, then validate everything, then change state.
        let tag = r.read_bits(8) as u8;
        r.check()?;
        if tag != self.config.protocol_tag {
            return Err(ConnectionError::ProtocolMismatch {
                expected: self.config.protocol_tag,
                found: tag,
            });
        }
        let ack_eliciting = r.read_bool();
        let sequence = r.read_bits(16) as u16;
        let acks = if r.read_bool() {
            let ack = r.read_bits(16) as u16;
            let bits = r.read_bits(ACK_BITS) as u32;
            Some((ack, bits))
        } else {
            None
        };
        r.check()?;

        let arrival = self.classify(sequence)?;
        let ack_index = match acks {
            Some((ack, _)) => Some(self.index_of_ack(ack)?),
            None => None,
        };

        // Valid: record the arrival.
        match arrival {
            Arrival::First => {
                self.recv_latest = Some(sequence);
                self.recv_bits = 0;
            }
            Arrival::Newer(shift) => {
                // The old newest becomes bit `shift - 1`; bits shifted past 31 fall out.
                self.recv_bits = if u32::from(shift) > ACK_BITS {
                    0
                } else {
                    ((u64::from(self.recv_bits) << 1 | 1) << (shift - 1)) as u32
                };
                self.recv_latest = Some(sequence);
            }
        }
        self.stats.packets_received += 1;
        if ack_eliciting {
            self.needs_ack = true;
        }

        if let (Some((_, bits)), Some(ack_index)) = (acks, ack_index) {
            self.process_acks(now, ack_index, bits);
        }
        self.detect_losses(now);
        Ok(PacketSequence(sequence))
    }

    /// Where `sequence` falls in the receive window, or why it is rejected.
    fn classify(&self, sequence: u16) -> Result<Arrival, ConnectionError> {
        let Some(latest) = self.recv_latest else {
            return Ok(Arrival::First);
        };
        let ahead = sequence.wrapping_sub(latest);
        if ahead == 0 {
            return Err(ConnectionError::Duplicate { sequence });
        }
        if ahead < 0x8000 {
            if ahead > self.config.max_sequence_jump {
                return Err(ConnectionError::SequenceOutOfRange {
                    sequence,
                    latest,
                    jump: ahead,
                });
            }
            return Ok(Arrival::Newer(ahead));
        }
        // Older than the newest: reordered (or a late duplicate), dropped unacknowledged
        // so every payload is read in send order (see the module docs).
        Err(ConnectionError::Stale { sequence, latest })
    }

    /// The absolute index of the packet a received `ack` refers to.
    fn index_of_ack(&self, ack: u16) -> Result<u64, ConnectionError> {
        let out_of_range = ConnectionError::AckOutOfRange {
            ack,
            next: self.next_sequence().0,
        };
        let Some(last) = self.next_index.checked_sub(1) else {
            return Err(out_of_range);
        };
        let back = u64::from(self.sequence_of(last).0.wrapping_sub(ack));
        if back >= 0x8000 || back > last {
            return Err(out_of_range);
        }
        Ok(last - back)
    }

    fn process_acks(&mut self, now: Duration, ack_index: u64, bits: u32) {
        let newest_is_new = self.largest_acked.is_none_or(|l| ack_index > l);
        match self.ack(ack_index) {
            // RFC 9002: sample only when the newest acked packet is newly acked, so a
            // packet acked late through the bitfield does not inflate the estimate,
            // and only if it asked for an ack: an ack-only packet is acked whenever
            // the peer happens to send next, which says nothing about the path.
            Acked::Newly => {
                if let Some(p) = self.slot(ack_index).filter(|p| p.ack_eliciting) {
                    let sample = now.saturating_sub(p.sent_at);
                    self.add_rtt_sample(sample);
                }
            }
            // The newest ack is of a packet already reported lost by timeout: the
            // round trip grew past the loss timeout. Without this sample the estimate
            // would never learn it (every later packet would time out too).
            Acked::LateAfterTimeout { sent_at } if newest_is_new => {
                self.add_rtt_sample(now.saturating_sub(sent_at));
            }
            Acked::LateAfterTimeout { .. } | Acked::Not => {}
        }
        let mut remaining = bits;
        while remaining != 0 {
            let n = u64::from(remaining.trailing_zeros());
            remaining &= remaining - 1;
            if let Some(index) = ack_index.checked_sub(n + 1) {
                self.ack(index);
            }
        }
        self.largest_acked = Some(self.largest_acked.map_or(ack_index, |l| l.max(ack_index)));
    }

    fn slot(&self, index: u64) -> Option<&SentPacket> {
        let offset = index.checked_sub(self.front_index)?;
        self.sent.get(usize::try_from(offset).ok()?)
    }

    /// Marks `index` delivered if it is pending; returns whether it was.
    fn ack(&mut self, index: u64) -> Acked {
        let Some(offset) = index.checked_sub(self.front_index) else {
            // Already polled: only count a late ack of a recently polled loss.
            let back = self.front_index - 1 - index;
            if back < 64 && self.polled_lost & (1 << back) != 0 {
                self.polled_lost &= !(1 << back);
                let by_threshold = self.polled_threshold_lost & (1 << back) != 0;
                self.polled_threshold_lost &= !(1 << back);
                self.stats.late_acks += 1;
                if let Some(sent_at) = self.polled_sent_at[(index % 64) as usize]
                    && !by_threshold
                {
                    return Acked::LateAfterTimeout { sent_at };
                }
            }
            return Acked::Not;
        };
        let Some(p) = usize::try_from(offset)
            .ok()
            .and_then(|offset| self.sent.get_mut(offset))
        else {
            return Acked::Not;
        };
        match p.state {
            SlotState::Pending => {
                self.resolve(offset as usize, DeliveryStatus::Delivered);
                Acked::Newly
            }
            SlotState::Resolved(DeliveryStatus::Lost) if !p.late_acked => {
                p.late_acked = true;
                let by_threshold = p.lost_by_threshold;
                let sent_at = p.sent_at;
                let eliciting = p.ack_eliciting;
                self.stats.late_acks += 1;
                if by_threshold || !eliciting {
                    Acked::Not
                } else {
                    Acked::LateAfterTimeout { sent_at }
                }
            }
            SlotState::Resolved(_) => Acked::Not,
        }
    }

    /// The reorder threshold in force: [`ConnectionConfig::reorder_threshold`].
    pub fn reorder_threshold(&self) -> Option<u16> {
        self.reorder_threshold.map(|t| t as u16)
    }

    fn resolve(&mut self, offset: usize, status: DeliveryStatus) {
        let Some(p) = self.sent.get_mut(offset) else {
            return;
        };
        if p.state != SlotState::Pending {
            return;
        }
        p.state = SlotState::Resolved(status);
        let ack_eliciting = p.ack_eliciting;
        self.pending -= 1;
        let outcome = match status {
            DeliveryStatus::Delivered => {
                self.stats.packets_delivered += 1;
                Some(0.0)
            }
            DeliveryStatus::Lost => {
                self.stats.packets_lost += 1;
                Some(1.0)
            }
            DeliveryStatus::Discard => {
                self.stats.packets_discarded += 1;
                None
            }
        };
        // Ack-only packets are acked only when the peer happens to send, so their
        // "losses" say nothing about the link: keep them out of the loss estimate.
        if let (Some(x), true) = (outcome, ack_eliciting) {
            self.loss += self.config.loss_smoothing * (x - self.loss);
        }
    }

    fn add_rtt_sample(&mut self, sample: Duration) {
        if self.latest_rtt.is_none() {
            self.srtt = sample;
            self.rttvar = sample / 2;
        } else {
            let diff = self.srtt.abs_diff(sample);
            self.rttvar = (self.rttvar.saturating_mul(3).saturating_add(diff)) / 4;
            self.srtt = (self.srtt.saturating_mul(7).saturating_add(sample)) / 8;
        }
        self.latest_rtt = Some(sample);
    }

    /// Runs time-based loss detection. [`write_header`](Self::write_header) and
    /// [`read_header`](Self::read_header) do it too; call this once per tick before
    /// draining [`poll_delivery`](Self::poll_delivery) so losses are reported even
    /// while nothing is sent or received.
    pub fn update(&mut self, now: Duration) {
        self.detect_losses(now);
    }

    fn detect_losses(&mut self, now: Duration) {
        let timeout = self.loss_timeout();
        let threshold = self.reorder_threshold;
        let max_in_flight = u64::from(self.config.max_in_flight);
        while self.first_unresolved < self.next_index {
            let index = self.first_unresolved;
            let Some(offset) = index
                .checked_sub(self.front_index)
                .and_then(|o| usize::try_from(o).ok())
            else {
                break;
            };
            let Some(p) = self.sent.get(offset) else {
                break;
            };
            if p.state == SlotState::Pending {
                let timed_out = now.saturating_sub(p.sent_at) >= timeout;
                let overtaken = match (self.largest_acked, threshold) {
                    (Some(largest), Some(t)) => largest >= index.saturating_add(t),
                    _ => false,
                };
                let out_of_window = self
                    .largest_acked
                    .is_some_and(|largest| largest > index + u64::from(ACK_BITS));
                let crowded = self.next_index - index > max_in_flight;
                if !(timed_out || overtaken || out_of_window || crowded) {
                    // Every later packet was sent later and is newer: none is lost either.
                    break;
                }
                self.resolve(offset, DeliveryStatus::Lost);
                if let Some(p) = self.sent.get_mut(offset) {
                    p.lost_by_threshold = overtaken && !(timed_out || out_of_window || crowded);
                }
            }
            self.first_unresolved += 1;
        }
    }

    /// The next notification about a sent packet, oldest first: every packet stamped
    /// by [`write_header`](Self::write_header) (or the ack-only variant) is reported
    /// exactly once, in send order, as soon as it and every older packet are resolved.
    pub fn poll_delivery(&mut self) -> Option<(PacketSequence, DeliveryStatus)> {
        let front = self.sent.front()?;
        let SlotState::Resolved(status) = front.state else {
            return None;
        };
        let unacked_loss = status == DeliveryStatus::Lost && !front.late_acked;
        self.polled_lost = self.polled_lost << 1 | u64::from(unacked_loss);
        self.polled_threshold_lost =
            self.polled_threshold_lost << 1 | u64::from(unacked_loss && front.lost_by_threshold);
        self.polled_sent_at[(self.front_index % 64) as usize] =
            front.ack_eliciting.then_some(front.sent_at);
        self.sent.pop_front();
        let seq = self.sequence_of(self.front_index);
        self.front_index += 1;
        Some((seq, status))
    }

    /// Resolves every unresolved sent packet as [`DeliveryStatus::Discard`] (the
    /// connection is closing); [`poll_delivery`](Self::poll_delivery) then drains
    /// them. Acks that arrive for them later are ignored.
    pub fn discard_in_flight(&mut self) {
        for offset in 0..self.sent.len() {
            self.resolve(offset, DeliveryStatus::Discard);
        }
        self.first_unresolved = self.next_index;
    }

    /// Whether a packet that asked for an ack arrived since the last header was
    /// written: a side with no payload to send should then send an
    /// [ack-only](Self::write_ack_only_header) packet this tick. Answer with the
    /// ack-only header, not [`write_header`](Self::write_header): a normal header
    /// asks for an ack in turn, and two idle peers would ack each other forever.
    pub fn needs_ack(&self) -> bool {
        self.needs_ack
    }

    /// Writes a complete ack-only packet (header only) and returns its sequence and
    /// bytes, for callers with no payload framing of their own. The peer's
    /// [`read_header`](Self::read_header) leaves its reader with fewer than 8 bits
    /// (padding) after such a packet.
    pub fn ack_only_packet(&mut self, now: Duration) -> (PacketSequence, Vec<u8>) {
        let mut w = BitWriter::with_capacity_bits(MAX_HEADER_BITS);
        let seq = self.write_ack_only_header(now, &mut w);
        (seq, w.to_bytes())
    }

    /// Smoothed round-trip time (RFC 6298 SRTT); the configured initial RTT before
    /// the first sample. Sampled from acks of normal (ack-eliciting) packets only;
    /// includes the peer's ack delay (up to one of its send intervals).
    pub fn rtt(&self) -> Duration {
        self.srtt
    }

    /// RTT variation (RFC 6298 RTTVAR).
    pub fn rtt_variance(&self) -> Duration {
        self.rttvar
    }

    /// The most recent RTT sample, if any.
    pub fn latest_rtt(&self) -> Option<Duration> {
        self.latest_rtt
    }

    /// How long an unacked packet waits before it is declared lost:
    /// `srtt + max(4 * rttvar, 1 ms) + ack_delay_allowance`, clamped to
    /// `[min_loss_timeout, max_loss_timeout]`.
    pub fn loss_timeout(&self) -> Duration {
        let var = self.rttvar.saturating_mul(4).max(Duration::from_millis(1));
        self.srtt
            .saturating_add(var)
            .saturating_add(self.config.ack_delay_allowance)
            .clamp(self.config.min_loss_timeout, self.config.max_loss_timeout)
    }

    /// Moving average of the fraction of ack-eliciting packets reported lost, in
    /// `0.0..=1.0` (weight of the newest outcome: [`ConnectionConfig::loss_smoothing`]).
    pub fn packet_loss(&self) -> f32 {
        self.loss
    }

    /// Number of sent packets not resolved yet.
    pub fn in_flight(&self) -> usize {
        self.pending
    }

    /// Counters since creation.
    pub fn stats(&self) -> &ConnectionStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{LinkConditioner, LinkPair};

    const MS: Duration = Duration::from_millis(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn packet(c: &mut Connection, now: Duration) -> (PacketSequence, Vec<u8>) {
        let mut w = BitWriter::with_capacity_bytes(64);
        let seq = c.write_header(now, &mut w);
        (seq, w.finish().unwrap())
    }

    fn deliver(
        c: &mut Connection,
        now: Duration,
        bytes: &[u8],
    ) -> Result<PacketSequence, ConnectionError> {
        c.read_header(now, &mut BitReader::new(bytes))
    }

    fn drain(c: &mut Connection) -> Vec<(u16, DeliveryStatus)> {
        std::iter::from_fn(|| c.poll_delivery())
            .map(|(s, d)| (s.0, d))
            .collect()
    }

    fn with_seq(initial_sequence: u16) -> Connection {
        Connection::new(ConnectionConfig {
            initial_sequence,
            ..ConnectionConfig::default()
        })
    }

    #[test]
    fn sequence_wraps() {
        assert!(PacketSequence(1).is_newer_than(PacketSequence(0)));
        assert!(PacketSequence(0).is_newer_than(PacketSequence(65535)));
        assert!(!PacketSequence(65535).is_newer_than(PacketSequence(0)));
        assert!(!PacketSequence(5).is_newer_than(PacketSequence(5)));
        assert_eq!(PacketSequence(65535).next(), PacketSequence(0));
    }

    #[test]
    fn header_sizes_and_layout() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let mut w = BitWriter::with_capacity_bytes(64);
        a.write_header(Duration::ZERO, &mut w);
        assert_eq!(w.position(), MIN_HEADER_BITS);
        let bytes = w.finish().unwrap();
        assert_eq!(bytes[0], HEADER_MAGIC_V1);
        deliver(&mut b, Duration::ZERO, &bytes).unwrap();
        let mut w = BitWriter::with_capacity_bytes(64);
        b.write_header(Duration::ZERO, &mut w);
        assert_eq!(w.position(), MAX_HEADER_BITS);
        // tag, eliciting, seq, has-ack, ack = 0, bits = 0
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(8), u64::from(HEADER_MAGIC_V1));
        assert!(r.read_bool());
        assert_eq!(r.read_bits(16), 0);
        assert!(r.read_bool());
        assert_eq!(r.read_bits(16), 0);
        assert_eq!(r.read_bits(32), 0);
    }

    #[test]
    fn ack_bitfield_reports_exactly_the_received_packets() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let received: Vec<bool> = (0..20).map(|i| i >= 17 || i % 3 != 1).collect();
        for &r in &received {
            let (_, bytes) = packet(&mut a, Duration::ZERO);
            if r {
                deliver(&mut b, Duration::ZERO, &bytes).unwrap();
            }
        }
        // The newest (19) was received; the bitfield covers 18..=0.
        assert_eq!(b.latest_received(), Some(PacketSequence(19)));
        for n in 0..19u32 {
            let seq = 18 - n as usize;
            assert_eq!(
                b.recv_bits >> n & 1 == 1,
                received[seq],
                "bit {n} (seq {seq})"
            );
        }
        let (_, ack) = packet(&mut b, ms(10));
        deliver(&mut a, ms(10), &ack).unwrap();
        let trace = drain(&mut a);
        assert_eq!(trace.len(), 20);
        for (i, (seq, status)) in trace.iter().enumerate() {
            assert_eq!(*seq, i as u16);
            let expected = if received[i] {
                DeliveryStatus::Delivered
            } else {
                DeliveryStatus::Lost // overtaken by acked packets 3 later
            };
            assert_eq!(*status, expected, "seq {i}");
        }
    }

    #[test]
    fn wraparound_at_u16() {
        let mut a = with_seq(65530);
        let mut b = with_seq(65500);
        let mut trace = Vec::new();
        for t in 0..20u64 {
            let (sa, bytes) = packet(&mut a, ms(t));
            assert_eq!(sa.0, 65530u16.wrapping_add(t as u16));
            assert_eq!(deliver(&mut b, ms(t), &bytes), Ok(sa));
            let (_, back) = packet(&mut b, ms(t));
            deliver(&mut a, ms(t), &back).unwrap();
            trace.extend(drain(&mut a));
        }
        let expected: Vec<_> = (0..20u16)
            .map(|i| (65530u16.wrapping_add(i), DeliveryStatus::Delivered))
            .collect();
        assert_eq!(trace, expected);
        assert_eq!(b.latest_received(), Some(PacketSequence(13)));
    }

    #[test]
    fn duplicates_and_stale_packets_are_rejected_without_state_change() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let packets: Vec<_> = (0..40).map(|_| packet(&mut a, Duration::ZERO).1).collect();
        deliver(&mut b, Duration::ZERO, &packets[7]).unwrap();
        deliver(&mut b, Duration::ZERO, &packets[39]).unwrap();
        assert_eq!(
            deliver(&mut b, Duration::ZERO, &packets[39]),
            Err(ConnectionError::Duplicate { sequence: 39 })
        );
        // Anything older than the newest is stale: reordered packets are dropped,
        // unacknowledged, so payloads are read in send order.
        for old in [38, 8, 7, 6] {
            let err = deliver(&mut b, Duration::ZERO, &packets[old]).unwrap_err();
            assert_eq!(
                err,
                ConnectionError::Stale {
                    sequence: old as u16,
                    latest: 39
                }
            );
            assert!(err.is_benign());
        }
        assert_eq!(b.stats().duplicates, 1);
        assert_eq!(b.stats().stale, 4);
        assert_eq!(b.stats().packets_received, 2);
        // 7 was received 32 packets before 39: the oldest bit of the window.
        assert_eq!(b.recv_bits, 1 << 31);
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let (_, bytes) = packet(&mut a, Duration::ZERO);
        // Wrong tag.
        let mut wrong = bytes.clone();
        wrong[0] ^= 0xFF;
        assert!(matches!(
            deliver(&mut b, Duration::ZERO, &wrong),
            Err(ConnectionError::ProtocolMismatch {
                expected: HEADER_MAGIC_V1,
                ..
            })
        ));
        // Truncated.
        for len in 0..bytes.len() - 1 {
            let e = deliver(&mut b, Duration::ZERO, &bytes[..len]).unwrap_err();
            assert!(matches!(e, ConnectionError::Truncated(_)), "{len}: {e}");
            assert!(!e.is_benign());
        }
        // An ack for a packet b never sent.
        let (_, bytes) = packet(&mut a, Duration::ZERO);
        let mut c = Connection::default();
        deliver(&mut c, Duration::ZERO, &bytes).unwrap();
        let (_, from_c) = packet(&mut c, Duration::ZERO);
        assert!(matches!(
            deliver(&mut b, Duration::ZERO, &from_c),
            Err(ConnectionError::AckOutOfRange { ack: 1, .. })
        ));
        assert_eq!(b.latest_received(), None);
        assert_eq!(b.stats().malformed, bytes.len() as u64 + 1);
    }

    #[test]
    fn sequence_jump_is_rejected() {
        let mut a = Connection::default();
        let mut far = with_seq(5000);
        let mut b = Connection::default();
        deliver(&mut b, Duration::ZERO, &packet(&mut a, Duration::ZERO).1).unwrap();
        let e = deliver(&mut b, Duration::ZERO, &packet(&mut far, Duration::ZERO).1).unwrap_err();
        assert_eq!(
            e,
            ConnectionError::SequenceOutOfRange {
                sequence: 5000,
                latest: 0,
                jump: 5000
            }
        );
        // The window did not move: a's next packet is still accepted.
        assert!(deliver(&mut b, Duration::ZERO, &packet(&mut a, Duration::ZERO).1).is_ok());
    }

    #[test]
    fn a_round_trip_grown_past_the_loss_timeout_is_learnt_from_late_acks() {
        // Instant for two seconds (the loss timeout settles at its floor), then 150 ms
        // each way with nothing lost: the first packets time out before their acks
        // come, and those late acks must teach the estimate the new round trip, or
        // every packet from then on would be reported lost.
        let mut a = Connection::default();
        let mut b = Connection::default();
        let mut to_b: VecDeque<(Duration, Vec<u8>)> = VecDeque::new();
        let mut to_a: VecDeque<(Duration, Vec<u8>)> = VecDeque::new();
        let mut late = Vec::new();
        for step in 0..500u64 {
            let now = ms(step * 16);
            let one_way = if step < 125 { Duration::ZERO } else { ms(150) };
            while to_b.front().is_some_and(|(t, _)| *t <= now) {
                let (_, bytes) = to_b.pop_front().unwrap();
                deliver(&mut b, now, &bytes).unwrap();
            }
            while to_a.front().is_some_and(|(t, _)| *t <= now) {
                let (_, bytes) = to_a.pop_front().unwrap();
                deliver(&mut a, now, &bytes).unwrap();
            }
            a.update(now);
            let fates = drain(&mut a);
            if step >= 375 {
                late.extend(fates.into_iter().map(|(_, d)| d));
            }
            to_b.push_back((now + one_way, packet(&mut a, now).1));
            to_a.push_back((now + one_way, packet(&mut b, now).1));
        }
        let delivered = late
            .iter()
            .filter(|&&d| d == DeliveryStatus::Delivered)
            .count();
        assert!(
            delivered * 10 >= late.len() * 9 && !late.is_empty(),
            "{delivered} of {} delivered in the last two seconds",
            late.len()
        );
        assert!(a.rtt() >= ms(250), "rtt {:?}", a.rtt());
    }

    #[test]
    fn a_packet_overtaken_by_a_newer_one_is_lost() {
        let mut a = Connection::new(ConnectionConfig {
            reorder_threshold: Some(1),
            ..ConnectionConfig::default()
        });
        let mut b = Connection::default();
        let p0 = packet(&mut a, ms(0)).1;
        let p1 = packet(&mut a, ms(1)).1;
        deliver(&mut b, ms(5), &p1).unwrap();
        // 0 arrives after 1: dropped, never acknowledged.
        assert!(matches!(
            deliver(&mut b, ms(6), &p0),
            Err(ConnectionError::Stale { .. })
        ));
        deliver(&mut a, ms(7), &packet(&mut b, ms(7)).1).unwrap();
        assert_eq!(
            drain(&mut a),
            vec![(0, DeliveryStatus::Lost), (1, DeliveryStatus::Delivered)]
        );
    }

    #[test]
    fn timeout_declares_lost_and_late_ack_is_ignored() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let p0 = packet(&mut a, Duration::ZERO).1;
        let timeout = a.loss_timeout();
        assert_eq!(timeout, ms(100 + 200 + 25));
        a.update(timeout - MS);
        assert_eq!(a.poll_delivery(), None);
        a.update(timeout);
        assert_eq!(a.in_flight(), 0);
        assert!(a.packet_loss() > 0.0);
        // The packet did arrive after all; its ack comes back before the notification
        // was polled: the packet stays lost, but the round trip it measured counts.
        deliver(&mut b, timeout, &p0).unwrap();
        deliver(&mut a, timeout, &packet(&mut b, timeout).1).unwrap();
        assert_eq!(a.stats().late_acks, 1);
        assert_eq!(a.latest_rtt(), Some(timeout));
        assert_eq!(drain(&mut a), vec![(0, DeliveryStatus::Lost)]);
        // Acked again after it was polled: still nothing, and counted only once.
        deliver(&mut a, timeout, &packet(&mut b, timeout).1).unwrap();
        assert_eq!(a.poll_delivery(), None);
        assert_eq!(a.stats().late_acks, 1);
        assert_eq!(a.stats().packets_lost, 1);
        assert_eq!(a.stats().packets_delivered, 0);
    }

    #[test]
    fn late_ack_after_poll_is_counted_once() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let p0 = packet(&mut a, Duration::ZERO).1;
        a.update(Duration::from_secs(1));
        assert_eq!(drain(&mut a), vec![(0, DeliveryStatus::Lost)]);
        deliver(&mut b, Duration::from_secs(1), &p0).unwrap();
        for _ in 0..3 {
            let ack = packet(&mut b, Duration::from_secs(1)).1;
            deliver(&mut a, Duration::from_secs(1), &ack).unwrap();
        }
        assert_eq!(a.stats().late_acks, 1);
        assert_eq!(a.stats().packets_delivered, 0);
        assert_eq!(a.poll_delivery(), None);
    }

    #[test]
    fn out_of_ack_window_is_lost_even_without_reorder_threshold() {
        let mut a = Connection::new(ConnectionConfig {
            reorder_threshold: None,
            max_loss_timeout: Duration::from_secs(3600),
            min_loss_timeout: Duration::from_secs(3600),
            ..ConnectionConfig::default()
        });
        let mut b = Connection::default();
        let packets: Vec<_> = (0..40).map(|_| packet(&mut a, Duration::ZERO).1).collect();
        // b receives only 34..40 and acks them: the ack (39) covers 7..=39, so 0..=6
        // can never be acked any more; 7..=33 stay in flight.
        for p in &packets[34..] {
            deliver(&mut b, Duration::ZERO, p).unwrap();
        }
        deliver(&mut a, Duration::ZERO, &packet(&mut b, Duration::ZERO).1).unwrap();
        let trace = drain(&mut a);
        assert_eq!(
            trace,
            (0..7)
                .map(|s| (s, DeliveryStatus::Lost))
                .collect::<Vec<_>>()
        );
        assert_eq!(a.in_flight(), 40 - 7 - 6);
    }

    #[test]
    fn max_in_flight_bounds_unacked_packets() {
        let mut a = Connection::new(ConnectionConfig {
            max_in_flight: 8,
            ..ConnectionConfig::default()
        });
        for _ in 0..20 {
            packet(&mut a, Duration::ZERO);
        }
        assert_eq!(a.in_flight(), 8);
        assert_eq!(
            drain(&mut a),
            (0..12)
                .map(|s| (s, DeliveryStatus::Lost))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn needs_ack_and_ack_only_packets_do_not_ping_pong() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        assert!(!b.needs_ack());
        deliver(&mut b, ms(0), &packet(&mut a, ms(0)).1).unwrap();
        assert!(b.needs_ack());
        let (seq, ack_only) = b.ack_only_packet(ms(10));
        assert_eq!(ack_only.len(), MAX_HEADER_BITS.div_ceil(8));
        assert!(!b.needs_ack());
        let mut r = BitReader::new(&ack_only);
        assert_eq!(a.read_header(ms(20), &mut r), Ok(seq));
        assert!(r.bits_left() < 8);
        // An ack-only packet does not ask for an ack back.
        assert!(!a.needs_ack());
        assert_eq!(drain(&mut a), vec![(0, DeliveryStatus::Delivered)]);
        assert_eq!(a.rtt(), ms(20));
        assert_eq!(b.stats().ack_only_sent, 1);
    }

    #[test]
    fn ack_only_packets_give_no_rtt_sample() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        deliver(&mut a, ms(0), &packet(&mut b, ms(0)).1).unwrap();
        let (seq, ack_only) = a.ack_only_packet(ms(0));
        deliver(&mut b, ms(10), &ack_only).unwrap();
        assert!(!b.needs_ack());
        // b has data to send only much later; its header acks a's ack-only packet.
        deliver(&mut a, ms(900), &packet(&mut b, ms(890)).1).unwrap();
        assert_eq!(drain(&mut a), vec![(seq.0, DeliveryStatus::Delivered)]);
        assert_eq!(a.latest_rtt(), None);
        assert_eq!(a.rtt(), ConnectionConfig::default().initial_rtt);
    }

    #[test]
    fn cancel_header_reuses_the_sequence() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        deliver(&mut b, ms(0), &packet(&mut a, ms(0)).1).unwrap();
        let (seq, _) = packet(&mut b, ms(1));
        assert!(!b.needs_ack());
        assert!(!b.cancel_header(PacketSequence(7)));
        assert!(b.cancel_header(seq));
        assert!(b.needs_ack());
        assert!(!b.cancel_header(seq));
        assert_eq!(b.next_sequence(), seq);
        assert_eq!(b.stats().packets_sent, 0);
        b.update(Duration::from_secs(10));
        assert_eq!(b.poll_delivery(), None);
    }

    #[test]
    fn discard_resolves_everything_in_order() {
        let mut a = Connection::default();
        let mut b = Connection::default();
        let p0 = packet(&mut a, ms(0)).1;
        packet(&mut a, ms(0));
        deliver(&mut b, ms(1), &p0).unwrap();
        deliver(&mut a, ms(2), &packet(&mut b, ms(1)).1).unwrap();
        a.discard_in_flight();
        assert_eq!(
            drain(&mut a),
            vec![(0, DeliveryStatus::Delivered), (1, DeliveryStatus::Discard)]
        );
        assert_eq!(a.stats().packets_discarded, 1);
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn rtt_follows_rfc6298() {
        let mut c = Connection::default();
        assert_eq!(c.rtt(), ms(100));
        c.add_rtt_sample(ms(80));
        assert_eq!((c.rtt(), c.rtt_variance()), (ms(80), ms(40)));
        c.add_rtt_sample(ms(160));
        // rttvar = 3/4 * 40 + 1/4 * 80 = 50; srtt = 7/8 * 80 + 1/8 * 160 = 90
        assert_eq!((c.rtt(), c.rtt_variance()), (ms(90), ms(50)));
        assert_eq!(c.loss_timeout(), ms(90 + 200 + 25));
    }

    #[test]
    fn rtt_converges_to_simulated_latency() {
        let link = LinkConditioner {
            latency: ms(40),
            ..LinkConditioner::perfect()
        };
        let mut pair = LinkPair::new(link, 7);
        let mut a = Connection::default();
        let mut b = Connection::default();
        for tick in 0..200u64 {
            let now = ms(tick * 5);
            while let Some(bytes) = pair.receive_at_a(now) {
                deliver(&mut a, now, &bytes).unwrap();
            }
            while let Some(bytes) = pair.receive_at_b(now) {
                deliver(&mut b, now, &bytes).unwrap();
                // Answer at once so the RTT has no ack delay.
                pair.send_to_a(now, &packet(&mut b, now).1);
            }
            pair.send_to_b(now, &packet(&mut a, now).1);
            drain(&mut a);
        }
        assert_eq!(a.latest_rtt(), Some(ms(80)));
        assert!(a.rtt().abs_diff(ms(80)) <= MS, "{:?}", a.rtt());
        assert!(a.rtt_variance() <= MS, "{:?}", a.rtt_variance());
        assert_eq!(a.stats().packets_lost, 0);
        assert_eq!(a.packet_loss(), 0.0);
    }

    #[test]
    fn insane_config_is_clamped() {
        let c = Connection::new(ConnectionConfig {
            min_loss_timeout: Duration::from_secs(5),
            max_loss_timeout: Duration::ZERO,
            reorder_threshold: Some(0),
            max_in_flight: 0,
            max_sequence_jump: 0,
            loss_smoothing: f32::NAN,
            ..ConnectionConfig::default()
        });
        assert_eq!(c.loss_timeout(), Duration::from_secs(5));
        assert_eq!(c.config().reorder_threshold, Some(1));
        assert_eq!(c.config().max_in_flight, 1);
        assert_eq!(c.config().max_sequence_jump, 33);
        assert!(c.config().loss_smoothing > 0.0);
    }
}
