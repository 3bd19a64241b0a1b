//! The bit stream: a fixed-capacity [`BitWriter`] over `u64` words and a bounds-checked
//! [`BitReader`] over a byte slice.
//!
//! This layer owns bit packing only. It knows nothing about serializers, objects or
//! packets. Wire order is LSB-first: bit `i` of the stream is bit `i % 8` of byte `i / 8`,
//! and words are stored little-endian, so the bytes on the wire do not depend on the host.
//!
//! Neither side ever panics on bad sizes: writing past the capacity sets a sticky
//! overflow flag (and writes nothing), reading past the end sets a sticky error flag and
//! yields zeroes. Callers check the flag once at the end of a unit of work.
//!
//! ```
//! use replicate::bits::{BitReader, BitWriter};
//!
//! let mut w = BitWriter::with_capacity_bytes(16);
//! w.write_bits(5, 3);
//! if w.write_bool(true) {
//!     w.write_bits(0xABCD, 16);
//! }
//! assert_eq!(w.position(), 20);
//! let bytes = w.finish().unwrap();
//!
//! let mut r = BitReader::new(&bytes);
//! assert_eq!(r.read_bits(3), 5);
//! assert!(r.read_bool());
//! assert_eq!(r.read_bits(16), 0xABCD);
//! assert!(r.check().is_ok());
//! ```

use thiserror::Error;

/// A bit stream error: an overflowing write or a read past the end of the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BitError {
    /// A write did not fit in the writer's capacity.
    #[error(
        "bit writer overflow: {requested} bits requested at bit {position}, capacity {capacity} bits"
    )]
    WriteOverflow {
        /// Bit position of the failed write.
        position: usize,
        /// Bits the write needed.
        requested: usize,
        /// Capacity of the writer in bits.
        capacity: usize,
    },
    /// A read went past the end of the data.
    #[error(
        "bit reader overflow: {requested} bits requested at bit {position}, only {available} left"
    )]
    ReadOverflow {
        /// Bit position of the failed read.
        position: usize,
        /// Bits the read needed.
        requested: usize,
        /// Bits that were left.
        available: usize,
    },
}

#[inline]
pub(crate) fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Writes bits into `u64` words up to a fixed capacity (the packet budget).
///
/// The writer never grows past its capacity: a write that does not fit sets the overflow
/// flag, leaves the stream unchanged and every later write is ignored until a
/// [`rollback`](Self::rollback) to a mark taken before the overflow.
#[derive(Clone)]
pub struct BitWriter {
    words: Vec<u64>,
    pos: usize,
    capacity: usize,
    /// The capacity given at construction or the last reset: `capacity` never exceeds
    /// it, whatever mark is passed back (a stale mark from before a `reset` included).
    limit: usize,
    overflow: Option<BitError>,
}

impl std::fmt::Debug for BitWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitWriter")
            .field("position", &self.pos)
            .field("capacity", &self.capacity)
            .field("overflow", &self.overflow)
            .finish()
    }
}

/// A saved writer position: [`BitWriter::mark`] takes one, [`BitWriter::rollback`]
/// returns to it, discarding everything written after it (and an overflow that happened
/// after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterMark {
    pos: usize,
    capacity: usize,
    overflowed: bool,
}

impl WriterMark {
    /// The bit position at which the mark was taken.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl BitWriter {
    /// A writer that holds at most `bits` bits.
    pub fn with_capacity_bits(bits: usize) -> Self {
        Self {
            words: vec![0; bits.div_ceil(64) + 1],
            pos: 0,
            capacity: bits,
            limit: bits,
            overflow: None,
        }
    }

    /// A writer that holds at most `bytes` bytes (a packet budget).
    pub fn with_capacity_bytes(bytes: usize) -> Self {
        Self::with_capacity_bits(bytes.saturating_mul(8))
    }

    /// Empties the writer and sets a new capacity, keeping the allocation where it can.
    /// Only the words written are cleared: every bit past the position is zero
    /// already (writes keep it, rollbacks clear it), so reusing a large writer for a
    /// small packet costs the packet, not the capacity.
    pub fn reset(&mut self, capacity_bits: usize) {
        let written = self.pos.div_ceil(64).min(self.words.len());
        self.words[..written].fill(0);
        self.words.resize(capacity_bits.div_ceil(64) + 1, 0);
        self.pos = 0;
        self.capacity = capacity_bits;
        self.limit = capacity_bits;
        self.overflow = None;
    }

