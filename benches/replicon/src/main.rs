//! S2 "battle royale", all in scope, on the real bevy_replicon, beside replicate's S2
//! row measured in the same process (see `BENCHMARKS.md`).
//!
//! The same shape as S2: 10 000 entities (100 players: position, yaw, health, weapon;
//! 4 950 NPCs: position, yaw, health; 4 950 pickups: position, kind, amount), 100
//! connected clients that see everything, 10 % of the entities (drawn from the movers)
//! moving by up to ±50 units and turning each tick, 5 % of those also changing health.
//! The timed tick is writing the new values into the server's world and
//! `server_app.update()`, in which bevy_replicon collects the changes and writes every
//! client's messages. Outside the timed part each client receives its messages and runs
//! its own update, and its acknowledgements reach the server before the next tick (as
//! replicate's S2 reports every packet delivered before the next tick); at the end
//! client 0's positions are checked equal to the server's. Bevy runs single-threaded
//! (no `multi_threaded` feature), so the main thread's CPU time is the whole cost.
//!
//! ```text
//! cargo run --release --manifest-path benches/replicon/Cargo.toml [-- --ticks N --rounds N]
//! ```

use bevy::prelude::*;
use bevy::state::app::StatesPlugin;
use bevy_replicon::prelude::*;
use bevy_replicon::test_app::ServerTestAppExt;
use replicate_bench::Rng;
use replicate_bench::scenarios::s2::{AckTiming, ScopeMode, Setup, WORLD_SIZE, Writers, measure};
use replicate_bench::scenarios::{DeltaMode, Stopwatch, median};
use serde::{Deserialize, Serialize};

const ENTITIES: usize = 10_000;
const PLAYERS: usize = 100;
const CLIENTS: usize = 100;
const DIRTY_FRACTION: f64 = 0.1;
const SEED: u64 = 0x5EED_0002;

#[derive(Component, Serialize, Deserialize, Clone, Copy, PartialEq, Debug)]
struct Position([f32; 3]);

#[derive(Component, Serialize, Deserialize, Clone, Copy, PartialEq, Debug)]
struct Yaw(f32);

#[derive(Component, Serialize, Deserialize, Clone, Copy, PartialEq, Debug)]
struct Health(u8);

#[derive(Component, Serialize, Deserialize, Clone, Copy, PartialEq, Debug)]
struct Weapon(u8);

#[derive(Component, Serialize, Deserialize, Clone, Copy, PartialEq, Debug)]
struct ItemKind(u8);

#[derive(Component, Serialize, Deserialize, Clone, Copy, PartialEq, Debug)]
struct Amount(u8);

/// One measurement of bevy_replicon on the S2 shape.
struct RepliconMeasured {
    /// Median timed tick, thread CPU time, ns.
    tick_ns: f64,
    /// Median timed tick, wall time, ns.
    tick_wall_ns: f64,
    /// Dirty entity × client pairs per tick.
    pairs: f64,
    /// Message bytes sent per tick (all clients, all channels), mean.
    bytes: f64,
}

fn app() -> App {
    let mut app = App::new();
    app.add_plugins((
        MinimalPlugins,
        StatesPlugin,
        RepliconPlugins.set(ServerPlugin::new(PostUpdate)),
    ))
    .replicate::<Position>()
    .replicate::<Yaw>()
    .replicate::<Health>()
    .replicate::<Weapon>()
    .replicate::<ItemKind>()
    .replicate::<Amount>()
    .finish();
    app
}

/// Hands every client its messages and runs its update; returns the bytes handed over.
fn exchange(server: &mut App, clients: &mut [App]) -> usize {
    let bytes: usize = server
        .world()
        .resource::<ServerMessages>()
        .iter_sent()
        .map(|(_, _, message)| message.len())
        .sum();
    for client in clients.iter_mut() {
        server.exchange_with_client(client);
        client.update();
        // The client's acknowledgements reach the server before its next update, as
        // replicate's S2 reports every packet delivered before the next tick.
        server.exchange_with_client(client);
    }
    bytes
}

