//! Quantized glam vectors: [`Vec2Serializer`], [`Vec3Serializer`] (Iris's
//! `FVectorQuantizedNetSerializer`), [`Vec3AxesSerializer`] (a range per axis, Iris's
//! 54-bit position) and [`UnitVec3Serializer`] (unit directions).
//!
//! This module owns fixed-point quantization of `f32` components over a range (also used
//! by [`super::quat`]) and the vector wire formats. It knows nothing of objects or masks.
//!
//! # Encoding
//!
//! Each component is clamped to the configured range and rounded to the nearest step;
//! the quantized form is the step index, a `u32` per component. On the wire, each
//! component is its index in a fixed number of bits `b`, x first:
//!
//! ```text
//! Vec3: [x: b][y: b][z: b]        Vec2: [x: b][y: b]
//! ```
//!
//! Delta: the member's components through the residual code of [`super::delta`]
//! (`[0][k selector: 2][one Exp-Golomb code per component]`), or `[1]` and the full
//! encoding when that is not longer: never more than the full encoding plus one bit. A
//! 21-bit component that moved 2 steps costs 3 bits, one that moved 20 steps 8 to 9.
//!
//! # Choosing the bits
//!
//! [`VectorConfig`] gives a range `min..=max`, a `precision` (the wanted step) and a
//! `bits` cap. The encoding uses whichever needs **fewer** bits:
//! - precision mode: `steps = ceil((max - min) / precision)`, step = `precision`,
//!   `b = bits_for_count(steps + 1)`, the top of the range is `min + steps * precision`;
//! - bits mode (when precision would need more than `bits`): `2^bits - 1` steps spread
//!   evenly over `min..=max`, `b = bits`.
//!
//! Defaults (Iris's quantized vector: a 20-km map in world units of 1 cm, as in
//! Unreal):
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `min` | `-1_048_576.0` (−2^20) | lowest value per component |
//! | `max` | `1_048_575.0` (2^20 − 1) | highest value per component |
//! | `precision` | `1.0` (1 cm) | wanted step |
//! | `bits` | `32` | most bits per component |
//! | **result** | 21 bits per component | Vec3 63 bits, Vec2 42 bits (vs 96 / 64 raw) |
//!
//! For metre units use, for example,
//! `VectorConfig { min: -4096.0, max: 4096.0, precision: 0.01, ..VectorConfig::DEFAULT }`
//! (20 bits per component), or [`VectorConfig::with_precision`].
//!
//! Because the cheaper of the two wins, `bits` alone on a small range may be overruled by
//! the default precision of 1 (`min: 0, max: 10, bits: 16` sends 4 bits in steps of 1).
//! For an exact bit count use [`VectorConfig::with_bits`], which sets the precision as
//! fine as possible. A config whose step is finer than `f32` can resolve over its
//! range is rejected by `validate_config`, because the quantized value would not survive
//! a round trip through `f32`.
//!
//! ```
//! use glam::Vec3;
//! use replicate::serialize::*;
//! let (bits, v) = roundtrip::<Vec3Serializer>(&VectorConfig::DEFAULT, &Vec3::new(100.4, -2.0, 7.6)).unwrap();
//! assert_eq!(bits, 63);
//! assert_eq!(v, Vec3::new(100.0, -2.0, 8.0));
//! ```

use glam::{Vec2, Vec3, Vec4};

use super::delta::{
    Component, MAX_RESIDUAL_COMPONENTS, read_residuals, shift_or_escape, write_residuals,
};
use super::{
    NetQuantize, NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher,
};
use crate::bits::{BitReader, BitWriter, bits_for_count};

/// `raw.ceil()` for `raw` up to `u32::MAX` (0 or less stays at most 0); infinity for
/// larger or non-finite ratios. A quantizer is built on every serialize call, and
/// `f64::ceil` is a library call on baseline x86-64 (and not `const`).
#[inline]
const fn ceil_steps(raw: f64) -> f64 {
    if raw.is_finite() && raw <= u32::MAX as f64 {
        let t = raw as i64 as f64;
        if t < raw { t + 1.0 } else { t }
    } else {
        f64::INFINITY
    }
}

/// Fixed-point quantizer of one `f32` component: `value = min + index * step`,
/// `index` in `0..=max_index`, written in `bits` bits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Quantizer {
    min: f64,
    step: f64,
    max_index: u32,
    bits: u32,
}

