//! Network insights (after Unreal's Networking Insights): where every bit of a packet
//! goes, and a compact session file that records it for the `replicate-insights`
//! report.
//!
//! **Attribution.** With [`AttributionLevel::Framing`] or [`AttributionLevel::Members`]
//! turned on ([`ServerConfig::attribution`](crate::ServerConfig::attribution)), every
//! packet the server sends is split into [`PacketBits`]: the connection header, the
//! stream manager's framing, each data stream's section (replication, net tokens, huge
//! objects, messages, any added stream) and the padding to the last byte. The
//! replication section is split further into [`ReplicationPart`]s (destroys, object
//! indices, forms and sizes, long-form flags, tags, heads, change masks, members,
//! exports, end markers), per replicated type and, at the `Members` level, per member
//! (change-mask range). The parts always sum exactly to the bits on the wire
//! ([`PacketBits::is_exact`]). Every packet received from a client is split the same
//! way down to its streams (a client's replication section holds only its reports of
//! broken objects, so it is not split further). Off (the default) costs one branch per
//! packet.
//!
//! **Session file.** A recorded session ([`ServerConfig::record`](crate::ServerConfig::record))
//! is
//!
//! ```text
//! magic "RPLINSGT" (8 bytes) | version: u16 LE | record*
//! record: kind: u8 | payload length: u32 LE | payload
//! ```
//!
//! with the records of [`Record`] (little-endian integers, strings as `u16` length +
//! UTF-8). A reader skips record kinds it does not know; a bad magic, another version,
//! a truncated or malformed record is a [`SessionError`], never a panic.
//!
//! ```
//! use replicate::insights::{decode_session, encode_header, encode_record, Record};
//!
//! let mut file = encode_header();
//! encode_record(&Record::Tick { time_us: 33_000 }, &mut file);
//! let session = decode_session(&file).unwrap();
//! assert_eq!(session.records, vec![Record::Tick { time_us: 33_000 }]);
//! assert!(decode_session(&file[..9]).is_err());
//! ```

use std::fmt;

/// How much the server attributes of what it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttributionLevel {
    /// Nothing (the default; costs one branch per packet).
    #[default]
    Off,
    /// Per packet: header, stream framing, each stream, padding; the replication
    /// stream's framing parts and bits per type.
    Framing,
    /// As `Framing`, plus bits per member (change-mask range) of every batch (each
    /// member is serialized a second time to measure it).
    Members,
}

impl AttributionLevel {
    /// Whether anything is attributed.
    pub fn is_on(self) -> bool {
        self != AttributionLevel::Off
    }
}

/// Number of [`ReplicationPart`]s.
pub const REPLICATION_PARTS: usize = 10;

/// A part of the replication stream's section of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplicationPart {
    /// Destroy entries (continuation bit and handle each).
    Destroys = 0,
    /// Each batch's continuation bit and connection-local object index.
    ObjectIndex = 1,
    /// Each batch's form bit (plain update or long form) and a long form's size prefix.
    FormAndSize = 2,
    /// A long form's flags (exports, creation with handle, protocol index and owner,
    /// tear-off).
    LongFormFlags = 3,
    /// Tags carried by creations and tag changes.
    Tags = 4,
    /// Each batch's head: how its members are coded (in full, against a baseline and
    /// its prediction, or against the default state) and whether it nominates a new
    /// baseline.
    Head = 5,
    /// Change masks.
    ChangeMask = 6,
    /// Member values.
    Members = 7,
    /// Net token exports following batches.
    Exports = 8,
    /// The end markers of the destroy and batch lists, and the objects section's index
    /// width.
    EndMarkers = 9,
}

impl ReplicationPart {
    /// Every part, in index order.
    pub const ALL: [ReplicationPart; REPLICATION_PARTS] = [
        ReplicationPart::Destroys,
        ReplicationPart::ObjectIndex,
        ReplicationPart::FormAndSize,
        ReplicationPart::LongFormFlags,
        ReplicationPart::Tags,
        ReplicationPart::Head,
        ReplicationPart::ChangeMask,
        ReplicationPart::Members,
        ReplicationPart::Exports,
        ReplicationPart::EndMarkers,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            ReplicationPart::Destroys => "destroys",
            ReplicationPart::ObjectIndex => "object indices",
            ReplicationPart::FormAndSize => "forms and sizes",
            ReplicationPart::LongFormFlags => "long-form flags",
            ReplicationPart::Tags => "tags",
            ReplicationPart::Head => "heads",
            ReplicationPart::ChangeMask => "change masks",
            ReplicationPart::Members => "members",
            ReplicationPart::Exports => "exports",
            ReplicationPart::EndMarkers => "end markers",
        }
    }
}

/// Member index of [`MemberBits`] for member bits that could not be split per member
/// (kept so the parts still sum to the packet).
pub const UNATTRIBUTED_MEMBER: u16 = u16::MAX;

/// Bits of one replicated type's batches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypeBits {
    /// The type's protocol index.
    pub protocol: u16,
    /// Batches written.
    pub batches: u32,
    /// Creations among them.
    pub creations: u32,
    /// Bits of those batches (handle, prefix, body, exports).
    pub bits: u64,
}

