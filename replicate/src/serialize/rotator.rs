//! Rotations as three angles: the [`Rotator`] type and its serializers,
//! [`RotatorSerializer`] (16 bits per angle, the `NetDefault`) and
//! [`RotatorAsByteSerializer`] (8 bits per angle), Iris's `RotatorNetSerializers`.
//!
//! This module owns the angle quantization and the rotator wire encodings only.
//!
//! # Quantization
//!
//! Each angle (degrees) is reduced modulo 360 (keeping its sign, so the result is in
//! `(-360, 360)`), scaled by `65536 / 360`, truncated toward zero and masked to 16 bits:
//! `((angle % 360 * 65536 / 360) as i32) & 0xFFFF` (the byte variant uses `256 / 360`
//! and `0xFF`). One step is `360 / 65536 ≈ 0.0055°` (`≈ 1.41°` for bytes). The scaling
//! runs in `f64` as `* 8192 / 45`, so every dequantized angle (`q * 45 / 8192` degrees,
//! exact in `f32`, in `[0, 360)`) quantizes back to the same `q`. Non-finite angles
//! quantize to 0. Iris's overview quotes pitch 45.5° as 8282; this formula gives
//! 8283 (`45.5 * 65536 / 360 = 8283.02`), which is what we send.
//!
//! The quantized value keeps a 3-bit "is not zero" mask next to the components:
//! bit 0 = X = pitch, bit 1 = Y = yaw, bit 2 = Z = roll.
//!
//! # Wire
//!
//! `[3 flag bits]` then, for each set flag in the order pitch, yaw, roll, the component
//! in 16 bits (8 for bytes): 3 / 19 / 35 / 51 bits (3 / 11 / 19 / 27 for bytes).
//! `(0, 90, 0)` → `[010][0100000000000000]`, 19 bits. A flag set for a component that
//! reads as zero is rejected (no sender produces it).
//!
//! # Delta
//!
//! The three angles through the residual code of [`super::delta`] on their 16-bit (8-bit)
//! wrapping differences: `[0][k selector: 2][three Exp-Golomb codes]`, or `[1]` and the
//! full encoding when that is not longer (never more than the full encoding plus one
//! bit). 359.99° → 0.01° in yaw is a difference of +3 steps, 10 bits; yaw 90° → 95°
//! (910 steps) takes the escape, `[1][010][0100001110001110]`, 20 bits; an unchanged
//! rotator costs 6 bits.

use super::delta::{Component, read_residuals, shift_residuals, write_residuals};
use super::shift::shift_by_code;
use super::{NetDefault, NetSerializer, NoConfig, Result, SerializeError};
use crate::bits::{BitReader, BitWriter};

/// A rotation as pitch (X), yaw (Y) and roll (Z) angles in **degrees**, like Unreal's
/// `FRotator`. Any angle is accepted; the serializers reduce it modulo 360.
///
/// ```
/// use replicate::serialize::*;
/// let r = Rotator::new(0.0, 90.0, 0.0);
/// assert_eq!(roundtrip::<RotatorSerializer>(&NoConfig, &r).unwrap(), (19, r));
/// // Negative angles come back in [0, 360).
/// let (_, back) = roundtrip::<RotatorSerializer>(&NoConfig, &Rotator::new(-90.0, 0.0, 0.0)).unwrap();
/// assert_eq!(back.pitch, 270.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rotator {
    /// Rotation about the right axis (nose up/down), degrees.
    pub pitch: f32,
    /// Rotation about the up axis (heading), degrees.
    pub yaw: f32,
    /// Rotation about the forward axis (bank), degrees.
    pub roll: f32,
}

impl Rotator {
    /// A rotator from pitch, yaw and roll in degrees.
    pub const fn new(pitch: f32, yaw: f32, roll: f32) -> Self {
        Self { pitch, yaw, roll }
    }

    /// No rotation.
    pub const ZERO: Rotator = Rotator::new(0.0, 0.0, 0.0);
}