impl Quantizer {
    /// Evenly spread `2^bits - 1` steps over `min..=max` (`bits` in `1..=32`).
    #[inline]
    fn from_bits(min: f64, max: f64, bits: u32) -> Self {
        let max_index = if bits >= 32 {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        };
        Self {
            min,
            step: (max - min) / max_index as f64,
            max_index,
            bits,
        }
    }

    /// A symmetric range `-half..=half` with `2^bits - 2` steps so that 0 is exact
    /// (`bits` in `2..=32`).
    #[inline]
    pub(super) fn symmetric(half: f64, bits: u32) -> Self {
        let max_index = if bits >= 32 {
            u32::MAX - 1
        } else {
            (1u32 << bits) - 2
        };
        Self {
            min: -half,
            step: 2.0 * half / max_index as f64,
            max_index,
            bits,
        }
    }

    /// The quantizer a (finite, ordered) [`VectorConfig`] selects.
    #[inline]
    fn for_config(c: &VectorConfig) -> Self {
        let (min, max) = (c.min as f64, c.max as f64);
        let cap = c.bits.clamp(1, 32);
        let steps = ceil_steps((max - min) / c.precision as f64);
        if steps.is_finite() && steps >= 1.0 && steps <= u32::MAX as f64 {
            let steps = steps as u32;
            let bits = bits_for_count(steps as u64 + 1);
            if bits <= cap {
                return Self {
                    min,
                    step: c.precision as f64,
                    max_index: steps,
                    bits,
                };
            }
        }
        Self::from_bits(min, max, cap)
    }

    /// The index of the middle of the range (exactly 0 for [`symmetric`](Self::symmetric)).
    #[inline]
    pub(super) fn center(&self) -> u32 {
        self.max_index / 2
    }

    /// Bits per component on the wire.
    #[inline]
    pub(super) fn bits(&self) -> u32 {
        self.bits
    }

    /// The index nearest to `v`, clamped to the range (NaN counts as 0.0).
    #[inline]
    pub(super) fn quantize(&self, v: f32) -> u32 {
        self.quantize_f64(v as f64)
    }

    /// The index nearest to `v`, clamped to the range (NaN counts as 0.0).
    #[inline]
    pub(super) fn quantize_f64(&self, v: f64) -> u32 {
        let v = if v.is_nan() { 0.0 } else { v };
        let x = ((v - self.min) / self.step).round();
        x.clamp(0.0, self.max_index as f64) as u32
    }

    /// The value of index `q` (clamped to the range).
    #[inline]
    pub(super) fn dequantize(&self, q: u32) -> f32 {
        self.dequantize_f64(q) as f32
    }

    /// The value of index `q` in `f64` (clamped to the range).
    #[inline]
    pub(super) fn dequantize_f64(&self, q: u32) -> f64 {
        self.min + q.min(self.max_index) as f64 * self.step
    }

    /// Whether `q` is a valid index.
    #[inline]
    pub(super) fn contains(&self, q: u32) -> bool {
        q <= self.max_index
    }

    /// `Err` when the step is too fine for `f32` over the range, so that dequantized
    /// values would not quantize back to the same index.
    pub(super) fn check_resolution(&self) -> std::result::Result<(), String> {
        let top = self.min + self.max_index as f64 * self.step;
        let largest = self.min.abs().max(top.abs()) as f32;
        if !largest.is_finite() {
            return Err("range is not representable as f32".into());
        }
        let ulp = (f32::from_bits(largest.to_bits() + 1) - largest) as f64;
        if self.step < 2.0 * ulp {
            return Err(format!(
                "a step of {} is finer than f32 resolves near {largest} ({ulp}); use fewer bits, a coarser precision or a smaller range",
                self.step
            ));
        }
        Ok(())
    }

    /// Reads one component, rejecting indices past the range.
    #[inline]
    pub(super) fn read(&self, r: &mut BitReader, name: &'static str) -> Result<u32> {
        let q = r.read_bits(self.bits) as u32;
        r.check()?;
        if !self.contains(q) {
            return Err(SerializeError::invalid(
                name,
                "component index out of range",
            ));
        }
        Ok(q)
    }
}

