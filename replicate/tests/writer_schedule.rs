//! The writer's schedule is computed once per tick and continued across the packets of
//! the tick (`scheduler::Schedule`). These tests pin down what that must not change:
//! objects spread over many packets of one tick still come out in priority order, none
//! lost or duplicated; an object owed anew between two packets of a tick (a loss, a
//! member marked dirty) is still sent in that tick; and, differentially, a writer that
//! continues its schedule writes byte for byte the packets of one that schedules afresh
//! before every packet, under random spawns, priorities, dependents, subobjects, scope
//! changes, losses and packet sizes.

mod common;

use common::core_suite::*;
use common::*;
use replicate::NetRefHandle;
use replicate::interest::BandwidthBudget;
use replicate::internals::connection::DeliveryStatus::{self, Delivered, Lost};
use replicate::internals::connection::PacketSequence;
use replicate::internals::object::SchedulingHint;
use replicate::internals::replication::{ReplicationConfig, ReplicationEvent, ReplicationWriter};
use replicate::internals::state::ChangeMask;
use std::collections::{HashSet, VecDeque};
use std::time::Duration;

/// A `Manual` pair without the interest layer's budget and packet cap, so that one
/// tick may take as many packets as its data needs.
fn uncapped(config: ReplicationConfig) -> Manual {
    let mut m = Manual::with_config(config);
    m.server.set_max_extra_packets(100_000);
    m.server
        .set_connection_budget(m.conn, BandwidthBudget::Unlimited);
    m
}

fn writer(m: &Manual) -> &ReplicationWriter {
    m.server.writer(m.conn).expect("the connection's writer")
}

fn tick(m: &mut Manual) {
    m.now += Duration::from_millis(16);
    m.server.tick(m.now);
}

/// Writes one packet without ticking; `None` when the writer had nothing to write.
fn write_one(m: &mut Manual) -> Option<(PacketSequence, Vec<u8>)> {
    let before = writer(m).stats().packets;
    let p = m.write();
    (writer(m).stats().packets > before).then_some(p)
}

fn events_of(m: &mut Manual, bytes: &[u8]) -> Vec<ReplicationEvent> {
    m.deliver_to_client(bytes);
    m.client.drain_events()
}

/// Creates `n` crates, delivers and acks every creation (one large packet per tick).
fn created_crates(m: &mut Manual, n: u32) -> Vec<NetRefHandle> {
    let hs: Vec<_> = (0..n)
        .map(|i| {
            m.server
                .objects_mut()
                .spawn(Crate {
                    kind: i as u16,
                    ..Default::default()
                })
                .unwrap()
        })
        .collect();
    let mtu = m.mtu;
    m.mtu = 4000;
    m.round_trip();
    while !writer(m).is_idle() {
        m.round_trip();
    }
    m.mtu = mtu;
    m.client.drain_events();
    hs
}

#[test]
fn creations_spread_over_many_packets_of_one_tick_come_out_in_priority_order() {
    // Small partial-sort chunks: the order crosses chunk and packet boundaries.
    let config = ReplicationConfig {
        partial_sort_count: 4,
        ..Default::default()
    };
    let mut m = uncapped(config);
    m.mtu = 40;
    let n = 60u32;
    let mut expected: Vec<(f32, NetRefHandle)> = Vec::new();
    for i in 0..n {
        let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
        // Distinct priorities in scrambled index order, all above the threshold.
        let p = 1.0 + ((i * 37) % n) as f32;
        m.server.objects_mut().set_priority(h, p).unwrap();
        expected.push((p, h));
    }
    expected.sort_by(|a, b| b.0.total_cmp(&a.0));
    let expected: Vec<_> = expected.into_iter().map(|(_, h)| h).collect();

    tick(&mut m);
    let schedules = writer(&m).stats().schedules;
    let mut order = Vec::new();
    let mut packets = 0;
    while let Some((seq, bytes)) = write_one(&mut m) {
        packets += 1;
        let ev = events_of(&mut m, &bytes);
        order.extend(spawned(&ev));
        m.ack(seq, Delivered);
        assert!(packets < 1000, "the writer never ran out of data");
    }
    assert!(packets >= 6, "the tick needed several packets ({packets})");
    assert_eq!(order.len(), n as usize, "every object exactly once");
    assert_eq!(order.iter().collect::<HashSet<_>>().len(), n as usize);
    assert_eq!(order, expected, "descending priority across packets");
    assert_eq!(
        writer(&m).stats().schedules,
        schedules + 1,
        "one schedule for the whole tick"
    );
    assert_eq!(writer(&m).dirty_objects(), 0);
}

