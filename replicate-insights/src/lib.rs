//! Network insights for `replicate` (after Unreal's Networking Insights): reads a
//! session recorded by the server ([`replicate::insights`]; `ServerConfig::record`, or
//! `cargo run --example arena -- --record PATH`) and turns it into
//!
//! - an [`Analysis`]: totals, bandwidth over time stacked by replicated type, the
//!   framing share (connection header, stream framing, each data stream, the
//!   replication stream's parts), bits per type and per member (full width, mean bits
//!   sent, change rate, a quantization hint where the observed values use a small part
//!   of the configured range), and per-connection RTT, loss and bytes;
//! - a self-contained HTML report with inline SVG charts ([`html::render`]);
//! - a plain-text summary ([`text::summary`]).
//!
//! ```no_run
//! let session = replicate::insights::read_session("arena.session".as_ref()).unwrap();
//! let analysis = replicate_insights::Analysis::new(&session);
//! std::fs::write("report.html", replicate_insights::html::render(&analysis)).unwrap();
//! print!("{}", replicate_insights::text::summary(&analysis));
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod html;
mod svg;
pub mod text;

use replicate::insights::{
    AttributionTotals, MemberRange, PacketKind, REPLICATION_PARTS, Record, ReplicationPart,
    Session, TypeSchema, UNATTRIBUTED_MEMBER,
};
use std::collections::BTreeMap;

/// Most series in the bandwidth chart that are types (the rest are summed).
pub const TOP_TYPES: usize = 6;

/// Most buckets of the bandwidth chart.
pub const MAX_BUCKETS: usize = 60;

/// One replicated type's totals.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeRow {
    /// Protocol index.
    pub protocol: u16,
    /// Wire name.
    pub name: String,
    /// Batches sent (all clients).
    pub batches: u64,
    /// Creations among them.
    pub creations: u64,
    /// Bits of those batches.
    pub bits: u64,
}

/// The row of `protocol` in `rows`, a new empty one named by `name` if none.
fn type_row<'m>(
    rows: &'m mut BTreeMap<u16, TypeRow>,
    protocol: u16,
    name: &dyn Fn(u16) -> String,
) -> &'m mut TypeRow {
    rows.entry(protocol).or_insert_with(|| TypeRow {
        protocol,
        name: name(protocol),
        batches: 0,
        creations: 0,
        bits: 0,
    })
}

/// One member's (change-mask range's) totals.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberRow {
    /// The type's wire name.
    pub type_name: String,
    /// The member (or its group's) name.
    pub member: String,
    /// Its serializer.
    pub serializer: String,
    /// Most bits a full value takes, if bounded.
    pub full_width: Option<u32>,
    /// Batches that carried it.
    pub sent: u64,
    /// Its bits.
    pub bits: u64,
    /// Batches of its type (for the change rate).
    pub type_batches: u64,
    /// A quantization hint, where one was observed.
    pub hint: Option<String>,
}

impl MemberRow {
    /// Mean bits per batch that carried it.
    pub fn mean_bits(&self) -> f64 {
        self.bits as f64 / self.sent.max(1) as f64
    }

    /// The fraction of its type's batches that carried it.
    pub fn change_rate(&self) -> f64 {
        self.sent as f64 / self.type_batches.max(1) as f64
    }

    /// `Type.member`.
    pub fn label(&self) -> String {
        format!("{}.{}", self.type_name, self.member)
    }
}

/// A sample of a client's connection statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatsSample {
    /// Seconds since the session start.
    pub t: f64,
    /// Smoothed RTT, milliseconds.
    pub rtt_ms: f64,
    /// Loss estimate, `0..=1`.
    pub loss: f64,
    /// Payload bytes sent so far.
    pub bytes_out: u64,
}

/// One client's totals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientRow {
    /// The client id.
    pub id: u64,
    /// Packets attributed.
    pub packets: u64,
    /// Their bits on the wire.
    pub wire_bits: u64,
    /// Statistics over time.
    pub samples: Vec<StatsSample>,
    /// Payload bytes received from it (last sample).
    pub bytes_in: u64,
    /// Payload bytes sent to it (last sample).
    pub bytes_out: u64,
    /// Packets lost (last sample).
    pub packets_lost: u64,
    /// Packets delivered (last sample).
    pub packets_delivered: u64,
    /// Seconds since the start when it connected.
    pub connected_at: Option<f64>,
    /// Seconds since the start when it left.
    pub disconnected_at: Option<f64>,
    /// Packets received from it (attributed).
    pub received_packets: u64,
    /// Their bits on the wire.
    pub received_bits: u64,
}

