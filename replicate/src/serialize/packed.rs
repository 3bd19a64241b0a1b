//! Packed (variable-length) integers, Iris's `PackedIntNetSerializers`: small values
//! cost few bits, large ones a little more than their width.
//!
//! This module owns the packed integer encodings only.
//!
//! # Encoding
//!
//! A byte count prefix, then the value in that many whole bytes (LSB-first):
//!
//! | type | prefix | payload | total |
//! |---|---|---|---|
//! | `u32` / `i32` | 2 bits: `bytes - 1` | 1–4 bytes | 10, 18, 26 or 34 bits |
//! | `u64` / `i64` | 3 bits: `bytes - 1` | 1–8 bytes | 11, 19, …, 67 bits |
//!
//! For 64-bit values we chose a 3-bit prefix with every byte count from 1 to 8 (rather
//! than 2 bits with 1/2/4/8 bytes): a value that needs 5 bytes costs 43 bits instead of
//! 66, at one extra bit for the smallest values.
//!
//! The byte count is the fewest whole bytes that hold the value: for unsigned values its
//! significant bits (0 counts as 1 bit), for signed values its significant bits **plus
//! the sign bit**, so `-128..=127` fits one byte and `128` needs two. Signed values are
//! sent as two's complement in those bytes and sign-extended on read with Iris's
//! branch-free `(v ^ m) - m`, `m = 1 << (bits - 1)`.
//!
//! Iris's numbers: `5` → `[00][00000101]` (10 bits); `1000` → 18 bits; `100000` → 26
//! bits; `10^9` → 34 bits; `-1` → 10 bits.
//!
//! A receiver accepts a value sent in more bytes than needed (it decodes to the same
//! value); every prefix is valid, so only a truncated stream is an error.
//!
//! # Delta
//!
//! The residual code of [`super::delta`] on the value's 32- or 64-bit pattern: a
//! difference of 0 / 5 / 4000 / 999000 costs 4 / 8 / 19 / 27 bits for the 32-bit types
//! (`[0][k selector][Exp-Golomb code]`); when the packed full encoding is not longer,
//! `[1]` and the full encoding (never more than its length plus one bit).
//!
//! These are not the `NetDefault` for any type; opt in per member:
//! `#[net(serializer = PackedU32Serializer)] score: u32`.

use super::ints::{IntBits, read_bits_delta, write_bits_delta};
use super::{NetSerializer, NoConfig, Result};
use crate::bits::{BitReader, BitWriter, bits_needed, sign_extend};

/// Bits a signed value needs in two's complement, sign bit included (at least 1).
#[inline]
fn signed_bits_needed(v: i64) -> u32 {
    // v for v >= 0, !v for v < 0: both are the magnitude bits without the sign.
    let magnitude = (v ^ (v >> 63)) as u64;
    (64 - magnitude.leading_zeros()) + 1
}

#[inline]
fn write_packed(w: &mut BitWriter, raw: u64, significant_bits: u32, prefix_bits: u32) {
    let bytes = significant_bits.div_ceil(8).max(1);
    w.write_bits((bytes - 1) as u64, prefix_bits);
    w.write_bits(raw, bytes * 8);
}

/// Reads the prefix and payload; returns the raw payload and its width in bits.
#[inline]
fn read_packed(r: &mut BitReader, prefix_bits: u32) -> Result<(u64, u32)> {
    let bytes = r.read_bits(prefix_bits) as u32 + 1;
    let raw = r.read_bits(bytes * 8);
    r.check()?;
    Ok((raw, bytes * 8))
}

/// What the packed serializers need of their integer type beyond its bit pattern.
trait PackedInt: IntBits {
    /// The value as it goes into the payload (its low `8 * bytes` bits are written).
    fn payload(self) -> u64;
    /// Bits the value needs (a signed value's sign bit included).
    fn significant_bits(self) -> u32;
    /// The value of a payload `bits` wide.
    fn from_payload(raw: u64, bits: u32) -> Self;
}

macro_rules! packed_int {
    (unsigned $($ty:ty),*) => {
        $(impl PackedInt for $ty {
            #[inline]
            fn payload(self) -> u64 {
                self as u64
            }
            #[inline]
            fn significant_bits(self) -> u32 {
                bits_needed(self as u64)
            }
            #[inline]
            fn from_payload(raw: u64, _: u32) -> Self {
                raw as $ty
            }
        })*
    };
    (signed $($ty:ty),*) => {
        $(impl PackedInt for $ty {
            #[inline]
            fn payload(self) -> u64 {
                self as i64 as u64
            }
            #[inline]
            fn significant_bits(self) -> u32 {
                signed_bits_needed(self as i64)
            }
            #[inline]
            fn from_payload(raw: u64, bits: u32) -> Self {
                sign_extend(raw, bits) as $ty
            }
        })*
    };
}

packed_int!(unsigned u32, u64);
packed_int!(signed i32, i64);

