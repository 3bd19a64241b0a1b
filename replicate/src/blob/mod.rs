//! Blobs: opaque runs of bits that travel outside object state — attachments (RPCs and
//! messages) and the parts of huge objects.
//!
//! - [`NetBlob`]: a payload of any bit length.
//! - [`partial`]: splitting a blob into [`PartialBlob`]s of at most `max_part_bits`
//!   bits (only the first part carries the part count), and the wire form of a part.
//! - [`assembler`]: the receiving side, accepting parts in order under a memory cap.
//! - [`channel`]: reliable-ordered, reliable-unordered and unreliable message channels
//!   with per-packet records, resend on loss and exactly-once delivery.
//!
//! This layer uses [`crate::bits`] only; it does not know what a blob contains.

pub mod assembler;
pub mod channel;
pub mod partial;

pub use assembler::{BlobAssembler, PartAccepted};
pub use channel::{
    ChannelConfig, ChannelError, ChannelReceiver, ChannelRecord, ChannelSender, DeliveryMode,
};
pub use partial::{PartialBlob, SplitConfig, split_blob};

use crate::bits::{BitReader, BitWriter};
use thiserror::Error;

/// A run of bits with an exact length.
///
/// ```
/// use replicate::bits::BitWriter;
/// use replicate::internals::blob::NetBlob;
/// let mut w = BitWriter::with_capacity_bits(64);
/// w.write_bits(0b1011, 4);
/// let blob = NetBlob::from_writer(&w);
/// assert_eq!(blob.bit_len(), 4);
/// assert_eq!(blob.reader().read_bits(4), 0b1011);
/// ```
#[derive(Clone, PartialEq, Eq, Default)]
pub struct NetBlob {
    bytes: Vec<u8>,
    bit_len: usize,
}

impl std::fmt::Debug for NetBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NetBlob({} bits)", self.bit_len)
    }
}

impl NetBlob {
    /// A blob of the bits written so far by `w`.
    pub fn from_writer(w: &BitWriter) -> Self {
        Self {
            bytes: w.to_bytes(),
            bit_len: w.position(),
        }
    }

    /// A blob of whole bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        let bit_len = bytes.len() * 8;
        Self { bytes, bit_len }
    }

    /// A blob of the first `bit_len` bits of `bytes` (clamped to their length). Bits
    /// past `bit_len` in the last byte are cleared so equal blobs compare equal.
    pub fn from_bits(mut bytes: Vec<u8>, bit_len: usize) -> Self {
        let bit_len = bit_len.min(bytes.len() * 8);
        bytes.truncate(bit_len.div_ceil(8));
        if bit_len % 8 != 0 {
            if let Some(last) = bytes.last_mut() {
                *last &= (1u8 << (bit_len % 8)) - 1;
            }
        }
        Self { bytes, bit_len }
    }

    /// Length in bits.
    pub fn bit_len(&self) -> usize {
        self.bit_len
    }

    /// The bytes (the last one zero-padded).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A reader over exactly the blob's bits.
    pub fn reader(&self) -> BitReader<'_> {
        BitReader::with_bit_len(&self.bytes, self.bit_len)
    }

    /// Appends the blob's bits to `w`.
    pub fn write_to(&self, w: &mut BitWriter) {
        let mut r = self.reader();
        let mut left = self.bit_len;
        while left > 0 && !w.is_overflown() {
            let n = left.min(64) as u32;
            w.write_bits(r.read_bits(n), n);
            left -= n as usize;
        }
    }

    /// Reads `bit_len` bits from `r` into a new blob. The caller must have checked
    /// `bit_len` against its cap; on a short read the reader's error flag is set and an
    /// error returned.
    pub fn read_from(r: &mut BitReader, bit_len: usize) -> Result<Self, BlobError> {
        if bit_len > r.bits_left() {
            r.set_overflow(bit_len);
            return Err(BlobError::Truncated);
        }
        let mut w = BitWriter::with_capacity_bits(bit_len);
        let mut left = bit_len;
        while left > 0 {
            let n = left.min(64) as u32;
            w.write_bits(r.read_bits(n), n);
            left -= n as usize;
        }
        Ok(Self::from_writer(&w))
    }
}

/// Errors of the blob layer; all come from received data or caps and never panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BlobError {
    /// The data ended early.
    #[error("blob data truncated")]
    Truncated,
    /// A size is above its configured cap.
    #[error("{what} is {value}, above the configured maximum of {max}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The value.
        value: u64,
        /// The cap.
        max: u64,
    },
    /// A part arrived out of sequence or contradicts the first part.
    #[error("unexpected part: {0}")]
    BadPart(&'static str),
}

/// Writes a length as `[bits(len) - 1: 5][len]`, so lengths up to 2^32 - 1 fit.
pub(crate) fn write_len(w: &mut BitWriter, len: u64) {
    let n = crate::bits::bits_needed(len).min(32);
    w.write_bits((n - 1) as u64, 5);
    w.write_bits(len, n);
}

/// Reads a length written by [`write_len`].
pub(crate) fn read_len(r: &mut BitReader) -> u64 {
    let n = r.read_bits(5) as u32 + 1;
    r.read_bits(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_roundtrip_through_writer() {
        let mut w = BitWriter::with_capacity_bits(1000);
        for i in 0..100u64 {
            w.write_bits(i, 7);
        }
        let blob = NetBlob::from_writer(&w);
        assert_eq!(blob.bit_len(), 700);
        let mut out = BitWriter::with_capacity_bits(1000);
        out.write_bits(1, 3);
        blob.write_to(&mut out);
        let bytes = out.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        r.read_bits(3);
        let back = NetBlob::read_from(&mut r, 700).unwrap();
        assert_eq!(back, blob);
        assert!(NetBlob::read_from(&mut r, 64).is_err());
    }

    #[test]
    fn from_bits_masks_tail() {
        assert_eq!(
            NetBlob::from_bits(vec![0xFF, 0xFF], 9),
            NetBlob::from_bits(vec![0xFF, 0x01], 9)
        );
        assert_eq!(NetBlob::from_bits(vec![0xFF], 100).bit_len(), 8);
    }
}
