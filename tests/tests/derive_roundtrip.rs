//! Property tests of generated code: for random instances,
//! `apply(deserialize(serialize(quantize(x))))` equals the dequantized `x`; the bits
//! written equal the sum of each member's own encoding (declared lengths and offsets
//! never drift); partial masks and deltas round-trip.

use proptest::prelude::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::Rotator;
use replicate::{ChangeMask, NetEnum, Replicated, ReplicatedState};

#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(register = false)]
struct Stats {
    hp: u16,
    #[net(bits = 4)]
    level: u8,
}

#[derive(NetEnum, Debug, Clone, PartialEq)]
enum Weapon {
    Fists,
    Sword { sharpness: u8, cursed: bool },
    Bow(#[net(bits = 6)] u8, i32),
}

#[derive(Replicated, Clone, Copy, Debug, PartialEq, Default)]
enum Team {
    #[default]
    Red,
    Blue,
    Green,
}

#[derive(Replicated, Debug, Clone, PartialEq)]
#[net(register = false)]
struct Everything {
    a: u8,
    #[net(bits = 5)]
    b: u8,
    c: i32,
    #[net(bits = 12)]
    d: i16,
    e: u64,
    f: bool,
    g: f32,
    #[net(min = -100.0, max = 100.0, precision = 0.01)]
    h: f32,
    rot: Rotator,
    stats: Stats,
    weapon: Weapon,
    team: Team,
    #[net(group = "pos")]
    x: i16,
    #[net(group = "pos")]
    y: i16,
    #[net(init)]
    skin: u8,
    #[net(skip)]
    local: u32,
}

fn weapon() -> impl Strategy<Value = Weapon> {
    prop_oneof![
        Just(Weapon::Fists),
        (any::<u8>(), any::<bool>())
            .prop_map(|(sharpness, cursed)| Weapon::Sword { sharpness, cursed }),
        (0u8..64, any::<i32>()).prop_map(|(a, b)| Weapon::Bow(a, b)),
    ]
}

fn finite() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        -1.0e6f32..1.0e6,
        any::<f32>().prop_filter("finite", |v| v.is_finite())
    ]
}

fn everything() -> impl Strategy<Value = Everything> {
    (
        (
            any::<u8>(),
            any::<u8>(),
            any::<i32>(),
            any::<i16>(),
            any::<u64>(),
            any::<bool>(),
        ),
        (
            finite(),
            -150.0f32..150.0,
            (0.0f32..360.0, -720.0f32..720.0, 0.0f32..1.0),
        ),
        (any::<u16>(), any::<u8>(), weapon(), 0u32..3),
        (any::<i16>(), any::<i16>(), any::<u8>(), any::<u32>()),
    )
        .prop_map(
            |(
                (a, b, c, d, e, f),
                (g, h, (p, yw, r)),
                (hp, level, weapon, team),
                (x, y, skin, local),
            )| {
                Everything {
                    a,
                    b,
                    c,
                    d,
                    e,
                    f,
                    g,
                    h,
                    rot: Rotator::new(p, yw, r),
                    stats: Stats { hp, level },
                    weapon,
                    team: [Team::Red, Team::Blue, Team::Green][team as usize],
                    x,
                    y,
                    skin,
                    local,
                }
            },
        )
}

type State = <Everything as Replicated>::State;

fn write(state: &State, mask: &ChangeMask) -> (Vec<u8>, usize) {
    let mut w = BitWriter::with_capacity_bytes(512);
    state.serialize(mask, 0, &mut w);
    (w.finish().unwrap(), w.position())
}