#[test]
fn updates_of_one_tick_follow_the_priority_order_across_packets() {
    // A packet ends at the first batch that does not fit (no smaller, lower-priority
    // batch may jump ahead into the space left), so the order is strict.
    let mut m = uncapped(ReplicationConfig {
        partial_sort_count: 3,
        max_fit_failures: 1,
        ..Default::default()
    });
    let hs = created_crates(&mut m, 40);
    for (i, &h) in hs.iter().enumerate() {
        m.server
            .objects_mut()
            .set_priority(h, 1.0 + ((i * 13) % 40) as f32)
            .unwrap();
        m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount = 1000 + i as u32;
    }
    m.mtu = 24;
    tick(&mut m);
    let mut order = Vec::new();
    while let Some((seq, bytes)) = write_one(&mut m) {
        let ev = events_of(&mut m, &bytes);
        order.extend(changed(&ev));
        m.ack(seq, Delivered);
    }
    let mut expected: Vec<_> = hs.clone();
    expected.sort_by_key(|&h| {
        let i = hs.iter().position(|&x| x == h).unwrap();
        std::cmp::Reverse((i * 13) % 40)
    });
    assert_eq!(order, expected);
    for (i, &h) in hs.iter().enumerate() {
        assert_eq!(m.client.get::<Crate>(h).unwrap().amount, 1000 + i as u32);
    }
}

#[test]
fn a_loss_between_two_packets_of_a_tick_is_resent_in_that_tick() {
    let mut m = uncapped(ReplicationConfig::default());
    let hs = created_crates(&mut m, 30);
    for (i, &h) in hs.iter().enumerate() {
        m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount = 7 + i as u32;
    }
    m.mtu = 24;
    tick(&mut m);
    let schedules = writer(&m).stats().schedules;
    // Equal priorities: index order. The first packet carries the first crates ...
    let (seq, _lost) = write_one(&mut m).expect("a first packet");
    let first: Vec<_> = hs.iter().copied().filter(|&h| !owed(&m, h)).collect();
    assert!(!first.is_empty() && first.len() < hs.len());
    assert_eq!(first, hs[..first.len()].to_vec());
    // ... and is lost before the second is written: those crates are owed again, with
    // the loss bump, and (lowest indices, same priority) go first again.
    m.ack(seq, Lost);
    let (seq, bytes) = write_one(&mut m).expect("a second packet");
    let ev = events_of(&mut m, &bytes);
    let second = changed(&ev);
    assert_eq!(second[0], first[0], "the lost crates lead the next packet");
    assert!(
        first.iter().all(|h| second.contains(h)),
        "{first:?} resent in {second:?}"
    );
    m.ack(seq, Delivered);
    let mut rest = Vec::new();
    while let Some((seq, bytes)) = write_one(&mut m) {
        let ev = events_of(&mut m, &bytes);
        rest.extend(changed(&ev));
        m.ack(seq, Delivered);
    }
    let all: Vec<_> = second.iter().chain(&rest).copied().collect();
    assert_eq!(all.len(), hs.len(), "no crate written twice after the loss");
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), hs.len());
    for (i, &h) in hs.iter().enumerate() {
        assert_eq!(m.client.get::<Crate>(h).unwrap().amount, 7 + i as u32);
    }
    assert_eq!(
        writer(&m).stats().schedules,
        schedules + 2,
        "scheduled for the tick and again after the loss"
    );
}

