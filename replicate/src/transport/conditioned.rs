//! A link conditioner around any transport: [`ConditionedServer`] and
//! [`ConditionedClient`] pass every payload, in both directions, through a
//! [`LinkSimulator`], so a real UDP session can be given latency, jitter, loss,
//! duplication and reordering. Because it sits above the transport's own integrity
//! check, its [`corrupt`](LinkConditioner::corrupt) probability (seeded, off by
//! default) hands replication payloads with a flipped bit even over netcode.io: the
//! way to test a session against a transport that breaks the
//! [integrity contract](super#the-integrity-contract).
//!
//! ```no_run
//! use replicate::transport::LinkConditioner;
//! use replicate::transport::conditioned::ConditionedServer;
//! use replicate::transport::udp::{ConnectTokenIssuer, UdpServerConfig, UdpServerTransport};
//! let issuer = ConnectTokenIssuer::with_random_key(1);
//! let udp = UdpServerTransport::bind("127.0.0.1:0", UdpServerConfig::secure(&issuer, 8)).unwrap();
//! let server = ConditionedServer::new(udp, LinkConditioner::bad(), 42);
//! ```

use super::{
    ClientId, ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
    TransportError,
};
use crate::link::{LinkConditioner, LinkSimulator};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

#[derive(Debug)]
struct Links {
    outgoing: LinkSimulator,
    incoming: LinkSimulator,
}

impl Links {
    fn new(conditioner: &LinkConditioner, seed: u64) -> Self {
        Self {
            outgoing: LinkSimulator::new(conditioner.clone(), seed),
            incoming: LinkSimulator::new(conditioner.clone(), seed ^ 0xA5A5_A5A5_A5A5_A5A5),
        }
    }
}

/// A server transport whose payloads cross a simulated link.
#[derive(Debug)]
pub struct ConditionedServer<T> {
    inner: T,
    conditioner: LinkConditioner,
    seed: u64,
    links: BTreeMap<ClientId, Links>,
    events: VecDeque<ServerTransportEvent>,
    now: Duration,
}

impl<T: ServerTransport> ConditionedServer<T> {
    /// Wraps `inner`; each client's links are seeded from `seed` and its id.
    pub fn new(inner: T, conditioner: LinkConditioner, seed: u64) -> Self {
        Self {
            inner,
            conditioner,
            seed,
            links: BTreeMap::new(),
            events: VecDeque::new(),
            now: Duration::ZERO,
        }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn links(&mut self, client: ClientId) -> &mut Links {
        let (conditioner, seed) = (
            &self.conditioner,
            self.seed ^ client.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        self.links
            .entry(client)
            .or_insert_with(|| Links::new(conditioner, seed))
    }
}

impl<T: ServerTransport> ServerTransport for ConditionedServer<T> {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.now = now;
        let ids: Vec<ClientId> = self.links.keys().copied().collect();
        for id in ids {
            let due: Vec<Vec<u8>> = self.links(id).outgoing.drain(now).collect();
            for payload in due {
                // The client may have left meanwhile: the packet is lost, as on a wire.
                let _ = self.inner.send(id, &payload);
            }
        }
        self.inner.update(now)?;
        while let Some(event) = self.inner.poll_event() {
            match event {
                ServerTransportEvent::Payload { client, payload } => {
                    self.links(client).incoming.send(now, &payload)
                }
                ServerTransportEvent::Disconnected { client, reason } => {
                    self.links.remove(&client);
                    self.events
                        .push_back(ServerTransportEvent::Disconnected { client, reason });
                }
                other => self.events.push_back(other),
            }
        }
        for (&client, links) in self.links.iter_mut() {
            while let Some(payload) = links.incoming.receive(now) {
                self.events
                    .push_back(ServerTransportEvent::Payload { client, payload });
            }
        }
        Ok(())
    }

    fn poll_event(&mut self) -> Option<ServerTransportEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, client: ClientId, payload: &[u8]) -> Result<(), TransportError> {
        let max = self.inner.max_payload_bytes();
        if payload.len() > max {
            return Err(TransportError::PayloadTooLarge {
                len: payload.len(),
                max,
            });
        }
        let now = self.now;
        let links = self.links(client);
        links.outgoing.send(now, payload);
        // What is due already (a link without delay) leaves now, not one update later.
        let due: Vec<Vec<u8>> = links.outgoing.drain(now).collect();
        for payload in due {
            let _ = self.inner.send(client, &payload);
        }
        Ok(())
    }

    fn disconnect(&mut self, client: ClientId) {
        self.links.remove(&client);
        self.inner.disconnect(client);
    }

    fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload_bytes()
    }
}

/// A client transport whose payloads cross a simulated link.
#[derive(Debug)]
pub struct ConditionedClient<T> {
    inner: T,
    links: Links,
    events: VecDeque<ClientTransportEvent>,
    now: Duration,
}

