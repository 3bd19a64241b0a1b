//! Bit sets of the replication state: [`ChangeMask`], one bit per replicated member
//! (Iris's change mask), with its wire encodings, and [`BitArray`], a growable set over
//! object indices (dirty objects, subobjects, exclusions).
//!
//! They live in the serialization layer because container serializers track their
//! elements in a member's change-mask bits.

use crate::bits::{BitReader, BitWriter};
use crate::serialize::Result;

/// One bit per replicated member (more for arrays and nested structs), set when the
/// member changed. Masks of up to 64 bits live inline without allocation.
///
/// ```
/// use replicate::ChangeMask;
/// let mut m = ChangeMask::new(3);
/// m.set(0);
/// m.set(2);
/// assert_eq!(m.to_u64(), 0b101);
/// assert!(m.any());
/// assert_eq!(m.iter_ones().collect::<Vec<_>>(), vec![0, 2]);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ChangeMask {
    repr: MaskRepr,
}

/// Masks of up to 64 bits (nearly every type's) live inline, so a `ChangeMask` is 16
/// bytes: it matters where many are kept (each connection's baselines hold two per
/// object). The bit count decides the variant, so derived equality is mask equality.
#[derive(Clone, PartialEq, Eq, Hash)]
enum MaskRepr {
    Inline { bits: u32, word: u64 },
    Heap(Box<HeapMask>),
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct HeapMask {
    bits: u32,
    words: Box<[u64]>,
}

impl std::fmt::Debug for ChangeMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChangeMask(")?;
        for i in 0..self.len() {
            write!(f, "{}", self.get(i) as u8)?;
        }
        write!(f, ")")
    }
}

