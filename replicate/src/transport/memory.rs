//! An in-memory transport: one server and its clients in one process, each client
//! joined to the server by a pair of seeded [`LinkSimulator`]s that add latency,
//! jitter, loss, duplication and reordering. For tests, benchmarks and examples that
//! want real packet flow without sockets.
//!
//! Payloads arrive unaltered (the [integrity contract](super#the-integrity-contract))
//! unless the conditioner's [`corrupt`](LinkConditioner::corrupt) probability is set:
//! then one random bit of a payload copy is flipped with that probability, drawn from
//! the route's seeded generator, for robustness tests
//! ([`MemoryNetwork::set_client_conditioner`] injects it on one client's route).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{
    ClientId, ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
    TransportDisconnect, TransportError,
};
use crate::link::{LinkConditioner, LinkSimulator, LinkStats, SplitMix64};

/// The shared state of an in-memory network: one server, its clients, and a pair of
/// [`LinkSimulator`]s per client.
#[derive(Debug)]
struct Hub {
    conditioner: LinkConditioner,
    seeds: SplitMix64,
    max_payload_bytes: usize,
    max_clients: usize,
    next_client: ClientId,
    routes: BTreeMap<ClientId, Route>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RouteState {
    /// The client asked to connect; the server has not updated since.
    Connecting,
    /// The server accepted the client.
    Connected,
    /// The server refused the client (full).
    Denied,
    /// The client disconnected; the server has not been told yet.
    ClosedByClient,
    /// The server disconnected the client; the client has not been told yet.
    ClosedByServer,
}

#[derive(Debug)]
struct Route {
    user_data: Vec<u8>,
    /// Client to server.
    up: LinkSimulator,
    /// Server to client.
    down: LinkSimulator,
    state: RouteState,
}

impl Hub {
    fn connected_count(&self) -> usize {
        self.routes
            .values()
            .filter(|r| r.state == RouteState::Connected)
            .count()
    }
}

/// A handle on an in-memory network, for creating clients and changing link
/// conditions; cheap to clone. Obtained from [`MemoryServerTransport::network`].
#[derive(Debug, Clone)]
pub struct MemoryNetwork {
    hub: Arc<Mutex<Hub>>,
}

fn lock(hub: &Mutex<Hub>) -> MutexGuard<'_, Hub> {
    hub.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryNetwork {
    /// A new client that asks the server to connect. The server reports it
    /// ([`ServerTransportEvent::Connected`] with `user_data`) at its next update; the
    /// client reports [`ClientTransportEvent::Connected`] at its first update after
    /// that (or [`TransportDisconnect::Denied`] if the server was full).
    pub fn connect(&self, user_data: &[u8]) -> MemoryClientTransport {
        let mut hub = lock(&self.hub);
        let id = hub.next_client;
        hub.next_client += 1;
        let up = LinkSimulator::new(hub.conditioner.clone(), hub.seeds.next_u64());
        let down = LinkSimulator::new(hub.conditioner.clone(), hub.seeds.next_u64());
        hub.routes.insert(
            id,
            Route {
                user_data: user_data.to_vec(),
                up,
                down,
                state: RouteState::Connecting,
            },
        );
        MemoryClientTransport {
            hub: Arc::clone(&self.hub),
            id,
            now: Duration::ZERO,
            connected: false,
            closed: false,
            events: VecDeque::new(),
        }
    }

    /// Conditions both directions of one client's route from now on (packets
    /// already in flight keep their fate). Returns false for an unknown client.
    pub fn set_client_conditioner(&self, client: ClientId, conditioner: LinkConditioner) -> bool {
        let mut hub = lock(&self.hub);
        match hub.routes.get_mut(&client) {
            Some(route) => {
                route.up.set_conditioner(conditioner.clone());
                route.down.set_conditioner(conditioner);
                true
            }
            None => false,
        }
    }

    /// Conditions every route, present and future, from now on (for example
    /// [`LinkConditioner::perfect`] to let the network quiet down).
    pub fn set_conditioner(&self, conditioner: LinkConditioner) {
        let mut hub = lock(&self.hub);
        for route in hub.routes.values_mut() {
            route.up.set_conditioner(conditioner.clone());
            route.down.set_conditioner(conditioner.clone());
        }
        hub.conditioner = conditioner;
    }

    /// Whether no packet is in flight anywhere on the network.
    pub fn is_idle(&self) -> bool {
        lock(&self.hub)
            .routes
            .values()
            .all(|r| r.up.is_idle() && r.down.is_idle())
    }

    /// Link statistics of one client's route: (client to server, server to client).
    pub fn client_link_stats(&self, client: ClientId) -> Option<(LinkStats, LinkStats)> {
        let hub = lock(&self.hub);
        let route = hub.routes.get(&client)?;
        Some((*route.up.stats(), *route.down.stats()))
    }
}

/// The server end of an in-memory network: a [`ServerTransport`] whose clients are
/// [`MemoryClientTransport`]s created through [`network`](Self::network), each
/// route conditioned by its own pair of seeded [`LinkSimulator`]s. Deterministic:
/// clients are served in id order, and the same seed, conditioner and calls give the
/// same events.
///
/// There is no connection timeout and no keep-alive: a route only closes when one
/// side disconnects.
///
/// ```
/// use std::time::Duration;
/// use replicate::transport::LinkConditioner;
/// use replicate::transport::memory::MemoryServerTransport;
/// use replicate::transport::{
///     ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
/// };
///
/// let ms = Duration::from_millis;
/// let mut server = MemoryServerTransport::new(LinkConditioner { latency: ms(10), ..LinkConditioner::perfect() }, 1);
/// let mut client = server.network().connect(b"player-1");
///
/// server.update(ms(0)).unwrap();
/// let Some(ServerTransportEvent::Connected { client: id, user_data }) = server.poll_event() else {
///     panic!("expected a connection");
/// };
/// assert_eq!(user_data, b"player-1");
/// client.update(ms(0)).unwrap();
/// assert_eq!(client.poll_event(), Some(ClientTransportEvent::Connected));
///
/// server.send(id, b"welcome").unwrap();
/// client.update(ms(10)).unwrap();
/// assert_eq!(client.poll_event(), Some(ClientTransportEvent::Payload(b"welcome".to_vec())));
/// ```
#[derive(Debug)]
pub struct MemoryServerTransport {
    hub: Arc<Mutex<Hub>>,
    now: Duration,
    events: VecDeque<ServerTransportEvent>,
}

impl MemoryServerTransport {
    /// A server on a new in-memory network whose routes are conditioned by
    /// `conditioner`, with per-route seeds derived from `seed`. Payloads are capped
    /// at [`MAX_PAYLOAD_BYTES`](crate::transport::MAX_PAYLOAD_BYTES) like the
    /// UDP transport's, and clients at [`MAX_CLIENTS`](crate::transport::MAX_CLIENTS).
    pub fn new(conditioner: LinkConditioner, seed: u64) -> Self {
        Self::with_limits(
            conditioner,
            seed,
            crate::transport::MAX_PAYLOAD_BYTES,
            crate::transport::MAX_CLIENTS,
        )
    }

