//! Strings: [`StringSerializer`] (Iris's `FString` serializer) and [`NameSerializer`]
//! (Iris's `FName`: well-known names as a small index, others as a string).
//!
//! This module owns the string and name wire formats and their receive-side checks
//! (length cap before allocation, UTF-8 validity). The length prefix is the shared one of
//! [`super::containers`].
//!
//! # `String`
//!
//! | value | bits |
//! |---|---|
//! | `""` | `[1]` (1 bit) |
//! | `len` bytes | `[0][len - 1: bits_for_count(max_len)][len bytes of UTF-8]` |
//!
//! Strings are always sent as UTF-8, so Iris's "is encoded" flag is not needed.
//! The sender truncates to at most `max_len` bytes at a `char` boundary; the receiver
//! rejects a longer length, or a length the remaining bits cannot hold, *before*
//! allocating, and rejects invalid UTF-8.
//!
//! ```
//! use replicate::serialize::*;
//! assert_eq!(roundtrip::<StringSerializer>(&StringConfig::DEFAULT, &String::new()).unwrap().0, 1);
//! // "Hello世界" is 11 UTF-8 bytes: 1 + 10 + 88 bits.
//! let (bits, s) = roundtrip::<StringSerializer>(&StringConfig::DEFAULT, &"Hello世界".to_string()).unwrap();
//! assert_eq!((bits, s.as_str()), (99, "Hello世界"));
//! ```

use super::containers::{check_max_len, len_prefix_bits, read_len, write_len};
use super::{NetDefault, NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher};
use crate::bits::{BitReader, BitWriter, bits_for_count};

/// The largest `max_len` a string or byte-string config may set (1 MiB).
pub const MAX_STRING_LEN: u32 = 1 << 20;

/// Configuration of [`StringSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_len` | 1024 | most UTF-8 bytes (`1..=`[`MAX_STRING_LEN`]) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StringConfig {
    /// Most UTF-8 bytes.
    pub max_len: u32,
}

impl StringConfig {
    /// 1024 bytes.
    pub const DEFAULT: StringConfig = StringConfig { max_len: 1024 };
}