    /// Current bit position (bits written so far).
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes needed to hold what has been written (rounded up).
    #[inline]
    pub fn byte_len(&self) -> usize {
        self.pos.div_ceil(8)
    }

    /// Capacity in bits.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bits that can still be written.
    #[inline]
    pub fn bits_left(&self) -> usize {
        self.capacity.saturating_sub(self.pos)
    }

    /// Whether a write has overflowed the capacity.
    #[inline]
    pub fn is_overflown(&self) -> bool {
        self.overflow.is_some()
    }

    /// The overflow, if one happened.
    pub fn error(&self) -> Option<BitError> {
        self.overflow
    }

    #[inline]
    fn reserve(&mut self, bits: usize) -> bool {
        if self.overflow.is_some() {
            return false;
        }
        if bits > self.capacity.saturating_sub(self.pos) {
            self.overflow = Some(BitError::WriteOverflow {
                position: self.pos,
                requested: bits,
                capacity: self.capacity,
            });
            return false;
        }
        true
    }

    /// Stores `bits` bits of `value` at `pos` (which the caller has reserved), clearing
    /// whatever was there so seeks can overwrite.
    #[inline]
    fn put(&mut self, pos: usize, value: u64, bits: u32) {
        debug_assert!((1..=64).contains(&bits));
        let value = value & low_mask(bits);
        let index = pos >> 6;
        let offset = (pos & 63) as u32;
        let mask = low_mask(bits);
        // The word vector always has one spare word past the capacity.
        self.words[index] = (self.words[index] & !(mask << offset)) | (value << offset);
        if offset + bits > 64 {
            let spill = 64 - offset;
            let high_mask = mask >> spill;
            self.words[index + 1] = (self.words[index + 1] & !high_mask) | (value >> spill);
        }
    }

    /// Writes the low `bits` bits of `value` (`bits` in `0..=64`; 0 writes nothing).
    #[inline]
    pub fn write_bits(&mut self, value: u64, bits: u32) {
        debug_assert!(bits <= 64, "write_bits takes at most 64 bits, got {bits}");
        let bits = bits.min(64);
        if bits == 0 || !self.reserve(bits as usize) {
            return;
        }
        self.put(self.pos, value, bits);
        self.pos += bits as usize;
    }

    /// Writes one bit and returns `value`, so a write can drive a branch:
    /// `if w.write_bool(x != 0) { ... }`.
    #[inline]
    pub fn write_bool(&mut self, value: bool) -> bool {
        self.write_bits(value as u64, 1);
        value
    }