#[test]
fn members_marked_dirty_between_two_packets_of_a_tick_are_sent_in_that_tick() {
    // Threshold 0: an object owed without accumulated priority is scheduled at once.
    let mut m = uncapped(ReplicationConfig {
        scheduling_threshold: 0.0,
        ..Default::default()
    });
    let hs = created_crates(&mut m, 20);
    let quiet = hs[0];
    for &h in &hs[1..] {
        m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount = 5;
    }
    m.mtu = 24;
    tick(&mut m);
    let (seq, bytes) = write_one(&mut m).expect("a first packet");
    let first = changed(&events_of(&mut m, &bytes));
    assert!(!first.contains(&quiet));
    m.ack(seq, Delivered);
    // Between two packets: the crate is owed (e.g. a hook now allows its members).
    m.server
        .mark_members_dirty(m.conn, quiet, &ChangeMask::all(3));
    let mut rest = Vec::new();
    while let Some((seq, bytes)) = write_one(&mut m) {
        rest.extend(changed(&events_of(&mut m, &bytes)));
        m.ack(seq, Delivered);
    }
    assert!(rest.contains(&quiet), "sent in the same tick: {rest:?}");
    assert_eq!(writer(&m).dirty_objects(), 0);
    let mut all = first.clone();
    all.extend(&rest);
    assert_eq!(all.len(), hs.len(), "each crate once");
}

/// Whether the writer still owes members of `h` (false once a batch carried them).
fn owed(m: &Manual, h: NetRefHandle) -> bool {
    let i = m.server.objects().index_of(h).expect("live object");
    writer(m)
        .change_mask(m.server.objects(), i)
        .is_some_and(|mask| mask.any())
}

struct Run {
    packets: Vec<Vec<u8>>,
    schedules: u64,
    m: Manual,
    pawns: Vec<NetRefHandle>,
    crates: Vec<NetRefHandle>,
    subs: Vec<NetRefHandle>,
    out_of_scope: Vec<NetRefHandle>,
}

