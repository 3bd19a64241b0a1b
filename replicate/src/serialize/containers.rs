//! Container serializers: [`Option`], fixed arrays `[T; N]`, [`Vec`], [`BTreeMap`] and
//! [`BTreeSet`], each forwarding to an element serializer (Iris's
//! `IsForwardingSerializer`, `ArrayPropertyNetSerializer`, `SetPropertyNetSerializer`,
//! `MapPropertyNetSerializer`).
//!
//! This module owns the container wire formats, the shared length prefix used by every
//! variable-length serializer of this crate (strings, byte strings, the serde fallback)
//! and per-element change tracking for arrays. It never looks inside elements: each
//! element is written by its own serializer.
//!
//! # The length prefix
//!
//! Every variable-length value starts with Iris's empty flag:
//!
//! | value | bits |
//! |---|---|
//! | empty | `[1]` (1 bit) |
//! | `len` items, `1 <= len <= max_len` | `[0][len - 1: bits_for_count(max_len)]` |
//!
//! `len - 1` is sent because an empty value already took the `[1]` path, so the count
//! field needs exactly `bits_for_count(max_len)` bits (10 bits for the default
//! `max_len` of 1024, 0 bits when `max_len` is 1). A received length above `max_len` is
//! rejected with [`SerializeError::TooLong`] *before* anything is allocated.
//!
//! # Per-element change tracking (Iris's modulo mapping)
//!
//! With [`VecConfig::element_bits`] (or [`ArrayConfig::element_bits`]) `= k > 0`, the
//! member occupies `1 + k` change-mask bits: bit 0 means "the array changed", and element
//! `i` maps to bit `1 + (i % k)`. Only elements whose bit is set are sent; unchanged
//! elements sharing a bit with a changed one are sent too (the price of a bounded mask).
//! With 100 elements and `k = 10`, elements 0, 10, 20, … share bit 1 and element 99 maps
//! to bit 10.
//!
//! Element serializers' own change-mask bits are not used inside containers: an element
//! whose bit is set is written in full (or as a delta against its baseline element).
//!
//! ```
//! use replicate::serialize::*;
//! // Empty array: one bit.
//! let (bits, v) = roundtrip::<VecSerializer<U8Serializer>>(&VecConfig::DEFAULT, &vec![]).unwrap();
//! assert_eq!((bits, v), (1, vec![]));
//! // Three u8s: flag + 10-bit count + 3 x 8 bits.
//! let (bits, _) = roundtrip::<VecSerializer<U8Serializer>>(&VecConfig::DEFAULT, &vec![1, 2, 3]).unwrap();
//! assert_eq!(bits, 1 + 10 + 24);
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

use super::ChangeMask;
use super::{NetDefault, NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher};
use crate::bits::{BitReader, BitWriter, bits_for_count};

/// The largest element count a container config may allow (Iris bounds array counts
/// by `uint16`).
pub const MAX_CONTAINER_LEN: u32 = u16::MAX as u32;

/// The default `max_len` of [`VecConfig`], [`MapConfig`] and [`SetConfig`].
pub const DEFAULT_CONTAINER_LEN: u32 = 1024;

/// Bits of a length prefix for `max_len` when the value is not empty (flag included).
pub(crate) fn len_prefix_bits(max_len: u32) -> u32 {
    1 + bits_for_count(max_len as u64)
}

/// Writes the shared length prefix (see the [module docs](self)). `len` must be at most
/// `max_len`; callers clamp.
pub(crate) fn write_len(w: &mut BitWriter, len: usize, max_len: u32) {
    debug_assert!(len <= max_len as usize);
    if w.write_bool(len == 0) {
        return;
    }
    w.write_bits((len - 1) as u64, bits_for_count(max_len as u64));
}

/// Reads the shared length prefix, rejecting lengths over `max_len` before the caller
/// allocates anything.
pub(crate) fn read_len(r: &mut BitReader, max_len: u32, what: &'static str) -> Result<usize> {
    if r.read_bool() {
        r.check()?;
        return Ok(0);
    }
    let len = r.read_bits(bits_for_count(max_len as u64)) + 1;
    r.check()?;
    if len > max_len as u64 {
        return Err(SerializeError::TooLong {
            what,
            len,
            max: max_len as u64,
        });
    }
    Ok(len as usize)
}

/// Checks a `max_len`-style field: `1..=limit`.
pub(crate) fn check_max_len(
    field: &str,
    value: u32,
    limit: u32,
) -> std::result::Result<(), String> {
    if value == 0 {
        Err(format!("`{field} = 0`: must be at least 1"))
    } else if value > limit {
        Err(format!("`{field} = {value}` exceeds the limit of {limit}"))
    } else {
        Ok(())
    }
}

/// An element's delta inside a container: `[0]` when it equals its baseline element,
/// else `[1]` and the element serializer's own delta. Unchanged elements, the common
/// case in a changed container, cost one bit whatever the element's delta code.
#[inline]
fn write_element_delta<S: NetSerializer>(
    config: &S::Config,
    e: &S::Quantized,
    p: &S::Quantized,
    w: &mut BitWriter,
) {
    if w.write_bool(!S::is_equal(config, e, p)) {
        S::serialize_delta(config, e, p, w);
    }
}

/// Mirror of [`write_element_delta`].
#[inline]
fn read_element_delta<S: NetSerializer>(
    config: &S::Config,
    p: &S::Quantized,
    r: &mut BitReader,
) -> Result<S::Quantized> {
    if r.read_bool() {
        S::deserialize_delta(config, p, r)
    } else {
        r.check()?;
        Ok(p.clone())
    }
}

/// `a + b * c` in `u32`, `None` on overflow.
fn bits_sum(a: u32, b: u32, c: u32) -> Option<u32> {
    b.checked_mul(c).and_then(|x| x.checked_add(a))
}

// ---------------------------------------------------------------------------------------
// Option
// ---------------------------------------------------------------------------------------

/// `Option<T>`: one presence bit, then the value.
///
/// | value | bits |
/// |---|---|
/// | `None` | `[0]` |
/// | `Some(v)` | `[1][v]` |
///
/// Delta against `prev`: when `prev` is `Some`, one bit says whether the new value is a
/// `Some` delta-encoded against it (`[1][delta]`) or a full option (`[0][option]`); when
/// `prev` is `None` the full option is written. The config is the element's config, so
/// `#[net(bits = 7)]` on an `Option<u8>` configures the `u8`.
///
/// ```
/// use replicate::serialize::*;
/// let (bits, v) = roundtrip::<OptionSerializer<U8Serializer>>(&IntConfig::DEFAULT, &Some(7)).unwrap();
/// assert_eq!((bits, v), (9, Some(7)));
/// assert_eq!(roundtrip::<OptionSerializer<U8Serializer>>(&IntConfig::DEFAULT, &None).unwrap().0, 1);
/// ```
pub struct OptionSerializer<S>(PhantomData<fn() -> S>);