    /// Like [`new`](Self::new) with explicit payload and client limits.
    pub fn with_limits(
        conditioner: LinkConditioner,
        seed: u64,
        max_payload_bytes: usize,
        max_clients: usize,
    ) -> Self {
        Self {
            hub: Arc::new(Mutex::new(Hub {
                conditioner,
                seeds: SplitMix64::new(seed),
                max_payload_bytes,
                max_clients,
                next_client: 1,
                routes: BTreeMap::new(),
            })),
            now: Duration::ZERO,
            events: VecDeque::new(),
        }
    }

    /// A handle for creating clients and changing conditions.
    pub fn network(&self) -> MemoryNetwork {
        MemoryNetwork {
            hub: Arc::clone(&self.hub),
        }
    }
}

impl ServerTransport for MemoryServerTransport {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.now = now;
        let mut hub = lock(&self.hub);
        let hub = &mut *hub;
        let mut connected = hub.connected_count();
        let mut closed = Vec::new();
        for (&client, route) in hub.routes.iter_mut() {
            match route.state {
                RouteState::Connecting if connected < hub.max_clients => {
                    connected += 1;
                    route.state = RouteState::Connected;
                    self.events.push_back(ServerTransportEvent::Connected {
                        client,
                        user_data: route.user_data.clone(),
                    });
                }
                RouteState::Connecting => route.state = RouteState::Denied,
                RouteState::ClosedByClient => {
                    self.events.push_back(ServerTransportEvent::Disconnected {
                        client,
                        reason: TransportDisconnect::ByPeer,
                    });
                    closed.push(client);
                }
                _ => {}
            }
            if route.state == RouteState::Connected {
                for payload in route.up.drain(now) {
                    self.events
                        .push_back(ServerTransportEvent::Payload { client, payload });
                }
            }
        }
        for client in closed {
            hub.routes.remove(&client);
        }
        Ok(())
    }