fn bits() -> u32 {
    Everything::descriptor().change_mask_bits
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn full_roundtrip_applies_the_dequantized_value(x in everything()) {
        let q = x.to_state();
        let mask = ChangeMask::all(bits());
        let (bytes, n) = write(&q, &mask);
        let mut r = BitReader::with_bit_len(&bytes, n);
        let mut got = State::default();
        got.deserialize(&mask, 0, &mut r).unwrap();
        prop_assert_eq!(r.position(), n, "reads exactly what was written");
        prop_assert_eq!(&got, &q);

        let mut target = Everything::from_state(&State::default());
        target.apply(&got, &mask);
        let expected = Everything::from_state(&q);
        prop_assert_eq!(&target, &expected);
        // Quantization is a fixed point: quantizing the dequantized value changes nothing.
        prop_assert_eq!(expected.to_state(), q);
    }

    #[test]
    fn poll_is_quantize_diff_and_copy(x in everything(), last in everything(), raw in any::<u64>()) {
        // The derived poll, member by member in place, against the provided method's
        // definition: a fresh state, diffed against the last one, copied over if changed.
        let mut polled = last.to_state();
        let mut polled_mask = ChangeMask::from_u64(bits(), raw);
        let changed = x.poll(&mut polled, &mut polled_mask);
        let fresh = x.to_state();
        let mut mask = ChangeMask::from_u64(bits(), raw);
        let expected_changed = fresh.diff(&last.to_state(), &mut mask, 0);
        prop_assert_eq!(changed, expected_changed);
        prop_assert_eq!(&polled_mask, &mask, "the same bits set, the others kept");
        prop_assert_eq!(&polled, &if changed { fresh } else { last.to_state() });
        // Polling again changes nothing.
        let mut again = ChangeMask::new(bits());
        prop_assert!(!x.poll(&mut polled, &mut again));
        prop_assert!(!again.any());
    }

    #[test]
    fn bits_written_equal_the_sum_of_each_members_declared_encoding(x in everything()) {
        let q = x.to_state();
        let d = Everything::descriptor();
        let (_, total) = write(&q, &ChangeMask::all(bits()));
        let mut sum = 0;
        let mut offset = 0;
        while offset < d.change_mask_bits {
            // One slot at a time: a member, a nested member's bits, or a group's bit.
            let m = d.member_for_bit(offset).unwrap();
            let mut mask = ChangeMask::new(bits());
            mask.set_range(m.change_mask_offset, m.change_mask_bits);
            let (_, n) = write(&q, &mask);
            let declared: Option<u32> = d
                .members
                .iter()
                .filter(|o| o.change_mask_offset == m.change_mask_offset)
                .map(|o| o.max_bits)
                .sum();
            if let Some(max) = declared {
                prop_assert!(n as u32 <= max, "{} wrote {} > declared {}", m.name, n, max);
            }
            sum += n;
            offset = m.change_mask_offset + m.change_mask_bits;
        }
        prop_assert_eq!(sum, total);
    }

    #[test]
    fn partial_masks_update_exactly_the_selected_members(
        x in everything(),
        base in everything(),
        raw_mask in any::<u64>(),
    ) {
        let q = x.to_state();
        let b = base.to_state();
        let mask = ChangeMask::from_u64(bits(), raw_mask);
        let (bytes, n) = write(&q, &mask);
        let mut got = b.clone();
        let mut r = BitReader::with_bit_len(&bytes, n);
        got.deserialize(&mask, 0, &mut r).unwrap();
        prop_assert_eq!(r.position(), n);
        // Selected members now equal `q`, the others still equal `b`.
        let mut differs_from_q = ChangeMask::new(bits());
        got.diff(&q, &mut differs_from_q, 0);
        differs_from_q.and_with(&mask);
        prop_assert!(!differs_from_q.any(), "selected members differ: {:?}", differs_from_q);
        let mut differs_from_b = ChangeMask::new(bits());
        got.diff(&b, &mut differs_from_b, 0);
        differs_from_b.and_not(&mask);
        prop_assert!(!differs_from_b.any(), "unselected members changed: {:?}", differs_from_b);
    }

    #[test]
    fn delta_against_a_baseline_roundtrips(x in everything(), base in everything()) {
        let q = x.to_state();
        let b = base.to_state();
        let mut mask = ChangeMask::new(bits());
        q.diff(&b, &mut mask, 0);
        let mut w = BitWriter::with_capacity_bytes(512);
        q.serialize_delta(&b, &mask, 0, &mut w);
        let n = w.position();
        let bytes = w.finish().unwrap();
        let mut got = b.clone();
        let mut r = BitReader::with_bit_len(&bytes, n);
        got.deserialize_delta(&b, &mask, 0, &mut r).unwrap();
        prop_assert_eq!(r.position(), n);
        prop_assert_eq!(got, q);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), raw_mask in any::<u64>()) {
        let mask = ChangeMask::from_u64(bits(), raw_mask);
        let mut got = State::default();
        let _ = got.deserialize(&mask, 0, &mut BitReader::new(&bytes));
        let base = State::default();
        let _ = got.deserialize_delta(&base, &mask, 0, &mut BitReader::new(&bytes));
    }
}

/// Only fixed-width members: the bits written for a full update are exactly the sum of
/// the declared lengths.
#[derive(Replicated, Debug, Clone, PartialEq)]
#[net(register = false)]
struct Fixed {
    #[net(bits = 5)]
    b: u8,
    f: bool,
    a: u8,
    team: Team,
    #[net(bits = 3)]
    small: i8,
    #[net(min = 0.0, max = 1.0, bits = 10)]
    unit: f32,
}

proptest! {
    #[test]
    fn fixed_width_members_write_exactly_their_declared_bits(
        b in 0u8..32, f in any::<bool>(), a in any::<u8>(), team in 0usize..3,
        small in -4i8..4, unit in 0.0f32..1.0,
    ) {
        let x = Fixed { b, f, a, team: [Team::Red, Team::Blue, Team::Green][team], small, unit };
        let q = x.to_state();
        let d = Fixed::descriptor();
        let declared: u32 = d.members.iter().map(|m| m.max_bits.unwrap()).sum();
        prop_assert_eq!(declared, 5 + 1 + 8 + 2 + 3 + 10);
        let mut w = BitWriter::with_capacity_bytes(64);
        q.serialize(&ChangeMask::all(d.change_mask_bits), 0, &mut w);
        prop_assert_eq!(w.position() as u32, declared);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The generated fragment poll (member by member, in place) sets exactly the bits a
    /// whole-state diff sets and leaves the stored state equal to a fresh quantization.
    #[test]
    fn fragment_poll_matches_whole_state_diff(x in everything(), prev in everything()) {
        use replicate::internals::fragment::ReplicationFragment;
        let mut stored: Box<dyn replicate::internals::protocol::ErasedState> = Box::new(prev.to_state());
        let mut polled = ChangeMask::new(bits());
        let mut obj = x.clone();
        let changed = obj.poll_state(stored.as_mut(), &mut polled).unwrap();

        let mut expected = ChangeMask::new(bits());
        let any = x.to_state().diff(&prev.to_state(), &mut expected, 0);
        prop_assert_eq!(changed, any);
        prop_assert_eq!(&polled, &expected);
        let stored = stored.as_any().downcast_ref::<State>().unwrap();
        prop_assert_eq!(stored, &x.to_state());
    }
}