impl<S: NetSerializer> NetSerializer for OptionSerializer<S> {
    type Source = Option<S::Source>;
    type Quantized = Option<S::Quantized>;
    type Config = S::Config;
    const NAME: &'static str = "Option";
    const HAS_DYNAMIC_STATE: bool = S::HAS_DYNAMIC_STATE;
    const HAS_OBJECT_REFERENCES: bool = S::HAS_OBJECT_REFERENCES;

    fn quantize(config: &S::Config, source: &Option<S::Source>) -> Option<S::Quantized> {
        source.as_ref().map(|v| S::quantize(config, v))
    }
    fn dequantize(config: &S::Config, q: &Option<S::Quantized>) -> Option<S::Source> {
        q.as_ref().map(|v| S::dequantize(config, v))
    }
    fn serialize(config: &S::Config, q: &Option<S::Quantized>, w: &mut BitWriter) {
        if let Some(v) = q {
            w.write_bool(true);
            S::serialize(config, v, w);
        } else {
            w.write_bool(false);
        }
    }
    fn deserialize(config: &S::Config, r: &mut BitReader) -> Result<Option<S::Quantized>> {
        if r.read_bool() {
            Ok(Some(S::deserialize(config, r)?))
        } else {
            r.check()?;
            Ok(None)
        }
    }
    fn serialize_delta(
        config: &S::Config,
        q: &Option<S::Quantized>,
        prev: &Option<S::Quantized>,
        w: &mut BitWriter,
    ) {
        if let Some(p) = prev {
            if let Some(v) = q {
                w.write_bool(true);
                S::serialize_delta(config, v, p, w);
                return;
            }
            w.write_bool(false);
        }
        Self::serialize(config, q, w);
    }
    fn deserialize_delta(
        config: &S::Config,
        prev: &Option<S::Quantized>,
        r: &mut BitReader,
    ) -> Result<Option<S::Quantized>> {
        if let Some(p) = prev
            && r.read_bool()
        {
            return Ok(Some(S::deserialize_delta(config, p, r)?));
        }
        Self::deserialize(config, r)
    }
    fn is_equal(config: &S::Config, a: &Option<S::Quantized>, b: &Option<S::Quantized>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => S::is_equal(config, a, b),
            (None, None) => true,
            _ => false,
        }
    }
    fn validate(config: &S::Config, q: &Option<S::Quantized>) -> Result<()> {
        match q {
            Some(v) => S::validate(config, v),
            None => Ok(()),
        }
    }
    fn validate_config(config: &S::Config) -> std::result::Result<(), String> {
        S::validate_config(config)
    }
    fn max_bits(config: &S::Config) -> Option<u32> {
        S::max_bits(config).and_then(|b| b.checked_add(1))
    }
    fn collect_references(
        config: &S::Config,
        q: &Option<S::Quantized>,
        out: &mut Vec<crate::handle::NetRefHandle>,
    ) {
        if let Some(v) = q {
            S::collect_references(config, v, out);
        }
    }
    fn fingerprint(config: &S::Config, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        S::fingerprint(config, hasher);
    }
}

impl<T: NetDefault> NetDefault for Option<T> {
    type Serializer = OptionSerializer<T::Serializer>;
}

/// `#[net(bits = 7)]` on an `Option<u8>` quantizes the inner value.
impl<T: super::NetQuantize> super::NetQuantize for Option<T> {
    type Serializer = OptionSerializer<<T as super::NetQuantize>::Serializer>;
    const BITS: (u32, u32) = T::BITS;
}

// ---------------------------------------------------------------------------------------
// Shared element-tracking helpers (Vec and fixed arrays)
// ---------------------------------------------------------------------------------------

/// The change-mask bit of element `i` for a member at `offset` with `element_bits > 0`.
#[inline]
fn element_bit(offset: u32, element_bits: u32, i: usize) -> u32 {
    offset + 1 + (i % element_bits as usize) as u32
}

/// Sets bit `offset` and, when tracking, the bit of every element of `current` that is
/// new or differs from `previous`.
fn diff_elements<S: NetSerializer>(
    config: &S::Config,
    element_bits: u32,
    current: &[S::Quantized],
    previous: &[S::Quantized],
    mask: &mut ChangeMask,
    offset: u32,
) {
    mask.set(offset);
    if element_bits == 0 {
        return;
    }
    for (i, c) in current.iter().enumerate() {
        let changed = previous.get(i).is_none_or(|p| !S::is_equal(config, c, p));
        if changed {
            mask.set(element_bit(offset, element_bits, i));
        }
    }
}

fn slices_equal<S: NetSerializer>(
    config: &S::Config,
    a: &[S::Quantized],
    b: &[S::Quantized],
) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| S::is_equal(config, x, y))
}

/// What [`VecSerializer`] and [`ArraySerializer`] differ in for the masked encodings
/// (per-element change tracking); [`serialize_tracked`] and [`deserialize_tracked`] do
/// the rest, so both containers share one wire format for the tracked elements.
trait TrackedElements<S: NetSerializer>: NetSerializer<Quantized = Vec<S::Quantized>> {
    /// The element serializer's config and the change-mask bits for elements (0 = off).
    fn tracking(config: &Self::Config) -> (&S::Config, u32);
    /// Writes what precedes the elements (a `Vec`'s length prefix, nothing for an
    /// array) and returns the elements to write.
    fn write_prefix<'a>(
        config: &Self::Config,
        q: &'a [S::Quantized],
        w: &mut BitWriter,
    ) -> Cow<'a, [S::Quantized]>;
    /// The elements a delta is taken against.
    fn baseline(prev: &[S::Quantized]) -> Cow<'_, [S::Quantized]>;
    /// Mirror of [`write_prefix`](Self::write_prefix): reads what precedes the elements
    /// and resizes `target` to the element count.
    fn read_prefix(
        config: &Self::Config,
        target: &mut Vec<S::Quantized>,
        r: &mut BitReader,
    ) -> Result<()>;
}

