//! The server's network insights: per-connection attribution totals and the session
//! recorder (see [`crate::insights`] for the split and the file format).

use crate::insights::{
    AttributionLevel, AttributionTotals, MemberRange, MemberSchema, PacketBits, PacketKind, Record,
    SessionSchema, TypeSchema, encode_header, encode_record,
};
use crate::protocol::ProtocolRegistry;
use crate::transport::ClientId;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// How often each client's connection statistics are recorded.
const STATS_INTERVAL: Duration = Duration::from_millis(250);

/// Writes a session file as the server runs.
pub(crate) struct Recorder {
    out: Box<dyn Write + Send>,
    buf: Vec<u8>,
    schema_written: bool,
    failed: bool,
}

impl Recorder {
    fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            out,
            buf: encode_header(),
            schema_written: false,
            failed: false,
        }
    }

    fn push(&mut self, record: &Record) {
        if self.failed {
            return;
        }
        encode_record(record, &mut self.buf);
        if self.buf.len() >= 64 * 1024 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.failed {
            return;
        }
        let r = self
            .out
            .write_all(&self.buf)
            .and_then(|()| self.out.flush());
        self.buf.clear();
        if let Err(e) = r {
            tracing::error!("session recorder: {e}; recording stops");
            self.failed = true;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Attribution totals per client, the recorder, and (with the `metrics` feature) the
/// published counters.
pub(crate) struct ServerInsights {
    pub(crate) level: AttributionLevel,
    pub(crate) totals: BTreeMap<ClientId, AttributionTotals>,
    /// The same for the packets received from each client.
    pub(crate) received: BTreeMap<ClientId, AttributionTotals>,
    recorder: Option<Recorder>,
    last_stats: BTreeMap<ClientId, Duration>,
    /// Member value ranges observed on every connection (cumulative).
    ranges: Vec<MemberRange>,
}

fn us(t: Duration) -> u64 {
    t.as_micros().min(u64::MAX as u128) as u64
}

impl ServerInsights {
    pub(crate) fn new(level: AttributionLevel, out: Option<Box<dyn Write + Send>>) -> Self {
        Self {
            level,
            totals: BTreeMap::new(),
            received: BTreeMap::new(),
            recorder: out.map(Recorder::new),
            last_stats: BTreeMap::new(),
            ranges: Vec::new(),
        }
    }

    /// Merges ranges a connection's writer observed.
    pub(crate) fn add_ranges(&mut self, ranges: Vec<MemberRange>) {
        for r in ranges {
            match self
                .ranges
                .iter_mut()
                .find(|x| x.protocol == r.protocol && x.member == r.member)
            {
                Some(x) => x.merge(&r),
                None => self.ranges.push(r),
            }
        }
    }

    /// The member value ranges observed so far.
    pub(crate) fn ranges(&self) -> &[MemberRange] {
        &self.ranges
    }

    fn write_ranges(&mut self) {
        if let Some(r) = self.recorder.as_mut()
            && !self.ranges.is_empty()
        {
            r.push(&Record::Ranges(self.ranges.clone()));
        }
    }

    pub(crate) fn is_recording(&self) -> bool {
        self.recorder.as_ref().is_some_and(|r| !r.failed)
    }

    /// Writes the schema once (the types, and the stream names of the first connection).
    pub(crate) fn ensure_schema(&mut self, registry: &ProtocolRegistry, streams: Vec<String>) {
        let level = self.level as u8;
        let Some(r) = self.recorder.as_mut().filter(|r| !r.schema_written) else {
            return;
        };
        r.schema_written = true;
        let types = registry
            .iter()
            .map(|(index, reg)| {
                let d = (reg.descriptor)();
                TypeSchema {
                    protocol: index,
                    name: d.name.to_string(),
                    members: d
                        .members
                        .iter()
                        .map(|m| MemberSchema {
                            name: m.name.to_string(),
                            serializer: m.serializer.to_string(),
                            change_mask_offset: m.change_mask_offset,
                            change_mask_bits: m.change_mask_bits,
                            max_bits: m.max_bits,
                            group: m.group.map(str::to_string),
                        })
                        .collect(),
                }
            })
            .collect();
        r.push(&Record::Schema(SessionSchema {
            types,
            streams,
            attribution: level,
        }));
    }

    pub(crate) fn on_tick(&mut self, now: Duration) {
        if let Some(r) = self.recorder.as_mut() {
            r.push(&Record::Tick { time_us: us(now) });
        }
    }

    pub(crate) fn on_packet(&mut self, now: Duration, client: ClientId, bits: PacketBits) {
        #[cfg(feature = "metrics")]
        super::metrics::publish_packet(client, &bits);
        self.totals.entry(client).or_default().add(&bits);
        if let Some(r) = self.recorder.as_mut() {
            r.push(&Record::Packet {
                time_us: us(now),
                client,
                bits,
            });
        }
    }

    /// A packet received from a client, split like a sent one.
    pub(crate) fn on_received(&mut self, now: Duration, client: ClientId, bits: PacketBits) {
        self.received.entry(client).or_default().add(&bits);
        if let Some(r) = self.recorder.as_mut() {
            r.push(&Record::Received {
                time_us: us(now),
                client,
                bits,
            });
        }
    }

    /// An ack-only packet: header (and its padding) only.
    pub(crate) fn on_ack_only(&mut self, now: Duration, client: ClientId, bytes: usize) {
        let wire = bytes as u64 * 8;
        self.on_packet(
            now,
            client,
            PacketBits {
                kind: PacketKind::AckOnly,
                wire_bits: wire,
                header: wire,
                ..Default::default()
            },
        );
    }

    pub(crate) fn on_connected(&mut self, now: Duration, client: ClientId) {
        if let Some(r) = self.recorder.as_mut() {
            r.push(&Record::Connected {
                time_us: us(now),
                client,
            });
        }
    }

    pub(crate) fn on_disconnected(&mut self, now: Duration, client: ClientId) {
        self.last_stats.remove(&client);
        if let Some(r) = self.recorder.as_mut() {
            r.push(&Record::Disconnected {
                time_us: us(now),
                client,
            });
        }
    }

    /// Samples a client's statistics (every [`STATS_INTERVAL`]).
    pub(crate) fn on_stats(&mut self, now: Duration, client: ClientId, s: &super::NetStats) {
        #[cfg(feature = "metrics")]
        super::metrics::publish_stats(client, s);
        let Some(r) = self.recorder.as_mut() else {
            return;
        };
        let last = self.last_stats.entry(client).or_insert(Duration::ZERO);
        if now < *last {
            return;
        }
        *last = now + STATS_INTERVAL;
        r.push(&Record::Stats {
            time_us: us(now),
            client,
            rtt_us: us(s.rtt),
            loss: s.packet_loss,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            packets_lost: s.packets_lost,
            packets_delivered: s.packets_delivered,
        });
    }

    pub(crate) fn flush(&mut self) -> bool {
        self.write_ranges();
        match self.recorder.as_mut() {
            Some(r) => {
                r.flush();
                !r.failed
            }
            None => true,
        }
    }
}

impl Drop for ServerInsights {
    fn drop(&mut self) {
        // The recorder (a field) flushes after this.
        self.write_ranges();
    }
}
