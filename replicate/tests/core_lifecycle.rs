//! Object lifecycle through the replication writer and reader, packet by packet: create,
//! destroy, lost creation, cancelled destroy, subobjects, tear-off, Iris's
//! lost-packet timeline, dependents, static objects, poll and push modes.

mod common;

use common::core_suite::*;
use common::*;
use replicate::NetRefHandle;
use replicate::internals::connection::DeliveryStatus::{Delivered, Lost};
use replicate::internals::object::SchedulingHint;
use replicate::internals::replication::{
    ReplicatedObjectState as S, ReplicationEvent, ReplicationInfo,
};
use std::time::Duration;

fn state_of(m: &Manual, h: NetRefHandle) -> S {
    let i = m.server.objects().index_of(h).expect("live object");
    m.server.writer(m.conn).unwrap().object_state(i)
}

fn pawn(x: i32, hp: u8) -> Pawn {
    Pawn {
        x,
        y: -x,
        hp,
        alive: true,
        ..Default::default()
    }
}

#[test]
fn send_state_with_priority_is_12_bytes() {
    assert_eq!(std::mem::size_of::<ReplicationInfo>(), 12);
}

#[test]
fn create_then_confirm() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(7, 100)).unwrap();
    let (seq, bytes) = m.tick_and_write();
    assert_eq!(state_of(&m, h), S::WaitOnCreateConfirmation);
    m.deliver_to_client(&bytes);
    let ev = m.client.drain_events();
    assert_eq!(spawned(&ev), vec![h]);
    let c = m.client.get::<Pawn>(h).expect("created on the client");
    assert_eq!((c.x, c.y, c.hp, c.alive), (7, -7, 100, true));
    assert!(c.notifications.is_empty(), "no notify at creation");
    m.ack(seq, Delivered);
    assert_eq!(state_of(&m, h), S::Created);
    // Nothing changed: nothing more to send.
    let (_, bytes) = m.tick_and_write();
    // 16-bit sequence + 5-bit stream count + 4 stream mask bits (replication,
    // tokens, huge objects, messages).
    assert!(
        bytes.len() <= 4,
        "header and an empty stream section: {bytes:?}"
    );
}

#[test]
fn destroy_is_written_first_and_frees_the_index_after_ack() {
    let mut m = Manual::new();
    let a = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    let b = m.server.objects_mut().spawn(pawn(2, 2)).unwrap();
    m.round_trip();
    let ia = m.server.objects().index_of(a).unwrap();
    m.server.objects_mut().destroy(a).unwrap();
    m.server.objects_mut().get_mut::<Pawn>(b).unwrap().hp = 50;
    let (seq, bytes) = m.tick_and_write();
    let w = m.server.writer(m.conn).unwrap();
    assert_eq!(w.object_state(ia), S::WaitOnDestroyConfirmation);
    assert!(
        m.server.objects().entry_at(ia).is_some(),
        "index kept until the destroy is acked"
    );
    m.deliver_to_client(&bytes);
    let ev = m.client.drain_events();
    assert_eq!(destroyed(&ev), vec![a]);
    assert!(!m.client.contains(a));
    assert_eq!(m.client.get::<Pawn>(b).unwrap().hp, 50);
    m.ack(seq, Delivered);
    assert_eq!(
        m.server.writer(m.conn).unwrap().object_state(ia),
        S::Invalid
    );
    assert!(m.server.objects().entry_at(ia).is_none(), "index freed");
    // The freed index is reused by the next object.
    let c = m.server.objects_mut().spawn(pawn(3, 3)).unwrap();
    assert_eq!(m.server.objects().index_of(c), Some(ia));
    m.round_trip();
    assert_eq!(m.client.get::<Pawn>(c).unwrap().x, 3);
}

#[test]
fn lost_destroy_is_sent_again() {
    let mut m = Manual::new();
    let a = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.server.objects_mut().destroy(a).unwrap();
    let (seq, _lost) = m.tick_and_write();
    m.ack(seq, Lost);
    let (seq, bytes) = m.tick_and_write();
    m.deliver_to_client(&bytes);
    m.ack(seq, Delivered);
    assert!(!m.client.contains(a));
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
}

#[test]
fn lost_creation_is_sent_again_with_current_values() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 10)).unwrap();
    let (seq, _never_arrives) = m.tick_and_write();
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().hp = 11;
    m.ack(seq, Lost);
    assert_eq!(state_of(&m, h), S::PendingCreate);
    let (seq, bytes) = m.tick_and_write();
    m.deliver_to_client(&bytes);
    assert_eq!(spawned(&m.client.drain_events()), vec![h]);
    assert_eq!(m.client.get::<Pawn>(h).unwrap().hp, 11);
    m.ack(seq, Delivered);
    assert_eq!(state_of(&m, h), S::Created);
    assert_eq!(m.server.writer(m.conn).unwrap().stats().creations, 2);
}