/// `serialize_masked` (without `prev`) and `serialize_masked_delta` (with) of a tracked
/// container: the prefix, then every element whose mapped bit is set, delta-encoded
/// against the baseline element where there is one. Without tracking, the full value
/// (or its delta).
fn serialize_tracked<S: NetSerializer, T: TrackedElements<S>>(
    config: &T::Config,
    q: &Vec<S::Quantized>,
    prev: Option<&Vec<S::Quantized>>,
    mask: &ChangeMask,
    offset: u32,
    w: &mut BitWriter,
) {
    let (element, element_bits) = T::tracking(config);
    if element_bits == 0 {
        return match prev {
            Some(prev) => T::serialize_delta(config, q, prev, w),
            None => T::serialize(config, q, w),
        };
    }
    let q = T::write_prefix(config, q, w);
    let prev = prev.map(|p| T::baseline(p));
    for (i, e) in q.iter().enumerate() {
        if !mask.get(element_bit(offset, element_bits, i)) {
            continue;
        }
        match prev.as_ref().and_then(|p| p.get(i)) {
            Some(p) => S::serialize_delta(element, e, p, w),
            None => S::serialize(element, e, w),
        }
    }
}

/// Mirror of [`serialize_tracked`]: resizes `target` and overwrites its masked elements.
fn deserialize_tracked<S: NetSerializer, T: TrackedElements<S>>(
    config: &T::Config,
    target: &mut Vec<S::Quantized>,
    prev: Option<&Vec<S::Quantized>>,
    mask: &ChangeMask,
    offset: u32,
    r: &mut BitReader,
) -> Result<()> {
    let (element, element_bits) = T::tracking(config);
    if element_bits == 0 {
        *target = match prev {
            Some(prev) => T::deserialize_delta(config, prev, r)?,
            None => T::deserialize(config, r)?,
        };
        return Ok(());
    }
    let prev = prev.map(|p| T::baseline(p));
    T::read_prefix(config, target, r)?;
    for (i, e) in target.iter_mut().enumerate() {
        if !mask.get(element_bit(offset, element_bits, i)) {
            continue;
        }
        *e = match prev.as_ref().and_then(|p| p.get(i)) {
            Some(p) => S::deserialize_delta(element, p, r)?,
            None => S::deserialize(element, r)?,
        };
    }
    Ok(())
}

/// The four masked methods of a [`TrackedElements`] container, forwarding to
/// [`serialize_tracked`] and [`deserialize_tracked`] (inside its `NetSerializer` impl,
/// with `S` the element serializer).
macro_rules! tracked_masked_methods {
    () => {
        fn serialize_masked(
            config: &Self::Config,
            q: &Vec<S::Quantized>,
            mask: &ChangeMask,
            offset: u32,
            w: &mut BitWriter,
        ) {
            serialize_tracked::<S, Self>(config, q, None, mask, offset, w)
        }
        fn deserialize_masked(
            config: &Self::Config,
            target: &mut Vec<S::Quantized>,
            mask: &ChangeMask,
            offset: u32,
            r: &mut BitReader,
        ) -> Result<()> {
            deserialize_tracked::<S, Self>(config, target, None, mask, offset, r)
        }
        fn serialize_masked_delta(
            config: &Self::Config,
            q: &Vec<S::Quantized>,
            prev: &Vec<S::Quantized>,
            mask: &ChangeMask,
            offset: u32,
            w: &mut BitWriter,
        ) {
            serialize_tracked::<S, Self>(config, q, Some(prev), mask, offset, w)
        }
        fn deserialize_masked_delta(
            config: &Self::Config,
            target: &mut Vec<S::Quantized>,
            prev: &Vec<S::Quantized>,
            mask: &ChangeMask,
            offset: u32,
            r: &mut BitReader,
        ) -> Result<()> {
            deserialize_tracked::<S, Self>(config, target, Some(prev), mask, offset, r)
        }
        fn shift_masked(
            config: &Self::Config,
            target: &mut Vec<S::Quantized>,
            x: &Vec<S::Quantized>,
            y: &Vec<S::Quantized>,
            z: &Vec<S::Quantized>,
            mask: &ChangeMask,
            offset: u32,
        ) -> Result<()> {
            super::shift::shift_masked_by_code::<Self>(config, target, x, y, z, mask, offset)
        }
    };
}

/// Most bytes a decoder reserves up front for a received count; beyond that the vector
/// grows only as elements actually decode.
const MAX_PREALLOC_BYTES: usize = 64 * 1024;

/// Initial capacity for `n` received elements of `T`: no more than the bits left could
/// hold (every element takes at least one bit in practice) nor [`MAX_PREALLOC_BYTES`].
fn prealloc<T>(n: usize, r: &BitReader) -> usize {
    n.min(r.bits_left())
        .min(MAX_PREALLOC_BYTES / std::mem::size_of::<T>().max(1))
}

/// Reads `n` full elements, preallocating no more than [`prealloc`] allows.
fn read_elements<S: NetSerializer>(
    config: &S::Config,
    n: usize,
    r: &mut BitReader,
) -> Result<Vec<S::Quantized>> {
    let mut v = Vec::with_capacity(prealloc::<S::Quantized>(n, r));
    for _ in 0..n {
        v.push(S::deserialize(config, r)?);
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// Vec
// ---------------------------------------------------------------------------------------

/// Configuration of [`VecSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_len` | 1024 ([`DEFAULT_CONTAINER_LEN`]) | most elements; longer sources are truncated, longer received counts rejected (`1..=65535`) |
/// | `element` | `C::DEFAULT` | the element serializer's config |
/// | `element_bits` | 0 (off) | change-mask bits for per-element tracking (`0..=65535`) |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VecConfig<C> {
    /// Most elements.
    pub max_len: u32,
    /// The element serializer's config.
    pub element: C,
    /// Change-mask bits for per-element tracking (0 = off).
    pub element_bits: u32,
}

impl<C: NetSerializerConfig> VecConfig<C> {
    /// 1024 elements, default element config, no per-element tracking.
    pub const DEFAULT: Self = VecConfig {
        max_len: DEFAULT_CONTAINER_LEN,
        element: C::DEFAULT,
        element_bits: 0,
    };
}

impl<C: NetSerializerConfig> NetSerializerConfig for VecConfig<C> {
    const DEFAULT: Self = VecConfig::<C>::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_len);
        hasher.write_u32(self.element_bits);
        self.element.fingerprint(hasher);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_len", self.max_len, MAX_CONTAINER_LEN)?;
        if self.element_bits > MAX_CONTAINER_LEN {
            return Err(format!(
                "`element_bits = {}` exceeds the limit of {MAX_CONTAINER_LEN}",
                self.element_bits
            ));
        }
        Ok(())
    }
}

