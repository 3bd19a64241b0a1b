//! Delta encodings of quantized members against a baseline.
//!
//! # The residual code (every built-in quantized serializer)
//!
//! A member made of `n` integer components (an int, a ranged float's index, the three
//! indices of a vector, the three sent components of a smallest-three quaternion, the
//! three angles of a rotator) is written relative to the baseline's value as:
//!
//! ```text
//! [1][the member's full encoding]                      escape
//! [0][k selector: 2][residual code of component 0]...   residuals
//! ```
//!
//! - The **residual** of a component `b` bits wide is the difference `value − baseline`
//!   modulo `2^b`, read as a signed `b`-bit number (so wrapping angles and any pair of
//!   values round-trip), then **zigzag** mapped to `0, −1, 1, −2, 2, … → 0, 1, 2, 3, 4, …`.
//! - Each residual `z` is written in the **Exp-Golomb code of order `k`**: with
//!   `g = ⌊log2(z + 2^k)⌋ − k`, `g` one bits, a zero bit, then the low `g + k` bits of
//!   `z + 2^k`; `2g + k + 1` bits. The zero after the ones is left out when `g` is the
//!   largest group a `b`-bit residual can reach (`g = b − k`), so the code never spends a
//!   bit the decoder cannot use.
//! - The order `k` of each component comes from the 2-bit **selector**, an index into
//!   [`K_TABLE`] `= [0, 2, 4, 7]` (capped at the component's width). The writer picks,
//!   per member and per write, the order that gives the shortest code for the residuals
//!   at hand; the reader learns it from the stream. The code adapts to the member's
//!   motion without any state the two ends must keep in step. The orders are absolute,
//!   not scaled by the width, because motion per tick does not grow with a member's
//!   range: order 0 suits still or barely moving members (a zero residual costs 1 bit),
//!   2 and 4 residuals up to about 8 and 30 steps (a walking player's velocity, a
//!   rotating quaternion), 7 up to about 250 steps (a projectile's position at 1 cm).
//! - **Escape**: the writer takes the residual path only when it is not longer than the
//!   full encoding, so no member's delta ever costs more than its full encoding plus
//!   one bit.
//!
//! A 17-bit coordinate that moved 20 steps (zigzag 40) costs 7 bits with `k = 4`; a
//! vector whose x and y moved ±20 steps and whose z stayed costs `1 + 2 + 7 + 7 + 5 = 22`
//! bits against `52` for its full 51 bits with the escape.
//!
//! Decoding is bounds-checked: a group larger than the component's width can hold, a
//! residual past `2^b − 1` or a truncated stream is an error, never a panic.
//!
//! # Iris's table (kept for custom serializers)
//!
//! [`write_int_delta`] is Iris's table-driven integer delta (`BitPacking.cpp`): a
//! 2-bit index into a table of bit widths, then the signed difference in that many bits;
//! index 3 escapes to the full value:
//!
//! | index | meaning | 32-bit table `{0, 4, 14}` |
//! |---|---|---|
//! | 0 | unchanged | `[00]`, 2 bits |
//! | 1 | small difference | `[01][4 bits]`, -8..=7 |
//! | 2 | medium difference | `[10][14 bits]`, -8192..=8191 |
//! | 3 | full value | `[11][32 bits]` |
//!
//! Differences wrap modulo `2^bits`, so any pair of values round-trips. The built-in
//! serializers no longer use it: it has nothing between ±8 and ±8192, where most motion
//! lies.

use super::{Result, SerializeError};
use crate::bits::{BitReader, BitWriter, sign_extend};

/// The most components one member's residual code carries.
pub const MAX_RESIDUAL_COMPONENTS: usize = 4;

/// Bits of the per-member order selector.
pub const K_SELECTOR_BITS: u32 = 2;

/// The Exp-Golomb orders a member's 2-bit selector chooses from.
pub const K_TABLE: [u32; 4] = [0, 2, 4, 7];

