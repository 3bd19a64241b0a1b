//! Network insights over a recorded S1-like session (the arena on the in-memory
//! transport, 4 clients, a lossy link, messages): every packet's parts sum exactly to
//! its bits on the wire, and the attribution agrees with the counters the other layers
//! keep (the writer's bits per type, the facade's bytes and packets).

use replicate::insights::{
    AttributionLevel, PacketKind, Record, ReplicationPart, UNATTRIBUTED_MEMBER, decode_session,
};
use replicate_examples::arena_recorded::RecordedArena;
use std::collections::BTreeMap;

#[test]
fn every_packet_of_a_recorded_session_is_attributed_exactly() {
    let run = RecordedArena::default().run().unwrap();
    let session = decode_session(&run.session).unwrap();
    let schema = session.schema().expect("a schema record").clone();
    assert_eq!(
        schema.streams.first().map(String::as_str),
        Some("replication")
    );
    assert!(schema.types.iter().any(|t| t.name == "arena::Player"));

    let mut packets = BTreeMap::<u64, (u64, u64)>::new();
    let mut per_type = BTreeMap::<(u64, u16), u64>::new();
    let mut data = 0;
    let mut streams_used = vec![0u64; schema.streams.len()];
    let mut parts = [0u64; replicate::insights::REPLICATION_PARTS];
    let mut members = 0u64;
    let mut unattributed = 0u64;
    for r in &session.records {
        let Record::Packet { client, bits, .. } = r else {
            continue;
        };
        assert!(bits.is_exact(), "client {client}: {bits:?}");
        assert_eq!(bits.wire_bits % 8, 0);
        assert!(bits.padding < 8, "{bits:?}");
        let e = packets.entry(*client).or_default();
        e.0 += 1;
        e.1 += bits.wire_bits / 8;
        if bits.kind != PacketKind::Data {
            continue;
        }
        data += 1;
        assert!(bits.header > 0 && bits.stream_framing == 5 + schema.streams.len() as u64);
        for (i, s) in bits.streams.iter().enumerate() {
            streams_used[i] += s;
        }
        if let Some(rep) = &bits.replication {
            for (a, b) in parts.iter_mut().zip(rep.parts) {
                *a += b;
            }
            let type_sum: u64 = rep.types.iter().map(|t| t.bits).sum();
            let framing_outside_batches = rep.parts[ReplicationPart::Destroys as usize]
                + rep.parts[ReplicationPart::EndMarkers as usize];
            assert_eq!(type_sum + framing_outside_batches, rep.total());
            for t in &rep.types {
                *per_type.entry((*client, t.protocol)).or_default() += t.bits;
            }
            // Per member: the members part, split exactly (nothing left unattributed
            // for the arena's types, whose members serialize independently).
            let member_sum: u64 = rep.members.iter().map(|m| m.bits).sum();
            assert_eq!(member_sum, rep.parts[ReplicationPart::Members as usize]);
            members += member_sum;
            unattributed += rep
                .members
                .iter()
                .filter(|m| m.member == UNATTRIBUTED_MEMBER)
                .map(|m| m.bits)
                .sum::<u64>();
        }
    }
    assert!(data > 100, "{data} data packets");
    assert_eq!(unattributed, 0);
    assert!(members > 0);
    // Every stream the arena uses carried data: replication, and the messages.
    assert!(streams_used[0] > 0);
    let messages = schema
        .streams
        .iter()
        .position(|s| s == "messages")
        .expect("a message stream");
    assert!(streams_used[messages] > 0, "{streams_used:?}");
    // Every framing part the arena exercises shows up.
    for part in [
        ReplicationPart::Destroys,
        ReplicationPart::ObjectIndex,
        ReplicationPart::FormAndSize,
        ReplicationPart::LongFormFlags,
        ReplicationPart::Head,
        ReplicationPart::ChangeMask,
        ReplicationPart::Members,
        ReplicationPart::EndMarkers,
    ] {
        assert!(parts[part as usize] > 0, "{part}: {parts:?}");
    }

    // Value ranges (the quantization hint): recorded for the arena's fixed-width
    // members, the same as the server holds.
    let ranges = session
        .records
        .iter()
        .rev()
        .find_map(|r| match r {
            Record::Ranges(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a ranges record");
    assert_eq!(ranges, run.server.member_ranges());
    let player = schema
        .types
        .iter()
        .find(|t| t.name == "arena::Player")
        .unwrap();
    let position = player
        .members
        .iter()
        .position(|m| m.name == "position")
        .unwrap();
    let r = ranges
        .iter()
        .find(|r| r.protocol == player.protocol && r.member as usize == position)
        .expect("player positions observed");
    assert_eq!((r.width, r.axes.len()), (51, 3));
    assert!(r.samples > 100 && r.needed_bits() <= 17);
    assert!(r.axes.iter().all(|&(lo, hi)| lo <= hi && hi < 1 << 17));

    // The attribution agrees with the other layers' counters.
    let registry = run.server.objects().registry().clone();
    assert_eq!(run.server.client_count(), 4);
    eprintln!("parts {parts:?} streams {streams_used:?} data packets {data}");
    for client in run.server.clients() {
        let totals = run.server.attribution(client).unwrap();
        assert_eq!(totals.inexact_packets, 0);
        let stats = run.server.stats(client).unwrap();
        let (n, bytes) = packets[&client];
        assert_eq!(totals.packets, n);
        assert_eq!(totals.wire_bits, bytes * 8);
        // Only the handshake's control frames (a welcome or two) are not attributed.
        assert!(stats.packets_out - n <= 3, "{} vs {n}", stats.packets_out);
        assert!(stats.bytes_out - bytes <= 3 * 4);
        // Bits per type: the writer's own counter, type by type.
        for (name, bits) in run.server.bits_per_type(client) {
            let protocol = registry
                .iter()
                .find(|(_, r)| (r.descriptor)().name == name)
                .map(|(i, _)| i)
                .unwrap();
            assert_eq!(per_type[&(client, protocol)], bits, "{name}");
        }
    }
}

#[test]
fn framing_level_splits_the_stream_but_not_the_members() {
    let run = RecordedArena {
        clients: 1,
        seconds: 1,
        level: AttributionLevel::Framing,
        ..Default::default()
    }
    .run()
    .unwrap();
    let session = decode_session(&run.session).unwrap();
    let mut seen = 0;
    for r in &session.records {
        if let Record::Packet { bits, .. } = r {
            assert!(bits.is_exact());
            if let Some(rep) = &bits.replication {
                assert!(rep.members.is_empty());
                assert!(!rep.types.is_empty() || rep.parts[ReplicationPart::Destroys as usize] > 0);
                seen += 1;
            }
        }
    }
    assert!(seen > 10);
}

/// A `metrics` recorder that keeps every counter and gauge by `name{label=value,...}`.
#[derive(Default, Clone)]
struct Capture(std::sync::Arc<std::sync::Mutex<BTreeMap<String, f64>>>);

struct Cell {
    key: String,
    values: std::sync::Arc<std::sync::Mutex<BTreeMap<String, f64>>>,
}

impl Cell {
    fn update(&self, f: impl FnOnce(&mut f64)) {
        let mut map = self.values.lock().unwrap();
        f(map.entry(self.key.clone()).or_default());
    }
}

impl metrics::CounterFn for Cell {
    fn increment(&self, v: u64) {
        self.update(|x| *x += v as f64);
    }
    fn absolute(&self, v: u64) {
        self.update(|x| *x = v as f64);
    }
}

impl metrics::GaugeFn for Cell {
    fn increment(&self, v: f64) {
        self.update(|x| *x += v);
    }
    fn decrement(&self, v: f64) {
        self.update(|x| *x -= v);
    }
    fn set(&self, v: f64) {
        self.update(|x| *x = v);
    }
}

impl Capture {
    fn cell(&self, key: &metrics::Key) -> std::sync::Arc<Cell> {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        std::sync::Arc::new(Cell {
            key: format!("{}{{{}}}", key.name(), labels.join(",")),
            values: self.0.clone(),
        })
    }
    fn get(&self, key: &str) -> f64 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0.0)
    }
}

impl metrics::Recorder for Capture {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

#[test]
fn the_metrics_feature_publishes_stats_and_attribution() {
    let capture = Capture::default();
    let run = metrics::with_local_recorder(&capture, || {
        RecordedArena {
            clients: 2,
            seconds: 1,
            level: AttributionLevel::Framing,
            ..Default::default()
        }
        .run()
        .unwrap()
    });
    for client in run.server.clients() {
        let totals = run.server.attribution(client).unwrap();
        let stats = run.server.stats(client).unwrap();
        let c = format!("client={client}");
        assert_eq!(
            capture.get(&format!("replicate_sent_bits_total{{{c},part=header}}")),
            totals.header as f64
        );
        assert_eq!(
            capture.get(&format!("replicate_sent_bits_total{{{c},part=stream:0}}")),
            totals.streams[0] as f64
        );
        let members = ReplicationPart::Members as usize;
        assert_eq!(
            capture.get(&format!(
                "replicate_replication_bits_total{{{c},part=members}}"
            )),
            totals.replication.parts[members] as f64
        );
        let data = capture.get(&format!("replicate_packets_sent_total{{{c},kind=data}}"));
        let acks = capture.get(&format!(
            "replicate_packets_sent_total{{{c},kind=ack_only}}"
        ));
        assert_eq!(data + acks, totals.packets as f64);
        assert_eq!(
            capture.get(&format!("replicate_bytes_out_total{{{c}}}")),
            stats.bytes_out as f64
        );
        let rtt = capture.get(&format!("replicate_rtt_seconds{{{c}}}"));
        assert!((rtt - stats.rtt.as_secs_f64()).abs() < 1e-9 && rtt > 0.0);
        let type_bits: f64 = totals
            .replication
            .types
            .iter()
            .map(|t| {
                capture.get(&format!(
                    "replicate_type_bits_total{{{c},protocol={}}}",
                    t.protocol
                ))
            })
            .sum();
        assert_eq!(
            type_bits,
            totals.replication.types.iter().map(|t| t.bits).sum::<u64>() as f64
        );
    }
}

/// An object too large for one packet: it travels as a huge object in parts.
#[derive(replicate::Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "insights::Banner")]
struct Banner {
    #[net(max_len = 4000)]
    pixels: Vec<u8>,
    #[net(bits = 7)]
    frame: u8,
}

#[test]
fn huge_objects_are_attributed_exactly_on_their_stream() {
    use replicate::transport::memory::MemoryServerTransport;
    use replicate::{Client, ClientConfig, ProtocolRegistry, Server, ServerConfig};
    use std::sync::Arc;
    use std::time::Duration;

    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport =
        MemoryServerTransport::new(replicate::internals::link::LinkConditioner::perfect(), 3);
    let network = transport.network();
    let mut server = Server::new(
        transport,
        registry.clone(),
        ServerConfig {
            attribution: AttributionLevel::Members,
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let banner = server
        .spawn(Banner {
            pixels: (0..3000).map(|i| (i * 7) as u8).collect(),
            frame: 1,
        })
        .unwrap();
    let mut client = Client::new(network.connect(&[]), registry, ClientConfig::default()).unwrap();
    let mut now = Duration::ZERO;
    for tick in 0..300u32 {
        now += Duration::from_millis(33);
        if tick % 10 == 0
            && let Some(b) = server.get_mut::<Banner>(banner)
        {
            b.frame = (b.frame + 1) % 100;
        }
        server.tick(now).unwrap();
        client.tick(now).unwrap();
        let _ = client.events().count();
    }
    assert_eq!(
        client.get::<Banner>(banner).map(|b| b.pixels.len()),
        Some(3000)
    );
    let id = server.clients().next().unwrap();
    let totals = server.attribution(id).unwrap();
    assert_eq!(totals.inexact_packets, 0, "{totals:?}");
    assert_eq!(totals.attributed_bits(), totals.wire_bits);
    let names = server
        .replication()
        .stream_names(server.connection_id(id).unwrap());
    let huge = names.iter().position(|n| n.contains("huge")).unwrap();
    // The blob's parts travel on the huge-object stream, at least 3000 bytes of it.
    assert!(
        totals.streams[huge] >= 3000 * 8,
        "{names:?} {:?}",
        totals.streams
    );
    // And they are the banner's: its type has every part's bits, which the stream's
    // own framing comes on top of.
    let banner_protocol = server
        .objects()
        .registry()
        .iter()
        .find(|(_, r)| (r.descriptor)().name.ends_with("Banner"))
        .map(|(i, _)| i)
        .unwrap();
    assert_eq!(totals.huge_types.len(), 1, "{:?}", totals.huge_types);
    let t = totals.huge_types[0];
    assert_eq!(t.protocol, banner_protocol);
    assert!(t.batches >= 2, "split in parts: {t:?}");
    assert!(
        t.bits >= 3000 * 8 && t.bits < totals.streams[huge],
        "{t:?} of {}",
        totals.streams[huge]
    );
    assert_eq!(
        client.get::<Banner>(banner).map(|b| b.frame),
        server.get::<Banner>(banner).map(|b| b.frame)
    );
}

#[test]
fn every_packet_a_client_sent_is_attributed_exactly() {
    let run = RecordedArena::default().run().unwrap();
    let session = decode_session(&run.session).unwrap();
    let schema = session.schema().expect("a schema record").clone();
    let mut received = BTreeMap::<u64, (u64, u64)>::new();
    let mut streams_used = vec![0u64; schema.streams.len()];
    for r in &session.records {
        let Record::Received { client, bits, .. } = r else {
            continue;
        };
        assert!(bits.is_exact(), "client {client}: {bits:?}");
        assert_eq!(bits.wire_bits % 8, 0);
        assert!(bits.padding < 8, "{bits:?}");
        assert!(bits.header > 0, "{bits:?}");
        assert!(bits.replication.is_none());
        for (i, s) in bits.streams.iter().enumerate() {
            streams_used[i] += s;
        }
        let e = received.entry(*client).or_default();
        e.0 += 1;
        e.1 += bits.wire_bits / 8;
    }
    // The clients' clock stamps and inputs travel in data streams.
    assert!(streams_used.iter().sum::<u64>() > 0, "{streams_used:?}");
    assert_eq!(received.len(), 4);
    for client in run.server.clients() {
        let totals = run.server.received_attribution(client).unwrap();
        assert_eq!(totals.inexact_packets, 0);
        let (n, bytes) = received[&client];
        assert_eq!((totals.packets, totals.wire_bits), (n, bytes * 8));
        // Only the handshake's control frames (a hello or two) are not attributed.
        let stats = run.server.stats(client).unwrap();
        assert!(
            stats.packets_in >= n && stats.packets_in - n <= 3,
            "{} vs {n}",
            stats.packets_in
        );
        assert!(stats.bytes_in >= bytes && stats.bytes_in - bytes <= 3 * 64);
    }
    // And the report shows them.
    let analysis = replicate_insights::Analysis::new(&session);
    assert_eq!(
        analysis.upstream.packets,
        received.values().map(|v| v.0).sum()
    );
    assert_eq!(analysis.upstream.inexact_packets, 0);
    let html = replicate_insights::html::render(&analysis);
    assert!(html.contains(r#"id="table-upstream""#));
}
