//! The reader: unresolved references (Iris's soldiers and captain, hot and cold
//! caches), broken batches, framing errors, deferred end of replication.

mod common;

use common::core_suite::*;
use replicate::__private::ReplicatedState;
use replicate::NetRefHandle;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::replication::{ObjectReadError, ReplicationConfig, ReplicationEvent};
use replicate::internals::state::ChangeMask;
use std::time::Duration;

/// Spawns a captain of `rank` that the client does not see yet (out of its scope), so
/// references to it park on the client.
fn hidden_captain(m: &mut Manual, rank: u8) -> NetRefHandle {
    let captain = m
        .server
        .objects_mut()
        .spawn(Captain {
            rank,
            ..Default::default()
        })
        .unwrap();
    m.server.set_in_scope(m.conn, captain, false);
    captain
}

/// Spawns a soldier with `hp` referencing `captain`.
fn spawn_soldier(m: &mut Manual, hp: u8, captain: NetRefHandle) -> NetRefHandle {
    m.server
        .objects_mut()
        .spawn(Soldier {
            hp,
            captain,
            ..Default::default()
        })
        .unwrap()
}

#[test]
fn soldiers_reference_a_captain_that_arrives_later() {
    let mut m = Manual::new();
    let captain = hidden_captain(&mut m, 3);
    let s1 = spawn_soldier(&mut m, 10, captain);
    let s2 = spawn_soldier(&mut m, 20, captain);
    // Packets 1-2: soldiers, captain unknown to the client -> parked in the hot cache.
    m.round_trip();
    m.round_trip();
    assert!(!m.client.contains(captain));
    for (s, hp) in [(s1, 10), (s2, 20)] {
        let soldier = m.client.get::<Soldier>(s).unwrap();
        assert_eq!(soldier.hp, hp, "other members applied");
        assert_eq!(soldier.captain, NetRefHandle::INVALID, "reference withheld");
        assert!(
            m.client
                .world()
                .object(s)
                .unwrap()
                .pending_reference_mask()
                .is_some()
        );
    }
    assert_eq!(m.client.world().resolver().counts(), (1, 0));
    m.client.drain_events();

    // Packet 3: the captain arrives; the soldiers' references are patched.
    m.server.set_in_scope(m.conn, captain, true);
    m.round_trip();
    let ev = m.client.drain_events();
    let resolved: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            ReplicationEvent::ReferencesResolved { handle, mask } => Some((*handle, mask.to_u64())),
            _ => None,
        })
        .collect();
    assert_eq!(resolved.len(), 2, "{ev:?}");
    assert!(resolved.contains(&(s1, 0b10)) && resolved.contains(&(s2, 0b10)));
    for s in [s1, s2] {
        let soldier = m.client.get::<Soldier>(s).unwrap();
        assert_eq!(soldier.captain, captain);
        assert!(
            soldier
                .notifications
                .contains(&("captain", format!("{:?}", NetRefHandle::INVALID)))
        );
    }
    assert_eq!(m.client.world().resolver().counts(), (0, 0));

    // Packet 4: soldiers 3-5 resolve directly.
    let later: Vec<_> = (0..3)
        .map(|i| spawn_soldier(&mut m, 30 + i, captain))
        .collect();
    m.round_trip();
    for s in later {
        assert_eq!(m.client.get::<Soldier>(s).unwrap().captain, captain);
    }
    assert!(
        !m.client
            .drain_events()
            .iter()
            .any(|e| matches!(e, ReplicationEvent::ReferencesResolved { .. }))
    );
}

#[test]
fn reference_in_the_same_packet_resolves_at_once() {
    let mut m = Manual::new();
    let captain = m
        .server
        .objects_mut()
        .spawn(Captain {
            rank: 1,
            ..Default::default()
        })
        .unwrap();
    let s = spawn_soldier(&mut m, 1, captain);
    m.round_trip();
    assert_eq!(m.client.get::<Soldier>(s).unwrap().captain, captain);
    assert_eq!(m.client.world().resolver().counts(), (0, 0));
}