    fn poll_event(&mut self) -> Option<ServerTransportEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, client: ClientId, payload: &[u8]) -> Result<(), TransportError> {
        let mut hub = lock(&self.hub);
        let max = hub.max_payload_bytes;
        if payload.len() > max {
            return Err(TransportError::PayloadTooLarge {
                len: payload.len(),
                max,
            });
        }
        match hub.routes.get_mut(&client) {
            Some(route) if route.state == RouteState::Connected => {
                route.down.send(self.now, payload);
                Ok(())
            }
            _ => Err(TransportError::UnknownClient(client)),
        }
    }

    fn disconnect(&mut self, client: ClientId) {
        let mut hub = lock(&self.hub);
        if let Some(route) = hub.routes.get_mut(&client) {
            if route.state == RouteState::Connected {
                route.state = RouteState::ClosedByServer;
                route.up.clear();
                route.down.clear();
                self.events.push_back(ServerTransportEvent::Disconnected {
                    client,
                    reason: TransportDisconnect::ByLocal,
                });
            }
        }
    }

    fn max_payload_bytes(&self) -> usize {
        lock(&self.hub).max_payload_bytes
    }
}

/// A client end of an in-memory network, created by [`MemoryNetwork::connect`]. See
/// [`MemoryServerTransport`].
#[derive(Debug)]
pub struct MemoryClientTransport {
    hub: Arc<Mutex<Hub>>,
    id: ClientId,
    now: Duration,
    connected: bool,
    closed: bool,
    events: VecDeque<ClientTransportEvent>,
}

impl MemoryClientTransport {
    /// The id the server knows this client by.
    pub fn id(&self) -> ClientId {
        self.id
    }

    fn close(&mut self, reason: TransportDisconnect) {
        if !self.closed {
            self.closed = true;
            self.connected = false;
            self.events
                .push_back(ClientTransportEvent::Disconnected(reason));
        }
    }
}

impl ClientTransport for MemoryClientTransport {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.now = now;
        if self.closed {
            return Ok(());
        }
        let mut hub = lock(&self.hub);
        let state = hub.routes.get(&self.id).map(|r| r.state);
        match state {
            Some(RouteState::Connected) => {
                if !self.connected {
                    self.connected = true;
                    self.events.push_back(ClientTransportEvent::Connected);
                }
                if let Some(route) = hub.routes.get_mut(&self.id) {
                    for payload in route.down.drain(now) {
                        self.events
                            .push_back(ClientTransportEvent::Payload(payload));
                    }
                }
            }
            Some(RouteState::Denied) => {
                hub.routes.remove(&self.id);
                drop(hub);
                self.close(TransportDisconnect::Denied);
            }
            Some(RouteState::ClosedByServer) | None => {
                hub.routes.remove(&self.id);
                drop(hub);
                self.close(TransportDisconnect::ByPeer);
            }
            Some(RouteState::Connecting | RouteState::ClosedByClient) => {}
        }
        Ok(())
    }

    fn poll_event(&mut self) -> Option<ClientTransportEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), TransportError> {
        let mut hub = lock(&self.hub);
        let max = hub.max_payload_bytes;
        if payload.len() > max {
            return Err(TransportError::PayloadTooLarge {
                len: payload.len(),
                max,
            });
        }
        if !self.connected {
            return Err(TransportError::NotConnected);
        }
        match hub.routes.get_mut(&self.id) {
            Some(route) if route.state == RouteState::Connected => {
                route.up.send(self.now, payload);
                Ok(())
            }
            _ => Err(TransportError::NotConnected),
        }
    }

    fn disconnect(&mut self) {
        if self.closed {
            return;
        }
        {
            let mut hub = lock(&self.hub);
            match hub.routes.get_mut(&self.id) {
                Some(route) if route.state == RouteState::Connected => {
                    route.state = RouteState::ClosedByClient;
                    route.up.clear();
                    route.down.clear();
                }
                Some(_) => {
                    hub.routes.remove(&self.id);
                }
                None => {}
            }
        }
        self.close(TransportDisconnect::ByLocal);
    }

    fn is_connected(&self) -> bool {
        self.connected
    }

    fn max_payload_bytes(&self) -> usize {
        lock(&self.hub).max_payload_bytes
    }
}

