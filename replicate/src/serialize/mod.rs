//! The serializer library: the [`NetSerializer`] trait and the built-in serializers.
//!
//! A serializer turns a game value (its *source* type) into a compact *quantized* value
//! and that quantized value into bits. Everything the replication system compares,
//! stores as a baseline or sends is the quantized value; the source value exists only
//! on the two ends of the pipe:
//!
//! ```text
//! server: source --quantize--> quantized --serialize(_delta)--> bits
//! client: bits --deserialize(_delta)--> quantized --dequantize--> source
//! ```
//!
//! This layer only uses [`crate::bits`] and knows nothing of objects or connections.
//! It defines the [`ChangeMask`] (in [`mask`]) because container serializers track
//! their elements in a member's change-mask bits.
//!
//! Every serializer documents its exact wire encoding in its rustdoc. Every
//! `deserialize` is bounds-checked: truncated or random input yields an
//! [`SerializeError`], never a panic, and no allocation beyond the caps in the config.

use crate::bits::{BitError, BitReader, BitWriter};
use thiserror::Error;

pub mod common;
pub mod containers;
pub mod delta;
pub mod enums;
#[cfg(feature = "serde")]
pub mod fallback;
pub mod float;
pub mod full;
pub mod ints;
pub mod mask;
pub mod misc;
pub mod packed;
pub mod quat;
pub mod reference;
pub mod rotator;
pub mod shift;
pub mod string;
pub mod vector;

pub use common::{
    BoxSerializer, CharSerializer, DVec3Serializer, DurationSerializer, HashMapSerializer,
    HashSetSerializer, I128Serializer, IVec2Serializer, IVec3Serializer, IsizeSerializer,
    Tuple2Serializer, Tuple3Serializer, Tuple4Serializer, U128Serializer, UVec2Serializer,
    UVec3Serializer, UsizeSerializer, Vec3ASerializer, VecDequeSerializer,
};
pub use containers::{
    ArrayConfig, ArraySerializer, DEFAULT_CONTAINER_LEN, MAX_CONTAINER_LEN, MapConfig,
    MapSerializer, OptionSerializer, SetConfig, SetSerializer, VecConfig, VecSerializer,
};
pub use delta::{DeltaTable, read_int_delta, write_int_delta};
pub use enums::{EnumSerializer, NetEnum};
#[cfg(feature = "serde")]
pub use fallback::{SerdeConfig, SerdeSerializer};
pub use float::{
    CANONICAL_NAN_F32, CANONICAL_NAN_F64, F32Serializer, F64Serializer, FloatRangeConfig,
    RangedF32Serializer, RangedF64Serializer, UnitF32Serializer,
};
pub use full::{
    QuatF32Serializer, TransformF32Serializer, Vec2F32Serializer, Vec3F32Serializer,
    Vec4F32Serializer,
};
pub use ints::{
    BoolSerializer, I8Serializer, I16Serializer, I32Serializer, I64Serializer, IntConfig,
    U8Serializer, U16Serializer, U32Serializer, U64Serializer,
};
pub use mask::{BitArray, ChangeMask, SetBits};
pub use misc::{BytesConfig, BytesSerializer, Guid, GuidSerializer};
pub use packed::{
    PackedI32Serializer, PackedI64Serializer, PackedU32Serializer, PackedU64Serializer,
};
pub use quat::{
    QuantizedQuat, QuantizedTransform, QuatConfig, QuatSerializer, Transform, TransformConfig,
    TransformSerializer,
};
pub use reference::NetRefHandleSerializer;
pub use rotator::{
    Rotator, RotatorAsByteSerializer, RotatorByteQuantized, RotatorQuantized, RotatorSerializer,
    compress_axis_to_byte, compress_axis_to_short, decompress_axis_from_byte,
    decompress_axis_from_short,
};
pub use string::{
    DEFAULT_NAMES, MAX_STRING_LEN, NameConfig, NameSerializer, QuantizedName, StringConfig,
    StringSerializer,
};
pub use vector::{
    AxesConfig, UnitVec3Serializer, UnitVecConfig, Vec2Serializer, Vec3AxesSerializer,
    Vec3Serializer, Vec4Serializer, VectorConfig,
};