/// Quantized [`Rotator`] for [`RotatorSerializer`]: 16 bits per angle plus the
/// "is not zero" mask (bit 0 pitch, bit 1 yaw, bit 2 roll), always consistent with the
/// components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RotatorQuantized {
    /// Bit `k` set iff component `k` is non-zero (0 = pitch, 1 = yaw, 2 = roll).
    pub xyz_is_not_zero: u8,
    /// Pitch in 65536ths of a turn.
    pub x: u16,
    /// Yaw in 65536ths of a turn.
    pub y: u16,
    /// Roll in 65536ths of a turn.
    pub z: u16,
}

/// Quantized [`Rotator`] for [`RotatorAsByteSerializer`]: 8 bits per angle plus the
/// "is not zero" mask (bit 0 pitch, bit 1 yaw, bit 2 roll).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RotatorByteQuantized {
    /// Bit `k` set iff component `k` is non-zero (0 = pitch, 1 = yaw, 2 = roll).
    pub xyz_is_not_zero: u8,
    /// Pitch in 256ths of a turn.
    pub x: u8,
    /// Yaw in 256ths of a turn.
    pub y: u8,
    /// Roll in 256ths of a turn.
    pub z: u8,
}

/// `((angle % 360 * 65536 / 360) as i32) & 0xFFFF`, computed as `* 8192 / 45` in `f64`.
#[inline]
pub fn compress_axis_to_short(angle: f32) -> u16 {
    let a = (angle as f64) % 360.0;
    // NaN and infinities give NaN here, which `as` turns into 0.
    ((a * 8192.0 / 45.0) as i32 & 0xFFFF) as u16
}

/// `q * 360 / 65536` degrees, exact in `f32`, in `[0, 360)`.
#[inline]
pub fn decompress_axis_from_short(q: u16) -> f32 {
    q as f32 * 45.0 / 8192.0
}

/// `((angle % 360 * 256 / 360) as i32) & 0xFF`, computed as `* 32 / 45` in `f64`.
#[inline]
pub fn compress_axis_to_byte(angle: f32) -> u8 {
    let a = (angle as f64) % 360.0;
    ((a * 32.0 / 45.0) as i32 & 0xFF) as u8
}

/// `q * 360 / 256` degrees, exact in `f32`, in `[0, 360)`.
#[inline]
pub fn decompress_axis_from_byte(q: u8) -> f32 {
    q as f32 * 45.0 / 32.0
}