/// Bits of one member (a change-mask range; grouped members share the first member's
/// index) of one type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberBits {
    /// The type's protocol index.
    pub protocol: u16,
    /// The member's index in the type's descriptor, or [`UNATTRIBUTED_MEMBER`].
    pub member: u16,
    /// Batches that carried it.
    pub sent: u32,
    /// Its bits in those batches.
    pub bits: u64,
}

/// The quantized values one member took, per axis (a vector's axes are equal slices
/// of its fixed-width encoding; a scalar has one): for the quantization hint, "the
/// values use a small part of the configured range". Observed at
/// [`AttributionLevel::Members`] for members whose encoding has a fixed width of at
/// most 64 bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRange {
    /// The type's protocol index.
    pub protocol: u16,
    /// The member's index in the type's descriptor.
    pub member: u16,
    /// Bits of the full encoding.
    pub width: u32,
    /// Values observed.
    pub samples: u64,
    /// Smallest and largest raw quantized value per axis (`axes.len()` axes of
    /// `width / axes.len()` bits each).
    pub axes: Vec<(u64, u64)>,
}

/// Most axes of a [`MemberRange`].
pub const MAX_AXES: usize = 4;

impl MemberRange {
    /// A range of `axes` axes (1..=[`MAX_AXES`]) starting from one raw value.
    pub fn new(protocol: u16, member: u16, width: u32, axes: usize, raw: u64) -> Self {
        let axes = axes.clamp(1, MAX_AXES);
        let mut r = Self {
            protocol,
            member,
            width,
            samples: 0,
            axes: vec![(u64::MAX, 0); axes],
        };
        r.observe(raw);
        r
    }

    /// Bits per axis.
    pub fn axis_bits(&self) -> u32 {
        self.width / self.axes.len().max(1) as u32
    }

    /// Adds one raw value.
    pub fn observe(&mut self, raw: u64) {
        let bits = self.axis_bits();
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        for (i, (lo, hi)) in self.axes.iter_mut().enumerate() {
            let v = raw.checked_shr(bits * i as u32).unwrap_or(0) & mask;
            *lo = (*lo).min(v);
            *hi = (*hi).max(v);
        }
        self.samples += 1;
    }

    /// Merges another observation of the same member.
    pub fn merge(&mut self, other: &MemberRange) {
        if other.axes.len() != self.axes.len() || other.width != self.width {
            return;
        }
        for (a, b) in self.axes.iter_mut().zip(&other.axes) {
            a.0 = a.0.min(b.0);
            a.1 = a.1.max(b.1);
        }
        self.samples += other.samples;
    }

    /// Bits the widest observed span needs per axis.
    pub fn needed_bits(&self) -> u32 {
        self.axes
            .iter()
            .map(|&(lo, hi)| 64 - hi.saturating_sub(lo).leading_zeros())
            .max()
            .unwrap_or(0)
    }
}

/// The replication stream's section of packets, split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationBits {
    /// Bits per [`ReplicationPart`] (indexed by its value).
    pub parts: [u64; REPLICATION_PARTS],
    /// Bits per type (batches only; destroys and end markers belong to no type).
    pub types: Vec<TypeBits>,
    /// Bits per member (at [`AttributionLevel::Members`]).
    pub members: Vec<MemberBits>,
}

impl ReplicationBits {
    /// The sum of the parts: the section's bits.
    pub fn total(&self) -> u64 {
        self.parts.iter().sum()
    }

    /// Adds `bits` to a part.
    pub fn add(&mut self, part: ReplicationPart, bits: u64) {
        self.parts[part as usize] += bits;
    }

    /// Empties it, keeping the allocations.
    pub fn clear(&mut self) {
        self.parts = [0; REPLICATION_PARTS];
        self.types.clear();
        self.members.clear();
    }

    /// Adds a batch of type `protocol`.
    pub fn add_type(&mut self, protocol: u16, bits: u64, creation: bool) {
        // Batches of one type usually follow each other: try the last one first.
        let found = match self.types.last() {
            Some(t) if t.protocol == protocol => Some(self.types.len() - 1),
            _ => self.types.iter().position(|t| t.protocol == protocol),
        };
        let i = found.unwrap_or_else(|| {
            self.types.push(TypeBits {
                protocol,
                ..Default::default()
            });
            self.types.len() - 1
        });
        let t = &mut self.types[i];
        t.batches += 1;
        t.creations += u32::from(creation);
        t.bits += bits;
    }

    /// Adds one member's bits of one batch (`sent` batches).
    pub fn add_member(&mut self, protocol: u16, member: u16, bits: u64, sent: u32) {
        match self
            .members
            .iter_mut()
            .find(|m| m.protocol == protocol && m.member == member)
        {
            Some(m) => {
                m.sent += sent;
                m.bits += bits;
            }
            None => self.members.push(MemberBits {
                protocol,
                member,
                sent,
                bits,
            }),
        }
    }