impl Drop for MemoryClientTransport {
    /// Dropping a client disconnects it, as closing a socket would (eventually).
    fn drop(&mut self) {
        self.disconnect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn connected(
        conditioner: LinkConditioner,
        seed: u64,
    ) -> (MemoryServerTransport, MemoryClientTransport, ClientId) {
        let mut server = MemoryServerTransport::new(conditioner, seed);
        let mut client = server.network().connect(b"hi");
        assert!(!client.is_connected());
        assert!(matches!(
            client.send(b"x"),
            Err(TransportError::NotConnected)
        ));
        client.update(Duration::ZERO).unwrap();
        assert_eq!(
            client.poll_event(),
            None,
            "connected before the server saw it"
        );
        server.update(Duration::ZERO).unwrap();
        let Some(ServerTransportEvent::Connected {
            client: id,
            user_data,
        }) = server.poll_event()
        else {
            panic!("no connection event");
        };
        assert_eq!((id, user_data.as_slice()), (client.id(), &b"hi"[..]));
        client.update(Duration::ZERO).unwrap();
        assert_eq!(client.poll_event(), Some(ClientTransportEvent::Connected));
        assert!(client.is_connected());
        (server, client, id)
    }

    #[test]
    fn corruption_on_a_route_is_seeded_and_flips_one_bit() {
        let run = |seed| {
            let (mut server, mut client, id) = connected(LinkConditioner::perfect(), seed);
            let network = server.network();
            let corrupt = LinkConditioner {
                corrupt: 0.5,
                ..LinkConditioner::perfect()
            };
            assert!(network.set_client_conditioner(id, corrupt));
            let sent = vec![0x5Au8; 64];
            let mut received = Vec::new();
            for t in 1..=40 {
                server.send(id, &sent).unwrap();
                client.update(ms(t)).unwrap();
                while let Some(ClientTransportEvent::Payload(p)) = client.poll_event() {
                    received.push(p);
                }
            }
            let flipped: Vec<u32> = received
                .iter()
                .map(|p| p.iter().zip(&sent).map(|(a, b)| (a ^ b).count_ones()).sum())
                .collect();
            (received, flipped)
        };
        let (a, flipped) = run(5);
        assert_eq!(a.len(), 40);
        // Each copy is intact or has exactly one bit flipped, about half of them.
        assert!(flipped.iter().all(|&f| f <= 1));
        let corrupted = flipped.iter().filter(|&&f| f == 1).count();
        assert!((10..=30).contains(&corrupted), "{corrupted}");
        // The same seed flips the same bits.
        assert_eq!(run(5).0, a);
        assert_ne!(run(6).0, a);
    }

    #[test]
    fn memory_transport_carries_payloads_both_ways() {
        let c = LinkConditioner {
            latency: ms(20),
            ..LinkConditioner::perfect()
        };
        let (mut server, mut client, id) = connected(c, 1);
        server.update(ms(100)).unwrap();
        client.update(ms(100)).unwrap();
        server.send(id, b"down").unwrap();
        client.send(b"up").unwrap();
        server.update(ms(119)).unwrap();
        client.update(ms(119)).unwrap();
        assert_eq!((server.poll_event(), client.poll_event()), (None, None));
        server.update(ms(120)).unwrap();
        client.update(ms(120)).unwrap();
        assert_eq!(
            server.poll_event(),
            Some(ServerTransportEvent::Payload {
                client: id,
                payload: b"up".to_vec()
            })
        );
        assert_eq!(
            client.poll_event(),
            Some(ClientTransportEvent::Payload(b"down".to_vec()))
        );
        let max = server.max_payload_bytes();
        assert_eq!(client.max_payload_bytes(), max);
        let big = vec![0u8; max + 1];
        assert!(matches!(
            server.send(id, &big),
            Err(TransportError::PayloadTooLarge { .. })
        ));
        assert!(matches!(
            client.send(&big),
            Err(TransportError::PayloadTooLarge { .. })
        ));
        assert!(matches!(
            server.send(id + 1, b"?"),
            Err(TransportError::UnknownClient(_))
        ));
        assert!(server.network().is_idle());
        let (up, down) = server.network().client_link_stats(id).unwrap();
        assert_eq!((up.delivered, down.delivered), (1, 1));
    }

    #[test]
    fn memory_transport_disconnects() {
        // Server side.
        let (mut server, mut client, id) = connected(LinkConditioner::perfect(), 2);
        server.send(id, b"lost in the close").unwrap();
        server.disconnect(id);
        assert_eq!(
            server.poll_event(),
            Some(ServerTransportEvent::Disconnected {
                client: id,
                reason: TransportDisconnect::ByLocal
            })
        );
        client.update(ms(1)).unwrap();
        assert_eq!(
            client.poll_event(),
            Some(ClientTransportEvent::Disconnected(
                TransportDisconnect::ByPeer
            ))
        );
        assert_eq!(client.poll_event(), None);
        assert!(!client.is_connected());
        assert!(matches!(
            server.send(id, b"x"),
            Err(TransportError::UnknownClient(_))
        ));

        // Client side, explicitly and by drop.
        let (mut server, mut client, id) = connected(LinkConditioner::perfect(), 3);
        client.disconnect();
        assert_eq!(
            client.poll_event(),
            Some(ClientTransportEvent::Disconnected(
                TransportDisconnect::ByLocal
            ))
        );
        let mut second = server.network().connect(b"2");
        server.update(ms(1)).unwrap();
        let events: Vec<_> = std::iter::from_fn(|| server.poll_event()).collect();
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[0],
            ServerTransportEvent::Disconnected {
                client: id,
                reason: TransportDisconnect::ByPeer
            }
        );
        second.update(ms(1)).unwrap();
        assert_eq!(second.poll_event(), Some(ClientTransportEvent::Connected));
        drop(second);
        server.update(ms(2)).unwrap();
        assert!(matches!(
            server.poll_event(),
            Some(ServerTransportEvent::Disconnected {
                reason: TransportDisconnect::ByPeer,
                ..
            })
        ));
    }