#[test]
fn destroyed_after_a_lost_creation_sends_a_destroy() {
    // The creation is in flight and an update follows it; the creation is lost, then
    // the object is destroyed. The update alone does not create the object, and the
    // destroy cleans up whatever the client may have.
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 10)).unwrap();
    let (s1, _) = m.tick_and_write();
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().hp = 12;
    let (s2, p2) = m.tick_and_write();
    m.ack(s1, Lost);
    m.server.objects_mut().destroy(h).unwrap();
    let (s3, p3) = m.tick_and_write();
    m.deliver_to_client(&p2);
    assert!(!m.client.contains(h), "an update does not create");
    assert!(
        m.client
            .drain_events()
            .iter()
            .all(|e| !matches!(e, ReplicationEvent::ObjectError { .. })),
        "and is skipped quietly"
    );
    m.deliver_to_client(&p3);
    assert!(
        !m.client.contains(h),
        "the destroy followed the second creation"
    );
    m.ack(s2, Delivered);
    m.ack(s3, Delivered);
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
}

#[test]
fn iris_timeline_packet_101_lost_members_resent_later_with_current_values() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(0, 100)).unwrap();
    let (s100, p100) = m.tick_and_write();
    assert_eq!(s100.0, 100);
    m.deliver_to_client(&p100);
    m.ack(s100, Delivered);
    m.client.drain_events();

    // Packet 101 carries x = 5: lost.
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().x = 5;
    let (s101, _lost) = m.tick_and_write();
    // Packet 102 carries hp = 90: delivered.
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().hp = 90;
    let (s102, p102) = m.tick_and_write();
    m.deliver_to_client(&p102);
    // Meanwhile x moved on to 6.
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().x = 6;
    m.ack(s101, Lost);
    m.ack(s102, Delivered);
    let i = m.server.objects().index_of(h).unwrap();
    let pending = m
        .server
        .writer(m.conn)
        .unwrap()
        .change_mask(m.server.objects(), i)
        .unwrap();
    assert!(pending.get(0), "the lost member is dirty again");

    // Packet 103 ("packet 4") carries x with its *current* value.
    let (_, p103) = m.tick_and_write();
    m.deliver_to_client(&p103);
    let c = m.client.get::<Pawn>(h).unwrap();
    assert_eq!((c.x, c.hp), (6, 90));
    let ev = m.client.drain_events();
    let masks: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e {
            ReplicationEvent::MembersChanged { mask, .. } => Some(mask.to_u64()),
            _ => None,
        })
        .collect();
    // 102 also carried x = 5: it nominated a baseline, built from the acknowledged one
    // (x = 0), so it carried every member that differs from it.
    assert_eq!(
        masks,
        vec![0b0101, 0b0001],
        "102 applied hp (and x = 5), 103 applied x = 6"
    );
    // Notifications carried the old values.
    let c = m.client.get::<Pawn>(h).unwrap();
    assert!(c.notifications.contains(&("hp", "100".into())));
    assert!(c.notifications.contains(&("x", "0".into())));
}

#[test]
fn destroy_cancelled_by_reentering_scope_before_it_was_sent() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.server.set_in_scope(m.conn, h, false);
    assert_eq!(state_of(&m, h), S::PendingDestroy);
    m.server.set_in_scope(m.conn, h, true);
    assert_eq!(state_of(&m, h), S::Created);
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().hp = 2;
    m.round_trip();
    let ev = m.client.drain_events();
    assert!(destroyed(&ev).is_empty());
    assert_eq!(m.client.get::<Pawn>(h).unwrap().hp, 2);
}

#[test]
fn destroy_cancelled_while_in_flight_recreates_after_the_ack() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.client.drain_events();
    m.server.set_in_scope(m.conn, h, false);
    let (seq, destroy_packet) = m.tick_and_write();
    assert_eq!(state_of(&m, h), S::WaitOnDestroyConfirmation);
    m.server.set_in_scope(m.conn, h, true);
    assert_eq!(state_of(&m, h), S::CancelPendingDestroy);
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().hp = 77;
    m.deliver_to_client(&destroy_packet);
    assert!(!m.client.contains(h));
    m.ack(seq, Delivered);
    assert_eq!(state_of(&m, h), S::PendingCreate);
    m.round_trip();
    assert_eq!(spawned(&m.client.drain_events()), vec![h]);
    assert_eq!(m.client.get::<Pawn>(h).unwrap().hp, 77);
    assert_eq!(state_of(&m, h), S::Created);
}

