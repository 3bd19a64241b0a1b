//! Messages and RPCs through the real connection and a lossy link: reliable ordered
//! messages arrive exactly once and in order, reliable unordered exactly once,
//! unreliable at most once; object messages reach only clients that have the object;
//! client messages are validated by the server.

mod common;

use common::attachment_suite::*;
use common::*;
use replicate::internals::blob::DeliveryMode;
use replicate::internals::link::LinkConditioner;
use replicate::internals::replication::ReplicationConfig;
use replicate::internals::replication::attachment::{MessageOutcome, ReceivedMessage};
use replicate::internals::stats::ReplicationStats;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

fn lossy() -> LinkConditioner {
    LinkConditioner {
        latency: Duration::from_millis(20),
        jitter: Duration::from_millis(30),
        loss: 0.15,
        duplicate: 0.10,
        reorder: 0.10,
        reorder_delay: Duration::from_millis(40),
        ..LinkConditioner::perfect()
    }
}

fn chat(seq: u32) -> Chat {
    Chat {
        seq,
        text: format!("line {seq}"),
    }
}

fn seqs(msgs: &[ReceivedMessage]) -> Vec<u32> {
    msgs.iter().map(|m| m.get::<Chat>().unwrap().seq).collect()
}

#[test]
fn reliable_ordered_exactly_once_in_order_under_loss_duplication_and_reordering() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 21, lossy());
    let conn = sim.peers[0].conn;
    let mut got = Vec::new();
    for tick in 0..100u32 {
        for k in 0..3 {
            sim.server
                .send_message(conn, &chat(tick * 3 + k), DeliveryMode::ReliableOrdered)
                .unwrap();
        }
        sim.step(Duration::from_millis(16));
        got.extend(sim.peers[0].client.drain_messages());
    }
    sim.set_conditioner(LinkConditioner::perfect());
    sim.run_until(500, |s| {
        got.extend(s.peers[0].client.drain_messages());
        got.len() >= 300
    });
    sim.run(50);
    got.extend(sim.peers[0].client.drain_messages());
    assert_eq!(seqs(&got), (0..300).collect::<Vec<_>>());
    assert!(
        got.iter()
            .all(|m| m.mode == DeliveryMode::ReliableOrdered && m.target.is_none())
    );
    let stats = sim.server.message_stats(conn).unwrap();
    assert!(stats.written > 300, "lost packets were re-sent: {stats:?}");
}

#[test]
fn reliable_unordered_exactly_once_and_unreliable_never_duplicated() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 22, lossy());
    let conn = sim.peers[0].conn;
    let mut got = Vec::new();
    for tick in 0..100u32 {
        sim.server
            .send_message(conn, &chat(tick), DeliveryMode::ReliableUnordered)
            .unwrap();
        sim.server
            .send_message(conn, &chat(1000 + tick), DeliveryMode::Unreliable)
            .unwrap();
        sim.step(Duration::from_millis(16));
        got.extend(sim.peers[0].client.drain_messages());
    }
    sim.set_conditioner(LinkConditioner::perfect());
    sim.run(200);
    got.extend(sim.peers[0].client.drain_messages());
    let reliable: Vec<u32> = got
        .iter()
        .filter(|m| m.mode == DeliveryMode::ReliableUnordered)
        .map(|m| m.get::<Chat>().unwrap().seq)
        .collect();
    let mut sorted = reliable.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>(), "each exactly once");
    let unreliable: Vec<u32> = got
        .iter()
        .filter(|m| m.mode == DeliveryMode::Unreliable)
        .map(|m| m.get::<Chat>().unwrap().seq)
        .collect();
    let distinct: HashSet<u32> = unreliable.iter().copied().collect();
    assert_eq!(distinct.len(), unreliable.len(), "no duplicates");
    assert!(unreliable.len() < 100, "some were lost (15% loss)");
    assert!(unreliable.len() > 50, "most arrived");
}

