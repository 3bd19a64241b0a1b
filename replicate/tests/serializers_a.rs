//! Property tests for the float, packed, enum, rotator and Health serializers:
//! fixed points, bit-exact symmetry, `max_bits`, delta round trips against arbitrary
//! baselines, and random or truncated input into every deserializer.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::*;

#[path = "support/health.rs"]
mod health;
use health::HealthSerializer;

replicate::net_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    enum Single { #[default] Only }
}
replicate::net_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    enum Pair { #[default] Off, On }
}
replicate::net_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    enum Weapon { Knife, #[default] Pistol, Rifle, Shotgun, Sniper }
}
replicate::net_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    enum Seventeen { #[default] A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q }
}

type TestResult = Result<(), TestCaseError>;

/// 256 cases per property, or `PROPTEST_CASES` for a longer soak.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn encode<S: NetSerializer>(c: &S::Config, q: &S::Quantized) -> (Vec<u8>, usize) {
    let mut w = BitWriter::with_capacity_bits(1024);
    S::serialize(c, q, &mut w);
    (w.finish().expect("fits"), w.position())
}

/// serialize → deserialize gives `q` back, reading exactly the bits written, within
/// `max_bits`. Returns the bits written.
fn check_full<S: NetSerializer>(c: &S::Config, q: &S::Quantized) -> Result<usize, TestCaseError> {
    let (bytes, bits) = encode::<S>(c, q);
    let mut r = BitReader::with_bit_len(&bytes, bits);
    let back = S::deserialize(c, &mut r).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&back, q);
    prop_assert_eq!(r.position(), bits, "bits read != bits written");
    if let Some(max) = S::max_bits(c) {
        prop_assert!(bits <= max as usize, "{} bits > max_bits {}", bits, max);
    }
    prop_assert!(S::validate(c, &back).is_ok());
    Ok(bits)
}

/// quantize → serialize → deserialize → dequantize → quantize is a fixed point.
fn check_source<S: NetSerializer>(c: &S::Config, source: &S::Source) -> TestResult {
    let q = S::quantize(c, source);
    check_full::<S>(c, &q)?;
    let again = S::quantize(c, &S::dequantize(c, &q));
    prop_assert_eq!(&again, &q, "quantize(dequantize(q)) != q");
    prop_assert!(S::is_equal(c, &again, &q));
    Ok(())
}

/// serialize_delta against `prev` → deserialize_delta gives `q`, bit-exact.
fn check_delta<S: NetSerializer>(
    c: &S::Config,
    q: &S::Quantized,
    prev: &S::Quantized,
) -> TestResult {
    let mut w = BitWriter::with_capacity_bits(1024);
    S::serialize_delta(c, q, prev, &mut w);
    let bits = w.position();
    let bytes = w.finish().expect("fits");
    let mut r = BitReader::with_bit_len(&bytes, bits);
    let back =
        S::deserialize_delta(c, prev, &mut r).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&back, q);
    prop_assert_eq!(r.position(), bits, "delta bits read != bits written");
    // No delta costs more than the full encoding plus one bit (the residual code's
    // escape), changed or not. `HealthSerializer`, the worked custom-serializer example,
    // keeps Iris's own delta table and is held to this only when unchanged.
    let (_, full) = encode::<S>(c, q);
    if S::NAME != "Health" || S::is_equal(c, q, prev) {
        prop_assert!(bits <= full + 1, "delta {} bits > full {} + 1", bits, full);
    }
    Ok(())
}

/// Whatever the bytes, deserialize gives an error or a value the serializer could have
/// produced (valid, and a quantize fixed point), and never panics.
fn check_garbage<S: NetSerializer>(
    c: &S::Config,
    bytes: &[u8],
    bit_len: usize,
    prev: &S::Quantized,
) -> TestResult {
    let valid = |q: &S::Quantized| -> TestResult {
        prop_assert!(
            S::validate(c, q).is_ok(),
            "deserialized an invalid value {:?}",
            q
        );
        prop_assert_eq!(
            &S::quantize(c, &S::dequantize(c, q)),
            q,
            "not a fixed point"
        );
        check_full::<S>(c, q)?;
        Ok(())
    };
    let mut r = BitReader::with_bit_len(bytes, bit_len);
    if let Ok(q) = S::deserialize(c, &mut r) {
        prop_assert!(!r.is_overflown());
        valid(&q)?;
    }
    let mut r = BitReader::with_bit_len(bytes, bit_len);
    if let Ok(q) = S::deserialize_delta(c, prev, &mut r) {
        prop_assert!(!r.is_overflown());
        valid(&q)?;
    }
    Ok(())
}

