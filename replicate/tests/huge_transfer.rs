//! Huge objects through the real connection and a lossy link: a 500 KB object arrives
//! bit-identical, 50 queued huge objects respect the in-transit limit, and a destroy
//! in flight cancels the transfer on both ends.

mod common;

use common::attachment_suite::*;
use common::*;
use replicate::internals::link::LinkConditioner;
use replicate::internals::replication::{ReplicatedObjectState, ReplicationConfig};
use replicate::internals::stats::ReplicationStats;
use std::time::Duration;

fn lossy() -> LinkConditioner {
    LinkConditioner {
        latency: Duration::from_millis(20),
        jitter: Duration::from_millis(10),
        loss: 0.10,
        duplicate: 0.05,
        reorder: 0.05,
        reorder_delay: Duration::from_millis(30),
        ..LinkConditioner::perfect()
    }
}

fn huge_stats(sim: &mut Sim) -> replicate::internals::replication::HugeSendStats {
    let conn = sim.peers[0].conn;
    sim.server.huge_stream(conn).unwrap().stats()
}

#[test]
fn half_megabyte_object_arrives_bit_identical_through_loss_duplication_and_reordering() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 7, lossy());
    sim.packets_per_tick = 16;
    let data = bytes(1, 500 * 1024);
    let big = sim
        .server
        .objects_mut()
        .spawn(Blobby {
            id: 42,
            data: data.clone(),
        })
        .unwrap();
    let door = sim.server.objects_mut().spawn(Door::default()).unwrap();
    let mut door_seen_before_big = false;
    let steps = sim.run_until(3000, |s| {
        let c = &s.peers[0].client;
        if c.contains(door) && !c.contains(big) {
            door_seen_before_big = true;
        }
        c.contains(big)
    });
    assert!(door_seen_before_big, "other objects replicate alongside");
    let got = sim.peers[0].client.get::<Blobby>(big).unwrap();
    assert_eq!(got.id, 42);
    assert!(got.data == data, "bit-identical payload");
    // The server confirms the creation once every part is acknowledged.
    sim.run_until(500, |s| {
        let conn = s.peers[0].conn;
        let index = s.server.objects().index_of(big).unwrap();
        s.server.writer(conn).unwrap().object_state(index) == ReplicatedObjectState::Created
    });
    let stats = huge_stats(&mut sim);
    assert_eq!(stats.completed, 1);
    assert_eq!(stats.active, 0);
    assert!(stats.parts_sent >= 4000, "{stats:?}");
    // Later updates of the object go the normal way (or huge again) and converge.
    sim.server
        .objects_mut()
        .get_mut::<Blobby>(big)
        .unwrap()
        .data[1000] ^= 0xFF;
    sim.run_until(3000, |s| {
        s.peers[0].client.get::<Blobby>(big).unwrap().data[1000] == data[1000] ^ 0xFF
    });
    assert!(steps > 10);
    assert_eq!(sim.peers[0].stream_errors, 0);
}

#[test]
fn fifty_huge_objects_keep_at_most_sixteen_in_transit_and_all_arrive() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 11, lossy());
    sim.packets_per_tick = 8;
    let mut objects = Vec::new();
    for i in 0..50u32 {
        let data = bytes(100 + i as u64, 3000 + 37 * i as usize);
        let h = sim
            .server
            .objects_mut()
            .spawn(Blobby {
                id: i,
                data: data.clone(),
            })
            .unwrap();
        objects.push((h, data));
    }
    let mut max_active = 0;
    let mut saw_queue = false;
    sim.run_until(5000, |s| {
        let st = huge_stats(s);
        max_active = max_active.max(st.active);
        saw_queue |= st.queued > 0 && st.active == 16;
        objects.iter().all(|(h, _)| s.peers[0].client.contains(*h))
    });
    assert!(max_active <= 16, "at most 16 in transit, saw {max_active}");
    assert_eq!(max_active, 16, "the limit is reached");
    assert!(saw_queue, "objects waited for a free slot");
    for (i, (h, data)) in objects.iter().enumerate() {
        let got = sim.peers[0].client.get::<Blobby>(*h).unwrap();
        assert_eq!(got.id, i as u32);
        assert!(&got.data == data, "object {i} intact");
    }
    sim.set_conditioner(LinkConditioner::perfect());
    sim.run(100);
    let conn = sim.peers[0].conn;
    let stats = ReplicationStats::collect(&mut sim.server, conn, None, (0, 0));
    assert_eq!(stats.huge_objects_completed, 50);
    assert_eq!(stats.huge_objects_active, 0);
    assert!(stats.huge_object_stalls >= 1);
    assert!(stats.huge_object_stall_time > Duration::ZERO);
}

