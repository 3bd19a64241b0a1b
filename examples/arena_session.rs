//! An arena session over real UDP: a [`Server`] simulating the S1 [`ArenaWorld`] and N
//! headless bot [`Client`]s on localhost, every packet secured by netcode.io and passed
//! through a link conditioner on the server. Shared by the `arena` demo and the facade
//! integration test, so both run exactly the same thing.
//!
//! A session runs the simulation for [`SessionConfig::run_for`], then stops changing
//! the world and keeps ticking until every client's objects equal the server's
//! (converged) or [`SessionConfig::settle_timeout`] passes.

use crate::arena_world::{
    ArenaWorld, Avatar, AvatarInput, Player, Projectile, Vehicle, step_avatar,
};
use replicate::internals::protocol::ErasedState;
use replicate::time::{Predictor, SampleKind, StateHistory};
use replicate::transport::ClientId;
use replicate::transport::LinkConditioner;
use replicate::transport::conditioned::ConditionedServer;
use replicate::transport::udp::{
    ConnectTokenIssuer, UdpClientTransport, UdpServerConfig, UdpServerTransport,
};
use replicate::{
    Client, ClientConfig, ClientEvent, DisconnectReason, FacadeError, Handle, ProtocolRegistry,
    Replicated, Server, ServerConfig, ServerEvent,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The netcode protocol id of the arena (both ends must agree).
pub const ARENA_PROTOCOL_ID: u64 = 0xA7E7_A000_0000_0001;

/// How a session runs.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Number of bot clients.
    pub clients: usize,
    /// How long the world moves.
    pub run_for: Duration,
    /// How long to wait for convergence after the world stopped.
    pub settle_timeout: Duration,
    /// Simulation and network ticks per second.
    pub tick_rate: u32,
    /// Applied on the server to every client's link, both directions.
    pub conditioner: LinkConditioner,
    /// Seed of the world and of the link simulators.
    pub seed: u64,
    /// Players, projectiles, vehicles.
    pub counts: (usize, usize, usize),
    /// Seconds of silence after which netcode drops a connection.
    pub timeout_seconds: i32,
    /// Delta compression against acknowledged baselines (default on).
    pub delta: bool,
    /// Client 1 interpolates the players (snapshot interpolation) and the session
    /// measures the presented positions against the server's history.
    pub interpolate: bool,
    /// Client 1 controls an [`Avatar`] with inputs and predicts it.
    pub predict: bool,
    /// Record the session (network insights, every packet split down to members)
    /// into this file (default none).
    pub record: Option<std::path::PathBuf>,
}

impl SessionConfig {
    /// The S1 arena (32 players, 50 projectiles, 8 vehicles) at 30 Hz for 10 s.
    pub fn s1(clients: usize) -> Self {
        Self {
            clients,
            run_for: Duration::from_secs(10),
            settle_timeout: Duration::from_secs(30),
            tick_rate: 30,
            conditioner: LinkConditioner::perfect(),
            seed: 1,
            counts: (32, 50, 8),
            timeout_seconds: 10,
            delta: true,
            interpolate: false,
            predict: false,
            record: None,
        }
    }
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPhase {
    /// The world moves.
    Running,
    /// The world stopped; waiting for every client to converge.
    Settling,
    /// Every client converged, or the settle timeout passed.
    Done,
}

/// One headless bot client.
#[derive(Debug)]
pub struct Bot {
    /// Its netcode client id.
    pub id: ClientId,
    /// The client.
    pub client: Client,
    /// Objects spawned on it so far.
    pub spawned: u64,
    /// Objects destroyed on it so far.
    pub destroyed: u64,
    /// Change events so far.
    pub changes: u64,
    /// Whether its objects equalled the server's at the last check.
    pub converged: bool,
    /// Why it disconnected, if it did.
    pub disconnected: Option<DisconnectReason>,
}

/// One row of the end-of-session summary.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientReport {
    /// The client id.
    pub id: ClientId,
    /// Objects on the client at the end.
    pub objects: usize,
    /// Average server-to-client payload bytes per second over the session.
    pub down_bytes_per_sec: f64,
    /// Average client-to-server payload bytes per second over the session.
    pub up_bytes_per_sec: f64,
    /// Smoothed RTT seen by the server.
    pub rtt: Duration,
    /// Packets the server declared lost / packets it sent.
    pub loss: f64,
    /// Whether the client converged.
    pub converged: bool,
}