#[test]
fn unresolved_reference_goes_cold_after_the_hot_lifetime() {
    let mut m = Manual::new();
    let captain = hidden_captain(&mut m, 0);
    let s = spawn_soldier(&mut m, 1, captain);
    m.round_trip(); // now = 16 ms
    assert_eq!(m.client.world().resolver().counts(), (1, 0));
    let t0 = m.now;
    // Hot: retried on every update for 1000 ms.
    let mut t = t0;
    while t < t0 + Duration::from_millis(990) {
        t += Duration::from_millis(10);
        m.client.update(t);
    }
    assert_eq!(m.client.world().resolver().counts(), (1, 0));
    let hot_attempts = m.client.world().stats().hot_resolve_attempts;
    assert!(hot_attempts >= 99, "{hot_attempts}");
    m.client.update(t0 + Duration::from_millis(1001));
    assert_eq!(
        m.client.world().resolver().counts(),
        (0, 1),
        "moved to the cold cache"
    );
    // Cold: retried every 200 ms only.
    let cold_before = m.client.world().stats().cold_resolve_attempts;
    let start = t0 + Duration::from_millis(1001);
    for step in 1..=100u64 {
        m.client.update(start + Duration::from_millis(10 * step));
    }
    let cold = m.client.world().stats().cold_resolve_attempts - cold_before;
    assert!(
        (4..=6).contains(&cold),
        "1000 ms of cold retries every 200 ms: {cold}"
    );
    assert_eq!(
        m.client.world().stats().hot_resolve_attempts,
        hot_attempts + 1,
        "no more hot attempts"
    );
    // The captain arrives; resolved at the next cold pass, within 200 ms.
    m.server.set_in_scope(m.conn, captain, true);
    m.now = start + Duration::from_millis(1000);
    m.round_trip();
    let mut t = m.now;
    let deadline = t + Duration::from_millis(200);
    while m.client.get::<Soldier>(s).unwrap().captain != captain && t <= deadline {
        t += Duration::from_millis(10);
        m.client.update(t);
    }
    assert_eq!(m.client.get::<Soldier>(s).unwrap().captain, captain);
}

#[test]
fn without_the_cache_every_reference_is_retried_each_pass() {
    let config = ReplicationConfig {
        use_resolving_cache: false,
        ..Default::default()
    };
    let mut m = Manual::with_config(config);
    let captain = hidden_captain(&mut m, 0);
    spawn_soldier(&mut m, 1, captain);
    m.round_trip();
    for i in 0..300u64 {
        m.client.update(Duration::from_millis(2000 + i * 10));
    }
    assert_eq!(m.client.world().resolver().counts(), (1, 0), "never cold");
    assert!(m.client.world().stats().hot_resolve_attempts > 300);
}

// ---- hand-made packets ----

/// The flags of a plain update batch: no exports, not creating, no tear off, no delta,
/// no tags.
fn update_flags(w: &mut BitWriter) {
    w.write_bool(true); // long form
    w.write_bool(false); // exports
    w.write_bool(false); // not creating
    w.write_bool(false); // tear off
    w.write_bool(false); // delta
    w.write_bool(false); // tags
}

fn pawn_creation(w: &mut BitWriter, protocol: u64, x: i32) {
    let reg = registry();
    w.write_bool(true); // long form
    w.write_bool(false); // exports
    w.write_bool(true); // creating
    w.write_bits(protocol, reg.index_bits());
    w.write_bool(false); // owner
    w.write_bool(false); // tear off
    w.write_bool(false); // delta
    w.write_bool(false); // tags
    let mask = ChangeMask::all(4);
    mask.write(w);
    let state = replicate::Replicated::to_state(&Pawn {
        x,
        y: 0,
        hp: 1,
        alive: true,
        ..Default::default()
    });
    ReplicatedState::serialize(&state, &mask, 0, w);
}

#[test]
fn unknown_protocol_is_an_error_for_that_object_only() {
    let mut m = Manual::new();
    let pawn_proto = registry().index_of::<Pawn>().unwrap() as u64;
    let bad = NetRefHandle::new(50, false, 0);
    let good = NetRefHandle::new(51, false, 0);
    let mut w = BitWriter::with_capacity_bytes(256);
    packet_start(&mut w, &[]);
    // The largest index the field can hold is past the registry's end.
    let unknown = (1u64 << registry().index_bits()) - 1;
    assert!(unknown >= registry().len() as u64);
    batch(&mut w, bad, |w| pawn_creation(w, unknown, 1));
    batch(&mut w, good, |w| pawn_creation(w, pawn_proto, 2));
    packet_end(&mut w);
    m.read_raw(w).unwrap();
    let ev = m.client.drain_events();
    assert!(ev.contains(&ReplicationEvent::ObjectError {
        handle: bad,
        error: ObjectReadError::UnknownProtocol(unknown)
    }));
    assert_eq!(m.client.get::<Pawn>(good).unwrap().x, 2);
    assert!(m.client.world().is_broken(bad));
}