/// The orders a component `bits` wide can use: [`K_TABLE`] capped at `bits`.
///
/// ```
/// use replicate::serialize::delta::k_table;
/// assert_eq!(k_table(17), [0, 2, 4, 7]);
/// assert_eq!(k_table(3), [0, 2, 3, 3]);
/// ```
#[inline]
pub const fn k_table(bits: u32) -> [u32; 4] {
    let mut t = K_TABLE;
    let mut i = 0;
    while i < 4 {
        if t[i] > bits {
            t[i] = bits;
        }
        i += 1;
    }
    t
}

#[inline]
fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The zigzag-mapped residual of `value` against `prev`, both `bits` wide (`1..=64`):
/// the difference modulo `2^bits` as a signed number, `0, −1, 1, −2, … → 0, 1, 2, 3, …`.
/// Always below `2^bits`.
///
/// ```
/// use replicate::serialize::delta::{apply_residual, residual};
/// assert_eq!(residual(1005, 1000, 17), 10);
/// assert_eq!(residual(995, 1000, 17), 9);
/// assert_eq!(residual(0, 255, 8), 2); // wraps: +1
/// assert_eq!(apply_residual(255, 2, 8), 0);
/// ```
#[inline]
pub fn residual(value: u64, prev: u64, bits: u32) -> u64 {
    let bits = bits.clamp(1, 64);
    let d = sign_extend(value.wrapping_sub(prev) & mask(bits), bits);
    (((d << 1) ^ (d >> 63)) as u64) & mask(bits)
}

/// The value whose [`residual`] against `prev` is `z` (`bits` wide).
#[inline]
pub fn apply_residual(prev: u64, z: u64, bits: u32) -> u64 {
    let bits = bits.clamp(1, 64);
    let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
    prev.wrapping_add(d as u64) & mask(bits)
}

/// The largest Exp-Golomb group of a `bits`-wide residual at order `k`.
#[inline]
fn max_group(bits: u32, k: u32) -> u32 {
    bits.saturating_sub(k)
}

/// The group of `z` at order `k`: `⌊log2(z + 2^k)⌋ − k`.
#[inline]
fn group(z: u64, k: u32) -> u32 {
    match 1u64.checked_shl(k).and_then(|p| z.checked_add(p)) {
        Some(v) => (63 - v.leading_zeros()) - k,
        None => {
            let v = z as u128 + (1u128 << k);
            (127 - v.leading_zeros()) - k
        }
    }
}

/// Bits of `z`'s Exp-Golomb code of order `k` (`z < 2^bits`, `k < bits` or `k = 0`).
///
/// ```
/// use replicate::serialize::delta::exp_golomb_len;
/// assert_eq!(exp_golomb_len(0, 0, 17), 1);
/// assert_eq!(exp_golomb_len(40, 2, 17), 9);
/// assert_eq!(exp_golomb_len(40, 6, 17), 7);
/// assert_eq!(exp_golomb_len(0, 7, 17), 8);
/// ```
#[inline]
pub fn exp_golomb_len(z: u64, k: u32, bits: u32) -> u32 {
    let g = group(z, k);
    let terminator = (g < max_group(bits, k)) as u32;
    2 * g + k + terminator
}

/// `z`'s Exp-Golomb code of order `k` (`z < 2^bits`) as one word, its first bit
/// lowest, and its length: `None` when it is longer than 64 bits. Lets a caller join
/// the code with bits around it in one write.
///
/// ```
/// use replicate::serialize::delta::{exp_golomb_len, exp_golomb_word};
/// assert_eq!(exp_golomb_word(0, 0, 17), Some((0, 1)));
/// // Two ones (group 2), the terminating zero, then the low bits of 5 + 1 = 0b110.
/// assert_eq!(exp_golomb_word(5, 0, 17), Some((0b10_0_11, 5)));
/// assert_eq!(exp_golomb_word(40, 2, 17).map(|(_, n)| n), Some(exp_golomb_len(40, 2, 17)));
/// ```
#[inline]
pub fn exp_golomb_word(z: u64, k: u32, bits: u32) -> Option<(u64, u32)> {
    let g = group(z, k);
    let terminator = u32::from(g < max_group(bits, k));
    let n = g + k;
    let len = g + terminator + n;
    // g ones, the zero, then the low n bits of z + 2^k (its top bit is implied).
    (len <= 64).then(|| {
        let low = ((z as u128 + (1u128 << k)) as u64) & mask(n);
        (mask(g) | low << (g + terminator), len)
    })
}

