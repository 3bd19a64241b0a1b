//! Odds and ends: the [`Guid`] type and its serializer (Iris's `GuidNetSerializer`),
//! raw byte strings ([`BytesSerializer`]).
//!
//! This module owns those two wire formats. Byte strings (and the serde fallback of
//! [`super::fallback`]) use the shared length prefix of [`super::containers`].

use super::containers::{check_max_len, len_prefix_bits, read_len, write_len};
use super::string::{MAX_STRING_LEN, read_byte_payload};
use super::{
    NetDefault, NetSerializer, NetSerializerConfig, NoConfig, Result, SerializeError, StableHasher,
};
use crate::bits::{BitReader, BitWriter};

/// A 128-bit globally unique identifier (16 bytes, compared and ordered as bytes).
///
/// ```
/// use replicate::serialize::Guid;
/// let g = Guid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
/// assert_eq!(g.as_u128(), 0x0123_4567_89ab_cdef_0011_2233_4455_6677);
/// assert_eq!(g.to_string(), "01234567-89ab-cdef-0011-223344556677");
/// assert!(Guid::NIL.is_nil());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// The all-zero GUID.
    pub const NIL: Guid = Guid([0; 16]);

    /// From a `u128` (big-endian bytes, so the hex form reads the same).
    pub const fn from_u128(v: u128) -> Self {
        Guid(v.to_be_bytes())
    }

    /// As a `u128` (big-endian bytes).
    pub const fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    /// Whether all bytes are zero.
    pub fn is_nil(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl std::fmt::Display for Guid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// [`Guid`]: `[1]` for the nil GUID (1 bit), else `[0]` and the 16 bytes in order
/// (129 bits). Delta: the default (`[0]` unchanged, else `[1]` and the full value).
///
/// ```
/// use replicate::serialize::*;
/// assert_eq!(roundtrip::<GuidSerializer>(&NoConfig, &Guid::NIL).unwrap().0, 1);
/// assert_eq!(roundtrip::<GuidSerializer>(&NoConfig, &Guid::from_u128(7)).unwrap().0, 129);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct GuidSerializer;

impl NetSerializer for GuidSerializer {
    type Source = Guid;
    type Quantized = Guid;
    type Config = NoConfig;
    const NAME: &'static str = "Guid";

    fn quantize(_: &NoConfig, source: &Guid) -> Guid {
        *source
    }
    fn dequantize(_: &NoConfig, q: &Guid) -> Guid {
        *q
    }
    fn serialize(_: &NoConfig, q: &Guid, w: &mut BitWriter) {
        if !w.write_bool(q.is_nil()) {
            w.write_bytes(&q.0);
        }
    }
    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<Guid> {
        if r.read_bool() {
            r.check()?;
            return Ok(Guid::NIL);
        }
        let mut bytes = [0u8; 16];
        r.read_bytes(&mut bytes);
        r.check()?;
        Ok(Guid(bytes))
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(129)
    }
}

impl NetDefault for Guid {
    type Serializer = GuidSerializer;
}

/// Configuration of [`BytesSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_len` | 1024 | most bytes (`1..=`[`MAX_STRING_LEN`]) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BytesConfig {
    /// Most bytes.
    pub max_len: u32,
}

impl BytesConfig {
    /// 1024 bytes.
    pub const DEFAULT: BytesConfig = BytesConfig { max_len: 1024 };
}

impl Default for BytesConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for BytesConfig {
    const DEFAULT: Self = BytesConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_len);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_len", self.max_len, MAX_STRING_LEN)
    }
}

/// A byte string `Vec<u8>`: `[1]` when empty, else `[0][len - 1: bits_for_count(max_len)]`
/// and the bytes. Longer sources are truncated; longer received lengths (or lengths the
/// remaining bits cannot hold) are rejected before allocating. Delta: the default.
///
/// `Vec<u8>` fields get [`VecSerializer<U8Serializer>`](super::VecSerializer) by default
/// (the same bits); name this serializer for a separate `max_len` default and a
/// byte-copy fast path.
///
/// ```
/// use replicate::serialize::*;
/// let (bits, b) = roundtrip::<BytesSerializer>(&BytesConfig::DEFAULT, &vec![1, 2, 3]).unwrap();
/// assert_eq!((bits, b), (1 + 10 + 24, vec![1, 2, 3]));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSerializer;

impl NetSerializer for BytesSerializer {
    type Source = Vec<u8>;
    type Quantized = Vec<u8>;
    type Config = BytesConfig;
    const NAME: &'static str = "Bytes";
    const HAS_DYNAMIC_STATE: bool = true;

    fn quantize(config: &BytesConfig, source: &Vec<u8>) -> Vec<u8> {
        source[..source.len().min(config.max_len as usize)].to_vec()
    }
    fn dequantize(_: &BytesConfig, q: &Vec<u8>) -> Vec<u8> {
        q.clone()
    }
    fn serialize(config: &BytesConfig, q: &Vec<u8>, w: &mut BitWriter) {
        let q = &q[..q.len().min(config.max_len as usize)];
        write_len(w, q.len(), config.max_len);
        w.write_bytes(q);
    }
    fn deserialize(config: &BytesConfig, r: &mut BitReader) -> Result<Vec<u8>> {
        let len = read_len(r, config.max_len, "byte string length")?;
        read_byte_payload(r, len)
    }
    fn validate(config: &BytesConfig, q: &Vec<u8>) -> Result<()> {
        if q.len() > config.max_len as usize {
            return Err(SerializeError::TooLong {
                what: "byte string length",
                len: q.len() as u64,
                max: config.max_len as u64,
            });
        }
        Ok(())
    }
    fn max_bits(config: &BytesConfig) -> Option<u32> {
        len_prefix_bits(config.max_len).checked_add(config.max_len.checked_mul(8)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::roundtrip;

    #[test]
    fn guid_wire_bytes_in_order() {
        let g = Guid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let mut w = BitWriter::with_capacity_bits(256);
        GuidSerializer::serialize(&NoConfig, &g, &mut w);
        assert_eq!(w.position(), 129);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        assert!(!r.read_bool());
        assert_eq!(r.read_bits(8), 0x01);
        assert_eq!(r.read_bits(8), 0x02);
    }

    #[test]
    fn bytes_cap() {
        let c = BytesConfig { max_len: 4 };
        let (bits, b) = roundtrip::<BytesSerializer>(&c, &vec![9; 10]).unwrap();
        assert_eq!((bits, b), (1 + 2 + 32, vec![9; 4]));
    }
}