    /// Adds another split into this one.
    pub fn merge(&mut self, other: &ReplicationBits) {
        for (a, b) in self.parts.iter_mut().zip(other.parts) {
            *a += b;
        }
        for t in &other.types {
            match self.types.iter_mut().find(|x| x.protocol == t.protocol) {
                Some(x) => {
                    x.batches += t.batches;
                    x.creations += t.creations;
                    x.bits += t.bits;
                }
                None => self.types.push(*t),
            }
        }
        for m in &other.members {
            self.add_member(m.protocol, m.member, m.bits, m.sent);
        }
    }
}

/// What a sent payload was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PacketKind {
    /// A replication packet (connection header and streams).
    #[default]
    Data = 0,
    /// A packet carrying only the connection header (acks).
    AckOnly = 1,
    /// A handshake control frame (all of it counts as header).
    Control = 2,
}

impl PacketKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => PacketKind::Data,
            1 => PacketKind::AckOnly,
            2 => PacketKind::Control,
            _ => return None,
        })
    }
}

/// One sent packet, split. `header + stream_framing + Σ streams + padding` equals
/// `wire_bits`, and the replication split (stream 0) sums to stream 0's bits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PacketBits {
    /// What the payload was.
    pub kind: PacketKind,
    /// The payload's bits (bytes × 8).
    pub wire_bits: u64,
    /// The connection header (or the whole control frame; an ack-only packet's header
    /// includes its padding).
    pub header: u64,
    /// The stream manager's count and mask.
    pub stream_framing: u64,
    /// Each data stream's section, by stream index (0 is replication).
    pub streams: Vec<u64>,
    /// Zero bits up to the last byte.
    pub padding: u64,
    /// The replication section split, when it could be (always, unless the stream
    /// manager rolled the section back).
    pub replication: Option<ReplicationBits>,
    /// The huge-object stream's parts per replicated type (`batches` counts parts;
    /// `bits` are the parts' own bits, without the channel's framing, so they sum to
    /// at most that stream's section).
    pub huge_types: Vec<TypeBits>,
}

impl PacketBits {
    /// The attributed bits.
    pub fn attributed(&self) -> u64 {
        self.header + self.stream_framing + self.streams.iter().sum::<u64>() + self.padding
    }

    /// Whether the parts sum exactly to the bits on the wire (and the replication split
    /// to its section).
    pub fn is_exact(&self) -> bool {
        self.attributed() == self.wire_bits
            && self
                .replication
                .as_ref()
                .is_none_or(|r| r.total() == self.streams.first().copied().unwrap_or(0))
    }
}

/// Attribution summed over a connection's packets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributionTotals {
    /// Packets attributed.
    pub packets: u64,
    /// Their bits on the wire.
    pub wire_bits: u64,
    /// Connection headers (and control frames).
    pub header: u64,
    /// Stream manager framing.
    pub stream_framing: u64,
    /// Per stream index.
    pub streams: Vec<u64>,
    /// Padding.
    pub padding: u64,
    /// The replication stream, split.
    pub replication: ReplicationBits,
    /// Packets whose parts did not sum to the wire (should stay 0).
    pub inexact_packets: u64,
    /// Huge-object parts per type (see [`PacketBits::huge_types`]).
    pub huge_types: Vec<TypeBits>,
}

impl AttributionTotals {
    /// The attributed bits: header, stream framing, streams and padding.
    pub fn attributed_bits(&self) -> u64 {
        self.header + self.stream_framing + self.streams.iter().sum::<u64>() + self.padding
    }

    /// Adds a packet.
    pub fn add(&mut self, p: &PacketBits) {
        self.packets += 1;
        self.wire_bits += p.wire_bits;
        self.header += p.header;
        self.stream_framing += p.stream_framing;
        self.padding += p.padding;
        if self.streams.len() < p.streams.len() {
            self.streams.resize(p.streams.len(), 0);
        }
        for (a, b) in self.streams.iter_mut().zip(&p.streams) {
            *a += b;
        }
        if let Some(r) = &p.replication {
            self.replication.merge(r);
        }
        for t in &p.huge_types {
            match self
                .huge_types
                .iter_mut()
                .find(|x| x.protocol == t.protocol)
            {
                Some(x) => {
                    x.batches += t.batches;
                    x.bits += t.bits;
                }
                None => self.huge_types.push(*t),
            }
        }
        if !p.is_exact() {
            self.inexact_packets += 1;
        }
    }
}

// ---------------------------------------------------------------------------------
// Session file
// ---------------------------------------------------------------------------------

/// The first 8 bytes of a session file.
pub const SESSION_MAGIC: [u8; 8] = *b"RPLINSGT";

/// The session format version this build writes and reads.
pub const SESSION_VERSION: u16 = 1;

/// Largest record payload accepted, in bytes.
pub const MAX_RECORD_BYTES: usize = 1 << 20;

/// Largest session file [`read_session`] reads, in bytes.
pub const MAX_SESSION_BYTES: u64 = 1 << 31;

/// Longest string accepted, in bytes.
pub const MAX_STRING_BYTES: usize = 1024;