#[test]
fn destroy_cancelled_and_destroy_lost_resends_a_full_creation() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.client.drain_events();
    m.server.set_in_scope(m.conn, h, false);
    let (seq, _lost) = m.tick_and_write();
    m.server.set_in_scope(m.conn, h, true);
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().x = 9;
    m.ack(seq, Lost);
    assert_eq!(state_of(&m, h), S::PendingCreate);
    m.round_trip();
    // The client never lost the object: the creation applies as a full update.
    let ev = m.client.drain_events();
    assert!(
        spawned(&ev).is_empty() && destroyed(&ev).is_empty(),
        "{ev:?}"
    );
    assert_eq!(m.client.get::<Pawn>(h).unwrap().x, 9);
}

#[test]
fn subobjects_are_sent_with_and_destroyed_with_their_owner() {
    let mut m = Manual::new();
    let owner = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    let s1 = m
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
    let s2 = m
        .server
        .objects_mut()
        .spawn_subobject(
            owner,
            Crate {
                kind: 2,
                ..Default::default()
            },
        )
        .unwrap();
    m.round_trip();
    let ev = m.client.drain_events();
    assert_eq!(
        spawned(&ev),
        vec![owner, s1, s2],
        "owner first, subobjects in its batch"
    );
    assert_eq!(m.client.world().object(s1).unwrap().owner(), Some(owner));

    // A dirty subobject is written through its owner.
    m.server.objects_mut().get_mut::<Crate>(s2).unwrap().amount = 5;
    m.round_trip();
    assert_eq!(m.client.get::<Crate>(s2).unwrap().amount, 5);

    // Destroying one subobject alone.
    let i1 = m.server.objects().index_of(s1).unwrap();
    m.server.objects_mut().destroy(s1).unwrap();
    m.round_trip();
    assert_eq!(destroyed(&m.client.drain_events()), vec![s1]);
    assert!(m.client.contains(owner) && m.client.contains(s2));
    assert!(m.server.objects().entry_at(i1).is_none());

    // Destroying the owner takes the remaining subobject along.
    m.server.objects_mut().destroy(owner).unwrap();
    assert!(!m.server.objects().contains(s2));
    m.round_trip();
    let gone = destroyed(&m.client.drain_events());
    assert!(gone.contains(&owner) && gone.contains(&s2));
    assert!(m.client.is_empty());
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
    assert!(m.server.objects().is_empty());
}

#[test]
fn tear_off_keeps_the_last_state_on_the_client() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().hp = 42;
    m.server.objects_mut().tear_off(h).unwrap();
    let (seq, lost) = m.tick_and_write();
    drop(lost);
    m.ack(seq, Lost);
    let (seq, bytes) = m.tick_and_write();
    m.deliver_to_client(&bytes);
    let ev = m.client.drain_events();
    assert!(
        ev.contains(&ReplicationEvent::TornOff { handle: h }),
        "{ev:?}"
    );
    // State first, then end of replication (deferred).
    let pos_change = ev
        .iter()
        .position(|e| matches!(e, ReplicationEvent::MembersChanged { .. }))
        .unwrap();
    let pos_tear = ev
        .iter()
        .position(|e| matches!(e, ReplicationEvent::TornOff { .. }))
        .unwrap();
    assert!(pos_change < pos_tear);
    assert!(!m.client.contains(h));
    let obj = m.client.take_torn_off(h).unwrap();
    assert_eq!(obj.as_any().downcast_ref::<Pawn>().unwrap().hp, 42);
    m.ack(seq, Delivered);
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
    assert!(m.server.objects().is_empty());
}

#[test]
fn dependent_is_written_before_its_parent() {
    for hint in [
        SchedulingHint::Default,
        SchedulingHint::ScheduleBeforeParent,
    ] {
        let mut m = Manual::new();
        let parent = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
        let dep = m.server.objects_mut().spawn(Crate::default()).unwrap();
        m.server
            .objects_mut()
            .add_dependent(parent, dep, hint)
            .unwrap();
        m.round_trip();
        let order = spawned(&m.client.drain_events());
        match hint {
            SchedulingHint::ScheduleBeforeParent => assert_eq!(order, vec![dep, parent]),
            _ => assert_eq!(order, vec![parent, dep]),
        }
    }
}

#[test]
fn dependent_before_parent_only_in_initial_state() {
    let mut m = Manual::new();
    let parent = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    let dep = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.server
        .objects_mut()
        .add_dependent(
            parent,
            dep,
            SchedulingHint::ScheduleBeforeParentIfInitialState,
        )
        .unwrap();
    m.round_trip();
    assert_eq!(spawned(&m.client.drain_events()), vec![dep, parent]);
    // Both change later: no constraint any more, index order.
    m.server.objects_mut().get_mut::<Pawn>(parent).unwrap().hp = 9;
    m.server.objects_mut().get_mut::<Crate>(dep).unwrap().kind = 9;
    m.round_trip();
    let order: Vec<_> = m
        .client
        .drain_events()
        .into_iter()
        .filter_map(|e| match e {
            ReplicationEvent::MembersChanged { handle, .. } => Some(handle),
            _ => None,
        })
        .collect();
    assert_eq!(order, vec![parent, dep]);
}

