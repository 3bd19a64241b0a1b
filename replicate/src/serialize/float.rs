//! Floating-point serializers: full precision [`F32Serializer`] / [`F64Serializer`]
//! (the `NetDefault` for `f32` / `f64`) and fixed-point ranged floats
//! ([`RangedF32Serializer`], [`RangedF64Serializer`], [`UnitF32Serializer`]).
//!
//! This module owns float quantization and its wire encodings only.
//!
//! # Full precision (Iris's `FFloatNetSerializer`)
//!
//! The quantized value is the raw IEEE-754 bit pattern (`u32` / `u64`), with two
//! canonicalisations applied by `quantize` (and to whatever `deserialize` reads):
//! - **`-0.0` becomes `+0.0`** (bits `0`), so the two zeros compare equal for change
//!   detection (Iris's `UseSerializerIsEqual` rationale) and a negative zero costs
//!   1 bit instead of 33. The receiver therefore always sees `+0.0`.
//! - **Every NaN becomes the canonical quiet NaN** (`0x7FC0_0000` / `0x7FF8_0000_0000_0000`):
//!   NaN is replicated as NaN, but its sign and payload are not, and a NaN member does
//!   not look "changed" every tick just because its payload differs.
//!
//! Infinities, subnormals and every other value round-trip bit-exactly.
//!
//! Wire: `[0]` for `+0.0` (1 bit), else `[1][raw bits]` (33 bits for `f32`, 65 for
//! `f64`, LSB-first). Note the flag polarity is the opposite of the integers' (there
//! `1` means zero); this follows Iris. Delta: the default `[0]` unchanged (1 bit),
//! else `[1]` and the full encoding.
//!
//! # Ranged fixed point
//!
//! A [`FloatRangeConfig`] `{ min, max, precision, bits }` maps `[min, max]` onto the
//! integer indices `0..=2^bits - 1` (both endpoints exactly representable). Values are
//! clamped into the range and rounded to the nearest index; NaN quantizes to index 0
//! (`min`). Wire: the index in `bits` bits, nothing else. Delta: the residual code of
//! [`super::delta`] on the index (at most `bits + 1` bits).
//!
//! Only `min`, `max` and the points `min + k * step` are exact. In a symmetric range
//! such as `-1..1` zero is **not** one of them (there are `2^bits` points, an even
//! number, so the middle falls between two): a centred steering wheel arrives as
//! `±step / 2`. If zero must be exact, make `-min` a whole number of steps, for example
//! `min = -1.0, max = 1.0 + 2.0 / 1022.0, bits = 10` (step `2 / 1022`).
//!
//! ```
//! use replicate::serialize::*;
//! // Iris's steering wheel: -1..1 in 10 bits.
//! let steering = FloatRangeConfig { min: -1.0, max: 1.0, bits: 10, ..FloatRangeConfig::DEFAULT };
//! assert!(RangedF32Serializer::validate_config(&steering).is_ok());
//! let (bits, v) = roundtrip::<RangedF32Serializer>(&steering, &0.25).unwrap();
//! assert_eq!(bits, 10);
//! assert!((v - 0.25).abs() <= 1.0 / 1023.0);
//! // Out of range clamps.
//! assert_eq!(roundtrip::<RangedF32Serializer>(&steering, &7.0).unwrap(), (10, 1.0));
//! ```

use super::{
    NetDefault, NetQuantize, NetSerializer, NetSerializerConfig, NoConfig, Result, StableHasher,
};
use crate::bits::{BitReader, BitWriter};

/// The canonical quiet NaN every `f32` NaN is quantized to.
pub const CANONICAL_NAN_F32: u32 = 0x7FC0_0000;
/// The canonical quiet NaN every `f64` NaN is quantized to.
pub const CANONICAL_NAN_F64: u64 = 0x7FF8_0000_0000_0000;

#[inline]
pub(super) fn canonical_f32_bits(bits: u32) -> u32 {
    if bits == 0x8000_0000 {
        0
    } else if f32::from_bits(bits).is_nan() {
        CANONICAL_NAN_F32
    } else {
        bits
    }
}

#[inline]
fn canonical_f64_bits(bits: u64) -> u64 {
    if bits == 0x8000_0000_0000_0000 {
        0
    } else if f64::from_bits(bits).is_nan() {
        CANONICAL_NAN_F64
    } else {
        bits
    }
}