#[test]
fn object_messages_reach_only_clients_that_have_the_object() {
    let mut sim = Sim::new(
        setup(ReplicationConfig::default()),
        23,
        LinkConditioner::lan(),
    );
    let second = sim.add_peer();
    let (c0, c1) = (sim.peers[0].conn, sim.peers[second].conn);
    let door = sim.server.objects_mut().spawn(Door::default()).unwrap();
    let hidden = sim.server.objects_mut().spawn(Door::default()).unwrap();
    sim.server.set_in_scope(c1, hidden, false);
    // Sent before the creation is acknowledged: held until it is.
    assert_eq!(
        sim.server
            .send_object_message(c0, door, &chat(1), DeliveryMode::ReliableOrdered)
            .unwrap(),
        MessageOutcome::Held
    );
    sim.run_until(200, |s| {
        s.peers.iter().all(|p| p.client.contains(door)) && s.peers[0].client.contains(hidden)
    });
    sim.run(10);
    let first = sim.peers[0].client.drain_messages();
    assert_eq!(seqs(&first), vec![1]);
    assert_eq!(first[0].target, Some(door));

    // To every client in scope: only the first client has `hidden`.
    let n = sim
        .server
        .send_object_message_to_scope(hidden, &chat(2), DeliveryMode::ReliableOrdered)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        sim.server
            .send_object_message(c1, hidden, &chat(3), DeliveryMode::ReliableUnordered)
            .unwrap(),
        MessageOutcome::NotInScope
    );
    sim.server
        .send_object_message_to_scope(door, &chat(4), DeliveryMode::Unreliable)
        .unwrap();
    sim.run(20);
    let m0 = sim.peers[0].client.drain_messages();
    let m1 = sim.peers[second].client.drain_messages();
    assert_eq!(seqs(&m0), vec![2, 4]);
    assert_eq!(seqs(&m1), vec![4]);
    let stats = ReplicationStats::collect(&mut sim.server, c1, None, (0, 0));
    assert_eq!(
        stats.attachments_dropped, 2,
        "the scoped send and the direct one"
    );

    // A message for an object destroyed before the message goes out is dropped.
    sim.server.objects_mut().destroy(door).unwrap();
    sim.step(Duration::from_millis(16));
    assert_eq!(
        sim.server
            .send_object_message(c0, door, &chat(5), DeliveryMode::ReliableOrdered)
            .unwrap(),
        MessageOutcome::NotInScope
    );
    sim.run(20);
    assert!(sim.peers[0].client.drain_messages().is_empty());
}

#[test]
fn a_message_held_for_a_huge_object_arrives_after_the_object() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 24, lossy());
    let conn = sim.peers[0].conn;
    let big = sim
        .server
        .objects_mut()
        .spawn(Blobby {
            id: 9,
            data: bytes(3, 20_000),
        })
        .unwrap();
    sim.step(Duration::from_millis(16));
    assert_eq!(
        sim.server
            .send_object_message(conn, big, &chat(7), DeliveryMode::ReliableOrdered)
            .unwrap(),
        MessageOutcome::Held
    );
    let mut got = Vec::new();
    sim.run_until(3000, |s| {
        let msgs = s.peers[0].client.drain_messages();
        if !msgs.is_empty() {
            assert!(s.peers[0].client.contains(big), "the object is there first");
        }
        got.extend(msgs);
        !got.is_empty()
    });
    assert_eq!(seqs(&got), vec![7]);
}