/// An error decoding received data.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SerializeError {
    /// The bit stream ended early.
    #[error(transparent)]
    Bits(#[from] BitError),
    /// A length or count exceeds the configured cap.
    #[error("{what}: {len} exceeds the configured maximum of {max}")]
    TooLong {
        /// What was too long (for example "string length").
        what: &'static str,
        /// The received length.
        len: u64,
        /// The configured maximum.
        max: u64,
    },
    /// A decoded value is outside what the serializer can produce.
    #[error("invalid value for {serializer}: {reason}")]
    InvalidValue {
        /// The serializer's name.
        serializer: &'static str,
        /// What was wrong.
        reason: &'static str,
    },
}

impl SerializeError {
    /// Shorthand for [`SerializeError::InvalidValue`].
    pub fn invalid(serializer: &'static str, reason: &'static str) -> Self {
        Self::InvalidValue { serializer, reason }
    }
}

/// Result of decoding.
pub type Result<T, E = SerializeError> = std::result::Result<T, E>;

/// A stable 64-bit FNV-1a hasher used for protocol identifiers and config fingerprints.
///
/// Unlike `std::hash::DefaultHasher`, its output is fixed across builds, platforms and
/// Rust versions, which is what wire identifiers need.
///
/// ```
/// use replicate::serialize::StableHasher;
/// let mut h = StableHasher::new();
/// h.write_str("Player");
/// h.write_u32(7);
/// assert_eq!(h.finish(), {
///     let mut h2 = StableHasher::new();
///     h2.write_str("Player");
///     h2.write_u32(7);
///     h2.finish()
/// });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct StableHasher(u64);

impl Default for StableHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl StableHasher {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// A hasher in its initial state.
    pub const fn new() -> Self {
        Self(Self::OFFSET)
    }

    /// Feeds raw bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// Feeds a string, length-prefixed so `("ab","c")` and `("a","bc")` differ.
    pub fn write_str(&mut self, s: &str) {
        self.write_u64(s.len() as u64);
        self.write(s.as_bytes());
    }

    /// Feeds a `u32` (little-endian).
    pub fn write_u32(&mut self, v: u32) {
        self.write(&v.to_le_bytes());
    }