/// A packed serializer for `$ty`: `$prefix` bits of byte count, payload, deltas on the
/// `$width`-bit pattern.
macro_rules! packed_serializer {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $width:expr, $prefix:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = $ty;
            type Config = NoConfig;
            const NAME: &'static str = stringify!($name);

            fn quantize(_: &NoConfig, source: &$ty) -> $ty {
                *source
            }
            fn dequantize(_: &NoConfig, q: &$ty) -> $ty {
                *q
            }
            fn serialize(_: &NoConfig, q: &$ty, w: &mut BitWriter) {
                write_packed(w, q.payload(), q.significant_bits(), $prefix);
            }
            fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<$ty> {
                let (raw, bits) = read_packed(r, $prefix)?;
                Ok(<$ty>::from_payload(raw, bits))
            }
            fn serialize_delta(_: &NoConfig, q: &$ty, prev: &$ty, w: &mut BitWriter) {
                let full_len = $prefix + 8 * q.significant_bits().div_ceil(8).max(1);
                write_bits_delta(w, *q, *prev, $width, full_len, |w| {
                    write_packed(w, q.payload(), q.significant_bits(), $prefix)
                });
            }
            fn deserialize_delta(_: &NoConfig, prev: &$ty, r: &mut BitReader) -> Result<$ty> {
                read_bits_delta(r, *prev, $width, |r| {
                    let (raw, bits) = read_packed(r, $prefix)?;
                    Ok(<$ty>::from_payload(raw, bits).to_bits())
                })
            }
            fn max_bits(_: &NoConfig) -> Option<u32> {
                Some($prefix + $width)
            }
        }
    };
}

packed_serializer!(
    /// `u32` packed: `[2-bit byte count - 1][1–4 bytes]`, 10 to 34 bits; see the
    /// [module docs](self).
    ///
    /// ```
    /// use replicate::serialize::*;
    /// assert_eq!(roundtrip::<PackedU32Serializer>(&NoConfig, &5).unwrap(), (10, 5));
    /// assert_eq!(roundtrip::<PackedU32Serializer>(&NoConfig, &1000).unwrap(), (18, 1000));
    /// assert_eq!(roundtrip::<PackedU32Serializer>(&NoConfig, &1_000_000_000).unwrap(), (34, 1_000_000_000));
    /// ```
    PackedU32Serializer,
    u32,
    32,
    2
);
packed_serializer!(
    /// `u64` packed: `[3-bit byte count - 1][1–8 bytes]`, 11 to 67 bits; see the
    /// [module docs](self).
    ///
    /// ```
    /// use replicate::serialize::*;
    /// assert_eq!(roundtrip::<PackedU64Serializer>(&NoConfig, &5).unwrap(), (11, 5));
    /// assert_eq!(roundtrip::<PackedU64Serializer>(&NoConfig, &u64::MAX).unwrap(), (67, u64::MAX));
    /// ```
    PackedU64Serializer,
    u64,
    64,
    3
);
packed_serializer!(
    /// `i32` packed: `[2-bit byte count - 1][1–4 bytes two's complement]`, 10 to 34 bits;
    /// the byte count includes the sign bit. See the [module docs](self).
    ///
    /// ```
    /// use replicate::serialize::*;
    /// assert_eq!(roundtrip::<PackedI32Serializer>(&NoConfig, &-1).unwrap(), (10, -1));
    /// assert_eq!(roundtrip::<PackedI32Serializer>(&NoConfig, &127).unwrap(), (10, 127));
    /// assert_eq!(roundtrip::<PackedI32Serializer>(&NoConfig, &128).unwrap(), (18, 128));
    /// assert_eq!(roundtrip::<PackedI32Serializer>(&NoConfig, &i32::MIN).unwrap(), (34, i32::MIN));
    /// ```
    PackedI32Serializer,
    i32,
    32,
    2
);
packed_serializer!(
    /// `i64` packed: `[3-bit byte count - 1][1–8 bytes two's complement]`, 11 to 67 bits;
    /// the byte count includes the sign bit. See the [module docs](self).
    ///
    /// ```
    /// use replicate::serialize::*;
    /// assert_eq!(roundtrip::<PackedI64Serializer>(&NoConfig, &-1).unwrap(), (11, -1));
    /// assert_eq!(roundtrip::<PackedI64Serializer>(&NoConfig, &i64::MIN).unwrap(), (67, i64::MIN));
    /// ```
    PackedI64Serializer,
    i64,
    64,
    3
);

#[cfg(test)]
mod tests {
    use super::super::roundtrip;
    use super::*;

    fn wire<S: NetSerializer<Config = NoConfig>>(q: S::Quantized) -> (usize, Vec<u8>) {
        let mut w = BitWriter::with_capacity_bits(128);
        S::serialize(&NoConfig, &q, &mut w);
        (w.position(), w.finish().unwrap())
    }