/// Every strict prefix of a valid encoding is an error (or, if the encoding happens to
/// end early, a value), never a panic.
fn check_truncations<S: NetSerializer>(
    c: &S::Config,
    q: &S::Quantized,
    prev: &S::Quantized,
) -> TestResult {
    let (bytes, bits) = encode::<S>(c, q);
    for cut in 0..bits {
        let mut r = BitReader::with_bit_len(&bytes, cut);
        prop_assert!(
            S::deserialize(c, &mut r).is_err(),
            "cut at {} of {} bits decoded",
            cut,
            bits
        );
    }
    let mut w = BitWriter::with_capacity_bits(1024);
    S::serialize_delta(c, q, prev, &mut w);
    let bits = w.position();
    let bytes = w.finish().expect("fits");
    for cut in 0..bits {
        let mut r = BitReader::with_bit_len(&bytes, cut);
        prop_assert!(
            S::deserialize_delta(c, prev, &mut r).is_err(),
            "delta cut at {} of {} bits decoded",
            cut,
            bits
        );
    }
    Ok(())
}

/// The longest encoding is exactly `max_bits`.
fn assert_longest<S: NetSerializer>(c: &S::Config, longest: &S::Source) {
    let q = S::quantize(c, longest);
    let (_, bits) = encode::<S>(c, &q);
    assert_eq!(Some(bits as u32), S::max_bits(c), "{}", S::NAME);
}

fn garbage() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (prop::collection::vec(any::<u8>(), 0..12), 0usize..=96)
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<f32>(),
        any::<u32>().prop_map(f32::from_bits),
        -1000.0f32..1000.0
    ]
}

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        any::<u64>().prop_map(f64::from_bits),
        -1e6f64..1e6
    ]
}

/// Picks the finest resolution not above the requested one that `S` accepts.
fn make_valid<S: NetSerializer<Config = FloatRangeConfig>>(
    mut c: FloatRangeConfig,
) -> Option<FloatRangeConfig> {
    for _ in 0..64 {
        if S::validate_config(&c).is_ok() {
            return Some(c);
        }
        if c.bits > 1 {
            c.bits -= 1;
        } else if c.bits == 0 {
            c.precision *= 2.0;
        } else {
            return None;
        }
    }
    None
}

/// Valid range configs for `S`: ranges from 1e-2 to 1e7 wide around centres up to
/// ±1e6, resolution by bits (1..=32) or precision, clipped to what `S` accepts.
fn range_config<S: NetSerializer<Config = FloatRangeConfig>>()
-> impl Strategy<Value = FloatRangeConfig> {
    (
        -1e6f64..1e6,
        -2.0f64..7.0,
        prop::bool::ANY,
        1u32..=32,
        0.0f64..10.0,
    )
        .prop_filter_map(
            "no valid resolution",
            |(centre, log_span, by_bits, bits, log_steps)| {
                let span = 10f64.powf(log_span);
                let (min, max) = (centre - span / 2.0, centre + span / 2.0);
                let c = if by_bits {
                    FloatRangeConfig::with_bits(min, max, bits)
                } else {
                    FloatRangeConfig::with_precision(min, max, span / 10f64.powf(log_steps))
                };
                make_valid::<S>(c)
            },
        )
}