/// One random run: every packet written, the schedules, the final pair.
fn random_run(seed: u64, reuse: bool) -> Run {
    let mut m = uncapped(ReplicationConfig {
        partial_sort_count: 1 + (seed % 5) as usize,
        max_fit_failures: 1 + (seed % 4) as u32,
        ..Default::default()
    });
    m.server
        .writer_mut(m.conn)
        .expect("writer")
        .set_schedule_reuse(reuse);
    let mut rng = Rng(seed);
    let priorities = [0.25f32, 0.5, 1.0, 1.0, 2.0, 3.0, 7.5];
    let hints = [
        SchedulingHint::Default,
        SchedulingHint::ScheduleBeforeParent,
        SchedulingHint::ScheduleBeforeParentIfInitialState,
    ];
    let mut pawns: Vec<NetRefHandle> = Vec::new();
    let mut crates: Vec<NetRefHandle> = Vec::new();
    let mut subs: Vec<NetRefHandle> = Vec::new();
    let mut out_of_scope: Vec<NetRefHandle> = Vec::new();
    let mut in_flight: VecDeque<(PacketSequence, Vec<u8>)> = VecDeque::new();
    let mut packets = Vec::new();
    let ticks = 60;
    for t in 0..ticks + 20 {
        let quiet = t >= ticks;
        if !quiet {
            for _ in 0..rng.below(5) {
                let p = priorities[rng.below(priorities.len() as u64) as usize];
                let h = if rng.chance(0.5) {
                    let h = m
                        .server
                        .objects_mut()
                        .spawn(Pawn {
                            x: rng.below(1000) as i32,
                            ..Default::default()
                        })
                        .unwrap();
                    pawns.push(h);
                    h
                } else {
                    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
                    crates.push(h);
                    h
                };
                m.server.objects_mut().set_priority(h, p).unwrap();
            }
            if !pawns.is_empty() && rng.chance(0.3) {
                let owner = pawns[rng.below(pawns.len() as u64) as usize];
                let s = m
                    .server
                    .objects_mut()
                    .spawn_subobject(
                        owner,
                        Crate {
                            kind: 1,
                            ..Default::default()
                        },
                    )
                    .unwrap();
                subs.push(s);
            }
            let roots: Vec<_> = pawns.iter().chain(&crates).copied().collect();
            if roots.len() >= 2 && rng.chance(0.3) {
                let a = roots[rng.below(roots.len() as u64) as usize];
                let b = roots[rng.below(roots.len() as u64) as usize];
                if a != b {
                    let hint = hints[rng.below(3) as usize];
                    let _ = m.server.objects_mut().add_dependent(a, b, hint);
                }
            }
            for &h in &pawns {
                if rng.chance(0.4) {
                    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().x += 1;
                }
            }
            for &h in crates.iter().chain(&subs) {
                if rng.chance(0.4) {
                    m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount += 1;
                }
            }
            if rng.chance(0.1) && !crates.is_empty() {
                let i = rng.below(crates.len() as u64) as usize;
                let h = crates.swap_remove(i);
                m.server.objects_mut().destroy(h).unwrap();
                out_of_scope.retain(|&x| x != h);
            }
            if rng.chance(0.1) && !pawns.is_empty() {
                let h = pawns[rng.below(pawns.len() as u64) as usize];
                if !out_of_scope.contains(&h) {
                    m.server.set_in_scope(m.conn, h, false);
                    out_of_scope.push(h);
                }
            }
            if rng.chance(0.15) && !out_of_scope.is_empty() {
                let h = out_of_scope.swap_remove(0);
                m.server.set_in_scope(m.conn, h, true);
            }
        }
        tick(&mut m);
        let budget = if quiet { 1000 } else { 1 + rng.below(10) };
        for _ in 0..budget {
            m.mtu = if quiet {
                1200
            } else {
                30 + rng.below(120) as usize
            };
            let Some(p) = write_one(&mut m) else {
                break;
            };
            packets.push(p.1.clone());
            in_flight.push_back(p);
            // Acks (in order) and re-owed members between the packets of a tick.
            while !in_flight.is_empty() && (quiet || rng.chance(0.5)) {
                let (seq, bytes) = in_flight.pop_front().unwrap();
                let status: DeliveryStatus = if !quiet && rng.chance(0.25) {
                    Lost
                } else {
                    m.deliver_to_client(&bytes);
                    Delivered
                };
                m.ack(seq, status);
            }
            if !quiet && rng.chance(0.2) && !crates.is_empty() {
                let h = crates[rng.below(crates.len() as u64) as usize];
                m.server.mark_members_dirty(m.conn, h, &ChangeMask::all(3));
            }
        }
    }
    while let Some((seq, bytes)) = in_flight.pop_front() {
        m.deliver_to_client(&bytes);
        m.ack(seq, Delivered);
    }
    Run {
        packets,
        schedules: writer(&m).stats().schedules,
        m,
        pawns,
        crates,
        subs,
        out_of_scope,
    }
}