/// Writes one member's components (`q`, each quantized by its entry of `qzs`) as
/// residuals against `prev`, or the escape and the full components.
#[inline]
pub(super) fn write_components_delta(
    qzs: &[Quantizer],
    q: &[u32],
    prev: &[u32],
    w: &mut BitWriter,
) {
    let mut comps = [Component::new(0, 0, 1); MAX_RESIDUAL_COMPONENTS];
    let n = q.len().min(MAX_RESIDUAL_COMPONENTS);
    let mut full_len = 0;
    for i in 0..n {
        let bits = qzs[i].bits();
        comps[i] = Component::new(q[i] as u64, prev[i] as u64, bits);
        full_len += bits;
    }
    if write_residuals(w, &comps[..n], full_len) {
        for i in 0..n {
            w.write_bits(q[i] as u64, qzs[i].bits());
        }
    }
}

/// Mirror of [`write_components_delta`], rejecting indices past the range.
#[inline]
pub(super) fn read_components_delta<const N: usize>(
    qzs: &[Quantizer; N],
    prev: &[u32; N],
    r: &mut BitReader,
    name: &'static str,
) -> Result<[u32; N]> {
    let mut comps = [Component::new(0, 0, 1); N];
    for i in 0..N {
        comps[i] = Component::new(0, prev[i] as u64, qzs[i].bits());
    }
    let mut out = [0u32; N];
    if read_residuals(r, &mut comps)? {
        for i in 0..N {
            out[i] = qzs[i].read(r, name)?;
        }
        return Ok(out);
    }
    checked_indices(qzs, comps.map(|c| c.value), name)
}

/// Components (each below `2^32`) as indices, each checked against its quantizer.
#[inline]
fn checked_indices<const N: usize>(
    qzs: &[Quantizer; N],
    values: [u64; N],
    name: &'static str,
) -> Result<[u32; N]> {
    let mut out = [0u32; N];
    for i in 0..N {
        let q = values[i] as u32;
        if !qzs[i].contains(q) {
            return Err(SerializeError::invalid(
                name,
                "component index out of range",
            ));
        }
        out[i] = q;
    }
    Ok(out)
}

/// [`NetSerializer::shift`] of components quantized by `qzs`, coded by
/// [`write_components_delta`] and read back by [`read_components_delta`].
#[inline]
fn shift_components<const N: usize>(
    qzs: &[Quantizer; N],
    x: &[u32; N],
    y: &[u32; N],
    z: &[u32; N],
    name: &'static str,
) -> Result<[u32; N]> {
    let comps = std::array::from_fn(|i| Component::new(y[i] as u64, z[i] as u64, qzs[i].bits()));
    let full_len = qzs.iter().map(Quantizer::bits).sum();
    // The escape carries `y` in full, each component in its bits.
    let moved = shift_or_escape(&comps, full_len, x.map(u64::from));
    checked_indices(qzs, moved, name)
}

/// Configuration of [`Vec2Serializer`] and [`Vec3Serializer`]; see the
/// [module docs](self) for how `precision` and `bits` combine and for the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorConfig {
    /// Lowest value of a component.
    pub min: f32,
    /// Highest value of a component.
    pub max: f32,
    /// The wanted step between representable values (> 0).
    pub precision: f32,
    /// Most bits per component (`1..=32`).
    pub bits: u32,
}

impl VectorConfig {
    /// ±2^20 world units at a precision of 1 unit: 21 bits per component.
    pub const DEFAULT: VectorConfig = VectorConfig {
        min: -1_048_576.0,
        max: 1_048_575.0,
        precision: 1.0,
        bits: 32,
    };

    /// `min..=max` in exactly `bits` bits per component (`2^bits - 1` even steps): the
    /// precision is set as fine as possible so that the `bits` cap always decides.
    ///
    /// ```
    /// use replicate::serialize::VectorConfig;
    /// const AIM: VectorConfig = VectorConfig::with_bits(-10.0, 10.0, 12);
    /// assert_eq!(AIM.component_bits(), 12);
    /// ```
    pub const fn with_bits(min: f32, max: f32, bits: u32) -> Self {
        VectorConfig {
            min,
            max,
            precision: f32::MIN_POSITIVE,
            bits,
        }
    }

