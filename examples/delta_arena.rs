//! S1 "arena" with and without delta compression: the arena world (32 players, 50
//! projectiles, 8 vehicles) replicated through `ReplicationServer` / `ReplicationClient`
//! in memory (every packet arrives and is acknowledged at once) at 30 Hz, 60 warm-up
//! ticks then 900 measured ticks; prints mean and p95 replication bytes per tick.
//!
//! `cargo run --release -p replicate-examples --example delta_arena`

use replicate::NetRefHandle;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::{
    DeltaSettings, ReplicationClient, ReplicationConfig, ReplicationServer,
};
use replicate::internals::stream::WriteResult;
use replicate_examples::arena_world::{ArenaWorld, Player, Projectile, Vehicle};
use std::sync::Arc;
use std::time::Duration;

struct Run {
    mean: f64,
    p95: usize,
    max: usize,
    mismatches: usize,
    delta_batches: u64,
    full_batches: u64,
}

fn run(delta: bool, min_frames: u32, warmup: usize, ticks: usize) -> Run {
    let registry = Arc::new(ProtocolRegistry::from_inventory().expect("registry"));
    let config = ReplicationConfig {
        delta: DeltaSettings {
            enabled: delta,
            min_frames_between_baselines: min_frames,
            ..DeltaSettings::default()
        },
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(registry.clone(), config.clone());
    let mut client = ReplicationClient::new(registry, config);
    let conn = server.add_connection();
    let mut world = ArenaWorld::new(0x51);
    let players: Vec<NetRefHandle> = world
        .players
        .iter()
        .map(|p| server.objects_mut().spawn_polled(p).expect("spawn"))
        .collect();
    server
        .objects_mut()
        .set_owner_connection(players[0], Some(conn))
        .expect("owner");
    let mut projectiles: Vec<NetRefHandle> = world
        .projectiles
        .iter()
        .map(|p| server.objects_mut().spawn_polled(&p.state).expect("spawn"))
        .collect();
    let vehicles: Vec<NetRefHandle> = world
        .vehicles
        .iter()
        .map(|v| server.objects_mut().spawn_polled(&v.state).expect("spawn"))
        .collect();
    let dt = 1.0 / 30.0;
    let mut now = Duration::ZERO;
    let mut seq = 0u16;
    let mut per_tick = Vec::with_capacity(ticks);
    for t in 0..warmup + ticks {
        let events = world.step(dt);
        for &i in &events.respawned_projectiles {
            let _ = server.objects_mut().destroy(projectiles[i]);
            projectiles[i] = server
                .objects_mut()
                .spawn_polled(&world.projectiles[i].state)
                .expect("spawn");
        }
        for (h, p) in players.iter().zip(&world.players) {
            server.objects_mut().poll::<Player>(*h, p);
        }
        for (h, p) in projectiles.iter().zip(&world.projectiles) {
            server.objects_mut().poll::<Projectile>(*h, &p.state);
        }
        for (h, v) in vehicles.iter().zip(&world.vehicles) {
            server.objects_mut().poll::<Vehicle>(*h, &v.state);
        }
        now += Duration::from_secs_f32(dt);
        server.tick(now);
        let mut bytes = 0;
        for _ in 0..16 {
            let mut w = BitWriter::with_capacity_bytes(1200);
            let s = PacketSequence(seq);
            seq = seq.wrapping_add(1);
            let result = server.write_packet(conn, s, &mut w);
            let payload = w.finish().expect("fits");
            bytes += payload.len();
            client
                .read_packet(now, s, &mut BitReader::new(&payload))
                .expect("well-formed");
            server.process_delivery(conn, s, DeliveryStatus::Delivered);
            if result != WriteResult::HasMoreData {
                break;
            }
        }
        if t >= warmup {
            per_tick.push(bytes);
        }
    }
    let mut mismatches = 0;
    for &h in projectiles.iter().chain(&vehicles).chain(&players[..1]) {
        let same = match (server.objects().state(h), client.state(h)) {
            (Some(a), Some(b)) => a.eq_dyn(b),
            _ => false,
        };
        mismatches += usize::from(!same);
    }
    let stats = server.baselines().stats().clone();
    let mean = per_tick.iter().sum::<usize>() as f64 / per_tick.len().max(1) as f64;
    let mut sorted = per_tick.clone();
    sorted.sort_unstable();
    let p95 = sorted[(sorted.len() * 95 / 100).min(sorted.len() - 1)];
    Run {
        mean,
        p95,
        max: sorted.last().copied().unwrap_or(0),
        mismatches,
        delta_batches: stats.delta_batches,
        full_batches: stats.full_batches,
    }
}

fn main() {
    let off = run(false, 60, 60, 900);
    let on = run(true, 60, 60, 900);
    let on30 = run(true, 30, 60, 900);
    let on120 = run(true, 120, 60, 900);
    println!("S1 arena, 30 Hz, 60 warm-up + 900 measured ticks, replication bytes per tick");
    println!(
        "{:<14} {:>10} {:>8} {:>8} {:>11}",
        "delta", "mean", "p95", "max", "mismatches"
    );
    for (name, r) in [
        ("off", &off),
        ("on (60)", &on),
        ("on (30)", &on30),
        ("on (120)", &on120),
    ] {
        println!(
            "{:<14} {:>10.1} {:>8} {:>8} {:>11}",
            name, r.mean, r.p95, r.max, r.mismatches
        );
    }
    println!(
        "delta on (60): {} batches against a baseline, {} full; saving {:.1}%",
        on.delta_batches,
        on.full_batches,
        100.0 * (1.0 - on.mean / off.mean)
    );
}
