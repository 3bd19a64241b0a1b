//! The game-struct workload: a 10-member player state encoded three ways.
//!
//! - **replicate**: quantize ([`quantize`]) then bit-pack with replicate's serializers
//!   ([`serialize`] / [`deserialize`]), the way generated code will;
//! - **postcard** and **bitcode**: `serde` / `bitcode` derives on [`GameStateSerde`], a
//!   mirror of the same struct with full-precision floats (what a game would send
//!   without a replication layer);
//! - for the size table only, the same two on [`GameStateInts`], the *quantized*
//!   values as plain integers, to separate what quantization saves from what bit
//!   packing saves.
//!
//! Quantization (health uses replicate's ranged float serializer; the rest is
//! hand-written on the integer serializers until the vector / quaternion / string
//! serializers land):
//!
//! | member | quantized | wire (replicate) |
//! |---|---|---|
//! | position `Vec3` (m) | 3 × `i32` centimetres | 3 × (zero flag + 24 bits) |
//! | rotation `Quat` | 4 × `i16`, component × 2047 | 4 × 12 bits |
//! | velocity `Vec3` (m/s) | 3 × `i32` cm/s | 3 × (zero flag + 20 bits) |
//! | health `f32` 0..=100 | `RangedF32Serializer` index (step 100/1023) | 10 bits |
//! | ammo `u8` | `u8` | 8 bits |
//! | weapon `u8` 0..16 | `u8` | 4 bits |
//! | score `u32` | `u32` | zero flag + 32 bits |
//! | crouching `bool` | `bool` | 1 bit |
//! | team `u8` 0..4 | `u8` | 2 bits |
//! | name `String` ≤ 31 bytes | UTF-8 bytes | 5-bit length + bytes |

use glam::{Quat, Vec3};
use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::{
    BoolSerializer, FloatRangeConfig, I16Serializer, I32Serializer, IntConfig, NetSerializer,
    RangedF32Serializer, SerializeError, U8Serializer, U32Serializer,
};
use serde::{Deserialize, Serialize};

/// The game-side player state.
#[derive(Debug, Clone, PartialEq)]
pub struct GameState {
    /// World position in metres.
    pub position: Vec3,
    /// Orientation (unit quaternion).
    pub rotation: Quat,
    /// Velocity in metres per second.
    pub velocity: Vec3,
    /// Health, 0 to 100.
    pub health: f32,
    /// Rounds left.
    pub ammo: u8,
    /// Equipped weapon, 0 to 15.
    pub weapon: u8,
    /// Score.
    pub score: u32,
    /// Whether the player crouches.
    pub crouching: bool,
    /// Team, 0 to 3.
    pub team: u8,
    /// Display name (at most 31 bytes are replicated).
    pub name: String,
}

const POSITION: IntConfig = IntConfig { bits: 24 };
const ROTATION: IntConfig = IntConfig { bits: 12 };
const VELOCITY: IntConfig = IntConfig { bits: 20 };
const HEALTH: FloatRangeConfig = FloatRangeConfig::with_bits(0.0, 100.0, 10);
const AMMO: IntConfig = IntConfig::DEFAULT;
const WEAPON: IntConfig = IntConfig { bits: 4 };
const SCORE: IntConfig = IntConfig::DEFAULT;
const TEAM: IntConfig = IntConfig { bits: 2 };
const NAME_LEN: IntConfig = IntConfig { bits: 5 };
/// The longest name replicated, in bytes (what a 5-bit length holds).
pub const MAX_NAME_BYTES: usize = 31;
const ROTATION_SCALE: f32 = 2047.0;

/// The quantized twin of [`GameState`]: what is compared, stored and sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GameStateQ {
    /// Centimetres, each as `I32Serializer`'s quantized 24-bit two's complement.
    pub position: [u32; 3],
    /// Components × 2047, as `I16Serializer`'s quantized 12-bit two's complement.
    pub rotation: [u16; 4],
    /// Centimetres per second, 20-bit two's complement.
    pub velocity: [u32; 3],
    /// Index of the 1024-step range `0..=100`.
    pub health: u32,
    /// Rounds left.
    pub ammo: u8,
    /// Weapon index (4 bits).
    pub weapon: u8,
    /// Score.
    pub score: u32,
    /// Crouching.
    pub crouching: bool,
    /// Team (2 bits).
    pub team: u8,
    /// The name's UTF-8 bytes, at most [`MAX_NAME_BYTES`].
    pub name: Vec<u8>,
}

fn quantize_metres(config: &IntConfig, v: Vec3) -> [u32; 3] {
    v.to_array()
        .map(|c| I32Serializer::quantize(config, &((c * 100.0).round() as i32)))
}