/// `f32` at full precision: `[0]` for zero (1 bit), else `[1][32 raw bits]` (33 bits).
/// `-0.0` is sent as `+0.0` and NaNs as the canonical quiet NaN; see the
/// [module docs](self).
///
/// ```
/// use replicate::serialize::*;
/// assert_eq!(roundtrip::<F32Serializer>(&NoConfig, &0.0).unwrap(), (1, 0.0));
/// assert_eq!(roundtrip::<F32Serializer>(&NoConfig, &1000.0).unwrap(), (33, 1000.0));
/// // Negative zero costs 1 bit and arrives as +0.0.
/// let (bits, v) = roundtrip::<F32Serializer>(&NoConfig, &-0.0).unwrap();
/// assert_eq!((bits, v.to_bits()), (1, 0));
/// assert_eq!(F32Serializer::quantize(&NoConfig, &1000.0), 0x447A_0000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct F32Serializer;

impl NetSerializer for F32Serializer {
    type Source = f32;
    type Quantized = u32;
    type Config = NoConfig;
    const NAME: &'static str = "f32";

    fn quantize(_: &NoConfig, source: &f32) -> u32 {
        canonical_f32_bits(source.to_bits())
    }
    fn dequantize(_: &NoConfig, q: &u32) -> f32 {
        f32::from_bits(*q)
    }
    fn serialize(_: &NoConfig, q: &u32, w: &mut BitWriter) {
        if w.write_bool(*q != 0) {
            w.write_bits(*q as u64, 32);
        }
    }
    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u32> {
        let v = if r.read_bool() {
            r.read_bits(32) as u32
        } else {
            0
        };
        r.check()?;
        Ok(canonical_f32_bits(v))
    }
    fn is_equal(_: &NoConfig, a: &u32, b: &u32) -> bool {
        canonical_f32_bits(*a) == canonical_f32_bits(*b)
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(33)
    }
}

impl NetDefault for f32 {
    type Serializer = F32Serializer;
}

impl NetQuantize for f32 {
    type Serializer = RangedF32Serializer;
    const BITS: (u32, u32) = (1, 32);
}

/// `f64` at full precision: `[0]` for zero (1 bit), else `[1][64 raw bits]` (65 bits,
/// low word first). `-0.0` is sent as `+0.0` and NaNs as the canonical quiet NaN; see
/// the [module docs](self).
///
/// ```
/// use replicate::serialize::*;
/// assert_eq!(roundtrip::<F64Serializer>(&NoConfig, &0.0).unwrap(), (1, 0.0));
/// assert_eq!(roundtrip::<F64Serializer>(&NoConfig, &-2.5).unwrap(), (65, -2.5));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct F64Serializer;

impl NetSerializer for F64Serializer {
    type Source = f64;
    type Quantized = u64;
    type Config = NoConfig;
    const NAME: &'static str = "f64";

    fn quantize(_: &NoConfig, source: &f64) -> u64 {
        canonical_f64_bits(source.to_bits())
    }
    fn dequantize(_: &NoConfig, q: &u64) -> f64 {
        f64::from_bits(*q)
    }
    fn serialize(_: &NoConfig, q: &u64, w: &mut BitWriter) {
        if w.write_bool(*q != 0) {
            w.write_bits(*q, 64);
        }
    }
    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u64> {
        let v = if r.read_bool() { r.read_bits(64) } else { 0 };
        r.check()?;
        Ok(canonical_f64_bits(v))
    }
    fn is_equal(_: &NoConfig, a: &u64, b: &u64) -> bool {
        canonical_f64_bits(*a) == canonical_f64_bits(*b)
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(65)
    }
}

impl NetDefault for f64 {
    type Serializer = F64Serializer;
}

impl NetQuantize for f64 {
    type Serializer = RangedF64Serializer;
    const BITS: (u32, u32) = (1, 32);
}

/// Configuration of the ranged fixed-point float serializers.
///
/// Set the range with `min` and `max`, and the resolution with **exactly one** of
/// - `bits` (`1..=32`): the index is sent in this many bits, giving `2^bits - 1` equal
///   steps from `min` to `max`;
/// - `precision` (`> 0`): the largest acceptable step; the serializer uses the fewest
///   bits whose step is at most `precision` (`bits` must then be `0`).
///
/// [`DEFAULT`](Self::DEFAULT) sets neither, so it does not validate on its own: a
/// ranged member must name its resolution (`#[net(min = 0.0, max = 1000.0, precision =
/// 0.5)]`). [`UNIT`](Self::UNIT) is Iris's normalized float (0..1 in 8 bits).
///
/// The fields are `f64` for both [`RangedF32Serializer`] and [`RangedF64Serializer`], so
/// one config type serves both and the derive can write literals like `min = -1.0`.
///
/// ```
/// use replicate::serialize::*;
/// let c = FloatRangeConfig { min: 0.0, max: 1000.0, precision: 0.5, ..FloatRangeConfig::DEFAULT };
/// assert!(c.validate().is_ok());
/// assert_eq!(c.effective_bits(), 11); // 2000 steps need 11 bits
/// assert!(c.step() <= 0.5);
///
/// let bad = FloatRangeConfig { min: 1.0, max: 1.0, ..FloatRangeConfig::UNIT };
/// assert!(bad.validate().unwrap_err().contains("must be less than `max"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatRangeConfig {
    /// The smallest value (inclusive); smaller values are clamped to it.
    pub min: f64,
    /// The largest value (inclusive); larger values are clamped to it.
    pub max: f64,
    /// The largest acceptable step between representable values; `0.0` means unset.
    pub precision: f64,
    /// Bits on the wire (`1..=32`); `0` means "derive from `precision`".
    pub bits: u32,
}