/// Writes `z` (below `2^bits`) in the Exp-Golomb code of order `k`.
#[inline]
pub fn write_exp_golomb(w: &mut BitWriter, z: u64, k: u32, bits: u32) {
    if let Some((code, len)) = exp_golomb_word(z, k, bits) {
        w.write_bits(code, len);
        return;
    }
    let g = group(z, k);
    // g one bits, then the terminating zero unless g is the largest group.
    let mut ones = g;
    while ones > 0 {
        let n = ones.min(64);
        w.write_bits(mask(n), n);
        ones -= n;
    }
    if g < max_group(bits, k) {
        w.write_bool(false);
    }
    let v = z as u128 + (1u128 << k);
    let n = g + k;
    // The low n bits of v (its top bit, 2^n, is implied by the group).
    let low = v & ((1u128 << n) - 1);
    if n > 64 {
        w.write_bits(low as u64, 64);
        w.write_bits((low >> 64) as u64, n - 64);
    } else {
        w.write_bits(low as u64, n);
    }
}

/// Reads a residual written by [`write_exp_golomb`] with the same `k` and `bits`.
/// A group past the largest or a residual of `2^bits` or more is an error, as is a
/// truncated stream.
#[inline]
pub fn read_exp_golomb(r: &mut BitReader, k: u32, bits: u32) -> Result<u64> {
    let gmax = max_group(bits, k);
    let mut g = 0;
    while g < gmax && r.read_bool() {
        g += 1;
    }
    r.check()?;
    let n = g + k;
    let low: u128 = if n > 64 {
        let lo = r.read_bits(64) as u128;
        lo | (r.read_bits(n - 64) as u128) << 64
    } else {
        r.read_bits(n) as u128
    };
    r.check()?;
    let z = (1u128 << n) + low - (1u128 << k);
    if z > mask(bits) as u128 {
        return Err(SerializeError::invalid(
            "residual",
            "residual wider than its component",
        ));
    }
    Ok(z as u64)
}

/// One component of a member, as a bit pattern `bits` wide (`1..=64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    /// The value to send.
    pub value: u64,
    /// The baseline's value.
    pub prev: u64,
    /// The component's width.
    pub bits: u32,
}

impl Component {
    /// A component `bits` wide.
    #[inline]
    pub const fn new(value: u64, prev: u64, bits: u32) -> Self {
        Self { value, prev, bits }
    }
}

/// The order a component `bits` wide codes with under selector `sel`: its entry of
/// [`k_table`]`(bits)`.
#[inline(always)]
fn order(bits: u32, sel: usize) -> u32 {
    K_TABLE[sel & 3].min(bits)
}

/// The selector and length of the shortest residual code of `comps` (selector and
/// component codes, without the escape bit); the lowest selector of equal lengths.
/// Every selector's length is summed in one pass over the components.
#[inline]
fn best_code(comps: &[Component], residuals: &[u64]) -> (u32, u32) {
    let mut lens = [K_SELECTOR_BITS; 4];
    for (c, &z) in comps.iter().zip(residuals) {
        let bits = c.bits.clamp(1, 64);
        for (sel, len) in lens.iter_mut().enumerate() {
            *len += exp_golomb_len(z, order(bits, sel), bits);
        }
    }
    let mut best = (0, lens[0]);
    for (sel, &len) in lens.iter().enumerate().skip(1) {
        if len < best.1 {
            best = (sel as u32, len);
        }
    }
    best
}