/// The low `bits` bits set (all of them from 64 on).
#[inline]
fn low_bits(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

impl ChangeMask {
    /// An all-clear mask of `bits` bits.
    pub fn new(bits: u32) -> Self {
        let repr = if bits <= 64 {
            MaskRepr::Inline { bits, word: 0 }
        } else {
            MaskRepr::Heap(Box::new(HeapMask {
                bits,
                words: vec![0; bits.div_ceil(64) as usize].into_boxed_slice(),
            }))
        };
        Self { repr }
    }

    /// An all-set mask of `bits` bits (what a creation sends).
    pub fn all(bits: u32) -> Self {
        if bits <= 64 {
            let word = low_bits(bits);
            return Self {
                repr: MaskRepr::Inline { bits, word },
            };
        }
        let mut m = Self::new(bits);
        m.set_all();
        m
    }

    /// Number of bits.
    #[inline]
    pub fn len(&self) -> u32 {
        match &self.repr {
            MaskRepr::Inline { bits, .. } => *bits,
            MaskRepr::Heap(h) => h.bits,
        }
    }

    /// Whether the mask has zero bits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The backing words (bit `i` is bit `i % 64` of word `i / 64`).
    #[inline]
    pub fn words(&self) -> &[u64] {
        match &self.repr {
            MaskRepr::Inline { word, .. } => std::slice::from_ref(word),
            MaskRepr::Heap(h) => &h.words,
        }
    }

    #[inline]
    fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.repr {
            MaskRepr::Inline { word, .. } => std::slice::from_mut(word),
            MaskRepr::Heap(h) => &mut h.words,
        }
    }

    /// Reads bit `i` (false when out of range).
    #[inline]
    pub fn get(&self, i: u32) -> bool {
        i < self.len() && self.words()[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// Sets bit `i` (ignored when out of range).
    #[inline]
    pub fn set(&mut self, i: u32) {
        if i < self.len() {
            self.words_mut()[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    /// Clears bit `i`.
    #[inline]
    pub fn clear_bit(&mut self, i: u32) {
        if i < self.len() {
            self.words_mut()[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }

    /// Sets bits `offset..offset + count`.
    pub fn set_range(&mut self, offset: u32, count: u32) {
        for i in offset..offset.saturating_add(count).min(self.len()) {
            self.set(i);
        }
    }

    /// Whether any bit in `offset..offset + count` is set.
    #[inline]
    pub fn any_in(&self, offset: u32, count: u32) -> bool {
        let end = offset.saturating_add(count).min(self.len());
        if offset >= end {
            return false;
        }
        let (first, last) = (offset / 64, (end - 1) / 64);
        let words = self.words();
        (first..=last).any(|w| {
            let low = if w == first { offset % 64 } else { 0 };
            let high = if w == last { (end - 1) % 64 } else { 63 };
            let bits = (u64::MAX >> (63 - high)) & (u64::MAX << low);
            words.get(w as usize).is_some_and(|&word| word & bits != 0)
        })
    }

    /// Sets every bit.
    pub fn set_all(&mut self) {
        let bits = self.len();
        for (i, w) in self.words_mut().iter_mut().enumerate() {
            let start = i as u32 * 64;
            let n = bits.saturating_sub(start).min(64);
            *w = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        }
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.words_mut().fill(0);
    }

    /// Whether any bit is set.
    #[inline]
    pub fn any(&self) -> bool {
        self.words().iter().any(|&w| w != 0)
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u32 {
        self.words().iter().map(|w| w.count_ones()).sum()
    }

    /// `self |= other` (masks of different lengths: the common prefix).
    #[inline]
    pub fn or_with(&mut self, other: &ChangeMask) {
        if let (MaskRepr::Inline { bits, word }, MaskRepr::Inline { word: o, .. }) =
            (&mut self.repr, &other.repr)
        {
            *word = (*word | o) & low_bits(*bits);
            return;
        }
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a |= *b;
        }
        self.trim();
    }

    /// `self &= other`.
    #[inline]
    pub fn and_with(&mut self, other: &ChangeMask) {
        if let (MaskRepr::Inline { word, .. }, MaskRepr::Inline { word: o, .. }) =
            (&mut self.repr, &other.repr)
        {
            *word &= o;
            return;
        }
        let n = other.words().len();
        for (i, a) in self.words_mut().iter_mut().enumerate() {
            *a &= if i < n { other.words()[i] } else { 0 };
        }
    }

    /// `self &= !other`.
    pub fn and_not(&mut self, other: &ChangeMask) {
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a &= !*b;
        }
    }

    fn trim(&mut self) {
        let bits = self.len();
        if let Some(last) = self.words_mut().last_mut() {
            let rem = bits % 64;
            if rem != 0 {
                *last &= (1u64 << rem) - 1;
            } else if bits == 0 {
                *last = 0;
            }
        }
    }

    /// The first 64 bits as an integer.
    pub fn to_u64(&self) -> u64 {
        self.words()[0]
    }

    /// A mask of `bits` bits taken from `words` (bit `i` is bit `i % 64` of word
    /// `i / 64`; missing words are zero, extra words and bits are ignored).
    pub fn from_words(bits: u32, words: &[u64]) -> Self {
        if bits <= 64 {
            return Self::from_u64(bits, words.first().copied().unwrap_or(0));
        }
        let mut m = Self::new(bits);
        for (a, b) in m.words_mut().iter_mut().zip(words) {
            *a = *b;
        }
        m.trim();
        m
    }

    /// A mask of `bits` bits whose first 64 bits are `value`.
    pub fn from_u64(bits: u32, value: u64) -> Self {
        if bits <= 64 {
            let word = value & low_bits(bits);
            return Self {
                repr: MaskRepr::Inline { bits, word },
            };
        }
        let mut m = Self::new(bits);
        m.words_mut()[0] = value;
        m.trim();
        m
    }

    /// Indices of the set bits, ascending.
    pub fn iter_ones(&self) -> impl Iterator<Item = u32> + '_ {
        self.words().iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + b)
            })
        })
    }

    /// Writes the mask: raw when at most 8 bits, otherwise a one-bit form selector then
    /// either the raw bits or, for sparse masks, the set bits' indices.
    ///
    /// Sparse form: `[1][count - 1: n][index: n]...` where `n` is the bits needed for an
    /// index. It is chosen only when shorter than the raw form.
    pub fn write(&self, w: &mut BitWriter) {
        let bits = self.len();
        if bits <= 8 {
            w.write_bits(self.to_u64(), bits);
            return;
        }
        let ones = self.count_ones();
        let index_bits = crate::bits::bits_for_count(bits as u64);
        let sparse_cost = if ones == 0 {
            u64::MAX
        } else {
            (index_bits as u64) * (ones as u64 + 1)
        };
        if sparse_cost < bits as u64 {
            w.write_bool(true);
            w.write_bits(ones as u64 - 1, index_bits);
            for i in self.iter_ones() {
                w.write_bits(i as u64, index_bits);
            }
        } else {
            w.write_bool(false);
            let mut left = bits;
            for &word in self.words() {
                let n = left.min(64);
                w.write_bits(word, n);
                left -= n;
            }
        }
    }

    /// The bits [`write`](Self::write) (`mostly_ones: None`) or
    /// [`write_with_hint`](Self::write_with_hint) (`Some(hint)`) writes for this mask,
    /// without writing it (network insights measure masks this way).
    pub fn written_bits(&self, mostly_ones: Option<bool>) -> usize {
        let bits = self.len();
        if bits <= 8 {
            return bits as usize;
        }
        let raw = 1 + bits as u64;
        let index_bits = crate::bits::bits_for_count(bits as u64) as u64;
        let sparse = if mostly_ones == Some(true) {
            let zeros = (bits - self.count_ones()) as u64;
            let count_bits = crate::bits::bits_for_count(bits as u64 + 1) as u64;
            count_bits + index_bits * zeros
        } else {
            match self.count_ones() {
                0 => u64::MAX,
                ones => index_bits * (ones as u64 + 1),
            }
        };
        if sparse < bits as u64 {
            (1 + sparse) as usize
        } else {
            raw as usize
        }
    }

    /// Reads a mask of `bits` bits written by [`write`](Self::write).
    pub fn read(bits: u32, r: &mut BitReader) -> Result<Self> {
        let mut m = Self::new(bits);
        if bits <= 8 {
            m.words_mut()[0] = r.read_bits(bits);
            r.check()?;
            return Ok(m);
        }
        if r.read_bool() {
            let index_bits = crate::bits::bits_for_count(bits as u64);
            let count = r.read_bits(index_bits) + 1;
            if count > bits as u64 {
                return Err(super::SerializeError::TooLong {
                    what: "change mask set-bit count",
                    len: count,
                    max: bits as u64,
                });
            }
            for _ in 0..count {
                let i = r.read_bits(index_bits) as u32;
                r.check()?;
                if i >= bits {
                    return Err(super::SerializeError::invalid(
                        "ChangeMask",
                        "set-bit index past the mask length",
                    ));
                }
                m.set(i);
            }
        } else {
            let mut left = bits;
            for word in m.words_mut() {
                let n = left.min(64);
                *word = r.read_bits(n);
                left -= n;
            }
        }
        r.check()?;
        Ok(m)
    }
}