/// `Vec<T>` with Iris's array encoding and optional per-element change tracking.
///
/// Full value: the length prefix (`[1]` when empty, else `[0][count - 1]`, see the
/// [module docs](self)), then each element.
///
/// Delta against `prev` (Iris's array delta):
///
/// | case | bits |
/// |---|---|
/// | same count | `[1]` then each element's delta against `prev[i]` |
/// | different count | `[0]`, the length prefix, deltas for the elements both have, then the new elements in full |
///
/// Masked (with `element_bits = k > 0`, see the [module docs](self)): the length prefix,
/// then only the elements whose mapped bit is set (as deltas against the baseline element
/// where one exists in the masked delta form). The receiver resizes to the new count,
/// keeps the elements whose bit is clear and overwrites the others. If decoding fails
/// midway, the target is left valid but partially updated.
///
/// ```
/// use replicate::serialize::*;
/// use replicate::ChangeMask;
/// type S = VecSerializer<U8Serializer>;
/// let cfg = VecConfig { element_bits: 4, ..VecConfig::DEFAULT };
/// let old = vec![1u8, 2, 3, 4, 5, 6];
/// let new = vec![1u8, 2, 9, 4, 5, 6];
/// let mut mask = ChangeMask::new(S::change_mask_bits(&cfg));
/// assert!(S::diff(&cfg, &new, &old, &mut mask, 0));
/// assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![0, 3]); // element 2 -> bit 1 + 2
/// ```
pub struct VecSerializer<S>(PhantomData<fn() -> S>);

impl<S: NetSerializer> VecSerializer<S> {
    fn clamped<'a>(config: &VecConfig<S::Config>, q: &'a [S::Quantized]) -> &'a [S::Quantized] {
        &q[..q.len().min(config.max_len as usize)]
    }
}

impl<S: NetSerializer> NetSerializer for VecSerializer<S> {
    type Source = Vec<S::Source>;
    type Quantized = Vec<S::Quantized>;
    type Config = VecConfig<S::Config>;
    const NAME: &'static str = "Vec";
    const HAS_DYNAMIC_STATE: bool = true;
    const HAS_OBJECT_REFERENCES: bool = S::HAS_OBJECT_REFERENCES;

    fn quantize(config: &Self::Config, source: &Vec<S::Source>) -> Vec<S::Quantized> {
        source
            .iter()
            .take(config.max_len as usize)
            .map(|v| S::quantize(&config.element, v))
            .collect()
    }
    fn dequantize(config: &Self::Config, q: &Vec<S::Quantized>) -> Vec<S::Source> {
        q.iter()
            .map(|v| S::dequantize(&config.element, v))
            .collect()
    }
    fn serialize(config: &Self::Config, q: &Vec<S::Quantized>, w: &mut BitWriter) {
        let q = Self::clamped(config, q);
        write_len(w, q.len(), config.max_len);
        for e in q {
            S::serialize(&config.element, e, w);
        }
    }
    fn deserialize(config: &Self::Config, r: &mut BitReader) -> Result<Vec<S::Quantized>> {
        let n = read_len(r, config.max_len, "array length")?;
        read_elements::<S>(&config.element, n, r)
    }
    fn serialize_delta(
        config: &Self::Config,
        q: &Vec<S::Quantized>,
        prev: &Vec<S::Quantized>,
        w: &mut BitWriter,
    ) {
        let q = Self::clamped(config, q);
        if !w.write_bool(q.len() == prev.len()) {
            write_len(w, q.len(), config.max_len);
        }
        for (i, e) in q.iter().enumerate() {
            match prev.get(i) {
                Some(p) => write_element_delta::<S>(&config.element, e, p, w),
                None => S::serialize(&config.element, e, w),
            }
        }
    }
    fn deserialize_delta(
        config: &Self::Config,
        prev: &Vec<S::Quantized>,
        r: &mut BitReader,
    ) -> Result<Vec<S::Quantized>> {
        let n = if r.read_bool() {
            if prev.len() > config.max_len as usize {
                return Err(SerializeError::TooLong {
                    what: "array baseline length",
                    len: prev.len() as u64,
                    max: config.max_len as u64,
                });
            }
            prev.len()
        } else {
            read_len(r, config.max_len, "array length")?
        };
        r.check()?;
        let mut v = Vec::with_capacity(prealloc::<S::Quantized>(n, r).max(n.min(prev.len())));
        for i in 0..n {
            v.push(match prev.get(i) {
                Some(p) => read_element_delta::<S>(&config.element, p, r)?,
                None => S::deserialize(&config.element, r)?,
            });
        }
        Ok(v)
    }
    fn is_equal(config: &Self::Config, a: &Vec<S::Quantized>, b: &Vec<S::Quantized>) -> bool {
        slices_equal::<S>(&config.element, a, b)
    }
    fn validate(config: &Self::Config, q: &Vec<S::Quantized>) -> Result<()> {
        if q.len() > config.max_len as usize {
            return Err(SerializeError::TooLong {
                what: "array length",
                len: q.len() as u64,
                max: config.max_len as u64,
            });
        }
        q.iter().try_for_each(|e| S::validate(&config.element, e))
    }
    fn validate_config(config: &Self::Config) -> std::result::Result<(), String> {
        config.validate()?;
        S::validate_config(&config.element).map_err(|e| format!("element: {e}"))
    }
    fn change_mask_bits(config: &Self::Config) -> u32 {
        1 + config.element_bits
    }
    fn diff(
        config: &Self::Config,
        current: &Vec<S::Quantized>,
        previous: &Vec<S::Quantized>,
        mask: &mut ChangeMask,
        offset: u32,
    ) -> bool {
        if Self::is_equal(config, current, previous) {
            return false;
        }
        diff_elements::<S>(
            &config.element,
            config.element_bits,
            current,
            previous,
            mask,
            offset,
        );
        true
    }
    tracked_masked_methods!();
    fn max_bits(config: &Self::Config) -> Option<u32> {
        let e = S::max_bits(&config.element)?;
        bits_sum(len_prefix_bits(config.max_len), config.max_len, e)
    }
    fn collect_references(
        config: &Self::Config,
        q: &Vec<S::Quantized>,
        out: &mut Vec<crate::handle::NetRefHandle>,
    ) {
        for e in q {
            S::collect_references(&config.element, e, out);
        }
    }
    fn fingerprint(config: &Self::Config, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        config.fingerprint(hasher);
        S::fingerprint(&config.element, hasher);
    }
}

impl<S: NetSerializer> TrackedElements<S> for VecSerializer<S> {
    fn tracking(config: &Self::Config) -> (&S::Config, u32) {
        (&config.element, config.element_bits)
    }
    fn write_prefix<'a>(
        config: &Self::Config,
        q: &'a [S::Quantized],
        w: &mut BitWriter,
    ) -> Cow<'a, [S::Quantized]> {
        let q = Self::clamped(config, q);
        write_len(w, q.len(), config.max_len);
        Cow::Borrowed(q)
    }
    fn baseline(prev: &[S::Quantized]) -> Cow<'_, [S::Quantized]> {
        Cow::Borrowed(prev)
    }
    fn read_prefix(
        config: &Self::Config,
        target: &mut Vec<S::Quantized>,
        r: &mut BitReader,
    ) -> Result<()> {
        let n = read_len(r, config.max_len, "array length")?;
        target.resize_with(n, Default::default);
        Ok(())
    }
}

