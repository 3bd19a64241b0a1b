//! Default serializers for common standard-library and glam types: `usize`, `isize`,
//! `u128`, `i128`, `char`, `Box<T>`, [`std::time::Duration`], tuples of up to four
//! elements, `VecDeque<T>`, `HashMap<K, V>`, `HashSet<T>`, and glam's `IVec2`,
//! `IVec3`, `UVec2`, `UVec3`, `DVec3` and `Vec3A`.
//!
//! This module owns these `NetDefault` impls and their wire formats; most reuse an
//! existing encoding:
//!
//! | type | wire | read checks |
//! |---|---|---|
//! | `usize`, `isize` | as `u64` / `i64` ([`U64Serializer`], [`I64Serializer`]) | the value fits the receiver's `usize` / `isize` |
//! | `u128`, `i128` | `[1]` for zero, else `[0]` and 128 bits (low word first) | |
//! | `char` | as a `u32` ([`U32Serializer`]) | a Unicode scalar value |
//! | `Box<T>` | as `T` | as `T` |
//! | `Duration` | seconds as `u64`, then nanoseconds in 30 bits | nanoseconds below 10^9 |
//! | `(A, B, ..)` | each element by its default, in order; config is a tuple of configs | per element |
//! | `VecDeque<T>` | as `Vec<T>` ([`VecSerializer`]) | as `Vec<T>` |
//! | `HashMap<K, V>`, `HashSet<T>` | as `BTreeMap` / `BTreeSet` ([`MapSerializer`], [`SetSerializer`]): sorted by quantized key, so the encoding is deterministic; past `max_len`, the entries with the smallest quantized keys are kept | ascending keys, length cap |
//! | `IVec2/3`, `UVec2/3` | each component as `i32` / `u32` | |
//! | `DVec3` | each component as [`F64Serializer`] (lossless) | |
//! | `Vec3A` | as `Vec3` ([`Vec3F32Serializer`](super::Vec3F32Serializer), lossless) | |
//!
//! `HashMap` and `HashSet` keys must be `Ord` as well as `Hash` (the wire order is the
//! quantized keys' order).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::time::Duration;

use glam::{DVec3, IVec2, IVec3, UVec2, UVec3, Vec3A};

use super::ChangeMask;
use super::{
    F32Serializer, F64Serializer, I32Serializer, I64Serializer, MapSerializer, NetDefault,
    NetSerializer, NetSerializerConfig, NoConfig, Result, SerializeError, SetSerializer,
    StableHasher, U32Serializer, U64Serializer, VecSerializer,
};
use crate::bits::{BitReader, BitWriter};