impl FloatRangeConfig {
    /// `0.0..=1.0` with no resolution set (invalid until `bits` or `precision` is set).
    pub const DEFAULT: FloatRangeConfig = FloatRangeConfig {
        min: 0.0,
        max: 1.0,
        precision: 0.0,
        bits: 0,
    };

    /// `0.0..=1.0` in 8 bits (255 steps): Iris's `FNormalizedFloatNetSerializer`.
    pub const UNIT: FloatRangeConfig = FloatRangeConfig {
        min: 0.0,
        max: 1.0,
        precision: 0.0,
        bits: 8,
    };

    /// `min..=max` in `bits` bits.
    pub const fn with_bits(min: f64, max: f64, bits: u32) -> Self {
        Self {
            min,
            max,
            precision: 0.0,
            bits,
        }
    }

    /// `min..=max` with a step of at most `precision`.
    pub const fn with_precision(min: f64, max: f64, precision: f64) -> Self {
        Self {
            min,
            max,
            precision,
            bits: 0,
        }
    }

    /// The checks `#[derive(Replicated)]` runs on a member's config at compile time
    /// (the same rules as [`NetSerializerConfig::validate`], with fixed messages): a
    /// finite, ordered range and exactly one of `bits` (`1..=32`) or `precision` (`> 0`,
    /// at most `2^32 - 1` steps over the range).
    pub const fn const_check(&self) -> std::result::Result<(), &'static str> {
        if !self.min.is_finite() || !self.max.is_finite() {
            return Err("`min` and `max` must both be finite numbers");
        }
        if self.min >= self.max {
            return Err("`min` must be less than `max`; swap them or widen the range");
        }
        if !(self.max - self.min).is_finite() {
            return Err("the range `max - min` overflows; narrow it");
        }
        if self.bits > 32 {
            return Err(
                "`bits` is too wide for a ranged float (at most 32); use fewer bits, or remove \
                 the quantization keys for the lossless default",
            );
        }
        if self.bits != 0 {
            if self.precision != 0.0 {
                return Err(
                    "a ranged float takes either `bits` or `precision`, not both; `precision` is the \
                     largest acceptable error and picks the bits itself",
                );
            }
            return Ok(());
        }
        if self.precision == 0.0 {
            return Err(
                "a ranged float needs a resolution: add `precision = X` (the largest acceptable \
                 error) or `bits = N` (1..=32)",
            );
        }
        if !(self.precision > 0.0 && self.precision.is_finite()) {
            return Err("`precision` must be a finite number greater than 0");
        }
        if (self.max - self.min) / self.precision >= u32::MAX as f64 {
            return Err(
                "`precision` is too fine for 32 bits over this range; use a coarser precision or a \
                 narrower range",
            );
        }
        Ok(())
    }

    fn range(&self) -> f64 {
        self.max - self.min
    }

    fn is_usable(&self) -> bool {
        let range = self.range();
        self.min.is_finite() && self.max.is_finite() && range.is_finite() && range > 0.0
    }

    /// Steps needed for `precision`, or `None` when it is unset or unusable.
    fn steps_for_precision(&self) -> Option<f64> {
        if !(self.precision > 0.0 && self.precision.is_finite() && self.is_usable()) {
            return None;
        }
        // A hair under the exact ratio, so 100.0 / 0.1 = 1000.0000000000001 needs 1000.
        Some(
            (self.range() / self.precision * (1.0 - 1e-12))
                .ceil()
                .max(1.0),
        )
    }

    /// The bits actually used on the wire, always in `1..=32` (even for an invalid
    /// config, so quantizing with one never panics): `bits` when set, else the fewest
    /// bits whose step is at most `precision`, else 8.
    pub fn effective_bits(&self) -> u32 {
        if self.bits != 0 {
            return self.bits.min(32);
        }
        match self.steps_for_precision() {
            Some(steps) if steps < u32::MAX as f64 => {
                crate::bits::bits_for_count(steps as u64 + 1).clamp(1, 32)
            }
            Some(_) => 32,
            None => 8,
        }
    }

    /// The largest index, `2^bits - 1`; it stands for `max`.
    pub fn max_index(&self) -> u32 {
        let bits = self.effective_bits();
        if bits >= 32 {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        }
    }

    /// The distance between adjacent representable values.
    pub fn step(&self) -> f64 {
        self.range() / self.max_index() as f64
    }

    /// Clamps `value` into the range and returns the nearest index. NaN gives 0.
    pub fn quantize(&self, value: f64) -> u32 {
        if !self.is_usable() || value.is_nan() {
            return 0;
        }
        let max_index = self.max_index();
        if value <= self.min {
            return 0;
        }
        if value >= self.max {
            return max_index;
        }
        let t = (value - self.min) / self.range() * max_index as f64;
        // `as` saturates; the `min` keeps a rounding overshoot in range.
        (t.round() as u32).min(max_index)
    }

    /// The value index `q` stands for: exactly `min` for 0 and exactly `max` for
    /// [`max_index`](Self::max_index); indices above it are treated as it.
    pub fn dequantize(&self, q: u32) -> f64 {
        if !self.is_usable() {
            return if self.min.is_finite() { self.min } else { 0.0 };
        }
        let max_index = self.max_index();
        if q == 0 {
            self.min
        } else if q >= max_index {
            self.max
        } else {
            self.min + q as f64 * self.step()
        }
    }

    /// Checks that the smallest step stays well above the float spacing (`ulp`) of the
    /// target type at the range's largest magnitude, which is what makes
    /// `quantize(dequantize(q)) == q` exact.
    fn check_resolution(
        &self,
        ulp: f64,
        ty: &str,
        advice: &str,
    ) -> std::result::Result<(), String> {
        let step = self.step();
        if step < ULP_MARGIN * ulp {
            return Err(format!(
                "a step of {step:e} over `min = {}`..`max = {}` is finer than `{ty}` can \
                 represent there (spacing {ulp:e}); {advice}",
                self.min, self.max
            ));
        }
        Ok(())
    }
}