    /// Writes whole bytes. When the stream is byte-aligned the bytes are copied a word
    /// at a time.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        if !self.reserve(bytes.len() * 8) {
            return;
        }
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.put(self.pos, u64::from_le_bytes(word), 64);
            self.pos += 64;
        }
        for &b in chunks.remainder() {
            self.put(self.pos, b as u64, 8);
            self.pos += 8;
        }
    }

    /// Pads with zero bits up to the next byte boundary.
    pub fn align_to_byte(&mut self) {
        let pad = (8 - (self.pos & 7)) & 7;
        self.write_bits(0, pad as u32);
    }

    /// Reads back `bits` (`1..=64`) bits written at `position`, or `None` when that
    /// range was not written.
    pub fn peek_bits(&self, position: usize, bits: u32) -> Option<u64> {
        if bits == 0 || bits > 64 || position.checked_add(bits as usize)? > self.pos {
            return None;
        }
        let index = position >> 6;
        let offset = (position & 63) as u32;
        let mut value = self.words[index] >> offset;
        if offset + bits > 64 {
            value |= self.words[index + 1] << (64 - offset);
        }
        Some(value & low_mask(bits))
    }

    /// Overwrites `bits` bits at an earlier position without moving the write position,
    /// for patching a size prefix written before its payload.
    ///
    /// Does nothing (and sets the overflow flag) if the range was never written. Like
    /// every other write it is ignored once the writer has overflowed, so a patch can
    /// never outlive a rollback to a mark taken before the overflow.
    pub fn patch_bits(&mut self, position: usize, value: u64, bits: u32) {
        if bits == 0 || self.overflow.is_some() {
            return;
        }
        if bits > 64 || position.saturating_add(bits as usize) > self.pos {
            self.overflow.get_or_insert(BitError::WriteOverflow {
                position,
                requested: bits as usize,
                capacity: self.pos,
            });
            return;
        }
        self.put(position, value, bits);
    }

    /// Moves the write position to `position`, which must not be past the current one.
    /// Bits after it are discarded. Equivalent to rolling back to an older mark, but
    /// keeps a pending overflow.
    pub fn seek_back(&mut self, position: usize) {
        if position < self.pos {
            self.clear_from(position);
            self.pos = position;
        }
    }

    fn clear_from(&mut self, position: usize) {
        let end_word = self.pos.div_ceil(64).min(self.words.len());
        let index = position >> 6;
        let offset = position & 63;
        if index < self.words.len() {
            self.words[index] &= low_mask(offset as u32);
            for w in &mut self.words[index + 1..end_word.max(index + 1)] {
                *w = 0;
            }
        }
    }

    /// Saves the current position (and overflow state) for a later [`rollback`](Self::rollback).
    pub fn mark(&self) -> WriterMark {
        WriterMark {
            pos: self.pos,
            capacity: self.capacity,
            overflowed: self.overflow.is_some(),
        }
    }

    /// Returns to `mark`: what was written since is discarded; an overflow that happened
    /// since is cleared; a capacity narrowed by [`begin_substream`](Self::begin_substream)
    /// since is restored (never beyond the capacity of the last [`reset`](Self::reset),
    /// so a stale mark cannot widen the writer).
    pub fn rollback(&mut self, mark: WriterMark) {
        if mark.pos <= self.pos {
            self.clear_from(mark.pos);
            self.pos = mark.pos;
        }
        self.capacity = mark.capacity.min(self.limit);
        if !mark.overflowed {
            self.overflow = None;
        }
    }

    /// Starts a substream of at most `max_bits` bits: until it ends, the capacity is
    /// narrowed to the current position plus `max_bits` (never widened). End it with
    /// [`commit_substream`](Self::commit_substream), which keeps what was written if it
    /// fit, or [`rollback`](Self::rollback), which discards it.
    pub fn begin_substream(&mut self, max_bits: usize) -> WriterMark {
        let mark = self.mark();
        self.capacity = self.capacity.min(self.pos.saturating_add(max_bits));
        mark
    }

    /// Ends a substream begun at `mark`. If the substream overflowed it is rolled back
    /// as a whole and the overflow is returned; otherwise its bits are kept.
    pub fn commit_substream(&mut self, mark: WriterMark) -> Result<(), BitError> {
        match self.overflow {
            Some(err) if !mark.overflowed => {
                self.rollback(mark);
                Err(err)
            }
            _ => {
                self.capacity = mark.capacity.min(self.limit);
                Ok(())
            }
        }
    }

    /// The written bytes (the last byte zero-padded), or the overflow.
    pub fn finish(&self) -> Result<Vec<u8>, BitError> {
        if let Some(err) = self.overflow {
            return Err(err);
        }
        Ok(self.to_bytes())
    }

    /// The written bytes (the last byte zero-padded), ignoring any overflow.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_len() + 8);
        self.append_to(&mut out);
        out
    }

    /// Appends everything written to `out` (zero-padded to a whole byte).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let words = &self.words[..self.pos.div_ceil(64)];
        // Room first, then word by word into it: a store each, where extending the
        // vector eight bytes at a time checks its capacity for every word.
        out.resize(start + words.len() * 8, 0);
        for (bytes, w) in out[start..].chunks_exact_mut(8).zip(words) {
            bytes.copy_from_slice(&w.to_le_bytes());
        }
        out.truncate(start + self.byte_len());
    }

    /// What has been written, as words: bit 0 of the first word first (the layout
    /// [`append_to`](Self::append_to) writes as bytes, little-endian). The bits past
    /// the position are zero, also after a [`rollback`](Self::rollback).
    pub fn words(&self) -> &[u64] {
        &self.words[..self.pos.div_ceil(64)]
    }

    /// Appends everything written to `other` to this writer.
    pub fn write_from(&mut self, other: &BitWriter) {
        self.write_words(&other.words, other.pos);
    }

    /// Appends the first `bits` bits of `words` (bit 0 of `words[0]` first), a word at
    /// a time. Writes nothing (and overflows) when `bits` does not fit, or when `words`
    /// holds fewer than `bits` bits.
    pub fn write_words(&mut self, words: &[u64], bits: usize) {
        if bits > words.len().saturating_mul(64) {
            self.overflow = Some(BitError::WriteOverflow {
                position: self.pos,
                requested: bits,
                capacity: self.capacity,
            });
            return;
        }
        if !self.reserve(bits) {
            return;
        }
        // Whole words, two stores each (one when aligned); then the last bits (a
        // member's segment is mostly only those). What lies past the written bits is
        // kept, as `put` keeps it.
        let full = bits / 64;
        if full > 0 {
            let offset = (self.pos & 63) as u32;
            let index = self.pos >> 6;
            if offset == 0 {
                self.words[index..index + full].copy_from_slice(&words[..full]);
            } else {
                // Each source word spans two: its low part ends one, its high part
                // begins the next. Each output word is computed from two source words
                // (no carry from one to the next), so the loop vectorizes.
                let keep = low_mask(offset);
                let (src, out) = (&words[..full], &mut self.words[index..=index + full]);
                out[0] = (out[0] & keep) | (src[0] << offset);
                for (o, pair) in out[1..full].iter_mut().zip(src.windows(2)) {
                    *o = (pair[1] << offset) | (pair[0] >> (64 - offset));
                }
                out[full] = (out[full] & !keep) | (src[full - 1] >> (64 - offset));
            }
            self.pos += full * 64;
        }
        let rest = (bits % 64) as u32;
        if rest > 0 {
            self.put(self.pos, words[full], rest);
            self.pos += rest as usize;
        }
    }

    /// Appends the `bits` bits written from `start` on (`start + bits` at most
    /// [`position`](Self::position)) to `out` as words, bit 0 of the first word first:
    /// what [`write_words`](Self::write_words) copies back into a writer.
    pub fn copy_bits(&self, start: usize, bits: usize, out: &mut Vec<u64>) {
        let end = start.saturating_add(bits).min(self.pos);
        let mut pos = start.min(end);
        while pos < end {
            let n = (end - pos).min(64);
            let index = pos >> 6;
            let offset = (pos & 63) as u32;
            let mut word = self.words[index] >> offset;
            if offset > 0 && index + 1 < self.words.len() {
                word |= self.words[index + 1] << (64 - offset);
            }
            out.push(word & low_mask(n as u32));
            pos += n;
        }
    }
}