impl Default for StringConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for StringConfig {
    const DEFAULT: Self = StringConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_len);
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_len", self.max_len, MAX_STRING_LEN)
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a `char` boundary.
fn truncate_to(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn write_string(s: &str, max_len: u32, w: &mut BitWriter) {
    let s = truncate_to(s, max_len as usize);
    write_len(w, s.len(), max_len);
    w.write_bytes(s.as_bytes());
}

/// Reads `len` raw bytes after checking the reader holds them, so a forged length never
/// allocates more than the received data.
pub(crate) fn read_byte_payload(r: &mut BitReader, len: usize) -> Result<Vec<u8>> {
    if len.saturating_mul(8) > r.bits_left() {
        r.set_overflow(len.saturating_mul(8));
        r.check()?;
    }
    let mut bytes = vec![0u8; len];
    r.read_bytes(&mut bytes);
    r.check()?;
    Ok(bytes)
}

fn read_string(max_len: u32, r: &mut BitReader, serializer: &'static str) -> Result<String> {
    let len = read_len(r, max_len, "string length")?;
    if len == 0 {
        return Ok(String::new());
    }
    let bytes = read_byte_payload(r, len)?;
    String::from_utf8(bytes).map_err(|_| SerializeError::invalid(serializer, "invalid UTF-8"))
}

/// `String` as length-prefixed UTF-8; see the [module docs](self) for the encoding.
/// Delta: the default (`[0]` unchanged, else `[1]` and the full string).
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSerializer;

impl NetSerializer for StringSerializer {
    type Source = String;
    type Quantized = String;
    type Config = StringConfig;
    const NAME: &'static str = "String";
    const HAS_DYNAMIC_STATE: bool = true;

    fn quantize(config: &StringConfig, source: &String) -> String {
        truncate_to(source, config.max_len as usize).to_owned()
    }
    fn dequantize(_: &StringConfig, q: &String) -> String {
        q.clone()
    }
    fn serialize(config: &StringConfig, q: &String, w: &mut BitWriter) {
        write_string(q, config.max_len, w);
    }
    fn deserialize(config: &StringConfig, r: &mut BitReader) -> Result<String> {
        read_string(config.max_len, r, Self::NAME)
    }
    fn validate(config: &StringConfig, q: &String) -> Result<()> {
        if q.len() > config.max_len as usize {
            return Err(SerializeError::TooLong {
                what: "string length",
                len: q.len() as u64,
                max: config.max_len as u64,
            });
        }
        Ok(())
    }
    fn max_bits(config: &StringConfig) -> Option<u32> {
        len_prefix_bits(config.max_len).checked_add(config.max_len.checked_mul(8)?)
    }
}

impl NetDefault for String {
    type Serializer = StringSerializer;
}

/// The built-in table of well-known names used by [`NameConfig::DEFAULT`]: common
/// gameplay states, actions, teams and skeleton sockets. Index order is part of the
/// wire format (the table is fingerprinted into the protocol id).
pub const DEFAULT_NAMES: &[&str] = &[
    "None",
    "Default",
    "Root",
    "Player",
    "Enemy",
    "Ally",
    "Neutral",
    "Npc",
    "Idle",
    "Walk",
    "Run",
    "Sprint",
    "Jump",
    "Fall",
    "Land",
    "Crouch",
    "Prone",
    "Swim",
    "Fly",
    "Attack",
    "Block",
    "Dodge",
    "Reload",
    "Fire",
    "Aim",
    "Hit",
    "Dead",
    "Spawn",
    "Respawn",
    "Interact",
    "Use",
    "Equip",
    "Unequip",
    "Open",
    "Closed",
    "Locked",
    "Active",
    "Inactive",
    "Enabled",
    "Disabled",
    "Start",
    "Stop",
    "Pause",
    "Resume",
    "Ready",
    "Waiting",
    "Loading",
    "Lobby",
    "InGame",
    "GameOver",
    "Victory",
    "Defeat",
    "Draw",
    "Red",
    "Blue",
    "Green",
    "Yellow",
    "Head",
    "Neck",
    "Spine",
    "Pelvis",
    "LeftHand",
    "RightHand",
    "LeftFoot",
    "RightFoot",
    "Weapon",
    "Muzzle",
    "Camera",
];

/// Configuration of [`NameSerializer`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `table` | [`DEFAULT_NAMES`] (68 names, 7-bit index) | well-known names sent as an index; at most 65536 distinct entries |
/// | `max_len` | 256 | most UTF-8 bytes of a name sent as a string (`1..=`[`MAX_STRING_LEN`]) |
///
/// Use your own table with
/// `NameConfig { table: &["Idle", "Walk", "Run"], ..NameConfig::DEFAULT }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameConfig {
    /// The well-known names, sent as their index.
    pub table: &'static [&'static str],
    /// Most bytes of a name not in the table.
    pub max_len: u32,
}

impl NameConfig {
    /// [`DEFAULT_NAMES`], names up to 256 bytes.
    pub const DEFAULT: NameConfig = NameConfig {
        table: DEFAULT_NAMES,
        max_len: 256,
    };

    fn index_bits(&self) -> u32 {
        bits_for_count(self.table.len() as u64)
    }

    fn lookup(&self, name: &str) -> Option<u32> {
        self.table.iter().position(|&n| n == name).map(|i| i as u32)
    }
}

impl Default for NameConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl NetSerializerConfig for NameConfig {
    const DEFAULT: Self = NameConfig::DEFAULT;
    fn fingerprint(&self, hasher: &mut StableHasher) {
        hasher.write_u32(self.max_len);
        hasher.write_u64(self.table.len() as u64);
        for name in self.table {
            hasher.write_str(name);
        }
    }
    fn validate(&self) -> std::result::Result<(), String> {
        check_max_len("max_len", self.max_len, MAX_STRING_LEN)?;
        if self.table.len() > 1 << 16 {
            return Err(format!(
                "the name table has {} entries, at most 65536 are allowed",
                self.table.len()
            ));
        }
        let mut sorted: Vec<&str> = self.table.to_vec();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("the name table lists `{}` twice", w[0]));
        }
        Ok(())
    }
}

