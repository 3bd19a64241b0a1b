//! S2 "battle royale" — server CPU and scale. 100 connections over an in-memory
//! lossless link, 10 000 objects (100 players; 9 900 world objects: half NPCs that
//! move, half pickups that do not), 10% of objects dirty per tick.
//!
//! Variants: everything in scope of every connection; the library's spatial grid
//! filter (`FilterKind::Spatial`, cell 5000, cull distance 50 000) on a 200 000 ×
//! 200 000 world, fed as a game feeds it (moved objects' positions, each connection's
//! view), with the harness's own [`GridFilter`] as the untimed oracle of what each
//! client must hold; connections at round trips spread from 20 to 200 ms; packets
//! written in passes over every connection on one and two writer threads (the same
//! bytes); and "crowd" — 100 players in one place, all moving, each seeing all of them
//! (100 × 100 = 10 000 object × connection updates per tick).
//!
//! The timed server tick is: apply the dirty objects' new values (`get_mut`), the scope
//! update (grid variant), `ReplicationServer::tick` (quantize, hand changes to every
//! connection), and writing every connection's packets until nothing is left (each
//! reported delivered). Decoding on connection 0's client, kept for the convergence
//! check, happens outside the timed part. The hand-rolled baseline is timed on the same
//! dirty sets: per connection, postcard-serialize every dirty object in scope in full.

use super::{
    DeltaMode, Link, Outcome, SanityError, Stopwatch, Traffic, ensure, median, replication_config,
    send_all,
};
use crate::report::svg::{self, Series};
use crate::report::{Json, Table, f, peak_rss_bytes, reset_peak_rss, write_file};
use glam::Vec3;
use replicate::Replicated;
use replicate::interest::{FilterKind, GridFilter, GridFilterConfig, InterestConfig};
use replicate::internals::link::SplitMix64;
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::{PassTimes, ReplicationClient, ReplicationServer};
use replicate::serialize::{AxesConfig, NetSerializer, Vec3AxesSerializer, VectorConfig};
use replicate::{Handle, NetRefHandle};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// Edge of the world, in world units.
pub const WORLD_SIZE: f32 = 200_000.0;

/// Positions: 0..200 000 at 1 unit horizontally (18 bits), 0..1000 vertically (10).
pub const WORLD_POSITION: AxesConfig = AxesConfig {
    x: VectorConfig::with_precision(0.0, WORLD_SIZE, 1.0),
    y: VectorConfig::with_precision(0.0, WORLD_SIZE, 1.0),
    z: VectorConfig::with_precision(0.0, 1000.0, 1.0),
};

/// A player.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bench::BrPlayer")]
pub struct BrPlayer {
    /// World position.
    #[net(serializer = Vec3AxesSerializer, config = WORLD_POSITION)]
    pub position: Vec3,
    /// Heading, degrees.
    #[net(min = -180.0, max = 180.0, bits = 10)]
    pub yaw: f32,
    /// 0..=100.
    #[net(bits = 7)]
    pub health: u8,
    /// Weapon slot.
    #[net(bits = 3)]
    pub weapon: u8,
}

/// A moving non-player character.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bench::Npc")]
pub struct Npc {
    /// World position.
    #[net(serializer = Vec3AxesSerializer, config = WORLD_POSITION)]
    pub position: Vec3,
    /// Heading, degrees.
    #[net(min = -180.0, max = 180.0, bits = 10)]
    pub yaw: f32,
    /// 0..=100.
    #[net(bits = 7)]
    pub health: u8,
}

/// A pickup lying on the ground (never changes).
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bench::Pickup")]
pub struct Pickup {
    /// World position.
    #[net(serializer = Vec3AxesSerializer, config = WORLD_POSITION)]
    pub position: Vec3,
    /// Item kind.
    #[net(bits = 6)]
    pub kind: u8,
    /// Stack size.
    pub amount: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Player,
    Npc,
    Pickup,
}

/// What the server game holds to change an object: the typed handle spawning it gave
/// (pickups never change).
#[derive(Debug, Clone, Copy)]
enum Changes {
    Player(Handle<BrPlayer>),
    Npc(Handle<Npc>),
    Fixed,
}

/// The server game's view of an object (and what the hand-rolled baseline encodes).
#[derive(Debug, Clone, Serialize)]
struct Mirror {
    position: [f32; 3],
    yaw: f32,
    health: u8,
    extra: u8,
}

/// How objects are put in scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeMode {
    /// Every object in scope of every connection.
    All,
    /// The spatial grid filter around each connection's player.
    Grid,
    /// 100 players packed in one place, all moving, all in scope.
    Crowd,
}

/// When the server learns the fate of each packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckTiming {
    /// In the tick it was sent (every connection's acks in step).
    Instant,
    /// Connection `c` of `n` has a round trip of `min_ms + (max_ms − min_ms)·c/(n−1)`:
    /// its packets' fates arrive that many ticks late (at least one).
    Spread {
        /// Shortest round trip.
        min_ms: u32,
        /// Longest round trip.
        max_ms: u32,
    },
}

impl AckTiming {
    /// Ticks between sending and learning the fate, for connection `c` of `n`.
    pub fn delay_ticks(self, c: usize, n: usize) -> u64 {
        match self {
            AckTiming::Instant => 0,
            AckTiming::Spread { min_ms, max_ms } => {
                let f = if n > 1 {
                    c as f64 / (n - 1) as f64
                } else {
                    0.0
                };
                let rtt = f64::from(min_ms) + f64::from(max_ms.saturating_sub(min_ms)) * f;
                ((rtt / TICK.as_secs_f64() / 1000.0).round() as u64).max(1)
            }
        }
    }
}

/// How the server's packets of a tick are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writers {
    /// Connection after connection (`ReplicationServer::write_packet`).
    PerConnection,
    /// In passes over every connection (`ReplicationServer::write_packets`), on this
    /// many writer threads.
    Passes(usize),
}

/// One measured configuration.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Objects in the world.
    pub objects: usize,
    /// Players among them (each connection views from player `c % players`).
    pub players: usize,
    /// Connections.
    pub connections: usize,
    /// Fraction of objects dirty per tick (drawn from the movers).
    pub dirty_fraction: f64,
    /// Scope mode.
    pub scope: ScopeMode,
    /// Measured ticks (and as many idle ticks).
    pub ticks: usize,
    /// Seed.
    pub seed: u64,
    /// Delta compression (the production setting is on when the build has it).
    pub delta: DeltaMode,
    /// When packets' fates reach the server.
    pub acks: AckTiming,
    /// How packets are written.
    pub writers: Writers,
    /// Objects spawned each measured tick, each destroyed two ticks later (0: a
    /// world without creations after the start).
    pub churn: usize,
}

