//! `bool` and the fixed-width integer serializers `u8`..`u64`, `i8`..`i64`.
//!
//! Encoding (Iris's `IntNetSerializers`), with `n` the configured bit count
//! (`bits`, default: the type's width):
//! - when `n >= 16`, a zero flag first: `[1]` for zero (1 bit in all), else `[0]`;
//! - then the value in `n` bits, LSB-first (so a 64-bit value goes low word first).
//!
//! `int32 Health = 100` costs 33 bits; `int32 Health = 0` costs 1 bit; `u8 Ammo = 30`
//! with 8 bits costs 8 bits. Quantizing clamps into the configured range; signed values
//! travel as two's complement in `n` bits and are sign-extended on read.
//!
//! Deltas use the residual code of [`super::delta`]: `[0][k selector][Exp-Golomb code of
//! the zigzagged difference]`, or `[1]` and the full encoding when that is not longer.

use super::{NetDefault, NetQuantize, NetSerializer, NetSerializerConfig, Result, StableHasher};
use crate::bits::{BitReader, BitWriter, sign_extend};

/// Configuration of the integer serializers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntConfig {
    /// Bits on the wire, `1..=width`; `0` (the default) means the type's full width.
    pub bits: u32,
}

impl IntConfig {
    /// The type's full width.
    pub const DEFAULT: IntConfig = IntConfig { bits: 0 };

    /// The effective bit count for a type `width` bits wide.
    #[inline]
    pub const fn effective_bits(&self, width: u32) -> u32 {
        if self.bits == 0 || self.bits > width {
            width
        } else {
            self.bits
        }
    }
}

impl IntConfig {
    /// The check `#[derive(Replicated)]` runs on a member's config at compile time:
    /// nothing beyond the per-type width, which the derive checks against
    /// [`NetQuantize::BITS`].
    pub const fn const_check(&self) -> std::result::Result<(), &'static str> {
        if self.bits > 64 {
            return Err("`bits` is wider than any integer (at most 64)");
        }
        Ok(())
    }
}

impl Default for IntConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for IntConfig {
    const DEFAULT: Self = IntConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.bits);
    }
}

/// The zero-flag threshold: integers of at least this many bits spend one bit to make
/// zero cost one bit.
pub const ZERO_VALUE_OPTIMIZATION_BITS: u32 = 16;

#[inline]
fn write_int(w: &mut BitWriter, value: u64, bits: u32) {
    if bits >= ZERO_VALUE_OPTIMIZATION_BITS && w.write_bool(value == 0) {
        return;
    }
    w.write_bits(value, bits);
}

#[inline]
fn read_int(r: &mut BitReader, bits: u32) -> Result<u64> {
    if bits >= ZERO_VALUE_OPTIMIZATION_BITS && r.read_bool() {
        r.check()?;
        return Ok(0);
    }
    let v = r.read_bits(bits);
    r.check()?;
    Ok(v)
}

fn check_bits(bits: u32, width: u32, ty: &str) -> std::result::Result<(), String> {
    if bits > width {
        Err(format!(
            "`bits = {bits}` does not fit in `{ty}` (at most {width})"
        ))
    } else {
        Ok(())
    }
}

/// An integer's two's-complement bit pattern, zero-extended from the type's width to
/// `u64`, and back (truncating): how the integer and packed serializers hand values to
/// the delta encoding.
pub(super) trait IntBits: Copy {
    /// The bit pattern of `self`.
    fn to_bits(self) -> u64;
    /// The value whose pattern is the low bits of `bits`.
    fn from_bits(bits: u64) -> Self;
}

macro_rules! int_bits {
    ($($ty:ty => $uty:ty),* $(,)?) => {
        $(impl IntBits for $ty {
            #[inline]
            fn to_bits(self) -> u64 {
                self as $uty as u64
            }
            #[inline]
            fn from_bits(bits: u64) -> Self {
                bits as $uty as $ty
            }
        })*
    };
}

int_bits!(
    u8 => u8, u16 => u16, u32 => u32, u64 => u64,
    i8 => u8, i16 => u16, i32 => u32, i64 => u64,
);

/// Bits [`write_int`] spends on `value` (`bits` wide).
#[inline]
pub(super) fn int_len(value: u64, bits: u32) -> u32 {
    if bits >= ZERO_VALUE_OPTIMIZATION_BITS {
        if value == 0 { 1 } else { bits + 1 }
    } else {
        bits
    }
}

/// Writes `q` as a residual against `prev` on their `bits`-wide bit patterns (see
/// [`super::delta`]), or the escape followed by `write_full` (`full_len` bits).
#[inline]
pub(super) fn write_bits_delta<T: IntBits>(
    w: &mut BitWriter,
    q: T,
    prev: T,
    bits: u32,
    full_len: u32,
    write_full: impl FnOnce(&mut BitWriter),
) {
    super::delta::write_scalar_residual(w, q.to_bits(), prev.to_bits(), bits, full_len, write_full);
}