    /// Feeds a `u64` (little-endian).
    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }

    /// Feeds an `f32` by its bit pattern.
    pub fn write_f32(&mut self, v: f32) {
        self.write_u32(v.to_bits());
    }

    /// Feeds an `f64` by its bit pattern.
    pub fn write_f64(&mut self, v: f64) {
        self.write_u64(v.to_bits());
    }

    /// Feeds a bool.
    pub fn write_bool(&mut self, v: bool) {
        self.write(&[v as u8]);
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// A serializer configuration: a plain struct with public fields and a `DEFAULT`
/// constant, so `#[net(bits = 7)]` becomes `IntConfig { bits: 7, ..IntConfig::DEFAULT }`
/// at compile time.
pub trait NetSerializerConfig: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The configuration used when a member names no config keys.
    const DEFAULT: Self;

    /// Feeds every field that affects the wire format into `hasher` (part of the
    /// protocol identifier).
    fn fingerprint(&self, hasher: &mut StableHasher);

    /// Checks the configuration; `Err` says what is wrong and what to do. Called when
    /// a protocol is registered, so a bad config fails at start-up, not on the wire.
    fn validate(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// The configuration of serializers that have no options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoConfig;

impl NetSerializerConfig for NoConfig {
    const DEFAULT: Self = NoConfig;
    fn fingerprint(&self, _hasher: &mut StableHasher) {}
}

/// Turns a game value into a quantized value and a quantized value into bits.
///
/// Implementors are zero-sized marker types (for example [`U32Serializer`]); all
/// functions are associated functions taking the member's config, so the derive
/// dispatches them statically.
///
/// Required: [`quantize`](Self::quantize), [`dequantize`](Self::dequantize),
/// [`serialize`](Self::serialize), [`deserialize`](Self::deserialize). The delta pair
/// defaults to Iris's `NetSerializeDeltaDefault`: one "changed" bit, then the full
/// value when it changed.
///
/// The contract, checked by property tests for every built-in:
/// - `deserialize(serialize(q)) == q` and it reads exactly the bits written;
/// - `quantize(dequantize(q))` is equal to `q` (a fixed point);
/// - `deserialize_delta(serialize_delta(q, prev), prev) == q` for any `prev`;
/// - where [`max_bits`](Self::max_bits) is `Some(n)`, no encoding is longer than `n`.
///
/// A custom serializer, in the shape of Iris's Health example:
///
/// ```
/// use replicate::bits::{BitReader, BitWriter};
/// use replicate::serialize::{NetSerializer, NoConfig, Result};
///
/// /// Health 0..=100 in 7 bits, with a 1-bit zero flag.
/// pub struct Health;
///
/// impl NetSerializer for Health {
///     type Source = f32;
///     type Quantized = u8;
///     type Config = NoConfig;
///     const NAME: &'static str = "Health";
///
///     fn quantize(_: &NoConfig, v: &f32) -> u8 { v.clamp(0.0, 100.0) as u8 }
///     fn dequantize(_: &NoConfig, q: &u8) -> f32 { *q as f32 }
///     fn serialize(_: &NoConfig, q: &u8, w: &mut BitWriter) {
///         if !w.write_bool(*q == 0) { w.write_bits(*q as u64, 7) }
///     }
///     fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u8> {
///         if r.read_bool() { return Ok(0) }
///         let v = r.read_bits(7) as u8;
///         r.check()?;
///         Ok(v)
///     }
///     fn max_bits(_: &NoConfig) -> Option<u32> { Some(8) }
/// }
///
/// let mut w = BitWriter::with_capacity_bytes(8);
/// Health::serialize(&NoConfig, &Health::quantize(&NoConfig, &75.4), &mut w);
/// assert_eq!(w.position(), 8);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a NetSerializer",
    note = "a serializer is a type implementing `replicate::serialize::NetSerializer`; see the built-ins in `replicate::serialize`"
)]
pub trait NetSerializer: 'static {
    /// The game-side type.
    type Source;
    /// The quantized form: what is compared, stored in baselines and sent.
    type Quantized: Clone + PartialEq + Default + std::fmt::Debug + Send + Sync + 'static;
    /// The configuration (use [`NoConfig`] when there is none).
    type Config: NetSerializerConfig;

    /// A stable name, part of the protocol identifier.
    const NAME: &'static str;
    /// The encoding version; bump it when the wire format changes.
    const VERSION: u32 = 0;
    /// Whether the quantized value owns heap memory (strings, arrays).
    const HAS_DYNAMIC_STATE: bool = false;
    /// Whether the value can contain object references ([`crate::handle::NetRefHandle`]).
    const HAS_OBJECT_REFERENCES: bool = false;

    /// Source → quantized. Must fully define the result from `source`.
    fn quantize(config: &Self::Config, source: &Self::Source) -> Self::Quantized;

    /// Quantized → source.
    fn dequantize(config: &Self::Config, quantized: &Self::Quantized) -> Self::Source;

    /// Writes the full value.
    fn serialize(config: &Self::Config, quantized: &Self::Quantized, writer: &mut BitWriter);

    /// Reads a full value. Must be bounds-checked and must not allocate beyond the caps
    /// in `config`.
    fn deserialize(config: &Self::Config, reader: &mut BitReader) -> Result<Self::Quantized>;

    /// Writes `quantized` relative to `prev` (the baseline the receiver also has).
    ///
    /// Default: `[0]` when equal, else `[1]` and the full value.
    fn serialize_delta(
        config: &Self::Config,
        quantized: &Self::Quantized,
        prev: &Self::Quantized,
        writer: &mut BitWriter,
    ) {
        if writer.write_bool(!Self::is_equal(config, quantized, prev)) {
            Self::serialize(config, quantized, writer);
        }
    }

    /// Reads a value written by [`serialize_delta`](Self::serialize_delta) against the
    /// same `prev`.
    fn deserialize_delta(
        config: &Self::Config,
        prev: &Self::Quantized,
        reader: &mut BitReader,
    ) -> Result<Self::Quantized> {
        if reader.read_bool() {
            Self::deserialize(config, reader)
        } else {
            reader.check()?;
            Ok(prev.clone())
        }
    }

    /// Whether two quantized values are the same on the wire (drives change detection).
    fn is_equal(_config: &Self::Config, a: &Self::Quantized, b: &Self::Quantized) -> bool {
        a == b
    }

    /// Checks a received quantized value before it is applied.
    fn validate(_config: &Self::Config, _quantized: &Self::Quantized) -> Result<()> {
        Ok(())
    }

    /// Checks a member's configuration when its protocol is registered; `Err` says
    /// what is wrong (for example ``"`bits = 40` does not fit in `u32` (at most 32)"``).
    /// Default: the config's own [`NetSerializerConfig::validate`].
    fn validate_config(config: &Self::Config) -> std::result::Result<(), String> {
        config.validate()
    }

    /// Change-mask bits a member using this serializer occupies (default 1). Arrays and
    /// nested structs use more, for per-element or per-member change tracking.
    fn change_mask_bits(_config: &Self::Config) -> u32 {
        1
    }

    /// Sets the member's change-mask bits (`mask` bits `offset..offset +
    /// change_mask_bits`) where `current` differs from `previous`. Default: bit
    /// `offset` when not [`is_equal`](Self::is_equal). Returns whether anything differed.
    fn diff(
        config: &Self::Config,
        current: &Self::Quantized,
        previous: &Self::Quantized,
        mask: &mut ChangeMask,
        offset: u32,
    ) -> bool {
        let changed = !Self::is_equal(config, current, previous);
        if changed {
            mask.set(offset);
        }
        changed
    }

    /// Writes the parts of `quantized` selected by the member's change-mask bits
    /// (`offset..offset + change_mask_bits`). Only called when at least one of them is
    /// set. Default: the full value.
    fn serialize_masked(
        config: &Self::Config,
        quantized: &Self::Quantized,
        _mask: &ChangeMask,
        _offset: u32,
        writer: &mut BitWriter,
    ) {
        Self::serialize(config, quantized, writer)
    }

    /// Reads what [`serialize_masked`](Self::serialize_masked) wrote, updating `target`
    /// in place. Default: replaces `target` with a full value.
    fn deserialize_masked(
        config: &Self::Config,
        target: &mut Self::Quantized,
        _mask: &ChangeMask,
        _offset: u32,
        reader: &mut BitReader,
    ) -> Result<()> {
        *target = Self::deserialize(config, reader)?;
        Ok(())
    }

    /// Delta form of [`serialize_masked`](Self::serialize_masked) against `prev`.
    /// Default: [`serialize_delta`](Self::serialize_delta).
    fn serialize_masked_delta(
        config: &Self::Config,
        quantized: &Self::Quantized,
        prev: &Self::Quantized,
        _mask: &ChangeMask,
        _offset: u32,
        writer: &mut BitWriter,
    ) {
        Self::serialize_delta(config, quantized, prev, writer)
    }

    /// Delta form of [`deserialize_masked`](Self::deserialize_masked) against `prev`.
    fn deserialize_masked_delta(
        config: &Self::Config,
        target: &mut Self::Quantized,
        prev: &Self::Quantized,
        _mask: &ChangeMask,
        _offset: u32,
        reader: &mut BitReader,
    ) -> Result<()> {
        *target = Self::deserialize_delta(config, prev, reader)?;
        Ok(())
    }

    /// One step of a baseline prediction (see [`serialize::shift`](self::shift)): `x`
    /// moved by the step this serializer's delta code measures from `z` to `y`, that
    /// is `deserialize_delta(serialize_delta(y, z), x)`, validated.
    ///
    /// Default: runs the code ([`shift::shift_by_code`]). A serializer may compute it
    /// directly, but must give exactly that value (or an error where it fails).
    fn shift(
        config: &Self::Config,
        x: &Self::Quantized,
        y: &Self::Quantized,
        z: &Self::Quantized,
    ) -> Result<Self::Quantized> {
        shift::shift_by_code::<Self>(config, x, y, z)
    }

    /// [`shift`](Self::shift) for the parts selected by the member's change-mask bits,
    /// into `target` (equal to `x`): what reading
    /// [`serialize_masked_delta`](Self::serialize_masked_delta)`(y, z)` back against
    /// `x` gives, validated. Only called when at least one of the bits is set.
    ///
    /// Default: [`shift`](Self::shift) of the whole value, as the masked delta pair
    /// defaults to the whole one. A serializer that overrides that pair overrides this
    /// too (running the masked code: [`shift::shift_masked_by_code`]).
    fn shift_masked(
        config: &Self::Config,
        target: &mut Self::Quantized,
        x: &Self::Quantized,
        y: &Self::Quantized,
        z: &Self::Quantized,
        _mask: &ChangeMask,
        _offset: u32,
    ) -> Result<()> {
        *target = Self::shift(config, x, y, z)?;
        Ok(())
    }

    /// The most bits [`serialize`](Self::serialize) can write, if bounded.
    fn max_bits(_config: &Self::Config) -> Option<u32> {
        None
    }

    /// Appends the object references in `quantized` to `out`.
    fn collect_references(
        _config: &Self::Config,
        _quantized: &Self::Quantized,
        _out: &mut Vec<crate::handle::NetRefHandle>,
    ) {
    }

    /// Feeds the serializer's identity (name, version, config) into `hasher`.
    fn fingerprint(config: &Self::Config, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        config.fingerprint(hasher);
    }
}

