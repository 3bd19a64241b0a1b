//! Full-precision glam vectors and quaternions: [`Vec2F32Serializer`],
//! [`Vec3F32Serializer`], [`Vec4F32Serializer`], [`QuatF32Serializer`] and
//! [`TransformF32Serializer`], the `NetDefault` for `glam::Vec2`, `Vec3`, `Vec4`,
//! `Quat` and [`Transform`].
//!
//! An unannotated float member is lossless, whatever its shape: a `Vec3` arrives with
//! the same bits as an `f32`. Quantization is opt-in per member (`min`, `max`,
//! `precision`, `bits`, or an explicit serializer such as
//! [`Vec3Serializer`](super::Vec3Serializer) or
//! [`QuatSerializer`](super::QuatSerializer)).
//!
//! This module owns these four wire formats only.
//!
//! # Encoding
//!
//! Each component is encoded as by [`F32Serializer`]: `[0]` for
//! `+0.0` (1 bit), else `[1]` and the 32 raw IEEE-754 bits, components in `x, y, z(, w)`
//! order. `-0.0` is sent as `+0.0` and every NaN as the canonical quiet NaN; every other
//! value, including infinities and subnormals, arrives bit-exact. A quaternion is sent
//! as its four components as they are (not renormalised), so it too arrives bit-exact.
//!
//! Delta: per component, `[0]` unchanged, else `[1]` and the component's full encoding;
//! a move along one axis costs 2 bits for each unchanged axis.
//!
//! ```
//! use glam::{Quat, Vec3};
//! use replicate::serialize::*;
//! let v = Vec3::new(1.3, 2.7, -0.4);
//! let (bits, back) = roundtrip::<Vec3F32Serializer>(&NoConfig, &v).unwrap();
//! assert_eq!((bits, back), (3 * 33, v));
//! assert_eq!(roundtrip::<Vec3F32Serializer>(&NoConfig, &Vec3::ZERO).unwrap(), (3, Vec3::ZERO));
//! let q = Quat::from_rotation_y(1.0);
//! assert_eq!(roundtrip::<QuatF32Serializer>(&NoConfig, &q).unwrap().1, q);
//! ```

use glam::{Quat, Vec2, Vec3, Vec4};

use super::Transform;

use super::float::{F32Serializer, canonical_f32_bits};
use super::{NetDefault, NetSerializer, NoConfig, Result};
use crate::bits::{BitReader, BitWriter};

macro_rules! full_float_serializer {
    ($name:ident, $ty:ty, $n:literal, $label:literal) => {
        #[doc = concat!("`glam::", stringify!($ty), "` at full precision: ", $label)]
        /// Each component as [`F32Serializer`]; see the [module docs](self).
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = [u32; $n];
            type Config = NoConfig;
            const NAME: &'static str = concat!(stringify!($ty), "F32");

            fn quantize(_: &NoConfig, v: &$ty) -> [u32; $n] {
                v.to_array().map(|c| canonical_f32_bits(c.to_bits()))
            }
            fn dequantize(_: &NoConfig, q: &[u32; $n]) -> $ty {
                <$ty>::from_array(q.map(f32::from_bits))
            }
            fn serialize(c: &NoConfig, q: &[u32; $n], w: &mut BitWriter) {
                for v in q {
                    F32Serializer::serialize(c, v, w);
                }
            }
            fn deserialize(c: &NoConfig, r: &mut BitReader) -> Result<[u32; $n]> {
                let mut out = [0u32; $n];
                for v in &mut out {
                    *v = F32Serializer::deserialize(c, r)?;
                }
                Ok(out)
            }
            fn serialize_delta(c: &NoConfig, q: &[u32; $n], prev: &[u32; $n], w: &mut BitWriter) {
                for (v, p) in q.iter().zip(prev) {
                    if w.write_bool(canonical_f32_bits(*v) != canonical_f32_bits(*p)) {
                        F32Serializer::serialize(c, v, w);
                    }
                }
            }
            fn deserialize_delta(
                c: &NoConfig,
                prev: &[u32; $n],
                r: &mut BitReader,
            ) -> Result<[u32; $n]> {
                let mut out = *prev;
                for v in &mut out {
                    if r.read_bool() {
                        *v = F32Serializer::deserialize(c, r)?;
                    }
                }
                r.check()?;
                Ok(out)
            }
            fn is_equal(_: &NoConfig, a: &[u32; $n], b: &[u32; $n]) -> bool {
                a.iter()
                    .zip(b)
                    .all(|(a, b)| canonical_f32_bits(*a) == canonical_f32_bits(*b))
            }
            fn max_bits(_: &NoConfig) -> Option<u32> {
                Some($n * 33)
            }
        }

        impl NetDefault for $ty {
            type Serializer = $name;
        }
    };
}