/// Reads bits from a byte slice, bounds-checked.
///
/// A read past the end sets a sticky error and returns zero; later reads return zero
/// too. Check [`check`](Self::check) (or [`is_overflown`](Self::is_overflown)) after a
/// unit of work.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
    /// First readable bit (non-zero for a substream); `seek` stays in `start..=end`.
    start: usize,
    end: usize,
    error: Option<BitError>,
}

impl<'a> BitReader<'a> {
    /// A reader over all bits of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self::with_bit_len(data, data.len() * 8)
    }

    /// A reader over the first `bits` bits of `data` (clamped to the data's length).
    pub fn with_bit_len(data: &'a [u8], bits: usize) -> Self {
        Self {
            data,
            pos: 0,
            start: 0,
            end: bits.min(data.len() * 8),
            error: None,
        }
    }

    /// Current bit position.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bits left to read.
    #[inline]
    pub fn bits_left(&self) -> usize {
        self.end - self.pos
    }

    /// Whether a read went past the end.
    #[inline]
    pub fn is_overflown(&self) -> bool {
        self.error.is_some()
    }

    /// `Err` with the first read error, if any.
    pub fn check(&self) -> Result<(), BitError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Marks the reader as failed (used by callers that detect a semantic error and
    /// want later reads to yield nothing).
    pub fn set_overflow(&mut self, requested: usize) {
        self.error.get_or_insert(BitError::ReadOverflow {
            position: self.pos,
            requested,
            available: self.bits_left(),
        });
    }

    #[inline]
    fn load_word(&self, byte: usize) -> u64 {
        match self.data.get(byte..byte + 8) {
            Some(slice) => {
                let mut word = [0u8; 8];
                word.copy_from_slice(slice);
                u64::from_le_bytes(word)
            }
            None => {
                let mut word = [0u8; 8];
                if let Some(tail) = self.data.get(byte..) {
                    word[..tail.len()].copy_from_slice(tail);
                }
                u64::from_le_bytes(word)
            }
        }
    }

    #[inline]
    fn reserve(&mut self, bits: usize) -> bool {
        if self.error.is_some() {
            return false;
        }
        if bits > self.end - self.pos {
            self.set_overflow(bits);
            return false;
        }
        true
    }

    /// Reads `bits` bits (`0..=64`) as the low bits of a `u64`. A width over 64 (a
    /// length decoded from bad input) sets the error flag and yields 0.
    #[inline]
    pub fn read_bits(&mut self, bits: u32) -> u64 {
        if bits > 64 {
            self.set_overflow(bits as usize);
            return 0;
        }
        if bits == 0 || !self.reserve(bits as usize) {
            return 0;
        }
        let byte = self.pos >> 3;
        let shift = (self.pos & 7) as u32;
        let mut value = self.load_word(byte) >> shift;
        if shift + bits > 64 {
            value |= self.load_word(byte + 8) << (64 - shift);
        }
        self.pos += bits as usize;
        value & low_mask(bits)
    }

    /// Reads one bit.
    #[inline]
    pub fn read_bool(&mut self) -> bool {
        self.read_bits(1) != 0
    }

    /// Reads `out.len()` whole bytes. On overflow `out` is zeroed.
    pub fn read_bytes(&mut self, out: &mut [u8]) {
        if !self.reserve(out.len() * 8) {
            out.fill(0);
            return;
        }
        if self.pos & 7 == 0 {
            let start = self.pos >> 3;
            out.copy_from_slice(&self.data[start..start + out.len()]);
            self.pos += out.len() * 8;
            return;
        }
        for b in out.iter_mut() {
            *b = self.read_bits(8) as u8;
        }
    }

    /// Skips to the next byte boundary.
    pub fn align_to_byte(&mut self) {
        let pad = (8 - (self.pos & 7)) & 7;
        self.read_bits(pad as u32);
    }

    /// Skips `bits` bits.
    pub fn skip(&mut self, bits: usize) {
        if self.reserve(bits) {
            self.pos += bits;
        }
    }

    /// Moves to an absolute bit position inside the readable range (for a substream,
    /// its own range); a position outside it sets the error flag instead.
    pub fn seek(&mut self, position: usize) {
        if position < self.start || position > self.end {
            self.set_overflow(position.saturating_sub(self.pos));
        } else {
            self.pos = position;
        }
    }

    /// Splits off the next `bits` bits as their own reader and advances past them. If
    /// fewer are left, the error flag is set on `self` and the substream is empty.
    pub fn substream(&mut self, bits: usize) -> BitReader<'a> {
        if !self.reserve(bits) {
            return BitReader {
                data: self.data,
                pos: 0,
                start: 0,
                end: 0,
                error: self.error,
            };
        }
        let sub = BitReader {
            data: self.data,
            pos: self.pos,
            start: self.pos,
            end: self.pos + bits,
            error: None,
        };
        self.pos += bits;
        sub
    }
}