impl ClientRow {
    /// Mean RTT over the samples, milliseconds.
    pub fn mean_rtt_ms(&self) -> f64 {
        mean(self.samples.iter().map(|s| s.rtt_ms))
    }

    /// Packets lost over packets whose fate is known.
    pub fn loss(&self) -> f64 {
        self.packets_lost as f64 / (self.packets_lost + self.packets_delivered).max(1) as f64
    }
}

fn mean(it: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = it.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// Bandwidth over time: bits per bucket per series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bandwidth {
    /// Bucket width in seconds.
    pub bucket_s: f64,
    /// Series names, stacking order.
    pub series: Vec<String>,
    /// `bits[bucket][series]`.
    pub bits: Vec<Vec<u64>>,
}

/// A slice of the framing share.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// What it is.
    pub name: String,
    /// Its bits.
    pub bits: u64,
}

/// Everything the report shows, computed from a session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Analysis {
    /// Seconds from the first to the last record.
    pub duration_s: f64,
    /// Attribution level recorded (0 off, 1 framing, 2 members).
    pub level: u8,
    /// Data stream names.
    pub streams: Vec<String>,
    /// Packets attributed.
    pub packets: u64,
    /// Of which ack-only.
    pub ack_only_packets: u64,
    /// Server ticks.
    pub ticks: u64,
    /// Bits on the wire.
    pub wire_bits: u64,
    /// Connection headers.
    pub header_bits: u64,
    /// Stream manager framing.
    pub stream_framing_bits: u64,
    /// Padding.
    pub padding_bits: u64,
    /// Per stream.
    pub stream_bits: Vec<u64>,
    /// Replication stream parts (indexed by [`ReplicationPart`]).
    pub parts: [u64; REPLICATION_PARTS],
    /// Replication stream bits that could not be split.
    pub unsplit_replication_bits: u64,
    /// Types, most bits first.
    pub types: Vec<TypeRow>,
    /// Members, most bits first.
    pub members: Vec<MemberRow>,
    /// Clients by id.
    pub clients: Vec<ClientRow>,
    /// Bandwidth over time.
    pub bandwidth: Bandwidth,
    /// Packets whose parts did not sum to the wire (0 in a sound recording).
    pub inexact_packets: u64,
    /// What the clients sent the server, split like the server's packets (empty for
    /// the sessions of servers that did not record it).
    pub upstream: AttributionTotals,
    /// Huge objects' parts per type (`batches` counts parts), most bits first.
    pub huge_types: Vec<TypeRow>,
}

fn member_label(t: &TypeSchema, index: u16) -> (String, String, Option<u32>) {
    if index == UNATTRIBUTED_MEMBER {
        return ("(unattributed)".into(), String::new(), None);
    }
    match t.members.get(index as usize) {
        Some(m) => {
            // A group shares one change bit: name it by the group and sum the widths.
            let grouped: Vec<_> = t
                .members
                .iter()
                .filter(|o| o.change_mask_offset == m.change_mask_offset)
                .collect();
            if grouped.len() > 1 {
                let width = grouped
                    .iter()
                    .map(|o| o.max_bits)
                    .try_fold(0u32, |a, b| b.map(|b| a.saturating_add(b)));
                let names: Vec<&str> = grouped.iter().map(|o| o.name.as_str()).collect();
                let label = match &m.group {
                    Some(g) => format!("{g} ({})", names.join(", ")),
                    None => names.join(", "),
                };
                (label, m.serializer.clone(), width)
            } else {
                (m.name.clone(), m.serializer.clone(), m.max_bits)
            }
        }
        None => (format!("member {index}"), String::new(), None),
    }
}