/// Results of one configuration.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Median timed tick, thread CPU time.
    pub tick_ns: f64,
    /// Median timed tick, wall time.
    pub tick_wall_ns: f64,
    /// Median timed tick, CPU time of every thread of the process (writer threads).
    pub tick_process_ns: f64,
    /// Digest of every packet written in the timed ticks (see `Link::take_digest`).
    pub digest: u64,
    /// Median tick with nothing dirty.
    pub idle_ns: f64,
    /// Dirty object × connection pairs per tick (in scope), mean.
    pub pairs: f64,
    /// Writer payload bytes per tick, all connections, mean.
    pub payload_bytes: f64,
    /// Median hand-rolled baseline time.
    pub baseline_ns: f64,
    /// Hand-rolled baseline bytes per tick, all connections, mean.
    pub baseline_bytes: f64,
    /// Objects checked equal on connection 0's client.
    pub converged: usize,
    /// Batch segments copied from another connection's encoding, per segment encoded,
    /// over the timed ticks (see `ReplicationServer::segment_counts`).
    pub copies_per_encoding: f64,
    /// Of the batches written over the timed ticks, the share in objects sections
    /// replayed from a connection in step (see `ReplicationServer::replayed_sections`).
    pub replayed_share: f64,
    /// Copies of send states the connections held after the timed ticks (connections
    /// in step share one, see `ReplicationServer::group_copies`).
    pub send_state_copies: usize,
    /// Copies made of a shared copy of send states, per timed tick.
    pub send_state_copies_made: f64,
    /// The same for the connections' per-object baselines.
    pub baseline_copies: usize,
    pub baseline_copies_made: f64,
    /// Of the timed ticks' wall time, the share spent writing packets (the part of a
    /// write pass spread over writer threads, see `ReplicationServer::pass_times`):
    /// the rest runs on the calling thread whatever the thread count.
    pub writing_share: f64,
    /// Peak RSS of the process after this configuration.
    pub peak_rss: Option<u64>,
    /// Whether `peak_rss` is this configuration's own (the high-water mark was reset
    /// before it) rather than the run's so far.
    pub peak_rss_own: bool,
}

impl Measured {
    /// ns per (dirty object × connection).
    pub fn ns_per_pair(&self) -> f64 {
        self.tick_ns / self.pairs.max(1.0)
    }
    /// Baseline ns per (dirty object × connection).
    pub fn baseline_ns_per_pair(&self) -> f64 {
        self.baseline_ns / self.pairs.max(1.0)
    }
    /// Writer bytes per (dirty object × connection).
    pub fn bytes_per_pair(&self) -> f64 {
        self.payload_bytes / self.pairs.max(1.0)
    }
}

const TICK: Duration = Duration::from_millis(33);

/// The grid variant's cells and cull distance.
const GRID: GridFilterConfig = GridFilterConfig {
    cell_size: 5000.0,
    max_cull_distance: 50_000.0,
};

/// Quiet ticks before the convergence check.
const SETTLE_TICKS: usize = 60;

/// No bandwidth limit: every connection's packets are written until nothing is left
/// (a 100 000-object tick needs about 110 packets per connection).
const MAX_PACKETS_PER_TICK: usize = 100_000;

/// Writes every connection's packets of a tick until nothing is left.
fn send(
    writers: Writers,
    links: &mut [Link],
    server: &mut ReplicationServer,
    now: Duration,
) -> Traffic {
    match writers {
        Writers::PerConnection => {
            let mut t = Traffic::default();
            for l in links.iter_mut() {
                t += l.send(server, now, MAX_PACKETS_PER_TICK);
            }
            t
        }
        Writers::Passes(_) => send_all(links, server, now, MAX_PACKETS_PER_TICK),
    }
}

fn update_object(server: &mut ReplicationServer, changes: Changes, m: &Mirror) {
    let o = server.objects_mut();
    let pos = Vec3::from_array(m.position);
    match changes {
        Changes::Player(h) => {
            if let Some(p) = o.get_mut(h) {
                p.position = pos;
                p.yaw = m.yaw;
                p.health = m.health;
            }
        }
        Changes::Npc(h) => {
            if let Some(p) = o.get_mut(h) {
                p.position = pos;
                p.yaw = m.yaw;
                p.health = m.health;
            }
        }
        Changes::Fixed => {}
    }
}

/// The objects in one connection's scope, a bit each (the harness's oracle).
#[derive(Clone)]
struct ScopeSet(Vec<u64>);

impl ScopeSet {
    /// Every one of `n` objects.
    fn all(n: usize) -> Self {
        Self(vec![u64::MAX; n.div_ceil(64)])
    }

    fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    /// Exactly the objects in `visible`.
    fn set_only(&mut self, visible: &[u32]) {
        self.0.iter_mut().for_each(|w| *w = 0);
        for &o in visible {
            if let Some(w) = self.0.get_mut(o as usize / 64) {
                *w |= 1 << (o % 64);
            }
        }
    }
}

struct ScopeCtx<'a> {
    handles: &'a [NetRefHandle],
    players: usize,
}

impl ScopeCtx<'_> {
    /// The library's grid filter, fed as a game would: the moved objects' positions and
    /// every connection's view (its player's position).
    fn feed(
        &self,
        server: &mut ReplicationServer,
        links: &[Link],
        mirrors: &[Mirror],
        moved: &[usize],
    ) -> Result<(), SanityError> {
        for &i in moved {
            server
                .set_object_position(self.handles[i], Vec3::from_array(mirrors[i].position))
                .map_err(|e| SanityError(format!("position: {e}")))?;
        }
        for (c, l) in links.iter().enumerate() {
            let view = Vec3::from_array(mirrors[c % self.players.max(1)].position);
            server.set_view_position(l.conn, view);
        }
        Ok(())
    }

    /// The oracle (untimed): moves the `moved` objects in the harness's own grid and
    /// recomputes every connection's visible set around its player, for the postcard
    /// baseline and the convergence check.
    fn expect(
        &self,
        mirrors: &[Mirror],
        scope: &mut [ScopeSet],
        moved: &[usize],
        grid: &mut GridFilter,
        visible: &mut Vec<u32>,
    ) {
        for &i in moved {
            grid.update_object(i as u32, Vec3::from_array(mirrors[i].position));
        }
        for (c, current) in scope.iter_mut().enumerate() {
            let view = Vec3::from_array(mirrors[c % self.players.max(1)].position);
            visible.clear();
            grid.visible_objects(view, visible);
            current.set_only(visible);
        }
    }
}

