//! A bounded fuzz smoke run for CI. A session (the server spawns, moves and destroys
//! objects, both sides exchange messages) is recorded at the transport boundary: every
//! event each side's transport handed it, per tick. Each case replays one side's
//! recording into a fresh `Client` or `Server` with the same clock, so the headers
//! (sequences and acks) stay valid and the mutated payloads reach the deep parsers, with
//! a few payloads mutated: bits flipped, bytes overwritten, truncated, spliced with
//! another packet, replaced by noise. Nothing may panic, and a read error is never
//! silent: a side whose connection or streams rejected a payload as malformed has closed
//! with `DisconnectReason::ReadError`. A second property injects mutated packets into a
//! live, connected pair. The coverage-guided cargo-fuzz targets go further
//! (`fuzz/README.md`).

mod common;

use common::robust_suite::*;
use proptest::prelude::*;
use replicate::internals::blob::DeliveryMode;
use replicate::internals::link::LinkConditioner;
use replicate::transport::memory::MemoryServerTransport;
use replicate::transport::{
    ClientId, ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
    TransportDisconnect, TransportError,
};
use replicate::{Client, ClientConfig, DisconnectReason, Server, ServerConfig, ServerEvent};
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::Duration;

const TICKS: u64 = 150;

/// Server transport events per `update` call.
type ServerLog = Vec<Vec<ServerTransportEvent>>;
/// Client transport events per `update` call.
type ClientLog = Vec<Vec<ClientTransportEvent>>;

/// A server transport that records what the inner one reports, per update.
struct RecordingServer {
    inner: MemoryServerTransport,
    log: ServerLog,
}

impl ServerTransport for RecordingServer {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.inner.update(now)?;
        let mut events = Vec::new();
        while let Some(e) = self.inner.poll_event() {
            events.push(e);
        }
        self.log.push(events);
        Ok(())
    }
    fn poll_event(&mut self) -> Option<ServerTransportEvent> {
        let last = self.log.last_mut()?;
        if last.is_empty() {
            return None;
        }
        // Hand them out in order, keeping the log: a copy per event.
        let e = last.remove(0);
        RECORDED_SERVER_PENDING.with(|p| p.borrow_mut().push(e.clone()));
        Some(e)
    }
    fn send(&mut self, client: ClientId, payload: &[u8]) -> Result<(), TransportError> {
        self.inner.send(client, payload)
    }
    fn disconnect(&mut self, client: ClientId) {
        self.inner.disconnect(client)
    }
    fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload_bytes()
    }
}

thread_local! {
    /// The events the recording server handed out during the current update.
    static RECORDED_SERVER_PENDING: std::cell::RefCell<Vec<ServerTransportEvent>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The same script drives the recording and every replay of the server.
fn script(
    server: &mut Server<impl ServerTransport>,
    movers: &mut Vec<replicate::NetRefHandle>,
    tick: u64,
) {
    if tick == 0 {
        *movers = (0..8)
            .map(|i| {
                server
                    .spawn(Mover {
                        label: i,
                        ..Mover::default()
                    })
                    .unwrap()
                    .raw()
            })
            .collect();
    }
    for (i, &h) in movers.iter().enumerate() {
        if let Some(m) = server.get_mut::<Mover>(h) {
            let t = tick as f32 * 0.05 + i as f32;
            m.position = glam::Vec3::new(t.sin() * 90.0, t.cos() * 90.0, 0.0);
            m.hp = ((tick + i as u64) % 1000) as u16;
        }
    }
    if tick % 30 == 29 {
        server.destroy(movers[0]).unwrap();
        movers[0] = server.spawn(Mover::default()).unwrap().raw();
    }
    if tick % 20 == 10 {
        let first = server.clients().next();
        if let Some(id) = first {
            let _ = server.send_message(
                id,
                &Bulk {
                    seq: tick as u32,
                    data: vec![7; 3000],
                },
                DeliveryMode::ReliableOrdered,
            );
        }
    }
}

fn client_script(client: &mut Client<impl ClientTransport>, tick: u64) {
    if tick % 20 == 10 {
        let _ = client.send_message(
            &Bulk {
                seq: tick as u32,
                data: vec![9; 40],
            },
            DeliveryMode::ReliableOrdered,
        );
    }
}

/// The recorded session: (server log, client log).
fn recorded() -> &'static (ServerLog, ClientLog) {
    static RECORDED: OnceLock<(ServerLog, ClientLog)> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let inner = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
        let network = inner.network();
        let mut server = Server::new(
            RecordingServer {
                inner,
                log: Vec::new(),
            },
            registry(),
            ServerConfig::default(),
        )
        .unwrap();
        let (mut client, _) = client(&network, ClientConfig::default());
        let mut server_log = Vec::new();
        let mut client_log = Vec::new();
        let mut movers = Vec::new();
        let mut now = Duration::ZERO;
        for tick in 0..TICKS {
            now += TICK;
            script(&mut server, &mut movers, tick);
            server.tick(now).unwrap();
            server_log.push(RECORDED_SERVER_PENDING.with(|p| std::mem::take(&mut *p.borrow_mut())));
            let _ = server.events();
            let _ = server.receive_messages();
            client_script(&mut client, tick);
            client.transport_mut().record = true;
            client.tick(now).unwrap();
            client_log.push(std::mem::take(&mut client.transport_mut().events));
            let _ = client.events();
            let _ = client.receive_messages();
        }
        assert!(client.is_connected() && converged_any(&server, &client));
        (server_log, client_log)
    })
}