/// How many float spacings (ulps) one quantization step must span at least.
const ULP_MARGIN: f64 = 16.0;

fn ulp_f32(x: f64) -> f64 {
    let m = x.abs() as f32;
    let next = f32::from_bits(m.to_bits().saturating_add(1));
    (next - m) as f64
}

fn ulp_f64(x: f64) -> f64 {
    let m = x.abs();
    f64::from_bits(m.to_bits().saturating_add(1)) - m
}

impl Default for FloatRangeConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for FloatRangeConfig {
    const DEFAULT: Self = FloatRangeConfig::DEFAULT;

    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_f64(self.min);
        hasher.write_f64(self.max);
        hasher.write_f64(self.precision);
        hasher.write_u32(self.bits);
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if !self.min.is_finite() || !self.max.is_finite() {
            return Err(format!(
                "`min = {}` and `max = {}` must both be finite numbers",
                self.min, self.max
            ));
        }
        if self.min >= self.max {
            return Err(format!(
                "`min = {}` must be less than `max = {}`; swap them or widen the range",
                self.min, self.max
            ));
        }
        if !self.range().is_finite() {
            return Err(format!(
                "the range `max - min` ({} - {}) overflows; narrow it",
                self.max, self.min
            ));
        }
        if self.bits > 32 {
            return Err(format!(
                "`bits = {}` is too wide for a ranged float (at most 32); use fewer bits or the \
                 full-precision serializer",
                self.bits
            ));
        }
        if self.bits != 0 {
            if self.precision != 0.0 {
                return Err(format!(
                    "set either `bits` or `precision`, not both (got `bits = {}`, `precision = {}`)",
                    self.bits, self.precision
                ));
            }
            return Ok(());
        }
        if self.precision == 0.0 {
            return Err(
                "a ranged float needs a resolution: set `bits = N` (1..=32) or `precision = STEP` \
                 (the largest acceptable step, > 0)"
                    .to_string(),
            );
        }
        if !(self.precision > 0.0 && self.precision.is_finite()) {
            return Err(format!(
                "`precision = {}` must be a finite number greater than 0 (the largest acceptable step)",
                self.precision
            ));
        }
        match self.steps_for_precision() {
            Some(steps) if steps < u32::MAX as f64 => Ok(()),
            _ => Err(format!(
                "`precision = {}` is too fine for 32 bits over `min = {}`..`max = {}` \
                 ({:.0} steps, at most {}); use a coarser precision or a narrower range",
                self.precision,
                self.min,
                self.max,
                self.range() / self.precision,
                u32::MAX
            )),
        }
    }
}

