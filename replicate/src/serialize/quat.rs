//! Rotations and transforms: [`QuatSerializer`] (Iris's `FQuatNetSerializer`,
//! "smallest three") and [`TransformSerializer`] for the [`Transform`] type defined here.
//!
//! This module owns the smallest-three quaternion encoding and the transform wire format.
//! Component quantization comes from [`super::vector`].
//!
//! # Smallest three
//!
//! A unit quaternion's largest component (by magnitude) can be rebuilt from the other
//! three, which all lie in `-1/√2..=1/√2`. `q` and `-q` are the same rotation, so the
//! quaternion is negated when needed to make the largest component positive, and only
//! its index and the other three are sent (Glenn Fiedler, "Snapshot Compression"):
//!
//! ```text
//! [largest index: 2][a: bits][b: bits][c: bits]     (a, b, c: the others in x, y, z, w order)
//! ```
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `bits` | 12 | bits per component (`4..=20`): 38 bits per rotation, a step of ~3.5e-4 (≈ 0.04°) |
//!
//! Fiedler's 9 bits (29 bits total) is enough for snapshot interpolation of fast
//! objects; 12 bits keeps slow, close-up rotations free of visible stepping.
//!
//! Dequantize rebuilds the largest component as `sqrt(1 - a² - b² - c²)` and normalises.
//! Quantize is canonical: it only returns values whose rebuilt component exceeds the
//! three sent ones by a small margin (nudging the largest sent component one step towards
//! zero in the rare near-ties where rounding breaks that), so which component is dropped
//! survives a round trip and `quantize(dequantize(q)) == q` for every `q` it returns.
//!
//! Delta: with the same largest index as the baseline, the three sent components through
//! the residual code of [`super::delta`] (`[0][k selector: 2][three Exp-Golomb codes]`);
//! `[1]` and the full value when the largest index changed or the residuals would not be
//! shorter. Never more than the full value plus one bit.
//!
//! ```
//! use glam::Quat;
//! use replicate::serialize::*;
//! let q = Quat::from_rotation_y(1.0);
//! let (bits, back) = roundtrip::<QuatSerializer>(&QuatConfig::DEFAULT, &q).unwrap();
//! assert_eq!(bits, 38);
//! assert!(back.angle_between(q) < 1e-3);
//! ```

use glam::{Quat, Vec3};

use super::delta::{Component, read_residuals, write_residuals};
use super::vector::{Quantizer, Vec3Serializer, VectorConfig};
use super::{
    NetQuantize, NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher,
};
use crate::bits::{BitReader, BitWriter};

/// Configuration of [`QuatSerializer`]; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuatConfig {
    /// Bits per sent component (`4..=20`).
    pub bits: u32,
}

impl QuatConfig {
    /// 12 bits per component, 38 bits per rotation.
    pub const DEFAULT: QuatConfig = QuatConfig { bits: 12 };

    #[inline]
    fn quantizer(&self) -> Quantizer {
        Quantizer::symmetric(std::f64::consts::FRAC_1_SQRT_2, self.bits.clamp(2, 32))
    }
}

impl QuatConfig {
    /// The check `#[derive(Replicated)]` runs on a member's config at compile time:
    /// `bits` in `4..=20`.
    pub const fn const_check(&self) -> std::result::Result<(), &'static str> {
        if self.bits < 4 || self.bits > 20 {
            return Err("`bits` must be in 4..=20 for a smallest-three quaternion");
        }
        Ok(())
    }
}

impl Default for QuatConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for QuatConfig {
    const DEFAULT: Self = QuatConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.bits);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        if !(4..=20).contains(&self.bits) {
            return Err(format!("`bits = {}` must be in 4..=20", self.bits));
        }
        self.quantizer().check_resolution()
    }
}

/// A quantized quaternion: the index of the dropped (largest) component and the other
/// three components' indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct QuantizedQuat {
    /// Index (0 = x, 1 = y, 2 = z, 3 = w) of the largest component, which is not sent.
    pub largest: u8,
    /// The other three components, in x, y, z, w order, as quantizer indices.
    pub components: [u32; 3],
}

/// Margin by which the rebuilt component must exceed the sent ones, so that float error
/// in a dequantize/quantize round trip can never change which component is dropped.
const DOMINANCE_MARGIN: f64 = 4e-6;