impl Analysis {
    /// Computes the analysis of a session.
    pub fn new(session: &Session) -> Analysis {
        let schema = session.schema().cloned().unwrap_or_default();
        let types_by_protocol: BTreeMap<u16, &TypeSchema> =
            schema.types.iter().map(|t| (t.protocol, t)).collect();
        let type_name = |p: u16| -> String {
            types_by_protocol
                .get(&p)
                .map_or_else(|| format!("protocol {p}"), |t| t.name.clone())
        };
        let mut a = Analysis {
            level: schema.attribution,
            streams: schema.streams.clone(),
            ..Default::default()
        };
        let times = session.records.iter().filter_map(|r| match r {
            Record::Tick { time_us }
            | Record::Packet { time_us, .. }
            | Record::Received { time_us, .. }
            | Record::Stats { time_us, .. }
            | Record::Connected { time_us, .. }
            | Record::Disconnected { time_us, .. } => Some(*time_us),
            Record::Schema(_) | Record::Ranges(_) => None,
        });
        let (start, end) = times.fold((u64::MAX, 0u64), |(lo, hi), t| (lo.min(t), hi.max(t)));
        let start = if start == u64::MAX { 0 } else { start };
        let end = end.max(start);
        a.duration_s = (end - start) as f64 / 1e6;
        let secs = |t: u64| t.saturating_sub(start) as f64 / 1e6;

        let mut types: BTreeMap<u16, TypeRow> = BTreeMap::new();
        let mut huge: BTreeMap<u16, TypeRow> = BTreeMap::new();
        let mut members: BTreeMap<(u16, u16), (u64, u64)> = BTreeMap::new();
        let mut clients: BTreeMap<u64, ClientRow> = BTreeMap::new();
        // Per packet: (time, bits per type, the rest by series name).
        let mut timeline: Vec<TimelinePacket> = Vec::new();
        let mut ranges: Vec<MemberRange> = Vec::new();
        for r in &session.records {
            match r {
                Record::Tick { .. } => a.ticks += 1,
                Record::Received { client, bits, .. } => {
                    a.upstream.add(bits);
                    let c = clients.entry(*client).or_insert_with(|| ClientRow {
                        id: *client,
                        ..Default::default()
                    });
                    c.received_packets += 1;
                    c.received_bits += bits.wire_bits;
                }
                Record::Packet {
                    time_us,
                    client,
                    bits,
                } => {
                    a.packets += 1;
                    if bits.kind == PacketKind::AckOnly {
                        a.ack_only_packets += 1;
                    }
                    if !bits.is_exact() {
                        a.inexact_packets += 1;
                    }
                    a.wire_bits += bits.wire_bits;
                    a.header_bits += bits.header;
                    a.stream_framing_bits += bits.stream_framing;
                    a.padding_bits += bits.padding;
                    if a.stream_bits.len() < bits.streams.len() {
                        a.stream_bits.resize(bits.streams.len(), 0);
                    }
                    for (s, b) in a.stream_bits.iter_mut().zip(&bits.streams) {
                        *s += b;
                    }
                    let c = clients.entry(*client).or_insert_with(|| ClientRow {
                        id: *client,
                        ..Default::default()
                    });
                    c.packets += 1;
                    c.wire_bits += bits.wire_bits;
                    let mut rest = vec![(
                        "headers & framing".to_string(),
                        bits.header + bits.stream_framing + bits.padding,
                    )];
                    for (i, &s) in bits.streams.iter().enumerate().skip(1) {
                        let name = a.streams.get(i).cloned().unwrap_or(format!("stream {i}"));
                        rest.push((format!("{name} stream"), s));
                    }
                    for t in &bits.huge_types {
                        let row = type_row(&mut huge, t.protocol, &type_name);
                        row.batches += u64::from(t.batches);
                        row.bits += t.bits;
                    }
                    let mut by_type = Vec::new();
                    match &bits.replication {
                        Some(rep) => {
                            for (x, y) in a.parts.iter_mut().zip(rep.parts) {
                                *x += y;
                            }
                            rest.push((
                                "headers & framing".to_string(),
                                rep.parts[ReplicationPart::Destroys as usize]
                                    + rep.parts[ReplicationPart::EndMarkers as usize],
                            ));
                            for t in &rep.types {
                                let row = type_row(&mut types, t.protocol, &type_name);
                                row.batches += u64::from(t.batches);
                                row.creations += u64::from(t.creations);
                                row.bits += t.bits;
                                by_type.push((t.protocol, t.bits));
                            }
                            for m in &rep.members {
                                let e = members.entry((m.protocol, m.member)).or_default();
                                e.0 += u64::from(m.sent);
                                e.1 += m.bits;
                            }
                        }
                        None => {
                            let s = bits.streams.first().copied().unwrap_or(0);
                            a.unsplit_replication_bits += s;
                            rest.push(("replication (unsplit)".to_string(), s));
                        }
                    }
                    timeline.push((*time_us, by_type, rest));
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
                    let c = clients.entry(*client).or_insert_with(|| ClientRow {
                        id: *client,
                        ..Default::default()
                    });
                    c.samples.push(StatsSample {
                        t: secs(*time_us),
                        rtt_ms: *rtt_us as f64 / 1000.0,
                        loss: if loss.is_finite() {
                            f64::from(*loss).clamp(0.0, 1.0)
                        } else {
                            0.0
                        },
                        bytes_out: *bytes_out,
                    });
                    c.bytes_in = *bytes_in;
                    c.bytes_out = *bytes_out;
                    c.packets_lost = *packets_lost;
                    c.packets_delivered = *packets_delivered;
                }
                Record::Connected { time_us, client } => {
                    clients
                        .entry(*client)
                        .or_insert_with(|| ClientRow {
                            id: *client,
                            ..Default::default()
                        })
                        .connected_at = Some(secs(*time_us));
                }
                Record::Disconnected { time_us, client } => {
                    clients
                        .entry(*client)
                        .or_insert_with(|| ClientRow {
                            id: *client,
                            ..Default::default()
                        })
                        .disconnected_at = Some(secs(*time_us));
                }
                Record::Ranges(r) => ranges = r.clone(),
                Record::Schema(_) => {}
            }
        }
        a.huge_types = huge.into_values().collect();
        a.huge_types
            .sort_by(|x, y| y.bits.cmp(&x.bits).then(x.name.cmp(&y.name)));
        a.types = types.into_values().collect();
        a.types
            .sort_by(|x, y| y.bits.cmp(&x.bits).then(x.name.cmp(&y.name)));
        let batches_of: BTreeMap<u16, u64> =
            a.types.iter().map(|t| (t.protocol, t.batches)).collect();
        a.members = members
            .into_iter()
            .map(|((protocol, member), (sent, bits))| {
                let (name, serializer, full_width) = match types_by_protocol.get(&protocol) {
                    Some(t) => member_label(t, member),
                    None => (format!("member {member}"), String::new(), None),
                };
                MemberRow {
                    type_name: type_name(protocol),
                    member: name,
                    serializer,
                    full_width,
                    sent,
                    bits,
                    type_batches: batches_of.get(&protocol).copied().unwrap_or(0),
                    hint: ranges
                        .iter()
                        .find(|r| r.protocol == protocol && r.member == member)
                        .and_then(quantization_hint),
                }
            })
            .collect();
        a.members
            .sort_by(|x, y| y.bits.cmp(&x.bits).then(x.label().cmp(&y.label())));
        a.clients = clients.into_values().collect();
        a.bandwidth = bandwidth(&a.types, timeline, start, end);
        a
    }