macro_rules! ranged_serializer {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $name_str:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = u32;
            type Config = FloatRangeConfig;
            const NAME: &'static str = $name_str;

            fn quantize(config: &FloatRangeConfig, source: &$ty) -> u32 {
                config.quantize(*source as f64)
            }
            fn dequantize(config: &FloatRangeConfig, q: &u32) -> $ty {
                config.dequantize(*q) as $ty
            }
            fn serialize(config: &FloatRangeConfig, q: &u32, w: &mut BitWriter) {
                w.write_bits(*q as u64, config.effective_bits());
            }
            fn deserialize(config: &FloatRangeConfig, r: &mut BitReader) -> Result<u32> {
                let v = r.read_bits(config.effective_bits()) as u32;
                r.check()?;
                Ok(v)
            }
            fn serialize_delta(config: &FloatRangeConfig, q: &u32, prev: &u32, w: &mut BitWriter) {
                let bits = config.effective_bits();
                super::ints::write_bits_delta(w, *q, *prev, bits, bits, |w| {
                    w.write_bits(*q as u64, bits)
                });
            }
            fn deserialize_delta(
                config: &FloatRangeConfig,
                prev: &u32,
                r: &mut BitReader,
            ) -> Result<u32> {
                let bits = config.effective_bits();
                let prev = (*prev).min(config.max_index());
                super::ints::read_bits_delta(r, prev, bits, |r| {
                    let v = r.read_bits(bits);
                    r.check()?;
                    Ok(v)
                })
            }
            fn shift(config: &FloatRangeConfig, x: &u32, y: &u32, z: &u32) -> Result<u32> {
                // As `deserialize_delta` reads it: against `x` clamped to the range.
                let bits = config.effective_bits();
                let comps = [super::delta::Component::new(*y as u64, *z as u64, bits)];
                let base = [(*x).min(config.max_index()) as u64];
                // The escape carries `y` in full, in its bits.
                let [v] = super::delta::shift_or_escape(&comps, bits, base);
                let v = v as u32;
                Self::validate(config, &v)?;
                Ok(v)
            }
            fn validate(config: &FloatRangeConfig, q: &u32) -> Result<()> {
                if *q > config.max_index() {
                    return Err(super::SerializeError::invalid(
                        $name_str,
                        "index above the configured range",
                    ));
                }
                Ok(())
            }
            fn max_bits(config: &FloatRangeConfig) -> Option<u32> {
                Some(config.effective_bits())
            }
            fn validate_config(config: &FloatRangeConfig) -> std::result::Result<(), String> {
                config.validate()?;
                let check: fn(&FloatRangeConfig) -> std::result::Result<(), String> = $check;
                check(config)
            }
        }
    };
}

ranged_serializer!(
    /// `f32` in a fixed range as an unsigned index of `bits` bits (see
    /// [`FloatRangeConfig`] and the [module docs](self)). Not the `NetDefault` for `f32`;
    /// opt in with `#[net(serializer = RangedF32Serializer, min = .., max = .., bits = ..)]`.
    ///
    /// Besides the [`FloatRangeConfig`] checks, `validate_config` requires `min`/`max` to
    /// fit in `f32` and each step to span at least 16 `f32` spacings at the range's
    /// largest magnitude (so `-1..1` allows up to 20 bits); beyond that, use
    /// [`RangedF64Serializer`].
    ///
    /// ```
    /// use replicate::serialize::*;
    /// let c = FloatRangeConfig::with_precision(0.0, 100.0, 1.0);
    /// assert_eq!(c.effective_bits(), 7);
    /// assert!(c.step() <= 1.0); // 127 steps of 100/127
/// let (bits, v) = roundtrip::<RangedF32Serializer>(&c, &42.4).unwrap();
/// assert_eq!(bits, 7);
/// assert!((v as f64 - 42.4).abs() <= c.step() / 2.0 + 1e-5);
    /// let fine = FloatRangeConfig::with_bits(10_000.0, 10_001.0, 24);
    /// assert!(RangedF32Serializer::validate_config(&fine).is_err());
    /// ```
    RangedF32Serializer,
    f32,
    "RangedF32",
    |c| {
        if c.min.abs() > f32::MAX as f64 || c.max.abs() > f32::MAX as f64 {
            return Err(format!(
                "`min = {}` / `max = {}` do not fit in `f32`; use RangedF64Serializer",
                c.min, c.max
            ));
        }
        c.check_resolution(
            ulp_f32(c.min.abs().max(c.max.abs())),
            "f32",
            "use fewer `bits`, a coarser `precision`, or RangedF64Serializer",
        )
    }
);