/// Every wire-side method of a serializer whose `Quantized` and `Config` are `$base`'s,
/// delegated to `$base` (everything but `quantize` / `dequantize`, plus `validate`
/// which runs `$base`'s and then `$check`).
macro_rules! delegate_wire {
    ($base:ty, $check:expr) => {
        const HAS_DYNAMIC_STATE: bool = <$base>::HAS_DYNAMIC_STATE;
        const HAS_OBJECT_REFERENCES: bool = <$base>::HAS_OBJECT_REFERENCES;
        fn serialize(c: &Self::Config, q: &Self::Quantized, w: &mut BitWriter) {
            <$base>::serialize(c, q, w)
        }
        fn deserialize(c: &Self::Config, r: &mut BitReader) -> Result<Self::Quantized> {
            let q = <$base>::deserialize(c, r)?;
            Self::validate(c, &q)?;
            Ok(q)
        }
        fn serialize_delta(
            c: &Self::Config,
            q: &Self::Quantized,
            prev: &Self::Quantized,
            w: &mut BitWriter,
        ) {
            <$base>::serialize_delta(c, q, prev, w)
        }
        fn deserialize_delta(
            c: &Self::Config,
            prev: &Self::Quantized,
            r: &mut BitReader,
        ) -> Result<Self::Quantized> {
            let q = <$base>::deserialize_delta(c, prev, r)?;
            Self::validate(c, &q)?;
            Ok(q)
        }
        fn is_equal(c: &Self::Config, a: &Self::Quantized, b: &Self::Quantized) -> bool {
            <$base>::is_equal(c, a, b)
        }
        fn validate(c: &Self::Config, q: &Self::Quantized) -> Result<()> {
            <$base>::validate(c, q)?;
            let check: fn(&Self::Config, &Self::Quantized) -> Result<()> = $check;
            check(c, q)
        }
        fn validate_config(c: &Self::Config) -> std::result::Result<(), String> {
            <$base>::validate_config(c)
        }
        fn change_mask_bits(c: &Self::Config) -> u32 {
            <$base>::change_mask_bits(c)
        }
        fn diff(
            c: &Self::Config,
            current: &Self::Quantized,
            previous: &Self::Quantized,
            mask: &mut ChangeMask,
            offset: u32,
        ) -> bool {
            <$base>::diff(c, current, previous, mask, offset)
        }
        fn serialize_masked(
            c: &Self::Config,
            q: &Self::Quantized,
            mask: &ChangeMask,
            offset: u32,
            w: &mut BitWriter,
        ) {
            <$base>::serialize_masked(c, q, mask, offset, w)
        }
        fn deserialize_masked(
            c: &Self::Config,
            target: &mut Self::Quantized,
            mask: &ChangeMask,
            offset: u32,
            r: &mut BitReader,
        ) -> Result<()> {
            <$base>::deserialize_masked(c, target, mask, offset, r)?;
            Self::validate(c, target)
        }
        fn serialize_masked_delta(
            c: &Self::Config,
            q: &Self::Quantized,
            prev: &Self::Quantized,
            mask: &ChangeMask,
            offset: u32,
            w: &mut BitWriter,
        ) {
            <$base>::serialize_masked_delta(c, q, prev, mask, offset, w)
        }
        fn deserialize_masked_delta(
            c: &Self::Config,
            target: &mut Self::Quantized,
            prev: &Self::Quantized,
            mask: &ChangeMask,
            offset: u32,
            r: &mut BitReader,
        ) -> Result<()> {
            <$base>::deserialize_masked_delta(c, target, prev, mask, offset, r)?;
            Self::validate(c, target)
        }
        fn shift(
            c: &Self::Config,
            x: &Self::Quantized,
            y: &Self::Quantized,
            z: &Self::Quantized,
        ) -> Result<Self::Quantized> {
            let q = <$base>::shift(c, x, y, z)?;
            Self::validate(c, &q)?;
            Ok(q)
        }
        fn shift_masked(
            c: &Self::Config,
            target: &mut Self::Quantized,
            x: &Self::Quantized,
            y: &Self::Quantized,
            z: &Self::Quantized,
            mask: &ChangeMask,
            offset: u32,
        ) -> Result<()> {
            <$base>::shift_masked(c, target, x, y, z, mask, offset)?;
            Self::validate(c, target)
        }
        fn max_bits(c: &Self::Config) -> Option<u32> {
            <$base>::max_bits(c)
        }
        fn collect_references(
            c: &Self::Config,
            q: &Self::Quantized,
            out: &mut Vec<crate::handle::NetRefHandle>,
        ) {
            <$base>::collect_references(c, q, out)
        }
    };
}

/// A variance-neutral, `Send + Sync` type marker.
type Marker<T> = PhantomData<fn() -> T>;

fn ok<C, Q>(_: &C, _: &Q) -> Result<()> {
    Ok(())
}

// ---------------------------------------------------------------------------------------
// usize, isize, char

/// `usize` as a `u64` on the wire ([`U64Serializer`]); a received value that does not
/// fit the receiver's `usize` (a 32-bit target) is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct UsizeSerializer;

impl NetSerializer for UsizeSerializer {
    type Source = usize;
    type Quantized = u64;
    type Config = super::IntConfig;
    const NAME: &'static str = "usize";
    fn quantize(c: &Self::Config, v: &usize) -> u64 {
        U64Serializer::quantize(c, &(*v as u64))
    }
    fn dequantize(c: &Self::Config, q: &u64) -> usize {
        usize::try_from(U64Serializer::dequantize(c, q)).unwrap_or(usize::MAX)
    }
    delegate_wire!(U64Serializer, |_, q| {
        usize::try_from(*q)
            .map(|_| ())
            .map_err(|_| SerializeError::invalid("usize", "value does not fit this target's usize"))
    });
}

impl NetDefault for usize {
    type Serializer = UsizeSerializer;
}

/// `isize` as an `i64` on the wire ([`I64Serializer`]); a received value that does not
/// fit the receiver's `isize` is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct IsizeSerializer;

