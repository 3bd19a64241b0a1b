//! S1 "arena" — bandwidth. 32 players, 50 projectiles, 8 vehicles
//! ([`replicate_examples::arena_world`]), one receiving client that owns player 0, 30 Hz,
//! 900 measured ticks after 60 warm-up ticks, everything in scope.
//!
//! Variants, measured in the same run from the same seeded motion:
//! 1. replicate with delta compression against acked baselines ([`DeltaMode::On`];
//!    the row reads "pending" in a build without the `delta` layer);
//! 2. replicate without delta compression;
//! 3. the bevy_replicon model: each entity with any change sends its changed
//!    components in full, postcard-encoded `f32`s, with an entity id;
//! 4. a bitcode full snapshot per tick;
//! 5. the empirical entropy bounds ([`super::entropy`]).
//! 6. the bounds' own samples range-coded per tick ([`super::range_coding`]; a
//!    measurement, not the wire format).

use super::entropy::EntropyMeter;
use super::range_coding::{self, SymbolLog};
pub use super::{DeltaMode, replication_config};
use super::{LinkConditions, Outcome, SanityError, Traffic, baseline_wire, ensure, mean_p95};
use crate::report::{Json, Table, f, svg, write_file};
use replicate::serialize::VectorConfig;
use replicate::{NetRefHandle, Replicated};
use replicate_examples::arena_world::{ArenaWorld, Player, Projectile, Vehicle};
use std::time::Duration;

/// Parameters of a run.
#[derive(Debug, Clone, Copy)]
pub struct S1Params {
    /// Warm-up ticks (not measured).
    pub warmup: usize,
    /// Measured ticks.
    pub ticks: usize,
    /// Motion seed.
    pub seed: u64,
}

impl S1Params {
    /// The full scenario: 60 warm-up and 900 measured ticks.
    pub const FULL: S1Params = S1Params {
        warmup: 60,
        ticks: 900,
        seed: 0x5EED_0001,
    };
    /// The CI smoke run.
    pub const QUICK: S1Params = S1Params {
        warmup: 30,
        ticks: 150,
        seed: 0x5EED_0001,
    };
}

const TICK: Duration = Duration::from_nanos(33_333_333);
const DT: f32 = 1.0 / 30.0;

/// Bytes per measured tick of one variant.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Wire bytes per tick.
    pub wire: Vec<f64>,
    /// Payload bytes per tick (replication data only, for replicate).
    pub payload: Vec<f64>,
}

/// Everything one replicate run measured.
#[derive(Debug, Clone)]
pub struct ReplicateRun {
    /// Bytes per tick.
    pub series: Series,
    /// Packets per tick, mean.
    pub packets_per_tick: f64,
    /// Objects checked equal on the client at the end.
    pub converged_objects: usize,
    /// Per replicated type over the measured ticks: what its batches spent.
    pub split: Vec<TypeSplit>,
    /// The batches' framing over the measured ticks, by part.
    pub framing: replicate::internals::replication::FramingBits,
}

/// What one type's object batches spent over the measured ticks.
#[derive(Debug, Clone, Default)]
pub struct TypeSplit {
    /// The type's protocol name.
    pub name: &'static str,
    /// Batches written.
    pub batches: u64,
    /// Bits of those batches.
    pub bits: u64,
    /// Of `bits`, the member values; the rest is framing (handle, batch size, header,
    /// baseline indices and prediction code, change mask).
    pub member_bits: u64,
}

/// Per-type (batches, bits, member bits) of connection `conn`'s writer so far.
fn type_counters(
    server: &replicate::internals::replication::ReplicationServer,
    conn: replicate::internals::object::ConnectionId,
) -> Vec<(&'static str, u64, u64, u64)> {
    let Some(w) = server.writer(conn) else {
        return Vec::new();
    };
    let st = w.stats();
    let registry = server.objects().registry();
    st.per_type
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let index = u16::try_from(i).ok()?;
            let name = (registry.get(index)?.descriptor)().name;
            Some((name, t.batches, t.bits, t.member_bits))
        })
        .collect()
}

struct Handles {
    players: Vec<NetRefHandle>,
    projectiles: Vec<NetRefHandle>,
    vehicles: Vec<NetRefHandle>,
}

/// Runs replicate over the arena on a lossless link with immediate acks.
pub fn replicate_run(p: S1Params, delta: DeltaMode) -> Result<ReplicateRun, SanityError> {
    replicate_run_with(p, delta, LinkConditions::default())
}

/// Acks 3 ticks late: a 100 ms round trip at 30 Hz.
pub const RTT_100MS: LinkConditions = LinkConditions {
    ack_delay_ticks: 3,
    loss: 0.0,
    seed: 0x5EED_0101,
};

/// 5 % of packets lost (seeded), acks 3 ticks late.
pub const LOSS_5_RTT_100MS: LinkConditions = LinkConditions {
    ack_delay_ticks: 3,
    loss: 0.05,
    seed: 0x5EED_0105,
};

/// Quiet ticks allowed after the measured ones for a lossy link to settle before the
/// convergence check (nothing changes any more; not measured).
const SETTLE_TICKS: usize = 60;

