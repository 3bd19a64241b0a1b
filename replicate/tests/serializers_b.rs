//! Property tests for the vector, quaternion, transform, string, name, container, GUID,
//! byte-string and serde serializers: round trips, fixed points, bit accounting, deltas,
//! masked (per-element) round trips, and hostile input (random and truncated bytes)
//! that must yield an error or a value, never a panic nor an allocation past the caps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use glam::{Quat, Vec2, Vec3, Vec4};
use proptest::prelude::*;
use replicate::ChangeMask;
use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::*;

// ---------------------------------------------------------------------------------------
// Allocation tracking: the largest single allocation made by this thread while tracking.
// ---------------------------------------------------------------------------------------

struct TrackingAllocator;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = TRACKING.try_with(|t| {
        if t.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: forwards every call to `System` unchanged; `note` only touches const-initialised
// thread-local `Cell`s, which never allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for TrackingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// Runs `f` and returns its result and the largest single allocation it made.
fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    TRACKING.with(|t| t.set(true));
    let r = f();
    TRACKING.with(|t| t.set(false));
    (r, LARGEST.with(|l| l.get()))
}

// ---------------------------------------------------------------------------------------
// Generic checks
// ---------------------------------------------------------------------------------------

fn encode<S: NetSerializer>(cfg: &S::Config, q: &S::Quantized) -> (Vec<u8>, usize) {
    let mut w = BitWriter::with_capacity_bits(1 << 24);
    S::serialize(cfg, q, &mut w);
    (w.finish().expect("test writer overflow"), w.position())
}

/// quantize -> serialize -> deserialize -> dequantize -> quantize is a fixed point, the
/// reader consumes exactly the bits written, `max_bits` bounds them, and every strict
/// prefix of the encoding fails to decode.
fn check_full<S: NetSerializer>(cfg: &S::Config, source: &S::Source) -> Result<(), TestCaseError> {
    prop_assert!(S::validate_config(cfg).is_ok());
    let q = S::quantize(cfg, source);
    prop_assert!(S::validate(cfg, &q).is_ok());
    let (bytes, bits) = encode::<S>(cfg, &q);
    if let Some(max) = S::max_bits(cfg) {
        prop_assert!(bits <= max as usize, "{bits} bits > max_bits {max}");
    }
    let mut r = BitReader::with_bit_len(&bytes, bits);
    let back = S::deserialize(cfg, &mut r);
    prop_assert!(back.is_ok(), "{back:?}");
    let back = back.unwrap();
    prop_assert_eq!(r.position(), bits, "bits read != bits written");
    prop_assert_eq!(&back, &q);
    prop_assert!(S::is_equal(cfg, &back, &q));
    let again = S::quantize(cfg, &S::dequantize(cfg, &back));
    prop_assert_eq!(&again, &q, "quantize(dequantize(q)) != q");
    // Truncations: a few cut points, always including one bit short.
    for cut in [bits.saturating_sub(1), bits / 2, bits / 3, 0] {
        if cut < bits {
            let mut r = BitReader::with_bit_len(&bytes, cut);
            prop_assert!(
                S::deserialize(cfg, &mut r).is_err(),
                "decoding a {cut}-bit prefix of {bits} bits succeeded"
            );
        }
    }
    Ok(())
}

/// Delta round trip of `source` against `prev_source`, with exact bit accounting.
fn check_delta<S: NetSerializer>(
    cfg: &S::Config,
    source: &S::Source,
    prev_source: &S::Source,
) -> Result<(), TestCaseError> {
    let q = S::quantize(cfg, source);
    let prev = S::quantize(cfg, prev_source);
    for base in [&prev, &q] {
        let mut w = BitWriter::with_capacity_bits(1 << 24);
        S::serialize_delta(cfg, &q, base, &mut w);
        let bits = w.position();
        let bytes = w.finish().expect("test writer overflow");
        let mut r = BitReader::with_bit_len(&bytes, bits);
        let back = S::deserialize_delta(cfg, base, &mut r);
        prop_assert!(back.is_ok(), "{back:?}");
        prop_assert_eq!(&back.unwrap(), &q);
        prop_assert_eq!(r.position(), bits, "delta: bits read != bits written");
    }
    Ok(())
}

/// The residual code's guarantees for a quantized member (vectors, quaternions,
/// transforms): a delta never costs more than the full encoding plus one bit, and every
/// truncation of it is an error, never a panic or a wrong value.
fn check_delta_bounded<S: NetSerializer>(
    cfg: &S::Config,
    source: &S::Source,
    prev_source: &S::Source,
) -> Result<(), TestCaseError> {
    check_delta::<S>(cfg, source, prev_source)?;
    let q = S::quantize(cfg, source);
    let prev = S::quantize(cfg, prev_source);
    let mut full = BitWriter::with_capacity_bits(1 << 16);
    S::serialize(cfg, &q, &mut full);
    for base in [&prev, &q] {
        let mut w = BitWriter::with_capacity_bits(1 << 16);
        S::serialize_delta(cfg, &q, base, &mut w);
        let bits = w.position();
        prop_assert!(
            bits <= full.position() + 1,
            "delta {} > full {} + 1",
            bits,
            full.position()
        );
        let bytes = w.finish().expect("test writer overflow");
        for cut in 0..bits {
            let mut r = BitReader::with_bit_len(&bytes, cut);
            prop_assert!(
                S::deserialize_delta(cfg, base, &mut r).is_err(),
                "decoding a {cut}-bit prefix of a {bits}-bit delta succeeded"
            );
        }
    }
    Ok(())
}

/// Random bytes into deserialize and deserialize_delta: an error or a value that passes
/// `validate`, never a panic, and no single allocation above `alloc_cap` bytes.
fn check_hostile<S: NetSerializer>(
    cfg: &S::Config,
    bytes: &[u8],
    prev: &S::Quantized,
    alloc_cap: usize,
) -> Result<(), TestCaseError> {
    let (results, largest) = largest_allocation(|| {
        let mut r = BitReader::new(bytes);
        let full = S::deserialize(cfg, &mut r);
        let mut r = BitReader::new(bytes);
        let delta = S::deserialize_delta(cfg, prev, &mut r);
        (full, delta)
    });
    prop_assert!(
        largest <= alloc_cap,
        "{} allocated {largest} bytes from {} input bytes",
        S::NAME,
        bytes.len()
    );
    for v in [results.0, results.1].into_iter().flatten() {
        prop_assert!(
            S::validate(cfg, &v).is_ok(),
            "decoded value fails validate: {v:?}"
        );
        // Whatever decodes must re-encode to the same value.
        let (b, bits) = encode::<S>(cfg, &v);
        let mut r = BitReader::with_bit_len(&b, bits);
        let again = S::deserialize(cfg, &mut r);
        prop_assert_eq!(again.ok(), Some(v));
    }
    Ok(())
}

/// Per-element masked round trip: the receiver holds `prev`, the sender diffs `cur`
/// against it (plus `extra` spurious mask bits), and `deserialize_masked` onto `prev`
/// yields `cur`; the masked-delta form against an unrelated baseline does too.
fn check_masked<S: NetSerializer>(
    cfg: &S::Config,
    cur: &S::Source,
    prev: &S::Source,
    baseline: &S::Source,
    offset: u32,
    extra: &[u32],
) -> Result<(), TestCaseError> {
    let (cur, prev, baseline) = (
        S::quantize(cfg, cur),
        S::quantize(cfg, prev),
        S::quantize(cfg, baseline),
    );
    let bits = S::change_mask_bits(cfg);
    let mut mask = ChangeMask::new(offset + bits + 3);
    let changed = S::diff(cfg, &cur, &prev, &mut mask, offset);
    prop_assert_eq!(changed, !S::is_equal(cfg, &cur, &prev));
    prop_assert_eq!(changed, mask.any(), "diff result disagrees with the mask");
    prop_assert!(!mask.get(offset + bits), "diff wrote past its bits");
    if !changed {
        return Ok(());
    }
    for &e in extra {
        mask.set(offset + e % bits);
    }
    // Masked.
    let mut w = BitWriter::with_capacity_bits(1 << 24);
    S::serialize_masked(cfg, &cur, &mask, offset, &mut w);
    let n = w.position();
    let bytes = w.finish().expect("test writer overflow");
    let mut target = prev.clone();
    let mut r = BitReader::with_bit_len(&bytes, n);
    let res = S::deserialize_masked(cfg, &mut target, &mask, offset, &mut r);
    prop_assert!(res.is_ok(), "{res:?}");
    prop_assert_eq!(r.position(), n);
    prop_assert_eq!(&target, &cur);
    // Masked delta against a baseline the receiver also has.
    let mut w = BitWriter::with_capacity_bits(1 << 24);
    S::serialize_masked_delta(cfg, &cur, &baseline, &mask, offset, &mut w);
    let n = w.position();
    let bytes = w.finish().expect("test writer overflow");
    let mut target = prev.clone();
    let mut r = BitReader::with_bit_len(&bytes, n);
    let res = S::deserialize_masked_delta(cfg, &mut target, &baseline, &mask, offset, &mut r);
    prop_assert!(res.is_ok(), "{res:?}");
    prop_assert_eq!(r.position(), n);
    prop_assert_eq!(&target, &cur);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -2.0e6f32..2.0e6,
        2 => -10.0f32..10.0,
        1 => prop::num::f32::ANY,
    ]
}

