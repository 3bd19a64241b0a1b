//! The seed's table-driven integer delta encoding (`BitPacking.cpp`).
//!
//! A delta is written as a 2-bit index into a table of bit widths, then the signed
//! difference in that many bits; index 3 escapes to the full value:
//!
//! | index | meaning | 32-bit table `{0, 4, 14}` |
//! |---|---|---|
//! | 0 | unchanged | `[00]`, 2 bits |
//! | 1 | small difference | `[01][4 bits]`, -8..=7 |
//! | 2 | medium difference | `[10][14 bits]`, -8192..=8191 |
//! | 3 | full value | `[11][32 bits]` |
//!
//! Differences wrap modulo `2^bits`, so any pair of values round-trips.

use crate::bits::{BitReader, BitWriter, sign_extend};

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

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Writes `value` relative to `prev`, both `bits` wide (`1..=64`).
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

    fn cost(value: u64, prev: u64, bits: u32) -> usize {
        let mut w = BitWriter::with_capacity_bits(128);
        write_int_delta(&mut w, value, prev, bits);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert_eq!(read_int_delta(&mut r, prev, bits), value);
        w.position()
    }

    #[test]
    fn seed_score_examples() {
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
}
