//! The `robustness_*` suites: the facade ([`Server`] / [`Client`]) over the in-memory
//! transport with a simulated clock, a world whose every member keeps changing, a large
//! message type for floods, a client transport that can stop sending replication
//! packets, and a `tracing` subscriber that counts log lines.

use replicate::internals::link::LinkConditioner;
use replicate::internals::protocol::{ProtocolRegistry, Registration};
use replicate::transport::memory::{MemoryClientTransport, MemoryNetwork, MemoryServerTransport};
use replicate::transport::{ClientTransport, ClientTransportEvent, TransportError};
use replicate::{Client, ClientConfig, Replicated, Server, ServerConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A moving object: every member changes often, so a value corrupted on the way is
/// overwritten soon (what is checked is that nothing stays wrong for good).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
pub struct Mover {
    #[net(min = -100.0, max = 100.0, precision = 0.01)]
    pub position: glam::Vec3,
    #[net(bits = 10)]
    pub hp: u16,
    pub label: u32,
}

/// A message of up to 8 KiB (a flood's payload).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
pub struct Bulk {
    pub seq: u32,
    #[net(max_len = 8000)]
    pub data: Vec<u8>,
}

pub fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(
        ProtocolRegistry::from_registrations([
            Registration::of::<Mover>(),
            Registration::of::<Bulk>(),
        ])
        .expect("registry"),
    )
}

pub const TICK: Duration = Duration::from_millis(33);

pub type MemServer = Server<MemoryServerTransport>;

/// A client transport that forwards everything, except that while `mute` is set it
/// drops every replication packet it is asked to send (control frames still go): a
/// client whose replication stopped while its transport stays connected, as netcode.io
/// keep-alives keep a UDP connection open.
///
/// It also records every event it hands the client and every payload it sends
/// (`events`, `sent`), and hands
/// the client the payloads pushed into `inject` as if they came from the server.
pub struct Mutable {
    pub inner: MemoryClientTransport,
    pub mute: Arc<AtomicBool>,
    pub events: Vec<ClientTransportEvent>,
    pub sent: Vec<Vec<u8>>,
    pub inject: std::collections::VecDeque<Vec<u8>>,
    /// Whether `received` and `sent` record (off by default: the memory tests count
    /// the whole heap).
    pub record: bool,
}

impl ClientTransport for Mutable {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.inner.update(now)
    }
    fn poll_event(&mut self) -> Option<ClientTransportEvent> {
        if self.inner.is_connected()
            && let Some(p) = self.inject.pop_front()
        {
            return Some(ClientTransportEvent::Payload(p));
        }
        let event = self.inner.poll_event();
        if let Some(e) = &event
            && self.record
        {
            self.events.push(e.clone());
        }
        event
    }
    fn send(&mut self, payload: &[u8]) -> Result<(), TransportError> {
        if self.mute.load(Ordering::Relaxed)
            && payload.first() != Some(&replicate::internals::facade::CONTROL_TAG)
        {
            return Ok(());
        }
        if self.record {
            self.sent.push(payload.to_vec());
        }
        self.inner.send(payload)
    }
    fn disconnect(&mut self) {
        self.inner.disconnect()
    }
    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }
    fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload_bytes()
    }
}

pub type MemClient = Client<Mutable>;

/// A server over a fresh in-memory network (up to 16 clients).
pub fn server(
    conditioner: LinkConditioner,
    seed: u64,
    config: ServerConfig,
) -> (MemServer, MemoryNetwork) {
    let transport = MemoryServerTransport::new(conditioner, seed);
    let network = transport.network();
    (
        Server::new(transport, registry(), config).expect("server"),
        network,
    )
}

/// A client on `network`, with the switch that mutes its replication packets.
pub fn client(network: &MemoryNetwork, config: ClientConfig) -> (MemClient, Arc<AtomicBool>) {
    let mute = Arc::new(AtomicBool::new(false));
    let transport = Mutable {
        inner: network.connect(&[]),
        mute: mute.clone(),
        events: Vec::new(),
        sent: Vec::new(),
        inject: Default::default(),
        record: false,
    };
    (
        Client::new(transport, registry(), config).expect("client"),
        mute,
    )
}

/// Whether the client holds exactly the server's objects with equal quantized states.
pub fn converged(server: &MemServer, client: &MemClient) -> bool {
    client.is_connected()
        && client.object_count() == server.objects().len()
        && server.objects().handles_iter().all(|h| {
            match (server.objects().state(h), client.world().object(h)) {
                (Some(ours), Some(theirs)) => ours.eq_dyn(theirs.state()),
                _ => false,
            }
        })
}

/// Moves every mover a little (all members change within a few ticks).
pub fn animate(server: &mut MemServer, movers: &[replicate::NetRefHandle], tick: u64) {
    for (i, &h) in movers.iter().enumerate() {
        if let Some(m) = server.get_mut::<Mover>(h) {
            let t = tick as f32 * 0.05 + i as f32;
            m.position = glam::Vec3::new(t.sin() * 90.0, t.cos() * 90.0, (t * 0.5).sin() * 10.0);
            if (tick + i as u64) % 5 == 0 {
                m.hp = (m.hp + 7) % 1000;
                m.label = m.label.wrapping_add(1);
            }
        }
    }
}

/// A `tracing` subscriber that counts the events (log lines) at DEBUG and above.
#[derive(Default)]
pub struct LineCounter {
    pub lines: AtomicU64,
    pub warnings: AtomicU64,
}

pub struct CountingSubscriber(pub Arc<LineCounter>);

impl tracing::Subscriber for CountingSubscriber {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::DEBUG
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        self.0.lines.fetch_add(1, Ordering::Relaxed);
        if *event.metadata().level() <= tracing::Level::WARN {
            self.0.warnings.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