fn vec3() -> impl Strategy<Value = Vec3> {
    (any_f32(), any_f32(), any_f32()).prop_map(|(x, y, z)| Vec3::new(x, y, z))
}

fn vector_config() -> impl Strategy<Value = VectorConfig> {
    prop_oneof![
        Just(VectorConfig::DEFAULT),
        (
            -1.0e4f32..1.0e4,
            0.5f32..1.0e4,
            prop_oneof![0.001f32..50.0, Just(f32::MIN_POSITIVE)],
            1u32..=32
        )
            .prop_map(|(min, span, precision, bits)| VectorConfig {
                min,
                max: min + span,
                precision,
                bits,
            }),
    ]
    .prop_filter("valid config", |c| {
        Vec3Serializer::validate_config(c).is_ok()
    })
}

fn quat() -> impl Strategy<Value = Quat> {
    prop_oneof![
        8 => (-1.0f32..1.0, -1.0f32..1.0, -1.0f32..1.0, -1.0f32..1.0)
            .prop_map(|(x, y, z, w)| Quat::from_xyzw(x, y, z, w)),
        1 => (any_f32(), any_f32(), any_f32(), any_f32())
            .prop_map(|(x, y, z, w)| Quat::from_xyzw(x, y, z, w)),
        1 => (0usize..4, prop::bool::ANY).prop_map(|(i, neg)| {
            let mut a = [0.0f32; 4];
            a[i] = if neg { -1.0 } else { 1.0 };
            Quat::from_array(a)
        }),
        // Two equal largest components: the tie-breaking edge.
        1 => (0usize..4, 0usize..4, -1.0f32..1.0).prop_map(|(i, j, s)| {
            let mut a = [0.1f32 * s; 4];
            a[i] = 0.7;
            a[j] = 0.7;
            Quat::from_array(a)
        }),
    ]
}