    /// The framing share: connection headers, stream framing, padding, every stream
    /// but replication, and the replication stream's parts.
    pub fn framing_share(&self) -> Vec<Share> {
        let mut out = vec![
            Share {
                name: "connection header".into(),
                bits: self.header_bits,
            },
            Share {
                name: "stream framing".into(),
                bits: self.stream_framing_bits,
            },
            Share {
                name: "padding".into(),
                bits: self.padding_bits,
            },
        ];
        for (i, &b) in self.stream_bits.iter().enumerate().skip(1) {
            let name = self
                .streams
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("stream {i}"));
            out.push(Share {
                name: format!("{name} stream"),
                bits: b,
            });
        }
        for p in ReplicationPart::ALL {
            out.push(Share {
                name: format!("replication: {}", p.name()),
                bits: self.parts[p as usize],
            });
        }
        if self.unsplit_replication_bits > 0 {
            out.push(Share {
                name: "replication (unsplit)".into(),
                bits: self.unsplit_replication_bits,
            });
        }
        out
    }

    /// Mean bandwidth over the session, kbit/s (all clients).
    pub fn mean_kbps(&self) -> f64 {
        if self.duration_s <= 0.0 {
            0.0
        } else {
            self.wire_bits as f64 / self.duration_s / 1000.0
        }
    }
}

