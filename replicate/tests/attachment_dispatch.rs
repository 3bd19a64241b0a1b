//! When messages execute relative to the state of the packet that delivers them
//! (`AttachmentConfig::reliable_before_state`, Iris's
//! `ExecuteReliableRPCsBeforeApplyState`): reliable messages before the state (default)
//! or after it, unreliable ones always after; an object message whose object the same
//! packet creates waits until it is spawned; held object messages leave as soon as
//! their object's creation is acknowledged. And messages larger than a packet: reliable
//! ones travel in parts and arrive whole, in order, through loss; unreliable ones that
//! large are refused at the send.
//!
//! Packets go over a perfect hand-driven link so each test controls exactly what shares
//! a packet.

mod common;

use common::Link;
use replicate::NetRefHandle;
use replicate::Replicated;
use replicate::internals::blob::DeliveryMode;
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::attachment::{MessageInfo, MessageOutcome, encode_message};
use replicate::internals::replication::{
    ClientWorld, ReplicationClient, ReplicationConfig, ReplicationEvent, ReplicationServer,
};
use std::sync::{Arc, Mutex};

/// A replicated object.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
struct Tower {
    #[net(bits = 8)]
    health: u32,
}

/// An RPC to a tower.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
struct Hit {
    #[net(bits = 8)]
    damage: u32,
}

/// A connection-level message.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
struct Ping {
    n: u32,
}

/// A message that may be far larger than a packet.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
struct Scroll {
    #[net(max_len = 8000)]
    text: String,
}

fn link(before_state: bool) -> Link {
    let mut config = ReplicationConfig::default();
    config.attachments.reliable_before_state = before_state;
    Link::new(config)
}

/// A tower that exists (and is acknowledged) on the client.
fn tower(link: &mut Link, health: u32) -> NetRefHandle {
    let h = link
        .server
        .objects_mut()
        .spawn(Tower { health })
        .expect("spawn");
    link.step();
    link.step();
    assert_eq!(link.client.get::<Tower>(h).map(|t| t.health), Some(health));
    h
}

fn set_health(link: &mut Link, h: NetRefHandle, health: u32) {
    link.server
        .objects_mut()
        .get_mut::<Tower>(h)
        .expect("tower")
        .health = health;
}

/// What a handler saw: the message's damage and the target's health at that moment.
type Seen = Arc<Mutex<Vec<(u32, Option<u32>)>>>;

fn record_hits(client: &mut ReplicationClient) -> Seen {
    let seen = Seen::default();
    let log = seen.clone();
    client
        .on_message(
            move |hit: Hit, info: MessageInfo, world: &mut ClientWorld| {
                let health = info
                    .target
                    .and_then(|h| world.get::<Tower>(h))
                    .map(|t| t.health);
                log.lock().unwrap().push((hit.damage, health));
            },
        )
        .expect("Hit is registered");
    seen
}

fn seen(s: &Seen) -> Vec<(u32, Option<u32>)> {
    s.lock().unwrap().clone()
}

/// A state change and two RPCs (reliable, unreliable) sent in one tick, so they share
/// one packet; returns what the handler saw.
fn change_and_hit(before_state: bool) -> (Vec<(u32, Option<u32>)>, Link) {
    let mut link = link(before_state);
    let tower = tower(&mut link, 100);
    let hits = record_hits(&mut link.client);
    set_health(&mut link, tower, 50);
    for (damage, mode) in [
        (50, DeliveryMode::ReliableOrdered),
        (51, DeliveryMode::Unreliable),
        (52, DeliveryMode::ReliableUnordered),
    ] {
        let out = link
            .server
            .send_object_message(link.conn, tower, &Hit { damage }, mode)
            .unwrap();
        assert_eq!(out, MessageOutcome::Queued);
    }
    link.tick();
    assert!(link.packet(), "state and messages go out");
    assert!(!link.packet(), "all of it fitted in one packet");
    assert_eq!(link.client.get::<Tower>(tower).unwrap().health, 50);
    let got = seen(&hits);
    (got, link)
}