ranged_serializer!(
    /// `f64` in a fixed range as an unsigned index of `bits` (at most 32) bits; the same
    /// encoding as [`RangedF32Serializer`]. `validate_config` requires each step to span
    /// at least 16 `f64` spacings at the range's largest magnitude.
    ///
    /// ```
    /// use replicate::serialize::*;
    /// // A 10 km axis at 1 cm: 20 bits, as in Iris's quantization example.
    /// let c = FloatRangeConfig::with_precision(0.0, 10_000.0, 0.01);
    /// assert_eq!(c.effective_bits(), 20);
    /// let (bits, v) = roundtrip::<RangedF64Serializer>(&c, &1234.567).unwrap();
    /// assert_eq!(bits, 20);
    /// assert!((v - 1234.567).abs() <= 0.005);
    /// ```
    RangedF64Serializer,
    f64,
    "RangedF64",
    |c| {
        c.check_resolution(
            ulp_f64(c.min.abs().max(c.max.abs())),
            "f64",
            "use fewer `bits`, a coarser `precision`, or a range nearer zero",
        )
    }
);

/// `f32` in `0.0..=1.0` in 8 bits (255 steps, [`FloatRangeConfig::UNIT`]) with no config:
/// Iris's `FNormalizedFloatNetSerializer`, for throttles, brakes, fractions.
/// Values outside the range clamp; NaN becomes 0.
///
/// ```
/// use replicate::serialize::*;
/// assert_eq!(roundtrip::<UnitF32Serializer>(&NoConfig, &1.0).unwrap(), (8, 1.0));
/// assert_eq!(roundtrip::<UnitF32Serializer>(&NoConfig, &-3.0).unwrap(), (8, 0.0));
/// let (_, half) = roundtrip::<UnitF32Serializer>(&NoConfig, &0.5).unwrap();
/// assert_eq!(UnitF32Serializer::quantize(&NoConfig, &0.5), 128);
/// assert!((half - 128.0 / 255.0).abs() < 1e-6);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitF32Serializer;

impl NetSerializer for UnitF32Serializer {
    type Source = f32;
    type Quantized = u8;
    type Config = NoConfig;
    const NAME: &'static str = "UnitF32";

    fn quantize(_: &NoConfig, source: &f32) -> u8 {
        FloatRangeConfig::UNIT.quantize(*source as f64) as u8
    }
    fn dequantize(_: &NoConfig, q: &u8) -> f32 {
        FloatRangeConfig::UNIT.dequantize(*q as u32) as f32
    }
    fn serialize(_: &NoConfig, q: &u8, w: &mut BitWriter) {
        w.write_bits(*q as u64, 8);
    }
    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u8> {
        let v = r.read_bits(8) as u8;
        r.check()?;
        Ok(v)
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(8)
    }
}

#[cfg(test)]
mod tests {
    use super::super::roundtrip;
    use super::*;

    proptest::proptest! {
        /// The derive's compile-time check accepts exactly what the config's own
        /// validation does (the serializers add an f32/f64 resolution check on top).
        #[test]
        fn const_check_agrees_with_config_validate(
            min in -1e6f64..1e6, span in -1.0f64..2e6, precision in 0.0f64..10.0, bits in 0u32..40, use_bits: bool,
        ) {
            let c = FloatRangeConfig {
                min,
                max: min + span,
                precision: if use_bits { 0.0 } else { precision },
                bits: if use_bits { bits } else { 0 },
            };
            proptest::prop_assert_eq!(
                c.const_check().is_ok(),
                NetSerializerConfig::validate(&c).is_ok(),
                "{:?}",
                c
            );
        }
    }

    fn bits_of<S: NetSerializer>(c: &S::Config, q: &S::Quantized) -> usize {
        let mut w = BitWriter::with_capacity_bits(256);
        S::serialize(c, q, &mut w);
        w.position()
    }

    #[test]
    fn iris_float_examples() {
        assert_eq!(
            roundtrip::<F32Serializer>(&NoConfig, &0.0).unwrap(),
            (1, 0.0)
        );
        assert_eq!(F32Serializer::quantize(&NoConfig, &1000.0), 0x447A_0000);
        assert_eq!(F32Serializer::quantize(&NoConfig, &1001.5), 0x447A_6000);
        assert_eq!(
            roundtrip::<F32Serializer>(&NoConfig, &1000.0).unwrap(),
            (33, 1000.0)
        );
        // Wire layout: [1] then the raw bits LSB-first.
        let mut w = BitWriter::with_capacity_bits(64);
        F32Serializer::serialize(&NoConfig, &0x447A_0000, &mut w);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert!(r.read_bool());
        assert_eq!(r.read_bits(32), 0x447A_0000);
    }