/// Checks a ranged config hard: endpoints, neighbours of the endpoints, random indices
/// and values, and the precision promise.
fn check_ranged<S>(c: &FloatRangeConfig, index_seed: u64, value: f64, prev_seed: u64) -> TestResult
where
    S: NetSerializer<Config = FloatRangeConfig, Quantized = u32>,
    S::Source: Copy + Into<f64> + std::fmt::Debug,
{
    prop_assert!(S::validate_config(c).is_ok());
    let top = c.max_index();
    prop_assert_eq!(S::max_bits(c), Some(c.effective_bits()));
    if c.precision > 0.0 {
        prop_assert!(
            c.step() <= c.precision,
            "step {} > precision {}",
            c.step(),
            c.precision
        );
    }
    let pick = |seed: u64| (seed % (top as u64 + 1)) as u32;
    let indices = [
        0,
        1.min(top),
        top.saturating_sub(1),
        top,
        pick(index_seed),
        pick(index_seed >> 17),
    ];
    for q in indices {
        let v = S::dequantize(c, &q);
        prop_assert_eq!(
            S::quantize(c, &v),
            q,
            "index {} -> {:?} does not come back",
            q,
            v
        );
        let bits = check_full::<S>(c, &q)?;
        prop_assert_eq!(bits, c.effective_bits() as usize);
        check_delta::<S>(c, &q, &pick(prev_seed))?;
    }
    // Endpoints are exact.
    let (lo, hi): (f64, f64) = (S::dequantize(c, &0).into(), S::dequantize(c, &top).into());
    let (lo_q, hi_q) = (
        S::quantize(c, &S::dequantize(c, &0)),
        S::quantize(c, &S::dequantize(c, &top)),
    );
    prop_assert_eq!((lo_q, hi_q), (0, top));
    prop_assert!(lo <= hi);
    // A value in range comes back within half a step (plus the source type's rounding).
    let v = c.min + (c.max - c.min) * value;
    let q = c.quantize(v);
    let back = c.dequantize(q);
    let slack = 8.0 * f64::EPSILON * c.min.abs().max(c.max.abs());
    prop_assert!(
        (back - v).abs() <= c.step() / 2.0 + slack,
        "{} -> {} -> {}",
        v,
        q,
        back
    );
    Ok(())
}

