//! Property tests of the delta encodings: decode(encode(x, baseline), baseline) == x
//! for random states and baselines of a derived type covering the serializer families
//! (integers through the delta table, ranged floats, vectors, rotators, strings,
//! arrays of structs, a nested struct), for whole and partial masks; a prediction's
//! step derived member by member equals the state's code read back; and the same
//! through the writer and reader with random loss.

use proptest::prelude::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::protocol::{ProtocolRegistry, Registration};
use replicate::internals::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
use replicate::serialize::Rotator;
use replicate::{ChangeMask, Replicated, ReplicatedState};
use std::sync::Arc;
use std::time::Duration;

#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(crate = "replicate", register = false)]
struct Buff {
    id: u16,
    #[net(bits = 6)]
    stacks: u8,
}

#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(crate = "replicate", name = "delta::Thing", register = false)]
struct Thing {
    a: i32,
    b: u64,
    c: i16,
    #[net(min = 0.0, max = 1000.0, precision = 0.1)]
    health: f32,
    position: glam::Vec3,
    rotation: Rotator,
    flag: bool,
    #[net(max_len = 16)]
    name: String,
    #[net(max_len = 6, element_bits = 6)]
    buffs: Vec<Buff>,
    /// A nested struct (its own change-mask bits inside `Thing`'s).
    main_buff: Buff,
}

fn thing() -> impl Strategy<Value = Thing> {
    (
        any::<i32>(),
        any::<u64>(),
        any::<i16>(),
        0.0f32..1000.0,
        (-1.0e5f32..1.0e5, -1.0e5f32..1.0e5, -1.0e5f32..1.0e5),
        (-720.0f32..720.0, -720.0f32..720.0, -720.0f32..720.0),
        any::<bool>(),
        "[a-z]{0,16}",
        prop::collection::vec((any::<u16>(), 0u8..64), 0..6),
        (any::<u16>(), 0u8..64),
    )
        .prop_map(|(a, b, c, health, p, r, flag, name, buffs, main)| Thing {
            a,
            b,
            c,
            health,
            position: glam::Vec3::new(p.0, p.1, p.2),
            rotation: Rotator {
                pitch: r.0,
                yaw: r.1,
                roll: r.2,
            },
            flag,
            name,
            buffs: buffs
                .into_iter()
                .map(|(id, stacks)| Buff { id, stacks })
                .collect(),
            main_buff: Buff {
                id: main.0,
                stacks: main.1,
            },
        })
}

/// A state near `base`: small changes to some members (the common delta case).
fn nudge(base: &Thing, k: u64) -> Thing {
    let mut t = base.clone();
    t.a = t.a.wrapping_add((k % 7) as i32 - 3);
    if k & 8 != 0 {
        t.b = t.b.wrapping_add(1);
    }
    if k & 16 != 0 {
        t.position.x += 0.5;
    }
    if k & 32 != 0 {
        t.rotation.yaw += 1.0;
    }
    if k & 64 != 0 {
        t.main_buff.id = t.main_buff.id.wrapping_add(2);
    }
    t
}

type St = <Thing as Replicated>::State;

fn roundtrip(x: &Thing, base: &Thing, mask_bits: u64) -> (St, St, ChangeMask) {
    let xs = x.to_state();
    let bs = base.to_state();
    let bits = <St as ReplicatedState>::descriptor().change_mask_bits;
    let mask = ChangeMask::from_u64(bits, mask_bits);
    let mut w = BitWriter::with_capacity_bits(1 << 16);
    xs.serialize_delta(&bs, &mask, 0, &mut w);
    let bytes = w.finish().unwrap();
    let mut r = BitReader::with_bit_len(&bytes, w.position());
    let mut out = bs.clone();
    out.deserialize_delta(&bs, &mask, 0, &mut r).unwrap();
    assert_eq!(r.bits_left(), 0, "every written bit is read");
    (xs, out, mask)
}