#[test]
fn continuing_the_schedule_writes_the_same_packets_as_rescheduling_every_packet() {
    let mut fewer = 0;
    for seed in 0..12u64 {
        let run = random_run(seed, true);
        let (a, sa) = (&run.packets, run.schedules);
        let reference = random_run(seed, false);
        let (b, sb) = (&reference.packets, reference.schedules);
        assert!(
            a.len() > 60,
            "seed {seed}: a busy run ({} packets)",
            a.len()
        );
        assert_eq!(a.len(), b.len(), "seed {seed}: packet count");
        for (k, (pa, pb)) in a.iter().zip(b).enumerate() {
            assert_eq!(pa, pb, "seed {seed}: packet {k} differs");
        }
        assert!(sa <= sb, "seed {seed}: {sa} schedules vs {sb}");
        if sa < sb {
            fewer += 1;
        }
        // And the run converged: every object in scope is on the client as on the server.
        let m = &run.m;
        assert!(
            writer(m).is_idle(),
            "seed {seed}: everything sent and acked"
        );
        for &h in run.crates.iter().chain(&run.subs) {
            let s = m.server.objects().get::<Crate>(h).unwrap();
            match m.client.get::<Crate>(h) {
                Some(c) => assert_eq!(c.amount, s.amount, "seed {seed}: {h}"),
                None => {
                    // Only a subobject of a pawn out of scope is missing.
                    let objects = m.server.objects();
                    let owner = objects
                        .index_of(h)
                        .and_then(|i| objects.entry_at(i))
                        .and_then(|e| e.root())
                        .and_then(|r| objects.entry_at(r))
                        .map(|e| e.handle());
                    assert!(
                        owner.is_some_and(|o| run.out_of_scope.contains(&o)),
                        "seed {seed}: {h} missing on the client"
                    );
                }
            }
        }
        for &h in &run.pawns {
            let s = m.server.objects().get::<Pawn>(h).unwrap();
            match m.client.get::<Pawn>(h) {
                Some(c) => assert_eq!(c.x, s.x, "seed {seed}: {h}"),
                None => assert!(run.out_of_scope.contains(&h), "seed {seed}: {h} missing"),
            }
        }
    }
    assert!(
        fewer >= 10,
        "the schedule was reused in most runs ({fewer})"
    );
}

#[test]
fn a_subobject_that_did_not_fit_after_its_owner_is_sent_in_a_later_packet() {
    // The owner's batch fits, its subobject's does not: the subobject must go out in a
    // later packet even though the owner does not change again (it used to wait, dirty,
    // for the owner's next change: the owner's own batch had cleared its dirty bit).
    let mut stuck_before = 0;
    for mtu in 8..48 {
        let mut m = uncapped(ReplicationConfig::default());
        let owner = m.server.objects_mut().spawn(Pawn::default()).unwrap();
        let sub = m
            .server
            .objects_mut()
            .spawn_subobject(owner, Crate::default())
            .unwrap();
        m.mtu = 4000;
        m.round_trip();
        m.round_trip();
        assert!(writer(&m).is_idle());
        m.server.objects_mut().get_mut::<Pawn>(owner).unwrap().x = 1_000_000;
        m.server.objects_mut().get_mut::<Crate>(sub).unwrap().amount = 4_000_000_000;
        m.mtu = mtu;
        tick(&mut m);
        let mut packets = 0;
        while let Some((seq, bytes)) = write_one(&mut m) {
            m.deliver_to_client(&bytes);
            m.ack(seq, Delivered);
            packets += 1;
            if packets == 1 && m.client.get::<Pawn>(owner).unwrap().x == 1_000_000 {
                stuck_before += usize::from(m.client.get::<Crate>(sub).unwrap().amount == 0);
            }
            assert!(packets < 20);
        }
        if packets == 0 {
            continue; // nothing fits at this size
        }
        // Later ticks with nothing new: still no change on the owner.
        for _ in 0..3 {
            tick(&mut m);
            while let Some((seq, bytes)) = write_one(&mut m) {
                m.deliver_to_client(&bytes);
                m.ack(seq, Delivered);
            }
        }
        assert_eq!(
            m.client.get::<Crate>(sub).unwrap().amount,
            4_000_000_000,
            "mtu {mtu}"
        );
        assert!(writer(&m).is_idle(), "mtu {mtu}");
    }
    assert!(
        stuck_before > 0,
        "some size fits the owner's batch but not the subobject's"
    );
}