/// Mirror of [`write_bits_delta`]; an error when the stream ran out or is invalid.
#[inline]
pub(super) fn read_bits_delta<T: IntBits>(
    r: &mut BitReader,
    prev: T,
    bits: u32,
    read_full: impl FnOnce(&mut BitReader) -> Result<u64>,
) -> Result<T> {
    let v = super::delta::read_scalar_residual(r, prev.to_bits(), bits, read_full)?;
    Ok(T::from_bits(v))
}

/// The methods the signed and unsigned serializers share: everything after quantizing
/// works on the quantized (unsigned) value in `config.effective_bits($width)` bits.
macro_rules! int_wire_methods {
    ($ty:ty, $q:ty, $width:expr) => {
        fn serialize(config: &IntConfig, q: &$q, w: &mut BitWriter) {
            write_int(w, *q as u64, config.effective_bits($width));
        }
        fn deserialize(config: &IntConfig, r: &mut BitReader) -> Result<$q> {
            Ok(read_int(r, config.effective_bits($width))? as $q)
        }
        fn serialize_delta(config: &IntConfig, q: &$q, prev: &$q, w: &mut BitWriter) {
            let bits = config.effective_bits($width);
            let v = *q as u64;
            write_bits_delta(w, *q, *prev, bits, int_len(v, bits), |w| {
                write_int(w, v, bits)
            });
        }
        fn deserialize_delta(config: &IntConfig, prev: &$q, r: &mut BitReader) -> Result<$q> {
            let bits = config.effective_bits($width);
            read_bits_delta(r, *prev, bits, |r| read_int(r, bits))
        }
        fn shift(config: &IntConfig, x: &$q, y: &$q, z: &$q) -> Result<$q> {
            let bits = config.effective_bits($width);
            let full_len = int_len(*y as u64, bits);
            let comps = [super::delta::Component::new(y.to_bits(), z.to_bits(), bits)];
            // The escape carries `y` in full, in its bits (`write_int`).
            let [v] = super::delta::shift_or_escape(&comps, full_len, [x.to_bits()]);
            let v = <$q>::from_bits(v);
            Self::validate(config, &v)?;
            Ok(v)
        }
        fn max_bits(config: &IntConfig) -> Option<u32> {
            let bits = config.effective_bits($width);
            Some(bits + (bits >= ZERO_VALUE_OPTIMIZATION_BITS) as u32)
        }
        fn validate_config(config: &IntConfig) -> std::result::Result<(), String> {
            check_bits(config.bits, $width, stringify!($ty))
        }
    };
}

macro_rules! unsigned_serializer {
    ($name:ident, $ty:ty, $width:expr, $label:literal) => {
        #[doc = concat!("`", stringify!($ty), "`: ", $label, " See the [module docs](self) for the encoding.")]
        ///
        /// ```
        /// use replicate::serialize::*;
        #[doc = concat!("let (bits, v) = roundtrip::<", stringify!($name), ">(&IntConfig::DEFAULT, &0).unwrap();")]
        #[doc = concat!("assert_eq!(v, 0);")]
        /// ```
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = $ty;
            type Config = IntConfig;
            const NAME: &'static str = stringify!($ty);

            fn quantize(config: &IntConfig, source: &$ty) -> $ty {
                let bits = config.effective_bits($width);
                let max = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
                (*source as u64).min(max) as $ty
            }
            fn dequantize(_: &IntConfig, q: &$ty) -> $ty {
                *q
            }
            int_wire_methods!($ty, $ty, $width);
        }

        impl NetDefault for $ty {
            type Serializer = $name;
        }

        impl NetQuantize for $ty {
            type Serializer = $name;
            const BITS: (u32, u32) = (1, $width);
        }
    };
}

macro_rules! signed_serializer {
    ($name:ident, $ty:ty, $uty:ty, $width:expr, $label:literal) => {
        #[doc = concat!("`", stringify!($ty), "`: ", $label, " See the [module docs](self) for the encoding.")]
        ///
        /// ```
        /// use replicate::serialize::*;
        #[doc = concat!("let (_, v) = roundtrip::<", stringify!($name), ">(&IntConfig { bits: 6 }, &-100).unwrap();")]
        /// assert_eq!(v, -32); // clamped to the 6-bit range -32..=31
        /// ```
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = $uty;
            type Config = IntConfig;
            const NAME: &'static str = stringify!($ty);

            fn quantize(config: &IntConfig, source: &$ty) -> $uty {
                let bits = config.effective_bits($width);
                let (lo, hi) = if bits >= 64 {
                    (i64::MIN, i64::MAX)
                } else {
                    (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
                };
                let v = (*source as i64).clamp(lo, hi) as u64;
                let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
                (v & mask) as $uty
            }
            fn dequantize(config: &IntConfig, q: &$uty) -> $ty {
                sign_extend(*q as u64, config.effective_bits($width)) as $ty
            }
            int_wire_methods!($ty, $uty, $width);
        }

        impl NetDefault for $ty {
            type Serializer = $name;
        }

        impl NetQuantize for $ty {
            type Serializer = $name;
            const BITS: (u32, u32) = (1, $width);
        }
    };
}