fn identity_quantized(qz: &Quantizer) -> QuantizedQuat {
    QuantizedQuat {
        largest: 3,
        components: [qz.center(); 3],
    }
}

/// Smallest-three quantization, canonical: the dropped component, as rebuilt by
/// [`dequantize_quat`], exceeds every sent component by [`DOMINANCE_MARGIN`]. Where
/// rounding breaks that (near-ties between the two largest components), the largest sent
/// component is moved one step towards zero until it holds.
fn quantize_quat(qz: &Quantizer, q: Quat) -> QuantizedQuat {
    let a = q.to_array().map(|v| v as f64);
    let m = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if !(a.iter().all(|v| v.is_finite()) && m > 0.0) {
        return identity_quantized(qz);
    }
    let a = a.map(|v| v / m);
    let len = a.iter().map(|v| v * v).sum::<f64>().sqrt();
    let a = a.map(|v| v / len);
    let mut largest = 0;
    for i in 1..4 {
        if a[i].abs() > a[largest].abs() {
            largest = i;
        }
    }
    let sign = if a[largest] < 0.0 { -1.0 } else { 1.0 };
    let mut components = [0u32; 3];
    let mut j = 0;
    for (i, &v) in a.iter().enumerate() {
        if i != largest {
            components[j] = qz.quantize_f64(v * sign);
            j += 1;
        }
    }
    let center = qz.center();
    for _ in 0..64 {
        let small = components.map(|c| qz.dequantize_f64(c));
        let rebuilt = (1.0 - small.iter().map(|v| v * v).sum::<f64>())
            .max(0.0)
            .sqrt();
        let mut k = 0;
        for i in 1..3 {
            if small[i].abs() > small[k].abs() {
                k = i;
            }
        }
        if rebuilt > small[k].abs() + DOMINANCE_MARGIN {
            return QuantizedQuat {
                largest: largest as u8,
                components,
            };
        }
        let c = &mut components[k];
        *c = if *c > center { *c - 1 } else { *c + 1 };
    }
    identity_quantized(qz)
}

fn dequantize_quat(qz: &Quantizer, q: &QuantizedQuat) -> Quat {
    let largest = (q.largest & 3) as usize;
    let small: [f64; 3] = q.components.map(|c| qz.dequantize_f64(c));
    let rest = 1.0 - small.iter().map(|v| v * v).sum::<f64>();
    let big = rest.max(0.0).sqrt();
    let mut a = [0f64; 4];
    let mut j = 0;
    for (i, slot) in a.iter_mut().enumerate() {
        if i == largest {
            *slot = big;
        } else {
            *slot = small[j];
            j += 1;
        }
    }
    let len = a.iter().map(|v| v * v).sum::<f64>().sqrt();
    // len >= big >= 0 and len > 0 unless every component is 0, which `symmetric`
    // quantizers cannot produce together with big = 0 (rest would be 1).
    let a = if len > 0.0 {
        a.map(|v| v / len)
    } else {
        [0.0, 0.0, 0.0, 1.0]
    };
    Quat::from_xyzw(a[0] as f32, a[1] as f32, a[2] as f32, a[3] as f32)
}

#[inline]
fn write_quat(qz: &Quantizer, q: &QuantizedQuat, w: &mut BitWriter) {
    w.write_bits(q.largest as u64, 2);
    for &c in &q.components {
        w.write_bits(c as u64, qz.bits());
    }
}

#[inline]
fn read_quat(qz: &Quantizer, r: &mut BitReader) -> Result<QuantizedQuat> {
    let largest = r.read_bits(2) as u8;
    let mut components = [0u32; 3];
    for c in &mut components {
        *c = qz.read(r, "Quat")?;
    }
    Ok(QuantizedQuat {
        largest,
        components,
    })
}

fn write_quat_delta(qz: &Quantizer, q: &QuantizedQuat, prev: &QuantizedQuat, w: &mut BitWriter) {
    if q.largest != prev.largest {
        w.write_bool(true);
        write_quat(qz, q, w);
        return;
    }
    let b = qz.bits();
    let comps =
        [0, 1, 2].map(|i| Component::new(q.components[i] as u64, prev.components[i] as u64, b));
    if write_residuals(w, &comps, 2 + 3 * b) {
        write_quat(qz, q, w);
    }
}