full_float_serializer!(Vec2F32Serializer, Vec2, 2, "x then y, 2 to 66 bits.");
full_float_serializer!(Vec3F32Serializer, Vec3, 3, "x, y then z, 3 to 99 bits.");
full_float_serializer!(Vec4F32Serializer, Vec4, 4, "x, y, z then w, 4 to 132 bits.");
full_float_serializer!(QuatF32Serializer, Quat, 4, "x, y, z then w, 4 to 132 bits.");

/// [`Transform`] at full precision, the `NetDefault` for `Transform`: translation
/// ([`Vec3F32Serializer`]), rotation ([`QuatF32Serializer`]) and scale
/// ([`Vec3F32Serializer`]) in that order, each part delta-encoded on its own. The
/// quantizing [`TransformSerializer`](super::TransformSerializer) is opt-in with
/// `#[net(serializer = TransformSerializer)]`.
///
/// ```
/// use glam::{Quat, Vec3};
/// use replicate::serialize::*;
/// let t = Transform { translation: Vec3::new(1.3, 2.7, -0.4), rotation: Quat::from_rotation_x(0.3), scale: Vec3::ONE };
/// assert_eq!(roundtrip::<TransformF32Serializer>(&NoConfig, &t).unwrap().1, t);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TransformF32Serializer;

impl NetSerializer for TransformF32Serializer {
    type Source = Transform;
    type Quantized = ([u32; 3], [u32; 4], [u32; 3]);
    type Config = NoConfig;
    const NAME: &'static str = "TransformF32";

    fn quantize(c: &NoConfig, t: &Transform) -> Self::Quantized {
        (
            Vec3F32Serializer::quantize(c, &t.translation),
            QuatF32Serializer::quantize(c, &t.rotation),
            Vec3F32Serializer::quantize(c, &t.scale),
        )
    }
    fn dequantize(c: &NoConfig, q: &Self::Quantized) -> Transform {
        Transform {
            translation: Vec3F32Serializer::dequantize(c, &q.0),
            rotation: QuatF32Serializer::dequantize(c, &q.1),
            scale: Vec3F32Serializer::dequantize(c, &q.2),
        }
    }
    fn serialize(c: &NoConfig, q: &Self::Quantized, w: &mut BitWriter) {
        Vec3F32Serializer::serialize(c, &q.0, w);
        QuatF32Serializer::serialize(c, &q.1, w);
        Vec3F32Serializer::serialize(c, &q.2, w);
    }
    fn deserialize(c: &NoConfig, r: &mut BitReader) -> Result<Self::Quantized> {
        Ok((
            Vec3F32Serializer::deserialize(c, r)?,
            QuatF32Serializer::deserialize(c, r)?,
            Vec3F32Serializer::deserialize(c, r)?,
        ))
    }
    fn serialize_delta(
        c: &NoConfig,
        q: &Self::Quantized,
        prev: &Self::Quantized,
        w: &mut BitWriter,
    ) {
        Vec3F32Serializer::serialize_delta(c, &q.0, &prev.0, w);
        QuatF32Serializer::serialize_delta(c, &q.1, &prev.1, w);
        Vec3F32Serializer::serialize_delta(c, &q.2, &prev.2, w);
    }
    fn deserialize_delta(
        c: &NoConfig,
        prev: &Self::Quantized,
        r: &mut BitReader,
    ) -> Result<Self::Quantized> {
        Ok((
            Vec3F32Serializer::deserialize_delta(c, &prev.0, r)?,
            QuatF32Serializer::deserialize_delta(c, &prev.1, r)?,
            Vec3F32Serializer::deserialize_delta(c, &prev.2, r)?,
        ))
    }
    fn is_equal(c: &NoConfig, a: &Self::Quantized, b: &Self::Quantized) -> bool {
        Vec3F32Serializer::is_equal(c, &a.0, &b.0)
            && QuatF32Serializer::is_equal(c, &a.1, &b.1)
            && Vec3F32Serializer::is_equal(c, &a.2, &b.2)
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some((3 + 4 + 3) * 33)
    }
}

impl NetDefault for Transform {
    type Serializer = TransformF32Serializer;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::roundtrip;
    use proptest::prelude::*;

