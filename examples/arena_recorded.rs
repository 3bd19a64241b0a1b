//! The S1 arena on the in-memory transport with a simulated clock, recorded as a
//! network-insights session: deterministic and fast, for the insights tests and the
//! report's examples (the UDP demo records with `cargo run --example arena -- --record PATH`).

use crate::arena_world::{ArenaWorld, Player, Projectile, Vehicle};
use replicate::insights::AttributionLevel;
use replicate::internals::link::LinkConditioner;
use replicate::transport::memory::{MemoryClientTransport, MemoryServerTransport};
use replicate::{
    Client, ClientConfig, DeliveryMode, FacadeError, ProtocolRegistry, Replicated, Server,
    ServerConfig, ServerEvent,
};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A chat line broadcast now and then, so the message stream carries data too.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "arena::Announcement")]
pub struct Announcement {
    /// What happened.
    #[net(bits = 6)]
    pub kind: u8,
    /// Free text.
    #[net(max_len = 32)]
    pub text: String,
}

/// A recorded in-memory session.
#[derive(Debug, Clone)]
pub struct RecordedArena {
    /// Clients.
    pub clients: usize,
    /// Simulated seconds the world moves.
    pub seconds: u32,
    /// Server ticks per second.
    pub tick_rate: u32,
    /// Players, projectiles, vehicles.
    pub counts: (usize, usize, usize),
    /// Both directions of every client's link.
    pub conditioner: LinkConditioner,
    /// How finely packets are split.
    pub level: AttributionLevel,
    /// World and link seed.
    pub seed: u64,
}

impl Default for RecordedArena {
    fn default() -> Self {
        Self {
            clients: 4,
            seconds: 3,
            tick_rate: 30,
            counts: (32, 50, 8),
            conditioner: LinkConditioner {
                latency: Duration::from_millis(30),
                jitter: Duration::from_millis(10),
                loss: 0.03,
                ..LinkConditioner::perfect()
            },
            level: AttributionLevel::Members,
            seed: 7,
        }
    }
}

/// A `Write` into shared memory (the session file, in memory).
#[derive(Debug, Clone, Default)]
pub struct SharedBuffer(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut v) => v.extend_from_slice(buf),
            Err(p) => p.into_inner().extend_from_slice(buf),
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the run ends with: the server (for its statistics) and the session bytes.
pub struct RecordedRun {
    /// The server after the run (recording flushed).
    pub server: Server<MemoryServerTransport>,
    /// The clients.
    pub clients: Vec<Client<MemoryClientTransport>>,
    /// The session file's bytes.
    pub session: Vec<u8>,
}

impl RecordedArena {
    /// Runs the arena for `seconds` of simulated time, then one more second without
    /// motion, recording every packet the server sends.
    pub fn run(&self) -> Result<RecordedRun, FacadeError> {
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        let transport = MemoryServerTransport::new(self.conditioner.clone(), self.seed);
        let network = transport.network();
        let mut server = Server::new(transport, registry.clone(), ServerConfig::default())?;
        let buffer = SharedBuffer::default();
        server.start_insights(self.level, Some(Box::new(buffer.clone())));
        let (np, npr, nv) = self.counts;
        let mut world = ArenaWorld::with_counts(self.seed, np, npr, nv);
        let err = |e: replicate::ObjectError| FacadeError::Config(e.to_string());
        let players = world
            .players
            .iter()
            .map(|p| server.spawn(p.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let mut projectiles = world
            .projectiles
            .iter()
            .map(|p| server.spawn(p.state.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let vehicles = world
            .vehicles
            .iter()
            .map(|v| server.spawn(v.state.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let mut clients = (0..self.clients)
            .map(|_| {
                Client::new(
                    network.connect(&[]),
                    registry.clone(),
                    ClientConfig::default(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let dt = Duration::from_secs(1) / self.tick_rate.max(1);
        let ticks = (self.seconds + 1) * self.tick_rate;
        let moving = self.seconds * self.tick_rate;
        let mut now = Duration::ZERO;
        for tick in 0..ticks {
            now += dt;
            if tick < moving {
                let events = world.step(dt.as_secs_f32());
                for &i in &events.respawned_projectiles {
                    let _ = server.destroy(projectiles[i]);
                    if let Ok(h) = server.spawn(world.projectiles[i].state.clone()) {
                        projectiles[i] = h;
                    }
                }
                for (p, &h) in world.players.iter().zip(&players) {
                    if let Some(o) = server.get_mut::<Player>(h) {
                        o.clone_from(p);
                    }
                }
                for (p, &h) in world.projectiles.iter().zip(&projectiles) {
                    if let Some(o) = server.get_mut::<Projectile>(h) {
                        o.clone_from(&p.state);
                    }
                }
                for (v, &h) in world.vehicles.iter().zip(&vehicles) {
                    if let Some(o) = server.get_mut::<Vehicle>(h) {
                        o.clone_from(&v.state);
                    }
                }
                if tick % self.tick_rate == self.tick_rate / 2 {
                    let _ = server.broadcast_message(
                        &Announcement {
                            kind: (tick % 64) as u8,
                            text: format!("tick {tick}"),
                        },
                        DeliveryMode::ReliableOrdered,
                    );
                }
            }
            server.tick(now)?;
            for event in server.events().collect::<Vec<_>>() {
                if let ServerEvent::ClientConnected { client, .. } = event
                    && let Some(&h) = players.get(client as usize)
                {
                    let _ = server.set_owner(h, Some(client), true);
                }
            }
            for c in &mut clients {
                c.tick(now)?;
                let _ = c.events().count();
                let _ = c.receive_messages();
            }
        }
        server.flush_recording();
        let session = match buffer.0.lock() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        };
        Ok(RecordedRun {
            server,
            clients,
            session,
        })
    }
}