#[test]
fn reliable_messages_run_before_their_packets_state_by_default() {
    let (got, mut link) = change_and_hit(true);
    // Reliable ones (ordered, then unordered) saw the old health; the unreliable one
    // ran after the packet's state was applied.
    assert_eq!(got, vec![(50, Some(100)), (52, Some(100)), (51, Some(50))]);
    assert!(
        link.client.drain_messages().is_empty(),
        "handlers took them"
    );
    assert!(
        ReplicationConfig::default()
            .attachments
            .reliable_before_state
    );
}

#[test]
fn with_the_setting_off_every_message_runs_after_the_state() {
    let (got, _) = change_and_hit(false);
    // All after the state, in the packet's channel order (unreliable, ordered,
    // unordered).
    assert_eq!(got, vec![(51, Some(50)), (50, Some(50)), (52, Some(50))]);
}

/// An RPC sent just before the object is destroyed shares the destroy's packet.
fn hit_then_destroy(before_state: bool) -> (Vec<(u32, Option<u32>)>, Link) {
    let mut link = link(before_state);
    let tower = tower(&mut link, 80);
    let hits = record_hits(&mut link.client);
    link.server
        .send_object_message(
            link.conn,
            tower,
            &Hit { damage: 9 },
            DeliveryMode::ReliableOrdered,
        )
        .unwrap();
    link.server.objects_mut().destroy(tower).unwrap();
    link.tick();
    assert!(link.packet());
    assert!(!link.client.contains(tower), "the destroy was applied");
    let got = seen(&hits);
    (got, link)
}

#[test]
fn a_reliable_rpc_still_finds_the_object_its_packet_destroys() {
    let (got, link) = hit_then_destroy(true);
    assert_eq!(got, vec![(9, Some(80))]);
    assert_eq!(link.client.message_stats().dropped_not_in_scope, 0);
}

#[test]
fn after_the_state_an_rpc_to_a_destroyed_object_is_dropped() {
    let (got, link) = hit_then_destroy(false);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(link.client.message_stats().dropped_not_in_scope, 1);
}

#[test]
fn an_object_message_waits_for_the_spawn_of_its_object_in_the_same_packet() {
    for before_state in [true, false] {
        let mut link = link(before_state);
        let hits = record_hits(&mut link.client);
        let tower = link
            .server
            .objects_mut()
            .spawn(Tower { health: 30 })
            .unwrap();
        // Past the server's hold (which normally waits for the creation's ack), so
        // the creation and the message share a packet.
        let registry = link.server.objects().registry().clone();
        let blob = encode_message(&registry, Some(tower), &Hit { damage: 3 }, 1 << 16).unwrap();
        link.server
            .messages_mut(link.conn)
            .unwrap()
            .push(DeliveryMode::ReliableOrdered, blob)
            .unwrap();
        link.tick();
        assert!(link.packet());
        let events = link.client.drain_events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, ReplicationEvent::Spawned { handle, .. } if *handle == tower)),
            "{events:?}"
        );
        assert_eq!(
            seen(&hits),
            vec![(3, Some(30))],
            "before_state {before_state}"
        );
    }
}

#[test]
fn without_a_handler_messages_queue_in_the_order_they_ran() {
    let mut link = link(true);
    link.server
        .send_message(link.conn, &Ping { n: 1 }, DeliveryMode::Unreliable)
        .unwrap();
    link.server
        .send_message(link.conn, &Ping { n: 2 }, DeliveryMode::ReliableUnordered)
        .unwrap();
    link.server
        .send_message(link.conn, &Ping { n: 3 }, DeliveryMode::ReliableOrdered)
        .unwrap();
    link.step();
    let order: Vec<u32> = link
        .client
        .drain_messages()
        .into_iter()
        .map(|m| m.take::<Ping>().unwrap().n)
        .collect();
    assert_eq!(order, vec![3, 2, 1]);
}

#[test]
fn a_removed_handler_sends_messages_back_to_the_queue() {
    let mut link = link(true);
    let tower = tower(&mut link, 10);
    let hits = record_hits(&mut link.client);
    assert!(link.client.remove_message_handler::<Hit>());
    assert!(!link.client.remove_message_handler::<Hit>());
    link.server
        .send_object_message(
            link.conn,
            tower,
            &Hit { damage: 1 },
            DeliveryMode::Unreliable,
        )
        .unwrap();
    link.step();
    assert!(seen(&hits).is_empty());
    let queued = link.client.drain_messages();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].target, Some(tower));
    assert_eq!(queued[0].get::<Hit>(), Some(&Hit { damage: 1 }));
}