    #[test]
    fn negative_zero_is_zero_and_costs_one_bit() {
        assert_eq!(F32Serializer::quantize(&NoConfig, &-0.0), 0);
        assert_eq!(F64Serializer::quantize(&NoConfig, &-0.0), 0);
        assert_eq!(bits_of::<F32Serializer>(&NoConfig, &0), 1);
        assert!(F32Serializer::is_equal(&NoConfig, &0x8000_0000, &0));
        assert!(F64Serializer::is_equal(
            &NoConfig,
            &0x8000_0000_0000_0000,
            &0
        ));
        assert!(!F32Serializer::is_equal(&NoConfig, &0x8000_0001, &0));
        // A raw -0.0 arriving on the wire is canonicalised too.
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bool(true);
        w.write_bits(0x8000_0000, 32);
        let bytes = w.finish().unwrap();
        let got = F32Serializer::deserialize(&NoConfig, &mut BitReader::new(&bytes)).unwrap();
        assert_eq!(got, 0);
    }

    #[test]
    fn nan_is_canonical_and_infinities_survive() {
        let weird_nan = f32::from_bits(0xFFC0_1234);
        assert!(weird_nan.is_nan());
        assert_eq!(
            F32Serializer::quantize(&NoConfig, &weird_nan),
            CANONICAL_NAN_F32
        );
        let (bits, v) = roundtrip::<F32Serializer>(&NoConfig, &f32::NAN).unwrap();
        assert_eq!((bits, v.to_bits()), (33, CANONICAL_NAN_F32));
        assert_eq!(
            F64Serializer::quantize(&NoConfig, &f64::from_bits(0xFFF0_0000_0000_0001)),
            CANONICAL_NAN_F64
        );
        assert_eq!(
            roundtrip::<F32Serializer>(&NoConfig, &f32::NEG_INFINITY).unwrap(),
            (33, f32::NEG_INFINITY)
        );
        assert_eq!(
            roundtrip::<F64Serializer>(&NoConfig, &f64::INFINITY).unwrap(),
            (65, f64::INFINITY)
        );
    }

    #[test]
    fn float_delta_costs() {
        let cost = |q: u32, prev: u32| {
            let mut w = BitWriter::with_capacity_bits(128);
            F32Serializer::serialize_delta(&NoConfig, &q, &prev, &mut w);
            let bytes = w.finish().unwrap();
            let got =
                F32Serializer::deserialize_delta(&NoConfig, &prev, &mut BitReader::new(&bytes))
                    .unwrap();
            assert_eq!(got, q);
            w.position()
        };
        assert_eq!(cost(0x447A_0000, 0x447A_0000), 1);
        assert_eq!(cost(0x447A_6000, 0x447A_0000), 34);
        assert_eq!(cost(0, 0x447A_0000), 2);
    }

    #[test]
    fn precision_derives_the_fewest_bits() {
        let c = |min, max, p| FloatRangeConfig::with_precision(min, max, p).effective_bits();
        assert_eq!(c(0.0, 1.0, 1.0 / 255.0), 8);
        assert_eq!(c(0.0, 1.0, 0.0039), 9);
        assert_eq!(c(0.0, 100.0, 0.1), 10);
        assert_eq!(c(0.0, 100.0, 1.0), 7);
        assert_eq!(c(0.0, 1.0, 2.0), 1);
        assert_eq!(c(0.0, 1_000_000.0, 0.01), 27);
        assert_eq!(c(-1.0, 1.0, 2.0 / 1023.0), 10);
        // The step actually used never exceeds the requested precision.
        for p in [0.3, 0.07, 1e-5, 0.123_456] {
            let cfg = FloatRangeConfig::with_precision(-50.0, 50.0, p);
            assert!(cfg.step() <= p, "step {} > precision {p}", cfg.step());
            let coarser = FloatRangeConfig::with_bits(-50.0, 50.0, cfg.effective_bits() - 1);
            assert!(coarser.step() > p, "one bit fewer would have done for {p}");
        }
    }