/// The serializer a field of this type gets when its `#[net(...)]` attribute names none.
///
/// Implemented for every type with a built-in serializer. For your own type, either
/// implement it or name a serializer on the field with `#[net(serializer = ...)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no default net serializer",
    label = "no default serializer for this field type",
    note = "name a serializer on the field: `#[net(serializer = replicate::serialize::SerdeSerializer<{Self}>)]` sends any serde type, or a serializer of your own; or mark the field `#[net(skip)]`; for a type defined in your crate you can also implement `replicate::serialize::NetDefault` for it"
)]
pub trait NetDefault {
    /// The default serializer.
    type Serializer: NetSerializer<Source = Self>;
}

/// The serializer a field of this type gets when its `#[net(...)]` attribute asks for
/// quantization with `min`, `max`, `precision` or `bits` and names no serializer.
///
/// Without those keys a field gets its lossless [`NetDefault`]; with them, this one:
///
/// | type | serializer | config | `bits` |
/// |---|---|---|---|
/// | `u8`..`u64`, `i8`..`i64` | the same as [`NetDefault`] | [`IntConfig`] | `1..=` width |
/// | `f32`, `f64` | [`RangedF32Serializer`], [`RangedF64Serializer`] | [`FloatRangeConfig`] | `1..=32` |
/// | `glam::Vec2`, `Vec3`, `Vec4` | [`Vec2Serializer`], [`Vec3Serializer`], [`Vec4Serializer`] | [`VectorConfig`] | `1..=32` |
/// | `glam::Quat` | [`QuatSerializer`] (smallest three) | [`QuatConfig`] | `4..=20` |
///
/// The derive checks the keys against [`BITS`](Self::BITS) and the config's
/// `const_check` at compile time, so implementing this trait for a type of your own
/// requires its serializer's config to have an inherent
/// `pub const fn const_check(&self) -> Result<(), &'static str>` (like
/// [`FloatRangeConfig::const_check`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no quantizing serializer for `min`, `max`, `precision` or `bits`",
    label = "quantization keys on a type without a quantizing serializer",
    note = "`min`, `max`, `precision` and `bits` select a quantizing serializer for integers, `f32`, `f64`, `glam::Vec2`/`Vec3`/`Vec4` and `glam::Quat`; for `{Self}`, name a serializer with `#[net(serializer = ...)]` and pass its config keys"
)]
pub trait NetQuantize: NetDefault {
    /// The quantizing serializer.
    type Serializer: NetSerializer<Source = Self>;
    /// The accepted `bits` values, inclusive.
    const BITS: (u32, u32);
}

/// Round-trips `source` through quantize/serialize/deserialize/dequantize.
/// Returns the bits written and the received value. Handy in tests and docs.
///
/// ```
/// use replicate::serialize::{roundtrip, U32Serializer, IntConfig};
/// let (bits, v) = roundtrip::<U32Serializer>(&IntConfig::DEFAULT, &100).unwrap();
/// assert_eq!((bits, v), (33, 100));
/// ```
pub fn roundtrip<S: NetSerializer>(
    config: &S::Config,
    source: &S::Source,
) -> Result<(usize, S::Source)> {
    let q = S::quantize(config, source);
    let mut w = BitWriter::with_capacity_bits(1 << 24);
    S::serialize(config, &q, &mut w);
    let bytes = w.finish()?;
    let mut r = BitReader::with_bit_len(&bytes, w.position());
    let back = S::deserialize(config, &mut r)?;
    r.check()?;
    Ok((w.position(), S::dequantize(config, &back)))
}