/// Runs replicate over the arena on a link with `conditions`. After the measured ticks
/// the link settles (every fate reported, then lossless quiet ticks) before the
/// convergence check.
pub fn replicate_run_with(
    p: S1Params,
    delta: DeltaMode,
    conditions: LinkConditions,
) -> Result<ReplicateRun, SanityError> {
    let (mut server, mut link) = super::one_client_session(delta)?;
    link.set_conditions(conditions);
    let mut world = ArenaWorld::new(p.seed);
    let spawn_err = |e| SanityError(format!("spawn: {e:?}"));
    let objects = server.objects_mut();
    let mut h = Handles {
        players: Vec::new(),
        projectiles: Vec::new(),
        vehicles: Vec::new(),
    };
    for pl in &world.players {
        h.players
            .push(objects.spawn(pl.clone()).map_err(spawn_err)?);
    }
    objects
        .set_owner_connection(h.players[0], Some(link.conn))
        .map_err(|e| SanityError(format!("owner: {e:?}")))?;
    for pr in &world.projectiles {
        h.projectiles
            .push(objects.spawn(pr.state.clone()).map_err(spawn_err)?);
    }
    for v in &world.vehicles {
        h.vehicles
            .push(objects.spawn(v.state.clone()).map_err(spawn_err)?);
    }
    let mut now = Duration::ZERO;
    let mut series = Series::default();
    let mut packets = 0usize;
    let mut counters_at_warmup = Vec::new();
    let conn = link.conn;
    let framing_of = |server: &replicate::internals::replication::ReplicationServer| {
        server
            .writer(conn)
            .map(|w| w.stats().framing.clone())
            .unwrap_or_default()
    };
    let mut framing_at_warmup = Default::default();
    for tick in 0..p.warmup + p.ticks {
        if tick == p.warmup {
            counters_at_warmup = type_counters(&server, link.conn);
            framing_at_warmup = framing_of(&server);
        }
        let events = world.step(DT);
        let objects = server.objects_mut();
        for (i, pl) in world.players.iter().enumerate() {
            if let Some(o) = objects.get_mut::<Player>(h.players[i]) {
                o.clone_from(pl);
            }
        }
        for (i, pr) in world.projectiles.iter().enumerate() {
            if events.respawned_projectiles.contains(&i) {
                let _ = objects.destroy(h.projectiles[i]);
                h.projectiles[i] = objects.spawn(pr.state.clone()).map_err(spawn_err)?;
            } else if let Some(o) = objects.get_mut::<Projectile>(h.projectiles[i]) {
                o.clone_from(&pr.state);
            }
        }
        for (i, v) in world.vehicles.iter().enumerate() {
            if let Some(o) = objects.get_mut::<Vehicle>(h.vehicles[i]) {
                o.clone_from(&v.state);
            }
        }
        now += TICK;
        server.tick(now);
        let t: Traffic = link.send(&mut server, now, 16);
        if tick >= p.warmup {
            series.wire.push(t.wire_bytes as f64);
            series.payload.push(t.payload_bits as f64 / 8.0);
            packets += t.packets;
        }
    }
    let framing = {
        let (end, start): (replicate::internals::replication::FramingBits, _) =
            (framing_of(&server), framing_at_warmup);
        replicate::internals::replication::FramingBits {
            index: end.index - start.index,
            form: end.form - start.form,
            flags: end.flags - start.flags,
            head: end.head - start.head,
            mask: end.mask - start.mask,
        }
    };
    let split = type_counters(&server, link.conn)
        .into_iter()
        .map(|(name, batches, bits, member_bits)| {
            let before = counters_at_warmup
                .iter()
                .find(|c| c.0 == name)
                .map_or((0, 0, 0), |c| (c.1, c.2, c.3));
            TypeSplit {
                name,
                batches: batches - before.0,
                bits: bits - before.1,
                member_bits: member_bits - before.2,
            }
        })
        .filter(|s| s.batches > 0)
        .collect();
    if conditions != LinkConditions::default() {
        link.settle(&mut server);
        link.set_conditions(LinkConditions::default());
        for _ in 0..SETTLE_TICKS {
            now += TICK;
            server.tick(now);
            link.send(&mut server, now, 16);
        }
    }
    // Convergence: every object on the client carries the server's quantized values.
    let client = link
        .client
        .as_ref()
        .ok_or(SanityError("no client".into()))?;
    let mut converged = 0;
    for (i, &hd) in h.players.iter().enumerate() {
        let c = client
            .get::<Player>(hd)
            .ok_or_else(|| SanityError(format!("player {i} missing on the client")))?;
        let s = &world.players[i];
        ensure(
            quantized(c) == quantized(s)
                && c.health == s.health
                && c.weapon == s.weapon
                && c.name == s.name
                && (i != 0 || c.ammo == s.ammo),
            || format!("player {i} differs: {c:?} vs {s:?}"),
        )?;
        converged += 1;
    }
    for (i, &hd) in h.projectiles.iter().enumerate() {
        let c = client
            .get::<Projectile>(hd)
            .ok_or_else(|| SanityError(format!("projectile {i} missing on the client")))?;
        let s = &world.projectiles[i].state;
        let mut a = <Projectile as Replicated>::State::default();
        let mut b = <Projectile as Replicated>::State::default();
        c.quantize(&mut a);
        s.quantize(&mut b);
        ensure(a == b, || format!("projectile {i} differs"))?;
        converged += 1;
    }
    for (i, &hd) in h.vehicles.iter().enumerate() {
        let c = client
            .get::<Vehicle>(hd)
            .ok_or_else(|| SanityError(format!("vehicle {i} missing on the client")))?;
        let mut a = <Vehicle as Replicated>::State::default();
        let mut b = <Vehicle as Replicated>::State::default();
        c.quantize(&mut a);
        world.vehicles[i].state.quantize(&mut b);
        ensure(a == b, || format!("vehicle {i} differs"))?;
        converged += 1;
    }
    ensure(client.len() == converged, || {
        format!(
            "client holds {} objects, expected {converged}",
            client.len()
        )
    })?;
    Ok(ReplicateRun {
        series,
        packets_per_tick: packets as f64 / p.ticks as f64,
        converged_objects: converged,
        split,
        framing,
    })
}