/// Runs one configuration.
pub fn measure(s: Setup) -> Result<Measured, SanityError> {
    // Each configuration's peak RSS is its own (not the run's high-water mark so far),
    // where the platform allows resetting it.
    let rss_reset = reset_peak_rss();
    let registry = Arc::new(
        ProtocolRegistry::from_inventory().map_err(|e| SanityError(format!("registry: {e}")))?,
    );
    let mut config = replication_config(s.delta);
    if let Writers::Passes(threads) = s.writers {
        config.writer_threads = threads;
    }
    let mut server = ReplicationServer::new(registry.clone(), config.clone());
    if s.scope == ScopeMode::Grid {
        // Every object under the library's grid filter (cell 5000, cull 50 000).
        server.set_interest_config(InterestConfig {
            default_filter: FilterKind::Spatial,
            grid: GRID,
            ..InterestConfig::default()
        });
    }
    // No per-tick packet cap: every scenario writes until nothing is left.
    server.set_max_extra_packets(super::UNCAPPED_EXTRA_PACKETS);
    let mut rng = SplitMix64::new(s.seed);
    let n = s.objects;
    let players = s.players.min(n);
    let movers = players + (n - players) / 2;
    let mut kinds = Vec::with_capacity(n);
    let mut mirrors = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let mut changes = Vec::with_capacity(n);
    let (lo, span) = match s.scope {
        ScopeMode::Crowd => (WORLD_SIZE / 2.0 - 1000.0, 2000.0),
        _ => (0.0, WORLD_SIZE),
    };
    for i in 0..n {
        let kind = if i < players {
            Kind::Player
        } else if i < movers {
            Kind::Npc
        } else {
            Kind::Pickup
        };
        let m = Mirror {
            position: [
                lo + rng.next_f64() as f32 * span,
                lo + rng.next_f64() as f32 * span,
                0.0,
            ],
            yaw: 0.0,
            health: 100,
            extra: (i % 8) as u8,
        };
        let pos = Vec3::from_array(m.position);
        let objects = server.objects_mut();
        let spawned = match kind {
            Kind::Player => objects.spawn(BrPlayer {
                position: pos,
                health: 100,
                weapon: m.extra,
                ..Default::default()
            }),
            Kind::Npc => objects.spawn(Npc {
                position: pos,
                health: 100,
                ..Default::default()
            }),
            Kind::Pickup => objects.spawn(Pickup {
                position: pos,
                kind: m.extra,
                amount: 1,
            }),
        };
        let h = spawned.map_err(|e| SanityError(format!("spawn: {e:?}")))?;
        let typed = match kind {
            Kind::Player => objects.handle(h).map(Changes::Player),
            Kind::Npc => objects.handle(h).map(Changes::Npc),
            Kind::Pickup => Some(Changes::Fixed),
        };
        changes.push(typed.ok_or_else(|| SanityError(format!("{h} has no typed handle")))?);
        handles.push(h);
        kinds.push(kind);
        mirrors.push(m);
    }
    let mut links: Vec<Link> = (0..s.connections)
        .map(|c| {
            let conn = super::add_uncapped_connection(&mut server);
            let client = (c == 0).then(|| ReplicationClient::new(registry.clone(), config.clone()));
            let mut l = Link::new(conn, client);
            l.defer = true;
            l.set_conditions(super::LinkConditions {
                ack_delay_ticks: s.acks.delay_ticks(c, s.connections),
                ..Default::default()
            });
            l
        })
        .collect();
    // Scope: all in scope by default; the grid variant keeps a per-connection set.
    let mut grid = GridFilter::new(GRID);
    let grid_mode = s.scope == ScopeMode::Grid;
    let mut scope = vec![ScopeSet::all(n); s.connections];
    let mut visible = Vec::new();
    if grid_mode {
        let all: Vec<usize> = (0..n).collect();
        let ctx = ScopeCtx {
            handles: &handles,
            players,
        };
        ctx.feed(&mut server, &links, &mirrors, &all)?;
        ctx.expect(&mirrors, &mut scope, &all, &mut grid, &mut visible);
    }
    // Warm-up: send every creation, then a few ordinary ticks.
    let mut now = Duration::ZERO;
    now += TICK;
    server.tick(now);
    for l in &mut links {
        l.send(&mut server, now, usize::MAX);
        l.flush(now);
        // From now on each tick's packets are checked after it.
        l.keep_sent = true;
    }
    let dirty_count = ((n as f64 * s.dirty_fraction).round() as usize).min(movers);
    let mut order: Vec<usize> = (0..movers).collect();
    let mut pick_dirty = |rng: &mut SplitMix64, count: usize| -> Vec<usize> {
        for k in 0..count {
            let j = k + rng.below((movers - k) as u64) as usize;
            order.swap(k, j);
        }
        let mut d = order[..count].to_vec();
        d.sort_unstable();
        d
    };
    let move_objects = |rng: &mut SplitMix64, mirrors: &mut [Mirror], dirty: &[usize]| {
        for &i in dirty {
            let m = &mut mirrors[i];
            let (slo, shi) = (lo, lo + span);
            m.position[0] = (m.position[0] + (rng.next_f64() as f32 - 0.5) * 100.0).clamp(slo, shi);
            m.position[1] = (m.position[1] + (rng.next_f64() as f32 - 0.5) * 100.0).clamp(slo, shi);
            m.yaw = (rng.next_f64() as f32 - 0.5) * 360.0;
            if rng.chance(0.05) {
                m.health = rng.below(101) as u8;
            }
        }
    };
    let mut out = Measured::default();
    let (mut tick_times, mut base_times, mut idle_times) = (Vec::new(), Vec::new(), Vec::new());
    let (mut wall_times, mut process_times) = (Vec::new(), Vec::new());
    let mut buf: Vec<u8> = Vec::new();
    // Ordinary ticks before the measured ones, so that the measured ticks are the
    // steady state: enough for every creation's fate to arrive (the slowest
    // connection learns it `delay_ticks` late), and for a moving object to have been
    // sent about [`STEADY_SENDS`] times (each send's baseline has its priors, and
    // prediction has learned whether it pays).
    let slowest = (0..s.connections)
        .map(|c| s.acks.delay_ticks(c, s.connections))
        .max()
        .unwrap_or(0) as usize;
    let sends = if dirty_count == 0 {
        0
    } else {
        (STEADY_SENDS as f64 * movers as f64 / dirty_count as f64).ceil() as usize
    };
    let warm = 3 + slowest + sends;
    let mut segments_at_warm = (0, 0);
    let batches_written = |server: &ReplicationServer, links: &[Link]| -> u64 {
        links
            .iter()
            .filter_map(|l| server.writer(l.conn))
            .map(|w| w.stats().batches)
            .sum()
    };
    let mut batches_at_warm = (0, 0);
    let mut churned = std::collections::VecDeque::new();
    let mut copies_at_warm = replicate::internals::replication::GroupCopies::default();
    let mut times_at_warm = PassTimes::default();
    for t in 0..warm + s.ticks * 2 {
        if t == warm {
            copies_at_warm = server.group_copies();
            times_at_warm = server.pass_times();
        }
        if t == warm + s.ticks {
            let copies = server.group_copies();
            let per_tick = |made: u64, at_warm: u64| (made - at_warm) as f64 / s.ticks as f64;
            out.send_state_copies = copies.send_states.held;
            out.send_state_copies_made =
                per_tick(copies.send_states.made, copies_at_warm.send_states.made);
            out.baseline_copies = copies.baselines.held;
            out.baseline_copies_made =
                per_tick(copies.baselines.made, copies_at_warm.baselines.made);
            let writing = (server.pass_times() - times_at_warm).writing;
            out.writing_share = writing.as_nanos() as f64 / wall_times.iter().sum::<f64>().max(1.0);
        }
        if t == warm {
            segments_at_warm = server.segment_counts();
            batches_at_warm = (
                server.replayed_sections().1,
                batches_written(&server, &links),
            );
        }
        let idle = t >= warm + s.ticks;
        let dirty = if idle {
            Vec::new()
        } else {
            pick_dirty(&mut rng, dirty_count)
        };
        move_objects(&mut rng, &mut mirrors, &dirty);
        now += TICK;
        let watch = Stopwatch::start();
        for &i in &dirty {
            update_object(&mut server, changes[i], &mirrors[i]);
        }
        let ctx = ScopeCtx {
            handles: &handles,
            players,
        };
        if grid_mode {
            ctx.feed(&mut server, &links, &mirrors, &dirty)?;
        }
        // Creations and destroys (the idle ticks destroy what is left).
        if !idle {
            for _ in 0..s.churn {
                let pickup = Pickup {
                    position: Vec3::ZERO,
                    kind: 1,
                    amount: 1,
                };
                let h = server.objects_mut().spawn(pickup);
                churned.push_back(h.map_err(|e| SanityError(format!("spawn: {e:?}")))?);
            }
        }
        while churned.len() > if idle { 0 } else { 2 * s.churn } {
            if let Some(h) = churned.pop_front() {
                server
                    .objects_mut()
                    .destroy(h)
                    .map_err(|e| SanityError(format!("destroy: {e:?}")))?;
            }
        }
        server.tick(now);
        let traffic = send(s.writers, &mut links, &mut server, now);
        let (wall, elapsed) = watch.stop();
        let process = watch.process_cpu();
        if grid_mode {
            ctx.expect(&mirrors, &mut scope, &dirty, &mut grid, &mut visible);
        }
        links[0].flush(now);
        // The hand-rolled baseline on the same dirty set.
        let watch = Stopwatch::start();
        let mut base_bytes = 0;
        let mut pairs = 0;
        for c_scope in &scope {
            buf.clear();
            for &i in &dirty {
                if c_scope.contains(i) {
                    pairs += 1;
                    buf.extend_from_slice(&(i as u32).to_le_bytes());
                    buf = postcard::to_extend(&mirrors[i], std::mem::take(&mut buf))
                        .unwrap_or_default();
                }
            }
            base_bytes += buf.len();
        }
        let (_, base_elapsed) = watch.stop();
        let digest = links
            .iter_mut()
            .fold(0u64, |d, l| d.wrapping_add(l.take_digest()));
        if t < warm {
            continue;
        }
        if idle {
            idle_times.push(elapsed);
        } else {
            tick_times.push(elapsed);
            wall_times.push(wall);
            process_times.push(process);
            out.digest = out.digest.wrapping_add(digest);
            base_times.push(base_elapsed);
            out.pairs += pairs as f64 / s.ticks as f64;
            out.payload_bytes += traffic.payload_bits as f64 / 8.0 / s.ticks as f64;
            out.baseline_bytes += base_bytes as f64 / s.ticks as f64;
        }
    }
    let (copied, encoded) = server.segment_counts();
    out.copies_per_encoding =
        (copied - segments_at_warm.0) as f64 / (encoded - segments_at_warm.1).max(1) as f64;
    out.replayed_share = (server.replayed_sections().1 - batches_at_warm.0) as f64
        / (batches_written(&server, &links) - batches_at_warm.1).max(1) as f64;
    out.tick_ns = median(&tick_times);
    out.tick_wall_ns = median(&wall_times);
    out.tick_process_ns = median(&process_times);
    out.idle_ns = median(&idle_times);
    out.baseline_ns = median(&base_times);
    // Settle (untimed): a few quiet ticks so whatever the interest layer's
    // prioritizers deferred goes out, then convergence on connection 0.
    for _ in 0..SETTLE_TICKS {
        now += TICK;
        server.tick(now);
        send(s.writers, &mut links, &mut server, now);
        links[0].flush(now);
    }
    let client = links[0]
        .client
        .as_ref()
        .ok_or(SanityError("no client".into()))?;
    let q = |p: Vec3| Vec3AxesSerializer::quantize(&WORLD_POSITION, &p);
    let mut in_scope = 0;
    for i in 0..n {
        if !scope[0].contains(i) {
            ensure(!client.contains(handles[i]), || {
                format!("object {i} out of scope but on the client")
            })?;
            continue;
        }
        in_scope += 1;
        let want = q(Vec3::from_array(mirrors[i].position));
        let got = match kinds[i] {
            Kind::Player => client.get::<BrPlayer>(handles[i]).map(|o| o.position),
            Kind::Npc => client.get::<Npc>(handles[i]).map(|o| o.position),
            Kind::Pickup => client.get::<Pickup>(handles[i]).map(|o| o.position),
        }
        .ok_or_else(|| SanityError(format!("object {i} missing on the client")))?;
        ensure(q(got) == want, || {
            format!("object {i} differs on the client")
        })?;
    }
    ensure(client.len() == in_scope, || {
        format!("client holds {} objects, expected {in_scope}", client.len())
    })?;
    out.converged = in_scope;
    out.peak_rss = peak_rss_bytes();
    out.peak_rss_own = rss_reset;
    Ok(out)
}