    /// `min..=max` in steps of `precision`, with as many bits as that needs.
    ///
    /// ```
    /// use replicate::serialize::VectorConfig;
    /// const METRES: VectorConfig = VectorConfig::with_precision(-4096.0, 4096.0, 0.01);
    /// assert_eq!(METRES.component_bits(), 20);
    /// ```
    pub const fn with_precision(min: f32, max: f32, precision: f32) -> Self {
        VectorConfig {
            min,
            max,
            precision,
            bits: 32,
        }
    }

    /// The checks `#[derive(Replicated)]` runs on a member's config at compile time
    /// (the rules of [`NetSerializerConfig::validate`] except the `f32` resolution
    /// check, with fixed messages).
    pub const fn const_check(&self) -> std::result::Result<(), &'static str> {
        if !(self.min.is_finite() && self.max.is_finite() && self.precision.is_finite()) {
            return Err("`min`, `max` and `precision` must all be finite");
        }
        if self.min >= self.max {
            return Err("`min` must be less than `max`; swap them or widen the range");
        }
        if self.precision <= 0.0 {
            return Err("`precision` (the largest acceptable error) must be greater than 0");
        }
        if self.bits == 0 || self.bits > 32 {
            return Err("`bits` must be in 1..=32 for a vector component");
        }
        // The quantizer `Quantizer::for_config` selects, and its `check_resolution`.
        let (min, max) = (self.min as f64, self.max as f64);
        let steps = ceil_steps((max - min) / self.precision as f64);
        let (step, max_index) = if steps.is_finite()
            && steps >= 1.0
            && steps <= u32::MAX as f64
            && bits_for_count(steps as u64 + 1) <= self.bits
        {
            (self.precision as f64, steps as u32)
        } else {
            let max_index = if self.bits >= 32 {
                u32::MAX
            } else {
                (1u32 << self.bits) - 1
            };
            ((max - min) / max_index as f64, max_index)
        };
        let top = min + max_index as f64 * step;
        let largest = (if min.abs() > top.abs() {
            min.abs()
        } else {
            top.abs()
        }) as f32;
        if !largest.is_finite() {
            return Err("the range is not representable as `f32`");
        }
        let ulp = (f32::from_bits(largest.to_bits() + 1) - largest) as f64;
        if step < 2.0 * ulp {
            return Err(
                "the step is finer than `f32` resolves over this range; use a coarser \
                 `precision`, fewer `bits` or a smaller range (`min`/`max`)",
            );
        }
        Ok(())
    }

    /// Bits per component this config puts on the wire (meaningful for valid configs).
    pub fn component_bits(&self) -> u32 {
        Quantizer::for_config(self).bits()
    }
}

impl Default for VectorConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for VectorConfig {
    const DEFAULT: Self = VectorConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_f32(self.min);
        hasher.write_f32(self.max);
        hasher.write_f32(self.precision);
        hasher.write_u32(self.bits);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        if !(self.min.is_finite() && self.max.is_finite() && self.precision.is_finite()) {
            return Err(format!(
                "`min = {}`, `max = {}` and `precision = {}` must all be finite",
                self.min, self.max, self.precision
            ));
        }
        if self.min >= self.max {
            return Err(format!(
                "`min = {}` must be less than `max = {}`",
                self.min, self.max
            ));
        }
        if self.precision <= 0.0 {
            return Err(format!("`precision = {}` must be positive", self.precision));
        }
        if self.bits == 0 || self.bits > 32 {
            return Err(format!("`bits = {}` must be in 1..=32", self.bits));
        }
        Quantizer::for_config(self).check_resolution()
    }
}

#[inline]
fn write_components(qz: &Quantizer, q: &[u32], w: &mut BitWriter) {
    for &c in q {
        w.write_bits(c as u64, qz.bits());
    }
}

#[inline]
fn check_components(qz: &Quantizer, q: &[u32], name: &'static str) -> Result<()> {
    if q.iter().all(|&c| qz.contains(c)) {
        Ok(())
    } else {
        Err(SerializeError::invalid(
            name,
            "component index out of range",
        ))
    }
}