fn read_quat_delta(
    qz: &Quantizer,
    prev: &QuantizedQuat,
    r: &mut BitReader,
) -> Result<QuantizedQuat> {
    let b = qz.bits();
    let mut comps = prev.components.map(|p| Component::new(0, p as u64, b));
    if read_residuals(r, &mut comps)? {
        return read_quat(qz, r);
    }
    let mut components = [0u32; 3];
    for (c, comp) in components.iter_mut().zip(&comps) {
        *c = comp.value as u32;
        if !qz.contains(*c) {
            return Err(SerializeError::invalid(
                "Quat",
                "component index out of range",
            ));
        }
    }
    Ok(QuantizedQuat {
        largest: prev.largest & 3,
        components,
    })
}

#[inline]
fn check_quat(qz: &Quantizer, q: &QuantizedQuat) -> Result<()> {
    if q.largest > 3 || !q.components.iter().all(|&c| qz.contains(c)) {
        return Err(SerializeError::invalid("Quat", "component out of range"));
    }
    Ok(())
}

/// `glam::Quat` as smallest three; see the [module docs](self) for the encoding.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuatSerializer;

impl NetSerializer for QuatSerializer {
    type Source = Quat;
    type Quantized = QuantizedQuat;
    type Config = QuatConfig;
    const NAME: &'static str = "Quat";

    fn quantize(config: &QuatConfig, source: &Quat) -> QuantizedQuat {
        quantize_quat(&config.quantizer(), *source)
    }
    fn dequantize(config: &QuatConfig, q: &QuantizedQuat) -> Quat {
        dequantize_quat(&config.quantizer(), q)
    }
    fn serialize(config: &QuatConfig, q: &QuantizedQuat, w: &mut BitWriter) {
        write_quat(&config.quantizer(), q, w)
    }
    fn deserialize(config: &QuatConfig, r: &mut BitReader) -> Result<QuantizedQuat> {
        read_quat(&config.quantizer(), r)
    }
    fn serialize_delta(
        config: &QuatConfig,
        q: &QuantizedQuat,
        prev: &QuantizedQuat,
        w: &mut BitWriter,
    ) {
        write_quat_delta(&config.quantizer(), q, prev, w)
    }
    fn deserialize_delta(
        config: &QuatConfig,
        prev: &QuantizedQuat,
        r: &mut BitReader,
    ) -> Result<QuantizedQuat> {
        read_quat_delta(&config.quantizer(), prev, r)
    }
    fn validate(config: &QuatConfig, q: &QuantizedQuat) -> Result<()> {
        check_quat(&config.quantizer(), q)
    }
    fn max_bits(config: &QuatConfig) -> Option<u32> {
        Some(2 + 3 * config.quantizer().bits())
    }
    fn shift(
        config: &QuatConfig,
        x: &QuantizedQuat,
        y: &QuantizedQuat,
        z: &QuantizedQuat,
    ) -> Result<QuantizedQuat> {
        let qz = config.quantizer();
        let b = qz.bits();
        let comps =
            [0, 1, 2].map(|i| Component::new(y.components[i] as u64, z.components[i] as u64, b));
        let moved = (y.largest == z.largest)
            .then(|| super::delta::shift_residuals(&comps, 2 + 3 * b, x.components.map(u64::from)))
            .flatten();
        let Some(moved) = moved else {
            // The escape (another largest component, or a long code): `y` in full.
            return super::shift::shift_by_code::<Self>(config, x, y, z);
        };
        let q = QuantizedQuat {
            largest: x.largest & 3,
            components: moved.map(|c| c as u32),
        };
        // As `read_quat_delta` reads it: every component in range.
        check_quat(&qz, &q)?;
        Ok(q)
    }
}

impl NetQuantize for Quat {
    type Serializer = QuatSerializer;
    const BITS: (u32, u32) = (4, 20);
}

/// A translation, rotation and non-uniform scale (applied scale, then rotation, then
/// translation).
///
/// ```
/// use replicate::serialize::Transform;
/// assert_eq!(Transform::default(), Transform::IDENTITY);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    /// Position.
    pub translation: glam::Vec3,
    /// Orientation (unit quaternion).
    pub rotation: Quat,
    /// Scale per axis.
    pub scale: glam::Vec3,
}