#[test]
fn a_held_object_message_leaves_with_the_first_packet_after_the_creation_ack() {
    let mut link = link(true);
    let hits = record_hits(&mut link.client);
    let tower = link
        .server
        .objects_mut()
        .spawn(Tower { health: 7 })
        .unwrap();
    let out = link
        .server
        .send_object_message(
            link.conn,
            tower,
            &Hit { damage: 2 },
            DeliveryMode::ReliableOrdered,
        )
        .unwrap();
    assert_eq!(out, MessageOutcome::Held);
    link.tick();
    // The creation goes out and is acknowledged; the message must not wait for the
    // next tick.
    assert!(link.packet());
    assert!(seen(&hits).is_empty(), "held until the creation is acked");
    assert_eq!(link.server.message_stats(link.conn).unwrap().held, 0);
    assert!(link.packet(), "the released message goes out at once");
    assert_eq!(seen(&hits), vec![(2, Some(7))]);
}

fn scroll(seed: u32, len: usize) -> Scroll {
    let text = (0..len)
        .map(|i| char::from(b'a' + ((i as u32 * 7 + seed) % 26) as u8))
        .collect();
    Scroll { text }
}

#[test]
fn reliable_messages_larger_than_a_packet_arrive_whole_and_in_order_through_loss() {
    let mut link = link(true);
    let sent = vec![
        (scroll(1, 3000), DeliveryMode::ReliableOrdered),
        (scroll(2, 10), DeliveryMode::ReliableOrdered),
        (scroll(3, 7000), DeliveryMode::ReliableUnordered),
        (scroll(4, 20), DeliveryMode::ReliableOrdered),
    ];
    for (m, mode) in &sent {
        link.server.send_message(link.conn, m, *mode).unwrap();
    }
    // 10 000 characters are ~80 000 bits: at least 9 packets of 1200 bytes. Lose every
    // third packet.
    let mut packets = 0;
    for _ in 0..100 {
        link.tick();
        while link.packet_lossy(packets % 3 == 2) {
            packets += 1;
        }
        if link.server.message_stats(link.conn).unwrap().written > 0
            && link.server.messages_mut(link.conn).unwrap().is_idle()
        {
            break;
        }
    }
    assert!(packets >= 9, "{packets} packets");
    let got: Vec<Scroll> = link
        .client
        .drain_messages()
        .into_iter()
        .map(|m| m.take::<Scroll>().unwrap())
        .collect();
    let texts: Vec<usize> = got.iter().map(|s| s.text.len()).collect();
    assert_eq!(
        texts,
        vec![3000, 10, 7000, 20],
        "whole, once, in send order"
    );
    assert_eq!(
        got,
        sent.into_iter().map(|(m, _)| m).collect::<Vec<_>>(),
        "bit-identical"
    );
    assert_eq!(link.client.message_stats().rejected, 0);
}

#[test]
fn unreliable_messages_larger_than_a_part_are_refused_at_the_send() {
    let mut link = link(true);
    let err = link
        .server
        .send_message(link.conn, &scroll(0, 500), DeliveryMode::Unreliable)
        .unwrap_err();
    assert!(
        matches!(
            err,
            replicate::internals::replication::attachment::MessageError::UnreliableTooLarge {
                max: 1024,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("send it reliably"));
    // A small one still goes.
    link.server
        .send_message(link.conn, &scroll(0, 50), DeliveryMode::Unreliable)
        .unwrap();
    // Beyond max_message_bits (8 KiB) even reliable ones are refused.
    assert!(
        link.server
            .send_message(link.conn, &scroll(0, 8000), DeliveryMode::ReliableOrdered)
            .is_ok(),
        "8000 bytes fit 8 KiB"
    );
    let mut big = ReplicationConfig::default();
    big.attachments.max_message_bits = 4096;
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let mut small = ReplicationServer::new(registry, big);
    let c = small.add_connection();
    assert!(
        small
            .send_message(c, &scroll(0, 1000), DeliveryMode::ReliableOrdered)
            .is_err()
    );
    link.step();
    let got = link.client.drain_messages();
    assert_eq!(got.len(), 1, "the large reliable one needs more packets");
    assert_eq!(got[0].get::<Scroll>().unwrap().text.len(), 50);
}