/// Fewest observed values before a quantization hint is given.
pub const MIN_HINT_SAMPLES: u64 = 20;

/// The quantization hint of a member whose observed values span a small part of the
/// configured range: at least 2 bits per axis would never be used.
pub fn quantization_hint(r: &MemberRange) -> Option<String> {
    let axis = r.axis_bits();
    let needed = r.needed_bits();
    if r.samples < MIN_HINT_SAMPLES || axis < 3 || needed + 2 > axis {
        return None;
    }
    let per_axis = if r.axes.len() > 1 { " per axis" } else { "" };
    let share = r
        .axes
        .iter()
        .map(|&(lo, hi)| hi.saturating_sub(lo) as f64 + 1.0)
        .fold(0.0, f64::max)
        / 2f64.powi(axis as i32);
    Some(format!(
        "values span {:.1}% of the range: {needed} of {axis} bits{per_axis} would do ({} samples)",
        share * 100.0,
        r.samples
    ))
}

/// A bucket width that gives at most [`MAX_BUCKETS`] buckets.
fn bucket_width(duration_s: f64) -> f64 {
    const NICE: [f64; 14] = [
        0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    ];
    NICE.iter()
        .copied()
        .find(|w| duration_s / w <= MAX_BUCKETS as f64)
        .unwrap_or_else(|| (duration_s / MAX_BUCKETS as f64).ceil().max(600.0))
}

/// One packet for the bandwidth chart: its time, bits per type, and the rest of its
/// bits by series name.
type TimelinePacket = (u64, Vec<(u16, u64)>, Vec<(String, u64)>);

fn bandwidth(types: &[TypeRow], timeline: Vec<TimelinePacket>, start: u64, end: u64) -> Bandwidth {
    let duration_s = (end - start) as f64 / 1e6;
    let bucket_s = bucket_width(duration_s);
    let buckets = ((duration_s / bucket_s).floor() as usize + 1).min(MAX_BUCKETS + 1);
    let top: Vec<u16> = types.iter().take(TOP_TYPES).map(|t| t.protocol).collect();
    let mut series: Vec<String> = types
        .iter()
        .take(TOP_TYPES)
        .map(|t| t.name.clone())
        .collect();
    if types.len() > TOP_TYPES {
        series.push("other types".into());
    }
    let mut index: BTreeMap<String, usize> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i))
        .collect();
    let mut rows: Vec<Vec<u64>> = vec![Vec::new(); buckets];
    for (t, by_type, rest) in timeline {
        let b = ((t.saturating_sub(start) as f64 / 1e6 / bucket_s) as usize).min(buckets - 1);
        let row = &mut rows[b];
        for (protocol, bits) in by_type {
            let i = match top.iter().position(|&p| p == protocol) {
                Some(i) => i,
                None => TOP_TYPES,
            };
            if row.len() <= i {
                row.resize(i + 1, 0);
            }
            row[i] += bits;
        }
        for (name, bits) in rest {
            if bits == 0 {
                continue;
            }
            let i = *index.entry(name.clone()).or_insert_with(|| {
                series.push(name);
                series.len() - 1
            });
            // "other types" may not exist yet: keep the indices apart.
            if row.len() <= i {
                row.resize(i + 1, 0);
            }
            row[i] += bits;
        }
    }
    for row in &mut rows {
        row.resize(series.len(), 0);
    }
    Bandwidth {
        bucket_s,
        series,
        bits: rows,
    }
}

/// Formats bits as bytes with a unit.
pub fn fmt_bytes(bits: u64) -> String {
    let b = bits as f64 / 8.0;
    if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// A percentage with one decimal.
pub fn pct(part: u64, whole: u64) -> String {
    format!("{:.1}%", 100.0 * part as f64 / whole.max(1) as f64)
}
