//! A quick S2 "battle royale" measurement (see BENCHMARKS.md), the grid-filter variant
//! beside the everything-in-scope one, until the scenario harness covers it: 100
//! connections, 10 000 objects (100 players, 9 900 NPCs and pickups) on a
//! 200 000 x 200 000 world, 10% of the objects dirty per tick, every packet acked at
//! once (no link). Prints median server tick time (tick + every connection's packets),
//! ns per dirty object x connection in scope, and bytes per connection per tick.
//!
//! `cargo test -p replicate --test interest_s2 -- --ignored --nocapture`

mod common;

use common::interest_suite::*;
use common::*;
use glam::Vec3;
use replicate::bits::BitWriter;
use replicate::interest::{BandwidthBudget, FilterKind, InterestConfig};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::replication::{ReplicationConfig, ReplicationServer};
use replicate::internals::stream::WriteResult;
use replicate::{NetRefHandle, Replicated};
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 100;
const OBJECTS: usize = 10_000;
const PLAYERS: usize = 100;
const WORLD: f64 = 200_000.0;

struct Run {
    median_tick: Duration,
    bytes_per_conn_tick: f64,
    in_scope_per_conn: f64,
    dirty_in_scope_per_tick: f64,
}

fn run(grid: bool, budget: BandwidthBudget, warmup: usize, measured: usize) -> Run {
    let mut server = ReplicationServer::new(registry(), ReplicationConfig::default());
    server.set_interest_config(InterestConfig {
        default_filter: if grid {
            FilterKind::Spatial
        } else {
            FilterKind::AlwaysRelevant
        },
        default_budget: budget,
        ..InterestConfig::default()
    });
    server.set_location_fn::<<Rock as Replicated>::State>(|s| {
        Vec3::new(s.x as i32 as f32, s.y as i32 as f32, 0.0)
    });
    let conns: Vec<_> = (0..CONNECTIONS).map(|_| server.add_connection()).collect();
    let mut rng = Rng(0x52);
    let coord = |rng: &mut Rng| (rng.below(WORLD as u64) as f64 - WORLD / 2.0) as i32;
    let objects: Vec<NetRefHandle> = (0..OBJECTS)
        .map(|_| {
            let (x, y) = (coord(&mut rng), coord(&mut rng));
            server
                .objects_mut()
                .spawn(Rock {
                    x,
                    y,
                    hp: 100,
                    payload: 0,
                })
                .unwrap()
        })
        .collect();
    let mut seq = [0u16; CONNECTIONS];
    let mut times = Vec::new();
    let mut bytes = 0u64;
    let mut dirty_in_scope = 0u64;
    let mut in_scope = 0u64;
    for tick in 0..warmup + measured {
        // 10% dirty: players always move, NPCs at random, pickups (the last third) never.
        let mut dirty = Vec::new();
        for (i, &h) in objects.iter().enumerate() {
            let moves = i < PLAYERS || (i < OBJECTS * 2 / 3 && rng.chance(0.136));
            if moves {
                let r = rng.next_u64();
                let o = server.objects_mut().get_mut::<Rock>(h).unwrap();
                o.x = o.x.wrapping_add((r % 401) as i32 - 200);
                o.y = o.y.wrapping_add(((r >> 16) % 401) as i32 - 200);
                dirty.push(i);
            }
        }
        for (c, &conn) in conns.iter().enumerate() {
            let p = server.objects().get::<Rock>(objects[c]).unwrap();
            let view = Vec3::new(p.x as f32, p.y as f32, 0.0);
            server.set_view_position(conn, view);
        }
        let now = Duration::from_micros(tick as u64 * 33_333);
        let start = Instant::now();
        server.tick(now);
        let mut tick_bytes = 0u64;
        for (c, &conn) in conns.iter().enumerate() {
            loop {
                let s = PacketSequence(seq[c]);
                seq[c] = seq[c].wrapping_add(1);
                let mut w = BitWriter::with_capacity_bytes(1200);
                let r = server.write_packet(conn, s, &mut w);
                tick_bytes += w.byte_len() as u64;
                server.process_delivery(conn, s, DeliveryStatus::Delivered);
                if r != WriteResult::HasMoreData {
                    break;
                }
            }
        }
        let elapsed = start.elapsed();
        if tick >= warmup {
            times.push(elapsed);
            bytes += tick_bytes;
            let interest = server.interest();
            for &conn in &conns {
                for &i in &dirty {
                    let idx = server.objects().index_of(objects[i]).unwrap();
                    if interest.is_in_scope(server.objects(), conn, idx) {
                        dirty_in_scope += 1;
                    }
                }
            }
            if tick == warmup {
                for &conn in &conns {
                    in_scope += server.writer(conn).unwrap().tracked_objects() as u64;
                }
            }
        }
    }
    times.sort();
    Run {
        median_tick: times[times.len() / 2],
        bytes_per_conn_tick: bytes as f64 / (measured * CONNECTIONS) as f64,
        in_scope_per_conn: in_scope as f64 / CONNECTIONS as f64,
        dirty_in_scope_per_tick: dirty_in_scope as f64 / measured as f64,
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn s2_grid_filter_versus_everything_in_scope() {
    println!(
        "| variant | budget | median tick | ns per dirty obj x conn | objects in scope per conn | bytes per conn per tick |"
    );
    println!("|---|---|---|---|---|---|");
    for (grid, budget, label) in [
        (false, BandwidthBudget::default(), "64 KB/s"),
        (true, BandwidthBudget::default(), "64 KB/s"),
        (false, BandwidthBudget::Unlimited, "unlimited"),
        (true, BandwidthBudget::Unlimited, "unlimited"),
    ] {
        let r = run(grid, budget, 90, 60);
        println!(
            "| {} | {label} | {:.2} ms | {:.0} | {:.0} | {:.0} |",
            if grid { "grid filter" } else { "all in scope" },
            r.median_tick.as_secs_f64() * 1e3,
            r.median_tick.as_nanos() as f64 / r.dirty_in_scope_per_tick.max(1.0),
            r.in_scope_per_conn,
            r.bytes_per_conn_tick,
        );
    }
}