    #[test]
    fn memory_transport_denies_when_full() {
        let mut server = MemoryServerTransport::with_limits(LinkConditioner::perfect(), 4, 100, 1);
        let mut first = server.network().connect(b"1");
        let mut second = server.network().connect(b"2");
        server.update(ms(0)).unwrap();
        assert!(matches!(
            server.poll_event(),
            Some(ServerTransportEvent::Connected { .. })
        ));
        assert_eq!(server.poll_event(), None);
        first.update(ms(0)).unwrap();
        second.update(ms(0)).unwrap();
        assert_eq!(first.poll_event(), Some(ClientTransportEvent::Connected));
        assert_eq!(
            second.poll_event(),
            Some(ClientTransportEvent::Disconnected(
                TransportDisconnect::Denied
            ))
        );
        assert_eq!(server.max_payload_bytes(), 100);
    }

    #[test]
    fn memory_transport_is_deterministic_and_conditionable() {
        let run = |seed| {
            let (mut server, mut client, id) = connected(LinkConditioner::bad(), seed);
            let mut got = Vec::new();
            for t in 0..300u64 {
                let now = ms(t * 10);
                if t == 200 {
                    assert!(
                        server
                            .network()
                            .set_client_conditioner(id, LinkConditioner::perfect())
                    );
                }
                server.update(now).unwrap();
                client.update(now).unwrap();
                client.send(&(t as u32).to_le_bytes()).unwrap();
                while let Some(ServerTransportEvent::Payload { payload, .. }) = server.poll_event()
                {
                    got.push(u32::from_le_bytes(payload.try_into().unwrap()));
                }
            }
            got
        };
        let a = run(5);
        assert_eq!(a, run(5));
        assert_ne!(a, run(6));
        // Lossy for the first 200 ticks, perfect afterwards.
        let early = a.iter().filter(|&&t| t < 190).count();
        assert!(early < 175, "{early}");
        assert!((200..299).all(|t| a.contains(&t)));
    }
}