unsigned_serializer!(U8Serializer, u8, 8, "8 bits by default.");
unsigned_serializer!(U16Serializer, u16, 16, "zero flag plus 16 bits by default.");
unsigned_serializer!(U32Serializer, u32, 32, "zero flag plus 32 bits by default.");
unsigned_serializer!(
    U64Serializer,
    u64,
    64,
    "zero flag plus 64 bits (low word first) by default."
);
signed_serializer!(
    I8Serializer,
    i8,
    u8,
    8,
    "8 bits two's complement by default."
);
signed_serializer!(
    I16Serializer,
    i16,
    u16,
    16,
    "zero flag plus 16 bits by default."
);
signed_serializer!(
    I32Serializer,
    i32,
    u32,
    32,
    "zero flag plus 32 bits by default."
);
signed_serializer!(
    I64Serializer,
    i64,
    u64,
    64,
    "zero flag plus 64 bits by default."
);

/// `bool`: one bit. Its delta is the value itself (one bit), never more.
///
/// ```
/// use replicate::serialize::*;
/// assert_eq!(roundtrip::<BoolSerializer>(&NoConfig, &true).unwrap(), (1, true));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BoolSerializer;

impl NetSerializer for BoolSerializer {
    type Source = bool;
    type Quantized = bool;
    type Config = super::NoConfig;
    const NAME: &'static str = "bool";

    fn quantize(_: &super::NoConfig, source: &bool) -> bool {
        *source
    }
    fn dequantize(_: &super::NoConfig, q: &bool) -> bool {
        *q
    }
    fn serialize(_: &super::NoConfig, q: &bool, w: &mut BitWriter) {
        w.write_bool(*q);
    }
    fn deserialize(_: &super::NoConfig, r: &mut BitReader) -> Result<bool> {
        let v = r.read_bool();
        r.check()?;
        Ok(v)
    }
    fn serialize_delta(c: &super::NoConfig, q: &bool, _prev: &bool, w: &mut BitWriter) {
        Self::serialize(c, q, w)
    }
    fn deserialize_delta(c: &super::NoConfig, _prev: &bool, r: &mut BitReader) -> Result<bool> {
        Self::deserialize(c, r)
    }
    fn max_bits(_: &super::NoConfig) -> Option<u32> {
        Some(1)
    }
}

impl NetDefault for bool {
    type Serializer = BoolSerializer;
}

#[cfg(test)]
mod tests {
    use super::super::roundtrip;
    use super::*;

    #[test]
    fn iris_bit_counts() {
        assert_eq!(
            roundtrip::<I32Serializer>(&IntConfig::DEFAULT, &0).unwrap(),
            (1, 0)
        );
        assert_eq!(
            roundtrip::<I32Serializer>(&IntConfig::DEFAULT, &100).unwrap(),
            (33, 100)
        );
        assert_eq!(
            roundtrip::<U8Serializer>(&IntConfig { bits: 8 }, &30).unwrap(),
            (8, 30)
        );
        assert_eq!(
            roundtrip::<U8Serializer>(&IntConfig { bits: 7 }, &200).unwrap(),
            (7, 127)
        );
        assert_eq!(
            roundtrip::<U64Serializer>(&IntConfig::DEFAULT, &u64::MAX).unwrap(),
            (65, u64::MAX)
        );
        assert_eq!(
            roundtrip::<I64Serializer>(&IntConfig::DEFAULT, &i64::MIN).unwrap(),
            (65, i64::MIN)
        );
        assert_eq!(
            roundtrip::<I16Serializer>(&IntConfig { bits: 12 }, &-5).unwrap(),
            (12, -5)
        );
    }

    #[test]
    fn sixty_four_bit_low_word_first() {
        let mut w = BitWriter::with_capacity_bits(128);
        U64Serializer::serialize(&IntConfig::DEFAULT, &0x1122_3344_5566_7788, &mut w);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert!(!r.read_bool());
        assert_eq!(r.read_bits(32), 0x5566_7788);
        assert_eq!(r.read_bits(32), 0x1122_3344);
    }

    #[test]
    fn config_validation() {
        assert!(U32Serializer::validate_config(&IntConfig { bits: 33 }).is_err());
        assert!(U32Serializer::validate_config(&IntConfig { bits: 32 }).is_ok());
    }
}