macro_rules! rotator_serializer {
    (
        $(#[$doc:meta])* $name:ident, $quantized:ident, $comp:ty, $bits:expr,
        $compress:ident, $decompress:ident, $label:literal
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl $name {
            fn flags(x: $comp, y: $comp, z: $comp) -> u8 {
                (x != 0) as u8 | ((y != 0) as u8) << 1 | ((z != 0) as u8) << 2
            }

            fn make(x: $comp, y: $comp, z: $comp) -> $quantized {
                $quantized { xyz_is_not_zero: Self::flags(x, y, z), x, y, z }
            }

            /// Reads the components whose `flags` bit is set; each must be non-zero.
            fn read_flagged(r: &mut BitReader, flags: u8, what: &'static str) -> Result<[$comp; 3]> {
                let mut out: [$comp; 3] = [0; 3];
                for (k, slot) in out.iter_mut().enumerate() {
                    if flags & (1 << k) != 0 {
                        *slot = r.read_bits($bits) as $comp;
                    }
                }
                r.check()?;
                for (k, v) in out.iter().enumerate() {
                    if flags & (1 << k) != 0 && *v == 0 {
                        return Err(SerializeError::invalid($label, what));
                    }
                }
                Ok(out)
            }
        }

        impl NetSerializer for $name {
            type Source = Rotator;
            type Quantized = $quantized;
            type Config = NoConfig;
            const NAME: &'static str = $label;

            fn quantize(_: &NoConfig, source: &Rotator) -> $quantized {
                Self::make($compress(source.pitch), $compress(source.yaw), $compress(source.roll))
            }

            fn dequantize(_: &NoConfig, q: &$quantized) -> Rotator {
                Rotator::new($decompress(q.x), $decompress(q.y), $decompress(q.z))
            }

            fn serialize(_: &NoConfig, q: &$quantized, w: &mut BitWriter) {
                // Derived from the components, so a hand-built inconsistent value still
                // writes what `deserialize` accepts.
                let flags = Self::flags(q.x, q.y, q.z);
                w.write_bits(flags as u64, 3);
                for (k, v) in [q.x, q.y, q.z].into_iter().enumerate() {
                    if flags & (1 << k) != 0 {
                        w.write_bits(v as u64, $bits);
                    }
                }
            }

            fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<$quantized> {
                let flags = r.read_bits(3) as u8;
                let [x, y, z] = Self::read_flagged(r, flags, "component flagged non-zero is zero")?;
                Ok(Self::make(x, y, z))
            }

            fn serialize_delta(c: &NoConfig, q: &$quantized, prev: &$quantized, w: &mut BitWriter) {
                let comps = [(q.x, prev.x), (q.y, prev.y), (q.z, prev.z)]
                    .map(|(v, p)| Component::new(v as u64, p as u64, $bits));
                let full_len = 3 + $bits * Self::flags(q.x, q.y, q.z).count_ones();
                if write_residuals(w, &comps, full_len) {
                    Self::serialize(c, q, w);
                }
            }

            fn deserialize_delta(c: &NoConfig, prev: &$quantized, r: &mut BitReader) -> Result<$quantized> {
                let mut comps = [prev.x, prev.y, prev.z].map(|p| Component::new(0, p as u64, $bits));
                if read_residuals(r, &mut comps)? {
                    return Self::deserialize(c, r);
                }
                let [x, y, z] = comps.map(|c| c.value as $comp);
                Ok(Self::make(x, y, z))
            }

            fn validate(_: &NoConfig, q: &$quantized) -> Result<()> {
                if q.xyz_is_not_zero != Self::flags(q.x, q.y, q.z) {
                    return Err(SerializeError::invalid($label, "not-zero flags disagree with the components"));
                }
                Ok(())
            }

            fn max_bits(_: &NoConfig) -> Option<u32> {
                Some(3 + 3 * $bits)
            }

            fn shift(c: &NoConfig, x: &$quantized, y: &$quantized, z: &$quantized) -> Result<$quantized> {
                let comps = [(y.x, z.x), (y.y, z.y), (y.z, z.z)]
                    .map(|(v, p)| Component::new(v as u64, p as u64, $bits));
                let full_len = 3 + $bits * Self::flags(y.x, y.y, y.z).count_ones();
                match shift_residuals(&comps, full_len, [x.x as u64, x.y as u64, x.z as u64]) {
                    Some(moved) => {
                        let [a, b, d] = moved.map(|v| v as $comp);
                        let q = Self::make(a, b, d);
                        Self::validate(c, &q)?;
                        Ok(q)
                    }
                    // The escape: `y` in full (its not-zero flags and their angles).
                    None => shift_by_code::<Self>(c, x, y, z),
                }
            }
        }
    };
}

rotator_serializer!(
    /// [`Rotator`] at 16 bits per angle (`≈ 0.0055°`): `[3 not-zero flags][16 bits per
    /// non-zero angle]`, 3 to 51 bits; delta: residuals of the 16-bit wrapping
    /// differences, at most the full encoding plus one bit. The `NetDefault` for [`Rotator`]. See the
    /// [module docs](self).
    ///
    /// ```
    /// use replicate::serialize::*;
    /// let q = RotatorSerializer::quantize(&NoConfig, &Rotator::new(45.5, 90.0, 0.0));
    /// assert_eq!((q.x, q.y, q.z, q.xyz_is_not_zero), (8283, 16384, 0, 0b011));
    /// assert_eq!(roundtrip::<RotatorSerializer>(&NoConfig, &Rotator::ZERO).unwrap().0, 3);
    /// assert_eq!(roundtrip::<RotatorSerializer>(&NoConfig, &Rotator::new(45.5, 90.0, 0.0)).unwrap().0, 35);
    /// ```
    RotatorSerializer,
    RotatorQuantized,
    u16,
    16,
    compress_axis_to_short,
    decompress_axis_from_short,
    "Rotator"
);

rotator_serializer!(
    /// [`Rotator`] at 8 bits per angle (`≈ 1.41°`), for low-precision cases such as
    /// NPCs: `[3 not-zero flags][8 bits per non-zero angle]`, 3 to 27 bits; delta:
    /// residuals of the 8-bit wrapping differences, at most the full encoding plus one bit. See the
    /// [module docs](self).
    ///
    /// ```
    /// use replicate::serialize::*;
    /// let (bits, r) = roundtrip::<RotatorAsByteSerializer>(&NoConfig, &Rotator::new(0.0, 90.0, 0.0)).unwrap();
    /// assert_eq!((bits, r), (11, Rotator::new(0.0, 90.0, 0.0)));
    /// let (bits, r) = roundtrip::<RotatorAsByteSerializer>(&NoConfig, &Rotator::new(10.0, 20.0, 30.0)).unwrap();
    /// assert_eq!(bits, 27);
    /// assert!((r.yaw - 20.0).abs() < 1.41);
    /// ```
    RotatorAsByteSerializer,
    RotatorByteQuantized,
    u8,
    8,
    compress_axis_to_byte,
    decompress_axis_from_byte,
    "RotatorAsByte"
);

impl NetDefault for Rotator {
    type Serializer = RotatorSerializer;
}

#[cfg(test)]
mod tests {
    use super::super::roundtrip;
    use super::*;

    fn delta_bits<S: NetSerializer<Config = NoConfig, Source = Rotator>>(
        from: Rotator,
        to: Rotator,
    ) -> (usize, Vec<u8>) {
        let prev = S::quantize(&NoConfig, &from);
        let q = S::quantize(&NoConfig, &to);
        let mut w = BitWriter::with_capacity_bits(128);
        S::serialize_delta(&NoConfig, &q, &prev, &mut w);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, w.position());
        assert_eq!(S::deserialize_delta(&NoConfig, &prev, &mut r).unwrap(), q);
        assert_eq!(r.bits_left(), 0);
        (w.position(), bytes)
    }

    #[test]
    fn iris_rotator_sizes() {
        let bits = |p, y, r| {
            roundtrip::<RotatorSerializer>(&NoConfig, &Rotator::new(p, y, r))
                .unwrap()
                .0
        };
        assert_eq!(bits(0.0, 0.0, 0.0), 3);
        assert_eq!(bits(0.0, 90.0, 0.0), 19);
        assert_eq!(bits(45.5, 90.0, 0.0), 35);
        assert_eq!(bits(45.0, 90.0, 30.0), 51);
        let byte_bits = |p, y, r| {
            roundtrip::<RotatorAsByteSerializer>(&NoConfig, &Rotator::new(p, y, r))
                .unwrap()
                .0
        };
        assert_eq!(byte_bits(0.0, 0.0, 0.0), 3);
        assert_eq!(byte_bits(45.0, 90.0, 30.0), 27);
    }

    #[test]
    fn iris_bit_pattern_for_yaw_90() {
        let q = RotatorSerializer::quantize(&NoConfig, &Rotator::new(0.0, 90.0, 0.0));
        assert_eq!(
            q,
            RotatorQuantized {
                xyz_is_not_zero: 0b010,
                x: 0,
                y: 16384,
                z: 0
            }
        );
        let mut w = BitWriter::with_capacity_bits(64);
        RotatorSerializer::serialize(&NoConfig, &q, &mut w);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(3), 0b010);
        assert_eq!(r.read_bits(16), 16384);
    }

    #[test]
    fn iris_rotator_delta() {
        let (bits, bytes) = delta_bits::<RotatorSerializer>(
            Rotator::new(0.0, 90.0, 0.0),
            Rotator::new(0.0, 95.0, 0.0),
        );
        assert_eq!(bits, 20, "910 steps: the escape");
        let mut r = BitReader::new(&bytes);
        assert!(r.read_bool());
        assert_eq!(r.read_bits(3), 0b010);
        assert_eq!(r.read_bits(16), 17294);
        let same = Rotator::new(12.0, 34.0, 56.0);
        assert_eq!(delta_bits::<RotatorSerializer>(same, same).0, 6);
        assert_eq!(delta_bits::<RotatorAsByteSerializer>(same, same).0, 6);
        // Wrapping: 359.99° -> 0.01° is a small positive difference.
        assert_eq!(
            delta_bits::<RotatorSerializer>(
                Rotator::new(0.0, 359.99, 0.0),
                Rotator::new(0.0, 0.01, 0.0)
            )
            .0,
            10
        );
        assert_eq!(
            delta_bits::<RotatorAsByteSerializer>(
                Rotator::new(1.0, 2.0, 3.0),
                Rotator::new(100.0, 200.0, 300.0)
            )
            .0,
            28
        );
    }

    #[test]
    fn normalisation() {
        assert_eq!(compress_axis_to_short(90.0), 16384);
        assert_eq!(compress_axis_to_short(450.0), 16384);
        assert_eq!(compress_axis_to_short(-270.0), 16384);
        assert_eq!(compress_axis_to_short(-90.0), 49152);
        assert_eq!(compress_axis_to_short(360.0), 0);
        assert_eq!(compress_axis_to_short(-0.001), 0);
        assert_eq!(compress_axis_to_short(f32::NAN), 0);
        assert_eq!(compress_axis_to_short(f32::INFINITY), 0);
        assert_eq!(
            compress_axis_to_short(f32::MAX),
            compress_axis_to_short(f32::MAX % 360.0)
        );
        assert_eq!(compress_axis_to_byte(90.0), 64);
        assert_eq!(compress_axis_to_byte(-90.0), 192);
        assert_eq!(decompress_axis_from_short(16384), 90.0);
        assert_eq!(decompress_axis_from_byte(64), 90.0);
    }

    #[test]
    fn every_short_and_byte_is_a_fixed_point() {
        for q in 0..=u16::MAX {
            assert_eq!(compress_axis_to_short(decompress_axis_from_short(q)), q);
        }
        for q in 0..=u8::MAX {
            assert_eq!(compress_axis_to_byte(decompress_axis_from_byte(q)), q);
        }
    }

    #[test]
    fn inconsistent_flags_are_rejected() {
        // Flag for pitch set, pitch value 0.
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bits(0b001, 3);
        w.write_bits(0, 16);
        let bytes = w.finish().unwrap();
        assert!(RotatorSerializer::deserialize(&NoConfig, &mut BitReader::new(&bytes)).is_err());
        // The same behind the delta's escape bit.
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bool(true);
        w.write_bits(0b001, 3);
        w.write_bits(0, 16);
        let bytes = w.finish().unwrap();
        assert!(
            RotatorSerializer::deserialize_delta(
                &NoConfig,
                &RotatorQuantized::default(),
                &mut BitReader::new(&bytes)
            )
            .is_err()
        );
        let bad = RotatorQuantized {
            xyz_is_not_zero: 0b100,
            x: 0,
            y: 0,
            z: 0,
        };
        assert!(RotatorSerializer::validate(&NoConfig, &bad).is_err());
        assert!(RotatorSerializer::validate(&NoConfig, &RotatorQuantized::default()).is_ok());
    }
}