/// An idle tick in a large world: what a server pays per tick when nothing changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdleMeasured {
    /// Median idle tick, thread CPU time.
    pub tick_ns: f64,
    /// Median idle tick, wall time.
    pub tick_wall_ns: f64,
}

/// Ticks with nothing dirty over `objects` objects, all in scope of `connections`
/// connections, after every creation is sent and acknowledged: the server's tick plus
/// a packet write per connection (each finding nothing to send).
pub fn measure_idle(
    objects: usize,
    connections: usize,
    ticks: usize,
) -> Result<IdleMeasured, SanityError> {
    let registry = Arc::new(
        ProtocolRegistry::from_inventory().map_err(|e| SanityError(format!("registry: {e}")))?,
    );
    let mut server = ReplicationServer::new(registry, replication_config(DeltaMode::On));
    server.set_max_extra_packets(super::UNCAPPED_EXTRA_PACKETS);
    let mut rng = SplitMix64::new(0x5EED_0003);
    for i in 0..objects {
        let position = Vec3::new(
            rng.next_f64() as f32 * WORLD_SIZE,
            rng.next_f64() as f32 * WORLD_SIZE,
            0.0,
        );
        server
            .objects_mut()
            .spawn(Pickup {
                position,
                kind: (i % 8) as u8,
                amount: 1,
            })
            .map_err(|e| SanityError(format!("spawn: {e:?}")))?;
    }
    let mut links: Vec<Link> = (0..connections)
        .map(|_| {
            let mut l = Link::new(super::add_uncapped_connection(&mut server), None);
            l.defer = true;
            l
        })
        .collect();
    let mut now = Duration::ZERO;
    let mut tick = |server: &mut ReplicationServer, links: &mut [Link]| {
        now += TICK;
        server.tick(now);
        send(Writers::PerConnection, links, server, now)
    };
    // The creations, then one tick for their acknowledgements.
    for _ in 0..2 {
        tick(&mut server, &mut links);
    }
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..ticks.max(1) {
        let watch = Stopwatch::start();
        let traffic = timed_idle_tick(&mut tick, &mut server, &mut links);
        let (w, c) = watch.stop();
        ensure(traffic.packets == 0, || {
            format!(
                "S2 idle: {} packets written with nothing dirty",
                traffic.packets
            )
        })?;
        cpu.push(c);
        wall.push(w);
    }
    Ok(IdleMeasured {
        tick_ns: median(&cpu),
        tick_wall_ns: median(&wall),
    })
}

