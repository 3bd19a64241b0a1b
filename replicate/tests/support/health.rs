//! A worked custom serializer: the second Health example of Iris's serializer
//! documentation (0..=100 at 1% precision), with its missing range check added.
//!
//! This module owns [`HealthSerializer`] only. Read it as a template for writing your
//! own serializer: a quantized type that is cheap to compare, a full encoding with a
//! zero shortcut, a delta encoding for slowly changing values, and a `deserialize` that
//! rejects anything `serialize` cannot produce.
//!
//! # Encoding
//!
//! Quantize: `clamp(health, 0, 100)` truncated to a `u8` (NaN becomes 0).
//!
//! | case | full | delta against `prev` |
//! |---|---|---|
//! | unchanged | — | `[0]`, 1 bit |
//! | zero | `[1]`, 1 bit | as any other change |
//! | 1..=100 | `[0][7 bits]`, 8 bits | — |
//! | change of -8..=7 | — | `[1][0][delta + 8 in 4 bits]`, 6 bits |
//! | larger change | — | `[1][1][value in 7 bits]`, 9 bits |
//!
//! (Iris's table says "2 bits" for a change to zero; by its own code that case costs
//! 6 or 9 bits like any other change, and that is what this implementation does.)
//!
//! # The range bug, fixed
//!
//! Iris's example `Deserialize` accepts any 7-bit value, so a malicious or corrupt packet can
//! set health to 127. Here `deserialize` and `deserialize_delta` return
//! [`SerializeError::InvalidValue`] for a value above 100 (including a small delta that
//! would leave `0..=100`).

use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::{NetSerializer, NoConfig, Result, SerializeError};

/// Health `0..=100` in whole points, as a custom-serializer example; see the
/// [module docs](self) for the encoding. Use it with
/// `#[net(serializer = HealthSerializer)] health: f32`.
///
/// ```
/// use replicate::bits::{BitReader, BitWriter};
/// use replicate::serialize::*;
/// assert_eq!(roundtrip::<HealthSerializer>(&NoConfig, &0.0).unwrap(), (1, 0.0));
/// assert_eq!(roundtrip::<HealthSerializer>(&NoConfig, &75.4).unwrap(), (8, 75.0));
/// assert_eq!(roundtrip::<HealthSerializer>(&NoConfig, &250.0).unwrap(), (8, 100.0));
///
/// // 75 -> 72 is a small change: 6 bits.
/// let mut w = BitWriter::with_capacity_bytes(4);
/// HealthSerializer::serialize_delta(&NoConfig, &72, &75, &mut w);
/// assert_eq!(w.position(), 6);
///
/// // 127 is not a health value: an error, not a cheat.
/// let mut w = BitWriter::with_capacity_bytes(4);
/// w.write_bool(false);
/// w.write_bits(127, 7);
/// let bytes = w.finish().unwrap();
/// assert!(HealthSerializer::deserialize(&NoConfig, &mut BitReader::new(&bytes)).is_err());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct HealthSerializer;

impl HealthSerializer {
    /// The largest health value.
    pub const MAX: u8 = 100;

    fn check(v: u64) -> Result<u8> {
        if v <= Self::MAX as u64 {
            Ok(v as u8)
        } else {
            Err(SerializeError::invalid("Health", "health above 100"))
        }
    }
}

impl NetSerializer for HealthSerializer {
    type Source = f32;
    type Quantized = u8;
    type Config = NoConfig;
    const NAME: &'static str = "Health";

    fn quantize(_: &NoConfig, source: &f32) -> u8 {
        // `as` truncates and maps NaN to 0.
        source.clamp(0.0, 100.0) as u8
    }

    fn dequantize(_: &NoConfig, q: &u8) -> f32 {
        *q as f32
    }

    fn serialize(_: &NoConfig, q: &u8, w: &mut BitWriter) {
        if !w.write_bool(*q == 0) {
            w.write_bits(*q as u64, 7);
        }
    }

    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u8> {
        if r.read_bool() {
            r.check()?;
            return Ok(0);
        }
        let v = r.read_bits(7);
        r.check()?;
        Self::check(v)
    }