/// The length of the residual code of `comps` with selector `sel` (selector and
/// component codes, without the escape bit).
#[inline]
fn code_len(comps: &[Component], residuals: &[u64], sel: usize) -> u32 {
    comps
        .iter()
        .zip(residuals)
        .fold(K_SELECTOR_BITS, |len, (c, &z)| {
            let bits = c.bits.clamp(1, 64);
            len + exp_golomb_len(z, order(bits, sel), bits)
        })
}

/// Writes a member's components as residuals against the baseline, or the escape.
///
/// `full_len` is the exact length of the member's full encoding. Returns `true` when
/// the escape `[1]` was written: the caller then writes the full encoding. Otherwise
/// `[0][selector][codes]` was written, never longer than `full_len` bits. See the
/// [module docs](self).
#[inline]
pub fn write_residuals(w: &mut BitWriter, comps: &[Component], full_len: u32) -> bool {
    debug_assert!(comps.len() <= MAX_RESIDUAL_COMPONENTS);
    let mut residuals = [0u64; MAX_RESIDUAL_COMPONENTS];
    for (z, c) in residuals.iter_mut().zip(comps) {
        *z = residual(c.value, c.prev, c.bits);
    }
    let residuals = &residuals[..comps.len().min(MAX_RESIDUAL_COMPONENTS)];
    let (sel, len) = best_code(comps, residuals);
    if len > full_len {
        w.write_bool(true);
        return true;
    }
    // [0][selector][codes]: one write when they fit in a word (nearly always).
    if let Some((word, n)) = joined_code(comps, residuals, sel) {
        w.write_bits(word, n);
    } else {
        write_codes_apart(w, comps, residuals, sel);
    }
    false
}

/// [`write_residuals`]' bits after the escape, `[0][selector][codes]`, as one word
/// (its first bit lowest) and its length, when they fit in 64 bits.
#[inline]
fn joined_code(comps: &[Component], residuals: &[u64], sel: u32) -> Option<(u64, u32)> {
    let mut word = u64::from(sel) << 1;
    let mut at = 1 + K_SELECTOR_BITS;
    for (c, &z) in comps.iter().zip(residuals) {
        let bits = c.bits.clamp(1, 64);
        let (code, n) = exp_golomb_word(z, order(bits, sel as usize), bits)?;
        if at + n > 64 {
            return None;
        }
        word |= code << at;
        at += n;
    }
    Some((word, at))
}

/// [`write_residuals`]' bits after the escape, written a field at a time.
fn write_codes_apart(w: &mut BitWriter, comps: &[Component], residuals: &[u64], sel: u32) {
    w.write_bool(false);
    w.write_bits(u64::from(sel), K_SELECTOR_BITS);
    for (c, &z) in comps.iter().zip(residuals) {
        let bits = c.bits.clamp(1, 64);
        write_exp_golomb(w, z, order(bits, sel as usize), bits);
    }
}

/// What [`read_residuals`] gives back against other baselines, `base`, from the
/// code [`write_residuals`] writes for `comps` (each `value` against its `prev`): each
/// component's residual added to its `base`, wrapping in its width (a baseline
/// prediction's step, see [`shift`](super::shift)). `None` when the code takes the
/// escape (the full values follow it instead).
///
/// ```
/// use replicate::serialize::delta::{Component, shift_residuals};
/// // x moved +5, y −3 from the baseline; added to another base.
/// let comps = [Component::new(105, 100, 17), Component::new(97, 100, 17)];
/// assert_eq!(shift_residuals(&comps, 34, [1000, 2000]), Some([1005, 1997]));
/// // A jump across the range takes the escape.
/// let far = [Component::new(100_000, 0, 17), Component::new(0, 100_000, 17)];
/// assert_eq!(shift_residuals(&far, 34, [0, 0]), None);
/// ```
#[inline]
pub fn shift_residuals<const N: usize>(
    comps: &[Component; N],
    full_len: u32,
    base: [u64; N],
) -> Option<[u64; N]> {
    let residuals: [u64; N] =
        std::array::from_fn(|i| residual(comps[i].value, comps[i].prev, comps[i].bits));
    // The residuals are sent when any order codes them within the full length; the
    // middle orders (most motion) are tried first.
    let fits = [1, 2, 0, 3]
        .into_iter()
        .any(|sel| code_len(comps, &residuals, sel) <= full_len);
    fits.then(|| {
        std::array::from_fn(|i| apply_residual(base[i], residuals[i], comps[i].bits.clamp(1, 64)))
    })
}