/// One timed idle tick, a function of its own so that a profiler can single it out
/// (`valgrind --tool=callgrind --toggle-collect='*timed_idle_tick*' s2_profile idle`).
#[inline(never)]
fn timed_idle_tick(
    tick: &mut impl FnMut(&mut ReplicationServer, &mut [Link]) -> Traffic,
    server: &mut ReplicationServer,
    links: &mut [Link],
) -> Traffic {
    tick(server, links)
}

/// Times a moving object is sent, on average, in the ticks before the measured ones.
/// A cold start's cost fades over about ten sends per object (baselines gain their
/// priors, prediction learns whether it pays, the baseline slots fill): measured
/// straight after the creations' fates, S2 at 1 000 objects × 16 connections read
/// 39.5 ns per pair over 15 ticks and 34.6 ns over 300; after ten sends, 34.7 ns over
/// 15 ticks.
const STEADY_SENDS: usize = 10;

/// Dirty object × connection pairs a scale point measures, about: a point of 1 000
/// objects × 16 connections (a 50 µs tick) over 15 ticks read anywhere from 35 to 39
/// ns per pair from run to run.
const SCALE_PAIRS: usize = 250_000;

/// Scale point `s`, measuring `at_least` ticks, or enough for about [`SCALE_PAIRS`]
/// pairs.
fn scale_point(s: Setup, at_least: usize) -> Setup {
    let dirty = (s.objects as f64 * s.dirty_fraction).round() as usize;
    let pairs_per_tick = dirty.max(1) * s.connections.max(1);
    Setup {
        ticks: at_least.max(SCALE_PAIRS.div_ceil(pairs_per_tick)),
        ..s
    }
}

/// Measures the points `setups` of a scale curve in `rounds` rounds, each round every
/// point in turn, and keeps per point the round with the median cost per pair. A point
/// is short (a 1 000-object point measures about 10 ms of ticks), so a burst of load
/// on a shared host can slow every tick of it; in rounds, such a burst falls on one
/// point of one round.
fn scale_curve(setups: &[Setup], rounds: usize) -> Result<Vec<Measured>, SanityError> {
    let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); setups.len()];
    for _ in 0..rounds.max(1) {
        for (point, &setup) in runs.iter_mut().zip(setups) {
            point.push(measure(setup)?);
        }
    }
    Ok(runs
        .into_iter()
        .map(|mut point| {
            point.sort_by(|a, b| a.ns_per_pair().total_cmp(&b.ns_per_pair()));
            point.swap_remove(point.len() / 2)
        })
        .collect())
}