impl NetSerializer for IsizeSerializer {
    type Source = isize;
    type Quantized = u64;
    type Config = super::IntConfig;
    const NAME: &'static str = "isize";
    fn quantize(c: &Self::Config, v: &isize) -> u64 {
        I64Serializer::quantize(c, &(*v as i64))
    }
    fn dequantize(c: &Self::Config, q: &u64) -> isize {
        let v = I64Serializer::dequantize(c, q);
        isize::try_from(v).unwrap_or(if v < 0 { isize::MIN } else { isize::MAX })
    }
    delegate_wire!(I64Serializer, |c, q| {
        isize::try_from(I64Serializer::dequantize(c, q))
            .map(|_| ())
            .map_err(|_| SerializeError::invalid("isize", "value does not fit this target's isize"))
    });
}

impl NetDefault for isize {
    type Serializer = IsizeSerializer;
}

/// `char` as its `u32` code point ([`U32Serializer`]); a received value that is not a
/// Unicode scalar value (a surrogate or above `U+10FFFF`) is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharSerializer;

impl NetSerializer for CharSerializer {
    type Source = char;
    type Quantized = u32;
    type Config = NoConfig;
    const NAME: &'static str = "char";
    fn quantize(_: &NoConfig, v: &char) -> u32 {
        *v as u32
    }
    fn dequantize(_: &NoConfig, q: &u32) -> char {
        char::from_u32(*q).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
    fn serialize(_: &NoConfig, q: &u32, w: &mut BitWriter) {
        U32Serializer::serialize(&super::IntConfig::DEFAULT, q, w)
    }
    fn deserialize(c: &NoConfig, r: &mut BitReader) -> Result<u32> {
        let q = U32Serializer::deserialize(&super::IntConfig::DEFAULT, r)?;
        Self::validate(c, &q)?;
        Ok(q)
    }
    fn validate(_: &NoConfig, q: &u32) -> Result<()> {
        match char::from_u32(*q) {
            Some(_) => Ok(()),
            None => Err(SerializeError::invalid(
                "char",
                "not a Unicode scalar value",
            )),
        }
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(33)
    }
}

impl NetDefault for char {
    type Serializer = CharSerializer;
}

// ---------------------------------------------------------------------------------------
// u128, i128

macro_rules! wide_serializer {
    ($name:ident, $ty:ty, $doc:literal) => {
        #[doc = $doc]
        /// Wire: `[1]` for zero, else `[0]` and 128 bits, low 64 first.
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = u128;
            type Config = NoConfig;
            const NAME: &'static str = stringify!($ty);
            fn quantize(_: &NoConfig, v: &$ty) -> u128 {
                *v as u128
            }
            fn dequantize(_: &NoConfig, q: &u128) -> $ty {
                *q as $ty
            }
            fn serialize(_: &NoConfig, q: &u128, w: &mut BitWriter) {
                if !w.write_bool(*q == 0) {
                    w.write_bits(*q as u64, 64);
                    w.write_bits((*q >> 64) as u64, 64);
                }
            }
            fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u128> {
                let v = if r.read_bool() {
                    0
                } else {
                    let lo = r.read_bits(64) as u128;
                    let hi = r.read_bits(64) as u128;
                    lo | (hi << 64)
                };
                r.check()?;
                Ok(v)
            }
            fn max_bits(_: &NoConfig) -> Option<u32> {
                Some(129)
            }
        }

        impl NetDefault for $ty {
            type Serializer = $name;
        }
    };
}

wide_serializer!(U128Serializer, u128, "`u128` with a zero flag.");
wide_serializer!(
    I128Serializer,
    i128,
    "`i128` (two's complement) with a zero flag."
);

// ---------------------------------------------------------------------------------------
// Box<T>

/// `Box<T>` exactly as `T`'s serializer `S` sends `T`.
pub struct BoxSerializer<S>(PhantomData<fn() -> S>);

impl<S: NetSerializer> NetSerializer for BoxSerializer<S> {
    type Source = Box<S::Source>;
    type Quantized = S::Quantized;
    type Config = S::Config;
    const NAME: &'static str = "Box";
    fn quantize(c: &S::Config, v: &Box<S::Source>) -> S::Quantized {
        S::quantize(c, v)
    }
    fn dequantize(c: &S::Config, q: &S::Quantized) -> Box<S::Source> {
        Box::new(S::dequantize(c, q))
    }
    fn fingerprint(c: &S::Config, hasher: &mut StableHasher) {
        S::fingerprint(c, hasher)
    }
    delegate_wire!(S, ok);
}

impl<T: NetDefault> NetDefault for Box<T> {
    type Serializer = BoxSerializer<T::Serializer>;
}

// ---------------------------------------------------------------------------------------
// Duration

/// [`Duration`]: whole seconds as a `u64` ([`U64Serializer`]: 1 bit for zero), then the
/// nanoseconds in 30 bits. A received nanosecond count of 10^9 or more is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct DurationSerializer;