/// [`shift_residuals`] for a member whose escape carries its components in full,
/// each in its width: on the escape, the values themselves.
#[inline]
pub fn shift_or_escape<const N: usize>(
    comps: &[Component; N],
    full_len: u32,
    base: [u64; N],
) -> [u64; N] {
    shift_residuals(comps, full_len, base)
        .unwrap_or_else(|| comps.map(|c| c.value & crate::bits::low_mask(c.bits)))
}

/// Reads what [`write_residuals`] wrote. `comps` holds each component's baseline value
/// (`prev`) and width; on the residual path their `value`s are filled in and `Ok(false)`
/// is returned; on the escape `Ok(true)`: the caller reads the full encoding.
#[inline]
pub fn read_residuals(r: &mut BitReader, comps: &mut [Component]) -> Result<bool> {
    if r.read_bool() {
        r.check()?;
        return Ok(true);
    }
    let sel = r.read_bits(K_SELECTOR_BITS) as usize;
    r.check()?;
    for c in comps.iter_mut() {
        let bits = c.bits.clamp(1, 64);
        let z = read_exp_golomb(r, order(bits, sel), bits)?;
        c.value = apply_residual(c.prev, z, bits);
    }
    Ok(false)
}

/// Writes one integer `bits` wide whose full encoding is `full_len` bits, as a residual
/// against `prev` or the escape followed by `write_full`.
#[inline]
pub fn write_scalar_residual(
    w: &mut BitWriter,
    value: u64,
    prev: u64,
    bits: u32,
    full_len: u32,
    write_full: impl FnOnce(&mut BitWriter),
) {
    if write_residuals(w, &[Component::new(value, prev, bits)], full_len) {
        write_full(w);
    }
}

/// Mirror of [`write_scalar_residual`].
#[inline]
pub fn read_scalar_residual(
    r: &mut BitReader,
    prev: u64,
    bits: u32,
    read_full: impl FnOnce(&mut BitReader) -> Result<u64>,
) -> Result<u64> {
    let mut c = [Component::new(0, prev, bits)];
    if read_residuals(r, &mut c)? {
        return read_full(r);
    }
    Ok(c[0].value)
}

/// The bit widths of table entries 0, 1 and 2 (entry 3 is always the full value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaTable(pub [u32; 3]);

impl DeltaTable {
    /// For values of at most 16 bits.
    pub const BITS_16: DeltaTable = DeltaTable([0, 4, 10]);
    /// For values of at most 32 bits.
    pub const BITS_32: DeltaTable = DeltaTable([0, 4, 14]);
    /// For values of at most 64 bits.
    pub const BITS_64: DeltaTable = DeltaTable([0, 14, 32]);

    /// The table for values `bits` wide, or `None` for 8 bits and fewer (where only a
    /// 1-bit "unchanged" flag pays off).
    pub const fn for_bits(bits: u32) -> Option<DeltaTable> {
        match bits {
            0..=8 => None,
            9..=16 => Some(Self::BITS_16),
            17..=32 => Some(Self::BITS_32),
            _ => Some(Self::BITS_64),
        }
    }
}