/// Parameters of an S2 run.
#[derive(Debug, Clone)]
pub struct S2Params {
    /// Objects in the main variants.
    pub objects: usize,
    /// Connections (and players) in the main variants.
    pub connections: usize,
    /// Measured ticks per configuration.
    pub ticks: usize,
    /// Object counts of the scale curve.
    pub scale_objects: Vec<usize>,
    /// Connections of the object-scale curve.
    pub scale_objects_connections: usize,
    /// Connection counts of the scale curve.
    pub scale_connections: Vec<usize>,
    /// Objects of the connection-scale curve.
    pub scale_connections_objects: usize,
    /// Measured ticks per scale point, at least: a small point measures more, about
    /// [`SCALE_PAIRS`] dirty object × connection pairs.
    pub scale_ticks: usize,
    /// Rounds of each scale curve (its points in turn, each round; the median round
    /// per point is reported, see [`scale_curve`]).
    pub scale_rounds: usize,
    /// Rounds of the parallel-writers comparison (one and two threads alternated).
    pub parallel_rounds: usize,
    /// Objects and connections of the idle-tick point (nothing dirty, a large world).
    pub idle_world: (usize, usize),
}

impl S2Params {
    /// The full scenario.
    pub fn full() -> Self {
        Self {
            objects: 10_000,
            connections: 100,
            ticks: 30,
            scale_objects: vec![1_000, 3_000, 10_000, 30_000, 100_000],
            scale_objects_connections: 16,
            scale_connections: vec![1, 4, 16, 64, 256],
            scale_connections_objects: 10_000,
            scale_ticks: 15,
            scale_rounds: 3,
            parallel_rounds: 3,
            idle_world: (100_000, 100),
        }
    }

    /// The CI smoke run: a tiny subset.
    pub fn quick() -> Self {
        Self {
            objects: 2_000,
            connections: 20,
            ticks: 5,
            scale_objects: vec![1_000, 3_000],
            scale_objects_connections: 4,
            scale_connections: vec![1, 4, 16],
            scale_connections_objects: 1_000,
            scale_ticks: 3,
            scale_rounds: 1,
            parallel_rounds: 1,
            idle_world: (3_000, 20),
        }
    }
}

fn ms(ns: f64) -> String {
    f(ns / 1e6, 2)
}

fn json_measured(name: &str, s: &Setup, m: &Measured) -> Json {
    Json::obj(vec![
        ("variant", Json::str(name)),
        ("objects", Json::Num(s.objects as f64)),
        ("connections", Json::Num(s.connections as f64)),
        ("dirty_fraction", Json::Num(s.dirty_fraction)),
        ("delta", Json::Bool(s.delta == DeltaMode::On)),
        ("median_tick_cpu_ns", Json::Num(m.tick_ns)),
        ("median_tick_wall_ns", Json::Num(m.tick_wall_ns)),
        ("median_tick_process_cpu_ns", Json::Num(m.tick_process_ns)),
        ("writing_share_of_tick", Json::Num(m.writing_share)),
        (
            "writer_threads",
            Json::Num(match s.writers {
                Writers::PerConnection => 0.0,
                Writers::Passes(n) => n as f64,
            }),
        ),
        (
            "segments_copied_per_encoding",
            Json::Num(m.copies_per_encoding),
        ),
        ("batches_replayed_share", Json::Num(m.replayed_share)),
        ("send_state_copies", Json::Num(m.send_state_copies as f64)),
        (
            "send_state_copies_made_per_tick",
            Json::Num(m.send_state_copies_made),
        ),
        ("baseline_copies", Json::Num(m.baseline_copies as f64)),
        (
            "baseline_copies_made_per_tick",
            Json::Num(m.baseline_copies_made),
        ),
        ("idle_tick_ns", Json::Num(m.idle_ns)),
        ("dirty_pairs_per_tick", Json::Num(m.pairs)),
        ("ns_per_dirty_pair", Json::Num(m.ns_per_pair())),
        ("writer_bytes_per_dirty_pair", Json::Num(m.bytes_per_pair())),
        ("baseline_median_ns", Json::Num(m.baseline_ns)),
        (
            "baseline_ns_per_dirty_pair",
            Json::Num(m.baseline_ns_per_pair()),
        ),
        (
            "baseline_bytes_per_dirty_pair",
            Json::Num(m.baseline_bytes / m.pairs.max(1.0)),
        ),
        ("peak_rss_bytes", Json::opt(m.peak_rss.map(|v| v as f64))),
        ("converged_objects", Json::Num(m.converged as f64)),
    ])
}

