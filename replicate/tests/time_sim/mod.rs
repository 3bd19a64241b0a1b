//! The time tests' harness: one server and one client over the in-memory transport
//! with a seeded link simulator, on a simulated clock. The server ticks at its fixed
//! rate; the client renders frames at its own rate, not phase-locked to the server's.

#![allow(dead_code)]

use replicate::internals::link::LinkConditioner;
use replicate::transport::ClientId;
use replicate::transport::memory::{MemoryClientTransport, MemoryNetwork, MemoryServerTransport};
use replicate::{Client, ClientConfig, ProtocolRegistry, Server, ServerConfig};
use std::sync::Arc;
use std::time::Duration;

pub type MemServer = Server<MemoryServerTransport>;
pub type MemClient = Client<MemoryClientTransport>;

/// Milliseconds.
pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A link with `latency` plus up to `jitter` one way, and `loss`.
pub fn link(latency: u64, jitter: u64, loss: f32) -> LinkConditioner {
    LinkConditioner {
        latency: ms(latency),
        jitter: ms(jitter),
        loss,
        // Independent delays per packet, so the one-way delay spans the whole range
        // (packets overtaken by a newer one are dropped by the connection).
        jitter_reorders: true,
        ..LinkConditioner::perfect()
    }
}

/// 100 ms mean RTT with ±30 ms of jitter each way: one-way 20..=80 ms (mean 50).
pub fn rtt_100_jitter_30(loss: f32) -> LinkConditioner {
    link(20, 60, loss)
}

/// What is due next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// A server tick: run the game logic for `server.current_tick()`, then
    /// [`TimeSim::tick_server`].
    Server,
    /// A client frame: [`TimeSim::tick_client`], then read and render.
    Client,
}

pub struct TimeSim {
    pub server: MemServer,
    pub client: MemClient,
    pub network: MemoryNetwork,
    pub now: Duration,
    pub server_dt: Duration,
    pub client_dt: Duration,
    next_server: Duration,
    next_client: Duration,
    /// Simulated time of server tick 0.
    epoch: Option<Duration>,
}

impl TimeSim {
    pub fn new(conditioner: LinkConditioner, seed: u64) -> Self {
        Self::with_configs(
            conditioner,
            seed,
            ServerConfig::default(),
            ClientConfig::default(),
        )
    }

    pub fn with_configs(
        conditioner: LinkConditioner,
        seed: u64,
        server_config: ServerConfig,
        client_config: ClientConfig,
    ) -> Self {
        let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
        let transport = MemoryServerTransport::new(conditioner, seed);
        let network = transport.network();
        let rate = server_config.time.tick_rate;
        let server = Server::new(transport, registry.clone(), server_config).unwrap();
        let client = Client::new(network.connect(&[]), registry, client_config).unwrap();
        Self {
            server,
            client,
            network,
            now: Duration::ZERO,
            server_dt: Duration::from_secs(1) / rate,
            // About 61 frames per second: not locked to the server's ticks.
            client_dt: Duration::from_micros(16_400),
            next_server: Duration::ZERO,
            next_client: Duration::from_micros(3_100),
            epoch: None,
        }
    }

    /// Advances the clock to the next server tick or client frame.
    pub fn advance(&mut self) -> Due {
        if self.next_server <= self.next_client {
            self.now = self.next_server;
            Due::Server
        } else {
            self.now = self.next_client;
            Due::Client
        }
    }

    pub fn tick_server(&mut self) {
        if self.epoch.is_none() {
            self.epoch = Some(self.now);
        }
        self.server.tick(self.now).unwrap();
        let _ = self.server.events();
        self.next_server += self.server_dt;
    }

    pub fn tick_client(&mut self) {
        self.client.tick(self.now).unwrap();
        self.next_client += self.client_dt;
    }

    /// The server's true time now (tick `n` is `n * server_dt`), in seconds.
    pub fn true_server_time(&self) -> f64 {
        (self.now - self.epoch.unwrap_or_default()).as_secs_f64()
    }

    /// The connected client's id on the server.
    pub fn client_id(&self) -> Option<ClientId> {
        self.server.clients().next()
    }

    /// Runs plain ticks and frames until `until` (nothing else happens).
    pub fn run_until(&mut self, until: Duration) {
        while self.now < until {
            match self.advance() {
                Due::Server => self.tick_server(),
                Due::Client => {
                    self.tick_client();
                    let _ = self.client.events();
                }
            }
        }
    }
}

/// The `q`-quantile of `values` (sorted in place).
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        return f64::NAN;
    }
    let i = ((values.len() - 1) as f64 * q).round() as usize;
    values[i]
}