#[test]
fn higher_priority_goes_first_and_priority_accumulates_until_sent() {
    let mut m = Manual::new();
    m.mtu = 9; // room for one small batch per packet
    let low = m.server.objects_mut().spawn(Crate::default()).unwrap();
    let high = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.server.objects_mut().set_priority(high, 5.0).unwrap();
    m.round_trip();
    let first = spawned(&m.client.drain_events());
    assert_eq!(first, vec![high]);
    let il = m.server.objects().index_of(low).unwrap();
    let p1 = m.server.writer(m.conn).unwrap().priority(il);
    assert!(p1 >= 1.0, "the object that did not fit kept its priority");
    m.round_trip();
    assert_eq!(spawned(&m.client.drain_events()), vec![low]);
    assert_eq!(m.server.writer(m.conn).unwrap().priority(il), 0.0);
}

#[test]
fn below_threshold_waits_until_priority_accumulates() {
    let config = replicate::internals::replication::ReplicationConfig {
        scheduling_threshold: 1.0,
        ..Default::default()
    };
    let mut m = Manual::with_config(config);
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.server.objects_mut().set_priority(h, 0.4).unwrap();
    m.round_trip();
    m.round_trip();
    assert!(!m.client.contains(h), "0.8 < 1.0");
    m.round_trip();
    assert!(m.client.contains(h), "1.2 >= 1.0");
}

#[test]
fn creation_too_large_for_a_packet_does_not_wedge_the_writer() {
    // Without delta compression: against the default state the values would shrink.
    let mut m = Manual::with_config(replicate::internals::replication::ReplicationConfig {
        delta: replicate::internals::replication::DeltaSettings {
            enabled: false,
            ..Default::default()
        },
        ..Default::default()
    });
    m.mtu = 40;
    let big = m
        .server
        .objects_mut()
        .spawn(Big {
            a: u64::MAX,
            b: u64::MAX,
            c: u64::MAX,
            d: u64::MAX,
            e: u64::MAX,
            f: u64::MAX,
            ..Default::default()
        })
        .unwrap();
    let small = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.server.objects_mut().set_priority(big, 10.0).unwrap();
    for _ in 0..3 {
        m.round_trip();
    }
    assert!(m.client.contains(small));
    assert!(!m.client.contains(big));
    assert_eq!(state_of(&m, big), S::HugeObject);
    assert_eq!(m.server.writer(m.conn).unwrap().stats().huge_objects, 1);
    m.server
        .objects_mut()
        .get_mut::<Crate>(small)
        .unwrap()
        .amount = 3;
    m.round_trip();
    assert_eq!(m.client.get::<Crate>(small).unwrap().amount, 3);
    m.server.objects_mut().destroy(big).unwrap();
    m.round_trip();
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 1);
}