impl<T: NetDefault> NetDefault for Vec<T> {
    type Serializer = VecSerializer<T::Serializer>;
}

// ---------------------------------------------------------------------------------------
// Fixed arrays
// ---------------------------------------------------------------------------------------

/// Configuration of [`ArraySerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `element` | `C::DEFAULT` | the element serializer's config |
/// | `element_bits` | 0 (off) | change-mask bits for per-element tracking (`0..=65535`) |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrayConfig<C> {
    /// The element serializer's config.
    pub element: C,
    /// Change-mask bits for per-element tracking (0 = off).
    pub element_bits: u32,
}

impl<C: NetSerializerConfig> ArrayConfig<C> {
    /// Default element config, no per-element tracking.
    pub const DEFAULT: Self = ArrayConfig {
        element: C::DEFAULT,
        element_bits: 0,
    };
}

impl<C: NetSerializerConfig> NetSerializerConfig for ArrayConfig<C> {
    const DEFAULT: Self = ArrayConfig::<C>::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.element_bits);
        self.element.fingerprint(hasher);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        if self.element_bits > MAX_CONTAINER_LEN {
            return Err(format!(
                "`element_bits = {}` exceeds the limit of {MAX_CONTAINER_LEN}",
                self.element_bits
            ));
        }
        Ok(())
    }
}

/// `[T; N]`: the `N` elements back to back, no count (Iris's static array).
///
/// The quantized form is a `Vec` of exactly `N` quantized elements (a `[Q; N]` would not
/// be `Default` for `N > 32`); a shorter quantized vector (such as the `Default` one) is
/// treated as padded with default elements, a longer one as truncated.
///
/// Delta: each element's delta against the baseline element. Masked (with
/// `element_bits = k > 0`): only the elements whose mapped bit `1 + (i % k)` is set, as
/// for [`VecSerializer`]. `N` may be at most 65535.
///
/// ```
/// use replicate::serialize::*;
/// type S = ArraySerializer<U8Serializer, 4>;
/// let (bits, v) = roundtrip::<S>(&ArrayConfig::DEFAULT, &[1, 2, 3, 4]).unwrap();
/// assert_eq!((bits, v), (32, [1, 2, 3, 4]));
/// ```
pub struct ArraySerializer<S, const N: usize>(PhantomData<fn() -> S>);

impl<S: NetSerializer, const N: usize> ArraySerializer<S, N> {
    /// `q` padded or truncated to exactly `N` elements.
    fn normalized(q: &[S::Quantized]) -> Cow<'_, [S::Quantized]> {
        if q.len() == N {
            Cow::Borrowed(q)
        } else {
            let mut v: Vec<S::Quantized> = q.iter().take(N).cloned().collect();
            v.resize_with(N, Default::default);
            Cow::Owned(v)
        }
    }
}

impl<S: NetSerializer, const N: usize> NetSerializer for ArraySerializer<S, N> {
    type Source = [S::Source; N];
    type Quantized = Vec<S::Quantized>;
    type Config = ArrayConfig<S::Config>;
    const NAME: &'static str = "Array";
    const HAS_DYNAMIC_STATE: bool = true;
    const HAS_OBJECT_REFERENCES: bool = S::HAS_OBJECT_REFERENCES;

    fn quantize(config: &Self::Config, source: &[S::Source; N]) -> Vec<S::Quantized> {
        source
            .iter()
            .map(|v| S::quantize(&config.element, v))
            .collect()
    }
    fn dequantize(config: &Self::Config, q: &Vec<S::Quantized>) -> [S::Source; N] {
        let q = Self::normalized(q);
        std::array::from_fn(|i| S::dequantize(&config.element, &q[i]))
    }
    fn serialize(config: &Self::Config, q: &Vec<S::Quantized>, w: &mut BitWriter) {
        for e in Self::normalized(q).iter() {
            S::serialize(&config.element, e, w);
        }
    }
    fn deserialize(config: &Self::Config, r: &mut BitReader) -> Result<Vec<S::Quantized>> {
        read_elements::<S>(&config.element, N, r)
    }
    fn serialize_delta(
        config: &Self::Config,
        q: &Vec<S::Quantized>,
        prev: &Vec<S::Quantized>,
        w: &mut BitWriter,
    ) {
        let prev = Self::normalized(prev);
        for (e, p) in Self::normalized(q).iter().zip(prev.iter()) {
            write_element_delta::<S>(&config.element, e, p, w);
        }
    }
    fn deserialize_delta(
        config: &Self::Config,
        prev: &Vec<S::Quantized>,
        r: &mut BitReader,
    ) -> Result<Vec<S::Quantized>> {
        let prev = Self::normalized(prev);
        prev.iter()
            .map(|p| read_element_delta::<S>(&config.element, p, r))
            .collect()
    }
    fn is_equal(config: &Self::Config, a: &Vec<S::Quantized>, b: &Vec<S::Quantized>) -> bool {
        slices_equal::<S>(&config.element, &Self::normalized(a), &Self::normalized(b))
    }
    fn validate(config: &Self::Config, q: &Vec<S::Quantized>) -> Result<()> {
        if q.len() != N {
            return Err(SerializeError::invalid("Array", "wrong element count"));
        }
        q.iter().try_for_each(|e| S::validate(&config.element, e))
    }
    fn validate_config(config: &Self::Config) -> std::result::Result<(), String> {
        if N > MAX_CONTAINER_LEN as usize {
            return Err(format!(
                "array length {N} exceeds the limit of {MAX_CONTAINER_LEN}"
            ));
        }
        config.validate()?;
        S::validate_config(&config.element).map_err(|e| format!("element: {e}"))
    }
    fn change_mask_bits(config: &Self::Config) -> u32 {
        1 + config.element_bits
    }
    fn diff(
        config: &Self::Config,
        current: &Vec<S::Quantized>,
        previous: &Vec<S::Quantized>,
        mask: &mut ChangeMask,
        offset: u32,
    ) -> bool {
        let (c, p) = (Self::normalized(current), Self::normalized(previous));
        if slices_equal::<S>(&config.element, &c, &p) {
            return false;
        }
        diff_elements::<S>(&config.element, config.element_bits, &c, &p, mask, offset);
        true
    }
    tracked_masked_methods!();
    fn max_bits(config: &Self::Config) -> Option<u32> {
        let e = S::max_bits(&config.element)?;
        bits_sum(0, u32::try_from(N).ok()?, e)
    }
    fn collect_references(
        config: &Self::Config,
        q: &Vec<S::Quantized>,
        out: &mut Vec<crate::handle::NetRefHandle>,
    ) {
        for e in q.iter().take(N) {
            S::collect_references(&config.element, e, out);
        }
    }
    fn fingerprint(config: &Self::Config, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        hasher.write_u64(N as u64);
        config.fingerprint(hasher);
        S::fingerprint(&config.element, hasher);
    }
}