/// Runs every property on `S` for arbitrary sources.
fn check_all<S: NetSerializer>(
    c: &S::Config,
    source: &S::Source,
    prev_source: &S::Source,
    bytes: &[u8],
    bit_len: usize,
) -> TestResult {
    check_source::<S>(c, source)?;
    let q = S::quantize(c, source);
    let prev = S::quantize(c, prev_source);
    check_delta::<S>(c, &q, &prev)?;
    check_delta::<S>(c, &q, &q)?;
    check_delta::<S>(c, &prev, &q)?;
    check_garbage::<S>(c, bytes, bit_len, &prev)?;
    check_truncations::<S>(c, &q, &prev)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn f32_full(a in any_f32(), b in any_f32(), (bytes, len) in garbage()) {
        check_all::<F32Serializer>(&NoConfig, &a, &b, &bytes, len)?;
    }

    #[test]
    fn f64_full(a in any_f64(), b in any_f64(), (bytes, len) in garbage()) {
        check_all::<F64Serializer>(&NoConfig, &a, &b, &bytes, len)?;
    }

    #[test]
    fn f32_full_is_bit_exact_except_zero_sign_and_nan(a in any::<u32>().prop_map(f32::from_bits)) {
        let (_, back) = roundtrip::<F32Serializer>(&NoConfig, &a).unwrap();
        if a.is_nan() {
            prop_assert_eq!(back.to_bits(), CANONICAL_NAN_F32);
        } else if a == 0.0 {
            prop_assert_eq!(back.to_bits(), 0);
        } else {
            prop_assert_eq!(back.to_bits(), a.to_bits());
        }
    }

    #[test]
    fn ranged_f32(
        c in range_config::<RangedF32Serializer>(),
        index_seed in any::<u64>(),
        value in 0.0f64..=1.0,
        prev_seed in any::<u64>(),
        a in any_f32(),
        b in any_f32(),
        (bytes, len) in garbage(),
    ) {
        check_ranged::<RangedF32Serializer>(&c, index_seed, value, prev_seed)?;
        check_all::<RangedF32Serializer>(&c, &a, &b, &bytes, len)?;
        // Just outside the range clamps to the endpoints.
        prop_assert_eq!(RangedF32Serializer::quantize(&c, &((c.min - (c.max - c.min)) as f32)), 0);
        prop_assert_eq!(RangedF32Serializer::quantize(&c, &((c.max + (c.max - c.min)) as f32)), c.max_index());
    }

    #[test]
    fn ranged_f64(
        c in range_config::<RangedF64Serializer>(),
        index_seed in any::<u64>(),
        value in 0.0f64..=1.0,
        prev_seed in any::<u64>(),
        a in any_f64(),
        b in any_f64(),
        (bytes, len) in garbage(),
    ) {
        check_ranged::<RangedF64Serializer>(&c, index_seed, value, prev_seed)?;
        check_all::<RangedF64Serializer>(&c, &a, &b, &bytes, len)?;
    }

    #[test]
    fn ranged_near_endpoints(c in range_config::<RangedF32Serializer>(), ulps in 0u32..64) {
        // Values a few float steps inside or outside the endpoints stay fixed points.
        for end in [c.min as f32, c.max as f32] {
            for v in [f32::from_bits(end.to_bits().wrapping_add(ulps)), f32::from_bits(end.to_bits().wrapping_sub(ulps))] {
                check_source::<RangedF32Serializer>(&c, &v)?;
            }
        }
    }

    #[test]
    fn unit_f32(a in any_f32(), b in any_f32(), (bytes, len) in garbage()) {
        check_all::<UnitF32Serializer>(&NoConfig, &a, &b, &bytes, len)?;
    }

    #[test]
    fn packed_u32(a in any::<u32>(), b in any::<u32>(), small in 0u32..300, (bytes, len) in garbage()) {
        check_all::<PackedU32Serializer>(&NoConfig, &a, &b, &bytes, len)?;
        check_all::<PackedU32Serializer>(&NoConfig, &small, &a, &bytes, len)?;
        let bits = check_full::<PackedU32Serializer>(&NoConfig, &a)?;
        let bytes_needed = (32 - a.leading_zeros()).div_ceil(8).max(1) as usize;
        prop_assert_eq!(bits, 2 + 8 * bytes_needed);
    }

    #[test]
    fn packed_i32(a in any::<i32>(), b in any::<i32>(), small in -300i32..300, (bytes, len) in garbage()) {
        check_all::<PackedI32Serializer>(&NoConfig, &a, &b, &bytes, len)?;
        check_all::<PackedI32Serializer>(&NoConfig, &small, &a, &bytes, len)?;
        let bits = check_full::<PackedI32Serializer>(&NoConfig, &a)?;
        let bytes_needed = [1usize, 2, 3, 4]
            .into_iter()
            .find(|&n| n == 4 || (a as i64) >= -(1i64 << (8 * n - 1)) && (a as i64) < (1i64 << (8 * n - 1)))
            .unwrap();
        prop_assert_eq!(bits, 2 + 8 * bytes_needed);
    }

    #[test]
    fn packed_u64(a in any::<u64>(), b in any::<u64>(), shift in 0u32..64, (bytes, len) in garbage()) {
        check_all::<PackedU64Serializer>(&NoConfig, &a, &b, &bytes, len)?;
        check_all::<PackedU64Serializer>(&NoConfig, &(a >> shift), &b, &bytes, len)?;
    }

    #[test]
    fn packed_i64(a in any::<i64>(), b in any::<i64>(), shift in 0u32..64, (bytes, len) in garbage()) {
        check_all::<PackedI64Serializer>(&NoConfig, &a, &b, &bytes, len)?;
        check_all::<PackedI64Serializer>(&NoConfig, &(a >> shift), &b, &bytes, len)?;
    }

    #[test]
    fn enums(i in 0u32..32, j in 0u32..32, (bytes, len) in garbage()) {
        fn pick<E: NetEnum>(i: u32) -> E {
            E::from_index(i % E::VARIANT_COUNT).unwrap()
        }
        check_all::<EnumSerializer<Single>>(&NoConfig, &pick(i), &pick(j), &bytes, len)?;
        check_all::<EnumSerializer<Pair>>(&NoConfig, &pick(i), &pick(j), &bytes, len)?;
        check_all::<EnumSerializer<Weapon>>(&NoConfig, &pick(i), &pick(j), &bytes, len)?;
        check_all::<EnumSerializer<Seventeen>>(&NoConfig, &pick(i), &pick(j), &bytes, len)?;
    }

    #[test]
    fn rotators(
        a in (any_f32(), any_f32(), any_f32()),
        b in (-720.0f32..720.0, -720.0f32..720.0, -720.0f32..720.0),
        (bytes, len) in garbage(),
    ) {
        let a = Rotator::new(a.0, a.1, a.2);
        let b = Rotator::new(b.0, b.1, b.2);
        check_all::<RotatorSerializer>(&NoConfig, &a, &b, &bytes, len)?;
        check_all::<RotatorSerializer>(&NoConfig, &b, &a, &bytes, len)?;
        check_all::<RotatorAsByteSerializer>(&NoConfig, &a, &b, &bytes, len)?;
        check_all::<RotatorAsByteSerializer>(&NoConfig, &b, &a, &bytes, len)?;
        // Bits follow the non-zero components; a delta is a residual code no longer
        // than the full encoding, or the escape and the full encoding.
        let q = RotatorSerializer::quantize(&NoConfig, &b);
        let p = RotatorSerializer::quantize(&NoConfig, &a);
        let bits = check_full::<RotatorSerializer>(&NoConfig, &q)?;
        prop_assert_eq!(bits, 3 + 16 * q.xyz_is_not_zero.count_ones() as usize);
        let mut w = BitWriter::with_capacity_bits(64);
        RotatorSerializer::serialize_delta(&NoConfig, &q, &p, &mut w);
        prop_assert!(w.position() <= bits + 1);
        if q == p {
            prop_assert_eq!(w.position(), 6);
        }
        // Quantization error stays under one step (angles compared modulo 360).
        let back = RotatorSerializer::dequantize(&NoConfig, &q);
        for (orig, got) in [(b.pitch, back.pitch), (b.yaw, back.yaw), (b.roll, back.roll)] {
            let err = (orig as f64 - got as f64).rem_euclid(360.0);
            let err = err.min(360.0 - err);
            prop_assert!(err < 360.0 / 65536.0 + 1e-4, "{} -> {}", orig, got);
        }
    }

    #[test]
    fn health(a in prop_oneof![any_f32(), -10.0f32..110.0], b in -10.0f32..110.0, (bytes, len) in garbage()) {
        check_all::<HealthSerializer>(&NoConfig, &a, &b, &bytes, len)?;
    }
}