#[test]
fn broken_object_batches_are_skipped_and_the_rest_goes_on() {
    let mut m = Manual::new();
    let proto = registry().index_of::<Pawn>().unwrap() as u64;
    let h = NetRefHandle::new(60, false, 0);
    let other = NetRefHandle::new(61, false, 0);
    // Extra bits after the members: the batch does not decode cleanly.
    let mut w = BitWriter::with_capacity_bytes(256);
    packet_start(&mut w, &[]);
    batch(&mut w, h, |w| {
        pawn_creation(w, proto, 1);
        w.write_bits(0b101, 3);
    });
    packet_end(&mut w);
    m.read_raw(w).unwrap();
    assert!(m.client.world().is_broken(h));
    assert!(!m.client.contains(h));
    assert!(matches!(
        m.client.drain_events().as_slice(),
        [ReplicationEvent::ObjectError {
            error: ObjectReadError::TrailingBits(3),
            ..
        }]
    ));
    // Later valid batches for the broken handle are skipped; others are read.
    let mut w = BitWriter::with_capacity_bytes(256);
    packet_start(&mut w, &[]);
    batch(&mut w, h, |w| pawn_creation(w, proto, 5));
    batch(&mut w, other, |w| pawn_creation(w, proto, 6));
    packet_end(&mut w);
    m.read_raw(w).unwrap();
    assert!(!m.client.contains(h));
    assert_eq!(m.client.get::<Pawn>(other).unwrap().x, 6);
    assert_eq!(m.client.world().stats().skipped_broken, 1);
}

#[test]
fn framing_error_keeps_what_was_read() {
    let mut m = Manual::new();
    let proto = registry().index_of::<Pawn>().unwrap() as u64;
    let h = NetRefHandle::new(70, false, 0);
    let mut w = BitWriter::with_capacity_bytes(256);
    packet_start(&mut w, &[]);
    batch(&mut w, h, |w| pawn_creation(w, proto, 4));
    // A batch that claims more bits than the packet has.
    w.write_bool(false); // the next index
    w.write_bool(true); // long form
    w.write_bool(true); // the long size form
    w.write_bits(60_000, 16);
    assert!(m.read_raw(w).is_err());
    assert_eq!(m.client.get::<Pawn>(h).unwrap().x, 4);
    assert_eq!(m.client.world().stats().framing_errors, 1);
}

#[test]
fn update_for_unknown_object_is_skipped_and_delta_flag_is_an_object_error() {
    let mut m = Manual::new();
    let h = NetRefHandle::new(80, false, 0);
    let mut w = BitWriter::with_capacity_bytes(256);
    packet_start(&mut w, &[]);
    batch(&mut w, h, |w| {
        update_flags(w);
        w.write_bits(0, 4);
    });
    batch(&mut w, NetRefHandle::new(81, false, 0), |w| {
        w.write_bool(true); // long form
        w.write_bool(false);
        w.write_bool(true);
        w.write_bits(0, registry().index_bits());
        w.write_bool(false);
        w.write_bool(false);
        w.write_bool(true); // delta
    });
    packet_end(&mut w);
    m.read_raw(w).unwrap();
    // An update of an object no creation named (its creation packet was lost) is
    // skipped by its size, quietly: the server resends the creation.
    assert_eq!(m.client.world().stats().stale_batches, 1);
    let ev = m.client.drain_events();
    assert!(!ev.iter().any(|e| matches!(
        e,
        ReplicationEvent::ObjectError {
            error: ObjectReadError::UnknownHandle,
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(
        e,
        ReplicationEvent::ObjectError {
            error: ObjectReadError::Decode(_),
            ..
        }
    )));
    assert!(
        !m.client.world().is_broken(h),
        "an unknown handle is not broken"
    );
}

#[test]
fn end_of_replication_runs_after_state_is_applied() {
    // A packet that destroys A and updates B (which references A's slot order): the
    // destroy is read first but dispatched after B's state.
    let mut m = Manual::new();
    let a = m.server.objects_mut().spawn(Crate::default()).unwrap();
    let b = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    m.client.drain_events();
    m.server.objects_mut().destroy(a).unwrap();
    m.server.objects_mut().get_mut::<Crate>(b).unwrap().amount = 1;
    m.round_trip();
    let ev = m.client.drain_events();
    assert!(
        matches!(ev[0], ReplicationEvent::MembersChanged { handle, .. } if handle == b),
        "{ev:?}"
    );
    assert_eq!(ev[1], ReplicationEvent::Destroyed { handle: a });

    let config = ReplicationConfig {
        defer_end_replication: false,
        ..Default::default()
    };
    let mut m = Manual::with_config(config);
    let a = m.server.objects_mut().spawn(Crate::default()).unwrap();
    let b = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    m.client.drain_events();
    m.server.objects_mut().destroy(a).unwrap();
    m.server.objects_mut().get_mut::<Crate>(b).unwrap().amount = 1;
    m.round_trip();
    let ev = m.client.drain_events();
    assert_eq!(
        ev[0],
        ReplicationEvent::Destroyed { handle: a },
        "immediate when not deferred"
    );
}

#[test]
fn reordered_packets_never_roll_a_member_back() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount = 1;
    let (s1, p1) = m.tick_and_write();
    m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount = 2;
    m.server.objects_mut().get_mut::<Crate>(h).unwrap().kind = 5;
    let (s2, p2) = m.tick_and_write();
    m.server.objects_mut().get_mut::<Crate>(h).unwrap().open = true;
    let (s3, p3) = m.tick_and_write();
    // Arrival order 2, 3, 1: packet 1's amount = 1 is older than packet 2's.
    m.deliver_to_client(&p2);
    m.deliver_to_client(&p3);
    m.deliver_to_client(&p1);
    for s in [s1, s2, s3] {
        m.ack(
            s,
            replicate::internals::connection::DeliveryStatus::Delivered,
        );
    }
    let c = m.client.get::<Crate>(h).unwrap();
    assert_eq!((c.amount, c.kind, c.open), (2, 5, true));
    assert_eq!(
        m.client.world().stats().stale_packets,
        1,
        "packet 1 is dropped unread"
    );
}

#[test]
fn a_creation_overtaken_by_its_destroy_leaves_no_ghost() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    let (s1, creation) = m.tick_and_write();
    m.server.objects_mut().destroy(h).unwrap();
    let (s2, destroy) = m.tick_and_write();
    m.deliver_to_client(&destroy);
    m.deliver_to_client(&creation);
    assert!(
        !m.client.contains(h),
        "the late creation is older than the destroy"
    );
    assert_eq!(m.client.world().stats().stale_packets, 1, "dropped unread");
    m.ack(
        s1,
        replicate::internals::connection::DeliveryStatus::Delivered,
    );
    m.ack(
        s2,
        replicate::internals::connection::DeliveryStatus::Delivered,
    );
    assert_eq!(m.server.writer(m.conn).unwrap().tracked_objects(), 0);
}