#[test]
fn client_messages_are_validated_by_the_server() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 25, lossy());
    let conn = sim.peers[0].conn;
    let door = sim.server.objects_mut().spawn(Door::default()).unwrap();
    let hidden = sim.server.objects_mut().spawn(Door::default()).unwrap();
    sim.server.set_in_scope(conn, hidden, false);
    sim.server.set_message_validator(
        conn,
        Some(Arc::new(|_, m: &ReceivedMessage| {
            m.get::<Buy>().is_none_or(|b| b.amount <= 10)
        })),
    );
    sim.run_until(200, |s| s.peers[0].client.contains(door));
    let client = &mut sim.peers[0].client;
    for i in 0..20u8 {
        client
            .send_message(
                &Buy {
                    item: i as u16,
                    amount: i,
                },
                DeliveryMode::ReliableOrdered,
            )
            .unwrap();
    }
    client
        .send_object_message(door, &chat(1), DeliveryMode::ReliableOrdered)
        .unwrap();
    // An object this client cannot see.
    client
        .send_object_message(hidden, &chat(3), DeliveryMode::ReliableOrdered)
        .unwrap();
    // An object the server does not have.
    client
        .send_object_message(
            replicate::NetRefHandle::new(0xFFF0, false, 0),
            &chat(2),
            DeliveryMode::ReliableOrdered,
        )
        .unwrap();
    let mut got = Vec::new();
    sim.run_until(500, |s| {
        got.extend(s.server.drain_messages(conn));
        got.len() >= 12
    });
    sim.set_conditioner(LinkConditioner::perfect());
    sim.run(50);
    got.extend(sim.server.drain_messages(conn));
    let buys: Vec<u16> = got
        .iter()
        .filter_map(|m| m.get::<Buy>().map(|b| b.item))
        .collect();
    assert_eq!(
        buys,
        (0..=10).collect::<Vec<_>>(),
        "in order, invalid ones refused"
    );
    assert!(got.iter().all(|m| m.from == Some(conn)));
    let chats: Vec<_> = got.iter().filter(|m| m.is::<Chat>()).collect();
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].target, Some(door));
    let stats = sim.server.message_stats(conn).unwrap();
    assert_eq!(stats.rejected, 9);
    assert_eq!(
        stats.dropped_not_in_scope, 2,
        "unknown object, object out of scope"
    );
    let typed = got.into_iter().find(|m| m.is::<Buy>()).unwrap();
    assert_eq!(typed.take::<Buy>().unwrap().item, 0);
}

#[test]
fn messages_larger_than_a_packet_both_ways_exactly_once_in_order_under_loss() {
    let mut sim = Sim::new(setup(ReplicationConfig::default()), 23, lossy());
    let conn = sim.peers[0].conn;
    let big = |id: u32| Blobby {
        id,
        // 100 bytes to 7.6 KB: one part up to eight packets' worth.
        data: bytes(u64::from(id), 100 + (id as usize * 1237) % 7500),
    };
    let (mut down, mut up) = (Vec::new(), Vec::new());
    let (mut sent_down, mut sent_up) = (Vec::new(), Vec::new());
    for tick in 0..90u32 {
        if tick % 3 == 0 {
            let m = big(tick);
            let mode = if tick % 2 == 0 {
                DeliveryMode::ReliableOrdered
            } else {
                DeliveryMode::ReliableUnordered
            };
            sim.server.send_message(conn, &m, mode).unwrap();
            sent_down.push(m);
        }
        if tick % 5 == 0 {
            let m = big(1000 + tick);
            sim.peers[0]
                .client
                .send_message(&m, DeliveryMode::ReliableOrdered)
                .unwrap();
            sent_up.push(m);
        }
        sim.step(Duration::from_millis(16));
        down.extend(sim.peers[0].client.drain_messages());
        up.extend(sim.server.drain_messages(conn));
    }
    sim.set_conditioner(LinkConditioner::perfect());
    let (n_down, n_up) = (sent_down.len(), sent_up.len());
    sim.run_until(3000, |s| {
        down.extend(s.peers[0].client.drain_messages());
        up.extend(s.server.drain_messages(conn));
        down.len() >= n_down && up.len() >= n_up
    });
    sim.run(50);
    down.extend(sim.peers[0].client.drain_messages());
    up.extend(sim.server.drain_messages(conn));
    let take = |v: Vec<ReceivedMessage>| -> Vec<Blobby> {
        v.into_iter().map(|m| m.take::<Blobby>().unwrap()).collect()
    };
    // Large reliable messages share the ordered channel: send order, whatever the mode.
    assert_eq!(
        take(down),
        sent_down,
        "server to client: whole, once, in order"
    );
    assert_eq!(take(up), sent_up, "client to server: whole, once, in order");
    assert_eq!(sim.peers[0].client.message_stats().rejected, 0);
    assert_eq!(sim.server.message_stats(conn).unwrap().rejected, 0);
}