impl ChangeMask {
    /// Writes the mask like [`write`](Self::write), or, with `mostly_ones` (Iris's
    /// `ContainsMostlyOnes` hint, used for initial states), in an inverted sparse form:
    /// raw when at most 8 bits, otherwise `[1][zero count: m][zero index: n]...` when
    /// shorter than the raw `[0][bits]` form (`m` holds `0..=bits`, `n` an index).
    pub fn write_with_hint(&self, w: &mut BitWriter, mostly_ones: bool) {
        let bits = self.len();
        if !mostly_ones || bits <= 8 {
            self.write(w);
            return;
        }
        let zeros = bits - self.count_ones();
        let count_bits = crate::bits::bits_for_count(bits as u64 + 1);
        let index_bits = crate::bits::bits_for_count(bits as u64);
        let sparse_cost = count_bits as u64 + index_bits as u64 * zeros as u64;
        if sparse_cost < bits as u64 {
            w.write_bool(true);
            w.write_bits(zeros as u64, count_bits);
            for i in (0..bits).filter(|&i| !self.get(i)) {
                w.write_bits(i as u64, index_bits);
            }
        } else {
            w.write_bool(false);
            let mut left = bits;
            for &word in self.words() {
                let n = left.min(64);
                w.write_bits(word, n);
                left -= n;
            }
        }
    }

