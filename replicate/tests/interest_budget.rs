//! Prioritizers and bandwidth budgets through the replication server, over 10 s of
//! simulated time at 30 ticks per second: the sphere prioritizer under a tight budget
//! sends near objects first and more often while far ones still get through (no
//! starvation), and a connection's stream bytes stay within 5% of its budget.

mod common;

use common::interest_suite::*;
use common::*;
use glam::Vec3;
use replicate::NetRefHandle;
use replicate::interest::{BandwidthBudget, PrioritizerKind};

const TICKS_10S: usize = 300;

fn spawn_rocks(net: &mut Net, n: usize, spacing: f32) -> Vec<(NetRefHandle, f32)> {
    (0..n)
        .map(|i| {
            let h = net.server.objects_mut().spawn(Rock::default()).unwrap();
            let d = i as f32 * spacing;
            net.server
                .set_object_position(h, Vec3::new(d, 0.0, 0.0))
                .unwrap();
            (h, d)
        })
        .collect()
}

fn churn(net: &mut Net, rocks: &[(NetRefHandle, f32)], rng: &mut Rng) {
    for &(h, _) in rocks {
        net.server.objects_mut().get_mut::<Rock>(h).unwrap().payload = rng.next_u64();
    }
}

#[test]
fn sphere_prioritizer_under_a_tight_budget_sends_near_first_and_starves_nobody() {
    let mut net = Net::new(1);
    net.server
        .set_connection_budget(0, BandwidthBudget::BytesPerSecond(6 * 1024));
    // 40 rocks from 0 to 39 000 units: inside the inner radius, between the radii, and
    // beyond the outer radius (priority 0.01: one send per 100 ticks at most).
    let rocks = spawn_rocks(&mut net, 40, 1000.0);
    for &(h, _) in &rocks {
        net.server
            .set_object_prioritizer(h, Some(PrioritizerKind::Sphere))
            .unwrap();
    }
    net.server.set_view_position(0, Vec3::ZERO);
    let mut rng = Rng(7);
    let mut sends: std::collections::HashMap<NetRefHandle, Vec<usize>> = Default::default();
    for tick in 0..TICKS_10S {
        churn(&mut net, &rocks, &mut rng);
        let sent = net.tick();
        for b in sent[0].iter().flat_map(|p| p.batches.iter()) {
            sends.entry(b.handle).or_default().push(tick);
        }
        if tick == 0 {
            // The first packet: only objects whose priority reached the threshold, the
            // near ones.
            let first: Vec<f32> = sent[0]
                .iter()
                .flat_map(|p| p.batches.iter())
                .map(|b| rocks.iter().find(|r| r.0 == b.handle).unwrap().1)
                .collect();
            assert!(!first.is_empty());
            assert!(first.iter().all(|&d| d <= 1000.0), "{first:?}");
        }
    }
    let count = |lo: f32, hi: f32| {
        let in_ring: Vec<usize> = rocks
            .iter()
            .filter(|r| r.1 >= lo && r.1 < hi)
            .map(|r| sends.get(&r.0).map_or(0, Vec::len))
            .collect();
        in_ring.iter().sum::<usize>() as f64 / in_ring.len() as f64
    };
    let (near, mid, far) = (
        count(0.0, 1001.0),
        count(2000.0, 10_000.0),
        count(11_000.0, 1e9),
    );
    eprintln!("sends per object: near {near:.1}, mid {mid:.1}, far {far:.1}");
    assert!(near > 2.0 * mid && mid > far, "{near} {mid} {far}");
    for &(h, d) in &rocks {
        let s = sends.get(&h).map_or(&[][..], Vec::as_slice);
        assert!(s.len() >= 2, "object at {d} starved: {s:?}");
        assert!(
            s.last().is_some_and(|&t| t >= TICKS_10S - 150),
            "object at {d} not sent in the last 5 s: {s:?}"
        );
    }
    let rate = net.server.bytes_sent(0) as f64 / 10.0;
    assert!(rate <= 6.0 * 1024.0 * 1.05, "{rate}");
}

fn saturate(budget: BandwidthBudget, objects: usize) -> (u64, u64) {
    let mut net = Net::new(1);
    net.server.set_connection_budget(0, budget);
    let rocks = spawn_rocks(&mut net, objects, 10.0);
    let mut rng = Rng(11);
    let mut wire_bytes = 0u64;
    let mut packets = 0u64;
    for _ in 0..TICKS_10S {
        churn(&mut net, &rocks, &mut rng);
        let before = net.server.bytes_sent(0);
        net.tick();
        wire_bytes += net.server.bytes_sent(0) - before;
        packets += 1;
    }
    let _ = packets;
    (net.server.bytes_sent(0), wire_bytes)
}

#[test]
fn budget_holds_within_5_percent_over_10_seconds() {
    for rate in [16 * 1024u32, 64 * 1024] {
        // 400 objects changing 64 bits every tick want far more than either budget.
        let (sent, _) = saturate(BandwidthBudget::BytesPerSecond(rate), 400);
        let expected = rate as f64 * 10.0;
        let err = (sent as f64 - expected) / expected;
        eprintln!(
            "budget {rate} B/s: sent {sent} bytes in 10 s ({:+.2}%)",
            err * 100.0
        );
        assert!(
            err.abs() < 0.05,
            "budget {rate}: sent {sent}, expected {expected}"
        );
    }
    // Unlimited: only the packet size and packets per tick bound it (4 x 1200 x 30).
    let (sent, _) = saturate(BandwidthBudget::Unlimited, 400);
    assert!(sent as f64 > 64.0 * 1024.0 * 10.0 * 1.5, "{sent}");
    assert!(sent <= 4 * 1200 * TICKS_10S as u64, "{sent}");
}

#[test]
fn extra_packets_per_tick_are_capped() {
    let mut net = Net::new(1);
    net.server
        .set_connection_budget(0, BandwidthBudget::Unlimited);
    net.server.set_max_extra_packets(1);
    let rocks = spawn_rocks(&mut net, 400, 10.0);
    let mut rng = Rng(3);
    churn(&mut net, &rocks, &mut rng);
    let sent = net.tick();
    let with_data = sent[0].iter().filter(|p| !p.batches.is_empty()).count();
    assert_eq!(with_data, 2, "one packet plus one extra");
}