impl<S: NetSerializer, const N: usize> TrackedElements<S> for ArraySerializer<S, N> {
    fn tracking(config: &Self::Config) -> (&S::Config, u32) {
        (&config.element, config.element_bits)
    }
    fn write_prefix<'a>(
        _: &Self::Config,
        q: &'a [S::Quantized],
        _: &mut BitWriter,
    ) -> Cow<'a, [S::Quantized]> {
        Self::normalized(q)
    }
    fn baseline(prev: &[S::Quantized]) -> Cow<'_, [S::Quantized]> {
        Self::normalized(prev)
    }
    fn read_prefix(
        _: &Self::Config,
        target: &mut Vec<S::Quantized>,
        _: &mut BitReader,
    ) -> Result<()> {
        target.resize_with(N, Default::default);
        Ok(())
    }
}

impl<T: NetDefault, const N: usize> NetDefault for [T; N] {
    type Serializer = ArraySerializer<T::Serializer, N>;
}

// ---------------------------------------------------------------------------------------
// Maps and sets
// ---------------------------------------------------------------------------------------

/// Configuration of [`MapSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_len` | 1024 | most entries (`1..=65535`) |
/// | `key` | `K::DEFAULT` | the key serializer's config |
/// | `value` | `V::DEFAULT` | the value serializer's config |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapConfig<K, V> {
    /// Most entries.
    pub max_len: u32,
    /// The key serializer's config.
    pub key: K,
    /// The value serializer's config.
    pub value: V,
}

impl<K: NetSerializerConfig, V: NetSerializerConfig> MapConfig<K, V> {
    /// 1024 entries, default key and value configs.
    pub const DEFAULT: Self = MapConfig {
        max_len: DEFAULT_CONTAINER_LEN,
        key: K::DEFAULT,
        value: V::DEFAULT,
    };
}

impl<K: NetSerializerConfig, V: NetSerializerConfig> NetSerializerConfig for MapConfig<K, V> {
    const DEFAULT: Self = MapConfig::<K, V>::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_len);
        self.key.fingerprint(hasher);
        self.value.fingerprint(hasher);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_len", self.max_len, MAX_CONTAINER_LEN)
    }
}

/// `BTreeMap<K, V>`: entries in ascending order of their *quantized* keys, so the
/// encoding is deterministic.
///
/// Full value: the length prefix (see the [module docs](self)), then `[key][value]` per
/// entry. The receiver rejects keys that are not strictly ascending (a sender never
/// writes them), so every quantized map has exactly one encoding. A source map with
/// more than `max_len` entries is truncated to its first `max_len` entries.
///
/// Delta against `prev`: `[1]` and each value's delta when the key sets are equal,
/// otherwise `[0]` and the full value.
///
/// ```
/// use std::collections::BTreeMap;
/// use replicate::serialize::*;
/// type S = MapSerializer<U8Serializer, StringSerializer>;
/// let m = BTreeMap::from([(1u8, "one".to_string()), (2, "two".to_string())]);
/// let (_, back) = roundtrip::<S>(&MapConfig::DEFAULT, &m).unwrap();
/// assert_eq!(back, m);
/// ```
pub struct MapSerializer<K, V>(PhantomData<fn() -> (K, V)>);

impl<K, V> NetSerializer for MapSerializer<K, V>
where
    K: NetSerializer,
    V: NetSerializer,
    K::Source: Ord,
    K::Quantized: Ord,
{
    type Source = BTreeMap<K::Source, V::Source>;
    type Quantized = BTreeMap<K::Quantized, V::Quantized>;
    type Config = MapConfig<K::Config, V::Config>;
    const NAME: &'static str = "BTreeMap";
    const HAS_DYNAMIC_STATE: bool = true;
    const HAS_OBJECT_REFERENCES: bool = K::HAS_OBJECT_REFERENCES || V::HAS_OBJECT_REFERENCES;

    fn quantize(config: &Self::Config, source: &Self::Source) -> Self::Quantized {
        source
            .iter()
            .take(config.max_len as usize)
            .map(|(k, v)| (K::quantize(&config.key, k), V::quantize(&config.value, v)))
            .collect()
    }
    fn dequantize(config: &Self::Config, q: &Self::Quantized) -> Self::Source {
        q.iter()
            .map(|(k, v)| {
                (
                    K::dequantize(&config.key, k),
                    V::dequantize(&config.value, v),
                )
            })
            .collect()
    }
    fn serialize(config: &Self::Config, q: &Self::Quantized, w: &mut BitWriter) {
        let n = q.len().min(config.max_len as usize);
        write_len(w, n, config.max_len);
        for (k, v) in q.iter().take(n) {
            K::serialize(&config.key, k, w);
            V::serialize(&config.value, v, w);
        }
    }
    fn deserialize(config: &Self::Config, r: &mut BitReader) -> Result<Self::Quantized> {
        let n = read_len(r, config.max_len, "map length")?;
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let k = K::deserialize(&config.key, r)?;
            let v = V::deserialize(&config.value, r)?;
            if out.last_key_value().is_some_and(|(last, _)| *last >= k) {
                return Err(SerializeError::invalid(
                    "BTreeMap",
                    "keys not strictly ascending",
                ));
            }
            out.insert(k, v);
        }
        Ok(out)
    }
    fn serialize_delta(
        config: &Self::Config,
        q: &Self::Quantized,
        prev: &Self::Quantized,
        w: &mut BitWriter,
    ) {
        let same_keys = q.len() == prev.len()
            && q.len() <= config.max_len as usize
            && q.keys().zip(prev.keys()).all(|(a, b)| a == b);
        if w.write_bool(same_keys) {
            for (v, p) in q.values().zip(prev.values()) {
                write_element_delta::<V>(&config.value, v, p, w);
            }
        } else {
            Self::serialize(config, q, w);
        }
    }
    fn deserialize_delta(
        config: &Self::Config,
        prev: &Self::Quantized,
        r: &mut BitReader,
    ) -> Result<Self::Quantized> {
        if r.read_bool() {
            if prev.len() > config.max_len as usize {
                return Err(SerializeError::TooLong {
                    what: "map baseline length",
                    len: prev.len() as u64,
                    max: config.max_len as u64,
                });
            }
            prev.iter()
                .map(|(k, p)| Ok((k.clone(), read_element_delta::<V>(&config.value, p, r)?)))
                .collect()
        } else {
            Self::deserialize(config, r)
        }
    }
    fn is_equal(config: &Self::Config, a: &Self::Quantized, b: &Self::Quantized) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|((ka, va), (kb, vb))| ka == kb && V::is_equal(&config.value, va, vb))
    }
    fn validate(config: &Self::Config, q: &Self::Quantized) -> Result<()> {
        if q.len() > config.max_len as usize {
            return Err(SerializeError::TooLong {
                what: "map length",
                len: q.len() as u64,
                max: config.max_len as u64,
            });
        }
        for (k, v) in q {
            K::validate(&config.key, k)?;
            V::validate(&config.value, v)?;
        }
        Ok(())
    }
    fn validate_config(config: &Self::Config) -> std::result::Result<(), String> {
        config.validate()?;
        K::validate_config(&config.key).map_err(|e| format!("key: {e}"))?;
        V::validate_config(&config.value).map_err(|e| format!("value: {e}"))
    }
    fn max_bits(config: &Self::Config) -> Option<u32> {
        let e = K::max_bits(&config.key)?.checked_add(V::max_bits(&config.value)?)?;
        bits_sum(len_prefix_bits(config.max_len), config.max_len, e)
    }
    fn collect_references(
        config: &Self::Config,
        q: &Self::Quantized,
        out: &mut Vec<crate::handle::NetRefHandle>,
    ) {
        for (k, v) in q {
            K::collect_references(&config.key, k, out);
            V::collect_references(&config.value, v, out);
        }
    }
    fn fingerprint(config: &Self::Config, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        config.fingerprint(hasher);
        K::fingerprint(&config.key, hasher);
        V::fingerprint(&config.value, hasher);
    }
}

