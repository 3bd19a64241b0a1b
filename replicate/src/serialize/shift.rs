//! The step of a baseline prediction, member by member.
//!
//! A prediction moves a baseline `x` by the step the members' own delta code measures
//! from `z` to `y`: the members' delta code of `y` against `z`, read back against `x`
//! (a velocity added to a snapshot, or an acceleration to a continued one). Every
//! serializer's notion of a step is respected (wrapping angles, smallest-three
//! components), members that do not use the residual code predict `y`, and both ends
//! compute bit-identical predictions from bit-identical baselines.
//!
//! [`NetSerializer::shift`] and [`NetSerializer::shift_masked`] give that value. By
//! default they run the code through a scratch writer ([`shift_by_code`],
//! [`shift_masked_by_code`]); the residual-coded built-ins (integers, ranged floats,
//! vectors, quaternions, rotators) compute it directly
//! ([`delta::shift_residuals`](super::delta::shift_residuals)) and run the code only
//! for an escape, a property test checking each against its code.

use super::{ChangeMask, NetSerializer, Result, SerializeError};
use crate::bits::{BitReader, BitWriter, WriterMark};
use std::cell::RefCell;

/// The most bits one code may take (a larger one predicts nothing).
pub const SHIFT_SCRATCH_BITS: usize = 1 << 16;

thread_local! {
    /// Free scratch writers (and the bytes a reader reads back): a code runs through
    /// one, and a nested state's code may need another while it is taken.
    static SCRATCH: RefCell<Vec<Scratch>> = const { RefCell::new(Vec::new()) };
}

/// A scratch writer, its empty mark, and the bytes a reader reads back.
struct Scratch {
    writer: BitWriter,
    origin: WriterMark,
    bytes: Vec<u8>,
}

/// Runs `f` on an empty scratch writer of this thread.
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut s = SCRATCH.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| {
        let writer = BitWriter::with_capacity_bits(SHIFT_SCRATCH_BITS);
        Scratch {
            origin: writer.mark(),
            writer,
            bytes: Vec::new(),
        }
    });
    s.writer.rollback(s.origin);
    let out = f(&mut s);
    SCRATCH.with(|free| free.borrow_mut().push(s));
    out
}

/// Runs `write`, then `read` over what it wrote, on a scratch writer of this thread.
/// An error when the code overflows [`SHIFT_SCRATCH_BITS`].
pub fn through_code<T>(
    write: impl FnOnce(&mut BitWriter),
    read: impl FnOnce(&mut BitReader) -> Result<T>,
) -> Result<T> {
    with_scratch(|s| {
        write(&mut s.writer);
        if s.writer.is_overflown() {
            return Err(SerializeError::invalid(
                "prediction",
                "a member's delta code does not fit the prediction scratch",
            ));
        }
        s.bytes.clear();
        s.writer.append_to(&mut s.bytes);
        read(&mut BitReader::with_bit_len(&s.bytes, s.writer.position()))
    })
}

/// The bits `write` writes on a scratch writer of this thread (to compare two codes);
/// `None` when they overflow [`SHIFT_SCRATCH_BITS`].
pub fn code_bits(write: impl FnOnce(&mut BitWriter)) -> Option<usize> {
    with_scratch(|s| {
        write(&mut s.writer);
        (!s.writer.is_overflown()).then(|| s.writer.position())
    })
}

/// [`NetSerializer::shift`] by running the code: `y`'s delta code against `z`, read
/// back against `x`, validated.
pub fn shift_by_code<S: NetSerializer + ?Sized>(
    config: &S::Config,
    x: &S::Quantized,
    y: &S::Quantized,
    z: &S::Quantized,
) -> Result<S::Quantized> {
    let v = through_code(
        |w| S::serialize_delta(config, y, z, w),
        |r| S::deserialize_delta(config, x, r),
    )?;
    S::validate(config, &v)?;
    Ok(v)
}