/// Why a session file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The file does not start with [`SESSION_MAGIC`].
    #[error("not a replicate session file (bad magic)")]
    BadMagic,
    /// The file has another format version.
    #[error("session format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The file's version.
        found: u16,
        /// [`SESSION_VERSION`].
        supported: u16,
    },
    /// The file ends inside a record (or its header).
    #[error("session file truncated at byte {offset}")]
    Truncated {
        /// Where the incomplete record starts.
        offset: usize,
    },
    /// A record is malformed.
    #[error("malformed record at byte {offset}: {reason}")]
    Malformed {
        /// Where the record starts.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// The file could not be read.
    #[error("reading the session file: {0}")]
    Io(String),
    /// The file is larger than [`MAX_SESSION_BYTES`].
    #[error("session file larger than {MAX_SESSION_BYTES} bytes")]
    TooLarge,
}

/// A member of a type, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSchema {
    /// Field name.
    pub name: String,
    /// Serializer name.
    pub serializer: String,
    /// First change-mask bit.
    pub change_mask_offset: u32,
    /// Change-mask bits.
    pub change_mask_bits: u32,
    /// Most bits a full value can take, if bounded (the full width).
    pub max_bits: Option<u32>,
    /// The group it shares a change bit with.
    pub group: Option<String>,
}

/// A replicated type, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeSchema {
    /// Protocol index.
    pub protocol: u16,
    /// Wire name.
    pub name: String,
    /// Members in descriptor order.
    pub members: Vec<MemberSchema>,
}

/// What a session's packets mean: the types and the stream names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSchema {
    /// The registry's types.
    pub types: Vec<TypeSchema>,
    /// The data streams, by index.
    pub streams: Vec<String>,
    /// The attribution level recorded (0 off, 1 framing, 2 members).
    pub attribution: u8,
}

/// One record of a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// The types and streams (first record).
    Schema(SessionSchema),
    /// A server tick started.
    Tick {
        /// Time in microseconds.
        time_us: u64,
    },
    /// A packet sent to a client.
    Packet {
        /// Time in microseconds.
        time_us: u64,
        /// The client.
        client: u64,
        /// The split.
        bits: PacketBits,
    },
    /// A client's connection statistics (sampled).
    Stats {
        /// Time in microseconds.
        time_us: u64,
        /// The client.
        client: u64,
        /// Smoothed RTT in microseconds.
        rtt_us: u64,
        /// Loss estimate, `0.0..=1.0`.
        loss: f32,
        /// Payload bytes received so far.
        bytes_in: u64,
        /// Payload bytes sent so far.
        bytes_out: u64,
        /// Packets declared lost so far.
        packets_lost: u64,
        /// Packets acknowledged so far.
        packets_delivered: u64,
    },
    /// A client passed the handshake.
    Connected {
        /// Time in microseconds.
        time_us: u64,
        /// The client.
        client: u64,
    },
    /// A client left.
    Disconnected {
        /// Time in microseconds.
        time_us: u64,
        /// The client.
        client: u64,
    },
    /// The observed value ranges so far (cumulative: the last one counts).
    Ranges(Vec<MemberRange>),
    /// A packet received from a client: its header, stream framing, each stream's
    /// section and padding (`replication` is `None`: a client's replication section
    /// holds only its reports of broken objects).
    Received {
        /// Time in microseconds.
        time_us: u64,
        /// The client.
        client: u64,
        /// The split.
        bits: PacketBits,
    },
}

const KIND_SCHEMA: u8 = 1;
const KIND_TICK: u8 = 2;
const KIND_PACKET: u8 = 3;
const KIND_STATS: u8 = 4;
const KIND_CONNECTED: u8 = 5;
const KIND_DISCONNECTED: u8 = 6;
const KIND_RANGES: u8 = 7;
const KIND_RECEIVED: u8 = 8;