#[test]
fn static_objects_share_a_handle_without_a_spawn() {
    let mut m = Manual::new();
    let h = m
        .server
        .objects_mut()
        .spawn_static(
            3,
            Crate {
                kind: 7,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(h.is_static());
    let client_handle = replicate::internals::object::NetRefHandleManager::new(0).static_handle(3);
    assert_eq!(client_handle, h);
    assert!(m.client.register_static(client_handle, Crate::default()));
    m.round_trip();
    let ev = m.client.drain_events();
    assert!(spawned(&ev).is_empty(), "{ev:?}");
    assert_eq!(m.client.get::<Crate>(h).unwrap().kind, 7);
}

#[test]
fn poll_mode_compares_quantized_members() {
    let mut m = Manual::new();
    let mut game_side = pawn(1, 1);
    let h = m.server.objects_mut().spawn_polled(&game_side).unwrap();
    m.round_trip();
    assert!(!m.server.objects_mut().poll(h, &game_side), "unchanged");
    game_side.y = 33;
    assert!(m.server.objects_mut().poll(h, &game_side));
    m.round_trip();
    assert_eq!(m.client.get::<Pawn>(h).unwrap().y, 33);
    let ev = m.client.drain_events();
    assert!(ev.contains(&ReplicationEvent::MembersChanged {
        handle: h,
        mask: replicate::ChangeMask::from_u64(4, 0b0010)
    }));
}

#[test]
fn sealed_tick_changes_follow_every_poll_until_the_next_tick_seals() {
    let mut m = Manual::new();
    let mut game_side = pawn(1, 1);
    let h = m.server.objects_mut().spawn_polled(&game_side).unwrap();
    m.round_trip();
    let table = m.server.objects_mut();
    let i = table.index_of(h).unwrap();
    game_side.y = 33;
    assert!(table.poll(h, &game_side));
    table.seal_tick();
    let masks = |t: &replicate::internals::object::ObjectTable| -> Vec<(u32, u64)> {
        t.tick_changes()
            .iter()
            .map(|c| (c.index, c.mask.to_u64()))
            .collect()
    };
    assert_eq!(masks(table), [(i, 0b0010)]);
    // A later change of the same object is taken down when sealed again.
    game_side.hp = 9;
    assert!(table.poll(h, &game_side));
    table.seal_tick();
    assert_eq!(masks(table), [(i, 0b0110)]);
    // They outlive the tick for connections that take them late, until the next
    // tick seals its own (none here): never taken twice.
    table.end_tick();
    assert_eq!(masks(table), [(i, 0b0110)]);
    table.seal_tick();
    assert!(table.tick_changes().is_empty());

    // The next tick's changes start afresh, whichever object changes first: the
    // object's change of the last tick is not reopened.
    let mut other_side = pawn(2, 2);
    let other = table.spawn_polled(&other_side).unwrap();
    let j = table.index_of(other).unwrap();
    table.end_tick();
    other_side.x = 5;
    assert!(table.poll(other, &other_side));
    game_side.y = 34;
    assert!(table.poll(h, &game_side));
    table.seal_tick();
    assert_eq!(masks(table), [(j, 0b0001), (i, 0b0010)]);
    assert_eq!(table.tick_dirty().collect::<Vec<_>>(), [j, i]);
}

#[test]
fn a_connection_not_written_takes_every_ticks_changes_once() {
    // A tick's change masks wait for the connection's next write; a tick that comes
    // first hands them over before it seals its own. Nothing is lost or taken twice:
    // the masks of both ticks, and the priority of each tick the object was owed.
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(Pawn::default()).unwrap();
    m.round_trip();
    let i = m.server.objects().index_of(h).unwrap();
    let tick = |m: &mut Manual| {
        m.now += Duration::from_millis(16);
        m.server.tick(m.now);
    };
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().x = 5;
    tick(&mut m);
    assert_eq!(
        m.server.writer(m.conn).unwrap().dirty_objects(),
        0,
        "not taken before the connection is reached"
    );
    m.server.objects_mut().get_mut::<Pawn>(h).unwrap().y = 6;
    tick(&mut m);
    tick(&mut m); // no change: only the priority grows
    let gain = m.server.objects().priority(i);
    assert!(m.server.writer_mut(m.conn).is_some());
    let w = m.server.writer(m.conn).unwrap();
    assert_eq!(
        w.change_mask(m.server.objects(), i).unwrap().to_u64(),
        0b0011
    );
    assert_eq!(w.priority(i), 3.0 * gain);
    // Reaching it again takes nothing more.
    assert!(m.server.writer_mut(m.conn).is_some());
    assert_eq!(m.server.writer(m.conn).unwrap().priority(i), 3.0 * gain);
    let (seq, bytes) = m.write();
    m.deliver_to_client(&bytes);
    m.ack(seq, Delivered);
    let p = m.client.get::<Pawn>(h).unwrap();
    assert_eq!((p.x, p.y), (5, 6));
}

#[test]
fn push_mode_quantizes_once_per_tick_whatever_the_connection_count() {
    let mut m = Manual::new();
    for _ in 0..4 {
        m.server.add_connection();
    }
    let h = m
        .server
        .objects_mut()
        .spawn(Counted {
            n: 0,
            ..Default::default()
        })
        .unwrap();
    m.round_trip();
    let before = Counted::quantize_counter().load(std::sync::atomic::Ordering::Relaxed);
    for i in 1..=3 {
        m.server.objects_mut().get_mut::<Counted>(h).unwrap().n = i;
        m.server.objects_mut().get_mut::<Counted>(h).unwrap().n = i; // twice: still once
        m.round_trip();
    }
    let after = Counted::quantize_counter().load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        after - before,
        3,
        "one quantization per dirty tick, 5 connections"
    );
    // Clean objects cost nothing.
    m.round_trip();
    let again = Counted::quantize_counter().load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(again, after);
    assert_eq!(m.client.get::<Counted>(h).unwrap().n, 3);
    for c in 0..5 {
        assert!(m.server.writer(c).is_some());
    }
}

#[test]
fn paused_replication_stream_resumes_by_name() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    assert!(m.server.set_stream_status(
        m.conn,
        "replication",
        replicate::internals::stream::SendStatus::Pause
    ));
    m.round_trip();
    assert!(!m.client.contains(h));
    m.server.set_stream_status(
        m.conn,
        "replication",
        replicate::internals::stream::SendStatus::Send,
    );
    m.round_trip();
    assert!(m.client.contains(h));
}