/// A running arena session.
pub struct Session {
    /// The server (its transport is UDP behind a link conditioner).
    pub server: Server<ConditionedServer<UdpServerTransport>>,
    /// The bots.
    pub bots: Vec<Bot>,
    world: ArenaWorld,
    players: Vec<Handle<Player>>,
    projectiles: Vec<Handle<Projectile>>,
    vehicles: Vec<Handle<Vehicle>>,
    config: SessionConfig,
    start: Instant,
    ticks: u64,
    phase: SessionPhase,
    settle_started: Option<Duration>,
    last_check: Duration,
    /// Server events seen (connects, disconnects, refusals).
    pub server_events: Vec<ServerEvent>,
    /// What the time model measured on client 1.
    pub time: TimeFigures,
    history: StateHistory<glam::Vec3>,
    avatar: Option<Handle<Avatar>>,
    predictor: Option<Predictor<Avatar, AvatarInput>>,
    next_input: Option<u32>,
}

/// The time model as client 1 saw it (see `--interpolate` and `--predict`).
#[derive(Debug, Clone, Default)]
pub struct TimeFigures {
    /// Clock-synchronisation errors (seconds), one per frame once synchronised.
    pub clock_errors: Vec<f64>,
    /// Player positions presented by interpolation.
    pub interpolated: u64,
    /// Of those, extrapolated past the newest state (data late).
    pub extrapolated: u64,
    /// Frames where a player had no fresh value (stalled or none).
    pub stalls: u64,
    /// Sum of the distances between presented positions and the server's positions at
    /// the same server time (metres).
    pub error_sum: f64,
    /// Error samples in `error_sum`.
    pub error_samples: u64,
    /// The interpolation delay at the end.
    pub delay: Option<Duration>,
    /// Authoritative avatar states compared with the prediction.
    pub reconciled: u64,
    /// Predictions the server's state corrected.
    pub corrections: u64,
    /// Tick field bits per packet to client 1.
    pub tick_bits_per_packet: f64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("phase", &self.phase)
            .field("ticks", &self.ticks)
            .finish()
    }
}