fn converged_any<T: ServerTransport>(server: &Server<T>, client: &MemClient) -> bool {
    client.object_count() == server.objects().len()
}

/// Replays a recorded server log (the server's side of the session).
struct ReplayServer {
    log: VecDeque<Vec<ServerTransportEvent>>,
    events: VecDeque<ServerTransportEvent>,
    closed: Vec<ClientId>,
}

impl ServerTransport for ReplayServer {
    fn update(&mut self, _now: Duration) -> Result<(), TransportError> {
        for e in self.log.pop_front().unwrap_or_default() {
            let from_closed = match &e {
                ServerTransportEvent::Payload { client, .. }
                | ServerTransportEvent::Disconnected { client, .. }
                | ServerTransportEvent::Connected { client, .. } => self.closed.contains(client),
            };
            if !from_closed {
                self.events.push_back(e);
            }
        }
        Ok(())
    }
    fn poll_event(&mut self) -> Option<ServerTransportEvent> {
        self.events.pop_front()
    }
    fn send(&mut self, _: ClientId, _: &[u8]) -> Result<(), TransportError> {
        Ok(())
    }
    fn disconnect(&mut self, client: ClientId) {
        if !self.closed.contains(&client) {
            self.closed.push(client);
            self.events.push_back(ServerTransportEvent::Disconnected {
                client,
                reason: TransportDisconnect::ByLocal,
            });
        }
    }
    fn max_payload_bytes(&self) -> usize {
        replicate::transport::udp::MAX_PAYLOAD_BYTES
    }
}

/// Replays a recorded client log (the client's side of the session).
struct ReplayClient {
    log: VecDeque<Vec<ClientTransportEvent>>,
    events: VecDeque<ClientTransportEvent>,
    connected: bool,
}

impl ClientTransport for ReplayClient {
    fn update(&mut self, _now: Duration) -> Result<(), TransportError> {
        for e in self.log.pop_front().unwrap_or_default() {
            if e == ClientTransportEvent::Connected {
                self.connected = true;
            }
            self.events.push_back(e);
        }
        Ok(())
    }
    fn poll_event(&mut self) -> Option<ClientTransportEvent> {
        self.events.pop_front()
    }
    fn send(&mut self, _: &[u8]) -> Result<(), TransportError> {
        Ok(())
    }
    fn disconnect(&mut self) {
        self.connected = false;
        self.log.clear();
    }
    fn is_connected(&self) -> bool {
        self.connected
    }
    fn max_payload_bytes(&self) -> usize {
        replicate::transport::udp::MAX_PAYLOAD_BYTES
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize),
    SetByte(usize, u8),
    Truncate(usize),
    Splice(usize, usize),
    Noise(Vec<u8>),
}

fn apply(p: &mut Vec<u8>, m: &Mutation, others: &[&Vec<u8>]) {
    match m {
        Mutation::FlipBit(i) => {
            if !p.is_empty() {
                let bit = i % (p.len() * 8);
                p[bit / 8] ^= 1 << (bit % 8);
            }
        }
        Mutation::SetByte(i, v) => {
            if !p.is_empty() {
                let n = p.len();
                p[i % n] = *v;
            }
        }
        Mutation::Truncate(i) => p.truncate(i % (p.len() + 1)),
        Mutation::Splice(other, at) => {
            let q = others[other % others.len()];
            let at = at % (p.len() + 1);
            p.truncate(at);
            p.extend_from_slice(&q[at.min(q.len())..]);
        }
        Mutation::Noise(bytes) => p.clone_from(bytes),
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => any::<usize>().prop_map(Mutation::FlipBit),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Splice(a, b)),
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Noise),
    ]
}