fn measure_replicon(ticks: usize) -> Result<RepliconMeasured, String> {
    let mut server = app();
    let mut clients: Vec<App> = (0..CLIENTS).map(|_| app()).collect();
    for client in &mut clients {
        server.connect_client(client);
    }
    let mut rng = Rng::new(SEED);
    let movers = PLAYERS + (ENTITIES - PLAYERS) / 2;
    let mut entities = Vec::with_capacity(ENTITIES);
    for i in 0..ENTITIES {
        let position = Position([
            rng.range_f32(0.0, WORLD_SIZE),
            rng.range_f32(0.0, WORLD_SIZE),
            0.0,
        ]);
        let extra = (i % 8) as u8;
        let world = server.world_mut();
        let e = if i < PLAYERS {
            world
                .spawn((Replicated, position, Yaw(0.0), Health(100), Weapon(extra)))
                .id()
        } else if i < movers {
            world
                .spawn((Replicated, position, Yaw(0.0), Health(100)))
                .id()
        } else {
            world
                .spawn((Replicated, position, ItemKind(extra), Amount(1)))
                .id()
        };
        entities.push(e);
    }
    // Warm-up: the creations, then a few ticks for the acknowledgements.
    for _ in 0..3 {
        server.update();
        exchange(&mut server, &mut clients);
    }
    let dirty_count = ((ENTITIES as f64 * DIRTY_FRACTION).round() as usize).min(movers);
    let mut order: Vec<usize> = (0..movers).collect();
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    let mut bytes = 0;
    for _ in 0..ticks {
        for k in 0..dirty_count {
            let j = k + rng.below((movers - k) as u64) as usize;
            order.swap(k, j);
        }
        let mut dirty = order[..dirty_count].to_vec();
        dirty.sort_unstable();
        let moves: Vec<(f32, f32, f32, Option<u8>)> = dirty
            .iter()
            .map(|_| {
                (
                    rng.range_f32(-50.0, 50.0),
                    rng.range_f32(-50.0, 50.0),
                    rng.range_f32(-180.0, 180.0),
                    rng.chance(0.05).then(|| rng.below(101) as u8),
                )
            })
            .collect();
        let watch = Stopwatch::start();
        let world = server.world_mut();
        for (&i, &(dx, dy, yaw, health)) in dirty.iter().zip(&moves) {
            let mut e = world.entity_mut(entities[i]);
            if let Some(mut p) = e.get_mut::<Position>() {
                p.0[0] = (p.0[0] + dx).clamp(0.0, WORLD_SIZE);
                p.0[1] = (p.0[1] + dy).clamp(0.0, WORLD_SIZE);
            }
            if let Some(mut y) = e.get_mut::<Yaw>() {
                y.0 = yaw;
            }
            if let (Some(h), Some(mut health_c)) = (health, e.get_mut::<Health>()) {
                health_c.0 = h;
            }
        }
        server.update();
        let (w, c) = watch.stop();
        cpu.push(c);
        wall.push(w);
        bytes += exchange(&mut server, &mut clients);
    }
    // Quiet ticks, then client 0 must hold every entity at the server's position.
    for _ in 0..3 {
        server.update();
        exchange(&mut server, &mut clients);
    }
    let mut on_server: Vec<[u32; 3]> = server
        .world_mut()
        .query::<&Position>()
        .iter(server.world())
        .map(|p| p.0.map(f32::to_bits))
        .collect();
    let mut on_client: Vec<[u32; 3]> = clients[0]
        .world_mut()
        .query_filtered::<&Position, With<Remote>>()
        .iter(clients[0].world())
        .map(|p| p.0.map(f32::to_bits))
        .collect();
    on_server.sort_unstable();
    on_client.sort_unstable();
    if on_server != on_client {
        return Err(format!(
            "bevy_replicon: client 0 holds {} positions, {} equal to the server's {}",
            on_client.len(),
            on_client
                .iter()
                .zip(&on_server)
                .filter(|(a, b)| a == b)
                .count(),
            on_server.len()
        ));
    }
    Ok(RepliconMeasured {
        tick_ns: median(&cpu),
        tick_wall_ns: median(&wall),
        pairs: (dirty_count * CLIENTS) as f64,
        bytes: bytes as f64 / ticks.max(1) as f64,
    })
}

fn main() {
    let mut ticks = 30;
    let mut rounds = 3;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        match (arg.as_str(), value) {
            ("--ticks", Some(n)) => ticks = n.max(1),
            ("--rounds", Some(n)) => rounds = n.max(1),
            _ => {
                eprintln!("usage: replicon-s2 [--ticks N] [--rounds N]");
                std::process::exit(2);
            }
        }
    }
    println!(
        "S2 all in scope, {ENTITIES} entities, {CLIENTS} clients, 10 % dirty, {ticks} ticks; \
         rounds alternate the two libraries. Thread CPU time, medians.\n"
    );
    println!(
        "| round | library | tick ms (CPU / wall) | ns per dirty object × client | bytes per pair |"
    );
    println!("|---|---|---|---:|---:|");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let r = match measure_replicon(ticks) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        let ns = r.tick_ns / r.pairs;
        theirs.push(ns);
        println!(
            "| {round} | bevy_replicon 0.44.3 | {:.2} / {:.2} | {ns:.1} | {:.2} |",
            r.tick_ns / 1e6,
            r.tick_wall_ns / 1e6,
            r.bytes / r.pairs
        );
        let m = match measure(Setup {
            objects: ENTITIES,
            players: PLAYERS,
            connections: CLIENTS,
            dirty_fraction: DIRTY_FRACTION,
            scope: ScopeMode::All,
            ticks,
            seed: SEED,
            delta: DeltaMode::On,
            acks: AckTiming::Instant,
            writers: Writers::Passes(1),
            churn: 0,
        }) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("replicate: {e}");
                std::process::exit(1);
            }
        };
        ours.push(m.ns_per_pair());
        println!(
            "| {round} | replicate (delta) | {:.2} / {:.2} | {:.1} | {:.2} |",
            m.tick_ns / 1e6,
            m.tick_wall_ns / 1e6,
            m.ns_per_pair(),
            m.bytes_per_pair()
        );
    }
    let (o, t) = (median(&ours), median(&theirs));
    println!(
        "\nMedians: bevy_replicon {t:.1} ns, replicate {o:.1} ns per pair: replicate costs {:.2}× \
         less per dirty object × client.",
        t / o
    );
}
