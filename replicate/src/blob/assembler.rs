//! Reassembling split blobs (Iris's `NetBlobAssembler`).
//!
//! Parts must arrive in order (the reliable ordered channel guarantees it). The first
//! part announces the count; every part but the last must be full (`max_part_bits`);
//! anything else — a wrong index, a missing count, an oversized part, a blob above the
//! memory cap — is an error that resets the assembler. Memory never exceeds
//! `max_part_count * max_part_bits` bits (and the optional tighter `max_blob_bits`).

use super::{BlobError, NetBlob, PartialBlob, SplitConfig};
use crate::bits::BitWriter;

/// What [`BlobAssembler::add_part`] made of a part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartAccepted {
    /// More parts are needed.
    NeedMore,
    /// The last part arrived: the whole blob.
    Complete(NetBlob),
}

/// Accepts the parts of one blob at a time, in order.
///
/// ```
/// use replicate::internals::blob::{BlobAssembler, NetBlob, PartAccepted, SplitConfig, split_blob};
/// let config = SplitConfig::default();
/// let blob = NetBlob::from_bytes((0..=255).collect());
/// let mut asm = BlobAssembler::new(config);
/// let mut out = None;
/// for part in split_blob(&blob, &config).unwrap() {
///     if let PartAccepted::Complete(b) = asm.add_part(part).unwrap() {
///         out = Some(b);
///     }
/// }
/// assert_eq!(out, Some(blob));
/// ```
#[derive(Debug)]
pub struct BlobAssembler {
    config: SplitConfig,
    max_blob_bits: u64,
    writer: Option<BitWriter>,
    next_index: u32,
    expected_count: u32,
}

impl BlobAssembler {
    /// An assembler for blobs split with `config`.
    pub fn new(config: SplitConfig) -> Self {
        Self {
            max_blob_bits: config.max_blob_bits(),
            config,
            writer: None,
            next_index: 0,
            expected_count: 0,
        }
    }

    /// Also caps the blob size below what `config` allows.
    pub fn with_max_blob_bits(mut self, bits: u64) -> Self {
        self.max_blob_bits = bits.min(self.config.max_blob_bits());
        self
    }

    /// Whether a blob is partly assembled.
    pub fn is_assembling(&self) -> bool {
        self.writer.is_some()
    }

    /// The index of the part expected next.
    pub fn next_index(&self) -> u32 {
        self.next_index
    }

    /// Drops any partly assembled blob.
    pub fn reset(&mut self) {
        self.writer = None;
        self.next_index = 0;
        self.expected_count = 0;
    }

    /// Bits currently held.
    pub fn buffered_bits(&self) -> usize {
        self.writer.as_ref().map_or(0, |w| w.position())
    }

    fn fail(&mut self, err: BlobError) -> Result<PartAccepted, BlobError> {
        self.reset();
        Err(err)
    }

    /// Adds the next part. On error the partial blob is dropped.
    pub fn add_part(&mut self, part: PartialBlob) -> Result<PartAccepted, BlobError> {
        if part.part_index != self.next_index {
            return self.fail(BlobError::BadPart("part index out of sequence"));
        }
        let part_bits = self.config.max_part_bits as usize;
        if part.payload.bit_len() == 0 || part.payload.bit_len() > part_bits {
            return self.fail(BlobError::TooLarge {
                what: "part payload bits",
                value: part.payload.bit_len() as u64,
                max: part_bits as u64,
            });
        }
        if part.part_index == 0 {
            let Some(count) = part.part_count else {
                return self.fail(BlobError::BadPart("first part without a part count"));
            };
            if count == 0 || count > self.config.max_part_count {
                return self.fail(BlobError::TooLarge {
                    what: "part count",
                    value: count as u64,
                    max: self.config.max_part_count as u64,
                });
            }
            let capacity = count as u64 * part_bits as u64;
            let lower_bound = (count as u64 - 1) * part_bits as u64 + 1;
            if lower_bound > self.max_blob_bits {
                return self.fail(BlobError::TooLarge {
                    what: "blob bits",
                    value: lower_bound,
                    max: self.max_blob_bits,
                });
            }
            self.expected_count = count;
            self.writer = Some(BitWriter::with_capacity_bits(
                capacity.min(self.max_blob_bits) as usize,
            ));
        } else if part.part_count.is_some() {
            return self.fail(BlobError::BadPart("part count outside the first part"));
        }
        let is_last = part.part_index + 1 == self.expected_count;
        if !is_last && part.payload.bit_len() != part_bits {
            return self.fail(BlobError::BadPart("a part before the last is not full"));
        }
        let Some(writer) = self.writer.as_mut() else {
            return self.fail(BlobError::BadPart("no blob in progress"));
        };
        part.payload.write_to(writer);
        if writer.is_overflown() {
            let value = writer.position() as u64 + part.payload.bit_len() as u64;
            let max = self.max_blob_bits;
            return self.fail(BlobError::TooLarge {
                what: "blob bits",
                value,
                max,
            });
        }
        self.next_index += 1;
        if is_last {
            let blob = self
                .writer
                .take()
                .map(|w| NetBlob::from_writer(&w))
                .unwrap_or_default();
            self.reset();
            return Ok(PartAccepted::Complete(blob));
        }
        Ok(PartAccepted::NeedMore)
    }
}

#[cfg(test)]
mod tests {
    use super::super::split_blob;
    use super::*;

    fn parts(bits: usize, config: &SplitConfig) -> (NetBlob, Vec<PartialBlob>) {
        let bytes: Vec<u8> = (0..bits.div_ceil(8)).map(|i| (i * 31 + 7) as u8).collect();
        let blob = NetBlob::from_bits(bytes, bits);
        let parts = split_blob(&blob, config).unwrap();
        (blob, parts)
    }

    #[test]
    fn half_megabyte_roundtrip() {
        let config = SplitConfig::default();
        let (blob, parts) = parts(500 * 1024 * 8, &config);
        let mut asm = BlobAssembler::new(config);
        let mut done = None;
        for p in parts {
            if let PartAccepted::Complete(b) = asm.add_part(p).unwrap() {
                done = Some(b);
            }
        }
        assert_eq!(done.unwrap(), blob);
        assert!(!asm.is_assembling());
    }

    #[test]
    fn wrong_index_resets() {
        let config = SplitConfig::default();
        let (_, parts) = parts(5000, &config);
        let mut asm = BlobAssembler::new(config);
        asm.add_part(parts[0].clone()).unwrap();
        assert!(asm.add_part(parts[2].clone()).is_err());
        assert!(!asm.is_assembling());
        assert!(asm.add_part(parts[1].clone()).is_err());
    }

    #[test]
    fn memory_cap_enforced() {
        let config = SplitConfig::default();
        let (_, parts) = parts(50_000, &config);
        let mut asm = BlobAssembler::new(config).with_max_blob_bits(10_000);
        assert!(matches!(
            asm.add_part(parts[0].clone()),
            Err(BlobError::TooLarge { .. })
        ));
        assert_eq!(asm.buffered_bits(), 0);
    }

    #[test]
    fn short_middle_part_rejected() {
        let config = SplitConfig {
            max_part_bits: 64,
            max_part_count: 10,
        };
        let mut asm = BlobAssembler::new(config);
        let first = PartialBlob {
            part_index: 0,
            part_count: Some(3),
            payload: NetBlob::from_bits(vec![1], 8),
        };
        assert!(asm.add_part(first).is_err());
    }
}