/// Number of bits needed to represent `value` (at least 1, so 0 needs 1 bit).
#[inline]
pub fn bits_needed(value: u64) -> u32 {
    (64 - value.leading_zeros()).max(1)
}

/// Number of bits needed to hold any value in `0..count` (0 for `count <= 1`).
#[inline]
pub const fn bits_for_count(count: u64) -> u32 {
    if count <= 1 {
        0
    } else {
        64 - (count - 1).leading_zeros()
    }
}

/// Sign-extends the low `bits` bits of `value` with the branch-free
/// `(v ^ m) - m` trick (`m = 1 << (bits - 1)`).
#[inline]
pub fn sign_extend(value: u64, bits: u32) -> i64 {
    if bits == 0 {
        return 0;
    }
    if bits >= 64 {
        return value as i64;
    }
    let m = 1u64 << (bits - 1);
    let v = value & low_mask(bits);
    (v ^ m).wrapping_sub(m) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_reads_back_what_was_written_across_words() {
        let mut w = BitWriter::with_capacity_bytes(32);
        w.write_bits(0x5, 3);
        w.write_bits(0xDEAD_BEEF_CAFE_F00D, 64);
        w.write_bits(0x1FF, 9);
        assert_eq!(w.peek_bits(0, 3), Some(0x5));
        assert_eq!(w.peek_bits(3, 64), Some(0xDEAD_BEEF_CAFE_F00D));
        assert_eq!(w.peek_bits(67, 9), Some(0x1FF));
        assert_eq!(
            w.peek_bits(60, 16),
            Some(0xDEAD_BEEF_CAFE_F00D_u64 >> 57 | 0x1FF << 7 & 0xFFFF)
        );
        assert_eq!(w.peek_bits(70, 7), None, "past the written bits");
        assert_eq!(w.peek_bits(0, 0), None);
        assert_eq!(w.peek_bits(0, 65), None);
        assert_eq!(w.peek_bits(usize::MAX, 8), None);
    }

    #[test]
    fn copied_bits_write_back_identically_at_any_offsets() {
        // A pseudo-random stream, copied out at every (start, length) over word
        // boundaries and written back behind every leading offset.
        let mut src = BitWriter::with_capacity_bits(400);
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..6 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            src.write_bits(x, 64);
        }
        for start in [0, 1, 31, 63, 64, 65, 130] {
            for bits in [0, 1, 7, 63, 64, 65, 129, 200] {
                let mut words = Vec::new();
                src.copy_bits(start, bits, &mut words);
                assert_eq!(words.len(), bits.div_ceil(64));
                for lead in [0, 5, 64] {
                    let mut dst = BitWriter::with_capacity_bits(512);
                    dst.write_bits(u64::MAX, lead as u32);
                    dst.write_words(&words, bits);
                    assert_eq!(dst.position(), lead + bits);
                    for i in 0..bits {
                        assert_eq!(
                            dst.peek_bits(lead + i, 1),
                            src.peek_bits(start + i, 1),
                            "start {start} bits {bits} lead {lead} bit {i}"
                        );
                    }
                    // Over bits written before (a seek back, which clears them): the
                    // copy replaces them, and past it nothing is set.
                    let mut over = BitWriter::with_capacity_bits(512);
                    for _ in 0..7 {
                        over.write_bits(u64::MAX, 64);
                    }
                    over.seek_back(lead);
                    over.write_words(&words, bits);
                    for i in 0..bits {
                        assert_eq!(over.peek_bits(lead + i, 1), src.peek_bits(start + i, 1));
                    }
                    let past = (lead + bits)..448;
                    assert!(
                        past.clone()
                            .all(|i| over.words[i / 64] >> (i % 64) & 1 == 0)
                    );
                }
            }
        }
        // Too few words, or too little room: an overflow, nothing written.
        let mut dst = BitWriter::with_capacity_bits(100);
        dst.write_words(&[1], 65);
        assert!(dst.is_overflown());
        assert_eq!(dst.position(), 0);
        let mut dst = BitWriter::with_capacity_bits(10);
        dst.write_words(&[u64::MAX], 11);
        assert!(dst.is_overflown());
    }

    #[test]
    fn packs_bool_u8_u16_u32_into_57_bits() {
        let mut w = BitWriter::with_capacity_bytes(8);
        w.write_bool(true);
        w.write_bits(0xAB, 8);
        w.write_bits(0xBEEF, 16);
        w.write_bits(0xDEAD_BEEF, 32);
        assert_eq!(w.position(), 57);
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len(), 8);
        let mut r = BitReader::new(&bytes);
        assert!(r.read_bool());
        assert_eq!(r.read_bits(8), 0xAB);
        assert_eq!(r.read_bits(16), 0xBEEF);
        assert_eq!(r.read_bits(32), 0xDEAD_BEEF);
        assert_eq!(r.bits_left(), 7);
    }

    #[test]
    fn lsb_first_little_endian_layout() {
        let mut w = BitWriter::with_capacity_bytes(4);
        w.write_bits(1, 1);
        w.write_bits(0, 7);
        w.write_bits(0x0302, 16);
        assert_eq!(w.finish().unwrap(), vec![0x01, 0x02, 0x03]);
    }

    #[test]
    fn words_are_the_bytes_and_zero_past_the_position() {
        let mut w = BitWriter::with_capacity_bits(256);
        w.write_bits(0x1234_5678_9abc_def0, 64);
        w.write_bits(0b1011, 4);
        let mark = w.mark();
        w.write_bits(u64::MAX, 64);
        w.rollback(mark);
        assert_eq!(w.words(), [0x1234_5678_9abc_def0, 0b1011]);
        let bytes: Vec<u8> = w.words().iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(bytes[..w.byte_len()], w.to_bytes()[..]);
        assert!(bytes[w.byte_len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_reset_writer_is_a_fresh_one() {
        // A writer reused through random writes, patches, rollbacks, seeks, overflows
        // and resets to other capacities holds exactly what a fresh writer given the
        // same writes since the last reset holds: reset clears only what was written.
        let mut seed = 0x5EED_B175_u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n.max(1)
        };
        let mut reused = BitWriter::with_capacity_bits(1200 * 8);
        let mut fresh = BitWriter::with_capacity_bits(1200 * 8);
        let mut marks = Vec::new();
        for step in 0..20_000 {
            match next(20) {
                0 => {
                    let capacity = [0, 1, 63, 64, 65, 500, 4000, 9600, 20_000][next(9) as usize];
                    reused.reset(capacity);
                    fresh = BitWriter::with_capacity_bits(capacity);
                    marks.clear();
                }
                1..=3 => {
                    let m = (reused.mark(), fresh.mark());
                    marks.push(m);
                }
                4 | 5 if !marks.is_empty() => {
                    let (a, b) = marks.swap_remove(next(marks.len() as u64) as usize);
                    reused.rollback(a);
                    fresh.rollback(b);
                }
                6 => {
                    let to = next(reused.position() as u64 + 1) as usize;
                    reused.seek_back(to);
                    fresh.seek_back(to);
                }
                8 if reused.position() > 0 => {
                    let at = next(reused.position() as u64) as usize;
                    let bits = next((reused.position() - at).min(64) as u64) as u32 + 1;
                    let value = next(u64::MAX);
                    reused.patch_bits(at, value, bits);
                    fresh.patch_bits(at, value, bits);
                }
                7 => {
                    let words: Vec<u64> = (0..next(4) + 1).map(|_| next(u64::MAX)).collect();
                    let bits = next(words.len() as u64 * 64 + 1) as usize;
                    reused.write_words(&words, bits);
                    fresh.write_words(&words, bits);
                }
                _ => {
                    let bits = next(65) as u32;
                    let value = next(u64::MAX) ^ (next(u64::MAX) << 32);
                    reused.write_bits(value, bits);
                    fresh.write_bits(value, bits);
                }
            }
            assert_eq!(reused.position(), fresh.position(), "step {step}");
            assert_eq!(reused.is_overflown(), fresh.is_overflown(), "step {step}");
            assert_eq!(reused.words(), fresh.words(), "step {step}");
            assert_eq!(reused.to_bytes(), fresh.to_bytes(), "step {step}");
        }
    }

    #[test]
    fn append_to_keeps_what_the_vector_held_and_adds_whole_bytes() {
        for bits in [0usize, 1, 7, 8, 63, 64, 65, 200] {
            let mut w = BitWriter::with_capacity_bits(256);
            for k in 0..bits {
                w.write_bool(k % 3 == 0);
            }
            let mut out = vec![0xEE, 0xFF];
            w.append_to(&mut out);
            assert_eq!(out.len(), 2 + bits.div_ceil(8), "{bits} bits");
            assert_eq!(out[..2], [0xEE, 0xFF]);
            assert_eq!(out[2..], w.to_bytes()[..]);
            let mut r = BitReader::new(&out[2..]);
            for k in 0..bits {
                assert_eq!(r.read_bool(), k % 3 == 0, "bit {k} of {bits}");
            }
        }
    }

    #[test]
    fn write_overflow_sets_flag_and_writes_nothing() {
        let mut w = BitWriter::with_capacity_bits(10);
        w.write_bits(0x3FF, 10);
        w.write_bits(1, 1);
        assert!(w.is_overflown());
        assert_eq!(w.position(), 10);
        w.write_bits(1, 1);
        assert_eq!(w.position(), 10);
        assert!(w.finish().is_err());
    }

    #[test]
    fn read_past_end_yields_zero_and_error() {
        let data = [0xFFu8];
        let mut r = BitReader::new(&data);
        assert_eq!(r.read_bits(4), 0xF);
        assert_eq!(r.read_bits(8), 0);
        assert!(r.is_overflown());
        assert_eq!(r.read_bits(1), 0);
        assert!(r.check().is_err());
    }

    #[test]
    fn substream_commit_and_rollback() {
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bits(0b101, 3);
        let m = w.begin_substream(8);
        w.write_bits(0xFF, 8);
        assert!(w.commit_substream(m).is_ok());
        let m = w.begin_substream(4);
        w.write_bits(0xFF, 8); // does not fit the substream
        assert!(w.commit_substream(m).is_err());
        assert!(!w.is_overflown());
        assert_eq!(w.position(), 11);
        assert_eq!(w.capacity(), 64);
        w.write_bits(0, 5);
        let bytes = w.finish().unwrap();
        assert_eq!(bytes, vec![0b1111_1101, 0b0000_0111]);
    }

    #[test]
    fn rollback_clears_discarded_bits() {
        let mut w = BitWriter::with_capacity_bits(128);
        let m = w.mark();
        w.write_bits(u64::MAX, 64);
        w.write_bits(u64::MAX, 10);
        w.rollback(m);
        w.write_bits(0, 64);
        w.write_bits(0, 6);
        assert!(w.finish().unwrap().iter().all(|&b| b == 0));
    }

    #[test]
    fn patch_overwrites_prefix() {
        let mut w = BitWriter::with_capacity_bits(64);
        let at = w.position();
        w.write_bits(0, 12);
        w.write_bits(0x55, 8);
        w.patch_bits(at, 0xABC, 12);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(12), 0xABC);
        assert_eq!(r.read_bits(8), 0x55);
    }

    #[test]
    fn bytes_fast_and_slow_path() {
        let payload: Vec<u8> = (0..37).collect();
        for lead in [0u32, 3] {
            let mut w = BitWriter::with_capacity_bytes(64);
            w.write_bits(0b101, lead);
            w.write_bytes(&payload);
            let bytes = w.finish().unwrap();
            let mut r = BitReader::new(&bytes);
            r.read_bits(lead);
            let mut out = vec![0u8; payload.len()];
            r.read_bytes(&mut out);
            assert_eq!(out, payload);
            assert!(r.check().is_ok());
        }
    }

    #[test]
    fn reader_substream_is_bounded() {
        let data = [0xFFu8, 0xFF];
        let mut r = BitReader::new(&data);
        let mut sub = r.substream(5);
        assert_eq!(sub.read_bits(5), 0x1F);
        assert_eq!(sub.read_bits(1), 0);
        assert!(sub.is_overflown());
        assert_eq!(r.position(), 5);
        assert_eq!(r.read_bits(11), 0x7FF);
        let sub = r.substream(1);
        assert_eq!(sub.bits_left(), 0);
        assert!(r.is_overflown());
    }

    #[test]
    fn helpers() {
        assert_eq!(bits_needed(0), 1);
        assert_eq!(bits_needed(255), 8);
        assert_eq!(bits_needed(256), 9);
        assert_eq!(bits_for_count(1), 0);
        assert_eq!(bits_for_count(2), 1);
        assert_eq!(bits_for_count(8), 3);
        assert_eq!(bits_for_count(9), 4);
        assert_eq!(sign_extend(0xFF, 8), -1);
        assert_eq!(sign_extend(0x7F, 8), 127);
        assert_eq!(sign_extend(0x80, 8), -128);
    }
}