/// The file header: magic and version.
pub fn encode_header() -> Vec<u8> {
    let mut out = SESSION_MAGIC.to_vec();
    out.extend_from_slice(&SESSION_VERSION.to_le_bytes());
    out
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A packet record's payload (sent or received).
fn put_packet(p: &mut Vec<u8>, time_us: u64, client: u64, bits: &PacketBits) {
    put_u64(p, time_us);
    put_u64(p, client);
    p.push(bits.kind as u8);
    put_u32(p, bits.wire_bits as u32);
    put_u32(p, bits.header as u32);
    put_u32(p, bits.stream_framing as u32);
    put_u32(p, bits.padding as u32);
    p.push(bits.streams.len().min(32) as u8);
    for &s in bits.streams.iter().take(32) {
        put_u32(p, s as u32);
    }
    match &bits.replication {
        None => p.push(0),
        Some(r) => {
            p.push(1);
            for &part in &r.parts {
                put_u32(p, part as u32);
            }
            put_types(p, &r.types, true);
            put_u16(p, r.members.len().min(u16::MAX as usize) as u16);
            for m in r.members.iter().take(u16::MAX as usize) {
                put_u16(p, m.protocol);
                put_u16(p, m.member);
                put_u32(p, m.sent);
                put_u32(p, m.bits as u32);
            }
        }
    }
    // Appended after version 1's fields: a reader of an older file finds none.
    put_types(p, &bits.huge_types, false);
}

/// A count, then each type's protocol, batches, creations (when `creations`) and bits.
fn put_types(p: &mut Vec<u8>, types: &[TypeBits], creations: bool) {
    put_u16(p, types.len().min(u16::MAX as usize) as u16);
    for t in types.iter().take(u16::MAX as usize) {
        put_u16(p, t.protocol);
        put_u32(p, t.batches);
        if creations {
            put_u32(p, t.creations);
        }
        put_u32(p, t.bits as u32);
    }
}

/// Appends one record (kind, length, payload) to `out`.
pub fn encode_record(record: &Record, out: &mut Vec<u8>) {
    let mut p = Vec::new();
    let kind = match record {
        Record::Schema(s) => {
            p.push(s.attribution);
            put_u16(&mut p, s.streams.len().min(32) as u16);
            for name in s.streams.iter().take(32) {
                put_str(&mut p, name);
            }
            put_u16(&mut p, s.types.len().min(u16::MAX as usize) as u16);
            for t in s.types.iter().take(u16::MAX as usize) {
                put_u16(&mut p, t.protocol);
                put_str(&mut p, &t.name);
                put_u16(&mut p, t.members.len().min(u16::MAX as usize) as u16);
                for m in t.members.iter().take(u16::MAX as usize) {
                    put_str(&mut p, &m.name);
                    put_str(&mut p, &m.serializer);
                    put_u32(&mut p, m.change_mask_offset);
                    put_u32(&mut p, m.change_mask_bits);
                    put_u32(&mut p, m.max_bits.map_or(0, |b| b.saturating_add(1)));
                    put_str(&mut p, m.group.as_deref().unwrap_or(""));
                }
            }
            KIND_SCHEMA
        }
        Record::Tick { time_us } => {
            put_u64(&mut p, *time_us);
            KIND_TICK
        }
        Record::Packet {
            time_us,
            client,
            bits,
        } => {
            put_packet(&mut p, *time_us, *client, bits);
            KIND_PACKET
        }
        Record::Received {
            time_us,
            client,
            bits,
        } => {
            put_packet(&mut p, *time_us, *client, bits);
            KIND_RECEIVED
        }
        Record::Stats {
            time_us,
            client,
            rtt_us,
            loss,
            bytes_in,
            bytes_out,
            packets_lost,
            packets_delivered,
        } => {
            put_u64(&mut p, *time_us);
            put_u64(&mut p, *client);
            put_u64(&mut p, *rtt_us);
            put_u32(&mut p, loss.to_bits());
            put_u64(&mut p, *bytes_in);
            put_u64(&mut p, *bytes_out);
            put_u64(&mut p, *packets_lost);
            put_u64(&mut p, *packets_delivered);
            KIND_STATS
        }
        Record::Connected { time_us, client } => {
            put_u64(&mut p, *time_us);
            put_u64(&mut p, *client);
            KIND_CONNECTED
        }
        Record::Disconnected { time_us, client } => {
            put_u64(&mut p, *time_us);
            put_u64(&mut p, *client);
            KIND_DISCONNECTED
        }
        Record::Ranges(ranges) => {
            let n = ranges.len().min(u16::MAX as usize);
            put_u16(&mut p, n as u16);
            for r in ranges.iter().take(n) {
                put_u16(&mut p, r.protocol);
                put_u16(&mut p, r.member);
                put_u32(&mut p, r.width);
                put_u64(&mut p, r.samples);
                let axes = r.axes.len().min(MAX_AXES);
                p.push(axes as u8);
                for &(lo, hi) in r.axes.iter().take(axes) {
                    put_u64(&mut p, lo);
                    put_u64(&mut p, hi);
                }
            }
            KIND_RANGES
        }
    };
    out.push(kind);
    put_u32(out, p.len() as u32);
    out.extend_from_slice(&p);
}

/// A decoded session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    /// The file's version.
    pub version: u16,
    /// The records, in file order (unknown kinds skipped).
    pub records: Vec<Record>,
}

impl Session {
    /// The first schema record.
    pub fn schema(&self) -> Option<&SessionSchema> {
        self.records.iter().find_map(|r| match r {
            Record::Schema(s) => Some(s),
            _ => None,
        })
    }
}

/// A bounds-checked cursor over one record's payload.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

#[derive(Debug)]
struct Short;

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        let end = self.pos.checked_add(n).ok_or(Short)?;
        let s = self.data.get(self.pos..end).ok_or(Short)?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, Short> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, Short> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, Short> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, Short> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn string(&mut self) -> Result<Result<String, &'static str>, Short> {
        let n = self.u16()? as usize;
        if n > MAX_STRING_BYTES {
            return Ok(Err("string longer than the limit"));
        }
        let b = self.take(n)?;
        Ok(String::from_utf8(b.to_vec()).map_err(|_| "string is not UTF-8"))
    }
}