macro_rules! vector_serializer {
    ($name:ident, $ty:ty, $n:literal, $label:literal, [$($field:ident),+]) => {
        #[doc = concat!("`glam::", stringify!($ty), "` quantized per component over a range: ", $label)]
        /// See the [module docs](self) for the encoding and [`VectorConfig`] for the defaults.
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = [u32; $n];
            type Config = VectorConfig;
            const NAME: &'static str = stringify!($ty);

            fn quantize(config: &VectorConfig, v: &$ty) -> [u32; $n] {
                let qz = Quantizer::for_config(config);
                [$(qz.quantize(v.$field)),+]
            }
            fn dequantize(config: &VectorConfig, q: &[u32; $n]) -> $ty {
                let qz = Quantizer::for_config(config);
                let [$($field),+] = *q;
                <$ty>::new($(qz.dequantize($field)),+)
            }
            fn serialize(config: &VectorConfig, q: &[u32; $n], w: &mut BitWriter) {
                write_components(&Quantizer::for_config(config), q, w);
            }
            fn deserialize(config: &VectorConfig, r: &mut BitReader) -> Result<[u32; $n]> {
                let qz = Quantizer::for_config(config);
                let mut out = [0u32; $n];
                for c in &mut out {
                    *c = qz.read(r, Self::NAME)?;
                }
                Ok(out)
            }
            fn serialize_delta(
                config: &VectorConfig,
                q: &[u32; $n],
                prev: &[u32; $n],
                w: &mut BitWriter,
            ) {
                let qz = Quantizer::for_config(config);
                write_components_delta(&[qz; $n], q, prev, w);
            }
            fn deserialize_delta(
                config: &VectorConfig,
                prev: &[u32; $n],
                r: &mut BitReader,
            ) -> Result<[u32; $n]> {
                let qz = Quantizer::for_config(config);
                read_components_delta(&[qz; $n], prev, r, Self::NAME)
            }
            fn validate(config: &VectorConfig, q: &[u32; $n]) -> Result<()> {
                check_components(&Quantizer::for_config(config), q, Self::NAME)
            }
            fn shift(
                config: &VectorConfig,
                x: &[u32; $n],
                y: &[u32; $n],
                z: &[u32; $n],
            ) -> Result<[u32; $n]> {
                shift_components(&[Quantizer::for_config(config); $n], x, y, z, Self::NAME)
            }
            fn max_bits(config: &VectorConfig) -> Option<u32> {
                Some($n * Quantizer::for_config(config).bits())
            }
        }

        impl NetQuantize for $ty {
            type Serializer = $name;
            const BITS: (u32, u32) = (1, 32);
        }
    };
}

vector_serializer!(Vec2Serializer, Vec2, 2, "x then y.", [x, y]);
vector_serializer!(Vec3Serializer, Vec3, 3, "x, y then z.", [x, y, z]);
vector_serializer!(Vec4Serializer, Vec4, 4, "x, y, z then w.", [x, y, z, w]);

/// Configuration of [`Vec3AxesSerializer`]: one [`VectorConfig`] per axis.
///
/// The default is Iris's 10 km x 10 km map at 1 cm with 100 m of height:
///
/// | field | default | bits |
/// |---|---|---|
/// | `x` | `0..=1_000_000` at 1 | 20 |
/// | `y` | `0..=1_000_000` at 1 | 20 |
/// | `z` | `0..=10_000` at 1 | 14 |
/// | **total** | | **54** (vs 96 raw) |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AxesConfig {
    /// The x axis.
    pub x: VectorConfig,
    /// The y axis.
    pub y: VectorConfig,
    /// The z axis.
    pub z: VectorConfig,
}

impl AxesConfig {
    /// Iris's map: 20 + 20 + 14 bits.
    pub const DEFAULT: AxesConfig = AxesConfig {
        x: VectorConfig::with_precision(0.0, 1_000_000.0, 1.0),
        y: VectorConfig::with_precision(0.0, 1_000_000.0, 1.0),
        z: VectorConfig::with_precision(0.0, 10_000.0, 1.0),
    };

    #[inline]
    fn quantizers(&self) -> [Quantizer; 3] {
        [
            Quantizer::for_config(&self.x),
            Quantizer::for_config(&self.y),
            Quantizer::for_config(&self.z),
        ]
    }
}