/// Writes `value` relative to `prev`, both `bits` wide (`1..=64`), with Iris's
/// table (see the [module docs](self)).
///
/// For `bits <= 8`: `[0]` if equal, else `[1][value]`. Otherwise the table encoding.
pub fn write_int_delta(w: &mut BitWriter, value: u64, prev: u64, bits: u32) {
    let Some(table) = DeltaTable::for_bits(bits) else {
        if w.write_bool(value != prev) {
            w.write_bits(value, bits);
        }
        return;
    };
    let diff = sign_extend(value.wrapping_sub(prev) & mask(bits), bits);
    for (index, &width) in table.0.iter().enumerate() {
        let fits = if width == 0 {
            diff == 0
        } else {
            let lo = -(1i64 << (width - 1));
            let hi = (1i64 << (width - 1)) - 1;
            (lo..=hi).contains(&diff)
        };
        if fits {
            w.write_bits(index as u64, 2);
            w.write_bits(diff as u64, width);
            return;
        }
    }
    w.write_bits(3, 2);
    w.write_bits(value, bits);
}

/// Reads a value written by [`write_int_delta`] against the same `prev` and `bits`.
/// The result is always within `bits` bits.
pub fn read_int_delta(r: &mut BitReader, prev: u64, bits: u32) -> u64 {
    let Some(table) = DeltaTable::for_bits(bits) else {
        return if r.read_bool() {
            r.read_bits(bits)
        } else {
            prev & mask(bits)
        };
    };
    let index = r.read_bits(2) as usize;
    if index == 3 {
        return r.read_bits(bits);
    }
    let width = table.0[index];
    let diff = sign_extend(r.read_bits(width), width);
    prev.wrapping_add(diff as u64) & mask(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cost(value: u64, prev: u64, bits: u32) -> usize {
        let mut w = BitWriter::with_capacity_bits(128);
        write_int_delta(&mut w, value, prev, bits);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert_eq!(read_int_delta(&mut r, prev, bits), value);
        w.position()
    }

    #[test]
    fn iris_score_examples() {
        assert_eq!(cost(1000, 1000, 32), 2);
        assert_eq!(cost(1005, 1000, 32), 6);
        assert_eq!(cost(5000, 1000, 32), 16);
        assert_eq!(cost(1_000_000, 1000, 32), 34);
    }

    #[test]
    fn negative_and_wrapping_differences() {
        assert_eq!(cost(992, 1000, 32), 6);
        assert_eq!(cost(0, u32::MAX as u64, 32), 6);
        assert_eq!(cost(u64::MAX, 0, 64), 16);
        assert_eq!(cost(7, 3, 8), 9);
        assert_eq!(cost(3, 3, 8), 1);
    }

    proptest! {
        #[test]
        fn joined_codes_are_the_codes_written_apart(
            comps in proptest::collection::vec((any::<u64>(), any::<u64>(), 1u32..=64), 1..=4),
            sel in 0u32..4,
            skew in 0u32..8,
        ) {
            // Values near their baselines (short codes, joined) and anywhere (long
            // codes, often too long to join).
            let comps: Vec<Component> = comps
                .into_iter()
                .map(|(value, prev, bits)| {
                    let near = prev.wrapping_add(value % (1 << skew));
                    let value = if skew == 7 { value } else { near };
                    Component::new(value & mask(bits), prev & mask(bits), bits)
                })
                .collect();
            let residuals: Vec<u64> =
                comps.iter().map(|c| residual(c.value, c.prev, c.bits)).collect();
            let mut apart = BitWriter::with_capacity_bits(1024);
            write_codes_apart(&mut apart, &comps, &residuals, sel);
            if let Some((word, n)) = joined_code(&comps, &residuals, sel) {
                let mut joined = BitWriter::with_capacity_bits(1024);
                joined.write_bits(word, n);
                prop_assert_eq!(joined.position(), apart.position());
                prop_assert_eq!(joined.finish().unwrap(), apart.finish().unwrap());
            } else {
                prop_assert!(apart.position() > 64, "{} bits were not joined", apart.position());
            }
        }
    }

    /// Writes a member of `comps` (full encoding: the raw components), reads it back;
    /// returns the bits written.
    fn member_roundtrip(comps: &[Component]) -> usize {
        let full_len: u32 = comps.iter().map(|c| c.bits).sum();
        let mut w = BitWriter::with_capacity_bits(1024);
        if write_residuals(&mut w, comps, full_len) {
            for c in comps {
                w.write_bits(c.value, c.bits);
            }
        }
        let written = w.position();
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, written);
        let mut back: Vec<Component> = comps
            .iter()
            .map(|c| Component::new(0, c.prev, c.bits))
            .collect();
        if read_residuals(&mut r, &mut back).unwrap() {
            for c in &mut back {
                c.value = r.read_bits(c.bits);
            }
            r.check().unwrap();
        }
        assert_eq!(r.bits_left(), 0, "reads exactly what was written");
        for (a, b) in comps.iter().zip(&back) {
            assert_eq!(a.value & mask(a.bits), b.value, "{comps:?}");
        }
        assert!(written as u32 <= full_len + 1, "{written} > {full_len} + 1");
        written
    }

    #[test]
    fn residual_costs() {
        // A 17-bit position moving 20 steps on x and y, z still: k = 4, 22 bits.
        let c = |v, p| Component::new(v, p, 17);
        assert_eq!(
            member_roundtrip(&[c(1020, 1000), c(980, 1000), c(5, 5)]),
            1 + 2 + 7 + 7 + 5
        );
        // Unchanged scalar: escape bit, selector, one bit.
        assert_eq!(member_roundtrip(&[c(7, 7)]), 4);
        // Far jump: the escape, full + 1.
        assert_eq!(member_roundtrip(&[c(100_000, 0)]), 18);
        // Wrapping: the shortest way round.
        assert_eq!(member_roundtrip(&[Component::new(0, 65535, 16)]), 1 + 2 + 3);
    }

    #[test]
    fn exp_golomb_extremes_for_every_width_and_order() {
        for bits in 1..=64u32 {
            let top = mask(bits);
            for k in k_table(bits) {
                for z in [0, 1, 2, top / 2, top - 1, top]
                    .into_iter()
                    .filter(|&z| z <= top)
                {
                    let mut w = BitWriter::with_capacity_bits(256);
                    write_exp_golomb(&mut w, z, k, bits);
                    assert_eq!(w.position() as u32, exp_golomb_len(z, k, bits));
                    let n = w.position();
                    let bytes = w.finish().unwrap();
                    let mut r = BitReader::with_bit_len(&bytes, n);
                    assert_eq!(read_exp_golomb(&mut r, k, bits).unwrap(), z, "{bits} {k}");
                    assert_eq!(r.bits_left(), 0);
                }
            }
        }
    }

    #[test]
    fn residual_past_the_width_is_rejected() {
        // 4 bits, k = 0: the largest group (4) with all-ones payload is 2^5 - 2 = 30 > 15.
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bits(0b1111, 4);
        w.write_bits(0b1111, 4);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert!(read_exp_golomb(&mut r, 0, 4).is_err());
    }

    fn arb_member() -> impl Strategy<Value = Vec<Component>> {
        prop::collection::vec(
            (1u32..=64, any::<u64>(), any::<u64>(), 0u32..4).prop_map(|(bits, v, p, shape)| {
                let m = mask(bits);
                let p = p & m;
                // Mostly small residuals around the baseline, some extremes.
                let v = match shape {
                    0 => p.wrapping_add(v % 64).wrapping_sub(32) & m,
                    1 => p.wrapping_add(v % 4096).wrapping_sub(2048) & m,
                    2 => [0, m, p ^ m, m >> 1, (m >> 1) + 1][(v % 5) as usize] & m,
                    _ => v & m,
                };
                Component::new(v, p, bits)
            }),
            1..=MAX_RESIDUAL_COMPONENTS,
        )
    }

    /// Exp-Golomb bit by bit, as the code is defined: `g` ones, a zero unless `g` is
    /// the largest group, then the low `g + k` bits of `z + 2^k`, lowest first.
    fn exp_golomb_bits(z: u64, k: u32, bits: u32) -> Vec<bool> {
        let g = group(z, k);
        let mut out = vec![true; g as usize];
        if g < max_group(bits, k) {
            out.push(false);
        }
        let v = z as u128 + (1u128 << k);
        out.extend((0..g + k).map(|i| v >> i & 1 == 1));
        out
    }

    proptest! {
        #[test]
        fn exp_golomb_writes_the_code_bit_by_bit(bits in 1u32..=64, k in 0u32..8, z in any::<u64>()) {
            let k = k.min(bits - 1);
            let z = z & mask(bits);
            let mut w = BitWriter::with_capacity_bits(256);
            w.write_bool(true); // unaligned
            write_exp_golomb(&mut w, z, k, bits);
            let len = w.position() - 1;
            let bytes = w.finish().unwrap();
            let mut r = BitReader::new(&bytes);
            r.read_bool();
            let written: Vec<bool> = (0..len).map(|_| r.read_bool()).collect();
            prop_assert_eq!(written, exp_golomb_bits(z, k, bits));
        }

        #[test]
        fn group_is_the_log_of_z_plus_two_to_the_order(z in any::<u64>(), k in 0u32..=64, top in any::<bool>()) {
            // Half the cases near the top of the range, where `z + 2^k` leaves 64 bits.
            let z = if top { z | (u64::MAX << 8) } else { z };
            let v = z as u128 + (1u128 << k);
            prop_assert_eq!(group(z, k), (127 - v.leading_zeros()) - k);
        }

        #[test]
        fn members_round_trip_within_full_plus_one(comps in arb_member()) {
            member_roundtrip(&comps);
        }

        #[test]
        fn residual_and_apply_are_inverse(bits in 1u32..=64, v in any::<u64>(), p in any::<u64>()) {
            let z = residual(v, p, bits);
            prop_assert!(z <= mask(bits));
            prop_assert_eq!(apply_residual(p, z, bits), v & mask(bits));
        }

        #[test]
        fn truncated_members_are_errors_not_panics(comps in arb_member(), cut in any::<prop::sample::Index>()) {
            let full_len: u32 = comps.iter().map(|c| c.bits).sum();
            let mut w = BitWriter::with_capacity_bits(1024);
            let escaped = write_residuals(&mut w, &comps, full_len);
            if escaped {
                for c in &comps {
                    w.write_bits(c.value, c.bits);
                }
            }
            let n = w.position();
            let bytes = w.finish().unwrap();
            let cut = cut.index(n);
            let mut r = BitReader::with_bit_len(&bytes, cut);
            let mut back: Vec<Component> =
                comps.iter().map(|c| Component::new(0, c.prev, c.bits)).collect();
            let res = read_residuals(&mut r, &mut back);
            let res = match res {
                Ok(true) => {
                    for c in &mut back {
                        c.value = r.read_bits(c.bits);
                    }
                    r.check().map_err(SerializeError::from)
                }
                Ok(false) => Ok(()),
                Err(e) => Err(e),
            };
            prop_assert!(res.is_err(), "cut {} of {}", cut, n);
        }

        #[test]
        fn random_input_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..24), widths in prop::collection::vec(1u32..=64, 1..=4)) {
            let mut r = BitReader::new(&bytes);
            let mut comps: Vec<Component> = widths.iter().map(|&b| Component::new(0, 0, b)).collect();
            if let Ok(false) = read_residuals(&mut r, &mut comps) {
                for c in &comps {
                    prop_assert!(c.value <= mask(c.bits));
                }
            }
        }
    }
}