impl<K, V> NetDefault for BTreeMap<K, V>
where
    K: NetDefault + Ord,
    V: NetDefault,
    <K::Serializer as NetSerializer>::Quantized: Ord,
{
    type Serializer = MapSerializer<K::Serializer, V::Serializer>;
}

/// Configuration of [`SetSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_len` | 1024 | most elements (`1..=65535`) |
/// | `element` | `C::DEFAULT` | the element serializer's config |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SetConfig<C> {
    /// Most elements.
    pub max_len: u32,
    /// The element serializer's config.
    pub element: C,
}

impl<C: NetSerializerConfig> SetConfig<C> {
    /// 1024 elements, default element config.
    pub const DEFAULT: Self = SetConfig {
        max_len: DEFAULT_CONTAINER_LEN,
        element: C::DEFAULT,
    };
}

impl<C: NetSerializerConfig> NetSerializerConfig for SetConfig<C> {
    const DEFAULT: Self = SetConfig::<C>::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_len);
        self.element.fingerprint(hasher);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_len", self.max_len, MAX_CONTAINER_LEN)
    }
}

/// `BTreeSet<T>`: the length prefix (see the [module docs](self)), then the elements in
/// ascending order of their quantized values. The receiver rejects elements that are not
/// strictly ascending. Delta: the default (`[0]` unchanged, else `[1]` and the full set).
///
/// ```
/// use std::collections::BTreeSet;
/// use replicate::serialize::*;
/// let s = BTreeSet::from([3u16, 1, 2]);
/// let (bits, back) = roundtrip::<SetSerializer<U16Serializer>>(&SetConfig::DEFAULT, &s).unwrap();
/// assert_eq!(back, s);
/// assert_eq!(bits, 1 + 10 + 3 * 17);
/// ```
pub struct SetSerializer<S>(PhantomData<fn() -> S>);

impl<S> NetSerializer for SetSerializer<S>
where
    S: NetSerializer,
    S::Source: Ord,
    S::Quantized: Ord,
{
    type Source = BTreeSet<S::Source>;
    type Quantized = BTreeSet<S::Quantized>;
    type Config = SetConfig<S::Config>;
    const NAME: &'static str = "BTreeSet";
    const HAS_DYNAMIC_STATE: bool = true;
    const HAS_OBJECT_REFERENCES: bool = S::HAS_OBJECT_REFERENCES;

    fn quantize(config: &Self::Config, source: &Self::Source) -> Self::Quantized {
        source
            .iter()
            .take(config.max_len as usize)
            .map(|v| S::quantize(&config.element, v))
            .collect()
    }
    fn dequantize(config: &Self::Config, q: &Self::Quantized) -> Self::Source {
        q.iter()
            .map(|v| S::dequantize(&config.element, v))
            .collect()
    }
    fn serialize(config: &Self::Config, q: &Self::Quantized, w: &mut BitWriter) {
        let n = q.len().min(config.max_len as usize);
        write_len(w, n, config.max_len);
        for e in q.iter().take(n) {
            S::serialize(&config.element, e, w);
        }
    }
    fn deserialize(config: &Self::Config, r: &mut BitReader) -> Result<Self::Quantized> {
        let n = read_len(r, config.max_len, "set length")?;
        let mut out = BTreeSet::new();
        for _ in 0..n {
            let e = S::deserialize(&config.element, r)?;
            if out.last().is_some_and(|last| *last >= e) {
                return Err(SerializeError::invalid(
                    "BTreeSet",
                    "elements not strictly ascending",
                ));
            }
            out.insert(e);
        }
        Ok(out)
    }
    fn validate(config: &Self::Config, q: &Self::Quantized) -> Result<()> {
        if q.len() > config.max_len as usize {
            return Err(SerializeError::TooLong {
                what: "set length",
                len: q.len() as u64,
                max: config.max_len as u64,
            });
        }
        q.iter().try_for_each(|e| S::validate(&config.element, e))
    }
    fn validate_config(config: &Self::Config) -> std::result::Result<(), String> {
        config.validate()?;
        S::validate_config(&config.element).map_err(|e| format!("element: {e}"))
    }
    fn max_bits(config: &Self::Config) -> Option<u32> {
        let e = S::max_bits(&config.element)?;
        bits_sum(len_prefix_bits(config.max_len), config.max_len, e)
    }
    fn collect_references(
        config: &Self::Config,
        q: &Self::Quantized,
        out: &mut Vec<crate::handle::NetRefHandle>,
    ) {
        for e in q {
            S::collect_references(&config.element, e, out);
        }
    }
    fn fingerprint(config: &Self::Config, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        config.fingerprint(hasher);
        S::fingerprint(&config.element, hasher);
    }
}