fn transform() -> impl Strategy<Value = Transform> {
    (vec3(), quat(), prop::bool::ANY, vec3()).prop_map(|(t, r, unit, s)| Transform {
        translation: t,
        rotation: r,
        scale: if unit { Vec3::ONE } else { s * 1.0e-5 },
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{0,12}",
        ".{0,24}",
        prop::sample::select(DEFAULT_NAMES).prop_map(str::to_owned),
    ]
}

#[derive(serde::Serialize, serde::Deserialize, Clone, PartialEq, Default, Debug)]
struct Loadout {
    name: String,
    slots: Vec<u16>,
    charge: Option<i64>,
    tags: BTreeMap<u8, bool>,
}

fn loadout() -> impl Strategy<Value = Loadout> {
    (
        "[a-z]{0,10}",
        prop::collection::vec(any::<u16>(), 0..8),
        any::<Option<i64>>(),
        prop::collection::btree_map(any::<u8>(), any::<bool>(), 0..6),
    )
        .prop_map(|(name, slots, charge, tags)| Loadout {
            name,
            slots,
            charge,
            tags,
        })
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn vec3_roundtrip(cfg in vector_config(), a in vec3(), b in vec3()) {
        check_full::<Vec3Serializer>(&cfg, &a)?;
        check_delta_bounded::<Vec3Serializer>(&cfg, &a, &b)?;
        // Small moves are cheap: a one-step change costs 8 bits for the vector.
        let q = Vec3Serializer::quantize(&cfg, &a);
        let mut next = q;
        next[0] = if q[0] == 0 { 1 } else { q[0] - 1 };
        let mut w = BitWriter::with_capacity_bits(256);
        Vec3Serializer::serialize_delta(&cfg, &next, &q, &mut w);
        let bits = cfg.component_bits() as usize;
        // [0][k = 0][zigzag 1 or 2: 3 bits][0: 1 bit][0: 1 bit]; for components of at
        // most 2 bits the escape [1][full] is shorter.
        let expected = if 7 <= 3 * bits { 8 } else { 1 + 3 * bits };
        prop_assert_eq!(w.position(), expected);
    }

    #[test]
    fn vec3_axes_roundtrip(x in vector_config(), z in vector_config(), a in vec3(), b in vec3()) {
        for cfg in [AxesConfig::DEFAULT, AxesConfig { x, y: VectorConfig::DEFAULT, z }] {
            check_full::<Vec3AxesSerializer>(&cfg, &a)?;
            check_delta_bounded::<Vec3AxesSerializer>(&cfg, &a, &b)?;
        }
    }

    #[test]
    fn vec2_roundtrip(cfg in vector_config(), a in vec3(), b in vec3()) {
        check_full::<Vec2Serializer>(&cfg, &a.truncate())?;
        check_delta_bounded::<Vec2Serializer>(&cfg, &a.truncate(), &b.truncate())?;
    }

    #[test]
    fn unit_vec3_roundtrip(bits in 2u32..=22, a in vec3(), b in vec3()) {
        let cfg = UnitVecConfig { bits };
        // A vector whose squared length is subnormal normalizes to one measurably off
        // unit length (the squared length keeps too few bits): zero stands for it.
        let unit = |v: Vec3| {
            if v.length_squared() >= f32::MIN_POSITIVE {
                v.normalize_or_zero()
            } else {
                Vec3::ZERO
            }
        };
        let (ua, ub) = (unit(a), unit(b));
        check_full::<UnitVec3Serializer>(&cfg, &ua)?;
        check_delta_bounded::<UnitVec3Serializer>(&cfg, &ua, &ub)?;
        let back = UnitVec3Serializer::dequantize(&cfg, &UnitVec3Serializer::quantize(&cfg, &ua));
        let step = 2.0 / ((1u64 << bits) - 2) as f32;
        prop_assert!((back - ua).abs().max_element() <= step * 0.5 + 1e-6);
    }

    #[test]
    fn quat_roundtrip(bits in 4u32..=20, a in quat(), b in quat()) {
        let cfg = QuatConfig { bits };
        check_full::<QuatSerializer>(&cfg, &a)?;
        check_delta_bounded::<QuatSerializer>(&cfg, &a, &b)?;
        let back = QuatSerializer::dequantize(&cfg, &QuatSerializer::quantize(&cfg, &a));
        prop_assert!((back.length() - 1.0).abs() < 1e-5);
        let m = a.to_array().iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if a.is_finite() && m > 1e-30 {
            // Angular error stays within a few quantization steps (scaled first, so huge
            // inputs do not overflow the reference normalisation).
            let reference = Quat::from_array(a.to_array().map(|v| v / m)).normalize();
            let step = std::f32::consts::SQRT_2 / ((1u64 << bits) - 2) as f32;
            // Component distance to the nearer of ±reference (f32 `angle_between` is too
            // coarse near 0 to test fine quantization).
            let d = |s: f32| (Vec4::from(back) - s * Vec4::from(reference)).abs().max_element();
            let err = d(1.0).min(d(-1.0));
            prop_assert!(err <= 4.0 * step + 1e-6, "error {err} at {bits} bits");
        }
    }

    #[test]
    fn transform_roundtrip(a in transform(), b in transform()) {
        let cfg = TransformConfig::DEFAULT;
        check_full::<TransformSerializer>(&cfg, &a)?;
        check_delta_bounded::<TransformSerializer>(&cfg, &a, &b)?;
        if a.scale == Vec3::ONE {
            prop_assert_eq!(TransformSerializer::quantize(&cfg, &a).scale, None);
        }
    }

    #[test]
    fn string_roundtrip(max_len in 1u32..64, a in text(), b in text()) {
        let cfg = StringConfig { max_len };
        check_full::<StringSerializer>(&cfg, &a)?;
        check_delta::<StringSerializer>(&cfg, &a, &b)?;
        let q = StringSerializer::quantize(&cfg, &a);
        prop_assert!(q.len() <= max_len as usize && a.starts_with(&q));
    }

    #[test]
    fn name_roundtrip(max_len in 1u32..64, a in text(), b in text()) {
        let cfg = NameConfig { max_len, ..NameConfig::DEFAULT };
        check_full::<NameSerializer>(&cfg, &a)?;
        check_delta::<NameSerializer>(&cfg, &a, &b)?;
        if DEFAULT_NAMES.contains(&a.as_str()) {
            prop_assert_eq!(roundtrip::<NameSerializer>(&cfg, &a).unwrap().0, 8);
        }
    }

    #[test]
    fn option_roundtrip(a in any::<Option<u32>>(), b in any::<Option<u32>>()) {
        type S = OptionSerializer<U32Serializer>;
        check_full::<S>(&IntConfig::DEFAULT, &a)?;
        check_delta::<S>(&IntConfig::DEFAULT, &a, &b)?;
        type T = OptionSerializer<StringSerializer>;
        let (sa, sb) = (a.map(|v| v.to_string()), b.map(|v| format!("{v:x}")));
        check_full::<T>(&StringConfig::DEFAULT, &sa)?;
        check_delta::<T>(&StringConfig::DEFAULT, &sa, &sb)?;
    }

    #[test]
    fn array_roundtrip(a in any::<[i16; 5]>(), b in any::<[i16; 5]>()) {
        type S = ArraySerializer<I16Serializer, 5>;
        check_full::<S>(&ArrayConfig::DEFAULT, &a)?;
        check_delta::<S>(&ArrayConfig::DEFAULT, &a, &b)?;
    }

    #[test]
    fn vec_roundtrip(
        max_len in 1u32..40,
        a in prop::collection::vec(any::<u16>(), 0..48),
        b in prop::collection::vec(any::<u16>(), 0..48),
    ) {
        type S = VecSerializer<U16Serializer>;
        let cfg = VecConfig { max_len, ..VecConfig::DEFAULT };
        check_full::<S>(&cfg, &a)?;
        check_delta::<S>(&cfg, &a, &b)?;
        // Growth and shrinking against a prefix/extension of the same data.
        let grown: Vec<u16> = a.iter().chain(&b).copied().collect();
        check_delta::<S>(&cfg, &grown, &a)?;
        check_delta::<S>(&cfg, &a, &grown)?;
    }

    #[test]
    fn vec_of_strings_roundtrip(
        a in prop::collection::vec(text(), 0..6),
        b in prop::collection::vec(text(), 0..6),
    ) {
        type S = VecSerializer<StringSerializer>;
        let cfg = VecConfig { max_len: 8, element: StringConfig { max_len: 16 }, element_bits: 0 };
        check_full::<S>(&cfg, &a)?;
        check_delta::<S>(&cfg, &a, &b)?;
    }

    #[test]
    fn vec_masked_roundtrip(
        element_bits in 1u32..12,
        offset in 0u32..5,
        cur in prop::collection::vec(0u8..4, 0..40),
        prev in prop::collection::vec(0u8..4, 0..40),
        base in prop::collection::vec(0u8..4, 0..40),
        extra in prop::collection::vec(any::<u32>(), 0..3),
    ) {
        type S = VecSerializer<U8Serializer>;
        let cfg = VecConfig { max_len: 32, element: IntConfig::DEFAULT, element_bits };
        prop_assert_eq!(S::change_mask_bits(&cfg), 1 + element_bits);
        check_masked::<S>(&cfg, &cur, &prev, &base, offset, &extra)?;
        // Tracking off behaves as the plain serializer.
        let off = VecConfig { element_bits: 0, ..cfg };
        check_masked::<S>(&off, &cur, &prev, &base, offset, &extra)?;
    }

    #[test]
    fn vec_masked_sends_only_masked_elements(
        element_bits in 1u32..12,
        prev in prop::collection::vec(any::<u8>(), 1..40),
        i in any::<prop::sample::Index>(),
        v in any::<u8>(),
    ) {
        type S = VecSerializer<U8Serializer>;
        let cfg = VecConfig { max_len: 64, element: IntConfig::DEFAULT, element_bits };
        let i = i.index(prev.len());
        let mut cur = prev.clone();
        cur[i] = v;
        prop_assume!(cur != prev);
        let mut mask = ChangeMask::new(1 + element_bits);
        prop_assert!(S::diff(&cfg, &cur, &prev, &mut mask, 0));
        prop_assert_eq!(
            mask.iter_ones().collect::<Vec<_>>(),
            vec![0, 1 + (i as u32 % element_bits)]
        );
        let sharing = (0..cur.len()).filter(|j| j % element_bits as usize == i % element_bits as usize).count();
        let mut w = BitWriter::with_capacity_bits(4096);
        S::serialize_masked(&cfg, &cur, &mask, 0, &mut w);
        prop_assert_eq!(w.position(), 1 + 6 + 8 * sharing);
    }

    #[test]
    fn array_masked_roundtrip(
        element_bits in 1u32..6,
        offset in 0u32..5,
        cur in any::<[u8; 9]>(),
        prev in any::<[u8; 9]>(),
        base in any::<[u8; 9]>(),
        extra in prop::collection::vec(any::<u32>(), 0..3),
    ) {
        type S = ArraySerializer<U8Serializer, 9>;
        let cfg = ArrayConfig { element: IntConfig::DEFAULT, element_bits };
        let mut cur = cur;
        cur[..4].copy_from_slice(&prev[..4]); // some unchanged elements
        check_masked::<S>(&cfg, &cur, &prev, &base, offset, &extra)?;
    }

    #[test]
    fn map_and_set_roundtrip(
        a in prop::collection::btree_map(any::<i32>(), text(), 0..10),
        b in prop::collection::btree_map(any::<i32>(), text(), 0..10),
        sa in prop::collection::btree_set(any::<u16>(), 0..20),
        sb in prop::collection::btree_set(any::<u16>(), 0..20),
    ) {
        type M = MapSerializer<I32Serializer, StringSerializer>;
        let cfg = MapConfig { max_len: 8, ..MapConfig::DEFAULT };
        check_full::<M>(&cfg, &a)?;
        check_delta::<M>(&cfg, &a, &b)?;
        // Same keys, new values: the per-value delta path.
        let same_keys: BTreeMap<i32, String> = a.keys().map(|k| (*k, format!("{k}"))).collect();
        check_delta::<M>(&cfg, &same_keys, &a)?;
        type S = SetSerializer<U16Serializer>;
        let scfg = SetConfig { max_len: 16, ..SetConfig::DEFAULT };
        check_full::<S>(&scfg, &sa)?;
        check_delta::<S>(&scfg, &sa, &sb)?;
    }

    #[test]
    fn guid_bytes_serde_roundtrip(
        g in any::<u128>(),
        h in any::<u128>(),
        bytes in prop::collection::vec(any::<u8>(), 0..80),
        other in prop::collection::vec(any::<u8>(), 0..80),
        la in loadout(),
        lb in loadout(),
    ) {
        let (g, h) = (Guid::from_u128(g), Guid::from_u128(h));
        check_full::<GuidSerializer>(&NoConfig, &g)?;
        check_full::<GuidSerializer>(&NoConfig, &Guid::NIL)?;
        check_delta::<GuidSerializer>(&NoConfig, &g, &h)?;
        let bcfg = BytesConfig { max_len: 64 };
        check_full::<BytesSerializer>(&bcfg, &bytes)?;
        check_delta::<BytesSerializer>(&bcfg, &bytes, &other)?;
        let scfg = SerdeConfig::DEFAULT;
        check_full::<SerdeSerializer<Loadout>>(&scfg, &la)?;
        check_delta::<SerdeSerializer<Loadout>>(&scfg, &la, &lb)?;
        let (_, back) = roundtrip::<SerdeSerializer<Loadout>>(&scfg, &la).unwrap();
        prop_assert_eq!(back, la);
    }

    /// Random bytes into every deserializer, with configs at their largest caps, so an
    /// unchecked length would allocate far more than the 64 input bytes justify.
    #[test]
    fn hostile_input(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        const CAP: usize = 16 * 1024;
        let big_vec = VecConfig { max_len: MAX_CONTAINER_LEN, element: IntConfig::DEFAULT, element_bits: 0 };
        let big_str = StringConfig { max_len: MAX_STRING_LEN };
        check_hostile::<Vec3Serializer>(&VectorConfig::DEFAULT, &bytes, &[5, 6, 7], CAP)?;
        check_hostile::<Vec2Serializer>(
            &VectorConfig { min: 0.0, max: 1000.0, ..VectorConfig::DEFAULT }, &bytes, &[1, 2], CAP)?;
        check_hostile::<Vec3AxesSerializer>(&AxesConfig::DEFAULT, &bytes, &[5, 6, 7], CAP)?;
        check_hostile::<UnitVec3Serializer>(&UnitVecConfig::DEFAULT, &bytes, &[0, 0, 0], CAP)?;
        check_hostile::<QuatSerializer>(&QuatConfig::DEFAULT, &bytes, &QuantizedQuat::default(), CAP)?;
        check_hostile::<TransformSerializer>(
            &TransformConfig::DEFAULT, &bytes, &QuantizedTransform::default(), CAP)?;
        check_hostile::<StringSerializer>(&big_str, &bytes, &"prev".to_string(), CAP)?;
        check_hostile::<NameSerializer>(
            &NameConfig { max_len: MAX_STRING_LEN, ..NameConfig::DEFAULT }, &bytes,
            &QuantizedName::Index(3), CAP)?;
        check_hostile::<OptionSerializer<U64Serializer>>(&IntConfig::DEFAULT, &bytes, &Some(9), CAP)?;
        check_hostile::<ArraySerializer<U32Serializer, 1000>>(
            &ArrayConfig::DEFAULT, &bytes, &vec![1; 1000], CAP)?;
        check_hostile::<VecSerializer<U32Serializer>>(&big_vec, &bytes, &vec![1, 2, 3], CAP)?;
        check_hostile::<VecSerializer<VecSerializer<U32Serializer>>>(
            &VecConfig { max_len: MAX_CONTAINER_LEN, element: big_vec, element_bits: 0 },
            &bytes, &vec![vec![1]], CAP)?;
        check_hostile::<VecSerializer<StringSerializer>>(
            &VecConfig { max_len: MAX_CONTAINER_LEN, element: big_str, element_bits: 0 },
            &bytes, &vec![String::new()], CAP)?;
        check_hostile::<MapSerializer<U8Serializer, StringSerializer>>(
            &MapConfig { max_len: MAX_CONTAINER_LEN, key: IntConfig::DEFAULT, value: big_str },
            &bytes, &BTreeMap::from([(1, "x".to_string())]), CAP)?;
        check_hostile::<SetSerializer<U16Serializer>>(
            &SetConfig { max_len: MAX_CONTAINER_LEN, element: IntConfig::DEFAULT },
            &bytes, &BTreeSet::from([4]), CAP)?;
        check_hostile::<GuidSerializer>(&NoConfig, &bytes, &Guid::from_u128(1), CAP)?;
        check_hostile::<BytesSerializer>(&BytesConfig { max_len: MAX_STRING_LEN }, &bytes, &vec![1], CAP)?;
        check_hostile::<SerdeSerializer<Loadout>>(
            &SerdeConfig { max_bytes: MAX_STRING_LEN }, &bytes, &Vec::new(), CAP)?;
    }

    /// Random bytes into the masked decoders: errors or values, never a panic; resizing
    /// stays within `max_len` elements.
    #[test]
    fn hostile_masked_input(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        mask_bits in any::<u64>(),
        prev in prop::collection::vec(any::<u32>(), 0..8),
    ) {
        type S = VecSerializer<U32Serializer>;
        let cfg = VecConfig { max_len: 4096, element: IntConfig::DEFAULT, element_bits: 7 };
        let mask = ChangeMask::from_u64(8, mask_bits);
        let (res, largest) = largest_allocation(|| {
            let mut target = prev.clone();
            let a = S::deserialize_masked(&cfg, &mut target, &mask, 0, &mut BitReader::new(&bytes));
            let mut target2 = prev.clone();
            let b = S::deserialize_masked_delta(
                &cfg, &mut target2, &prev, &mask, 0, &mut BitReader::new(&bytes));
            (a.map(|_| target), b.map(|_| target2))
        });
        prop_assert!(largest <= 4096 * 4, "allocated {largest} bytes");
        for v in [res.0, res.1].into_iter().flatten() {
            prop_assert!(v.len() <= 4096);
        }
        type A = ArraySerializer<U32Serializer, 100>;
        let acfg = ArrayConfig { element: IntConfig::DEFAULT, element_bits: 7 };
        let mut target = prev.clone();
        let mut r = BitReader::new(&bytes);
        if A::deserialize_masked(&acfg, &mut target, &mask, 0, &mut r).is_ok() {
            prop_assert_eq!(target.len(), 100);
        }
        let mut target = prev.clone();
        let mut r = BitReader::new(&bytes);
        if A::deserialize_masked_delta(&acfg, &mut target, &prev, &mask, 0, &mut r).is_ok() {
            prop_assert_eq!(target.len(), 100);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Seed numbers and targeted cases
// ---------------------------------------------------------------------------------------

#[test]
fn iris_empty_array_and_string_are_one_bit() {
    assert_eq!(
        roundtrip::<VecSerializer<U32Serializer>>(&VecConfig::DEFAULT, &vec![]).unwrap(),
        (1, vec![])
    );
    assert_eq!(
        roundtrip::<StringSerializer>(&StringConfig::DEFAULT, &String::new()).unwrap(),
        (1, String::new())
    );
    assert_eq!(
        roundtrip::<SetSerializer<U8Serializer>>(&SetConfig::DEFAULT, &BTreeSet::new())
            .unwrap()
            .0,
        1
    );
}

#[test]
fn iris_modulo_mapping_100_items() {
    type S = VecSerializer<U16Serializer>;
    let cfg = VecConfig {
        element_bits: 10,
        ..VecConfig::DEFAULT
    };
    assert_eq!(S::change_mask_bits(&cfg), 11);
    let prev: Vec<u16> = (0..100).collect();
    for (i, expected_bit) in [(0usize, 1u32), (9, 10), (10, 1), (20, 1), (99, 10), (55, 6)] {
        let mut cur = prev.clone();
        cur[i] += 1000;
        let mut mask = ChangeMask::new(11);
        assert!(S::diff(&cfg, &cur, &prev, &mut mask, 0));
        assert_eq!(
            mask.iter_ones().collect::<Vec<_>>(),
            vec![0, expected_bit],
            "element {i}"
        );
    }
}

#[test]
fn huge_length_prefixes_rejected_before_allocating() {
    // [0][count - 1 = all ones] for a 65535 cap, then nothing.
    let mut w = BitWriter::with_capacity_bits(64);
    w.write_bool(false);
    w.write_bits(u64::MAX, 16);
    let bytes = w.finish().unwrap();
    let big_vec = VecConfig {
        max_len: MAX_CONTAINER_LEN,
        element: IntConfig::DEFAULT,
        element_bits: 0,
    };
    let (res, largest) = largest_allocation(|| {
        VecSerializer::<U64Serializer>::deserialize(&big_vec, &mut BitReader::new(&bytes))
    });
    assert!(res.is_err());
    assert!(largest < 256, "allocated {largest} bytes");

    // A 1 MiB string claim with 3 bytes of data.
    let mut w = BitWriter::with_capacity_bits(64);
    w.write_bool(false);
    w.write_bits(u64::MAX, 20);
    w.write_bits(0x41_41_41, 24);
    let bytes = w.finish().unwrap();
    let (res, largest) = largest_allocation(|| {
        StringSerializer::deserialize(
            &StringConfig {
                max_len: MAX_STRING_LEN,
            },
            &mut BitReader::new(&bytes),
        )
    });
    assert!(matches!(res, Err(SerializeError::Bits(_))), "{res:?}");
    assert!(largest < 256, "allocated {largest} bytes");

    // The serde fallback: a length over max_bytes is TooLong.
    let mut w = BitWriter::with_capacity_bits(64);
    w.write_bool(false);
    w.write_bits(1010, 10);
    let bytes = w.finish().unwrap();
    let res = SerdeSerializer::<Loadout>::deserialize(
        &SerdeConfig { max_bytes: 1000 },
        &mut BitReader::new(&bytes),
    );
    assert!(
        matches!(res, Err(SerializeError::TooLong { .. })),
        "{res:?}"
    );
}

#[test]
fn net_defaults_resolve() {
    fn name_of<T: NetDefault>() -> &'static str {
        <T::Serializer as NetSerializer>::NAME
    }
    // Float types are lossless by default; quantization is NetQuantize's.
    assert_eq!(name_of::<Vec2>(), "Vec2F32");
    assert_eq!(name_of::<Vec3>(), "Vec3F32");
    assert_eq!(name_of::<Quat>(), "QuatF32");
    fn quantized<T: replicate::serialize::NetQuantize>() -> &'static str {
        <<T as replicate::serialize::NetQuantize>::Serializer as NetSerializer>::NAME
    }
    assert_eq!(quantized::<Vec2>(), "Vec2");
    assert_eq!(quantized::<Vec3>(), "Vec3");
    assert_eq!(quantized::<Quat>(), "Quat");
    assert_eq!(quantized::<f32>(), "RangedF32");
    assert_eq!(name_of::<Transform>(), "TransformF32");
    assert_eq!(name_of::<String>(), "String");
    assert_eq!(name_of::<Guid>(), "Guid");
    assert_eq!(name_of::<Option<u8>>(), "Option");
    assert_eq!(name_of::<Vec<String>>(), "Vec");
    assert_eq!(name_of::<[u8; 40]>(), "Array");
    assert_eq!(name_of::<BTreeMap<u32, Vec3>>(), "BTreeMap");
    assert_eq!(name_of::<BTreeSet<i64>>(), "BTreeSet");
    // Default configs are valid.
    type V = <Vec<Option<String>> as NetDefault>::Serializer;
    assert!(V::validate_config(&VecConfig::DEFAULT).is_ok());
}

#[test]
fn fingerprints_distinguish_element_serializers_and_configs() {
    fn fp<S: NetSerializer>(c: &S::Config) -> u64 {
        let mut h = StableHasher::new();
        S::fingerprint(c, &mut h);
        h.finish()
    }
    let a = fp::<VecSerializer<U8Serializer>>(&VecConfig::DEFAULT);
    let b = fp::<VecSerializer<I8Serializer>>(&VecConfig::DEFAULT);
    let c = fp::<VecSerializer<U8Serializer>>(&VecConfig {
        max_len: 5,
        ..VecConfig::DEFAULT
    });
    assert!(a != b && a != c && b != c);
    let t1 = fp::<NameSerializer>(&NameConfig::DEFAULT);
    let t2 = fp::<NameSerializer>(&NameConfig {
        table: &["a"],
        ..NameConfig::DEFAULT
    });
    assert_ne!(t1, t2);
}

#[test]
fn vec_grow_and_shrink_masked_keeps_untouched_elements() {
    type S = VecSerializer<U32Serializer>;
    let cfg = VecConfig {
        element_bits: 4,
        ..VecConfig::DEFAULT
    };
    let prev: Vec<u32> = vec![10, 11, 12, 13, 14, 15];
    let grown: Vec<u32> = vec![10, 11, 12, 13, 14, 15, 16, 17];
    let mut mask = ChangeMask::new(5);
    assert!(S::diff(&cfg, &grown, &prev, &mut mask, 0));
    // Elements 6 and 7 are new: bits 1 + 2 and 1 + 3.
    assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![0, 3, 4]);
    let mut w = BitWriter::with_capacity_bits(1024);
    S::serialize_masked(&cfg, &grown, &mask, 0, &mut w);
    let bytes = w.finish().unwrap();
    let mut target = prev.clone();
    S::deserialize_masked(&cfg, &mut target, &mask, 0, &mut BitReader::new(&bytes)).unwrap();
    assert_eq!(target, grown);
}

/// Iris's dynamic-state contract (clone and free recurse into elements, resizing
/// frees removed elements): a quantized element type that counts live instances.
mod dynamic_state {
    use super::*;
    use std::sync::atomic::{AtomicIsize, Ordering};

    static LIVE: AtomicIsize = AtomicIsize::new(0);

    #[derive(Debug, PartialEq)]
    struct Counted(u8);

    impl Counted {
        fn new(v: u8) -> Self {
            LIVE.fetch_add(1, Ordering::SeqCst);
            Counted(v)
        }
    }
    impl Default for Counted {
        fn default() -> Self {
            Counted::new(0)
        }
    }
    impl Clone for Counted {
        fn clone(&self) -> Self {
            Counted::new(self.0)
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }

    struct CountedSerializer;

    impl NetSerializer for CountedSerializer {
        type Source = u8;
        type Quantized = Counted;
        type Config = NoConfig;
        const NAME: &'static str = "Counted";
        const HAS_DYNAMIC_STATE: bool = true;

        fn quantize(_: &NoConfig, v: &u8) -> Counted {
            Counted::new(*v)
        }
        fn dequantize(_: &NoConfig, q: &Counted) -> u8 {
            q.0
        }
        fn serialize(_: &NoConfig, q: &Counted, w: &mut BitWriter) {
            w.write_bits(q.0 as u64, 8);
        }
        fn deserialize(_: &NoConfig, r: &mut BitReader) -> replicate::serialize::Result<Counted> {
            let v = r.read_bits(8) as u8;
            r.check()?;
            Ok(Counted::new(v))
        }
    }

    #[test]
    fn resize_clone_and_drop_balance() {
        type S = VecSerializer<CountedSerializer>;
        let cfg = VecConfig {
            element_bits: 3,
            ..VecConfig::DEFAULT
        };
        {
            let prev = S::quantize(&cfg, &(0..10).collect());
            let grown = S::quantize(&cfg, &(0..14).collect());
            let shrunk = S::quantize(&cfg, &(0..3).collect());
            let base = LIVE.load(Ordering::SeqCst);
            assert_eq!(base, 27);
            for (cur, start) in [(&grown, &prev), (&shrunk, &grown), (&prev, &shrunk)] {
                let mut mask = ChangeMask::new(4);
                assert!(S::diff(&cfg, cur, start, &mut mask, 0));
                let mut w = BitWriter::with_capacity_bits(4096);
                S::serialize_masked(&cfg, cur, &mask, 0, &mut w);
                let bytes = w.finish().unwrap();
                let mut target = start.clone();
                S::deserialize_masked(&cfg, &mut target, &mask, 0, &mut BitReader::new(&bytes))
                    .unwrap();
                assert_eq!(&target, cur);
                // The clone holds exactly cur.len() live elements on top of the originals.
                assert_eq!(LIVE.load(Ordering::SeqCst), base + cur.len() as isize);
                drop(target);
                assert_eq!(LIVE.load(Ordering::SeqCst), base);
            }
        }
        assert_eq!(LIVE.load(Ordering::SeqCst), 0);
    }
}