/// A quantized name: a table index or the text of a name not in the table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QuantizedName {
    /// Index into [`NameConfig::table`].
    Index(u32),
    /// A name not in the table.
    Text(String),
}

impl Default for QuantizedName {
    fn default() -> Self {
        QuantizedName::Text(String::new())
    }
}

/// A name (`String`) that is usually one of a known set: table names cost
/// `1 + bits_for_count(table.len())` bits (8 bits with the default table), others fall
/// back to a string.
///
/// ```text
/// [0][index: bits_for_count(table.len())]    a name in the table
/// [1][String encoding with max_len]           any other name
/// ```
///
/// Unlike Unreal's `FName`, a name has no separate number suffix (`Enemy_12` is just a
/// string), so Iris's number-encoding fields are not reproduced.
///
/// Lookup is a linear scan of the table on quantize (once per change, not per
/// connection); keep tables to a few hundred entries. A received string that is in the
/// table is canonicalised to its index, and an index past the table is rejected.
/// Delta: the default (`[0]` unchanged, else `[1]` and the full value).
///
/// ```
/// use replicate::serialize::*;
/// let (bits, n) = roundtrip::<NameSerializer>(&NameConfig::DEFAULT, &"Run".to_string()).unwrap();
/// assert_eq!((bits, n.as_str()), (8, "Run"));
/// let (bits, _) = roundtrip::<NameSerializer>(&NameConfig::DEFAULT, &"Boss".to_string()).unwrap();
/// assert_eq!(bits, 1 + 1 + 8 + 32); // [1] + string: [0][len - 1: 8 bits] + 4 bytes
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NameSerializer;

impl NetSerializer for NameSerializer {
    type Source = String;
    type Quantized = QuantizedName;
    type Config = NameConfig;
    const NAME: &'static str = "Name";
    const HAS_DYNAMIC_STATE: bool = true;