impl<T> NetDefault for BTreeSet<T>
where
    T: NetDefault + Ord,
    <T::Serializer as NetSerializer>::Quantized: Ord,
{
    type Serializer = SetSerializer<T::Serializer>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::{IntConfig, U8Serializer, U32Serializer, roundtrip};

    type V8 = VecSerializer<U8Serializer>;

    #[test]
    fn empty_array_is_one_bit() {
        assert_eq!(
            roundtrip::<V8>(&VecConfig::DEFAULT, &vec![]).unwrap(),
            (1, vec![])
        );
    }

    #[test]
    fn count_field_width() {
        // max_len 1024: count - 1 in 10 bits.
        assert_eq!(
            roundtrip::<V8>(&VecConfig::DEFAULT, &vec![5]).unwrap().0,
            1 + 10 + 8
        );
        // max_len 1: no count bits at all.
        let one = VecConfig {
            max_len: 1,
            ..VecConfig::DEFAULT
        };
        assert_eq!(
            roundtrip::<V8>(&one, &vec![5, 6]).unwrap(),
            (1 + 8, vec![5])
        );
    }

    #[test]
    fn iris_modulo_mapping() {
        // 100 items, 1 + 10 mask bits.
        let cfg = VecConfig {
            element_bits: 10,
            ..VecConfig::DEFAULT
        };
        assert_eq!(V8::change_mask_bits(&cfg), 11);
        assert_eq!(element_bit(0, 10, 0), 1);
        assert_eq!(element_bit(0, 10, 9), 10);
        assert_eq!(element_bit(0, 10, 10), 1);
        assert_eq!(element_bit(0, 10, 20), 1);
        assert_eq!(element_bit(0, 10, 99), 10);

        let old: Vec<u8> = (0..100).collect();
        let mut new = old.clone();
        new[10] = 200;
        new[99] = 201;
        let mut mask = ChangeMask::new(11);
        assert!(V8::diff(&cfg, &new, &old, &mut mask, 0));
        assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![0, 1, 10]);

        // Elements 0, 10, ..., 90 (bit 1) and 9, 19, ..., 99 (bit 10) are sent: 20 x 8 bits.
        let mut w = BitWriter::with_capacity_bits(4096);
        V8::serialize_masked(&cfg, &new, &mask, 0, &mut w);
        assert_eq!(w.position(), 1 + 10 + 20 * 8);
        let bytes = w.finish().unwrap();
        let mut target = old.clone();
        let mut r = BitReader::new(&bytes);
        V8::deserialize_masked(&cfg, &mut target, &mask, 0, &mut r).unwrap();
        assert_eq!(target, new);
    }

    #[test]
    fn masked_with_offset_and_shrink() {
        let cfg = VecConfig {
            element_bits: 3,
            ..VecConfig::DEFAULT
        };
        let old = vec![1u8, 2, 3, 4, 5];
        let new = vec![1u8, 2, 3];
        let mut mask = ChangeMask::new(10);
        assert!(V8::diff(&cfg, &new, &old, &mut mask, 5));
        assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![5]);
        let mut w = BitWriter::with_capacity_bits(64);
        V8::serialize_masked(&cfg, &new, &mask, 5, &mut w);
        assert_eq!(w.position(), 1 + 10);
        let bytes = w.finish().unwrap();
        let mut target = old;
        V8::deserialize_masked(&cfg, &mut target, &mask, 5, &mut BitReader::new(&bytes)).unwrap();
        assert_eq!(target, new);
    }

    #[test]
    fn iris_delta_format() {
        let cfg = VecConfig::DEFAULT;
        // Same size: [1] + per-element [0] unchanged / [1][element delta]; 3 -> 9 is a
        // u8 residual of +6: [0][k = 4][zigzag 12 in 5 bits].
        let mut w = BitWriter::with_capacity_bits(256);
        V8::serialize_delta(&cfg, &vec![1, 2, 9], &vec![1, 2, 3], &mut w);
        assert_eq!(w.position(), 1 + 1 + 1 + 1 + 8);
        // Grown: [0][len] + deltas for the 3 old + 1 full.
        let mut w = BitWriter::with_capacity_bits(256);
        V8::serialize_delta(&cfg, &vec![1, 2, 3, 4], &vec![1, 2, 3], &mut w);
        assert_eq!(w.position(), 1 + 11 + 3 + 8);
    }

    #[test]
    fn huge_count_rejected_before_allocating() {
        // [0][count - 1 = 1023] with max_len 1024 but a config of max_len 10.
        let cfg = VecConfig::<IntConfig> {
            max_len: 10,
            ..VecConfig::DEFAULT
        };
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bool(false);
        w.write_bits(15, 4);
        let bytes = w.finish().unwrap();
        let err = V8::deserialize(&cfg, &mut BitReader::new(&bytes)).unwrap_err();
        assert!(matches!(
            err,
            SerializeError::TooLong {
                len: 16,
                max: 10,
                ..
            }
        ));
    }

    #[test]
    fn config_validation() {
        assert!(V8::validate_config(&VecConfig::DEFAULT).is_ok());
        assert!(
            V8::validate_config(&VecConfig {
                max_len: 0,
                ..VecConfig::DEFAULT
            })
            .is_err()
        );
        assert!(
            V8::validate_config(&VecConfig {
                max_len: 70_000,
                ..VecConfig::DEFAULT
            })
            .is_err()
        );
        let bad_element = VecConfig {
            element: IntConfig { bits: 9 },
            ..VecConfig::DEFAULT
        };
        let err = V8::validate_config(&bad_element).unwrap_err();
        assert!(err.starts_with("element:"), "{err}");
    }

    #[test]
    fn option_and_array_bits() {
        type O = OptionSerializer<U32Serializer>;
        assert_eq!(
            roundtrip::<O>(&IntConfig::DEFAULT, &Some(0)).unwrap(),
            (2, Some(0))
        );
        type A = ArraySerializer<U8Serializer, 3>;
        assert_eq!(A::max_bits(&ArrayConfig::DEFAULT), Some(24));
        // A default (empty) quantized array dequantizes to default elements.
        assert_eq!(A::dequantize(&ArrayConfig::DEFAULT, &Vec::new()), [0, 0, 0]);
    }

    #[test]
    fn map_rejects_unsorted_keys() {
        type M = MapSerializer<U8Serializer, U8Serializer>;
        let mut w = BitWriter::with_capacity_bits(64);
        write_len(&mut w, 2, 1024);
        for (k, v) in [(5u64, 1u64), (3, 2)] {
            w.write_bits(k, 8);
            w.write_bits(v, 8);
        }
        let bytes = w.finish().unwrap();
        assert!(M::deserialize(&MapConfig::DEFAULT, &mut BitReader::new(&bytes)).is_err());
    }
}