#[test]
fn token_exports_reach_the_client() {
    let mut m = Manual::new();
    let t = m
        .server
        .tokens_mut(m.conn)
        .unwrap()
        .exports()
        .token_for("Player One")
        .unwrap();
    let seq = m.round_trip();
    let _ = seq;
    assert_eq!(m.client.tokens().imports().resolve(t), Some("Player One"));
    assert!(m.server.tokens_mut(m.conn).unwrap().exports().is_acked(t));
}

#[test]
fn late_connection_gets_subobjects_whose_index_precedes_their_owner() {
    let mut m = Manual::new();
    // Free index 0, then reuse it for a subobject of an owner at index 1.
    let first = m.server.objects_mut().spawn(pawn(0, 0)).unwrap();
    let owner = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.server.objects_mut().destroy(first).unwrap();
    m.round_trip();
    let sub = m
        .server
        .objects_mut()
        .spawn_subobject(
            owner,
            Crate {
                kind: 4,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(m.server.objects().index_of(sub) < m.server.objects().index_of(owner));
    m.round_trip();
    // A new connection starts every object in index order: subobject first.
    let late = m.server.add_connection();
    let mut client = replicate::internals::replication::ReplicationClient::new(
        registry(),
        replicate::internals::replication::ReplicationConfig::default(),
    );
    m.server.tick(m.now);
    let mut w = replicate::bits::BitWriter::with_capacity_bits(16 + 1200 * 8);
    w.write_bits(0, 16);
    m.server.write_packet(
        late,
        replicate::internals::connection::PacketSequence(0),
        &mut w,
    );
    read_manual_packet(&mut client, m.now, &w.finish().unwrap()).unwrap();
    assert_eq!(client.get::<Crate>(sub).unwrap().kind, 4);
    assert!(client.contains(owner));
}

#[test]
fn tags_travel_as_tokens_exported_with_the_batch_once() {
    let mut m = Manual::new();
    let tags = vec!["red team".to_string(), "Player Seven".to_string()];
    let a = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.server.objects_mut().set_tags(a, tags.clone()).unwrap();
    let (seq, first) = m.tick_and_write();
    m.deliver_to_client(&first);
    m.ack(seq, Delivered);
    assert_eq!(m.client.world().object(a).unwrap().tags(), tags.as_slice());

    // The same tags on a second, identical object: ids only, no exports.
    let b = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.server.objects_mut().set_tags(b, tags.clone()).unwrap();
    let (seq, second) = m.tick_and_write();
    m.deliver_to_client(&second);
    m.ack(seq, Delivered);
    assert_eq!(m.client.world().object(b).unwrap().tags(), tags.as_slice());
    let saved = first.len() - second.len();
    assert!(
        saved >= "red team".len() + "Player Seven".len(),
        "{} vs {}",
        first.len(),
        second.len()
    );

    // Changing tags on a live object, with the export lost once.
    m.client.drain_events();
    m.server
        .objects_mut()
        .set_tags(a, vec!["blue team".into()])
        .unwrap();
    let (seq, _lost) = m.tick_and_write();
    m.ack(seq, Lost);
    m.round_trip();
    assert_eq!(
        m.client.world().object(a).unwrap().tags(),
        ["blue team".to_string()]
    );
    assert!(
        m.client
            .drain_events()
            .contains(&ReplicationEvent::TagsChanged { handle: a })
    );
    // Exported through the shared table: the token stream has nothing left.
    let tokens = m.server.tokens_mut(m.conn).unwrap();
    let mut exports = tokens.exports();
    let blue = exports.token_for("blue team").unwrap();
    assert!(exports.is_acked(blue));
    assert!(!exports.has_pending());
}

#[test]
fn an_unknown_token_breaks_only_that_object() {
    // A client that missed the export (a hand-made batch referencing token 9).
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    let mut w = replicate::bits::BitWriter::with_capacity_bytes(64);
    w.write_bits(500, 16); // sequence
    packet_start(&mut w, &[]);
    batch_at(&mut w, local_index(&m.server, m.conn, h), h, |w| {
        w.write_bool(true); // long form
        w.write_bool(false); // exports
        w.write_bool(false); // creating
        w.write_bool(false); // tear off
        w.write_bool(false); // delta
        w.write_bool(true); // tags
        w.write_bits(1, 8);
        w.write_bits(9, 16);
        w.write_bits(0, 3); // empty mask
    });
    packet_end(&mut w);
    read_manual_packet(&mut m.client, m.now, &w.finish().unwrap()).unwrap();
    assert!(m.client.drain_events().iter().any(|e| matches!(
        e,
        ReplicationEvent::ObjectError {
            error: replicate::internals::replication::ObjectReadError::UnknownToken(9),
            ..
        }
    )));
    assert!(m.client.world().is_broken(h));
}

#[test]
fn conditions_are_applied_per_connection() {
    use replicate::internals::connection::PacketSequence;
    use replicate::internals::replication::{ReplicationClient, ReplicationConfig};
    let mut m = Manual::new();
    let other = m.server.add_connection();
    let mut other_client = ReplicationClient::new(registry(), ReplicationConfig::default());
    let h = m
        .server
        .objects_mut()
        .spawn(Secret {
            public: 1,
            mine: 2,
            theirs: 3,
            initial: 4,
            ..Default::default()
        })
        .unwrap();
    m.server
        .objects_mut()
        .set_owner_connection(h, Some(m.conn))
        .unwrap();
    let mut other_seq = 0u16;
    let mut send_other = |m: &mut Manual, c: &mut ReplicationClient| {
        let seq = PacketSequence(other_seq);
        let (_, bytes) = write_manual_packet(&mut m.server, other, seq, 1200);
        read_manual_packet(c, m.now, &bytes).unwrap();
        m.server.process_delivery(other, seq, Delivered);
        other_seq += 1;
    };
    m.round_trip();
    send_other(&mut m, &mut other_client);
    let owner_view = m.client.get::<Secret>(h).unwrap();
    assert_eq!(
        (
            owner_view.public,
            owner_view.mine,
            owner_view.theirs,
            owner_view.initial
        ),
        (1, 2, 0, 4)
    );
    let other_view = other_client.get::<Secret>(h).unwrap();
    assert_eq!(
        (
            other_view.public,
            other_view.mine,
            other_view.theirs,
            other_view.initial
        ),
        (1, 0, 3, 4)
    );
    // After creation the init-only member is never sent again.
    {
        let s = m.server.objects_mut().get_mut::<Secret>(h).unwrap();
        s.initial = 40;
        s.mine = 20;
        s.theirs = 30;
    }
    m.round_trip();
    send_other(&mut m, &mut other_client);
    let owner_view = m.client.get::<Secret>(h).unwrap();
    assert_eq!(
        (owner_view.mine, owner_view.theirs, owner_view.initial),
        (20, 0, 4)
    );
    let other_view = other_client.get::<Secret>(h).unwrap();
    assert_eq!(
        (other_view.mine, other_view.theirs, other_view.initial),
        (0, 30, 4)
    );

    // Ownership moves: owner-dependent members are sent afresh, without any change.
    m.server
        .objects_mut()
        .set_owner_connection(h, Some(other))
        .unwrap();
    m.round_trip();
    send_other(&mut m, &mut other_client);
    let old_owner = m.client.get::<Secret>(h).unwrap();
    assert_eq!(
        old_owner.theirs, 30,
        "now a non-owner: gets SkipOwner members"
    );
    let new_owner = other_client.get::<Secret>(h).unwrap();
    assert_eq!(new_owner.mine, 20, "now the owner: gets OwnerOnly members");
}

#[test]
fn tear_off_that_arrived_though_reported_lost_is_not_an_error() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    m.server.objects_mut().tear_off(h).unwrap();
    let (seq, bytes) = m.tick_and_write();
    m.deliver_to_client(&bytes);
    m.ack(seq, Lost); // the ack was lost, not the packet
    m.round_trip();
    let ev = m.client.drain_events();
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ReplicationEvent::ObjectError { .. })),
        "{ev:?}"
    );
    assert!(m.client.world().torn_off(h).is_some());
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
}

