//! Compile-time checks `#[derive(Replicated)]` runs on member configs that the
//! configs' own `const_check` leaves to start-up: the float resolution of a ranged
//! `f32`/`f64` member.
//!
//! These mirror, in `const fn`s, what
//! [`RangedF32Serializer::validate_config`](crate::serialize::RangedF32Serializer) and
//! [`RangedF64Serializer::validate_config`](crate::serialize::RangedF64Serializer)
//! check when the type is registered (a unit test holds them equal), so a mistake in
//! a literal config is a compile error instead of a failed `Server::bind`. This module
//! owns only these checks; the configs and serializers are the serialization layer's.

use crate::serialize::FloatRangeConfig;

/// How many float spacings one quantization step must span (the serializers' margin).
const ULP_MARGIN: f64 = 16.0;

/// `x.ceil()` for a positive finite `x` (`f64::ceil` is not `const` at the crate's
/// minimum Rust version); saturates at `u64::MAX`.
const fn ceil_positive(x: f64) -> f64 {
    let t = x as u64;
    if (t as f64) < x {
        t.saturating_add(1) as f64
    } else {
        t as f64
    }
}

/// [`FloatRangeConfig::effective_bits`] for a config that passed its `const_check`.
const fn effective_bits(c: &FloatRangeConfig) -> u32 {
    if c.bits != 0 {
        return if c.bits < 32 { c.bits } else { 32 };
    }
    let range = c.max - c.min;
    let mut steps = ceil_positive(range / c.precision * (1.0 - 1e-12));
    if steps < 1.0 {
        steps = 1.0;
    }
    if steps < u32::MAX as f64 {
        let b = crate::bits::bits_for_count(steps as u64 + 1);
        if b < 1 {
            1
        } else if b > 32 {
            32
        } else {
            b
        }
    } else {
        32
    }
}

/// The spacing of `f32` values at `x`.
const fn ulp_f32(x: f64) -> f64 {
    let m = x.abs() as f32;
    let next = f32::from_bits(m.to_bits().saturating_add(1));
    (next - m) as f64
}

/// The spacing of `f64` values at `x`.
const fn ulp_f64(x: f64) -> f64 {
    let m = x.abs();
    f64::from_bits(m.to_bits().saturating_add(1)) - m
}

/// The resolution check of a ranged float member's config (run after the config's
/// `const_check` passed): `f32` ranges must fit in `f32`, and each step must span at
/// least 16 spacings of the float type at the range's largest magnitude.
pub const fn ranged_float_resolution(
    c: &FloatRangeConfig,
    is_f32: bool,
) -> Result<(), &'static str> {
    let largest = if c.min.abs() > c.max.abs() {
        c.min.abs()
    } else {
        c.max.abs()
    };
    if is_f32 && largest > f32::MAX as f64 {
        return Err("`min` / `max` do not fit in `f32`; use an `f64` member (RangedF64Serializer)");
    }
    let bits = effective_bits(c);
    let max_index = if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    };
    let step = (c.max - c.min) / max_index as f64;
    let ulp = if is_f32 {
        ulp_f32(largest)
    } else {
        ulp_f64(largest)
    };
    if step < ULP_MARGIN * ulp {
        return Err(if is_f32 {
            "the quantization step is finer than `f32` can represent over this range: use \
             fewer `bits`, a coarser `precision`, a range nearer zero, or an `f64` member"
        } else {
            "the quantization step is finer than `f64` can represent over this range: use \
             fewer `bits`, a coarser `precision`, or a range nearer zero"
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::{NetSerializer, RangedF32Serializer, RangedF64Serializer};

    /// The const check accepts exactly what the serializers accept at registration
    /// (for configs that pass `const_check`).
    #[test]
    fn agrees_with_validate_config() {
        let mut checked = 0;
        let mut rejected = 0;
        let ranges = [
            (0.0, 1.0),
            (-1.0, 1.0),
            (0.0, 100.0),
            (10_000.0, 10_001.0),
            (-1.0e6, 1.0e6),
            (1.0e9, 1.0e9 + 1.0),
            (0.0, 1.0e-3),
            (-3.0e38, 3.0e38),
            (-1.0e39, 1.0e39),
            (1.0e15, 1.0e15 + 10.0),
        ];
        for (min, max) in ranges {
            let mut configs = Vec::new();
            for bits in 1..=32 {
                configs.push(FloatRangeConfig::with_bits(min, max, bits));
            }
            for p in [1.0e-12, 1.0e-9, 1.0e-6, 1.0e-4, 0.01, 0.1, 1.0, 100.0] {
                configs.push(FloatRangeConfig::with_precision(min, max, p));
            }
            for c in configs {
                if c.const_check().is_err() {
                    continue;
                }
                checked += 1;
                let f32_ok = RangedF32Serializer::validate_config(&c).is_ok();
                let f64_ok = RangedF64Serializer::validate_config(&c).is_ok();
                assert_eq!(
                    ranged_float_resolution(&c, true).is_ok(),
                    f32_ok,
                    "f32 {c:?}"
                );
                assert_eq!(
                    ranged_float_resolution(&c, false).is_ok(),
                    f64_ok,
                    "f64 {c:?}"
                );
                rejected += usize::from(!f32_ok) + usize::from(!f64_ok);
            }
        }
        assert!(
            checked > 300 && rejected > 20,
            "{checked} checked, {rejected} rejected"
        );
    }
}