const NANOS_PER_SEC: u32 = 1_000_000_000;

impl NetSerializer for DurationSerializer {
    type Source = Duration;
    type Quantized = (u64, u32);
    type Config = NoConfig;
    const NAME: &'static str = "Duration";
    fn quantize(_: &NoConfig, v: &Duration) -> (u64, u32) {
        (v.as_secs(), v.subsec_nanos())
    }
    fn dequantize(_: &NoConfig, q: &(u64, u32)) -> Duration {
        Duration::new(q.0, q.1.min(NANOS_PER_SEC - 1))
    }
    fn serialize(_: &NoConfig, q: &(u64, u32), w: &mut BitWriter) {
        U64Serializer::serialize(&super::IntConfig::DEFAULT, &q.0, w);
        w.write_bits(q.1 as u64, 30);
    }
    fn deserialize(c: &NoConfig, r: &mut BitReader) -> Result<(u64, u32)> {
        let secs = U64Serializer::deserialize(&super::IntConfig::DEFAULT, r)?;
        let nanos = r.read_bits(30) as u32;
        r.check()?;
        Self::validate(c, &(secs, nanos))?;
        Ok((secs, nanos))
    }
    fn validate(_: &NoConfig, q: &(u64, u32)) -> Result<()> {
        if q.1 >= NANOS_PER_SEC {
            return Err(SerializeError::invalid(
                "Duration",
                "nanoseconds must be below 1_000_000_000",
            ));
        }
        Ok(())
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(65 + 30)
    }
}

impl NetDefault for Duration {
    type Serializer = DurationSerializer;
}

// ---------------------------------------------------------------------------------------
// Tuples

macro_rules! tuple_serializer {
    ($name:ident, $($s:ident $i:tt),+) => {
        /// A tuple, each element by its serializer in order; the config is the tuple
        /// of the elements' configs.
        pub struct $name<$($s),+>(PhantomData<fn() -> ($($s,)+)>);

        impl<$($s: NetSerializerConfig),+> NetSerializerConfig for ($($s,)+) {
            const DEFAULT: Self = ($($s::DEFAULT,)+);
            fn fingerprint(&self, hasher: &mut StableHasher) {
                $(self.$i.fingerprint(hasher);)+
            }
            fn validate(&self) -> std::result::Result<(), String> {
                $(self.$i.validate().map_err(|e| format!("element {}: {e}", $i))?;)+
                Ok(())
            }
        }

        impl<$($s: NetSerializer),+> NetSerializer for $name<$($s),+> {
            type Source = ($($s::Source,)+);
            type Quantized = ($($s::Quantized,)+);
            type Config = ($($s::Config,)+);
            const NAME: &'static str = "Tuple";
            const HAS_DYNAMIC_STATE: bool = false $(|| $s::HAS_DYNAMIC_STATE)+;
            const HAS_OBJECT_REFERENCES: bool = false $(|| $s::HAS_OBJECT_REFERENCES)+;
            fn quantize(c: &Self::Config, v: &Self::Source) -> Self::Quantized {
                ($($s::quantize(&c.$i, &v.$i),)+)
            }
            fn dequantize(c: &Self::Config, q: &Self::Quantized) -> Self::Source {
                ($($s::dequantize(&c.$i, &q.$i),)+)
            }
            fn serialize(c: &Self::Config, q: &Self::Quantized, w: &mut BitWriter) {
                $($s::serialize(&c.$i, &q.$i, w);)+
            }
            fn deserialize(c: &Self::Config, r: &mut BitReader) -> Result<Self::Quantized> {
                Ok(($($s::deserialize(&c.$i, r)?,)+))
            }
            fn serialize_delta(
                c: &Self::Config,
                q: &Self::Quantized,
                prev: &Self::Quantized,
                w: &mut BitWriter,
            ) {
                $($s::serialize_delta(&c.$i, &q.$i, &prev.$i, w);)+
            }
            fn deserialize_delta(
                c: &Self::Config,
                prev: &Self::Quantized,
                r: &mut BitReader,
            ) -> Result<Self::Quantized> {
                Ok(($($s::deserialize_delta(&c.$i, &prev.$i, r)?,)+))
            }
            fn is_equal(c: &Self::Config, a: &Self::Quantized, b: &Self::Quantized) -> bool {
                true $(&& $s::is_equal(&c.$i, &a.$i, &b.$i))+
            }
            fn validate(c: &Self::Config, q: &Self::Quantized) -> Result<()> {
                $($s::validate(&c.$i, &q.$i)?;)+
                Ok(())
            }
            fn validate_config(c: &Self::Config) -> std::result::Result<(), String> {
                $($s::validate_config(&c.$i).map_err(|e| format!("element {}: {e}", $i))?;)+
                Ok(())
            }
            fn max_bits(c: &Self::Config) -> Option<u32> {
                Some(0 $(+ $s::max_bits(&c.$i)?)+)
            }
            fn collect_references(
                c: &Self::Config,
                q: &Self::Quantized,
                out: &mut Vec<crate::handle::NetRefHandle>,
            ) {
                $($s::collect_references(&c.$i, &q.$i, out);)+
            }
            fn fingerprint(c: &Self::Config, hasher: &mut StableHasher) {
                hasher.write_str(Self::NAME);
                $($s::fingerprint(&c.$i, hasher);)+
            }
        }
    };
}