fn dequantize_metres(config: &IntConfig, q: &[u32; 3]) -> Vec3 {
    Vec3::from_array(q.map(|c| I32Serializer::dequantize(config, &c) as f32 / 100.0))
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn truncate_utf8(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Game state → quantized state (done once per object per tick on a server).
pub fn quantize(s: &GameState) -> GameStateQ {
    let mut q = GameStateQ::default();
    quantize_into(s, &mut q);
    q
}

/// [`quantize`] into existing storage, reusing the name's allocation (what a server
/// does every tick with the quantized state it keeps per object).
pub fn quantize_into(s: &GameState, q: &mut GameStateQ) {
    q.position = quantize_metres(&POSITION, s.position);
    q.rotation = s
        .rotation
        .to_array()
        .map(|c| I16Serializer::quantize(&ROTATION, &((c * ROTATION_SCALE).round() as i16)));
    q.velocity = quantize_metres(&VELOCITY, s.velocity);
    q.health = RangedF32Serializer::quantize(&HEALTH, &s.health);
    q.ammo = U8Serializer::quantize(&AMMO, &s.ammo);
    q.weapon = U8Serializer::quantize(&WEAPON, &s.weapon);
    q.score = U32Serializer::quantize(&SCORE, &s.score);
    q.crouching = s.crouching;
    q.team = U8Serializer::quantize(&TEAM, &s.team);
    q.name.clear();
    q.name
        .extend_from_slice(truncate_utf8(&s.name, MAX_NAME_BYTES).as_bytes());
}

/// Quantized state → game state (on a client, after [`deserialize`]).
pub fn dequantize(q: &GameStateQ) -> GameState {
    GameState {
        position: dequantize_metres(&POSITION, &q.position),
        rotation: Quat::from_array(
            q.rotation
                .map(|c| I16Serializer::dequantize(&ROTATION, &c) as f32 / ROTATION_SCALE),
        ),
        velocity: dequantize_metres(&VELOCITY, &q.velocity),
        health: RangedF32Serializer::dequantize(&HEALTH, &q.health),
        ammo: q.ammo,
        weapon: q.weapon,
        score: q.score,
        crouching: q.crouching,
        team: q.team,
        name: String::from_utf8_lossy(&q.name).into_owned(),
    }
}

/// Writes every member (a full, non-delta state).
#[inline]
pub fn serialize(q: &GameStateQ, w: &mut BitWriter) {
    for c in &q.position {
        I32Serializer::serialize(&POSITION, c, w);
    }
    for c in &q.rotation {
        I16Serializer::serialize(&ROTATION, c, w);
    }
    for c in &q.velocity {
        I32Serializer::serialize(&VELOCITY, c, w);
    }
    RangedF32Serializer::serialize(&HEALTH, &q.health, w);
    U8Serializer::serialize(&AMMO, &q.ammo, w);
    U8Serializer::serialize(&WEAPON, &q.weapon, w);
    U32Serializer::serialize(&SCORE, &q.score, w);
    BoolSerializer::serialize(&replicate::serialize::NoConfig, &q.crouching, w);
    U8Serializer::serialize(&TEAM, &q.team, w);
    U8Serializer::serialize(&NAME_LEN, &(q.name.len() as u8), w);
    w.write_bytes(&q.name);
}

/// Reads what [`serialize`] wrote; bounds-checked (a truncated stream is an error).
#[inline]
pub fn deserialize(r: &mut BitReader) -> Result<GameStateQ, SerializeError> {
    let mut q = GameStateQ::default();
    for c in &mut q.position {
        *c = I32Serializer::deserialize(&POSITION, r)?;
    }
    for c in &mut q.rotation {
        *c = I16Serializer::deserialize(&ROTATION, r)?;
    }
    for c in &mut q.velocity {
        *c = I32Serializer::deserialize(&VELOCITY, r)?;
    }
    q.health = RangedF32Serializer::deserialize(&HEALTH, r)?;
    q.ammo = U8Serializer::deserialize(&AMMO, r)?;
    q.weapon = U8Serializer::deserialize(&WEAPON, r)?;
    q.score = U32Serializer::deserialize(&SCORE, r)?;
    q.crouching = BoolSerializer::deserialize(&replicate::serialize::NoConfig, r)?;
    q.team = U8Serializer::deserialize(&TEAM, r)?;
    let len = U8Serializer::deserialize(&NAME_LEN, r)? as usize;
    q.name.resize(len, 0);
    r.read_bytes(&mut q.name);
    r.check()?;
    Ok(q)
}

/// The mirror struct postcard and bitcode encode: the same members at full precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct GameStateSerde {
    /// Position (m).
    pub position: [f32; 3],
    /// Rotation quaternion `[x, y, z, w]`.
    pub rotation: [f32; 4],
    /// Velocity (m/s).
    pub velocity: [f32; 3],
    /// Health.
    pub health: f32,
    /// Rounds left.
    pub ammo: u8,
    /// Weapon index.
    pub weapon: u8,
    /// Score.
    pub score: u32,
    /// Crouching.
    pub crouching: bool,
    /// Team.
    pub team: u8,
    /// Display name.
    pub name: String,
}

impl From<&GameState> for GameStateSerde {
    fn from(s: &GameState) -> Self {
        Self {
            position: s.position.to_array(),
            rotation: s.rotation.to_array(),
            velocity: s.velocity.to_array(),
            health: s.health,
            ammo: s.ammo,
            weapon: s.weapon,
            score: s.score,
            crouching: s.crouching,
            team: s.team,
            name: s.name.clone(),
        }
    }
}

/// The quantized values as plain signed integers (size table only): what postcard
/// and bitcode would send given the same quantization as replicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct GameStateInts {
    /// Centimetres.
    pub position: [i32; 3],
    /// Components × 2047.
    pub rotation: [i16; 4],
    /// Centimetres per second.
    pub velocity: [i32; 3],
    /// Health as an index of the 1024-step range `0..=100`.
    pub health: u16,
    /// Rounds left.
    pub ammo: u8,
    /// Weapon index.
    pub weapon: u8,
    /// Score.
    pub score: u32,
    /// Crouching.
    pub crouching: bool,
    /// Team.
    pub team: u8,
    /// Display name (truncated like replicate's).
    pub name: String,
}