#[test]
fn subobjects_torn_off_with_their_owner_keep_their_final_state() {
    let mut m = Manual::new();
    let owner = m.server.objects_mut().spawn(Crate::default()).unwrap();
    let sub = m
        .server
        .objects_mut()
        .spawn_subobject(owner, Crate::default())
        .unwrap();
    m.round_trip();
    m.server
        .objects_mut()
        .get_mut::<Crate>(owner)
        .unwrap()
        .amount = 1;
    m.server.objects_mut().get_mut::<Crate>(sub).unwrap().amount = 2;
    m.server.objects_mut().tear_off(owner).unwrap();
    m.mtu = 11; // one tear-off batch per packet
    m.round_trip();
    m.round_trip();
    let ev = m.client.drain_events();
    assert!(
        ev.contains(&ReplicationEvent::TornOff { handle: owner }),
        "{ev:?}"
    );
    assert!(
        ev.contains(&ReplicationEvent::TornOff { handle: sub }),
        "{ev:?}"
    );
    let o = m.client.take_torn_off(owner).unwrap();
    assert_eq!(o.as_any().downcast_ref::<Crate>().unwrap().amount, 1);
    let s = m.client.take_torn_off(sub).unwrap();
    assert_eq!(s.as_any().downcast_ref::<Crate>().unwrap().amount, 2);
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
    assert!(m.server.objects().is_empty());
}