tuple_serializer!(Tuple2Serializer, A 0, B 1);
tuple_serializer!(Tuple3Serializer, A 0, B 1, C 2);
tuple_serializer!(Tuple4Serializer, A 0, B 1, C 2, D 3);

impl<A: NetDefault, B: NetDefault> NetDefault for (A, B) {
    type Serializer = Tuple2Serializer<A::Serializer, B::Serializer>;
}
impl<A: NetDefault, B: NetDefault, C: NetDefault> NetDefault for (A, B, C) {
    type Serializer = Tuple3Serializer<A::Serializer, B::Serializer, C::Serializer>;
}
impl<A: NetDefault, B: NetDefault, C: NetDefault, D: NetDefault> NetDefault for (A, B, C, D) {
    type Serializer = Tuple4Serializer<A::Serializer, B::Serializer, C::Serializer, D::Serializer>;
}

// ---------------------------------------------------------------------------------------
// VecDeque, HashMap, HashSet

/// `VecDeque<T>` exactly as `Vec<T>` ([`VecSerializer`], same config keys).
pub struct VecDequeSerializer<S>(PhantomData<fn() -> S>);

impl<S: NetSerializer> NetSerializer for VecDequeSerializer<S> {
    type Source = VecDeque<S::Source>;
    type Quantized = Vec<S::Quantized>;
    type Config = super::VecConfig<S::Config>;
    const NAME: &'static str = "VecDeque";
    fn quantize(c: &Self::Config, v: &VecDeque<S::Source>) -> Vec<S::Quantized> {
        v.iter()
            .take(c.max_len as usize)
            .map(|e| S::quantize(&c.element, e))
            .collect()
    }
    fn dequantize(c: &Self::Config, q: &Vec<S::Quantized>) -> VecDeque<S::Source> {
        q.iter().map(|e| S::dequantize(&c.element, e)).collect()
    }
    delegate_wire!(VecSerializer<S>, ok);
}

impl<T: NetDefault> NetDefault for VecDeque<T> {
    type Serializer = VecDequeSerializer<T::Serializer>;
}

/// `HashMap<K, V>` as a `BTreeMap` ([`MapSerializer`]): entries sorted by quantized
/// key, so two servers with the same map send the same bits whatever the hash order.
/// Past `max_len`, the entries with the smallest quantized keys are kept.
pub struct HashMapSerializer<K, V, H = std::collections::hash_map::RandomState>(Marker<(K, V, H)>);

impl<K, V, H> NetSerializer for HashMapSerializer<K, V, H>
where
    K: NetSerializer,
    V: NetSerializer,
    K::Source: Ord + Hash,
    K::Quantized: Ord,
    H: BuildHasher + Default + 'static,
{
    type Source = HashMap<K::Source, V::Source, H>;
    type Quantized = BTreeMap<K::Quantized, V::Quantized>;
    type Config = super::MapConfig<K::Config, V::Config>;
    const NAME: &'static str = "HashMap";
    fn quantize(c: &Self::Config, v: &Self::Source) -> Self::Quantized {
        let mut q: BTreeMap<_, _> = v
            .iter()
            .map(|(k, v)| (K::quantize(&c.key, k), V::quantize(&c.value, v)))
            .collect();
        while q.len() > c.max_len as usize {
            q.pop_last();
        }
        q
    }
    fn dequantize(c: &Self::Config, q: &Self::Quantized) -> Self::Source {
        q.iter()
            .map(|(k, v)| (K::dequantize(&c.key, k), V::dequantize(&c.value, v)))
            .collect()
    }
    delegate_wire!(MapSerializer<K, V>, ok);
}