    fn quantize(config: &NameConfig, source: &String) -> QuantizedName {
        match config.lookup(source) {
            Some(i) => QuantizedName::Index(i),
            None => QuantizedName::Text(truncate_to(source, config.max_len as usize).to_owned()),
        }
    }
    fn dequantize(config: &NameConfig, q: &QuantizedName) -> String {
        match q {
            QuantizedName::Index(i) => config
                .table
                .get(*i as usize)
                .map(|s| (*s).to_owned())
                .unwrap_or_default(),
            QuantizedName::Text(s) => s.clone(),
        }
    }
    fn serialize(config: &NameConfig, q: &QuantizedName, w: &mut BitWriter) {
        match q {
            QuantizedName::Index(i) if (*i as usize) < config.table.len() => {
                w.write_bool(false);
                w.write_bits(*i as u64, config.index_bits());
            }
            QuantizedName::Index(_) => {
                // Not producible by quantize; send the empty name rather than garbage.
                w.write_bool(true);
                write_string("", config.max_len, w);
            }
            QuantizedName::Text(s) => {
                w.write_bool(true);
                write_string(s, config.max_len, w);
            }
        }
    }
    fn deserialize(config: &NameConfig, r: &mut BitReader) -> Result<QuantizedName> {
        if !r.read_bool() {
            let i = r.read_bits(config.index_bits());
            r.check()?;
            if i >= config.table.len() as u64 {
                return Err(SerializeError::invalid(
                    Self::NAME,
                    "name index past the table",
                ));
            }
            return Ok(QuantizedName::Index(i as u32));
        }
        let s = read_string(config.max_len, r, Self::NAME)?;
        Ok(match config.lookup(&s) {
            Some(i) => QuantizedName::Index(i),
            None => QuantizedName::Text(s),
        })
    }
    fn validate(config: &NameConfig, q: &QuantizedName) -> Result<()> {
        match q {
            QuantizedName::Index(i) if (*i as usize) >= config.table.len() => Err(
                SerializeError::invalid(Self::NAME, "name index past the table"),
            ),
            QuantizedName::Text(s) if s.len() > config.max_len as usize => {
                Err(SerializeError::TooLong {
                    what: "name length",
                    len: s.len() as u64,
                    max: config.max_len as u64,
                })
            }
            _ => Ok(()),
        }
    }
    fn max_bits(config: &NameConfig) -> Option<u32> {
        let text = len_prefix_bits(config.max_len).checked_add(config.max_len.checked_mul(8)?)?;
        Some(1 + text.max(config.index_bits()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::roundtrip;

    #[test]
    fn empty_string_is_one_bit() {
        assert_eq!(
            roundtrip::<StringSerializer>(&StringConfig::DEFAULT, &String::new()).unwrap(),
            (1, String::new())
        );
    }

    #[test]
    fn truncates_on_char_boundary() {
        let c = StringConfig { max_len: 7 };
        // "Hello世" is 8 bytes; 7 would split 世.
        let (_, s) = roundtrip::<StringSerializer>(&c, &"Hello世界".to_string()).unwrap();
        assert_eq!(s, "Hello");
        let (_, s) = roundtrip::<StringSerializer>(&c, &"abcdefghij".to_string()).unwrap();
        assert_eq!(s, "abcdefg");
    }

    #[test]
    fn rejects_long_length_and_bad_utf8() {
        let c = StringConfig { max_len: 1000 };
        // Length 1001 fits the 10-bit field but exceeds max_len.
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bool(false);
        w.write_bits(1000, 10);
        let bytes = w.finish().unwrap();
        assert!(matches!(
            StringSerializer::deserialize(&c, &mut BitReader::new(&bytes)),
            Err(SerializeError::TooLong { len: 1001, .. })
        ));
        // A valid length with fewer bytes than claimed: a bit error, no allocation.
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bool(false);
        w.write_bits(999, 10);
        let bytes = w.finish().unwrap();
        assert!(matches!(
            StringSerializer::deserialize(&c, &mut BitReader::new(&bytes)),
            Err(SerializeError::Bits(_))
        ));
        // Invalid UTF-8.
        let mut w = BitWriter::with_capacity_bits(64);
        write_len(&mut w, 2, 1000);
        w.write_bytes(&[0xC3, 0x28]);
        let bytes = w.finish().unwrap();
        assert!(matches!(
            StringSerializer::deserialize(&c, &mut BitReader::new(&bytes)),
            Err(SerializeError::InvalidValue { .. })
        ));
    }

    #[test]
    fn name_table_and_fallback() {
        let c = NameConfig::DEFAULT;
        assert_eq!(c.index_bits(), 7);
        assert!(NameSerializer::validate_config(&c).is_ok());
        assert_eq!(
            NameSerializer::quantize(&c, &"None".to_string()),
            QuantizedName::Index(0)
        );
        // A table name sent as text comes back as its index.
        let mut w = BitWriter::with_capacity_bits(128);
        w.write_bool(true);
        write_string("Run", c.max_len, &mut w);
        let bytes = w.finish().unwrap();
        let q = NameSerializer::deserialize(&c, &mut BitReader::new(&bytes)).unwrap();
        assert_eq!(q, QuantizedName::Index(10));
        // Index past the table.
        let small = NameConfig {
            table: &["a", "b", "c"],
            ..c
        };
        let mut w = BitWriter::with_capacity_bits(8);
        w.write_bool(false);
        w.write_bits(3, 2);
        let bytes = w.finish().unwrap();
        assert!(NameSerializer::deserialize(&small, &mut BitReader::new(&bytes)).is_err());
        // Duplicates are a config error.
        let dup = NameConfig {
            table: &["a", "b", "a"],
            ..c
        };
        assert!(NameSerializer::validate_config(&dup).is_err());
    }
}