    #[test]
    fn config_validation_messages() {
        let err = |c: FloatRangeConfig| RangedF32Serializer::validate_config(&c).unwrap_err();
        assert!(err(FloatRangeConfig::with_bits(1.0, 0.0, 8)).contains("less than `max"));
        assert!(err(FloatRangeConfig::with_bits(0.0, 0.0, 8)).contains("less than `max"));
        assert!(err(FloatRangeConfig::with_bits(0.0, 1.0, 33)).contains("at most 32"));
        assert!(err(FloatRangeConfig::with_precision(0.0, 1.0, 0.0)).contains("resolution"));
        assert!(err(FloatRangeConfig::with_precision(0.0, 1.0, -0.5)).contains("greater than 0"));
        assert!(
            err(FloatRangeConfig::with_precision(0.0, 1.0, f64::NAN)).contains("greater than 0")
        );
        assert!(err(FloatRangeConfig::with_bits(f64::NEG_INFINITY, 0.0, 8)).contains("finite"));
        assert!(err(FloatRangeConfig::with_bits(0.0, f64::NAN, 8)).contains("finite"));
        assert!(err(FloatRangeConfig::with_bits(-f64::MAX, f64::MAX, 8)).contains("overflows"));
        assert!(
            err(FloatRangeConfig::with_precision(0.0, 1e6, 1e-6)).contains("too fine for 32 bits")
        );
        assert!(
            err(FloatRangeConfig {
                precision: 0.1,
                ..FloatRangeConfig::UNIT
            })
            .contains("not both")
        );
        assert!(err(FloatRangeConfig::DEFAULT).contains("`bits = N`"));
        assert!(err(FloatRangeConfig::with_bits(0.0, 1.0, 24)).contains("finer than `f32`"));
        assert!(err(FloatRangeConfig::with_bits(0.0, 1e39, 8)).contains("do not fit in `f32`"));
        assert!(
            RangedF64Serializer::validate_config(&FloatRangeConfig::with_bits(0.0, 1.0, 32))
                .is_ok()
        );
        assert!(
            RangedF64Serializer::validate_config(&FloatRangeConfig::with_bits(
                1e12,
                1e12 + 1.0,
                32
            ))
            .is_err()
        );
        assert!(RangedF32Serializer::validate_config(&FloatRangeConfig::UNIT).is_ok());
        assert!(
            RangedF32Serializer::validate_config(&FloatRangeConfig::with_bits(-1.0, 1.0, 20))
                .is_ok()
        );
        assert!(
            RangedF32Serializer::validate_config(&FloatRangeConfig::with_bits(-1.0, 1.0, 21))
                .is_err()
        );
    }

    #[test]
    fn ranged_endpoints_are_exact() {
        for c in [
            FloatRangeConfig::UNIT,
            FloatRangeConfig::with_bits(-1.0, 1.0, 10),
            FloatRangeConfig::with_bits(0.1, 0.7, 5),
            FloatRangeConfig::with_bits(-1e6, 1e6, 16),
        ] {
            let top = c.max_index();
            assert_eq!(RangedF32Serializer::dequantize(&c, &0), c.min as f32);
            assert_eq!(RangedF32Serializer::dequantize(&c, &top), c.max as f32);
            assert_eq!(RangedF32Serializer::quantize(&c, &(c.min as f32)), 0);
            assert_eq!(RangedF32Serializer::quantize(&c, &(c.max as f32)), top);
            assert_eq!(RangedF32Serializer::quantize(&c, &f32::NAN), 0);
            assert_eq!(RangedF32Serializer::quantize(&c, &f32::INFINITY), top);
            assert_eq!(RangedF32Serializer::quantize(&c, &f32::NEG_INFINITY), 0);
            assert_eq!(bits_of::<RangedF32Serializer>(&c, &top), c.bits as usize);
        }
    }

    #[test]
    fn invalid_configs_never_panic() {
        for c in [
            FloatRangeConfig::DEFAULT,
            FloatRangeConfig::with_bits(1.0, 0.0, 8),
            FloatRangeConfig::with_bits(f64::NAN, f64::NAN, 99),
            FloatRangeConfig::with_precision(-f64::MAX, f64::MAX, 0.0),
            FloatRangeConfig::with_precision(0.0, 1.0, 1e-300),
        ] {
            let q = RangedF32Serializer::quantize(&c, &0.5);
            assert!(q <= c.max_index());
            let _ = RangedF64Serializer::dequantize(&c, &q);
            assert!((1..=32).contains(&c.effective_bits()));
        }
    }

    #[test]
    fn zero_exact_recipe_from_the_docs() {
        let symmetric = FloatRangeConfig::with_bits(-1.0, 1.0, 10);
        assert_ne!(symmetric.dequantize(symmetric.quantize(0.0)), 0.0);
        let shifted = FloatRangeConfig::with_bits(-1.0, 1.0 + 2.0 / 1022.0, 10);
        assert!(RangedF32Serializer::validate_config(&shifted).is_ok());
        let zero = RangedF32Serializer::quantize(&shifted, &0.0);
        assert_eq!(zero, 511);
        assert_eq!(RangedF32Serializer::dequantize(&shifted, &zero), 0.0);
    }

    #[test]
    fn unit_float_is_iris_normalized_float() {
        assert_eq!(UnitF32Serializer::quantize(&NoConfig, &0.0), 0);
        assert_eq!(UnitF32Serializer::quantize(&NoConfig, &1.0), 255);
        assert_eq!(UnitF32Serializer::quantize(&NoConfig, &0.5), 128);
        for q in 0..=255u8 {
            let v = UnitF32Serializer::dequantize(&NoConfig, &q);
            assert_eq!(UnitF32Serializer::quantize(&NoConfig, &v), q);
        }
    }
}