impl Transform {
    /// No translation, no rotation, unit scale.
    pub const IDENTITY: Transform = Transform {
        translation: Vec3::ZERO,
        rotation: Quat::IDENTITY,
        scale: Vec3::ONE,
    };
}

impl Default for Transform {
    fn default() -> Self {
        Self::IDENTITY
    }
}

/// Configuration of [`TransformSerializer`].
///
/// | field | default | per transform |
/// |---|---|---|
/// | `translation` | [`VectorConfig::DEFAULT`] (±2^20 at 1, 21 bits per component) | 63 bits |
/// | `rotation` | [`QuatConfig::DEFAULT`] (12 bits per component) | 38 bits |
/// | `scale` | [`TransformConfig::DEFAULT_SCALE`] (±64 at 1/1024, 18 bits per component) | 1 bit when `(1, 1, 1)`, else 55 bits |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransformConfig {
    /// How the translation is quantized.
    pub translation: VectorConfig,
    /// How the rotation is quantized.
    pub rotation: QuatConfig,
    /// How a non-unit scale is quantized.
    pub scale: VectorConfig,
}

impl TransformConfig {
    /// The default scale quantization: `-64..=64` in steps of 1/1024 (18 bits).
    pub const DEFAULT_SCALE: VectorConfig = VectorConfig {
        min: -64.0,
        max: 64.0,
        precision: 1.0 / 1024.0,
        bits: 32,
    };

    /// See the table in the type docs.
    pub const DEFAULT: TransformConfig = TransformConfig {
        translation: VectorConfig::DEFAULT,
        rotation: QuatConfig::DEFAULT,
        scale: Self::DEFAULT_SCALE,
    };
}

impl Default for TransformConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for TransformConfig {
    const DEFAULT: Self = TransformConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        self.translation.fingerprint(hasher);
        self.rotation.fingerprint(hasher);
        self.scale.fingerprint(hasher);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        self.translation
            .validate()
            .map_err(|e| format!("translation: {e}"))?;
        self.rotation
            .validate()
            .map_err(|e| format!("rotation: {e}"))?;
        self.scale.validate().map_err(|e| format!("scale: {e}"))
    }
}

/// A quantized [`Transform`]. `scale` is `None` exactly when the scale quantizes to the
/// same value as `(1, 1, 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct QuantizedTransform {
    /// Translation indices.
    pub translation: [u32; 3],
    /// Rotation.
    pub rotation: QuantizedQuat,
    /// Scale indices, `None` for unit scale.
    pub scale: Option<[u32; 3]>,
}

/// [`Transform`]: translation, rotation, then scale with a unit-scale flag.
///
/// ```text
/// [translation: Vec3 encoding][rotation: smallest three][1]                 unit scale
/// [translation: Vec3 encoding][rotation: smallest three][0][scale: Vec3]    other scale
/// ```
///
/// Delta: `[0]`, then translation (as [`Vec3Serializer`]'s delta), rotation as
/// [`QuatSerializer`]'s delta, then scale `[0]` unchanged or `[1]` and the full scale
/// field; or `[1]` and the full transform when that is not longer. See [`TransformConfig`] for the defaults (102 bits for a unit-scale transform).
///
/// ```
/// use glam::{Quat, Vec3};
/// use replicate::serialize::*;
/// let t = Transform { translation: Vec3::new(1.0, 2.0, 3.0), ..Transform::IDENTITY };
/// let (bits, back) = roundtrip::<TransformSerializer>(&TransformConfig::DEFAULT, &t).unwrap();
/// assert_eq!(bits, 63 + 38 + 1);
/// assert_eq!(back.translation, t.translation);
/// assert_eq!(back.scale, Vec3::ONE);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TransformSerializer;

impl TransformSerializer {
    #[inline]
    fn unit_scale(config: &TransformConfig) -> [u32; 3] {
        Vec3Serializer::quantize(&config.scale, &Vec3::ONE)
    }

    #[inline]
    fn write_scale(config: &TransformConfig, s: &Option<[u32; 3]>, w: &mut BitWriter) {
        match s {
            Some(s) => {
                w.write_bool(false);
                Vec3Serializer::serialize(&config.scale, s, w);
            }
            None => {
                w.write_bool(true);
            }
        }
    }

