//! A server and several clients, each pair of ends running a `Connection`, over the
//! in-memory transport with different link conditions per client: the connection
//! guarantees hold per client through the transport traits, and the run is
//! reproducible from its seed.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{
    Connection, ConnectionConfig, DeliveryStatus, PacketSequence,
};
use replicate::internals::link::LinkConditioner;
use replicate::transport::memory::{MemoryClientTransport, MemoryServerTransport};
use replicate::transport::{
    ClientId, ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
};

const TICK: Duration = Duration::from_millis(16);

/// Notifications in the order polled.
type Trace = Vec<(u16, DeliveryStatus)>;

/// One end of one connection with its ground truth.
struct End {
    conn: Connection,
    unresolved: VecDeque<(PacketSequence, u32)>,
    next_id: u32,
    accepted: HashSet<u32>,
    trace: Trace,
}

impl End {
    fn new() -> Self {
        Self {
            conn: Connection::new(ConnectionConfig::default()),
            unresolved: VecDeque::new(),
            next_id: 0,
            accepted: HashSet::new(),
            trace: Vec::new(),
        }
    }

    fn packet(&mut self, now: Duration, ack_only: bool) -> Vec<u8> {
        let mut w = BitWriter::with_capacity_bytes(64);
        let seq = if ack_only {
            self.conn.write_ack_only_header(now, &mut w)
        } else {
            self.conn.write_header(now, &mut w)
        };
        w.write_bits(u64::from(self.next_id), 32);
        self.unresolved.push_back((seq, self.next_id));
        self.next_id += 1;
        w.finish().unwrap()
    }

    fn receive(&mut self, now: Duration, bytes: &[u8]) {
        let mut r = BitReader::new(bytes);
        match self.conn.read_header(now, &mut r) {
            Ok(_) => assert!(self.accepted.insert(r.read_bits(32) as u32)),
            Err(e) => assert!(e.is_benign(), "{e}"),
        }
    }

    fn poll(&mut self, now: Duration, peer_accepted: &HashSet<u32>) {
        self.conn.update(now);
        while let Some((seq, status)) = self.conn.poll_delivery() {
            let (expected, id) = self.unresolved.pop_front().expect("never sent");
            assert_eq!(seq, expected);
            if status == DeliveryStatus::Delivered {
                assert!(peer_accepted.contains(&id), "delivered, never accepted");
            }
            self.trace.push((seq.0, status));
        }
    }
}

struct Client {
    transport: MemoryClientTransport,
    end: End,
}

/// Runs a server with one client per conditioner; returns each client's traces
/// (server side, client side) keyed by client id.
fn run(conditioners: &[LinkConditioner], seed: u64) -> BTreeMap<ClientId, (Trace, Trace)> {
    let mut server = MemoryServerTransport::new(LinkConditioner::perfect(), seed);
    let network = server.network();
    let mut clients: Vec<Client> = conditioners
        .iter()
        .map(|c| {
            let transport = network.connect(b"");
            assert!(network.set_client_conditioner(transport.id(), c.clone()));
            Client {
                transport,
                end: End::new(),
            }
        })
        .collect();
    let mut server_ends: BTreeMap<ClientId, End> = BTreeMap::new();
    let mut now = Duration::ZERO;
    for tick in 0..1_500u32 {
        if tick == 1_200 {
            network.set_conditioner(LinkConditioner::perfect());
        }
        let sending = tick < 1_200;
        server.update(now).unwrap();
        while let Some(event) = server.poll_event() {
            match event {
                ServerTransportEvent::Connected { client, .. } => {
                    server_ends.insert(client, End::new());
                }
                ServerTransportEvent::Payload { client, payload } => {
                    server_ends.get_mut(&client).unwrap().receive(now, &payload);
                }
                ServerTransportEvent::Disconnected { .. } => panic!("unexpected disconnect"),
            }
        }
        for c in &mut clients {
            c.transport.update(now).unwrap();
            while let Some(event) = c.transport.poll_event() {
                match event {
                    ClientTransportEvent::Connected => {}
                    ClientTransportEvent::Payload(p) => c.end.receive(now, &p),
                    ClientTransportEvent::Disconnected(r) => panic!("disconnected: {r}"),
                }
            }
            let Some(s) = server_ends.get_mut(&c.transport.id()) else {
                continue;
            };
            s.poll(now, &c.end.accepted);
            c.end.poll(now, &s.accepted);
            if sending || s.conn.needs_ack() {
                let p = s.packet(now, !sending);
                server.send(c.transport.id(), &p).unwrap();
            }
            if c.transport.is_connected() && (sending || c.end.conn.needs_ack()) {
                let p = c.end.packet(now, !sending);
                c.transport.send(&p).unwrap();
            }
        }
        now += TICK;
    }
    let mut out = BTreeMap::new();
    for c in &mut clients {
        let s = server_ends.remove(&c.transport.id()).expect("connected");
        assert!(
            s.unresolved.is_empty() && c.end.unresolved.is_empty(),
            "not settled: {} {} {:?} {:?}",
            s.unresolved.len(),
            c.end.unresolved.len(),
            s.conn.stats(),
            c.end.conn.stats()
        );
        assert_eq!(s.trace.len() as u32, s.next_id);
        assert_eq!(c.end.trace.len() as u32, c.end.next_id);
        out.insert(
            c.transport.id(),
            (s.trace, std::mem::take(&mut c.end.trace)),
        );
    }
    out
}

fn delivered_fraction(trace: &[(u16, DeliveryStatus)]) -> f64 {
    trace
        .iter()
        .filter(|(_, s)| *s == DeliveryStatus::Delivered)
        .count() as f64
        / trace.len() as f64
}

#[test]
fn connections_over_the_memory_transport() {
    let conditioners = [
        LinkConditioner::lan(),
        LinkConditioner::wan(),
        LinkConditioner::bad(),
    ];
    let traces = run(&conditioners, 7);
    assert_eq!(traces.len(), 3);
    let fractions: Vec<f64> = traces
        .values()
        .map(|(server, _)| delivered_fraction(server))
        .collect();
    // Each client got the network it was given.
    assert!(fractions[0] > 0.99, "{fractions:?}");
    assert!(fractions[1] > 0.95 && fractions[1] < 0.995, "{fractions:?}");
    assert!(fractions[2] > 0.7 && fractions[2] < 0.85, "{fractions:?}");
    assert_eq!(traces, run(&conditioners, 7), "same seed, same traces");
}