/// Runs S2, writes `s2.{md,json}` and `s2-objects.svg` / `s2-connections.svg`.
pub fn run(p: &S2Params) -> Result<Outcome, SanityError> {
    let base = Setup {
        objects: p.objects,
        players: p.connections,
        connections: p.connections,
        dirty_fraction: 0.1,
        scope: ScopeMode::All,
        ticks: p.ticks,
        seed: 0x5EED_0002,
        delta: DeltaMode::On,
        acks: AckTiming::Instant,
        // As the facade writes: in passes over every connection, a packet each.
        writers: Writers::Passes(1),
        churn: 0,
    };
    // Connections at round trips of 20 to 200 ms: a group in step per ack delay.
    let spread = Setup {
        acks: AckTiming::Spread {
            min_ms: 20,
            max_ms: 200,
        },
        ..base
    };
    let grid = Setup {
        scope: ScopeMode::Grid,
        ..base
    };
    let variants = [
        ("all in scope", base),
        (
            "all in scope, written one connection at a time (no replay)",
            Setup {
                writers: Writers::PerConnection,
                ..base
            },
        ),
        ("grid filter (cell 5000, cull 50 000)", grid),
        (
            "all in scope, RTT spread 20–200 ms (acks 1–6 ticks late)",
            spread,
        ),
        (
            "all in scope, delta off",
            Setup {
                delta: DeltaMode::Off,
                ..base
            },
        ),
        (
            "crowd (players only, all moving, all in scope)",
            Setup {
                objects: p.connections,
                dirty_fraction: 1.0,
                scope: ScopeMode::Crowd,
                ..base
            },
        ),
    ];
    let mut table = Table::new(&[
        "variant",
        "median tick ms (CPU / wall)",
        "dirty obj×conn per tick",
        "ns per dirty obj×conn",
        "idle tick ms",
        "writer B per dirty obj×conn",
        "hand-rolled postcard: ms / ns per pair / B per pair",
        "peak RSS MiB",
        "segments copied per encoding",
        "batches replayed",
    ]);
    let mut json_rows = Vec::new();
    let mut rss_own = true;
    for (name, setup) in &variants {
        let m = measure(*setup)?;
        rss_own &= m.peak_rss_own;
        ensure(m.payload_bytes > 0.0 && m.pairs > 0.0, || {
            format!("S2 {name}: no traffic")
        })?;
        ensure(m.payload_bytes < m.baseline_bytes, || {
            format!(
                "S2 {name}: replicate {:.0} B not smaller than postcard {:.0} B",
                m.payload_bytes, m.baseline_bytes
            )
        })?;
        table.row(vec![
            name.to_string(),
            format!("{} / {}", ms(m.tick_ns), ms(m.tick_wall_ns)),
            f(m.pairs, 0),
            f(m.ns_per_pair(), 1),
            ms(m.idle_ns),
            f(m.bytes_per_pair(), 2),
            format!(
                "{} / {} / {}",
                ms(m.baseline_ns),
                f(m.baseline_ns_per_pair(), 1),
                f(m.baseline_bytes / m.pairs.max(1.0), 2)
            ),
            m.peak_rss
                .map_or("—".into(), |b| f(b as f64 / 1048576.0, 1)),
            f(m.copies_per_encoding, 1),
            format!("{} %", f(m.replayed_share * 100.0, 0)),
        ]);
        json_rows.push(json_measured(name, setup, &m));
    }
    // Parallel writers: passes over every connection on one thread and on two,
    // alternated (the machine's speed drifts between configurations); the packets
    // must be the same bytes. All in scope (one group of connections in step), with
    // the RTT spread (a group per ack delay), and the grid filter (the production
    // setting: every connection writes its own section).
    let mut par_table = Table::new(&[
        "variant",
        "writer threads",
        "tick ms wall (min / median of rounds)",
        "tick ms CPU, all threads (median)",
        "ns per dirty obj×conn (wall, median)",
        "wall-time speed-up (min / median)",
        "writing: share of the tick / speed-up (median)",
        "speed-up bound: the rest on one thread",
        "packets",
    ]);
    let rounds = p.parallel_rounds.max(1);
    let parallel_variants = [
        ("all in scope", base),
        ("RTT spread 20–200 ms", spread),
        ("grid filter", grid),
    ];
    for (variant, setup) in parallel_variants {
        let mut runs: [Vec<Measured>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (slot, threads) in [(0, 1), (1, 2)] {
                let m = measure(Setup {
                    writers: Writers::Passes(threads),
                    ..setup
                })?;
                ensure(
                    m.digest == runs[0].first().map_or(m.digest, |one| one.digest),
                    || {
                        format!(
                            "S2 parallel, {variant}: {threads} writer threads wrote other packets than one"
                        )
                    },
                )?;
                runs[slot].push(m);
            }
        }
        let walls = |ms: &[Measured]| -> Vec<f64> { ms.iter().map(|m| m.tick_wall_ns).collect() };
        let min_of = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (one_wall, two_wall) = (walls(&runs[0]), walls(&runs[1]));
        // What the tick spent writing packets, the one part writer threads share.
        let shares = |ms: &[Measured]| -> Vec<f64> { ms.iter().map(|m| m.writing_share).collect() };
        let writing = |ms: &[Measured]| median(&shares(ms)) * median(&walls(ms));
        let one_share = median(&shares(&runs[0]));
        for (slot, threads) in [(0usize, 1usize), (1, 2)] {
            let w = walls(&runs[slot]);
            let process: Vec<f64> = runs[slot].iter().map(|m| m.tick_process_ns).collect();
            let pairs = runs[slot][0].pairs.max(1.0);
            let speedup = if slot == 0 {
                "1.00× / 1.00×".to_string()
            } else {
                format!(
                    "{}× / {}×",
                    f(min_of(&one_wall) / min_of(&two_wall), 2),
                    f(median(&one_wall) / median(&two_wall), 2)
                )
            };
            let share = median(&shares(&runs[slot]));
            let (writing_speedup, bound) = if slot == 0 {
                ("1.00×".to_string(), "".to_string())
            } else {
                // Amdahl: the writing twice as fast, the rest as on one thread.
                let bound = 1.0 / ((1.0 - one_share) + one_share / threads as f64);
                (
                    format!("{}×", f(writing(&runs[0]) / writing(&runs[1]), 2)),
                    format!("{}×", f(bound, 2)),
                )
            };
            par_table.row(vec![
                variant.to_string(),
                threads.to_string(),
                format!("{} / {}", ms(min_of(&w)), ms(median(&w))),
                ms(median(&process)),
                f(median(&w) / pairs, 1),
                speedup,
                format!("{} % / {writing_speedup}", f(100.0 * share, 0)),
                bound,
                if threads == 1 {
                    "reference".into()
                } else {
                    "identical bytes".into()
                },
            ]);
            let setup = Setup {
                writers: Writers::Passes(threads),
                ..setup
            };
            json_rows.push(json_measured(
                &format!("{variant}, passes on {threads} writer threads"),
                &setup,
                &runs[slot][runs[slot].len() / 2],
            ));
        }
    }
    // Scale curves (everything in scope).
    let mut obj_table = Table::new(&[
        "objects",
        "connections",
        "10% dirty: tick ms",
        "ns per dirty obj×conn",
        "0% dirty: tick ms",
    ]);
    let (mut obj_dirty, mut obj_idle) = (Vec::new(), Vec::new());
    let mut scale_json = Vec::new();
    let point = |objects: usize, connections: usize, players: usize| {
        let setup = Setup {
            objects,
            players,
            connections,
            ..base
        };
        scale_point(setup, p.scale_ticks)
    };
    let per_connection = p.scale_objects_connections;
    let setups: Vec<Setup> = p
        .scale_objects
        .iter()
        .map(|&objects| point(objects, per_connection, per_connection.min(objects)))
        .collect();
    let obj_measured = scale_curve(&setups, p.scale_rounds)?;
    for (setup, m) in setups.iter().zip(&obj_measured) {
        let objects = setup.objects;
        obj_table.row(vec![
            objects.to_string(),
            setup.connections.to_string(),
            ms(m.tick_ns),
            f(m.ns_per_pair(), 1),
            ms(m.idle_ns),
        ]);
        obj_dirty.push((objects as f64, m.tick_ns / 1e6));
        obj_idle.push((objects as f64, m.idle_ns / 1e6));
        scale_json.push(json_measured("scale objects", setup, m));
    }
    // How the cost per pair grows with the world: the last point's over the first's.
    let ends = (
        setups.first().zip(obj_measured.first()),
        setups.last().zip(obj_measured.last()),
    );
    let growth = match ends {
        (Some((first, a)), Some((last, b))) if last.objects > first.objects => {
            let ratio = b.ns_per_pair() / a.ns_per_pair();
            ratio
                .is_finite()
                .then_some((first.objects, last.objects, ratio))
        }
        _ => None,
    };
    let mut conn_table = Table::new(&[
        "connections",
        "objects",
        "10% dirty: tick ms",
        "ns per dirty obj×conn",
        "0% dirty: tick ms",
    ]);
    let (mut conn_dirty, mut conn_idle) = (Vec::new(), Vec::new());
    let setups: Vec<Setup> = p
        .scale_connections
        .iter()
        .map(|&connections| {
            point(
                p.scale_connections_objects,
                connections,
                connections.min(100),
            )
        })
        .collect();
    for (setup, m) in setups.iter().zip(scale_curve(&setups, p.scale_rounds)?) {
        let connections = setup.connections;
        conn_table.row(vec![
            connections.to_string(),
            setup.objects.to_string(),
            ms(m.tick_ns),
            f(m.ns_per_pair(), 1),
            ms(m.idle_ns),
        ]);
        conn_dirty.push((connections as f64, m.tick_ns / 1e6));
        conn_idle.push((connections as f64, m.idle_ns / 1e6));
        scale_json.push(json_measured("scale connections", setup, &m));
    }
    let (idle_objects, idle_connections) = p.idle_world;
    let idle = measure_idle(idle_objects, idle_connections, p.ticks)?;
    let mut md = format!(
        "### S2 battle royale — {} objects, {} connections, 10% dirty, {} measured ticks per configuration (medians)\n\n",
        p.objects, p.connections, p.ticks
    );
    md.push_str(&table.markdown());
    md.push_str(&format!(
        "\nDelta compression: on (except the \"delta off\" row). Times are thread CPU time, which other processes' load inflates far less than wall time (both are shown; the machine is shared). \"Segments copied per encoding\": each batch segment (change mask and members) is encoded once per tick and copied to every other connection that codes the same members against the same baseline; with n connections in step the ideal is n − 1. \
         Timed tick: apply dirty values, scope update (grid), quantize, schedule and write every \
         connection's packets. {}\n\n",
        if rss_own {
            "Peak RSS is each configuration's own (the process high-water mark is reset before it)."
        } else {
            "Peak RSS is the process high-water mark so far (cumulative: this platform cannot reset it)."
        }
    ));
    md.push_str(&format!(
        "Parallel writers (delta on; all in scope, with the RTT spread, and with the grid filter): every connection's \
         packets written in passes (`ReplicationServer::write_packets`) on 1 and 2 threads of a \
         {}-core machine, alternated round by round; wall time, since the work is spread over \
         threads:\n\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ));
    md.push_str(&par_table.markdown());
    md.push_str(
        "\n\"Writing\" is the part of each write pass that writer threads share \
         (`ReplicationServer::pass_times`); the rest of the tick (the objects' changes and \
         quantization, packet fates, each pass's preparing and settling) runs on the calling \
         thread. The bound is the speed-up if the writing alone went twice as fast: \
         1 / ((1 − w) + w / 2), w the writing's share on one thread.\n\n",
    );
    let rounds = if p.scale_rounds > 1 {
        format!("; each point the median of {} rounds", p.scale_rounds)
    } else {
        String::new()
    };
    md.push_str(&format!(
        "Scale with objects (everything in scope{rounds}):\n\n"
    ));
    md.push_str(&obj_table.markdown());
    if let Some((from, to, ratio)) = growth {
        md.push_str(&format!(
            "\nCost per pair at {to} objects over its cost at {from}: {}×.\n",
            f(ratio, 2)
        ));
    }
    md.push_str(&format!(
        "\nScale with connections (everything in scope{rounds}):\n\n"
    ));
    md.push_str(&conn_table.markdown());
    let mut idle_table = Table::new(&[
        "objects",
        "connections",
        "idle tick ms (CPU / wall)",
        "µs per connection (CPU)",
    ]);
    idle_table.row(vec![
        idle_objects.to_string(),
        idle_connections.to_string(),
        format!(
            "{} / {}",
            f(idle.tick_ns / 1e6, 3),
            f(idle.tick_wall_ns / 1e6, 3)
        ),
        f(idle.tick_ns / 1e3 / idle_connections.max(1) as f64, 2),
    ]);
    md.push_str(
        "\nIdle tick in a large world (nothing dirty, everything in scope and acknowledged; \
         the server's tick and one packet write per connection that finds nothing to send):\n\n",
    );
    md.push_str(&idle_table.markdown());
    let _ = write_file(
        "s2-objects.svg",
        &svg::line_chart(
            "S2: median tick time against objects",
            "objects",
            "tick ms",
            &[
                Series {
                    name: "10% dirty".into(),
                    points: obj_dirty,
                },
                Series {
                    name: "0% dirty".into(),
                    points: obj_idle,
                },
            ],
        ),
    );
    let _ = write_file(
        "s2-connections.svg",
        &svg::line_chart(
            "S2: median tick time against connections",
            "connections",
            "tick ms",
            &[
                Series {
                    name: "10% dirty".into(),
                    points: conn_dirty,
                },
                Series {
                    name: "0% dirty".into(),
                    points: conn_idle,
                },
            ],
        ),
    );
    let json = Json::obj(vec![
        ("scenario", Json::str("s2")),
        ("variants", Json::Arr(json_rows)),
        ("scale", Json::Arr(scale_json)),
        (
            "scale_objects_growth",
            Json::opt(growth.map(|(_, _, ratio)| ratio)),
        ),
        (
            "idle",
            Json::obj(vec![
                ("objects", Json::Num(idle_objects as f64)),
                ("connections", Json::Num(idle_connections as f64)),
                ("median_tick_cpu_ns", Json::Num(idle.tick_ns)),
                ("median_tick_wall_ns", Json::Num(idle.tick_wall_ns)),
            ]),
        ),
    ]);
    let _ = write_file("s2.md", &md);
    let _ = write_file("s2.json", &json.render());
    Ok(Outcome { markdown: md, json })
}