#[test]
fn removing_a_connection_discards_its_records_and_releases_its_objects() {
    let mut m = Manual::new();
    let other = m.server.add_connection();
    let h = m.server.objects_mut().spawn(pawn(1, 1)).unwrap();
    m.round_trip();
    let i = m.server.objects().index_of(h).unwrap();
    // The other connection has the creation in flight when the object is destroyed.
    let mut w = replicate::bits::BitWriter::with_capacity_bytes(1200);
    m.server.write_packet(
        other,
        replicate::internals::connection::PacketSequence(0),
        &mut w,
    );
    m.server.objects_mut().destroy(h).unwrap();
    m.round_trip();
    assert!(
        m.server.objects().entry_at(i).is_some(),
        "still referenced by the other connection"
    );
    m.server.remove_connection(other);
    assert!(m.server.objects().entry_at(i).is_none(), "freed");
    assert!(m.server.writer(other).is_none());
}

#[test]
fn drivers_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<replicate::internals::replication::ReplicationServer>();
    assert_send::<replicate::internals::replication::ReplicationClient>();
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(pawn(3, 3)).unwrap();
    let handle = std::thread::spawn(move || {
        m.round_trip();
        m.client.get::<Pawn>(h).map(|p| p.x)
    });
    assert_eq!(handle.join().unwrap(), Some(3));
}

#[test]
fn writer_hooks_set_priority_and_filter_members() {
    use replicate::internals::object::{InternalIndex, ObjectTable};
    use replicate::internals::replication::WriterHooks;
    struct Hooks {
        ignored: NetRefHandle,
    }
    impl WriterHooks for Hooks {
        fn priority(&mut self, table: &ObjectTable, index: InternalIndex) -> f32 {
            let h = table.entry_at(index).unwrap().handle();
            if h == self.ignored { 0.0 } else { 1.0 }
        }
        fn filter_members(
            &mut self,
            _table: &ObjectTable,
            _index: InternalIndex,
            _creating: bool,
            mask: &mut replicate::ChangeMask,
        ) {
            mask.clear_bit(2); // never send `hp`
        }
    }
    let mut m = Manual::new();
    let seen = m.server.objects_mut().spawn(pawn(1, 50)).unwrap();
    let ignored = m.server.objects_mut().spawn(pawn(2, 60)).unwrap();
    assert!(
        m.server
            .set_writer_hooks(m.conn, Box::new(Hooks { ignored }))
    );
    for _ in 0..3 {
        m.round_trip();
    }
    assert!(
        !m.client.contains(ignored),
        "priority 0 never reaches the threshold"
    );
    let c = m.client.get::<Pawn>(seen).unwrap();
    assert_eq!((c.x, c.hp, c.alive), (1, 0, true), "hp filtered out");
}

#[test]
fn extra_streams_ride_along_with_replication() {
    use replicate::bits::{BitReader, BitWriter};
    use replicate::internals::connection::DeliveryStatus;
    use replicate::internals::stream::{DataStream, StreamError, WriteResult};

    #[derive(Default)]
    struct Chat {
        outbox: Vec<u8>,
        inbox: Vec<u8>,
        in_flight: std::collections::VecDeque<u8>,
    }
    impl<C: ?Sized> DataStream<C> for Chat {
        fn name(&self) -> &str {
            "chat"
        }
        fn write_data(&mut self, _: &C, w: &mut BitWriter) -> WriteResult {
            let Some(b) = self.outbox.pop() else {
                return WriteResult::NoData;
            };
            w.write_bits(b as u64, 8);
            self.in_flight.push_back(b);
            WriteResult::Ok
        }
        fn read_data(&mut self, _: &mut C, r: &mut BitReader) -> Result<(), StreamError> {
            self.inbox.push(r.read_bits(8) as u8);
            r.check().map_err(|e| StreamError::malformed("chat", e))
        }
        fn process_delivery(&mut self, _: &mut C, s: DeliveryStatus) {
            if let Some(b) = self.in_flight.pop_front()
                && s == DeliveryStatus::Lost
            {
                self.outbox.push(b);
            }
        }
    }

    let mut m = Manual::new();
    let chat = Chat {
        outbox: vec![42],
        ..Default::default()
    };
    let on_server = m.server.add_stream(m.conn, chat).unwrap();
    let on_client = m.client.add_stream(Chat::default()).unwrap();
    assert_eq!(on_server.index(), on_client.index(), "the same position");
    let h = m.server.objects_mut().spawn(pawn(5, 5)).unwrap();
    m.round_trip();
    assert_eq!(m.client.stream_mut(on_client).unwrap().inbox, vec![42]);
    assert_eq!(m.client.get::<Pawn>(h).unwrap().x, 5);
    assert!(
        m.server
            .stream_mut(m.conn, on_server)
            .unwrap()
            .in_flight
            .is_empty()
    );
}