impl Session {
    /// Binds the server on 127.0.0.1, spawns the world and connects the bots.
    pub fn start(config: SessionConfig) -> Result<Self, FacadeError> {
        let issuer = ConnectTokenIssuer::with_random_key(ARENA_PROTOCOL_ID);
        let udp = UdpServerTransport::bind(
            "127.0.0.1:0",
            UdpServerConfig::secure(&issuer, config.clients.clamp(1, 1024)),
        )?;
        let addr = udp.local_addr();
        let transport = ConditionedServer::new(udp, config.conditioner.clone(), config.seed);
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        let mut server_config = ServerConfig::default();
        server_config.replication.delta.enabled = config.delta;
        if config.record.is_some() {
            server_config.record = config.record.clone();
            server_config.attribution = replicate::insights::AttributionLevel::Members;
        }
        let mut server = Server::new(transport, registry.clone(), server_config)?;
        let (np, npr, nv) = config.counts;
        let world = ArenaWorld::with_counts(config.seed, np, npr, nv);
        let spawn_err = |e: replicate::ObjectError| FacadeError::Config(e.to_string());
        let players = world
            .players
            .iter()
            .map(|p| server.spawn(p.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(spawn_err)?;
        let projectiles = world
            .projectiles
            .iter()
            .map(|p| server.spawn(p.state.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(spawn_err)?;
        let vehicles = world
            .vehicles
            .iter()
            .map(|v| server.spawn(v.state.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(spawn_err)?;
        let avatar = if config.predict {
            Some(server.spawn(Avatar::default()).map_err(spawn_err)?)
        } else {
            None
        };
        let mut bots = Vec::with_capacity(config.clients);
        for i in 0..config.clients {
            let id = i as ClientId + 1;
            let token = issuer.issue(id, vec![addr], 120, config.timeout_seconds)?;
            let transport = UdpClientTransport::connect("127.0.0.1:0", token)?;
            let mut client = Client::new(transport, registry.clone(), ClientConfig::default())?;
            if i == 0 && config.interpolate {
                client.interpolate::<Player>();
            }
            bots.push(Bot {
                id,
                client,
                spawned: 0,
                destroyed: 0,
                changes: 0,
                converged: false,
                disconnected: None,
            });
        }
        Ok(Self {
            server,
            bots,
            world,
            players,
            projectiles,
            vehicles,
            config,
            start: Instant::now(),
            ticks: 0,
            phase: SessionPhase::Running,
            settle_started: None,
            last_check: Duration::ZERO,
            server_events: Vec::new(),
            time: TimeFigures::default(),
            history: StateHistory::new(64),
            avatar,
            predictor: None,
            next_input: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Where the session is.
    pub fn phase(&self) -> SessionPhase {
        self.phase
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Ticks run so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Objects on the server.
    pub fn server_objects(&self) -> usize {
        self.server.objects().len()
    }

    /// Whether every bot converged.
    pub fn all_converged(&self) -> bool {
        self.bots.iter().all(|b| b.converged)
    }

    /// Runs one tick (sleeping until it is due) and returns the phase after it.
    pub fn tick(&mut self) -> Result<SessionPhase, FacadeError> {
        if self.phase == SessionPhase::Done {
            return Ok(SessionPhase::Done);
        }
        let dt = Duration::from_secs(1) / self.config.tick_rate.max(1);
        let due = dt * self.ticks as u32;
        let elapsed = self.start.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        let now = self.start.elapsed();
        self.ticks += 1;
        if self.phase == SessionPhase::Running {
            self.step_world(dt.as_secs_f32());
        }
        self.step_avatar();
        let tick = self.server.current_tick();
        if self.config.interpolate {
            for &h in &self.players {
                if let Some(p) = self.server.get::<Player>(h) {
                    self.history.record(tick, h.raw(), p.position);
                }
            }
        }
        self.server.tick(now)?;
        for event in self.server.events().collect::<Vec<_>>() {
            if let ServerEvent::ClientConnected { client, .. } = event {
                // Client n owns player n - 1: it alone sees that player's ammo.
                if let Some(&h) = (client as usize)
                    .checked_sub(1)
                    .and_then(|i| self.players.get(i))
                {
                    let _ = self.server.set_owner(h, Some(client), true);
                }
            }
            self.server_events.push(event);
        }
        for (i, bot) in self.bots.iter_mut().enumerate() {
            bot.client.tick(now)?;
            for event in bot.client.events() {
                match event {
                    ClientEvent::Spawned { handle, .. } => {
                        bot.spawned += 1;
                        if i == 0 && self.avatar.is_some_and(|a| a == handle) {
                            let start = bot
                                .client
                                .get::<Avatar>(handle)
                                .cloned()
                                .unwrap_or_default();
                            self.predictor = Some(Predictor::new(start, step_avatar));
                        }
                    }
                    ClientEvent::Destroyed { .. } => bot.destroyed += 1,
                    ClientEvent::Changed { handle, .. } => {
                        bot.changes += 1;
                        if i == 0
                            && self.avatar.is_some_and(|a| a == handle)
                            && let (Some(p), Some(tick), Some(state)) = (
                                self.predictor.as_mut(),
                                bot.client.object_tick(handle),
                                bot.client.get::<Avatar>(handle),
                            )
                        {
                            self.time.reconciled += 1;
                            if p.reconcile(tick, state) {
                                self.time.corrections += 1;
                            }
                        }
                    }
                    ClientEvent::Disconnected { reason } => bot.disconnected = Some(reason),
                    _ => {}
                }
            }
        }
        self.measure_time(tick, dt);
        match self.phase {
            SessionPhase::Running if now >= self.config.run_for => {
                self.phase = SessionPhase::Settling;
                self.settle_started = Some(now);
            }
            SessionPhase::Settling => {
                if now.saturating_sub(self.last_check) >= Duration::from_millis(200) {
                    self.last_check = now;
                    self.check_convergence();
                }
                let started = self.settle_started.unwrap_or(now);
                if self.all_converged() || now.saturating_sub(started) >= self.config.settle_timeout
                {
                    self.phase = SessionPhase::Done;
                }
            }
            _ => {}
        }
        Ok(self.phase)
    }

    /// The server steps the avatar with client 1's input for this tick (the last one
    /// repeated when it is missing).
    fn step_avatar(&mut self) {
        let (Some(h), Some(bot)) = (self.avatar, self.bots.first()) else {
            return;
        };
        let tick = self.server.current_tick();
        if let Some(input) = self.server.take_input::<AvatarInput>(bot.id, tick)
            && let Some(a) = self.server.get_mut::<Avatar>(h)
        {
            step_avatar(a, &input);
        }
    }

    /// Client 1's frame of the time model: clock error, interpolated players against
    /// the server's history, predicted avatar inputs.
    fn measure_time(&mut self, server_tick: u32, dt: Duration) {
        let Some(bot) = self.bots.first_mut() else {
            return;
        };
        let tick_seconds = dt.as_secs_f64();
        if let Some(est) = bot.client.estimated_server_time() {
            // Server and client share this process's clock: the server just sent
            // `server_tick` at this instant.
            let truth = f64::from(server_tick) * tick_seconds;
            self.time
                .clock_errors
                .push((est.as_secs_f64() - truth).abs());
        }
        if self.config.interpolate {
            let at = bot
                .client
                .interpolation_time()
                .map(|t| t.as_secs_f64() / tick_seconds);
            for &h in &self.players {
                match bot.client.interpolated::<Player>(h) {
                    Some(s) if s.kind != SampleKind::Stalled => {
                        self.time.interpolated += 1;
                        if s.kind == SampleKind::Extrapolated {
                            self.time.extrapolated += 1;
                        }
                        if let Some(truth) = at.and_then(|at| self.history.at_time(h.raw(), at))
                            && s.kind != SampleKind::Snapped
                        {
                            self.time.error_sum += f64::from(s.value.position.distance(truth));
                            self.time.error_samples += 1;
                        }
                    }
                    _ if bot.client.get::<Player>(h).is_some() => {
                        self.time.stalls += 1;
                    }
                    _ => {}
                }
            }
            self.time.delay = bot.client.interpolation_delay();
        }
        if let Some(p) = self.predictor.as_mut()
            && let Some(target) = bot.client.input_tick()
        {
            let next = self.next_input.get_or_insert(target);
            while *next <= target {
                let input = AvatarInput::scripted(*next);
                bot.client.send_input(*next, &input);
                p.predict(*next, input);
                *next += 1;
            }
        }
        if let Some((bits, _, packets)) = self.server.time_bits(bot.id) {
            self.time.tick_bits_per_packet = bits as f64 / packets.max(1) as f64;
        }
    }

    fn step_world(&mut self, dt: f32) {
        let events = self.world.step(dt);
        for &i in &events.respawned_projectiles {
            // A respawn is a new projectile: destroy the old object, spawn a new one.
            let _ = self.server.destroy(self.projectiles[i]);
            if let Ok(h) = self.server.spawn(self.world.projectiles[i].state.clone()) {
                self.projectiles[i] = h;
            }
        }
        for (p, &h) in self.world.players.iter().zip(&self.players) {
            if let Some(o) = self.server.get_mut::<Player>(h) {
                o.clone_from(p);
            }
        }
        for (p, &h) in self.world.projectiles.iter().zip(&self.projectiles) {
            if let Some(o) = self.server.get_mut::<Projectile>(h) {
                o.clone_from(&p.state);
            }
        }
        for (v, &h) in self.world.vehicles.iter().zip(&self.vehicles) {
            if let Some(o) = self.server.get_mut::<Vehicle>(h) {
                o.clone_from(&v.state);
            }
        }
    }

    /// Compares every bot's objects with the server's and records who converged.
    pub fn check_convergence(&mut self) {
        for i in 0..self.bots.len() {
            let converged = converged(&self.server, &self.bots[i].client, self.bots[i].id);
            self.bots[i].converged = converged;
        }
    }

    /// Closes every client gracefully and lets the server see them leave.
    pub fn finish(&mut self) -> Result<(), FacadeError> {
        for bot in &mut self.bots {
            bot.client.disconnect();
        }
        let deadline = Instant::now() + Duration::from_millis(300);
        while Instant::now() < deadline && self.server.client_count() > 0 {
            self.server.tick(self.start.elapsed())?;
            self.server_events.extend(self.server.events());
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// The summary, one row per client.
    pub fn report(&self) -> Vec<ClientReport> {
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        self.bots
            .iter()
            .map(|b| {
                let s = b.client.stats();
                let server_side = self.server.stats(b.id);
                let rtt = server_side.map_or(s.rtt, |st| st.rtt);
                let (lost, sent) = server_side.map_or((s.packets_lost, s.packets_out), |st| {
                    (st.packets_lost, st.packets_out)
                });
                ClientReport {
                    id: b.id,
                    objects: b.client.object_count(),
                    down_bytes_per_sec: s.bytes_in as f64 / secs,
                    up_bytes_per_sec: s.bytes_out as f64 / secs,
                    rtt,
                    loss: if sent == 0 {
                        0.0
                    } else {
                        lost as f64 / sent as f64
                    },
                    converged: b.converged,
                }
            })
            .collect()
    }
}

/// What differs between the server's objects and a client's: handles missing on the
/// client, extra on the client, and with another state (for diagnostics).
pub fn differences<T: replicate::transport::ServerTransport>(
    server: &Server<T>,
    client: &Client,
) -> String {
    let objects = server.objects();
    let missing: Vec<String> = objects
        .handles_iter()
        .filter(|&h| client.world().object(h).is_none())
        .map(|h| format!("{h:?}"))
        .collect();
    let extra: Vec<String> = client
        .objects()
        .filter(|o| !objects.contains(o.handle()))
        .map(|o| format!("{:?}", o.handle()))
        .collect();
    let differ: Vec<String> = objects
        .handles_iter()
        .filter(|&h| match (objects.state(h), client.world().object(h)) {
            (Some(a), Some(b)) => !a.eq_dyn(b.state()),
            _ => false,
        })
        .map(|h| format!("{h:?}"))
        .collect();
    format!("missing {missing:?}, extra {extra:?}, differing {differ:?}")
}

/// Whether `client` (connected as `id`) holds exactly the server's objects with the
/// server's quantized states. A player the client does not own is compared without
/// its owner-only ammo (the client never receives it).
pub fn converged<T: replicate::transport::ServerTransport>(
    server: &Server<T>,
    client: &Client,
    id: ClientId,
) -> bool {
    if !client.is_connected() {
        return false;
    }
    let Some(conn) = server.connection_id(id) else {
        return false;
    };
    let objects = server.objects();
    if client.object_count() != objects.len() {
        return false;
    }
    objects.handles_iter().all(|h| {
        let (Some(ours), Some(theirs)) = (objects.state(h), client.world().object(h)) else {
            return false;
        };
        if ours.eq_dyn(theirs.state()) {
            return true;
        }
        let owned = objects
            .index_of(h)
            .and_then(|i| objects.entry_at(i))
            .and_then(|e| e.owner_connection())
            == Some(conn);
        !owned && players_equal_but_ammo(ours, theirs.state())
    })
}

fn players_equal_but_ammo(a: &dyn ErasedState, b: &dyn ErasedState) -> bool {
    type State = <Player as Replicated>::State;
    let (Some(a), Some(b)) = (
        a.as_any().downcast_ref::<State>(),
        b.as_any().downcast_ref::<State>(),
    ) else {
        return false;
    };
    let mut a = Player::from_state(a);
    let b = Player::from_state(b);
    a.ammo = b.ammo;
    a == b
}
