//! Iris's `AEnemy` (health, position, rotation with a rep-notify) through
//! `#[derive(Replicated)]`: change-mask layout, poll, serialize with a mask, apply on a
//! fresh instance with exactly one notification.
//! `position` is a `glam::Vec3` with the default (lossless) vector serializer.

use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::{F32Serializer, NetSerializer, NoConfig, Rotator, RotatorSerializer};
use replicate::{ChangeMask, Replicated, ReplicatedState};

#[derive(Replicated, Debug, Default)]
struct Enemy {
    health: f32,
    position: glam::Vec3,
    #[net(notify = on_rotation)]
    rotation: Rotator,
    #[net(skip)]
    local_timer: f32,
    #[net(skip)]
    rotation_notifies: Vec<Rotator>,
}

impl Enemy {
    fn on_rotation(&mut self, old: &Rotator) {
        self.rotation_notifies.push(*old);
    }
}

fn bits_of<S: NetSerializer>(config: &S::Config, q: &S::Quantized) -> usize {
    let mut w = BitWriter::with_capacity_bytes(64);
    S::serialize(config, q, &mut w);
    w.position()
}

#[test]
fn change_mask_layout_is_one_bit_per_member() {
    let d = Enemy::descriptor();
    assert_eq!(d.members.len(), 3);
    let layout: Vec<(&str, u32, u32)> = d
        .members
        .iter()
        .map(|m| (m.name, m.change_mask_offset, m.change_mask_bits))
        .collect();
    assert_eq!(
        layout,
        vec![("health", 0, 1), ("position", 1, 1), ("rotation", 2, 1)]
    );
    assert_eq!(d.change_mask_bits, 3);
    assert_eq!(d.name, "Enemy");
    assert!(d.members[2].has_notify && !d.members[0].has_notify);
    assert_eq!(d.members[0].serializer, "f32");
    assert_eq!(d.members[1].serializer, "Vec3F32");
}

#[test]
fn poll_sets_only_changed_bits() {
    let mut enemy = Enemy {
        health: 100.0,
        position: glam::Vec3::new(1.0, 2.0, 3.0),
        ..Default::default()
    };
    let before = enemy.to_state();

    enemy.health = 80.0;
    enemy.local_timer = 5.0; // skipped: never part of the mask
    let mut mask = ChangeMask::new(3);
    assert!(enemy.to_state().diff(&before, &mut mask, 0));
    assert_eq!(mask.to_u64(), 0b001);

    enemy.rotation = Rotator::new(0.0, 90.0, 0.0);
    let mut mask = ChangeMask::new(3);
    assert!(enemy.to_state().diff(&before, &mut mask, 0));
    assert_eq!(mask.to_u64(), 0b101);

    let mut mask = ChangeMask::new(3);
    assert!(!before.diff(&before, &mut mask, 0));
    assert!(!mask.any());
}

#[test]
fn serialize_with_mask_writes_mask_and_changed_members_only() {
    let server = Enemy {
        health: 80.0,
        position: glam::Vec3::new(10.0, 20.0, 30.0),
        rotation: Rotator::new(0.0, 90.0, 0.0),
        ..Default::default()
    };
    let state = server.to_state();
    let mask = ChangeMask::from_u64(3, 0b101);

    let mut w = BitWriter::with_capacity_bytes(128);
    mask.write(&mut w);
    state.serialize(&mask, 0, &mut w);
    let expected = 3
        + bits_of::<F32Serializer>(&NoConfig, &state.health)
        + bits_of::<RotatorSerializer>(&NoConfig, &state.rotation);
    assert_eq!(w.position(), expected);
    assert_eq!(expected, 3 + 33 + 19); // Iris's numbers: health 1+32, yaw-only rotator 19
    let bytes = w.finish().unwrap();

    // Receive into a fresh instance.
    let mut r = BitReader::with_bit_len(&bytes, expected);
    let rmask = ChangeMask::read(3, &mut r).unwrap();
    assert_eq!(rmask, mask);
    let mut received = <Enemy as Replicated>::State::default();
    received.deserialize(&rmask, 0, &mut r).unwrap();
    assert_eq!(r.bits_left(), 0);

    let mut client = Enemy {
        local_timer: 7.0,
        ..Default::default()
    };
    client.apply(&received, &rmask);
    assert_eq!(client.health, 80.0);
    assert_eq!(client.rotation, Rotator::new(0.0, 90.0, 0.0));
    assert_eq!(
        client.position,
        glam::Vec3::ZERO,
        "position was not in the mask"
    );
    assert_eq!(client.local_timer, 7.0, "skipped fields are untouched");
    assert_eq!(
        client.rotation_notifies,
        vec![Rotator::ZERO],
        "one notify with the old value"
    );

    // Applying the same state again changes nothing and notifies nobody.
    client.apply(&received, &rmask);
    assert_eq!(client.rotation_notifies.len(), 1);
}

#[test]
fn delta_against_baseline_roundtrips() {
    let base = Enemy {
        health: 100.0,
        rotation: Rotator::new(0.0, 90.0, 0.0),
        ..Default::default()
    }
    .to_state();
    let now = Enemy {
        health: 75.0,
        rotation: Rotator::new(0.0, 95.0, 0.0),
        ..Default::default()
    }
    .to_state();
    let mut mask = ChangeMask::new(3);
    now.diff(&base, &mut mask, 0);
    assert_eq!(mask.to_u64(), 0b101);
    let mut w = BitWriter::with_capacity_bytes(128);
    now.serialize_delta(&base, &mask, 0, &mut w);
    let bytes = w.finish().unwrap();
    let mut got = base.clone();
    got.deserialize_delta(&base, &mask, 0, &mut BitReader::new(&bytes))
        .unwrap();
    assert_eq!(got, now);
}

#[test]
fn truncated_input_is_an_error_not_a_panic() {
    let state = Enemy {
        health: 1.0,
        position: glam::Vec3::ONE,
        rotation: Rotator::new(1.0, 2.0, 3.0),
        ..Default::default()
    }
    .to_state();
    let mask = ChangeMask::all(3);
    let mut w = BitWriter::with_capacity_bytes(128);
    state.serialize(&mask, 0, &mut w);
    let bits = w.position();
    let bytes = w.finish().unwrap();
    for cut in [0, 1, 20, bits / 2, bits - 1] {
        let mut got = <Enemy as Replicated>::State::default();
        let res = got.deserialize(&mask, 0, &mut BitReader::with_bit_len(&bytes, cut));
        assert!(res.is_err(), "cut at {cut} of {bits}");
    }
}