    /// Reads a mask written by [`write_with_hint`](Self::write_with_hint) with the same
    /// hint.
    pub fn read_with_hint(bits: u32, r: &mut BitReader, mostly_ones: bool) -> Result<Self> {
        if !mostly_ones || bits <= 8 {
            return Self::read(bits, r);
        }
        if !r.read_bool() {
            let mut m = Self::new(bits);
            let mut left = bits;
            for word in m.words_mut() {
                let n = left.min(64);
                *word = r.read_bits(n);
                left -= n;
            }
            r.check()?;
            return Ok(m);
        }
        let count_bits = crate::bits::bits_for_count(bits as u64 + 1);
        let index_bits = crate::bits::bits_for_count(bits as u64);
        let zeros = r.read_bits(count_bits);
        r.check()?;
        if zeros > bits as u64 {
            return Err(super::SerializeError::TooLong {
                what: "change mask clear-bit count",
                len: zeros,
                max: bits as u64,
            });
        }
        let mut m = Self::all(bits);
        for _ in 0..zeros {
            let i = r.read_bits(index_bits) as u32;
            r.check()?;
            if i >= bits {
                return Err(super::SerializeError::invalid(
                    "ChangeMask",
                    "clear-bit index past the mask length",
                ));
            }
            m.clear_bit(i);
        }
        Ok(m)
    }
}

/// A growable bit array over internal indices, with a summary bit per word that tells
/// whether the word has any bit set: iterating, counting and clearing cost the set
/// words (and one summary word per 4096 indices), not the whole array, so a writer
/// with nothing dirty among 100 000 objects looks at 25 words, not 1 563.
#[derive(Debug, Default)]
pub struct BitArray {
    words: Vec<u64>,
    /// Bit `k` is set when `words[k]` is not zero.
    summary: Vec<u64>,
    /// Words not zero (the summary's set bits): an empty array answers at once.
    set_words: usize,
}

/// The set bits of a [`BitArray`] that another leaves clear, ascending (see
/// [`BitArray::iter_and_not`]): the summary finds the words with bits set, so empty
/// stretches cost a summary word per 4 096 indices.
#[derive(Debug, Clone)]
pub struct SetBits<'a> {
    words: &'a [u64],
    not: &'a [u64],
    summary: &'a [u64],
    /// Words with a bit set not reached yet.
    words_left: usize,
    /// The next summary word to read.
    summary_at: usize,
    /// The summary word being read (its words not reached yet).
    summary_word: u64,
    /// The index of bit 0 of `word`.
    base: u32,
    /// The word being read (its bits not returned yet).
    word: u64,
}

impl Iterator for SetBits<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        loop {
            if self.word != 0 {
                let b = self.word.trailing_zeros();
                self.word &= self.word - 1;
                return Some(self.base + b);
            }
            while self.summary_word == 0 {
                if self.words_left == 0 {
                    return None;
                }
                self.summary_word = *self.summary.get(self.summary_at)?;
                self.summary_at += 1;
            }
            let k = (self.summary_at - 1) * 64 + self.summary_word.trailing_zeros() as usize;
            self.summary_word &= self.summary_word - 1;
            self.words_left -= 1;
            self.base = k as u32 * 64;
            self.word = self.words[k] & !self.not.get(k).copied().unwrap_or(0);
        }
    }
}