#[test]
fn max_bits_is_the_longest_encoding() {
    assert_longest::<F32Serializer>(&NoConfig, &1.5);
    assert_longest::<F64Serializer>(&NoConfig, &1.5);
    assert_longest::<UnitF32Serializer>(&NoConfig, &1.0);
    for bits in [1, 7, 16, 20] {
        let c = FloatRangeConfig::with_bits(-1.0, 1.0, bits);
        assert_longest::<RangedF32Serializer>(&c, &1.0);
        assert_longest::<RangedF64Serializer>(&c, &-1.0);
    }
    assert_longest::<PackedU32Serializer>(&NoConfig, &u32::MAX);
    assert_longest::<PackedI32Serializer>(&NoConfig, &i32::MIN);
    assert_longest::<PackedU64Serializer>(&NoConfig, &u64::MAX);
    assert_longest::<PackedI64Serializer>(&NoConfig, &i64::MIN);
    assert_longest::<EnumSerializer<Pair>>(&NoConfig, &Pair::On);
    assert_longest::<EnumSerializer<Weapon>>(&NoConfig, &Weapon::Sniper);
    assert_longest::<EnumSerializer<Seventeen>>(&NoConfig, &Seventeen::Q);
    assert_longest::<RotatorSerializer>(&NoConfig, &Rotator::new(1.0, 2.0, 3.0));
    assert_longest::<RotatorAsByteSerializer>(&NoConfig, &Rotator::new(10.0, 20.0, 30.0));
    assert_longest::<HealthSerializer>(&NoConfig, &100.0);
}