    fn serialize_delta(_: &NoConfig, q: &u8, prev: &u8, w: &mut BitWriter) {
        let delta = *q as i32 - *prev as i32;
        if !w.write_bool(delta != 0) {
            return;
        }
        if (-8..=7).contains(&delta) {
            w.write_bool(false);
            w.write_bits((delta + 8) as u64, 4);
        } else {
            w.write_bool(true);
            w.write_bits(*q as u64, 7);
        }
    }

    fn deserialize_delta(_: &NoConfig, prev: &u8, r: &mut BitReader) -> Result<u8> {
        if !r.read_bool() {
            r.check()?;
            return Ok(*prev);
        }
        if r.read_bool() {
            let v = r.read_bits(7);
            r.check()?;
            return Self::check(v);
        }
        let delta = r.read_bits(4) as i64 - 8;
        r.check()?;
        let v = *prev as i64 + delta;
        if v < 0 {
            return Err(SerializeError::invalid("Health", "health below 0"));
        }
        Self::check(v as u64)
    }

    fn validate(_: &NoConfig, q: &u8) -> Result<()> {
        Self::check(*q as u64).map(|_| ())
    }

    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(q: u8, prev: u8) -> usize {
        let mut w = BitWriter::with_capacity_bits(16);
        HealthSerializer::serialize_delta(&NoConfig, &q, &prev, &mut w);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, w.position());
        assert_eq!(
            HealthSerializer::deserialize_delta(&NoConfig, &prev, &mut r).unwrap(),
            q
        );
        assert_eq!(r.bits_left(), 0);
        w.position()
    }

    #[test]
    fn iris_health_costs() {
        assert_eq!(delta(75, 75), 1);
        assert_eq!(delta(72, 75), 6);
        assert_eq!(delta(82, 75), 6);
        assert_eq!(delta(83, 75), 9);
        assert_eq!(delta(67, 75), 6);
        assert_eq!(delta(66, 75), 9);
        assert_eq!(delta(0, 5), 6);
        assert_eq!(delta(0, 100), 9);
    }

    #[test]
    fn every_pair_round_trips() {
        for prev in 0..=100u8 {
            for q in 0..=100u8 {
                let bits = delta(q, prev);
                let expected = if q == prev {
                    1
                } else if (-8..=7).contains(&(q as i32 - prev as i32)) {
                    6
                } else {
                    9
                };
                assert_eq!(bits, expected, "{prev} -> {q}");
            }
        }
    }

    #[test]
    fn quantize_truncates_and_clamps() {
        assert_eq!(HealthSerializer::quantize(&NoConfig, &99.99), 99);
        assert_eq!(HealthSerializer::quantize(&NoConfig, &-5.0), 0);
        assert_eq!(HealthSerializer::quantize(&NoConfig, &1e9), 100);
        assert_eq!(HealthSerializer::quantize(&NoConfig, &f32::NAN), 0);
    }

    #[test]
    fn out_of_range_values_are_errors() {
        for v in 101..=127u64 {
            let mut w = BitWriter::with_capacity_bits(16);
            w.write_bool(false);
            w.write_bits(v, 7);
            let bytes = w.finish().unwrap();
            assert!(HealthSerializer::deserialize(&NoConfig, &mut BitReader::new(&bytes)).is_err());
            let mut w = BitWriter::with_capacity_bits(16);
            w.write_bits(0b11, 2);
            w.write_bits(v, 7);
            let bytes = w.finish().unwrap();
            assert!(
                HealthSerializer::deserialize_delta(&NoConfig, &50, &mut BitReader::new(&bytes))
                    .is_err()
            );
        }
        // Small deltas that leave the range.
        let small = |d: i64, prev: u8| {
            let mut w = BitWriter::with_capacity_bits(16);
            w.write_bits(0b01, 2);
            w.write_bits((d + 8) as u64, 4);
            let bytes = w.finish().unwrap();
            HealthSerializer::deserialize_delta(&NoConfig, &prev, &mut BitReader::new(&bytes))
        };
        assert!(small(7, 100).is_err());
        assert!(small(-8, 3).is_err());
        assert_eq!(small(-3, 3).unwrap(), 0);
        assert!(HealthSerializer::validate(&NoConfig, &101).is_err());
    }
}
