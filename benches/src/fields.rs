//! The bit-stream workload: `n` fields whose widths cycle through [`WIDTHS`]
//! (1, 7, 13, 32 and 64 bits: a flag, a small enum, a quantized coordinate, an id,
//! a full word), written and read back with replicate's [`BitWriter`]/[`BitReader`]
//! and with `bitvec`.
//!
//! The bitvec side uses the fastest idiomatic code we found (all produce the same
//! LSB-first bits as replicate's writer, checked by the tests below):
//! - [`write_bitvec_extend`][]: `BitVec::extend_from_bitslice(&value.view_bits()[..n])`;
//! - [`write_bitvec_store`][]: grow with `resize`, then `store_le` into the new tail;
//! - [`write_bitvec_presized`][]: `store_le` into a `BitVec` already sized to the total
//!   (no growth, no clearing: it overwrites in place, which favours bitvec, since
//!   replicate's writer zeroes its buffer on `reset`);
//! - reads: `BitSlice::load_le` at a running cursor, over the received bytes
//!   ([`read_bitvec_bytes`]) or over the writer's own `u64` storage ([`read_bitvec_words`]).

use bitvec::prelude::*;
use replicate::bits::{BitReader, BitWriter};

/// The field widths, in the order they repeat.
pub const WIDTHS: [u32; 5] = [1, 7, 13, 32, 64];

/// One field: `value` fits in `bits` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The value (only its low `bits` bits may be set).
    pub value: u64,
    /// The width in bits, `1..=64`.
    pub bits: u32,
}

/// `n` fields with widths cycling through [`WIDTHS`] and random values.
pub fn make_fields(n: usize, seed: u64) -> Vec<Field> {
    let mut rng = crate::Rng::new(seed);
    (0..n)
        .map(|i| {
            let bits = WIDTHS[i % WIDTHS.len()];
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            Field {
                value: rng.next_u64() & mask,
                bits,
            }
        })
        .collect()
}

/// Total width of `fields` in bits.
pub fn total_bits(fields: &[Field]) -> usize {
    fields.iter().map(|f| f.bits as usize).sum()
}

/// Writes `fields` with replicate's writer, after resetting it to `capacity_bits`.
#[inline]
pub fn write_replicate(w: &mut BitWriter, capacity_bits: usize, fields: &[Field]) {
    w.reset(capacity_bits);
    for f in fields {
        w.write_bits(f.value, f.bits);
    }
}

/// Writes `fields` by appending each value's low bits as a bitslice.
#[inline]
pub fn write_bitvec_extend(bv: &mut BitVec<u64, Lsb0>, fields: &[Field]) {
    bv.clear();
    for f in fields {
        bv.extend_from_bitslice(&f.value.view_bits::<Lsb0>()[..f.bits as usize]);
    }
}

/// Writes `fields` by growing the vector and storing each value into the new tail.
#[inline]
pub fn write_bitvec_store<T: BitStore>(bv: &mut BitVec<T, Lsb0>, fields: &[Field]) {
    bv.clear();
    for f in fields {
        let len = bv.len();
        bv.resize(len + f.bits as usize, false);
        bv[len..].store_le(f.value);
    }
}

/// Writes `fields` into a vector already [`total_bits`] long, overwriting in place.
#[inline]
pub fn write_bitvec_presized(bv: &mut BitSlice<u64, Lsb0>, fields: &[Field]) {
    let mut pos = 0;
    for f in fields {
        let end = pos + f.bits as usize;
        bv[pos..end].store_le(f.value);
        pos = end;
    }
}

/// Reads fields of the widths in `fields` with replicate's reader; returns the
/// wrapping sum of the values read (so nothing can be optimized away).
#[inline]
pub fn read_replicate(bytes: &[u8], fields: &[Field]) -> u64 {
    let mut r = BitReader::new(bytes);
    let mut sum = 0u64;
    for f in fields {
        sum = sum.wrapping_add(r.read_bits(f.bits));
    }
    sum
}

/// Reads the same fields with `load_le` over a bitslice of the received bytes.
#[inline]
pub fn read_bitvec_bytes(bits: &BitSlice<u8, Lsb0>, fields: &[Field]) -> u64 {
    read_bitvec(bits, fields)
}

/// Reads the same fields with `load_le` over the writer's `u64` storage.
#[inline]
pub fn read_bitvec_words(bits: &BitSlice<u64, Lsb0>, fields: &[Field]) -> u64 {
    read_bitvec(bits, fields)
}

#[inline]
fn read_bitvec<T: BitStore>(bits: &BitSlice<T, Lsb0>, fields: &[Field]) -> u64 {
    let mut pos = 0;
    let mut sum = 0u64;
    for f in fields {
        let end = pos + f.bits as usize;
        // Bounds-checked like replicate's reader: past the end reads as zero.
        if let Some(slice) = bits.get(pos..end) {
            sum = sum.wrapping_add(slice.load_le::<u64>());
        }
        pos = end;
    }
    sum
}

/// The wire bytes (LSB-first, last byte zero-padded) of a bitvec over any storage.
pub fn bitvec_bytes<T: BitStore>(bits: &BitSlice<T, Lsb0>) -> Vec<u8> {
    bits.chunks(8).map(|byte| byte.load_le::<u8>()).collect()
}

/// The wrapping sum of the field values (what the readers must return).
pub fn checksum(fields: &[Field]) -> u64 {
    fields.iter().fold(0, |sum, f| sum.wrapping_add(f.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_writer_produces_the_same_bits_and_every_reader_reads_them() {
        let fields = make_fields(501, 7);
        let total = total_bits(&fields);
        assert_eq!(total, 100 * 117 + 1);

        let mut w = BitWriter::with_capacity_bits(total);
        write_replicate(&mut w, total, &fields);
        let bytes = w.finish().expect("sized to fit");

        let mut a = BitVec::<u64, Lsb0>::new();
        write_bitvec_extend(&mut a, &fields);
        let mut b = BitVec::<u64, Lsb0>::new();
        write_bitvec_store(&mut b, &fields);
        let mut c = BitVec::<u8, Lsb0>::new();
        write_bitvec_store(&mut c, &fields);
        let mut d = bitvec![u64, Lsb0; 1; total];
        write_bitvec_presized(&mut d, &fields);
        for (name, got) in [
            ("extend", bitvec_bytes(&a)),
            ("store u64", bitvec_bytes(&b)),
            ("store u8", bitvec_bytes(&c)),
            ("presized", bitvec_bytes(&d)),
        ] {
            assert_eq!(got, bytes, "{name}");
        }

        let sum = checksum(&fields);
        assert_ne!(sum, 0);
        assert_eq!(read_replicate(&bytes, &fields), sum);
        assert_eq!(read_bitvec_bytes(bytes.view_bits(), &fields), sum);
        assert_eq!(read_bitvec_words(&a, &fields), sum);
        // Truncated input: both read zeroes past the end instead of panicking.
        let cut = &bytes[..bytes.len() / 2];
        assert_eq!(
            read_replicate(cut, &fields),
            read_bitvec_bytes(cut.view_bits(), &fields)
        );
    }
}