impl<K, V, H> NetDefault for HashMap<K, V, H>
where
    K: NetDefault + Ord + Hash,
    V: NetDefault,
    <K::Serializer as NetSerializer>::Quantized: Ord,
    H: BuildHasher + Default + 'static,
{
    type Serializer = HashMapSerializer<K::Serializer, V::Serializer, H>;
}

/// `HashSet<T>` as a `BTreeSet` ([`SetSerializer`]): elements sorted by quantized
/// value. Past `max_len`, the smallest quantized elements are kept.
pub struct HashSetSerializer<S, H = std::collections::hash_map::RandomState>(Marker<(S, H)>);

impl<S, H> NetSerializer for HashSetSerializer<S, H>
where
    S: NetSerializer,
    S::Source: Ord + Hash,
    S::Quantized: Ord,
    H: BuildHasher + Default + 'static,
{
    type Source = HashSet<S::Source, H>;
    type Quantized = BTreeSet<S::Quantized>;
    type Config = super::SetConfig<S::Config>;
    const NAME: &'static str = "HashSet";
    fn quantize(c: &Self::Config, v: &Self::Source) -> Self::Quantized {
        let mut q: BTreeSet<_> = v.iter().map(|e| S::quantize(&c.element, e)).collect();
        while q.len() > c.max_len as usize {
            q.pop_last();
        }
        q
    }
    fn dequantize(c: &Self::Config, q: &Self::Quantized) -> Self::Source {
        q.iter().map(|e| S::dequantize(&c.element, e)).collect()
    }
    delegate_wire!(SetSerializer<S>, ok);
}

impl<T, H> NetDefault for HashSet<T, H>
where
    T: NetDefault + Ord + Hash,
    <T::Serializer as NetSerializer>::Quantized: Ord,
    H: BuildHasher + Default + 'static,
{
    type Serializer = HashSetSerializer<T::Serializer, H>;
}

// ---------------------------------------------------------------------------------------
// glam integer and double vectors, Vec3A

macro_rules! component_serializer {
    ($name:ident, $ty:ty, $cs:ty, $n:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl $name {
            const CFG: <$cs as NetSerializer>::Config =
                <<$cs as NetSerializer>::Config as NetSerializerConfig>::DEFAULT;
        }

        impl NetSerializer for $name {
            type Source = $ty;
            type Quantized = [<$cs as NetSerializer>::Quantized; $n];
            type Config = NoConfig;
            const NAME: &'static str = stringify!($ty);
            fn quantize(_: &NoConfig, v: &$ty) -> Self::Quantized {
                v.to_array().map(|c| <$cs>::quantize(&Self::CFG, &c))
            }
            fn dequantize(_: &NoConfig, q: &Self::Quantized) -> $ty {
                <$ty>::from_array(q.map(|c| <$cs>::dequantize(&Self::CFG, &c)))
            }
            fn serialize(_: &NoConfig, q: &Self::Quantized, w: &mut BitWriter) {
                for c in q {
                    <$cs>::serialize(&Self::CFG, c, w);
                }
            }
            fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<Self::Quantized> {
                let mut out = Self::Quantized::default();
                for c in &mut out {
                    *c = <$cs>::deserialize(&Self::CFG, r)?;
                }
                Ok(out)
            }
            fn serialize_delta(
                _: &NoConfig,
                q: &Self::Quantized,
                prev: &Self::Quantized,
                w: &mut BitWriter,
            ) {
                for (c, p) in q.iter().zip(prev) {
                    <$cs>::serialize_delta(&Self::CFG, c, p, w);
                }
            }
            fn deserialize_delta(
                _: &NoConfig,
                prev: &Self::Quantized,
                r: &mut BitReader,
            ) -> Result<Self::Quantized> {
                let mut out = *prev;
                for (c, p) in out.iter_mut().zip(prev) {
                    *c = <$cs>::deserialize_delta(&Self::CFG, p, r)?;
                }
                Ok(out)
            }
            fn is_equal(_: &NoConfig, a: &Self::Quantized, b: &Self::Quantized) -> bool {
                a.iter()
                    .zip(b)
                    .all(|(a, b)| <$cs>::is_equal(&Self::CFG, a, b))
            }
            fn max_bits(_: &NoConfig) -> Option<u32> {
                Some($n * <$cs>::max_bits(&Self::CFG)?)
            }
        }

        impl NetDefault for $ty {
            type Serializer = $name;
        }
    };
}