/// Mutates the `picks`-th payloads of a log (counted over the whole session).
fn mutate_payloads<E: Clone>(
    log: &[Vec<E>],
    payload: impl Fn(&mut E) -> Option<&mut Vec<u8>>,
    picks: &[(usize, Mutation)],
) -> Vec<Vec<E>> {
    let mut log = log.to_vec();
    let originals: Vec<Vec<u8>> = log
        .iter()
        .flatten()
        .cloned()
        .filter_map(|mut e| payload(&mut e).cloned())
        .collect();
    let others: Vec<&Vec<u8>> = originals.iter().collect();
    let count = originals.len();
    for (pick, m) in picks {
        let target = pick % count;
        let mut n = 0;
        'find: for events in &mut log {
            for e in events.iter_mut() {
                if let Some(p) = payload(e) {
                    if n == target {
                        apply(p, m, &others);
                        break 'find;
                    }
                    n += 1;
                }
            }
        }
    }
    log
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_recorded_packets_into_a_client_never_panic_and_never_go_unnoticed(
        picks in proptest::collection::vec((any::<usize>(), mutation()), 1..4),
    ) {
        let (_, client_log) = recorded();
        let log = mutate_payloads(client_log, |e| match e {
            ClientTransportEvent::Payload(p) => Some(p),
            _ => None,
        }, &picks);
        let transport = ReplayClient { log: log.into(), events: VecDeque::new(), connected: false };
        let mut client = Client::new(transport, registry(), ClientConfig::default()).unwrap();
        let mut now = Duration::ZERO;
        for tick in 0..TICKS {
            now += TICK;
            client_script(&mut client, tick);
            client.tick(now).unwrap();
            let _ = client.events();
            let _ = client.receive_messages();
        }
        let malformed = client.replication().world().stats().framing_errors;
        match client.disconnect_reason() {
            Some(reason) => prop_assert!(
                matches!(reason, DisconnectReason::ReadError | DisconnectReason::ClosedByServer
                    | DisconnectReason::RegistryMismatch { .. } | DisconnectReason::VersionMismatch { .. }
                    | DisconnectReason::AckTimedOut | DisconnectReason::PendingStateOverflow),
                "{reason:?}"
            ),
            // Still connected: nothing it read was malformed.
            None => prop_assert_eq!(malformed, 0),
        }
        if malformed > 0 {
            prop_assert_eq!(client.disconnect_reason(), Some(DisconnectReason::ReadError));
        }
    }

    #[test]
    fn mutated_recorded_packets_into_a_server_never_panic_and_never_go_unnoticed(
        picks in proptest::collection::vec((any::<usize>(), mutation()), 1..4),
    ) {
        let (server_log, _) = recorded();
        let log = mutate_payloads(server_log, |e| match e {
            ServerTransportEvent::Payload { payload, .. } => Some(payload),
            _ => None,
        }, &picks);
        let transport = ReplayServer { log: log.into(), events: VecDeque::new(), closed: Vec::new() };
        let mut server = Server::new(transport, registry(), ServerConfig::default()).unwrap();
        let mut movers = Vec::new();
        let mut now = Duration::ZERO;
        let mut reasons = Vec::new();
        for tick in 0..TICKS {
            now += TICK;
            script(&mut server, &mut movers, tick);
            server.tick(now).unwrap();
            for e in server.events() {
                if let ServerEvent::ClientDisconnected { reason, .. } | ServerEvent::ClientRefused { reason, .. } = e {
                    reasons.push(reason);
                }
            }
            let _ = server.receive_messages();
        }
        for reason in &reasons {
            prop_assert!(
                matches!(reason, DisconnectReason::ReadError | DisconnectReason::ClosedByClient
                    | DisconnectReason::RegistryMismatch { .. } | DisconnectReason::VersionMismatch { .. }),
                "{reason:?}"
            );
        }
        // A client still connected sent nothing the server's connection found malformed.
        let first = server.clients().next();
        if let Some(id) = first {
            prop_assert_eq!(server.connection(id).unwrap().stats().malformed, 0);
        }
    }
}

#[test]
fn the_recording_replays_exactly() {
    // Unmutated, a replay ends where the recording did: connected, every object there.
    let (server_log, client_log) = recorded();
    let transport = ReplayClient {
        log: client_log.clone().into(),
        events: VecDeque::new(),
        connected: false,
    };
    let mut client = Client::new(transport, registry(), ClientConfig::default()).unwrap();
    let transport = ReplayServer {
        log: server_log.clone().into(),
        events: VecDeque::new(),
        closed: Vec::new(),
    };
    let mut server = Server::new(transport, registry(), ServerConfig::default()).unwrap();
    let mut movers = Vec::new();
    let mut now = Duration::ZERO;
    for tick in 0..TICKS {
        now += TICK;
        script(&mut server, &mut movers, tick);
        server.tick(now).unwrap();
        client_script(&mut client, tick);
        client.tick(now).unwrap();
    }
    assert!(client.is_connected(), "{:?}", client.state());
    assert_eq!(server.client_count(), 1);
    assert_eq!(client.object_count(), 8);
    let id = server.clients().next().unwrap();
    assert_eq!(server.connection(id).unwrap().stats().malformed, 0);
    assert_eq!(client.replication().world().stats().framing_errors, 0);
    assert!(server_log.iter().flatten().count() > 100);
    assert!(
        client_log
            .iter()
            .flatten()
            .filter(|e| matches!(e, ClientTransportEvent::Payload(p) if p.len() > 200))
            .count()
            > 20
    );
}