#[test]
fn the_in_transit_limit_is_configurable() {
    let mut config = ReplicationConfig::default();
    config.attachments.max_huge_in_transit = 2;
    let mut sim = Sim::new(setup(config), 3, LinkConditioner::lan());
    let mut objects = Vec::new();
    for i in 0..6u32 {
        let h = sim
            .server
            .objects_mut()
            .spawn(Blobby {
                id: i,
                data: bytes(i as u64, 5000),
            })
            .unwrap();
        objects.push(h);
    }
    let mut max_active = 0;
    sim.run_until(2000, |s| {
        max_active = max_active.max(huge_stats(s).active);
        objects.iter().all(|h| s.peers[0].client.contains(*h))
    });
    assert_eq!(max_active, 2);
}

#[test]
fn destroying_an_object_in_flight_cancels_its_transfer_on_both_ends() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 5, lossy());
    sim.packets_per_tick = 2;
    let big = sim
        .server
        .objects_mut()
        .spawn(Blobby {
            id: 1,
            data: bytes(9, 200 * 1024),
        })
        .unwrap();
    // Let part of it go out.
    sim.run_until(500, |s| huge_stats(s).parts_sent > 100);
    assert!(!sim.peers[0].client.contains(big));
    sim.server.objects_mut().destroy(big).unwrap();
    // A second huge object still goes through afterwards.
    let next = sim
        .server
        .objects_mut()
        .spawn(Blobby {
            id: 2,
            data: bytes(10, 4000),
        })
        .unwrap();
    sim.run_until(3000, |s| s.peers[0].client.contains(next));
    sim.set_conditioner(LinkConditioner::perfect());
    sim.run(200);
    let client = &mut sim.peers[0].client;
    assert!(!client.contains(big), "the cancelled object never appears");
    let rx = client.huge_receiver();
    assert_eq!(rx.assembling(), 0, "the partial blob was dropped");
    assert_eq!(rx.reserved_bits(), 0);
    let st = huge_stats(&mut sim);
    assert_eq!(st.cancelled, 1);
    assert_eq!(st.completed, 1);
    let conn = sim.peers[0].conn;
    assert_eq!(
        sim.server.writer(conn).unwrap().tracked_objects(),
        1,
        "the destroyed object was released"
    );
}

#[test]
fn a_busy_world_does_not_starve_huge_objects() {
    let run = |share: f32| {
        let mut config = ReplicationConfig::default();
        config.attachments.huge_packet_share = share;
        let mut sim = Sim::new(setup(config), 13, LinkConditioner::lan());
        sim.packets_per_tick = 1;
        // More changed doors than one packet holds, every tick.
        let doors: Vec<_> = (0..1500)
            .map(|_| sim.server.objects_mut().spawn(Door::default()).unwrap())
            .collect();
        let big = sim
            .server
            .objects_mut()
            .spawn(Blobby {
                id: 1,
                data: bytes(4, 10_000),
            })
            .unwrap();
        for step in 0..400u32 {
            for d in &doors {
                sim.server.objects_mut().get_mut::<Door>(*d).unwrap().code = step;
            }
            sim.step(Duration::from_millis(16));
            if sim.peers[0].client.contains(big) {
                return Some(step);
            }
        }
        None
    };
    assert!(run(0.0).is_none(), "without a share the parts starve");
    let steps = run(0.25).expect("with the default share the object arrives");
    assert!(steps < 200, "{steps}");
}

#[test]
fn a_destroy_racing_a_completed_transfer_still_removes_the_object() {
    // Every part is on the wire before the destroy; the client completes the blob, so
    // the destroy must follow the cancel, never overtake it.
    let slow = LinkConditioner {
        latency: Duration::from_millis(120),
        jitter: Duration::from_millis(40),
        ..LinkConditioner::perfect()
    };
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 17, slow);
    let big = sim
        .server
        .objects_mut()
        .spawn(Blobby {
            id: 3,
            data: bytes(8, 3000),
        })
        .unwrap();
    sim.run_until(20, |s| {
        let st = huge_stats(s);
        st.parts_sent >= 3 && st.active == 1
    });
    sim.step(Duration::from_millis(16));
    sim.server.objects_mut().destroy(big).unwrap();
    sim.run(200);
    assert!(!sim.peers[0].client.contains(big), "destroyed in the end");
    let conn = sim.peers[0].conn;
    assert_eq!(sim.server.writer(conn).unwrap().tracked_objects(), 0);
    let st = huge_stats(&mut sim);
    assert_eq!((st.cancelled, st.completed), (1, 0), "{st:?}");
    let rx = sim.peers[0].client.huge_receiver();
    assert_eq!(rx.assembling(), 0);
    assert_eq!(
        rx.stats().blobs,
        1,
        "the client had completed the blob before the cancel"
    );
}