impl From<&GameStateQ> for GameStateInts {
    fn from(q: &GameStateQ) -> Self {
        Self {
            position: q.position.map(|c| I32Serializer::dequantize(&POSITION, &c)),
            rotation: q.rotation.map(|c| I16Serializer::dequantize(&ROTATION, &c)),
            velocity: q.velocity.map(|c| I32Serializer::dequantize(&VELOCITY, &c)),
            health: q.health as u16,
            ammo: q.ammo,
            weapon: q.weapon,
            score: q.score,
            crouching: q.crouching,
            team: q.team,
            name: String::from_utf8_lossy(&q.name).into_owned(),
        }
    }
}

const NAMES: [&str; 8] = [
    "Ana",
    "PlayerOne",
    "xX_Sniper_Xx",
    "Jörg",
    "NightOwl42",
    "Kiri",
    "TheQuickBrownFox",
    "Zed",
];

/// `n` varied player states (a server's worth of players mid-match): positions over a
/// 4 km map, a third of them standing still, random orientations and names.
pub fn make_states(n: usize, seed: u64) -> Vec<GameState> {
    let mut rng = crate::Rng::new(seed);
    (0..n)
        .map(|_| {
            let moving = !rng.chance(0.33);
            let mut speed = || {
                if moving {
                    rng.range_f32(-8.0, 8.0)
                } else {
                    0.0
                }
            };
            let velocity = Vec3::new(speed(), speed(), 0.0);
            let axis = Vec3::new(
                rng.range_f32(-1.0, 1.0),
                rng.range_f32(-1.0, 1.0),
                rng.range_f32(0.1, 1.0),
            )
            .normalize();
            GameState {
                position: Vec3::new(
                    rng.range_f32(-2000.0, 2000.0),
                    rng.range_f32(-2000.0, 2000.0),
                    rng.range_f32(0.0, 120.0),
                ),
                rotation: Quat::from_axis_angle(
                    axis,
                    rng.range_f32(-std::f32::consts::PI, std::f32::consts::PI),
                ),
                velocity,
                health: (rng.below(201) as f32) * 0.5,
                ammo: rng.below(61) as u8,
                weapon: rng.below(16) as u8,
                score: rng.below(100_000) as u32,
                crouching: rng.chance(0.2),
                team: rng.below(4) as u8,
                name: NAMES[rng.below(NAMES.len() as u64) as usize].to_owned(),
            }
        })
        .collect()
}

/// One row of the size table.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeRow {
    /// The encoder and what it encodes.
    pub encoder: &'static str,
    /// Mean bytes per struct when each struct is encoded on its own.
    pub bytes_per_struct: f64,
    /// Mean bits per struct (for replicate the bits actually written, which pack
    /// back to back inside a packet; for byte encoders 8 × bytes).
    pub bits_per_struct: f64,
}