/// A packet record's split (after its time and client), as [`put_packet`] wrote it.
fn get_packet(c: &mut Cursor<'_>) -> Result<Result<PacketBits, String>, Short> {
    let Some(kind) = PacketKind::from_u8(c.u8()?) else {
        return Ok(Err("unknown packet kind".into()));
    };
    let wire_bits = u64::from(c.u32()?);
    let header = u64::from(c.u32()?);
    let stream_framing = u64::from(c.u32()?);
    let padding = u64::from(c.u32()?);
    let nstreams = c.u8()? as usize;
    if nstreams > 32 {
        return Ok(Err(format!("{nstreams} streams (at most 32)")));
    }
    let mut streams = Vec::with_capacity(nstreams);
    for _ in 0..nstreams {
        streams.push(u64::from(c.u32()?));
    }
    let replication = match c.u8()? {
        0 => None,
        1 => {
            let mut r = ReplicationBits::default();
            for part in r.parts.iter_mut() {
                *part = u64::from(c.u32()?);
            }
            let ntypes = c.u16()? as usize;
            for _ in 0..ntypes {
                r.types.push(TypeBits {
                    protocol: c.u16()?,
                    batches: c.u32()?,
                    creations: c.u32()?,
                    bits: u64::from(c.u32()?),
                });
            }
            let nmembers = c.u16()? as usize;
            for _ in 0..nmembers {
                r.members.push(MemberBits {
                    protocol: c.u16()?,
                    member: c.u16()?,
                    sent: c.u32()?,
                    bits: u64::from(c.u32()?),
                });
            }
            Some(r)
        }
        _ => return Ok(Err("bad replication flag".into())),
    };
    let mut huge_types = Vec::new();
    if c.pos < c.data.len() {
        let n = c.u16()? as usize;
        for _ in 0..n {
            huge_types.push(TypeBits {
                protocol: c.u16()?,
                batches: c.u32()?,
                creations: 0,
                bits: u64::from(c.u32()?),
            });
        }
    }
    Ok(Ok(PacketBits {
        kind,
        wire_bits,
        header,
        stream_framing,
        streams,
        padding,
        replication,
        huge_types,
    }))
}

fn decode_payload(kind: u8, c: &mut Cursor<'_>) -> Result<Result<Option<Record>, String>, Short> {
    macro_rules! string {
        ($c:expr) => {
            match $c.string()? {
                Ok(s) => s,
                Err(e) => return Ok(Err(e.to_string())),
            }
        };
    }
    let record = match kind {
        KIND_SCHEMA => {
            let attribution = c.u8()?;
            let nstreams = c.u16()? as usize;
            if nstreams > 32 {
                return Ok(Err(format!("{nstreams} streams (at most 32)")));
            }
            let mut streams = Vec::with_capacity(nstreams);
            for _ in 0..nstreams {
                streams.push(string!(c));
            }
            let ntypes = c.u16()? as usize;
            let mut types = Vec::new();
            for _ in 0..ntypes {
                let protocol = c.u16()?;
                let name = string!(c);
                let nmembers = c.u16()? as usize;
                let mut members = Vec::new();
                for _ in 0..nmembers {
                    let name = string!(c);
                    let serializer = string!(c);
                    let change_mask_offset = c.u32()?;
                    let change_mask_bits = c.u32()?;
                    let max_bits = c.u32()?.checked_sub(1);
                    let group = string!(c);
                    members.push(MemberSchema {
                        name,
                        serializer,
                        change_mask_offset,
                        change_mask_bits,
                        max_bits,
                        group: (!group.is_empty()).then_some(group),
                    });
                }
                types.push(TypeSchema {
                    protocol,
                    name,
                    members,
                });
            }
            Record::Schema(SessionSchema {
                types,
                streams,
                attribution,
            })
        }
        KIND_TICK => Record::Tick { time_us: c.u64()? },
        KIND_PACKET | KIND_RECEIVED => {
            let time_us = c.u64()?;
            let client = c.u64()?;
            let bits = match get_packet(c)? {
                Ok(bits) => bits,
                Err(e) => return Ok(Err(e)),
            };
            if kind == KIND_PACKET {
                Record::Packet {
                    time_us,
                    client,
                    bits,
                }
            } else {
                Record::Received {
                    time_us,
                    client,
                    bits,
                }
            }
        }
        KIND_STATS => Record::Stats {
            time_us: c.u64()?,
            client: c.u64()?,
            rtt_us: c.u64()?,
            loss: f32::from_bits(c.u32()?),
            bytes_in: c.u64()?,
            bytes_out: c.u64()?,
            packets_lost: c.u64()?,
            packets_delivered: c.u64()?,
        },
        KIND_CONNECTED => Record::Connected {
            time_us: c.u64()?,
            client: c.u64()?,
        },
        KIND_DISCONNECTED => Record::Disconnected {
            time_us: c.u64()?,
            client: c.u64()?,
        },
        KIND_RANGES => {
            let n = c.u16()? as usize;
            let mut ranges = Vec::new();
            for _ in 0..n {
                let protocol = c.u16()?;
                let member = c.u16()?;
                let width = c.u32()?;
                let samples = c.u64()?;
                let axes = c.u8()? as usize;
                if !(1..=MAX_AXES).contains(&axes) || width > 64 {
                    return Ok(Err(format!("a range of {axes} axes over {width} bits")));
                }
                let mut r = MemberRange {
                    protocol,
                    member,
                    width,
                    samples,
                    axes: Vec::with_capacity(axes),
                };
                for _ in 0..axes {
                    r.axes.push((c.u64()?, c.u64()?));
                }
                ranges.push(r);
            }
            Record::Ranges(ranges)
        }
        _ => return Ok(Ok(None)),
    };
    Ok(Ok(Some(record)))
}

