//! Splitting a [`NetBlob`] into parts (Iris's `PartialNetBlob`).
//!
//! Wire form of one part:
//!
//! ```text
//! [part_index: 16]                      0-based
//! [part_count - 1: 16]                  only when part_index == 0
//! [payload_bits: 16]                    1..=max_part_bits
//! [payload]
//! ```
//!
//! Only the first part carries the part count; the assembler learns it there.

use super::{BlobError, NetBlob};
use crate::bits::{BitReader, BitWriter};

/// Limits on splitting (sender) and reassembly (receiver); both ends must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitConfig {
    /// Most payload bits per part (default 1024, at most 65535).
    pub max_part_bits: u32,
    /// Most parts per blob (default 8192, at most 65536).
    pub max_part_count: u32,
}

impl Default for SplitConfig {
    fn default() -> Self {
        Self {
            max_part_bits: 1024,
            max_part_count: 8192,
        }
    }
}

impl SplitConfig {
    /// The largest blob, in bits, these limits allow.
    pub fn max_blob_bits(&self) -> u64 {
        self.max_part_bits as u64 * self.max_part_count as u64
    }

    fn clamped(&self) -> Self {
        Self {
            max_part_bits: self.max_part_bits.clamp(1, u16::MAX as u32),
            max_part_count: self.max_part_count.clamp(1, 1 << 16),
        }
    }
}

/// One part of a split blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialBlob {
    /// 0-based index.
    pub part_index: u32,
    /// The number of parts; `Some` only in the first part.
    pub part_count: Option<u32>,
    /// This part's bits.
    pub payload: NetBlob,
}

impl PartialBlob {
    /// Whether this is the first part.
    pub fn is_first_part(&self) -> bool {
        self.part_index == 0
    }

    /// Bits this part takes on the wire.
    pub fn wire_bits(&self) -> usize {
        16 + if self.part_index == 0 { 16 } else { 0 } + 16 + self.payload.bit_len()
    }

    /// Writes the part.
    pub fn write(&self, w: &mut BitWriter) {
        w.write_bits(self.part_index as u64, 16);
        if self.part_index == 0 {
            w.write_bits(self.part_count.unwrap_or(1).saturating_sub(1) as u64, 16);
        }
        w.write_bits(self.payload.bit_len() as u64, 16);
        self.payload.write_to(w);
    }

    /// Reads a part, rejecting payloads over `config.max_part_bits` and counts over
    /// `config.max_part_count` before allocating.
    pub fn read(r: &mut BitReader, config: &SplitConfig) -> Result<Self, BlobError> {
        let config = config.clamped();
        let part_index = r.read_bits(16) as u32;
        let part_count = if part_index == 0 {
            Some(r.read_bits(16) as u32 + 1)
        } else {
            None
        };
        let bits = r.read_bits(16) as u32;
        r.check().map_err(|_| BlobError::Truncated)?;
        if let Some(count) = part_count {
            if count > config.max_part_count {
                return Err(BlobError::TooLarge {
                    what: "part count",
                    value: count as u64,
                    max: config.max_part_count as u64,
                });
            }
        }
        if part_index >= config.max_part_count {
            return Err(BlobError::TooLarge {
                what: "part index",
                value: part_index as u64,
                max: config.max_part_count as u64 - 1,
            });
        }
        if bits == 0 || bits > config.max_part_bits {
            return Err(BlobError::TooLarge {
                what: "part payload bits",
                value: bits as u64,
                max: config.max_part_bits as u64,
            });
        }
        let payload = NetBlob::read_from(r, bits as usize)?;
        Ok(Self {
            part_index,
            part_count,
            payload,
        })
    }
}

/// Splits `blob` into parts of at most `config.max_part_bits` bits (the last carries
/// the remainder). Fails when more than `config.max_part_count` parts would be needed.
///
/// ```
/// use replicate::internals::blob::{NetBlob, SplitConfig, split_blob};
/// let blob = NetBlob::from_bytes(vec![7u8; 300]); // 2400 bits
/// let parts = split_blob(&blob, &SplitConfig::default()).unwrap();
/// assert_eq!(parts.len(), 3);
/// assert_eq!(parts[0].part_count, Some(3));
/// assert_eq!(parts[2].payload.bit_len(), 2400 - 2048);
/// ```
pub fn split_blob(blob: &NetBlob, config: &SplitConfig) -> Result<Vec<PartialBlob>, BlobError> {
    let config = config.clamped();
    let part_bits = config.max_part_bits as usize;
    let count = blob.bit_len().div_ceil(part_bits).max(1);
    if count > config.max_part_count as usize {
        return Err(BlobError::TooLarge {
            what: "blob size in parts",
            value: count as u64,
            max: config.max_part_count as u64,
        });
    }
    let mut r = blob.reader();
    let mut parts = Vec::with_capacity(count);
    for index in 0..count {
        let bits = (blob.bit_len() - index * part_bits).min(part_bits).max(1);
        let payload = if blob.bit_len() == 0 {
            NetBlob::from_bits(vec![0], 1)
        } else {
            NetBlob::read_from(&mut r, bits)?
        };
        parts.push(PartialBlob {
            part_index: index as u32,
            part_count: (index == 0).then_some(count as u32),
            payload,
        });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_wire_roundtrip() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let blob = NetBlob::from_bits(bytes, 7999);
        let config = SplitConfig {
            max_part_bits: 1024,
            max_part_count: 16,
        };
        let parts = split_blob(&blob, &config).unwrap();
        assert_eq!(parts.len(), 8);
        assert!(parts[1..].iter().all(|p| p.part_count.is_none()));
        assert_eq!(parts[7].payload.bit_len(), 7999 - 7 * 1024);
        let mut w = BitWriter::with_capacity_bits(20_000);
        for p in &parts {
            p.write(&mut w);
        }
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        for p in &parts {
            assert_eq!(&PartialBlob::read(&mut r, &config).unwrap(), p);
        }
    }

    #[test]
    fn too_many_parts() {
        let blob = NetBlob::from_bytes(vec![0; 1000]);
        let config = SplitConfig {
            max_part_bits: 64,
            max_part_count: 10,
        };
        assert!(matches!(
            split_blob(&blob, &config),
            Err(BlobError::TooLarge { .. })
        ));
    }

    #[test]
    fn oversized_part_rejected_before_reading() {
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bits(1, 16);
        w.write_bits(5000, 16);
        let bytes = w.finish().unwrap();
        let config = SplitConfig {
            max_part_bits: 1024,
            max_part_count: 16,
        };
        assert!(matches!(
            PartialBlob::read(&mut BitReader::new(&bytes), &config),
            Err(BlobError::TooLarge {
                what: "part payload bits",
                ..
            })
        ));
    }
}