impl<T: ClientTransport> ConditionedClient<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, conditioner: LinkConditioner, seed: u64) -> Self {
        Self {
            inner,
            links: Links::new(&conditioner, seed),
            events: VecDeque::new(),
            now: Duration::ZERO,
        }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T: ClientTransport> ClientTransport for ConditionedClient<T> {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.now = now;
        let due: Vec<Vec<u8>> = self.links.outgoing.drain(now).collect();
        for payload in due {
            let _ = self.inner.send(&payload);
        }
        self.inner.update(now)?;
        while let Some(event) = self.inner.poll_event() {
            match event {
                ClientTransportEvent::Payload(payload) => self.links.incoming.send(now, &payload),
                other => self.events.push_back(other),
            }
        }
        while let Some(payload) = self.links.incoming.receive(now) {
            self.events
                .push_back(ClientTransportEvent::Payload(payload));
        }
        Ok(())
    }

    fn poll_event(&mut self) -> Option<ClientTransportEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), TransportError> {
        let max = self.inner.max_payload_bytes();
        if payload.len() > max {
            return Err(TransportError::PayloadTooLarge {
                len: payload.len(),
                max,
            });
        }
        if !self.inner.is_connected() {
            return Err(TransportError::NotConnected);
        }
        self.links.outgoing.send(self.now, payload);
        // What is due already (a link without delay) leaves now, not one update later.
        let due: Vec<Vec<u8>> = self.links.outgoing.drain(self.now).collect();
        for payload in due {
            let _ = self.inner.send(&payload);
        }
        Ok(())
    }

    fn disconnect(&mut self) {
        self.inner.disconnect();
    }

    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }

    fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::memory::MemoryServerTransport;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn latency_applies_in_both_directions() {
        let slow = LinkConditioner {
            latency: ms(50),
            ..LinkConditioner::perfect()
        };
        let inner = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
        let net = inner.network();
        let mut server = ConditionedServer::new(inner, slow.clone(), 9);
        let mut client = ConditionedClient::new(net.connect(b""), slow, 10);
        for t in [0, 1, 2] {
            server.update(ms(t)).unwrap();
            client.update(ms(t)).unwrap();
        }
        let id = loop {
            match server.poll_event() {
                Some(ServerTransportEvent::Connected { client, .. }) => break client,
                Some(_) => continue,
                None => panic!("client never connected"),
            }
        };
        while client.poll_event().is_some() {}
        client.send(b"up").unwrap();
        server.send(id, b"down").unwrap();
        let mut up_at = None;
        let mut down_at = None;
        for t in 3..200 {
            server.update(ms(t)).unwrap();
            client.update(ms(t)).unwrap();
            while let Some(e) = server.poll_event() {
                if let ServerTransportEvent::Payload { payload, .. } = e {
                    assert_eq!(payload, b"up");
                    up_at.get_or_insert(t);
                }
            }
            while let Some(e) = client.poll_event() {
                if let ClientTransportEvent::Payload(p) = e {
                    assert_eq!(p, b"down");
                    down_at.get_or_insert(t);
                }
            }
        }
        // Each payload crosses the outgoing and the incoming simulated link: 100 ms
        // (plus one tick upstream, since the server updates before the client).
        assert_eq!(up_at, Some(103));
        assert_eq!(down_at, Some(102));
    }

    #[test]
    fn a_link_without_delay_adds_no_update_of_latency() {
        let inner = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
        let net = inner.network();
        let mut server = ConditionedServer::new(inner, LinkConditioner::perfect(), 9);
        let mut client = ConditionedClient::new(net.connect(b""), LinkConditioner::perfect(), 10);
        server.update(ms(0)).unwrap();
        client.update(ms(0)).unwrap();
        let id = loop {
            match server.poll_event() {
                Some(ServerTransportEvent::Connected { client, .. }) => break client,
                Some(_) => continue,
                None => panic!("client never connected"),
            }
        };
        while client.poll_event().is_some() {}
        // Sent after the server's update at t = 1: the client has it at t = 1.
        server.update(ms(1)).unwrap();
        server.send(id, b"down").unwrap();
        client.update(ms(1)).unwrap();
        assert_eq!(
            client.poll_event(),
            Some(ClientTransportEvent::Payload(b"down".to_vec()))
        );
        client.send(b"up").unwrap();
        server.update(ms(1)).unwrap();
        assert!(matches!(
            server.poll_event(),
            Some(ServerTransportEvent::Payload { payload, .. }) if payload == b"up"
        ));
    }

    #[test]
    fn total_loss_delivers_nothing() {
        let lossy = LinkConditioner {
            loss: 1.0,
            ..LinkConditioner::perfect()
        };
        let inner = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
        let net = inner.network();
        let mut server = ConditionedServer::new(inner, lossy.clone(), 3);
        let mut client = ConditionedClient::new(net.connect(b""), lossy, 4);
        for t in 0..50 {
            server.update(ms(t)).unwrap();
            client.update(ms(t)).unwrap();
            if client.is_connected() {
                client.send(b"x").unwrap();
            }
            while let Some(e) = server.poll_event() {
                assert!(
                    !matches!(e, ServerTransportEvent::Payload { .. }),
                    "a payload got through"
                );
            }
        }
        assert!(client.is_connected());
    }
}