    fn delta_cost<S: NetSerializer<Config = NoConfig>>(
        q: S::Quantized,
        prev: S::Quantized,
    ) -> usize {
        let mut w = BitWriter::with_capacity_bits(128);
        S::serialize_delta(&NoConfig, &q, &prev, &mut w);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, w.position());
        assert_eq!(S::deserialize_delta(&NoConfig, &prev, &mut r).unwrap(), q);
        assert_eq!(r.bits_left(), 0);
        w.position()
    }

    #[test]
    fn iris_packed_sizes() {
        let u = |v: u32| roundtrip::<PackedU32Serializer>(&NoConfig, &v).unwrap();
        let i = |v: i32| roundtrip::<PackedI32Serializer>(&NoConfig, &v).unwrap();
        assert_eq!(u(5), (10, 5));
        assert_eq!(u(1000), (18, 1000));
        assert_eq!(u(100_000), (26, 100_000));
        assert_eq!(u(1_000_000_000), (34, 1_000_000_000));
        assert_eq!(u(0), (10, 0));
        assert_eq!(u(255), (10, 255));
        assert_eq!(u(256), (18, 256));
        assert_eq!(i(5), (10, 5));
        assert_eq!(i(1000), (18, 1000));
        assert_eq!(i(100_000), (26, 100_000));
        assert_eq!(i(1_000_000_000), (34, 1_000_000_000));
        assert_eq!(i(-1), (10, -1));
        // The signed table's boundaries.
        for (v, bits) in [
            (-128, 10),
            (127, 10),
            (-129, 18),
            (128, 18),
            (-32768, 18),
            (32767, 18),
            (32768, 26),
            (-8_388_608, 26),
            (8_388_607, 26),
            (8_388_608, 34),
            (i32::MAX, 34),
        ] {
            assert_eq!(i(v), (bits, v), "{v}");
        }
    }

    #[test]
    fn iris_bit_patterns() {
        // 5 -> [00][00000101], LSB-first: prefix bits 0,0 then 5.
        let (bits, bytes) = wire::<PackedU32Serializer>(5);
        assert_eq!(bits, 10);
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(2), 0b00);
        assert_eq!(r.read_bits(8), 5);
        // 1000 -> [01][0000001111101000]
        let (_, bytes) = wire::<PackedU32Serializer>(1000);
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(2), 0b01);
        assert_eq!(r.read_bits(16), 1000);
        // -1 -> [00][11111111], restored by (v ^ m) - m.
        let (_, bytes) = wire::<PackedI32Serializer>(-1);
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(2), 0);
        assert_eq!(r.read_bits(8), 0xFF);
    }

    #[test]
    fn sixty_four_bit_sizes() {
        let u = |v: u64| roundtrip::<PackedU64Serializer>(&NoConfig, &v).unwrap().0;
        let i = |v: i64| roundtrip::<PackedI64Serializer>(&NoConfig, &v).unwrap().0;
        for bytes in 1..=8u32 {
            let largest = if bytes == 8 {
                u64::MAX
            } else {
                (1u64 << (bytes * 8)) - 1
            };
            assert_eq!(u(largest), 3 + 8 * bytes as usize);
            let largest_signed = (largest >> 1) as i64;
            assert_eq!(i(largest_signed), 3 + 8 * bytes as usize);
            assert_eq!(i(-largest_signed - 1), 3 + 8 * bytes as usize);
        }
        assert_eq!(u(1 << 32), 43);
    }

    #[test]
    fn residual_delta_costs() {
        let costs = [
            delta_cost::<PackedI32Serializer>(1000, 1000),
            delta_cost::<PackedI32Serializer>(1005, 1000),
            delta_cost::<PackedI32Serializer>(5000, 1000),
            delta_cost::<PackedI32Serializer>(1_000_000, 1000),
            delta_cost::<PackedU32Serializer>(1005, 1000),
            delta_cost::<PackedU32Serializer>(995, 1000),
            delta_cost::<PackedI32Serializer>(i32::MIN, i32::MAX),
            delta_cost::<PackedI64Serializer>(1000, 1000),
            delta_cost::<PackedI64Serializer>(5000, 1000),
            delta_cost::<PackedI64Serializer>(1_000_000, 1000),
            delta_cost::<PackedU64Serializer>(1 << 40, 0),
            delta_cost::<PackedU64Serializer>(0, u64::MAX),
        ];
        // Unchanged, +5, +4000, +999000; the same unsigned, -5; wrapping by one;
        // 64-bit: unchanged, +4000, +999000, a 41-bit jump (the escape: 51 + 1), wrapping.
        assert_eq!(costs, [4, 8, 19, 27, 8, 8, 6, 4, 20, 28, 52, 6]);
    }

    #[test]
    fn over_long_encodings_decode_to_the_same_value() {
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bits(3, 2);
        w.write_bits(0xFFFF_FFFF, 32);
        let bytes = w.finish().unwrap();
        assert_eq!(
            PackedI32Serializer::deserialize(&NoConfig, &mut BitReader::new(&bytes)).unwrap(),
            -1
        );
        assert_eq!(
            PackedU32Serializer::deserialize(&NoConfig, &mut BitReader::new(&bytes)).unwrap(),
            u32::MAX
        );
    }

    #[test]
    fn truncated_payload_is_an_error() {
        let (bits, bytes) = wire::<PackedU32Serializer>(1_000_000_000);
        for cut in 0..bits {
            let mut r = BitReader::with_bit_len(&bytes, cut);
            assert!(
                PackedU32Serializer::deserialize(&NoConfig, &mut r).is_err(),
                "cut {cut}"
            );
        }
    }
}