#[test]
fn iris_bit_counts() {
    // Float zero.
    assert_eq!(roundtrip::<F32Serializer>(&NoConfig, &0.0).unwrap().0, 1);
    // Packed.
    assert_eq!(
        roundtrip::<PackedI32Serializer>(&NoConfig, &5).unwrap().0,
        10
    );
    assert_eq!(
        roundtrip::<PackedI32Serializer>(&NoConfig, &1000)
            .unwrap()
            .0,
        18
    );
    assert_eq!(
        roundtrip::<PackedI32Serializer>(&NoConfig, &1_000_000_000)
            .unwrap()
            .0,
        34
    );
    assert_eq!(
        roundtrip::<PackedI32Serializer>(&NoConfig, &-1).unwrap().0,
        10
    );
    // Rotator.
    let rot = |p, y, r| {
        roundtrip::<RotatorSerializer>(&NoConfig, &Rotator::new(p, y, r))
            .unwrap()
            .0
    };
    assert_eq!(
        (
            rot(0.0, 0.0, 0.0),
            rot(0.0, 90.0, 0.0),
            rot(45.0, 90.0, 30.0)
        ),
        (3, 19, 51)
    );
    // Health.
    assert_eq!(roundtrip::<HealthSerializer>(&NoConfig, &0.0).unwrap().0, 1);
    assert_eq!(
        roundtrip::<HealthSerializer>(&NoConfig, &75.0).unwrap().0,
        8
    );
}

#[test]
fn iris_delta_costs() {
    fn cost<S: NetSerializer<Config = NoConfig>>(q: S::Source, prev: S::Source) -> usize {
        let (q, prev) = (S::quantize(&NoConfig, &q), S::quantize(&NoConfig, &prev));
        let mut w = BitWriter::with_capacity_bits(128);
        S::serialize_delta(&NoConfig, &q, &prev, &mut w);
        w.position()
    }
    let costs: Vec<usize> = [1000, 1005, 5000, 1_000_000]
        .into_iter()
        .map(|v| cost::<PackedI32Serializer>(v, 1000))
        .collect();
    // The residual code: [0][k selector][Exp-Golomb], or [1][full].
    assert_eq!(costs, [4, 8, 19, 27]);
    assert_eq!(
        cost::<RotatorSerializer>(Rotator::new(0.0, 95.0, 0.0), Rotator::new(0.0, 90.0, 0.0)),
        20
    );
    assert_eq!(
        cost::<RotatorSerializer>(Rotator::new(0.0, 90.1, 0.0), Rotator::new(0.0, 90.0, 0.0)),
        16
    );
    assert_eq!(
        cost::<RotatorSerializer>(Rotator::new(0.0, 90.0, 0.0), Rotator::new(0.0, 90.0, 0.0)),
        6
    );
    assert_eq!(cost::<HealthSerializer>(75.0, 75.0), 1);
    assert_eq!(cost::<HealthSerializer>(72.0, 75.0), 6);
    assert_eq!(cost::<HealthSerializer>(20.0, 75.0), 9);
    assert_eq!(cost::<F32Serializer>(1.0, 1.0), 1);
}

#[test]
fn defaults_pick_these_serializers() {
    fn name<T: NetDefault>() -> &'static str {
        <T::Serializer as NetSerializer>::NAME
    }
    assert_eq!(name::<f32>(), "f32");
    assert_eq!(name::<f64>(), "f64");
    assert_eq!(name::<Rotator>(), "Rotator");
    assert_eq!(name::<Weapon>(), "enum");
}

/// `net_enum!` expands without the prelude (it names everything by absolute path).
mod hygiene {
    #![no_implicit_prelude]
    ::replicate::net_enum! {
        #[derive(::core::default::Default, ::core::fmt::Debug, ::core::cmp::PartialEq)]
        pub enum Mode { #[default] Idle, Busy, Off }
    }
}

#[test]
fn net_enum_is_hygienic() {
    assert_eq!(hygiene::Mode::VARIANT_COUNT, 3);
    assert_eq!(hygiene::Mode::from_index(2), Some(hygiene::Mode::Off));
    assert_eq!(hygiene::Mode::Busy.to_index(), 1);
}