component_serializer!(
    IVec2Serializer,
    IVec2,
    I32Serializer,
    2,
    "`glam::IVec2`: each component as `i32`."
);
component_serializer!(
    IVec3Serializer,
    IVec3,
    I32Serializer,
    3,
    "`glam::IVec3`: each component as `i32`."
);
component_serializer!(
    UVec2Serializer,
    UVec2,
    U32Serializer,
    2,
    "`glam::UVec2`: each component as `u32`."
);
component_serializer!(
    UVec3Serializer,
    UVec3,
    U32Serializer,
    3,
    "`glam::UVec3`: each component as `u32`."
);
component_serializer!(
    DVec3Serializer,
    DVec3,
    F64Serializer,
    3,
    "`glam::DVec3`: each component as `f64` (lossless)."
);
component_serializer!(
    Vec3ASerializer,
    Vec3A,
    F32Serializer,
    3,
    "`glam::Vec3A`: each component as `f32` (lossless), the same bits as `Vec3`."
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::{MapConfig, SetConfig};
    use proptest::prelude::*;

    /// Serializes, checks every strict prefix fails to decode, decodes the whole, and
    /// returns the received source value.
    fn exact<S: NetSerializer>(c: &S::Config, v: &S::Source) -> S::Source {
        let q = S::quantize(c, v);
        let mut w = BitWriter::with_capacity_bits(1 << 16);
        S::serialize(c, &q, &mut w);
        let len = w.position();
        let bytes = w.finish().unwrap();
        for cut in 0..len {
            let mut r = BitReader::with_bit_len(&bytes, cut);
            assert!(
                S::deserialize(c, &mut r).is_err(),
                "{} cut at {cut} of {len}",
                S::NAME
            );
        }
        let mut r = BitReader::with_bit_len(&bytes, len);
        let back = S::deserialize(c, &mut r).unwrap();
        assert_eq!(r.position(), len);
        assert_eq!(back, q);
        if let Some(max) = S::max_bits(c) {
            assert!(len <= max as usize);
        }
        S::dequantize(c, &back)
    }

    fn decode<S: NetSerializer>(c: &S::Config, bytes: &[u8]) -> Result<S::Quantized> {
        S::deserialize(c, &mut BitReader::new(bytes))
    }

    #[test]
    fn invalid_char_and_duration_are_rejected() {
        let mut w = BitWriter::with_capacity_bits(64);
        U32Serializer::serialize(&super::super::IntConfig::DEFAULT, &0xD800, &mut w);
        let bytes = w.finish().unwrap();
        assert!(decode::<CharSerializer>(&NoConfig, &bytes).is_err());

        let mut w = BitWriter::with_capacity_bits(128);
        U64Serializer::serialize(&super::super::IntConfig::DEFAULT, &5, &mut w);
        w.write_bits(1_000_000_000, 30);
        let bytes = w.finish().unwrap();
        assert!(decode::<DurationSerializer>(&NoConfig, &bytes).is_err());
    }

    #[test]
    fn hash_map_order_and_cap_follow_quantized_keys() {
        let c = MapConfig {
            max_len: 3,
            ..MapConfig::DEFAULT
        };
        let m: HashMap<u16, u8> = (0..10u16).rev().map(|k| (k * 7, k as u8)).collect();
        type S = HashMapSerializer<super::super::U16Serializer, super::super::U8Serializer>;
        let back = exact::<S>(&c, &m);
        let expected: HashMap<u16, u8> = [(0, 0), (7, 1), (14, 2)].into_iter().collect();
        assert_eq!(back, expected);
        // Same contents, any insertion order: the same bits.
        let a: HashMap<u16, u8> = [(1, 1), (2, 2), (3, 3)].into_iter().collect();
        let b: HashMap<u16, u8> = [(3, 3), (1, 1), (2, 2)].into_iter().collect();
        let bits = |m: &HashMap<u16, u8>| {
            let mut w = BitWriter::with_capacity_bits(256);
            S::serialize(
                &MapConfig::DEFAULT,
                &S::quantize(&MapConfig::DEFAULT, m),
                &mut w,
            );
            w.finish().unwrap()
        };
        assert_eq!(bits(&a), bits(&b));
        // A length past the receiver's cap is an error.
        let big: HashMap<u16, u8> = (0..10u16).map(|k| (k, 0)).collect();
        let mut w = BitWriter::with_capacity_bits(1024);
        S::serialize(
            &MapConfig::DEFAULT,
            &S::quantize(&MapConfig::DEFAULT, &big),
            &mut w,
        );
        let bytes = w.finish().unwrap();
        assert!(decode::<S>(&c, &bytes).is_err());
    }

    #[test]
    fn hash_set_cap_keeps_the_smallest() {
        let c = SetConfig {
            max_len: 2,
            ..SetConfig::DEFAULT
        };
        let s: HashSet<u32> = [9, 3, 5, 1].into_iter().collect();
        let back = exact::<HashSetSerializer<U32Serializer>>(&c, &s);
        assert_eq!(back, [1, 3].into_iter().collect());
    }

    proptest! {
        #[test]
        fn scalars_round_trip(u in any::<usize>(), i in any::<isize>(), a in any::<u128>(), b in any::<i128>(), ch in any::<char>(), secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            prop_assert_eq!(exact::<UsizeSerializer>(&Default::default(), &u), u);
            prop_assert_eq!(exact::<IsizeSerializer>(&Default::default(), &i), i);
            prop_assert_eq!(exact::<U128Serializer>(&NoConfig, &a), a);
            prop_assert_eq!(exact::<I128Serializer>(&NoConfig, &b), b);
            prop_assert_eq!(exact::<CharSerializer>(&NoConfig, &ch), ch);
            let d = Duration::new(secs, nanos);
            prop_assert_eq!(exact::<DurationSerializer>(&NoConfig, &d), d);
            prop_assert_eq!(*exact::<BoxSerializer<U64Serializer>>(&Default::default(), &Box::new(secs)), secs);
        }

        #[test]
        fn composites_round_trip(
            t in any::<(u8, i32, bool)>(),
            deque in proptest::collection::vec_deque(any::<u16>(), 1..20),
            map in proptest::collection::hash_map(any::<u16>(), any::<i8>(), 1..20),
            set in proptest::collection::hash_set(any::<u32>(), 1..20),
            iv in any::<[i32; 3]>(), uv in any::<[u32; 2]>(), dv in any::<[u64; 3]>(),
        ) {
            type T3 = <(u8, i32, bool) as NetDefault>::Serializer;
            prop_assert_eq!(exact::<T3>(&NetSerializerConfig::DEFAULT, &t), t);
            type D = <VecDeque<u16> as NetDefault>::Serializer;
            prop_assert_eq!(exact::<D>(&NetSerializerConfig::DEFAULT, &deque), deque);
            type M = <HashMap<u16, i8> as NetDefault>::Serializer;
            prop_assert_eq!(exact::<M>(&NetSerializerConfig::DEFAULT, &map), map);
            type H = <HashSet<u32> as NetDefault>::Serializer;
            prop_assert_eq!(exact::<H>(&NetSerializerConfig::DEFAULT, &set), set);
            prop_assert_eq!(exact::<IVec3Serializer>(&NoConfig, &IVec3::from_array(iv)), IVec3::from_array(iv));
            prop_assert_eq!(exact::<UVec2Serializer>(&NoConfig, &UVec2::from_array(uv)), UVec2::from_array(uv));
            let d = DVec3::from_array(dv.map(f64::from_bits));
            let back = exact::<DVec3Serializer>(&NoConfig, &d);
            prop_assert_eq!(back.to_array().map(f64::to_bits), DVec3Serializer::quantize(&NoConfig, &d));
            let a = Vec3A::new(f32::from_bits(iv[0] as u32), 1.5, -0.25);
            let back = exact::<Vec3ASerializer>(&NoConfig, &a);
            prop_assert_eq!(back.to_array().map(f32::to_bits), Vec3ASerializer::quantize(&NoConfig, &a));
        }

        #[test]
        fn random_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode::<CharSerializer>(&NoConfig, &bytes);
            let _ = decode::<DurationSerializer>(&NoConfig, &bytes);
            let _ = decode::<UsizeSerializer>(&Default::default(), &bytes);
            let _ = decode::<IsizeSerializer>(&Default::default(), &bytes);
            let _ = decode::<U128Serializer>(&NoConfig, &bytes);
            let _ = decode::<<HashMap<u16, String> as NetDefault>::Serializer>(&NetSerializerConfig::DEFAULT, &bytes);
            let _ = decode::<<HashSet<char> as NetDefault>::Serializer>(&NetSerializerConfig::DEFAULT, &bytes);
            let _ = decode::<<VecDeque<(u8, char)> as NetDefault>::Serializer>(&NetSerializerConfig::DEFAULT, &bytes);
            let _ = decode::<DVec3Serializer>(&NoConfig, &bytes);
        }
    }
}