/// A prediction's step by its definition: `y`'s delta code against `z`, read back
/// against `x`, validated.
fn shift_by_code(x: &St, y: &St, z: &St, mask: &ChangeMask) -> Option<St> {
    let mut w = BitWriter::with_capacity_bits(1 << 16);
    y.serialize_delta(z, mask, 0, &mut w);
    let bytes = w.finish().ok()?;
    let mut r = BitReader::with_bit_len(&bytes, w.position());
    let mut out = x.clone();
    out.deserialize_delta(x, mask, 0, &mut r).ok()?;
    out.validate(mask, 0).ok()?;
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The derived step (each member moved by its serializer, computed or coded)
    /// equals the whole state's code read back, for near and far states and any mask.
    #[test]
    fn the_derived_prediction_step_is_the_coded_one(
        z in thing(),
        far in thing(),
        k in any::<(u64, u64)>(),
        m in any::<u64>(),
    ) {
        let bits = <St as ReplicatedState>::descriptor().change_mask_bits;
        let mask = ChangeMask::from_u64(bits, m);
        let (y, x) = (nudge(&z, k.0), if k.1 & 1 == 0 { nudge(&z, k.1) } else { far });
        let (xs, ys, zs) = (x.to_state(), y.to_state(), z.to_state());
        let mut derived = xs.clone();
        let moved = derived.shift([&xs, &ys, &zs], &mask, 0).ok().map(|()| derived);
        prop_assert_eq!(moved, shift_by_code(&xs, &ys, &zs, &mask));
    }

    #[test]
    fn delta_decodes_to_the_value(x in thing(), base in thing()) {
        let (xs, out, _) = roundtrip(&x, &base, u64::MAX);
        prop_assert_eq!(out, xs);
    }

    #[test]
    fn small_changes_decode_and_cost_less(base in thing(), k in any::<u64>()) {
        let x = nudge(&base, k);
        let (xs, out, _) = roundtrip(&x, &base, u64::MAX);
        prop_assert_eq!(&out, &xs);
        let bits = <St as ReplicatedState>::descriptor().change_mask_bits;
        let mask = ChangeMask::all(bits);
        let mut full = BitWriter::with_capacity_bits(1 << 16);
        xs.serialize(&mask, 0, &mut full);
        let mut delta = BitWriter::with_capacity_bits(1 << 16);
        xs.serialize_delta(&base.to_state(), &mask, 0, &mut delta);
        prop_assert!(delta.position() < full.position());
    }

    #[test]
    fn masked_delta_touches_only_selected_members(
        x in thing(),
        base in thing(),
        m in any::<u64>(),
    ) {
        let (xs, out, mask) = roundtrip(&x, &base, m);
        let mut expected = base.to_state();
        // Selected members take x's values: copy them through a plain serialization.
        let mut w = BitWriter::with_capacity_bits(1 << 16);
        xs.serialize(&mask, 0, &mut w);
        let bytes = w.finish().unwrap();
        expected
            .deserialize(&mask, 0, &mut BitReader::with_bit_len(&bytes, w.position()))
            .unwrap();
        prop_assert_eq!(out, expected);
    }
}

#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(
    crate = "replicate",
    name = "delta::Plain",
    delta = false,
    register = false
)]
struct Plain {
    n: u32,
}

fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(
        ProtocolRegistry::from_registrations([
            Registration::of::<Thing>(),
            Registration::of::<Plain>(),
        ])
        .unwrap(),
    )
}

fn baselines_of(server: &ReplicationServer, conn: u32, h: replicate::NetRefHandle) -> usize {
    let i = server.objects().index_of(h).unwrap();
    server.writer(conn).unwrap().baselines().count(i)
}