fn quantized(p: &Player) -> (Vec<u32>, u64, u64) {
    let mut s = <Player as Replicated>::State::default();
    p.quantize(&mut s);
    let mut v = s.position.to_vec();
    v.extend_from_slice(&s.velocity);
    (v, u64::from(s.yaw), u64::from(s.pitch))
}

// ---------------------------------------------------------------------------------
// Baselines.

/// A bevy_replicon-style component: its id and its postcard bytes.
fn components_player(p: &Player, owner: bool) -> Vec<Vec<u8>> {
    let enc = |v: &dyn erased::Ser| v.bytes();
    let mut c = vec![
        enc(&p.position.to_array()),
        enc(&p.velocity.to_array()),
        enc(&[p.yaw, p.pitch]),
        enc(&p.health),
        enc(&p.weapon),
    ];
    if owner {
        c.push(enc(&p.ammo));
    }
    c
}

fn components_projectile(p: &Projectile) -> Vec<Vec<u8>> {
    vec![
        erased::Ser::bytes(&p.position.to_array()),
        erased::Ser::bytes(&p.velocity.to_array()),
    ]
}

fn components_vehicle(v: &Vehicle) -> Vec<Vec<u8>> {
    vec![
        erased::Ser::bytes(&v.position.to_array()),
        erased::Ser::bytes(&v.velocity.to_array()),
        erased::Ser::bytes(&v.rotation.to_array()),
    ]
}

/// The replicon model with every component quantized to the member's precision first
/// (the quantized integers, postcard varints): changes below the precision send
/// nothing, and the values are as small as postcard can make them.
fn qcomponents_player(p: &Player, owner: bool) -> Vec<Vec<u8>> {
    let mut s = <Player as Replicated>::State::default();
    p.quantize(&mut s);
    let enc = |v: &dyn erased::Ser| v.bytes();
    let mut c = vec![
        enc(&s.position),
        enc(&s.velocity),
        enc(&(s.yaw, s.pitch)),
        enc(&s.health),
        enc(&s.weapon),
    ];
    if owner {
        c.push(enc(&s.ammo));
    }
    c
}

fn qcomponents_projectile(p: &Projectile) -> Vec<Vec<u8>> {
    let mut s = <Projectile as Replicated>::State::default();
    p.quantize(&mut s);
    vec![
        erased::Ser::bytes(&s.position),
        erased::Ser::bytes(&s.velocity),
    ]
}

fn qcomponents_vehicle(v: &Vehicle) -> Vec<Vec<u8>> {
    let mut s = <Vehicle as Replicated>::State::default();
    v.quantize(&mut s);
    vec![
        erased::Ser::bytes(&s.position),
        erased::Ser::bytes(&s.velocity),
        erased::Ser::bytes(&(s.rotation.largest, s.rotation.components)),
    ]
}

/// Appends one entity's changed components (`now` against `prev`, all of them when
/// `all`) to a replicon-model message and makes `now` the new `prev`.
fn replicon_changes(
    out: &mut Vec<u8>,
    entity: u64,
    prev: &mut Vec<Vec<u8>>,
    now: Vec<Vec<u8>>,
    all: bool,
) {
    let changed: Vec<(usize, &[u8])> = now
        .iter()
        .enumerate()
        .filter(|(k, c)| all || prev.get(*k) != Some(*c))
        .map(|(k, c)| (k, c.as_slice()))
        .collect();
    replicon_entity(out, entity, &changed);
    *prev = now;
}