/// Decodes a whole session file. Never panics: a bad magic, another version, a
/// truncated or malformed record is an error.
pub fn decode_session(bytes: &[u8]) -> Result<Session, SessionError> {
    let header_len = SESSION_MAGIC.len() + 2;
    if bytes.len() < SESSION_MAGIC.len() {
        return Err(if SESSION_MAGIC.starts_with(bytes) {
            SessionError::Truncated { offset: 0 }
        } else {
            SessionError::BadMagic
        });
    }
    if bytes[..SESSION_MAGIC.len()] != SESSION_MAGIC {
        return Err(SessionError::BadMagic);
    }
    if bytes.len() < header_len {
        return Err(SessionError::Truncated { offset: 0 });
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != SESSION_VERSION {
        return Err(SessionError::UnsupportedVersion {
            found: version,
            supported: SESSION_VERSION,
        });
    }
    let mut records = Vec::new();
    let mut at = header_len;
    while at < bytes.len() {
        let start = at;
        let Some(head) = bytes.get(at..at + 5) else {
            return Err(SessionError::Truncated { offset: start });
        };
        let kind = head[0];
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_RECORD_BYTES {
            return Err(SessionError::Malformed {
                offset: start,
                reason: format!("record of {len} bytes (at most {MAX_RECORD_BYTES})"),
            });
        }
        let Some(payload) = bytes.get(at + 5..at + 5 + len) else {
            return Err(SessionError::Truncated { offset: start });
        };
        at += 5 + len;
        let mut c = Cursor {
            data: payload,
            pos: 0,
        };
        match decode_payload(kind, &mut c) {
            Err(Short) => {
                return Err(SessionError::Malformed {
                    offset: start,
                    reason: "record shorter than its contents".into(),
                });
            }
            Ok(Err(reason)) => {
                return Err(SessionError::Malformed {
                    offset: start,
                    reason,
                });
            }
            Ok(Ok(None)) => {}
            Ok(Ok(Some(r))) => {
                if c.pos != payload.len() {
                    return Err(SessionError::Malformed {
                        offset: start,
                        reason: format!("{} bytes left over", payload.len() - c.pos),
                    });
                }
                records.push(r);
            }
        }
    }
    Ok(Session { version, records })
}

/// Reads and decodes a session file.
pub fn read_session(path: &std::path::Path) -> Result<Session, SessionError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| SessionError::Io(e.to_string()))?;
    let mut bytes = Vec::new();
    // One byte past the cap tells a file at the cap from a larger one.
    file.take(MAX_SESSION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SessionError::Io(e.to_string()))?;
    if bytes.len() as u64 > MAX_SESSION_BYTES {
        return Err(SessionError::TooLarge);
    }
    decode_session(&bytes)
}