#[test]
fn parked_references_of_destroyed_objects_are_forgotten() {
    let mut m = Manual::new();
    let captain = hidden_captain(&mut m, 0);
    let s = spawn_soldier(&mut m, 1, captain);
    m.round_trip();
    assert_eq!(m.client.world().resolver().counts(), (1, 0));
    m.server.objects_mut().destroy(s).unwrap();
    m.round_trip();
    assert_eq!(m.client.world().resolver().counts(), (0, 0));
}

#[test]
fn a_broken_object_is_reported_destroyed_and_created_again() {
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    let other = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    // A batch for `h` with trailing garbage: the client marks it broken.
    let mut w = BitWriter::with_capacity_bytes(256);
    packet_start(&mut w, &[]);
    batch_at(&mut w, local_index(&m.server, m.conn, h), h, |w| {
        update_flags(w);
        w.write_bits(0b001, 3);
        w.write_bits(0, 1); // kind = 0 (zero flag)
        w.write_bits(0x7, 3); // garbage
    });
    packet_end(&mut w);
    m.read_raw(w).unwrap();
    assert!(m.client.world().is_broken(h));

    // The client's next packet reports it; the server destroys it on this client.
    let mut up = BitWriter::with_capacity_bytes(1200);
    m.client
        .write_packet(replicate::internals::connection::PacketSequence(0), &mut up);
    let bytes = up.finish().unwrap();
    m.server
        .read_packet(m.conn, &mut BitReader::new(&bytes))
        .unwrap();
    m.client.process_delivery(
        replicate::internals::connection::PacketSequence(0),
        replicate::internals::connection::DeliveryStatus::Delivered,
    );
    assert_eq!(
        m.server.writer(m.conn).unwrap().stats().disabled_by_remote,
        1
    );
    m.client.drain_events();
    m.server.objects_mut().get_mut::<Crate>(h).unwrap().amount = 5;
    m.server
        .objects_mut()
        .get_mut::<Crate>(other)
        .unwrap()
        .amount = 6;
    m.round_trip();
    let ev = m.client.drain_events();
    assert!(
        ev.contains(&ReplicationEvent::Destroyed { handle: h }),
        "{ev:?}"
    );
    assert!(!m.client.contains(h) && !m.client.world().is_broken(h));
    assert_eq!(m.client.get::<Crate>(other).unwrap().amount, 6);
    assert_eq!(m.server.take_recovered(m.conn), vec![h]);

    // Once the destroy is acknowledged, the object is created again from its current
    // state: the client is whole again.
    for _ in 0..3 {
        m.round_trip();
    }
    let ev = m.client.drain_events();
    assert!(
        ev.iter()
            .any(|e| matches!(e, ReplicationEvent::Spawned { handle, .. } if *handle == h)),
        "{ev:?}"
    );
    assert_eq!(m.client.get::<Crate>(h).unwrap().amount, 5);
    assert!(!m.client.world().is_broken(h));
    assert!(m.server.take_recovered(m.conn).is_empty());
}

