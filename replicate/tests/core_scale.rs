//! A measurement harness (ignored by default: `cargo test --release -p replicate --test
//! core_scale -- --ignored --nocapture`): server tick and packet-writing time with many
//! objects and connections, for a clean world and for 1% of objects dirty per tick.
//! The criterion benches are owned elsewhere; this only shows that per-connection cost
//! follows dirty data, not world size.

mod common;

use common::core_suite::*;
use common::*;
use replicate::bits::BitWriter;
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::replication::{ReplicationConfig, ReplicationServer};
use std::time::{Duration, Instant};

fn measure(
    objects: usize,
    connections: usize,
    dirty_per_tick: usize,
    ticks: usize,
) -> (Duration, usize) {
    let mut server = ReplicationServer::new(registry(), ReplicationConfig::default());
    let conns: Vec<_> = (0..connections).map(|_| server.add_connection()).collect();
    let handles: Vec<_> = (0..objects)
        .map(|i| {
            server
                .objects_mut()
                .spawn(Pawn {
                    x: i as i32,
                    ..Default::default()
                })
                .unwrap()
        })
        .collect();
    let mut seq = 0u16;
    let mut now = Duration::ZERO;
    let mut rng = Rng(1);
    // Warm up: send every creation and ack it.
    for _ in 0..200 {
        now += Duration::from_millis(16);
        server.tick(now);
        for &c in &conns {
            for _ in 0..8 {
                let mut w = BitWriter::with_capacity_bytes(1200);
                server.write_packet(c, PacketSequence(seq), &mut w);
                server.process_delivery(c, PacketSequence(seq), DeliveryStatus::Delivered);
            }
        }
        seq = seq.wrapping_add(1);
    }
    let mut bytes = 0;
    let start = Instant::now();
    for _ in 0..ticks {
        for _ in 0..dirty_per_tick {
            let h = handles[rng.below(handles.len() as u64) as usize];
            server.objects_mut().get_mut::<Pawn>(h).unwrap().hp ^= 1;
        }
        now += Duration::from_millis(16);
        server.tick(now);
        for &c in &conns {
            let mut w = BitWriter::with_capacity_bytes(1200);
            server.write_packet(c, PacketSequence(seq), &mut w);
            bytes += w.byte_len();
            server.process_delivery(c, PacketSequence(seq), DeliveryStatus::Delivered);
        }
        seq = seq.wrapping_add(1);
    }
    (start.elapsed() / ticks as u32, bytes / ticks)
}

#[test]
#[ignore]
fn per_connection_cost_follows_dirty_data() {
    for (objects, connections) in [(10_000, 1), (10_000, 64), (50_000, 64)] {
        let (clean, clean_bytes) = measure(objects, connections, 0, 100);
        let (dirty, dirty_bytes) = measure(objects, connections, objects / 100, 100);
        println!(
            "{objects} objects x {connections} connections: clean tick {clean:?} ({clean_bytes} B), \
             1% dirty tick {dirty:?} ({dirty_bytes} B)"
        );
    }
}