impl fmt::Display for ReplicationPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        let mut r = ReplicationBits::default();
        r.add(ReplicationPart::Members, 40);
        r.add(ReplicationPart::ChangeMask, 3);
        r.add_type(2, 43, true);
        r.add_member(2, 0, 40, 1);
        vec![
            Record::Schema(SessionSchema {
                types: vec![TypeSchema {
                    protocol: 2,
                    name: "game::Player".into(),
                    members: vec![MemberSchema {
                        name: "position".into(),
                        serializer: "Vec3".into(),
                        change_mask_offset: 0,
                        change_mask_bits: 1,
                        max_bits: Some(63),
                        group: Some("aim".into()),
                    }],
                }],
                streams: vec!["replication".into(), "tokens".into()],
                attribution: 2,
            }),
            Record::Tick { time_us: 7 },
            Record::Packet {
                time_us: 8,
                client: 3,
                bits: PacketBits {
                    kind: PacketKind::Data,
                    wire_bits: 128,
                    header: 74,
                    stream_framing: 7,
                    streams: vec![43, 0],
                    padding: 4,
                    replication: Some(r),
                    huge_types: vec![TypeBits {
                        protocol: 4,
                        batches: 2,
                        creations: 0,
                        bits: 9000,
                    }],
                },
            },
            Record::Stats {
                time_us: 9,
                client: 3,
                rtt_us: 40_000,
                loss: 0.05,
                bytes_in: 1,
                bytes_out: 2,
                packets_lost: 3,
                packets_delivered: 4,
            },
            Record::Connected {
                time_us: 1,
                client: 3,
            },
            Record::Disconnected {
                time_us: 10,
                client: 3,
            },
            Record::Ranges(vec![MemberRange::new(2, 0, 51, 3, 0x1_0000_0002_0003)]),
        ]
    }

    fn file() -> Vec<u8> {
        let mut out = encode_header();
        for r in sample() {
            encode_record(&r, &mut out);
        }
        out
    }

    #[test]
    fn every_record_round_trips() {
        let s = decode_session(&file()).unwrap();
        assert_eq!(s.version, SESSION_VERSION);
        assert_eq!(s.records, sample());
        let Record::Packet { bits, .. } = &s.records[2] else {
            panic!()
        };
        assert!(bits.is_exact());
    }

    #[test]
    fn bad_magic_is_a_typed_error() {
        let mut f = file();
        f[0] = b'X';
        assert_eq!(decode_session(&f), Err(SessionError::BadMagic));
        assert_eq!(decode_session(b"hello"), Err(SessionError::BadMagic));
        assert_eq!(
            decode_session(b"RPL"),
            Err(SessionError::Truncated { offset: 0 })
        );
    }

    #[test]
    fn wrong_version_is_a_typed_error() {
        let mut f = file();
        f[8] = 9;
        assert_eq!(
            decode_session(&f),
            Err(SessionError::UnsupportedVersion {
                found: 9,
                supported: SESSION_VERSION
            })
        );
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        let f = file();
        let mut boundaries = vec![10];
        let mut at = 10;
        while at < f.len() {
            let len = u32::from_le_bytes(f[at + 1..at + 5].try_into().unwrap()) as usize;
            at += 5 + len;
            boundaries.push(at);
        }
        for len in 0..f.len() {
            let r = decode_session(&f[..len]);
            if boundaries.contains(&len) {
                assert!(r.is_ok(), "cut at a record boundary {len}: {r:?}");
            } else {
                assert!(
                    matches!(r, Err(SessionError::Truncated { .. })),
                    "len {len}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn malformed_records_are_errors() {
        // A packet record whose payload is too short for its own counts.
        let mut f = encode_header();
        f.push(KIND_PACKET);
        f.extend_from_slice(&3u32.to_le_bytes());
        f.extend_from_slice(&[1, 2, 3]);
        assert!(matches!(
            decode_session(&f),
            Err(SessionError::Malformed { offset: 10, .. })
        ));
        // A huge length is refused before anything is allocated.
        let mut f = encode_header();
        f.push(KIND_TICK);
        f.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_session(&f),
            Err(SessionError::Malformed { .. })
        ));
        // Bytes left over after a record's contents.
        let mut f = encode_header();
        f.push(KIND_TICK);
        f.extend_from_slice(&9u32.to_le_bytes());
        f.extend_from_slice(&[0; 9]);
        assert!(matches!(
            decode_session(&f),
            Err(SessionError::Malformed { .. })
        ));
        // An unknown kind is skipped.
        let mut f = encode_header();
        f.push(200);
        f.extend_from_slice(&2u32.to_le_bytes());
        f.extend_from_slice(&[0; 2]);
        encode_record(&Record::Tick { time_us: 1 }, &mut f);
        assert_eq!(
            decode_session(&f).unwrap().records,
            vec![Record::Tick { time_us: 1 }]
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        let f = file();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..2000 {
            let mut g = f.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = 10 + (x as usize) % (g.len() - 10);
                g[at] = (x >> 32) as u8 ^ i as u8;
            }
            let _ = decode_session(&g);
        }
    }

    #[test]
    fn ranges_track_each_axis() {
        // Three 17-bit axes: x = 3, y = 2 << ... as written first-lowest.
        let axis = |x: u64, y: u64, z: u64| x | (y << 17) | (z << 34);
        let mut r = MemberRange::new(1, 0, 51, 3, axis(100, 65_000, 7));
        r.observe(axis(103, 65_010, 7));
        let mut other = MemberRange::new(1, 0, 51, 3, axis(98, 65_000, 7));
        other.observe(axis(98, 65_000, 7));
        r.merge(&other);
        assert_eq!(r.samples, 4);
        assert_eq!(r.axes, vec![(98, 103), (65_000, 65_010), (7, 7)]);
        assert_eq!(r.axis_bits(), 17);
        assert_eq!(r.needed_bits(), 4, "a span of 10 needs 4 bits");
        // A mismatched shape is not merged.
        r.merge(&MemberRange::new(1, 0, 51, 1, 0));
        assert_eq!(r.samples, 4);
    }

    #[test]
    fn a_packet_record_without_huge_types_reads_as_none() {
        // A version-1 file written before the huge-object split: the packet record
        // ends after the replication split.
        let bits = PacketBits {
            wire_bits: 64,
            header: 56,
            padding: 8,
            ..Default::default()
        };
        let mut payload = Vec::new();
        put_packet(&mut payload, 5, 9, &bits);
        payload.truncate(payload.len() - 2);
        let mut file = encode_header();
        file.push(KIND_PACKET);
        file.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        file.extend_from_slice(&payload);
        let session = decode_session(&file).unwrap();
        assert_eq!(
            session.records,
            vec![Record::Packet {
                time_us: 5,
                client: 9,
                bits
            }]
        );
    }

    #[test]
    fn totals_sum_packets_and_count_inexact_ones() {
        let Record::Packet { bits, .. } = sample().remove(2) else {
            panic!()
        };
        let mut t = AttributionTotals::default();
        t.add(&bits);
        let mut bad = bits.clone();
        bad.padding += 1;
        t.add(&bad);
        assert_eq!(t.packets, 2);
        assert_eq!(t.inexact_packets, 1);
        assert_eq!(t.replication.types[0].batches, 2);
        assert_eq!(t.replication.parts[ReplicationPart::Members as usize], 80);
    }
}
