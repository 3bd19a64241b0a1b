//! The serde fallback: [`SerdeSerializer`] sends any `serde` type as its postcard
//! encoding, a byte string capped by [`SerdeConfig::max_bytes`] (the role of Iris's
//! `LastResortNetSerializer`). Behind the `serde` feature, on by default.

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::containers::{check_max_len, len_prefix_bits, read_len, write_len};
use super::string::{MAX_STRING_LEN, read_byte_payload};
use super::{NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher};
use crate::bits::{BitReader, BitWriter};

/// Configuration of [`SerdeSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_bytes` | 1024 | most bytes of the postcard encoding (`1..=`[`MAX_STRING_LEN`]) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SerdeConfig {
    /// Most bytes of the postcard encoding.
    pub max_bytes: u32,
}

impl SerdeConfig {
    /// 1024 bytes.
    pub const DEFAULT: SerdeConfig = SerdeConfig { max_bytes: 1024 };
}

impl Default for SerdeConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for SerdeConfig {
    const DEFAULT: Self = SerdeConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_bytes);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_bytes", self.max_bytes, MAX_STRING_LEN)
    }
}

/// A last-resort serializer for any `serde` type: the value's
/// [postcard](https://docs.rs/postcard) encoding as a byte string.
///
/// The quantized form is the encoding itself (so change detection compares bytes and
/// each change is encoded once, not once per connection). On the wire:
/// `[1]` for an empty encoding, else `[0][len - 1: bits_for_count(max_bytes)][bytes]`.
/// The receiver rejects a length over `max_bytes` before allocating, and bytes that do
/// not decode as a `T` (or leave bytes over).
///
/// If a value's encoding exceeds `max_bytes`, quantize logs a warning and sends
/// `T::default()` instead, so the cap is a hard wire limit. Types must encode
/// deterministically (use `BTreeMap`, not `HashMap`) or equal values will look changed.
/// Prefer a real serializer: this one spends whole bytes per field.
///
/// The fingerprint covers the name, version and `max_bytes` but not `T` (Rust offers no
/// stable type name), so changing a member's serde type does not change the protocol id;
/// a mismatched peer sees decode errors, never a panic.
///
/// ```
/// use replicate::serialize::*;
/// #[derive(serde::Serialize, serde::Deserialize, Clone, PartialEq, Default, Debug)]
/// struct Loadout { primary: String, ammo: Vec<u16> }
/// let l = Loadout { primary: "rifle".into(), ammo: vec![30, 90] };
/// let (bits, back) = roundtrip::<SerdeSerializer<Loadout>>(&SerdeConfig::DEFAULT, &l).unwrap();
/// assert_eq!(back, l);
/// assert_eq!(bits, 1 + 10 + 8 * 9); // 1 + 5 bytes of string, 1 + 1 + 1 of Vec<u16>
/// ```
pub struct SerdeSerializer<T>(PhantomData<fn() -> T>);

impl<T> SerdeSerializer<T>
where
    T: Serialize + DeserializeOwned + Default,
{
    fn decode(bytes: &[u8]) -> Option<T> {
        match postcard::take_from_bytes::<T>(bytes) {
            Ok((v, [])) => Some(v),
            _ => None,
        }
    }
}

impl<T> NetSerializer for SerdeSerializer<T>
where
    T: Serialize
        + DeserializeOwned
        + Clone
        + PartialEq
        + Default
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    type Source = T;
    type Quantized = Vec<u8>;
    type Config = SerdeConfig;
    const NAME: &'static str = "Serde";
    const HAS_DYNAMIC_STATE: bool = true;

    fn quantize(config: &SerdeConfig, source: &T) -> Vec<u8> {
        let max = config.max_bytes as usize;
        match postcard::to_allocvec(source) {
            Ok(bytes) if bytes.len() <= max => bytes,
            result => {
                tracing::warn!(
                    target: "replicate::serialize",
                    ty = std::any::type_name::<T>(),
                    max_bytes = max,
                    encoded = ?result.as_ref().map(Vec::len),
                    "serde value does not fit max_bytes; sending its default instead"
                );
                postcard::to_allocvec(&T::default())
                    .ok()
                    .filter(|b| b.len() <= max)
                    .unwrap_or_default()
            }
        }
    }
    fn dequantize(_: &SerdeConfig, q: &Vec<u8>) -> T {
        Self::decode(q).unwrap_or_default()
    }
    fn serialize(config: &SerdeConfig, q: &Vec<u8>, w: &mut BitWriter) {
        // Quantize never produces more than max_bytes; anything longer is not a valid
        // encoding to truncate, so it is replaced by the empty encoding.
        let q: &[u8] = if q.len() <= config.max_bytes as usize {
            q
        } else {
            &[]
        };
        write_len(w, q.len(), config.max_bytes);
        w.write_bytes(q);
    }
    fn deserialize(config: &SerdeConfig, r: &mut BitReader) -> Result<Vec<u8>> {
        let len = read_len(r, config.max_bytes, "serde encoding length")?;
        let bytes = read_byte_payload(r, len)?;
        if Self::decode(&bytes).is_none() && !bytes.is_empty() {
            return Err(SerializeError::invalid(
                Self::NAME,
                "bytes do not decode as the expected type",
            ));
        }
        Ok(bytes)
    }
    fn validate(config: &SerdeConfig, q: &Vec<u8>) -> Result<()> {
        if q.len() > config.max_bytes as usize {
            return Err(SerializeError::TooLong {
                what: "serde encoding length",
                len: q.len() as u64,
                max: config.max_bytes as u64,
            });
        }
        Ok(())
    }
    fn max_bits(config: &SerdeConfig) -> Option<u32> {
        len_prefix_bits(config.max_bytes).checked_add(config.max_bytes.checked_mul(8)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::roundtrip;

    #[derive(serde::Serialize, serde::Deserialize, Clone, PartialEq, Default, Debug)]
    struct Big {
        data: Vec<u8>,
    }

    #[test]
    fn serde_oversize_sends_default() {
        let c = SerdeConfig { max_bytes: 8 };
        let (_, back) = roundtrip::<SerdeSerializer<Big>>(&c, &Big { data: vec![1; 100] }).unwrap();
        assert_eq!(back, Big::default());
        let (_, back) = roundtrip::<SerdeSerializer<Big>>(&c, &Big { data: vec![1; 3] }).unwrap();
        assert_eq!(back.data, vec![1; 3]);
    }

    #[test]
    fn serde_rejects_garbage_and_trailing_bytes() {
        let c = SerdeConfig::DEFAULT;
        // Big { data: len 5 } but only 2 bytes follow.
        let mut w = BitWriter::with_capacity_bits(128);
        write_len(&mut w, 3, c.max_bytes);
        w.write_bytes(&[5, 1, 2]);
        let bytes = w.finish().unwrap();
        assert!(SerdeSerializer::<Big>::deserialize(&c, &mut BitReader::new(&bytes)).is_err());
        // A valid encoding followed by an extra byte.
        let mut w = BitWriter::with_capacity_bits(128);
        write_len(&mut w, 3, c.max_bytes);
        w.write_bytes(&[1, 7, 0]);
        let bytes = w.finish().unwrap();
        assert!(SerdeSerializer::<Big>::deserialize(&c, &mut BitReader::new(&bytes)).is_err());
    }
}