#[test]
fn only_the_members_with_missing_references_wait() {
    let mut m = Manual::new();
    let far = m.server.objects_mut().spawn(Captain::default()).unwrap();
    let near = m.server.objects_mut().spawn(Captain::default()).unwrap();
    m.server.set_in_scope(m.conn, far, false);
    let squad = m
        .server
        .objects_mut()
        .spawn(Squad {
            a: far,
            b: near,
            n: 3,
            ..Default::default()
        })
        .unwrap();
    m.round_trip();
    let s = m.client.get::<Squad>(squad).unwrap();
    assert_eq!((s.a, s.b, s.n), (NetRefHandle::INVALID, near, 3));
    assert_eq!(
        m.client
            .world()
            .object(squad)
            .unwrap()
            .pending_reference_mask()
            .map(|m| m.to_u64()),
        Some(0b001)
    );
    // A change to another member goes through while `a` still waits.
    m.server.objects_mut().get_mut::<Squad>(squad).unwrap().n = 4;
    m.round_trip();
    let s = m.client.get::<Squad>(squad).unwrap();
    assert_eq!((s.a, s.n), (NetRefHandle::INVALID, 4));
    m.client.drain_events();
    m.server.set_in_scope(m.conn, far, true);
    m.round_trip();
    assert!(
        m.client
            .drain_events()
            .contains(&ReplicationEvent::ReferencesResolved {
                handle: squad,
                mask: ChangeMask::from_u64(3, 0b001)
            })
    );
    assert_eq!(m.client.get::<Squad>(squad).unwrap().a, far);
    assert!(
        m.client
            .world()
            .object(squad)
            .unwrap()
            .pending_reference_mask()
            .is_none()
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Random values through the writer and the reader: after each packet the client's
    /// quantized state equals the server's.
    #[test]
    fn random_states_roundtrip_through_batches(
        ops in proptest::collection::vec((0usize..4, proptest::num::i32::ANY, proptest::num::u8::ANY, proptest::bool::ANY), 1..40)
    ) {
        let mut m = Manual::new();
        let handles: Vec<_> = (0..4)
            .map(|i| m.server.objects_mut().spawn(Pawn { x: i, ..Default::default() }).unwrap())
            .collect();
        m.round_trip();
        for (k, x, hp, alive) in ops {
            let p = m.server.objects_mut().get_mut::<Pawn>(handles[k]).unwrap();
            p.x = x;
            p.hp = hp;
            if alive {
                p.alive = !p.alive;
            }
            m.round_trip();
            for h in &handles {
                let server = m.server.objects().state(*h).unwrap();
                let client = m.client.state(*h).unwrap();
                proptest::prop_assert!(client.eq_dyn(server), "{:?} != {:?}", client, server);
            }
        }
    }
}

#[test]
fn an_object_broken_every_time_is_no_longer_sent_after_a_few_recreations() {
    use replicate::internals::replication::ReplicatedObjectState;
    let mut m = Manual::new();
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    let index = m.server.objects().index_of(h).unwrap();
    let mut recreated = 0;
    for _ in 0..6 {
        // The client reports `h` broken (as if every creation failed to decode): the
        // manager header (4 streams, only the replication stream), then `[1][h][0]`.
        let mut up = BitWriter::with_capacity_bytes(64);
        up.write_bits(3, replicate::internals::stream::STREAM_COUNT_BITS);
        up.write_bits(0b0001, 4);
        up.write_bool(true);
        h.write(&mut up);
        up.write_bool(false);
        m.server
            .read_packet(m.conn, &mut BitReader::new(&up.finish().unwrap()))
            .unwrap();
        for _ in 0..4 {
            m.round_trip();
        }
        if m.server.writer(m.conn).unwrap().object_state(index) == ReplicatedObjectState::Created {
            recreated += 1;
        }
        m.server.take_recovered(m.conn);
    }
    let stats = m.server.writer(m.conn).unwrap().stats().clone();
    assert_eq!(stats.disabled_by_remote, 6);
    assert_eq!(
        recreated,
        replicate::internals::replication::MAX_RECOVERIES,
        "recreated {recreated} times"
    );
    assert!(!m.client.contains(h));
}