    #[inline]
    fn read_scale(config: &TransformConfig, r: &mut BitReader) -> Result<Option<[u32; 3]>> {
        if r.read_bool() {
            r.check()?;
            return Ok(None);
        }
        let s = Vec3Serializer::deserialize(&config.scale, r)?;
        Ok((s != Self::unit_scale(config)).then_some(s))
    }
}

impl NetSerializer for TransformSerializer {
    type Source = Transform;
    type Quantized = QuantizedTransform;
    type Config = TransformConfig;
    const NAME: &'static str = "Transform";

    fn quantize(config: &TransformConfig, t: &Transform) -> QuantizedTransform {
        let scale = Vec3Serializer::quantize(&config.scale, &t.scale);
        QuantizedTransform {
            translation: Vec3Serializer::quantize(&config.translation, &t.translation),
            rotation: QuatSerializer::quantize(&config.rotation, &t.rotation),
            scale: (scale != Self::unit_scale(config)).then_some(scale),
        }
    }
    fn dequantize(config: &TransformConfig, q: &QuantizedTransform) -> Transform {
        Transform {
            translation: Vec3Serializer::dequantize(&config.translation, &q.translation),
            rotation: QuatSerializer::dequantize(&config.rotation, &q.rotation),
            scale: match &q.scale {
                Some(s) => Vec3Serializer::dequantize(&config.scale, s),
                None => Vec3::ONE,
            },
        }
    }
    fn serialize(config: &TransformConfig, q: &QuantizedTransform, w: &mut BitWriter) {
        Vec3Serializer::serialize(&config.translation, &q.translation, w);
        QuatSerializer::serialize(&config.rotation, &q.rotation, w);
        Self::write_scale(config, &q.scale, w);
    }
    fn deserialize(config: &TransformConfig, r: &mut BitReader) -> Result<QuantizedTransform> {
        Ok(QuantizedTransform {
            translation: Vec3Serializer::deserialize(&config.translation, r)?,
            rotation: QuatSerializer::deserialize(&config.rotation, r)?,
            scale: Self::read_scale(config, r)?,
        })
    }
    fn serialize_delta(
        config: &TransformConfig,
        q: &QuantizedTransform,
        prev: &QuantizedTransform,
        w: &mut BitWriter,
    ) {
        let full_len = Vec3Serializer::max_bits(&config.translation).unwrap_or(0)
            + QuatSerializer::max_bits(&config.rotation).unwrap_or(0)
            + 1
            + q.scale
                .map_or(0, |_| Vec3Serializer::max_bits(&config.scale).unwrap_or(0));
        let mut parts = BitWriter::with_capacity_bits(2 * full_len as usize + 64);
        Vec3Serializer::serialize_delta(
            &config.translation,
            &q.translation,
            &prev.translation,
            &mut parts,
        );
        QuatSerializer::serialize_delta(&config.rotation, &q.rotation, &prev.rotation, &mut parts);
        if parts.write_bool(q.scale != prev.scale) {
            Self::write_scale(config, &q.scale, &mut parts);
        }
        if parts.position() as u32 <= full_len {
            w.write_bool(false);
            w.write_from(&parts);
        } else {
            w.write_bool(true);
            Self::serialize(config, q, w);
        }
    }
    fn deserialize_delta(
        config: &TransformConfig,
        prev: &QuantizedTransform,
        r: &mut BitReader,
    ) -> Result<QuantizedTransform> {
        if r.read_bool() {
            return Self::deserialize(config, r);
        }
        let translation =
            Vec3Serializer::deserialize_delta(&config.translation, &prev.translation, r)?;
        let rotation = QuatSerializer::deserialize_delta(&config.rotation, &prev.rotation, r)?;
        let scale = if r.read_bool() {
            Self::read_scale(config, r)?
        } else {
            r.check()?;
            prev.scale
        };
        Ok(QuantizedTransform {
            translation,
            rotation,
            scale,
        })
    }
    fn validate(config: &TransformConfig, q: &QuantizedTransform) -> Result<()> {
        Vec3Serializer::validate(&config.translation, &q.translation)?;
        QuatSerializer::validate(&config.rotation, &q.rotation)?;
        match &q.scale {
            Some(s) => Vec3Serializer::validate(&config.scale, s),
            None => Ok(()),
        }
    }
    fn max_bits(config: &TransformConfig) -> Option<u32> {
        Some(
            Vec3Serializer::max_bits(&config.translation)?
                + QuatSerializer::max_bits(&config.rotation)?
                + 1
                + Vec3Serializer::max_bits(&config.scale)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::roundtrip;

    #[test]
    fn identity_and_sizes() {
        let (bits, q) = roundtrip::<QuatSerializer>(&QuatConfig::DEFAULT, &Quat::IDENTITY).unwrap();
        assert_eq!((bits, q), (38, Quat::IDENTITY));
        let nine = QuatConfig { bits: 9 };
        assert_eq!(QuatSerializer::max_bits(&nine), Some(29)); // Fiedler's 29 bits
        assert_eq!(
            TransformSerializer::max_bits(&TransformConfig::DEFAULT),
            Some(63 + 38 + 1 + 54)
        );
    }

    #[test]
    fn sign_is_normalised_away() {
        let c = QuatConfig::DEFAULT;
        let q = Quat::from_rotation_z(0.5);
        assert_eq!(
            QuatSerializer::quantize(&c, &q),
            QuatSerializer::quantize(&c, &-q)
        );
        let back = QuatSerializer::dequantize(&c, &QuatSerializer::quantize(&c, &-q));
        assert!(back.w > 0.0);
        assert!((back.length() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn bad_input_becomes_identity() {
        let c = QuatConfig::DEFAULT;
        for q in [
            Quat::from_xyzw(0.0, 0.0, 0.0, 0.0),
            Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0),
        ] {
            assert_eq!(
                QuatSerializer::dequantize(&c, &QuatSerializer::quantize(&c, &q)),
                Quat::IDENTITY
            );
        }
    }

    #[test]
    fn unchanged_quat_delta_is_six_bits() {
        let c = QuatConfig::DEFAULT;
        let q = QuatSerializer::quantize(&c, &Quat::from_rotation_x(0.3));
        let mut w = BitWriter::with_capacity_bits(64);
        QuatSerializer::serialize_delta(&c, &q, &q, &mut w);
        // [0][k = 0][0][0][0]
        assert_eq!(w.position(), 6);
    }

    #[test]
    fn unit_scale_costs_one_bit() {
        let c = TransformConfig::DEFAULT;
        let t = Transform::IDENTITY;
        assert_eq!(
            roundtrip::<TransformSerializer>(&c, &t).unwrap(),
            (63 + 38 + 1, t)
        );
        let scaled = Transform {
            scale: Vec3::new(2.0, 1.0, 0.5),
            ..t
        };
        let (bits, back) = roundtrip::<TransformSerializer>(&c, &scaled).unwrap();
        assert_eq!(bits, 63 + 38 + 1 + 54);
        assert_eq!(back, scaled);
        // An explicitly sent unit scale is canonicalised to the 1-bit form.
        let mut w = BitWriter::with_capacity_bits(256);
        Vec3Serializer::serialize(&c.translation, &[0; 3], &mut w);
        QuatSerializer::serialize(
            &c.rotation,
            &QuatSerializer::quantize(&c.rotation, &Quat::IDENTITY),
            &mut w,
        );
        w.write_bool(false);
        Vec3Serializer::serialize(&c.scale, &TransformSerializer::unit_scale(&c), &mut w);
        let bytes = w.finish().unwrap();
        let q = TransformSerializer::deserialize(&c, &mut BitReader::new(&bytes)).unwrap();
        assert_eq!(q.scale, None);
    }

    #[test]
    fn config_validation() {
        assert!(QuatSerializer::validate_config(&QuatConfig { bits: 3 }).is_err());
        assert!(QuatSerializer::validate_config(&QuatConfig { bits: 21 }).is_err());
        assert!(QuatSerializer::validate_config(&QuatConfig { bits: 9 }).is_ok());
        assert!(TransformSerializer::validate_config(&TransformConfig::DEFAULT).is_ok());
        let bad = TransformConfig {
            scale: VectorConfig {
                precision: 0.0,
                ..TransformConfig::DEFAULT_SCALE
            },
            ..TransformConfig::DEFAULT
        };
        assert!(
            TransformSerializer::validate_config(&bad)
                .unwrap_err()
                .starts_with("scale:")
        );
    }
}