mod erased {
    /// postcard-encodes a value (the components of the replicon model).
    pub trait Ser {
        fn bytes(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn bytes(&self) -> Vec<u8> {
            postcard::to_allocvec(self).unwrap_or_default()
        }
    }
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The replicon model's message for one entity: entity id, then per changed component
/// its id and postcard bytes, prefixed by the entity's data size.
fn replicon_entity(out: &mut Vec<u8>, entity: u64, changed: &[(usize, &[u8])]) {
    if changed.is_empty() {
        return;
    }
    push_varint(out, entity);
    let mut data = Vec::new();
    for (id, bytes) in changed {
        push_varint(&mut data, *id as u64);
        data.extend_from_slice(bytes);
    }
    push_varint(out, data.len() as u64);
    out.extend_from_slice(&data);
}

#[derive(bitcode::Encode)]
struct PlayerSnap {
    id: u32,
    position: [f32; 3],
    velocity: [f32; 3],
    yaw: f32,
    pitch: f32,
    health: u8,
    ammo: u8,
    weapon: u8,
}

#[derive(bitcode::Encode)]
struct BodySnap {
    id: u32,
    position: [f32; 3],
    velocity: [f32; 3],
}

#[derive(bitcode::Encode)]
struct VehicleSnap {
    id: u32,
    position: [f32; 3],
    velocity: [f32; 3],
    rotation: [f32; 4],
}

#[derive(bitcode::Encode)]
struct Snapshot {
    tick: u32,
    players: Vec<PlayerSnap>,
    projectiles: Vec<BodySnap>,
    vehicles: Vec<VehicleSnap>,
}

/// The baselines and the entropy bounds, from the same motion.
#[derive(Debug, Clone, Default)]
pub struct BaselineRun {
    /// bevy_replicon model (postcard, whole changed components).
    pub replicon: Series,
    /// The same with the components quantized to the members' precision first.
    pub replicon_quantized: Series,
    /// bitcode full snapshot.
    pub bitcode: Series,
    /// Entropy bound bytes per tick, first differences.
    pub entropy_first: f64,
    /// Entropy bound bytes per tick, second differences.
    pub entropy_second: f64,
    /// Samples behind the entropy bounds.
    pub entropy_samples: u64,
    /// The moonshot measurement: the same samples range-coded ([`range_coding`]).
    pub range_coded: Vec<range_coding::Measured>,
}

/// Channels of the entropy meter: per type, per member component.
const PLAYER_CH: usize = 0; // position 3, velocity 3, yaw, pitch, health, ammo, weapon = 11
const PROJ_CH: usize = 11; // position 3, velocity 3 = 6
const VEH_CH: usize = 17; // position 3, velocity 3, rotation largest + 3 = 10
const CHANNELS: usize = 27;

/// Quantized components of each object, grouped by member: `(first channel, values)`.
fn player_members(p: &Player, owner: bool) -> Vec<(usize, Vec<i64>)> {
    let mut s = <Player as Replicated>::State::default();
    p.quantize(&mut s);
    let v = |a: [u32; 3]| a.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
    let mut m = vec![
        (PLAYER_CH, v(s.position)),
        (PLAYER_CH + 3, v(s.velocity)),
        (PLAYER_CH + 6, vec![s.yaw as i64]),
        (PLAYER_CH + 7, vec![s.pitch as i64]),
        (PLAYER_CH + 8, vec![s.health as i64]),
        (PLAYER_CH + 10, vec![s.weapon as i64]),
    ];
    if owner {
        m.push((PLAYER_CH + 9, vec![s.ammo as i64]));
    }
    m
}

fn projectile_members(p: &Projectile) -> Vec<(usize, Vec<i64>)> {
    let mut s = <Projectile as Replicated>::State::default();
    p.quantize(&mut s);
    let v = |a: [u32; 3]| a.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
    vec![(PROJ_CH, v(s.position)), (PROJ_CH + 3, v(s.velocity))]
}

fn vehicle_members(x: &Vehicle) -> Vec<(usize, Vec<i64>)> {
    let mut s = <Vehicle as Replicated>::State::default();
    x.quantize(&mut s);
    let v = |a: [u32; 3]| a.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
    let r = s.rotation;
    let mut rot = vec![i64::from(r.largest)];
    rot.extend(r.components.iter().map(|&c| i64::from(c)));
    vec![
        (VEH_CH, v(s.position)),
        (VEH_CH + 3, v(s.velocity)),
        (VEH_CH + 6, rot),
    ]
}

/// Previous quantized values and first differences of one object.
#[derive(Default, Clone)]
struct Track {
    members: Vec<(usize, Vec<i64>)>,
    diffs: Vec<Vec<i64>>,
}

impl Track {
    /// Records the changed members of `now` against the previous tick.
    fn update(&mut self, now: Vec<(usize, Vec<i64>)>, meter: &mut EntropyMeter, measure: bool) {
        if self.diffs.len() != now.len() {
            self.diffs = now.iter().map(|(_, v)| vec![0; v.len()]).collect();
        }
        if let Some(log) = meter.symbols.as_mut() {
            log.begin_object(now.first().map_or(0, |m| m.0));
        }
        for (k, (ch, vals)) in now.iter().enumerate() {
            let prev = self.members.get(k).map(|m| &m.1);
            let d1: Vec<i64> = match prev {
                Some(p) => vals.iter().zip(p).map(|(a, b)| a - b).collect(),
                None => vec![0; vals.len()],
            };
            if let Some(log) = meter.symbols.as_mut().filter(|_| measure) {
                log.member(*ch, *ch, vals.len(), d1.iter().any(|&d| d != 0));
            }
            if measure && d1.iter().any(|&d| d != 0) {
                for (j, &d) in d1.iter().enumerate() {
                    meter.record(ch + j, d, d - self.diffs[k][j]);
                    if let Some(log) = meter.symbols.as_mut() {
                        log.component(d, d - self.diffs[k][j]);
                    }
                }
            }
            self.diffs[k] = d1;
        }
        self.members = now;
    }
}

/// Bits of a projectile's creation at replicate's quantization (no delta possible).
fn projectile_creation_bits() -> f64 {
    let pos = VectorConfig::with_precision(-512.0, 512.0, 0.01).component_bits();
    let vel = VectorConfig::with_precision(-64.0, 64.0, 0.01).component_bits();
    f64::from(3 * pos + 3 * vel)
}

/// Runs the baselines and the entropy meter over the same seeded motion.
pub fn baseline_run(p: S1Params) -> BaselineRun {
    let mut world = ArenaWorld::new(p.seed);
    let mut out = BaselineRun::default();
    let mut meter = EntropyMeter::new(CHANNELS);
    let mut creation_bits = 0.0;
    // Entity ids: players 0..32, vehicles 32..40, projectiles from 40 up (new per spawn).
    let np = world.players.len();
    let nv = world.vehicles.len();
    let mut proj_ids: Vec<u64> = (0..world.projectiles.len() as u64)
        .map(|i| (np + nv) as u64 + i)
        .collect();
    let mut next_id = (np + nv + world.projectiles.len()) as u64;
    let mut prev_players: Vec<Vec<Vec<u8>>> = world
        .players
        .iter()
        .enumerate()
        .map(|(i, pl)| components_player(pl, i == 0))
        .collect();
    let mut prev_proj: Vec<Vec<Vec<u8>>> = world
        .projectiles
        .iter()
        .map(|x| components_projectile(&x.state))
        .collect();
    let mut prev_veh: Vec<Vec<Vec<u8>>> = world
        .vehicles
        .iter()
        .map(|x| components_vehicle(&x.state))
        .collect();
    let mut qprev_players: Vec<Vec<Vec<u8>>> = world
        .players
        .iter()
        .enumerate()
        .map(|(i, pl)| qcomponents_player(pl, i == 0))
        .collect();
    let mut qprev_proj: Vec<Vec<Vec<u8>>> = world
        .projectiles
        .iter()
        .map(|x| qcomponents_projectile(&x.state))
        .collect();
    let mut qprev_veh: Vec<Vec<Vec<u8>>> = world
        .vehicles
        .iter()
        .map(|x| qcomponents_vehicle(&x.state))
        .collect();
    let mut seq_q = 0u64;
    let mut t_players: Vec<Track> = vec![Track::default(); np];
    let mut t_proj: Vec<Track> = vec![Track::default(); world.projectiles.len()];
    let mut t_veh: Vec<Track> = vec![Track::default(); nv];
    for (i, pl) in world.players.iter().enumerate() {
        t_players[i].update(player_members(pl, i == 0), &mut meter, false);
    }
    for (i, x) in world.projectiles.iter().enumerate() {
        t_proj[i].update(projectile_members(&x.state), &mut meter, false);
    }
    for (i, x) in world.vehicles.iter().enumerate() {
        t_veh[i].update(vehicle_members(&x.state), &mut meter, false);
    }
    let (mut seq_r, mut seq_b) = (0u64, 0u64);
    meter.symbols = Some(SymbolLog::default());
    for tick in 0..p.warmup + p.ticks {
        let measure = tick >= p.warmup;
        let events = world.step(DT);
        // bevy_replicon model.
        let mut msg = Vec::new();
        let mut despawns = Vec::new();
        for (i, pl) in world.players.iter().enumerate() {
            let now = components_player(pl, i == 0);
            let changed: Vec<(usize, &[u8])> = now
                .iter()
                .enumerate()
                .filter(|(k, c)| prev_players[i][*k] != **c)
                .map(|(k, c)| (k, c.as_slice()))
                .collect();
            replicon_entity(&mut msg, i as u64, &changed);
            prev_players[i] = now;
            t_players[i].update(player_members(pl, i == 0), &mut meter, measure);
        }
        for (i, x) in world.projectiles.iter().enumerate() {
            let now = components_projectile(&x.state);
            if events.respawned_projectiles.contains(&i) {
                despawns.push(proj_ids[i]);
                proj_ids[i] = next_id;
                next_id += 1;
                let all: Vec<(usize, &[u8])> = now
                    .iter()
                    .enumerate()
                    .map(|(k, c)| (k, c.as_slice()))
                    .collect();
                replicon_entity(&mut msg, proj_ids[i], &all);
                t_proj[i] = Track::default();
                t_proj[i].update(projectile_members(&x.state), &mut meter, false);
                if measure {
                    creation_bits += projectile_creation_bits();
                    if let Some(log) = meter.symbols.as_mut() {
                        log.created(projectile_creation_bits());
                    }
                }
            } else {
                let changed: Vec<(usize, &[u8])> = now
                    .iter()
                    .enumerate()
                    .filter(|(k, c)| prev_proj[i][*k] != **c)
                    .map(|(k, c)| (k, c.as_slice()))
                    .collect();
                replicon_entity(&mut msg, proj_ids[i], &changed);
                t_proj[i].update(projectile_members(&x.state), &mut meter, measure);
            }
            prev_proj[i] = now;
        }
        for (i, x) in world.vehicles.iter().enumerate() {
            let now = components_vehicle(&x.state);
            let changed: Vec<(usize, &[u8])> = now
                .iter()
                .enumerate()
                .filter(|(k, c)| prev_veh[i][*k] != **c)
                .map(|(k, c)| (k, c.as_slice()))
                .collect();
            replicon_entity(&mut msg, (np + i) as u64, &changed);
            prev_veh[i] = now;
            t_veh[i].update(vehicle_members(&x.state), &mut meter, measure);
        }
        // The same model on quantized components.
        let mut qmsg = Vec::new();
        for (i, pl) in world.players.iter().enumerate() {
            let now = qcomponents_player(pl, i == 0);
            replicon_changes(&mut qmsg, i as u64, &mut qprev_players[i], now, false);
        }
        for (i, x) in world.projectiles.iter().enumerate() {
            let now = qcomponents_projectile(&x.state);
            let respawned = events.respawned_projectiles.contains(&i);
            replicon_changes(&mut qmsg, proj_ids[i], &mut qprev_proj[i], now, respawned);
        }
        for (i, x) in world.vehicles.iter().enumerate() {
            let now = qcomponents_vehicle(&x.state);
            replicon_changes(&mut qmsg, (np + i) as u64, &mut qprev_veh[i], now, false);
        }
        for &d in &despawns {
            push_varint(&mut qmsg, d);
        }
        let (_, replicon_q_wire) = baseline_wire(qmsg.len(), &mut seq_q);
        for d in despawns {
            push_varint(&mut msg, d);
        }
        let (_, replicon_wire) = baseline_wire(msg.len(), &mut seq_r);
        // bitcode full snapshot.
        let snap = Snapshot {
            tick: tick as u32,
            players: world
                .players
                .iter()
                .enumerate()
                .map(|(i, pl)| PlayerSnap {
                    id: i as u32,
                    position: pl.position.to_array(),
                    velocity: pl.velocity.to_array(),
                    yaw: pl.yaw,
                    pitch: pl.pitch,
                    health: pl.health,
                    ammo: if i == 0 { pl.ammo } else { 0 },
                    weapon: pl.weapon,
                })
                .collect(),
            projectiles: world
                .projectiles
                .iter()
                .enumerate()
                .map(|(i, x)| BodySnap {
                    id: proj_ids[i] as u32,
                    position: x.state.position.to_array(),
                    velocity: x.state.velocity.to_array(),
                })
                .collect(),
            vehicles: world
                .vehicles
                .iter()
                .enumerate()
                .map(|(i, x)| VehicleSnap {
                    id: (np + i) as u32,
                    position: x.state.position.to_array(),
                    velocity: x.state.velocity.to_array(),
                    rotation: x.state.rotation.to_array(),
                })
                .collect(),
        };
        let bytes = bitcode::encode(&snap);
        let (_, bitcode_wire) = baseline_wire(bytes.len(), &mut seq_b);
        if let Some(log) = meter.symbols.as_mut() {
            log.end_tick(measure);
        }
        if measure {
            out.replicon.wire.push(replicon_wire as f64);
            out.replicon.payload.push(msg.len() as f64);
            out.replicon_quantized.wire.push(replicon_q_wire as f64);
            out.replicon_quantized.payload.push(qmsg.len() as f64);
            out.bitcode.wire.push(bitcode_wire as f64);
            out.bitcode.payload.push(bytes.len() as f64);
        }
    }
    let ticks = p.ticks.max(1) as f64;
    out.entropy_first = (meter.first_bits() + creation_bits) / 8.0 / ticks;
    out.entropy_second = (meter.second_bits() + creation_bits) / 8.0 / ticks;
    out.entropy_samples = meter.samples();
    out.range_coded = match meter.symbols.as_ref().map(range_coding::measure_all) {
        Some(Ok(rows)) => rows,
        Some(Err(e)) => panic!("{e}"),
        None => Vec::new(),
    };
    out
}

/// The per-type framing/member split of replicate's runs, as markdown.
fn split_table(p: S1Params, runs: &[(&str, &ReplicateRun)]) -> String {
    let mut t = Table::new(&[
        "run",
        "type",
        "batches/tick",
        "payload B/tick",
        "framing B/tick",
        "members B/tick",
        "framing bits/batch",
        "member bits/batch",
    ]);
    let ticks = p.ticks.max(1) as f64;
    for (run, r) in runs {
        let mut total = TypeSplit {
            name: "all",
            ..TypeSplit::default()
        };
        let mut rows: Vec<TypeSplit> = r.split.clone();
        for sp in &r.split {
            total.batches += sp.batches;
            total.bits += sp.bits;
            total.member_bits += sp.member_bits;
        }
        rows.push(total);
        for sp in rows {
            let framing = sp.bits - sp.member_bits.min(sp.bits);
            let per = sp.batches.max(1) as f64;
            t.row(vec![
                run.to_string(),
                sp.name.to_string(),
                f(sp.batches as f64 / ticks, 1),
                f(sp.bits as f64 / 8.0 / ticks, 0),
                f(framing as f64 / 8.0 / ticks, 0),
                f(sp.member_bits as f64 / 8.0 / ticks, 0),
                f(framing as f64 / per, 1),
                f(sp.member_bits as f64 / per, 1),
            ]);
        }
    }
    let mut parts = Table::new(&[
        "run",
        "object index",
        "form + size",
        "long-form flags, tags",
        "head",
        "change mask",
        "members",
    ]);
    for (run, r) in runs {
        let batches: u64 = r.split.iter().map(|s| s.batches).sum();
        let members: u64 = r.split.iter().map(|s| s.member_bits).sum();
        let per = |bits: u64| f(bits as f64 / batches.max(1) as f64, 2);
        let fr = &r.framing;
        parts.row(vec![
            run.to_string(),
            per(fr.index),
            per(fr.form),
            per(fr.flags),
            per(fr.head),
            per(fr.mask),
            per(members),
        ]);
    }
    format!(
        "\nObject batches per type (measured ticks; payload = the batches, without the \
         packet's stream framing and destroys; framing = object index, form and size, \
         flags, head (baseline reference, nomination, prediction code), change mask):\n\n{}\n\
         Bits per batch by part (measured ticks, every type):\n\n{}",
        t.markdown(),
        parts.markdown()
    )
}

/// What the range-coded rows model and leave out, with their CPU cost, as markdown.
fn range_coding_note(base: &BaselineRun) -> String {
    let mut cpu = String::new();
    for m in &base.range_coded {
        cpu.push_str(&format!(
            "\n- {}: {:.1} bits per changed object, of which about {:.1} presence and mask \
             ({:.1} B/tick); {} residuals and {} presence/mask bits; encode {:.1} ns and \
             decode {:.1} ns per residual ({:.1} and {:.1} per coded symbol)",
            m.name(),
            m.bits_per_changed_object(),
            m.framing_bytes as f64 * 8.0 / m.changed_objects.max(1) as f64,
            m.framing_bytes as f64 / m.payload.len().max(1) as f64,
            m.residuals,
            m.framing_symbols,
            m.encode_ns_per_residual,
            m.decode_ns_per_residual,
            m.encode_ns_per_symbol,
            m.decode_ns_per_symbol
        ));
    }
    format!(
        "\nThe adaptive range coding rows (`scenarios::range_coding`, a measurement, not the \
         wire format) code the entropy meter's own samples with an LZMA-style binary range \
         coder (11-bit probabilities, shift-5 adaptation), one buffer per tick, decoded back \
         and checked equal. Per tick: per object slot in index order one adaptive \
         \"changed\" bit (context per type); per changed object one adaptive bit per member \
         (context per type and member; the last is implied when no other changed); per \
         changed member component its residual in an adaptive Exp-Golomb binarisation \
         (bucket in unary, context per channel and position; sign per channel; two \
         mantissa bits below the leading one per channel and bucket; the rest raw). \
         Projectile creations are added at their raw quantized size (93 bits), as the \
         bounds count them; destroys, object ids of new objects, the stream framing and \
         player 0's ownership are not modelled. Payload = coded bytes + creations; \
         B/tick = the payload in whole bytes split at the MTU, each packet with the \
         byte-aligned connection header and netcode.io's overhead, as the baselines pay \
         it. \"Carried\" models live across packets (the link is lossless with instant \
         acks; under loss both ends would need per-packet model snapshots), \"fresh\" \
         models restart every packet. The \"temporal contexts\" rows add per-object \
         history to the carried model: the presence bit conditions on whether the object \
         changed in the previous packet, the bucket code on the bucket the same component \
         had when last coded (capped at 11); that history is model state too. The bounds pay nothing for presence or masks and \
         know the run's histogram in advance; the coder pays for both and learns online \
         (which also follows drift within the run, so its residuals alone may land below \
         the whole-run order-0 bound). CPU (wall time over the whole run, `Instant`):{cpu}\n"
    )
}

/// Runs S1, writes `s1.{md,json,svg}` and returns the outcome; errors on failed sanity
/// checks (no traffic, no convergence, replicate not smaller than the postcard model).
pub fn run(p: S1Params) -> Result<Outcome, SanityError> {
    let with_delta = replicate_run(p, DeltaMode::On)?;
    let late_acks = replicate_run_with(p, DeltaMode::On, RTT_100MS)?;
    let lossy = replicate_run_with(p, DeltaMode::On, LOSS_5_RTT_100MS)?;
    let without = replicate_run(p, DeltaMode::Off)?;
    let base = baseline_run(p);
    let (rm, _) = mean_p95(&without.series.wire);
    let (cm, _) = mean_p95(&base.replicon.wire);
    ensure(rm > 0.0, || "replicate sent nothing".into())?;
    ensure(rm < cm, || {
        format!("replicate ({rm:.0} B/tick) not smaller than the postcard model ({cm:.0})")
    })?;
    let mut table = Table::new(&[
        "variant",
        "mean B/tick",
        "p95 B/tick",
        "mean payload B/tick",
        "vs replicate (no delta)",
    ]);
    let mut bars = Vec::new();
    let mut json_rows = Vec::new();
    let mut add = |name: &str, s: &Series, table: &mut Table| {
        let (m, p95) = mean_p95(&s.wire);
        let (pm, _) = mean_p95(&s.payload);
        table.row(vec![
            name.into(),
            f(m, 0),
            f(p95, 0),
            f(pm, 0),
            format!("{:.2}×", m / rm),
        ]);
        bars.push((name.to_string(), Some(m)));
        json_rows.push(Json::obj(vec![
            ("variant", Json::str(name)),
            ("mean_wire_bytes_per_tick", Json::Num(m)),
            ("p95_wire_bytes_per_tick", Json::Num(p95)),
            ("mean_payload_bytes_per_tick", Json::Num(pm)),
        ]));
    };
    add(
        "replicate (delta vs acked baselines)",
        &with_delta.series,
        &mut table,
    );
    add(
        "replicate (delta), acks 3 ticks late (100 ms RTT)",
        &late_acks.series,
        &mut table,
    );
    add(
        "replicate (delta), 5 % loss, 100 ms RTT",
        &lossy.series,
        &mut table,
    );
    add("replicate (no delta)", &without.series, &mut table);
    add(
        "bevy_replicon model (postcard, changed components)",
        &base.replicon,
        &mut table,
    );
    add(
        "bevy_replicon model + quantization (postcard of quantized components)",
        &base.replicon_quantized,
        &mut table,
    );
    add("bitcode full snapshot", &base.bitcode, &mut table);
    let e1 = base.entropy_first;
    let e2 = base.entropy_second;
    // The bounds are compared with the best replicate row (delta).
    let best = &with_delta.series;
    let (rm, _) = mean_p95(&best.wire);
    let (rpm, _) = mean_p95(&best.payload);
    let best_name = "replicate (delta)";
    table.row(vec![
        "entropy bound, 1st differences".into(),
        f(e1, 0),
        "—".into(),
        f(e1, 0),
        format!(
            "{best_name} / bound = {:.2} (payload {:.2})",
            rm / e1,
            rpm / e1
        ),
    ]);
    table.row(vec![
        "entropy bound, 2nd differences".into(),
        f(e2, 0),
        "—".into(),
        f(e2, 0),
        format!(
            "{best_name} / bound = {:.2} (payload {:.2})",
            rm / e2,
            rpm / e2
        ),
    ]);
    for m in &base.range_coded {
        let (wm, wp95) = mean_p95(&m.wire);
        let (pm, _) = mean_p95(&m.payload);
        let (bound, label) = match m.diff {
            range_coding::Diff::First => (e1, "1st"),
            range_coding::Diff::Second => (e2, "2nd"),
        };
        table.row(vec![
            m.name(),
            f(wm, 0),
            f(wp95, 0),
            f(pm, 1),
            format!("payload / bound ({label} differences) = {:.2}", pm / bound),
        ]);
    }
    bars.push(("entropy bound (1st diff)".into(), Some(e1)));
    bars.push(("entropy bound (2nd diff)".into(), Some(e2)));
    let mut md = String::new();
    md.push_str(&format!(
        "### S1 arena — bytes per tick on the wire ({} measured ticks at 30 Hz after {} warm-up, 32 players / 50 projectiles / 8 vehicles, 1 client owning player 0)\n\n",
        p.ticks, p.warmup
    ));
    md.push_str(&table.markdown());
    md.push_str(&format!(
        "\nreplicate (no delta): {:.2} packets per tick; {} objects checked equal on the client at the end. \
         Entropy bounds: {} sampled member components; projectile creations counted at their quantized size. \
         Reference (different motion model, indicative only): naia 0.25 measured 2310 B/tick (3304 naive).\n",
        without.packets_per_tick, without.converged_objects, base.entropy_samples
    ));
    md.push_str(&range_coding_note(&base));
    md.push_str(&split_table(
        p,
        &[
            ("delta", &with_delta),
            ("delta, 100 ms RTT", &late_acks),
            ("delta, 5 % loss", &lossy),
            ("no delta", &without),
        ],
    ));
    let json = Json::obj(vec![
        ("scenario", Json::str("s1")),
        ("warmup_ticks", Json::Num(p.warmup as f64)),
        ("measured_ticks", Json::Num(p.ticks as f64)),
        ("variants", Json::Arr(json_rows)),
        ("entropy_first_bytes_per_tick", Json::Num(e1)),
        ("entropy_second_bytes_per_tick", Json::Num(e2)),
        ("entropy_samples", Json::Num(base.entropy_samples as f64)),
        (
            "range_coding",
            Json::Arr(base.range_coded.iter().map(|m| m.json()).collect()),
        ),
        (
            "replicate_packets_per_tick",
            Json::Num(without.packets_per_tick),
        ),
        (
            "converged_objects",
            Json::Num(without.converged_objects as f64),
        ),
    ]);
    let chart = svg::bar_chart("S1 arena: mean bytes per tick on the wire", "B", &bars);
    let _ = write_file("s1.svg", &chart);
    let _ = write_file("s1.md", &md);
    let _ = write_file("s1.json", &json.render());
    Ok(Outcome { markdown: md, json })
}