#[test]
fn container_attribute_turns_delta_off_and_run_time_override_turns_it_on() {
    assert!(!<Plain as Replicated>::descriptor().delta_compression);
    assert!(<Thing as Replicated>::descriptor().delta_compression);
    let mut server = ReplicationServer::new(registry(), ReplicationConfig::default());
    let conn = server.add_connection();
    let plain = server.objects_mut().spawn(Plain { n: 1 }).unwrap();
    let thing = server.objects_mut().spawn(Thing::default()).unwrap();
    server.tick(Duration::from_millis(33));
    let mut w = BitWriter::with_capacity_bytes(1200);
    server.write_packet(conn, PacketSequence(1), &mut w);
    assert_eq!(baselines_of(&server, conn, plain), 0);
    assert_eq!(baselines_of(&server, conn, thing), 1);
    // Creations acknowledged (updates nominate no baseline while a creation is in
    // flight).
    server.process_delivery(conn, PacketSequence(1), DeliveryStatus::Delivered);
    assert!(server.set_type_delta_compression::<Plain>(true));
    server.objects_mut().get_mut::<Plain>(plain).unwrap().n = 2;
    server.tick(Duration::from_millis(66));
    let mut w = BitWriter::with_capacity_bytes(1200);
    server.write_packet(conn, PacketSequence(2), &mut w);
    assert_eq!(baselines_of(&server, conn, plain), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The writer and reader with baselines rotating every frame, random values and
    /// random loss: the client equals the server after every delivered packet.
    #[test]
    fn writer_and_reader_agree_under_loss(
        values in prop::collection::vec(thing(), 1..40),
        losses in prop::collection::vec(any::<bool>(), 40),
    ) {
        let mut config = ReplicationConfig::default();
        config.delta.min_frames_between_baselines = 1;
        let mut server = ReplicationServer::new(registry(), config.clone());
        let mut client = ReplicationClient::new(registry(), config);
        let conn = server.add_connection();
        let h = server.objects_mut().spawn(Thing::default()).unwrap();
        let mut now = Duration::ZERO;
        for (i, v) in values.iter().enumerate() {
            *server.objects_mut().get_mut::<Thing>(h).unwrap() = v.clone();
            now += Duration::from_millis(33);
            server.tick(now);
            let seq = PacketSequence(i as u16);
            let mut w = BitWriter::with_capacity_bytes(1200);
            server.write_packet(conn, seq, &mut w);
            let bytes = w.finish().unwrap();
            let lost = losses[i];
            if !lost {
                client.read_packet(now, seq, &mut BitReader::new(&bytes)).unwrap();
            }
            server.process_delivery(
                conn,
                seq,
                if lost { DeliveryStatus::Lost } else { DeliveryStatus::Delivered },
            );
        }
        // Quiet: everything owed goes out and arrives.
        for i in 0..3u16 {
            now += Duration::from_millis(33);
            server.tick(now);
            let seq = PacketSequence(1000 + i);
            let mut w = BitWriter::with_capacity_bytes(1200);
            server.write_packet(conn, seq, &mut w);
            let bytes = w.finish().unwrap();
            client.read_packet(now, seq, &mut BitReader::new(&bytes)).unwrap();
            server.process_delivery(conn, seq, DeliveryStatus::Delivered);
        }
        let s = server.objects().state(h).unwrap();
        let c = client.state(h).unwrap();
        prop_assert!(c.eq_dyn(s), "{:?} vs {:?}", c, s);
    }
}

/// A snapshot is copied into the state of one released before in the frame (no
/// allocation), strings and vectors included, and equals the object's state; a
/// released state that something still holds is never written over, and what a
/// frame does not take is freed when the next one begins.
#[test]
fn snapshots_reuse_released_states_but_never_held_ones() {
    use replicate::internals::object::ObjectTable;
    use replicate::internals::replication::{BaselineStorage, DeltaSettings};
    let mut table = ObjectTable::new(registry(), 0);
    let h = table
        .spawn(Thing {
            a: 1,
            name: "first".into(),
            buffs: vec![Buff { id: 1, stacks: 2 }],
            ..Thing::default()
        })
        .unwrap();
    let index = table.index_of(h).unwrap();
    let mut storage = BaselineStorage::new(DeltaSettings::default());
    // A snapshot a connection keeps, taken of the object's state now.
    let take = |storage: &mut BaselineStorage, table: &ObjectTable| {
        let snapshot = storage.reserve(index);
        storage.add_ref(snapshot);
        storage.commit_reservations(table);
        snapshot
    };
    let address = |storage: &BaselineStorage, snapshot| {
        storage
            .state(snapshot)
            .map(|s| Arc::as_ptr(&s).cast::<()>() as usize)
            .unwrap()
    };
    let change = |table: &mut ObjectTable, a: i32, name: &str| {
        let thing = table.get_mut::<Thing>(h).unwrap();
        thing.a = a;
        thing.name = name.into();
        thing.buffs.push(Buff { id: 9, stacks: 3 });
        table.begin_tick();
    };
    let matches_object = |storage: &BaselineStorage, table: &ObjectTable, snapshot| {
        let state = storage.state(snapshot).unwrap();
        state.eq_dyn(table.entry_at(index).unwrap().state())
    };

    let first = take(&mut storage, &table);
    let first_at = address(&storage, first);
    assert!(matches_object(&storage, &table, first));
    storage.release(first);
    change(&mut table, 2, "second, a longer name");
    let second = take(&mut storage, &table);
    assert_eq!(
        address(&storage, second),
        first_at,
        "the released state is reused"
    );
    assert!(matches_object(&storage, &table, second));
    assert_eq!((storage.stats().clones, storage.stats().reused), (2, 1));

    // Held elsewhere (a plan's reference, a prediction), the state is not reused.
    let held = storage.state(second).unwrap();
    let as_taken = held.clone_box();
    storage.release(second);
    change(&mut table, 3, "third");
    let third = take(&mut storage, &table);
    assert_ne!(address(&storage, third), first_at);
    assert!(matches_object(&storage, &table, third));
    assert_eq!(
        storage.stats().reused,
        1,
        "the third snapshot is a new state"
    );
    assert!(
        held.eq_dyn(&*as_taken),
        "a held state is never written over"
    );
    assert!(!held.eq_dyn(table.entry_at(index).unwrap().state()));

    // What a frame released and did not take is freed when the next one begins.
    drop(held);
    storage.release(third);
    storage.begin_frame();
    let fourth = take(&mut storage, &table);
    assert!(matches_object(&storage, &table, fourth));
    assert_eq!(storage.stats().reused, 1);
}