impl Default for AxesConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for AxesConfig {
    const DEFAULT: Self = AxesConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        self.x.fingerprint(hasher);
        self.y.fingerprint(hasher);
        self.z.fingerprint(hasher);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        self.x.validate().map_err(|e| format!("x: {e}"))?;
        self.y.validate().map_err(|e| format!("y: {e}"))?;
        self.z.validate().map_err(|e| format!("z: {e}"))
    }
}

/// `glam::Vec3` with a separate range and precision per axis (Iris's quantized
/// position: 54 bits for a 10 km map at 1 cm). Each component is encoded as for
/// [`Vec3Serializer`], in its own axis's bits, x then y then z; delta per component.
///
/// ```
/// use glam::Vec3;
/// use replicate::serialize::*;
/// let p = Vec3::new(250_000.0, 730_000.0, 1_200.0);
/// let (bits, back) = roundtrip::<Vec3AxesSerializer>(&AxesConfig::DEFAULT, &p).unwrap();
/// assert_eq!((bits, back), (54, p));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Vec3AxesSerializer;

impl NetSerializer for Vec3AxesSerializer {
    type Source = Vec3;
    type Quantized = [u32; 3];
    type Config = AxesConfig;
    const NAME: &'static str = "Vec3Axes";

    fn quantize(config: &AxesConfig, v: &Vec3) -> [u32; 3] {
        let [x, y, z] = config.quantizers();
        [x.quantize(v.x), y.quantize(v.y), z.quantize(v.z)]
    }
    fn dequantize(config: &AxesConfig, q: &[u32; 3]) -> Vec3 {
        let [x, y, z] = config.quantizers();
        Vec3::new(x.dequantize(q[0]), y.dequantize(q[1]), z.dequantize(q[2]))
    }
    fn serialize(config: &AxesConfig, q: &[u32; 3], w: &mut BitWriter) {
        for (qz, &c) in config.quantizers().iter().zip(q) {
            w.write_bits(c as u64, qz.bits());
        }
    }
    fn deserialize(config: &AxesConfig, r: &mut BitReader) -> Result<[u32; 3]> {
        let [x, y, z] = config.quantizers();
        Ok([
            x.read(r, Self::NAME)?,
            y.read(r, Self::NAME)?,
            z.read(r, Self::NAME)?,
        ])
    }
    fn serialize_delta(config: &AxesConfig, q: &[u32; 3], prev: &[u32; 3], w: &mut BitWriter) {
        write_components_delta(&config.quantizers(), q, prev, w);
    }
    fn deserialize_delta(
        config: &AxesConfig,
        prev: &[u32; 3],
        r: &mut BitReader,
    ) -> Result<[u32; 3]> {
        read_components_delta(&config.quantizers(), prev, r, Self::NAME)
    }
    fn validate(config: &AxesConfig, q: &[u32; 3]) -> Result<()> {
        let ok = config
            .quantizers()
            .iter()
            .zip(q)
            .all(|(qz, &c)| qz.contains(c));
        if ok {
            Ok(())
        } else {
            Err(SerializeError::invalid(
                Self::NAME,
                "component index out of range",
            ))
        }
    }
    fn max_bits(config: &AxesConfig) -> Option<u32> {
        Some(config.quantizers().iter().map(Quantizer::bits).sum())
    }
    fn shift(config: &AxesConfig, x: &[u32; 3], y: &[u32; 3], z: &[u32; 3]) -> Result<[u32; 3]> {
        shift_components(&config.quantizers(), x, y, z, Self::NAME)
    }
}

/// Configuration of [`UnitVec3Serializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `bits` | 16 | bits per component (`2..=22`), 48 bits per vector by default |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitVecConfig {
    /// Bits per component.
    pub bits: u32,
}

impl UnitVecConfig {
    /// 16 bits per component (Unreal's `FVector_NetQuantizeNormal`).
    pub const DEFAULT: UnitVecConfig = UnitVecConfig { bits: 16 };

    #[inline]
    fn quantizer(&self) -> Quantizer {
        Quantizer::symmetric(1.0, self.bits.clamp(2, 32))
    }
}

impl Default for UnitVecConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for UnitVecConfig {
    const DEFAULT: Self = UnitVecConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.bits);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        if !(2..=22).contains(&self.bits) {
            return Err(format!("`bits = {}` must be in 2..=22", self.bits));
        }
        self.quantizer().check_resolution()
    }
}