impl Clone for BitArray {
    fn clone(&self) -> Self {
        Self {
            words: self.words.clone(),
            summary: self.summary.clone(),
            set_words: self.set_words,
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.words.clone_from(&source.words);
        self.summary.clone_from(&source.summary);
        self.set_words = source.set_words;
    }
}

impl BitArray {
    /// Whether both arrays have the same bits set (whatever their lengths).
    pub fn same_bits(&self, other: &BitArray) -> bool {
        let (short, long) = if self.words.len() <= other.words.len() {
            (&self.words, &other.words)
        } else {
            (&other.words, &self.words)
        };
        self.set_words == other.set_words
            && short[..] == long[..short.len()]
            && long[short.len()..].iter().all(|&w| w == 0)
    }

    /// Whether bit `i` is set.
    #[inline]
    pub fn get(&self, i: u32) -> bool {
        self.words
            .get((i / 64) as usize)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// Sets bit `i`, growing as needed.
    #[inline(always)]
    pub fn set(&mut self, i: u32) {
        let w = (i / 64) as usize;
        if w >= self.words.len() {
            self.grow(w + 1);
        }
        if self.words[w] == 0 {
            self.summary[w / 64] |= 1 << (w % 64);
            self.set_words += 1;
        }
        self.words[w] |= 1 << (i % 64);
    }

    /// Grows to `words` words.
    #[cold]
    fn grow(&mut self, words: usize) {
        self.words.resize(words, 0);
        self.summary.resize(self.words.len().div_ceil(64), 0);
    }

    /// Clears bit `i`.
    #[inline]
    pub fn clear(&mut self, i: u32) {
        let w = (i / 64) as usize;
        if let Some(word) = self.words.get_mut(w)
            && *word != 0
        {
            *word &= !(1 << (i % 64));
            if *word == 0 {
                self.summary[w / 64] &= !(1 << (w % 64));
                self.set_words -= 1;
            }
        }
    }

    /// Word `k` of the array: bits `64 k .. 64 k + 64` (0 past the end).
    #[inline]
    pub fn word(&self, k: usize) -> u64 {
        self.words.get(k).copied().unwrap_or(0)
    }

    /// Replaces word `k` (see [`word`](Self::word)), growing as needed.
    pub fn set_word(&mut self, k: usize, value: u64) {
        if k >= self.words.len() {
            if value == 0 {
                return;
            }
            self.grow(k + 1);
        }
        let was = self.words[k] != 0;
        self.words[k] = value;
        match (was, value != 0) {
            (false, true) => {
                self.summary[k / 64] |= 1 << (k % 64);
                self.set_words += 1;
            }
            (true, false) => {
                self.summary[k / 64] &= !(1 << (k % 64));
                self.set_words -= 1;
            }
            _ => {}
        }
    }

    /// Sets or clears bit `i`.
    pub fn assign(&mut self, i: u32, on: bool) {
        if on { self.set(i) } else { self.clear(i) }
    }

    /// Number of set bits.
    pub fn count(&self) -> usize {
        if self.set_words == 0 {
            return 0;
        }
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether no bit is set.
    pub fn none(&self) -> bool {
        self.set_words == 0
    }

    /// Clears every bit.
    pub fn clear_all(&mut self) {
        self.set_words = 0;
        for k in 0..self.summary.len() {
            let mut s = std::mem::take(&mut self.summary[k]);
            while s != 0 {
                self.words[k * 64 + s.trailing_zeros() as usize] = 0;
                s &= s - 1;
            }
        }
    }

    /// Indices of set bits, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter_and_not(None)
    }

    /// Indices set in `self` and not in `other` (or all of `self` when `None`).
    pub fn iter_and_not<'a>(&'a self, other: Option<&'a BitArray>) -> SetBits<'a> {
        SetBits {
            words: &self.words,
            not: other.map_or(&[][..], |o| &o.words[..]),
            summary: &self.summary,
            words_left: self.set_words,
            summary_at: 0,
            summary_word: 0,
            base: 0,
            word: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn any_in_is_any_bit_of_the_range(
            bits in 0u32..=200,
            set in proptest::collection::vec(0u32..200, 0..4),
            offset in 0u32..210,
            count in 0u32..140,
        ) {
            let mut mask = ChangeMask::new(bits);
            for &i in &set {
                mask.set(i);
            }
            let expected = (offset..offset.saturating_add(count)).any(|i| mask.get(i));
            proptest::prop_assert_eq!(mask.any_in(offset, count), expected);
        }

        #[test]
        fn inline_masks_combine_like_their_words(bits in 0u32..=64, a: u64, b: u64, wide: u64) {
            let keep = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            let (ma, mb) = (ChangeMask::from_u64(bits, a), ChangeMask::from_u64(bits, b));
            proptest::prop_assert_eq!(ma.to_u64(), a & keep);
            proptest::prop_assert_eq!(ChangeMask::all(bits).to_u64(), keep);
            proptest::prop_assert_eq!(ChangeMask::all(bits).count_ones(), bits);
            let mut or = ma.clone();
            or.or_with(&mb);
            proptest::prop_assert_eq!(or.to_u64(), (a | b) & keep);
            let mut and = ma.clone();
            and.and_with(&mb);
            proptest::prop_assert_eq!(and.to_u64(), a & b & keep);
            // Against a wider mask: its first word.
            let mut other = ChangeMask::new(130);
            for i in 0..64 {
                if wide >> i & 1 == 1 {
                    other.set(i);
                }
            }
            other.set(129);
            let mut and = ma.clone();
            and.and_with(&other);
            proptest::prop_assert_eq!(and.to_u64(), a & wide & keep);
            let mut or = ma;
            or.or_with(&other);
            proptest::prop_assert_eq!(or.to_u64(), (a | wide) & keep);
            proptest::prop_assert_eq!(or.len(), bits);
        }
    }

    #[test]
    fn from_words_takes_each_bit_and_nothing_past_the_length() {
        let words = [0xF0F0_0000_0000_0001u64, u64::MAX, 0b1011, 0xDEAD];
        for bits in [0u32, 1, 5, 63, 64, 65, 130, 200, 300] {
            let m = ChangeMask::from_words(bits, &words);
            assert_eq!(m.len(), bits);
            for i in 0..bits {
                let want = words
                    .get((i / 64) as usize)
                    .is_some_and(|w| w >> (i % 64) & 1 == 1);
                assert_eq!(m.get(i), want, "{bits} bits, bit {i}");
            }
            let set = (0..bits).filter(|&i| m.get(i)).count() as u32;
            assert_eq!(m.count_ones(), set, "{bits} bits: no bit past the length");
        }
    }

    #[test]
    fn written_bits_is_what_write_writes() {
        use crate::bits::BitWriter;
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for bits in [0u32, 1, 5, 8, 9, 16, 31, 64, 65, 100, 200] {
            for density in [0u64, 1, 2, 8, 60, 64] {
                let mut m = ChangeMask::new(bits);
                for i in 0..bits {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 64 < density {
                        m.set(i);
                    }
                }
                for hint in [None, Some(false), Some(true)] {
                    let mut w = BitWriter::with_capacity_bits(1024);
                    match hint {
                        None => m.write(&mut w),
                        Some(h) => m.write_with_hint(&mut w, h),
                    }
                    assert_eq!(
                        m.written_bits(hint),
                        w.position(),
                        "{bits} bits, {m:?}, {hint:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn set_bits_are_the_bits_set_and_not_in_the_other_array() {
        // Sparse and dense stretches over several summary words (4 096 indices each).
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..20 {
            let (mut a, mut b) = (BitArray::default(), BitArray::default());
            let (mut sa, mut sb) = (Vec::new(), std::collections::HashSet::new());
            for _ in 0..(round * 50) {
                let i = (next() % 20_000) as u32;
                a.set(i);
                sa.push(i);
                if next() % 3 == 0 {
                    let j = (next() % 20_000) as u32;
                    b.set(j);
                    sb.insert(j);
                }
            }
            // Some cleared again: their words may be empty now.
            for &i in sa.iter().step_by(7) {
                a.clear(i);
            }
            let expected: std::collections::BTreeSet<u32> = (0..20_000)
                .filter(|&i| a.get(i) && !sb.contains(&i))
                .collect();
            let got: Vec<u32> = a.iter_and_not(Some(&b)).collect();
            assert!(got.windows(2).all(|w| w[0] < w[1]), "ascending");
            assert_eq!(got, expected.into_iter().collect::<Vec<_>>());
            assert_eq!(a.iter().count(), a.count());
        }
    }

    #[test]
    fn bit_arrays_of_other_lengths_with_the_same_bits_are_the_same() {
        let (mut a, mut b) = (BitArray::default(), BitArray::default());
        assert!(a.same_bits(&b));
        a.set(3);
        b.set(3);
        b.set(5000);
        assert!(!a.same_bits(&b) && !b.same_bits(&a));
        b.clear(5000);
        assert!(a.same_bits(&b) && b.same_bits(&a), "trailing empty words");
        a.set(64);
        assert!(!a.same_bits(&b));
        let mut c = BitArray::default();
        c.set(9000);
        c.clone_from(&a);
        assert!(c.same_bits(&a) && !c.get(9000));
    }

    #[test]
    fn words_replaced_whole_keep_the_summary_and_count() {
        let mut a = BitArray::default();
        a.set(70);
        assert_eq!((a.word(1), a.word(99)), (1 << 6, 0));
        // Word 1 emptied, word 150 (past the end) filled, word 200 left empty.
        a.set_word(1, 0);
        a.set_word(150, 0b101);
        a.set_word(200, 0);
        assert_eq!(a.iter().collect::<Vec<_>>(), [150 * 64, 150 * 64 + 2]);
        assert_eq!(a.count(), 2);
        let mut b = BitArray::default();
        b.set(150 * 64);
        b.set(150 * 64 + 2);
        assert!(a.same_bits(&b));
        a.set_word(150, 0);
        assert!(a.none() && a.iter().next().is_none());
    }

    #[test]
    fn bit_array_and_not() {
        let mut a = BitArray::default();
        let mut b = BitArray::default();
        for i in [1, 64, 65, 200] {
            a.set(i);
        }
        b.set(65);
        assert_eq!(
            a.iter_and_not(Some(&b)).collect::<Vec<_>>(),
            vec![1, 64, 200]
        );
        assert_eq!(a.count(), 4);
        a.clear(1);
        assert!(!a.get(1) && a.get(64));
    }

    #[test]
    fn bit_array_summary_follows_the_words() {
        // Against a plain set over 10 000 indices, through sets, clears and
        // clear_all: iteration, count and emptiness must agree at every step.
        let mut a = BitArray::default();
        let mut model = std::collections::BTreeSet::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % 10_000) as u32;
            if x >> 40 & 1 == 1 {
                a.set(i);
                model.insert(i);
            } else {
                a.clear(i);
                model.remove(&i);
            }
            if step % 5_000 == 4_999 {
                a.clear_all();
                model.clear();
            }
            if step % 97 == 0 {
                assert_eq!(
                    a.iter().collect::<Vec<_>>(),
                    model.iter().copied().collect::<Vec<_>>()
                );
                assert_eq!(a.count(), model.len());
                assert_eq!(a.none(), model.is_empty());
            }
        }
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            model.iter().copied().collect::<Vec<_>>()
        );
    }
}