    fn bits_roundtrip<S: NetSerializer<Config = NoConfig>>(q: &S::Quantized) -> S::Quantized {
        let mut w = BitWriter::with_capacity_bits(256);
        S::serialize(&NoConfig, q, &mut w);
        let len = w.position();
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, len);
        let back = S::deserialize(&NoConfig, &mut r).unwrap();
        assert_eq!(r.position(), len, "reads exactly the bits written");
        back
    }

    #[test]
    fn unannotated_values_are_exact() {
        let v = Vec3::new(1.3, 2.7, -0.4);
        assert_eq!(roundtrip::<Vec3F32Serializer>(&NoConfig, &v).unwrap().1, v);
        let q = Quat::from_xyzw(0.1, 0.2, 0.3, 0.9); // not normalised: still exact
        assert_eq!(roundtrip::<QuatF32Serializer>(&NoConfig, &q).unwrap().1, q);
        let v4 = Vec4::new(f32::INFINITY, f32::MIN_POSITIVE / 2.0, -1e30, 0.0);
        assert_eq!(
            roundtrip::<Vec4F32Serializer>(&NoConfig, &v4).unwrap().1,
            v4
        );
    }

    #[test]
    fn transform_is_exact_and_truncation_errors() {
        let t = Transform {
            translation: Vec3::new(1.3, 2.7, -0.4),
            rotation: Quat::from_xyzw(0.1, 0.2, 0.3, 0.9),
            scale: Vec3::new(0.5, 1.0, 2.0),
        };
        assert_eq!(
            roundtrip::<TransformF32Serializer>(&NoConfig, &t)
                .unwrap()
                .1,
            t
        );
        let q = TransformF32Serializer::quantize(&NoConfig, &t);
        let mut w = BitWriter::with_capacity_bits(512);
        TransformF32Serializer::serialize(&NoConfig, &q, &mut w);
        let len = w.position();
        let bytes = w.finish().unwrap();
        for cut in 0..len {
            let mut r = BitReader::with_bit_len(&bytes, cut);
            assert!(TransformF32Serializer::deserialize(&NoConfig, &mut r).is_err());
        }
        let prev = TransformF32Serializer::quantize(&NoConfig, &Transform::IDENTITY);
        let mut w = BitWriter::with_capacity_bits(512);
        TransformF32Serializer::serialize_delta(&NoConfig, &q, &prev, &mut w);
        let len = w.position();
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, len);
        assert_eq!(
            TransformF32Serializer::deserialize_delta(&NoConfig, &prev, &mut r).unwrap(),
            q
        );
    }

    #[test]
    fn negative_zero_and_nan_are_canonical() {
        let (bits, v) =
            roundtrip::<Vec2F32Serializer>(&NoConfig, &Vec2::new(-0.0, f32::NAN)).unwrap();
        assert_eq!(bits, 1 + 33);
        assert_eq!(v.x.to_bits(), 0);
        assert!(v.y.is_nan());
    }

    #[test]
    fn truncated_input_is_an_error() {
        let q = Vec3F32Serializer::quantize(&NoConfig, &Vec3::new(1.0, 2.0, 3.0));
        let mut w = BitWriter::with_capacity_bits(128);
        Vec3F32Serializer::serialize(&NoConfig, &q, &mut w);
        let len = w.position();
        let bytes = w.finish().unwrap();
        for cut in 0..len {
            let mut r = BitReader::with_bit_len(&bytes, cut);
            assert!(
                Vec3F32Serializer::deserialize(&NoConfig, &mut r).is_err(),
                "cut {cut}"
            );
        }
    }

    proptest! {
        #[test]
        fn roundtrip_is_bit_exact(x in any::<u32>(), y in any::<u32>(), z in any::<u32>(), w in any::<u32>()) {
            let v = Vec3::new(f32::from_bits(x), f32::from_bits(y), f32::from_bits(z));
            let q = Vec3F32Serializer::quantize(&NoConfig, &v);
            prop_assert_eq!(bits_roundtrip::<Vec3F32Serializer>(&q), q);
            // quantize(dequantize(q)) is a fixed point
            prop_assert_eq!(Vec3F32Serializer::quantize(&NoConfig, &Vec3F32Serializer::dequantize(&NoConfig, &q)), q);
            let quat = Quat::from_xyzw(f32::from_bits(x), f32::from_bits(y), f32::from_bits(z), f32::from_bits(w));
            let qq = QuatF32Serializer::quantize(&NoConfig, &quat);
            prop_assert_eq!(bits_roundtrip::<QuatF32Serializer>(&qq), qq);
        }

        #[test]
        fn delta_roundtrip(a in any::<[u32; 4]>(), b in any::<[u32; 4]>()) {
            let qa = Vec4F32Serializer::quantize(&NoConfig, &Vec4::from_array(a.map(f32::from_bits)));
            let qb = Vec4F32Serializer::quantize(&NoConfig, &Vec4::from_array(b.map(f32::from_bits)));
            let mut w = BitWriter::with_capacity_bits(512);
            Vec4F32Serializer::serialize_delta(&NoConfig, &qa, &qb, &mut w);
            let len = w.position();
            let bytes = w.finish().unwrap();
            let mut r = BitReader::with_bit_len(&bytes, len);
            prop_assert_eq!(Vec4F32Serializer::deserialize_delta(&NoConfig, &qb, &mut r).unwrap(), qa);
            prop_assert_eq!(r.position(), len);
        }

        #[test]
        fn random_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = Vec4F32Serializer::deserialize(&NoConfig, &mut BitReader::new(&bytes));
            let _ = QuatF32Serializer::deserialize_delta(&NoConfig, &[1, 2, 3, 4], &mut BitReader::new(&bytes));
        }
    }
}