/// [`NetSerializer::shift_masked`] by running the masked code: the parts of `y`
/// selected by `mask` coded against `z`, read back into `target` (equal to `x`)
/// against `x`, validated.
pub fn shift_masked_by_code<S: NetSerializer + ?Sized>(
    config: &S::Config,
    target: &mut S::Quantized,
    x: &S::Quantized,
    y: &S::Quantized,
    z: &S::Quantized,
    mask: &ChangeMask,
    offset: u32,
) -> Result<()> {
    through_code(
        |w| S::serialize_masked_delta(config, y, z, mask, offset, w),
        |r| S::deserialize_masked_delta(config, target, x, mask, offset, r),
    )?;
    S::validate(config, target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::{
        AxesConfig, FloatRangeConfig, I16Serializer, IntConfig, NoConfig, QuantizedQuat,
        QuatConfig, QuatSerializer, RangedF32Serializer, RotatorAsByteSerializer,
        RotatorByteQuantized, RotatorQuantized, RotatorSerializer, U8Serializer, U32Serializer,
        Vec2Serializer, Vec3AxesSerializer, Vec3Serializer, Vec4Serializer, VectorConfig,
    };
    use proptest::prelude::*;

    /// The computed step equals the coded one, value for value and error for error,
    /// masked and whole.
    fn agrees<S: NetSerializer>(
        config: &S::Config,
        x: &S::Quantized,
        y: &S::Quantized,
        z: &S::Quantized,
    ) -> std::result::Result<(), TestCaseError> {
        let computed = S::shift(config, x, y, z);
        let coded = shift_by_code::<S>(config, x, y, z);
        prop_assert_eq!(computed.as_ref().ok(), coded.as_ref().ok());
        let mask = ChangeMask::from_u64(1, 1);
        let mut target = x.clone();
        let masked = S::shift_masked(config, &mut target, x, y, z, &mask, 0);
        prop_assert_eq!(masked.is_ok(), coded.is_ok());
        if let Ok(v) = &coded {
            prop_assert_eq!(&target, v);
        }
        Ok(())
    }

    /// A value near `around` (most steps small, some past the escape), or anywhere.
    fn near(around: u32, max: u32) -> impl Strategy<Value = u32> {
        prop_oneof![
            3 => (-40i64..=40).prop_map(move |d| (around as i64 + d).clamp(0, max as i64) as u32),
            1 => 0..=max,
        ]
    }

    fn triple(max: u32) -> impl Strategy<Value = (u32, u32, u32)> {
        (0..=max).prop_flat_map(move |z| (near(z, max), near(z, max), Just(z)))
    }

    proptest! {
        #[test]
        fn vectors_compute_the_coded_step(
            a in proptest::collection::vec(triple(1023), 4),
            wide in any::<bool>(),
        ) {
            let c = VectorConfig { bits: if wide { 20 } else { 10 }, ..VectorConfig::DEFAULT };
            let max = (1u32 << c.bits) - 1;
            let pick = |i: usize, k: usize| {
                let t = a[i];
                [t.0, t.1, t.2][k].min(max)
            };
            let arr = |k| std::array::from_fn::<u32, 4, _>(|i| pick(i, k));
            let (x, y, z) = (arr(0), arr(1), arr(2));
            agrees::<Vec4Serializer>(&c, &x, &y, &z)?;
            let three = |v: [u32; 4]| [v[0], v[1], v[2]];
            agrees::<Vec3Serializer>(&c, &three(x), &three(y), &three(z))?;
            agrees::<Vec2Serializer>(&c, &[x[0], x[1]], &[y[0], y[1]], &[z[0], z[1]])?;
        }

        #[test]
        fn axes_compute_the_coded_step(
            t in proptest::collection::vec(triple(1 << 14), 3),
            shift_up in 0u32..(1 << 20) - (1 << 14),
        ) {
            let c = AxesConfig::DEFAULT;
            // x and y are 20 bits wide; z 14.
            let up = |v: u32, k: usize| if k < 2 { v + shift_up } else { v };
            let arr = |which: usize| std::array::from_fn::<u32, 3, _>(|k| {
                let (a, b, z) = t[k];
                up([a, b, z][which], k)
            });
            agrees::<Vec3AxesSerializer>(&c, &arr(0), &arr(1), &arr(2))?;
        }

        #[test]
        fn ranged_floats_compute_the_coded_step((x, y, z) in triple(1023), over in 0u32..3) {
            let c = FloatRangeConfig { min: -180.0, max: 180.0, bits: 10, ..FloatRangeConfig::DEFAULT };
            // A base past the range (read clamped) and a step out of it (an error).
            agrees::<RangedF32Serializer>(&c, &(x + over * 600), &y, &z)?;
        }

        #[test]
        fn quaternions_compute_the_coded_step(
            c in proptest::collection::vec(triple(4000), 3),
            largest in proptest::collection::vec(0u8..4, 3),
            same in any::<bool>(),
        ) {
            let config = QuatConfig::DEFAULT;
            let q = |which: usize, l: u8| QuantizedQuat {
                largest: l,
                components: std::array::from_fn(|k| {
                    let (a, b, z) = c[k];
                    [a, b, z][which]
                }),
            };
            // Mostly one largest component (the residual path), sometimes another
            // (the escape).
            let l = |i: usize| if same { largest[0] } else { largest[i] };
            agrees::<QuatSerializer>(&config, &q(0, l(0)), &q(1, l(1)), &q(2, l(2)))?;
        }

        #[test]
        fn rotators_compute_the_coded_step(
            c in proptest::collection::vec(triple(65535), 3),
            zeros in any::<u8>(),
        ) {
            // Zero angles in `y` (not sent in full: a shorter escape).
            let r = |which: usize| {
                let [x, y, z] = std::array::from_fn(|k| {
                    let (a, b, z) = c[k];
                    if which == 1 && zeros & (1 << k) != 0 { 0 } else { [a, b, z][which] }
                });
                let (x, y, z) = (x as u16, y as u16, z as u16);
                let flags = (x != 0) as u8 | ((y != 0) as u8) << 1 | ((z != 0) as u8) << 2;
                RotatorQuantized { xyz_is_not_zero: flags, x, y, z }
            };
            agrees::<RotatorSerializer>(&NoConfig, &r(0), &r(1), &r(2))?;
            let byte = |q: RotatorQuantized| {
                let (x, y, z) = ((q.x >> 8) as u8, (q.y >> 8) as u8, (q.z >> 8) as u8);
                let flags = (x != 0) as u8 | ((y != 0) as u8) << 1 | ((z != 0) as u8) << 2;
                RotatorByteQuantized { xyz_is_not_zero: flags, x, y, z }
            };
            agrees::<RotatorAsByteSerializer>(&NoConfig, &byte(r(0)), &byte(r(1)), &byte(r(2)))?;
        }

        #[test]
        fn integers_compute_the_coded_step(
            (x, y, z) in triple(127),
            (a, b, w) in triple(u16::MAX as u32),
            (p, q, r) in triple(4000),
        ) {
            let seven = IntConfig { bits: 7 };
            agrees::<U8Serializer>(&seven, &(x as u8), &(y as u8), &(z as u8))?;
            agrees::<I16Serializer>(&IntConfig::DEFAULT, &(a as u16), &(b as u16), &(w as u16))?;
            agrees::<U32Serializer>(&IntConfig::DEFAULT, &p, &q, &r)?;
            // A serializer delegating to another, with a check of its own.
            let (p, q, r) = (u64::from(p), u64::from(q), u64::from(r));
            agrees::<crate::serialize::UsizeSerializer>(&IntConfig::DEFAULT, &p, &q, &r)?;
        }
    }
}