/// Encoded sizes of `states`, each struct encoded on its own, averaged.
pub fn size_rows(states: &[GameState]) -> Vec<SizeRow> {
    let n = states.len().max(1) as f64;
    let mut rows = Vec::new();

    let mut w = BitWriter::with_capacity_bytes(1200);
    let (mut bits, mut bytes) = (0usize, 0usize);
    for s in states {
        w.reset(1200 * 8);
        serialize(&quantize(s), &mut w);
        bits += w.position();
        bytes += w.byte_len();
    }
    rows.push(SizeRow {
        encoder: "replicate (quantized, bit-packed)",
        bytes_per_struct: bytes as f64 / n,
        bits_per_struct: bits as f64 / n,
    });

    let mut push_bytes = |encoder, total: usize| {
        rows.push(SizeRow {
            encoder,
            bytes_per_struct: total as f64 / n,
            bits_per_struct: total as f64 * 8.0 / n,
        })
    };
    let serde: Vec<GameStateSerde> = states.iter().map(GameStateSerde::from).collect();
    let ints: Vec<GameStateInts> = states
        .iter()
        .map(|s| GameStateInts::from(&quantize(s)))
        .collect();
    let mut buf = [0u8; 256];
    push_bytes(
        "postcard (f32 members)",
        serde.iter().map(|v| postcard_len(v, &mut buf)).sum(),
    );
    let mut bc = bitcode::Buffer::new();
    push_bytes(
        "bitcode (f32 members)",
        serde.iter().map(|v| bc.encode(v).len()).sum(),
    );
    push_bytes(
        "postcard (same quantized ints)",
        ints.iter().map(|v| postcard_len(v, &mut buf)).sum(),
    );
    push_bytes(
        "bitcode (same quantized ints)",
        ints.iter().map(|v| bc.encode(v).len()).sum(),
    );
    // bitcode is columnar: it shines on a whole batch, which a replication system
    // cannot send (each object goes when it is dirty and fits). Shown for reference.
    push_bytes(
        "bitcode (f32 members, whole batch as one Vec)",
        bc.encode(&serde).len(),
    );
    rows
}

/// Bytes postcard writes for `value` (0 if it does not fit `buf`).
fn postcard_len<T: Serialize>(value: &T, buf: &mut [u8]) -> usize {
    postcard::to_slice(value, buf).map_or(0, |b| b.len())
}

/// The size table as markdown.
pub fn size_table(states: &[GameState]) -> String {
    let mut out = format!(
        "Encoded size of the 10-member game struct, mean over {} varied states, each encoded on its own:\n\n\
         | encoder | bytes per struct | bits per struct |\n|---|---:|---:|\n",
        states.len()
    );
    for row in size_rows(states) {
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} |\n",
            row.encoder, row.bytes_per_struct, row.bits_per_struct
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicate_round_trips_within_quantization_error() {
        for s in make_states(200, 3) {
            let q = quantize(&s);
            let mut w = BitWriter::with_capacity_bytes(1200);
            serialize(&q, &mut w);
            let bytes = w.finish().expect("fits a packet");
            let mut r = BitReader::with_bit_len(&bytes, w.position());
            let back = deserialize(&mut r).expect("reads back");
            assert_eq!(back, q);
            assert_eq!(r.bits_left(), 0, "reads exactly the bits written");
            let d = dequantize(&back);
            assert!((d.position - s.position).abs().max_element() <= 0.005 + 1e-3);
            assert!((d.velocity - s.velocity).abs().max_element() <= 0.005 + 1e-3);
            assert!(d.rotation.dot(s.rotation).abs() > 0.999);
            assert!((d.health - s.health).abs() <= 0.05);
            assert_eq!(
                (d.ammo, d.weapon, d.score, d.crouching, d.team),
                (s.ammo, s.weapon, s.score, s.crouching, s.team)
            );
            assert_eq!(d.name, s.name, "sample names are short ASCII/UTF-8");
            // A truncated stream is an error, not a panic or a bogus value.
            let mut r = BitReader::new(&bytes[..bytes.len() - 1]);
            assert!(deserialize(&mut r).is_err());
        }
    }

    #[test]
    fn long_names_truncate_on_a_char_boundary() {
        let mut s = make_states(1, 1).remove(0);
        s.name = "é".repeat(20); // 40 bytes
        let q = quantize(&s);
        assert_eq!(q.name.len(), 30);
        assert_eq!(dequantize(&q).name, "é".repeat(15));
    }

    #[test]
    fn mirrors_round_trip_through_postcard_and_bitcode() {
        for s in make_states(20, 5) {
            let m = GameStateSerde::from(&s);
            let mut buf = [0u8; 256];
            let bytes = postcard::to_slice(&m, &mut buf).expect("fits");
            assert_eq!(
                postcard::from_bytes::<GameStateSerde>(bytes).expect("decodes"),
                m
            );
            let bytes = bitcode::encode(&m);
            assert_eq!(
                bitcode::decode::<GameStateSerde>(&bytes).expect("decodes"),
                m
            );
        }
    }

    #[test]
    fn size_table_has_every_encoder_and_replicate_is_smallest_per_struct() {
        let rows = size_rows(&make_states(64, 9));
        assert_eq!(rows.len(), 6);
        let replicate = rows[0].bytes_per_struct;
        assert!(replicate > 20.0, "{rows:?}");
        for row in &rows[1..5] {
            assert!(row.bytes_per_struct > replicate, "{rows:?}");
        }
    }
}