/// A unit-length `glam::Vec3` (a direction or normal): each component in `-1..=1` with
/// `2^bits - 2` steps (so 0 is exact), `[x: bits][y: bits][z: bits]`, 48 bits by
/// default. Delta: per component, as for [`Vec3Serializer`].
///
/// The received vector is not renormalised (that would break the exact round trip of
/// quantized values); its length is within about one step (`2 / (2^bits - 2)`) of 1.
/// Non-unit inputs are sent as they are after clamping each component.
///
/// ```
/// use glam::Vec3;
/// use replicate::serialize::*;
/// let (bits, v) = roundtrip::<UnitVec3Serializer>(&UnitVecConfig::DEFAULT, &Vec3::Z).unwrap();
/// assert_eq!((bits, v), (48, Vec3::Z));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitVec3Serializer;

impl NetSerializer for UnitVec3Serializer {
    type Source = Vec3;
    type Quantized = [u32; 3];
    type Config = UnitVecConfig;
    const NAME: &'static str = "UnitVec3";

    fn quantize(config: &UnitVecConfig, v: &Vec3) -> [u32; 3] {
        let qz = config.quantizer();
        [qz.quantize(v.x), qz.quantize(v.y), qz.quantize(v.z)]
    }
    fn dequantize(config: &UnitVecConfig, q: &[u32; 3]) -> Vec3 {
        let qz = config.quantizer();
        Vec3::new(
            qz.dequantize(q[0]),
            qz.dequantize(q[1]),
            qz.dequantize(q[2]),
        )
    }
    fn serialize(config: &UnitVecConfig, q: &[u32; 3], w: &mut BitWriter) {
        write_components(&config.quantizer(), q, w);
    }
    fn deserialize(config: &UnitVecConfig, r: &mut BitReader) -> Result<[u32; 3]> {
        let qz = config.quantizer();
        Ok([
            qz.read(r, Self::NAME)?,
            qz.read(r, Self::NAME)?,
            qz.read(r, Self::NAME)?,
        ])
    }
    fn serialize_delta(config: &UnitVecConfig, q: &[u32; 3], prev: &[u32; 3], w: &mut BitWriter) {
        write_components_delta(&[config.quantizer(); 3], q, prev, w);
    }
    fn deserialize_delta(
        config: &UnitVecConfig,
        prev: &[u32; 3],
        r: &mut BitReader,
    ) -> Result<[u32; 3]> {
        read_components_delta(&[config.quantizer(); 3], prev, r, Self::NAME)
    }
    fn validate(config: &UnitVecConfig, q: &[u32; 3]) -> Result<()> {
        check_components(&config.quantizer(), q, Self::NAME)
    }
    fn max_bits(config: &UnitVecConfig) -> Option<u32> {
        Some(3 * config.quantizer().bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::roundtrip;

    #[test]
    fn default_is_21_bits_per_component() {
        assert_eq!(VectorConfig::DEFAULT.component_bits(), 21);
        assert_eq!(Vec3Serializer::max_bits(&VectorConfig::DEFAULT), Some(63));
        assert_eq!(Vec2Serializer::max_bits(&VectorConfig::DEFAULT), Some(42));
        assert!(Vec3Serializer::validate_config(&VectorConfig::DEFAULT).is_ok());
    }

    #[test]
    fn iris_map_example() {
        // 10 km x 10 km at 1 cm: 0..1_000_000 cm needs 20 bits; Z 0..10_000 needs 14.
        let xy = VectorConfig {
            min: 0.0,
            max: 1_000_000.0,
            ..VectorConfig::DEFAULT
        };
        let z = VectorConfig {
            min: 0.0,
            max: 10_000.0,
            ..VectorConfig::DEFAULT
        };
        assert_eq!(xy.component_bits(), 20);
        assert_eq!(z.component_bits(), 14);
    }

    #[test]
    fn bits_cap_wins_when_smaller() {
        let c = VectorConfig {
            bits: 8,
            ..VectorConfig::DEFAULT
        };
        assert_eq!(c.component_bits(), 8);
        let (bits, v) = roundtrip::<Vec2Serializer>(&c, &Vec2::new(-1e9, 1e9)).unwrap();
        assert_eq!(bits, 16);
        assert_eq!(v, Vec2::new(c.min, c.max)); // clamped to the ends of the range
    }

    #[test]
    fn constructors() {
        let small = VectorConfig {
            min: 0.0,
            max: 10.0,
            bits: 16,
            ..VectorConfig::DEFAULT
        };
        assert_eq!(small.component_bits(), 4); // precision 1 wins: the documented trap
        let exact = VectorConfig::with_bits(0.0, 10.0, 16);
        assert_eq!(exact.component_bits(), 16);
        assert!(Vec3Serializer::validate_config(&exact).is_ok());
        let (_, v) = roundtrip::<Vec3Serializer>(&exact, &Vec3::new(0.0, 5.0, 10.0)).unwrap();
        assert!((v - Vec3::new(0.0, 5.0, 10.0)).abs().max_element() < 1e-3);
    }

    #[test]
    fn clamps_and_handles_nan() {
        let (_, v) = roundtrip::<Vec3Serializer>(
            &VectorConfig::DEFAULT,
            &Vec3::new(f32::NAN, f32::INFINITY, -3e7),
        )
        .unwrap();
        assert_eq!(v, Vec3::new(0.0, 1_048_575.0, -1_048_576.0));
    }

    #[test]
    fn config_validation() {
        let ok = VectorConfig::DEFAULT;
        for bad in [
            VectorConfig {
                min: 1.0,
                max: 1.0,
                ..ok
            },
            VectorConfig {
                min: 2.0,
                max: 1.0,
                ..ok
            },
            VectorConfig {
                precision: 0.0,
                ..ok
            },
            VectorConfig {
                precision: -1.0,
                ..ok
            },
            VectorConfig { bits: 0, ..ok },
            VectorConfig { bits: 33, ..ok },
            VectorConfig {
                max: f32::INFINITY,
                ..ok
            },
            VectorConfig {
                min: f32::NAN,
                ..ok
            },
            // 1 mm over ±1e6: finer than f32 resolves there.
            VectorConfig {
                precision: 0.001,
                ..ok
            },
        ] {
            assert!(Vec3Serializer::validate_config(&bad).is_err(), "{bad:?}");
        }
        assert!(UnitVec3Serializer::validate_config(&UnitVecConfig { bits: 1 }).is_err());
        assert!(UnitVec3Serializer::validate_config(&UnitVecConfig { bits: 23 }).is_err());
        assert!(UnitVec3Serializer::validate_config(&UnitVecConfig { bits: 8 }).is_ok());
    }

    proptest::proptest! {
        /// The derive's compile-time check accepts exactly what start-up validation does.
        #[test]
        fn const_check_agrees_with_validate(
            min in -1e7f32..1e7, span in 0.0f32..2e7, precision in -1.0f32..100.0, bits in 0u32..40,
        ) {
            let c = VectorConfig { min, max: min + span, precision: precision.max(0.0).powi(3), bits };
            proptest::prop_assert_eq!(c.const_check().is_ok(), c.validate().is_ok(), "{:?}", c);
        }
    }

    #[test]
    fn small_delta_is_cheap() {
        let c = VectorConfig::DEFAULT;
        let a = Vec3Serializer::quantize(&c, &Vec3::new(10.0, 20.0, 30.0));
        let b = Vec3Serializer::quantize(&c, &Vec3::new(12.0, 20.0, 30.0));
        let mut w = BitWriter::with_capacity_bits(128);
        Vec3Serializer::serialize_delta(&c, &b, &a, &mut w);
        // [0][k = 0][+2 steps: zigzag 4, 5 bits][0: 1 bit][0: 1 bit]
        assert_eq!(w.position(), 1 + 2 + 5 + 1 + 1);
        let bytes = w.finish().unwrap();
        assert_eq!(
            Vec3Serializer::deserialize_delta(&c, &a, &mut BitReader::new(&bytes)).unwrap(),
            b
        );
    }

    #[test]
    fn out_of_range_index_rejected() {
        // precision mode with max_index 1000 in 10 bits: 1023 is not a valid index.
        let c = VectorConfig {
            min: 0.0,
            max: 1000.0,
            ..VectorConfig::DEFAULT
        };
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bits(1023, 10);
        w.write_bits(0, 10);
        let bytes = w.finish().unwrap();
        assert!(Vec2Serializer::deserialize(&c, &mut BitReader::new(&bytes)).is_err());
    }
}
