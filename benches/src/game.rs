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
//! Every member goes through one of replicate's built-in serializers, as
//! `#[derive(Replicated)]` code would call them:
//!
//! | member | serializer and config | wire (replicate) |
//! |---|---|---|
//! | position `Vec3` (m) | `Vec3Serializer`, ±4096 m at 1 cm | 3 × 20 bits |
//! | rotation `Quat` | `QuatSerializer`, smallest three, 12 bits | 38 bits |
//! | velocity `Vec3` (m/s) | `Vec3Serializer`, ±64 m/s at 1 cm/s | 3 × 14 bits |
//! | health `f32` 0..=100 | `RangedF32Serializer`, 10 bits (step 100/1023) | 10 bits |
//! | ammo `u8` | `U8Serializer` | 8 bits |
//! | weapon `u8` 0..16 | `U8Serializer`, `bits = 4` | 4 bits |
//! | score `u32` | `U32Serializer` | zero flag + 32 bits |
//! | crouching `bool` | `BoolSerializer` | 1 bit |
//! | team `u8` 0..4 | `U8Serializer`, `bits = 2` | 2 bits |
//! | name `String` ≤ 31 bytes | `StringSerializer`, `max_len = 31` | empty flag + 5-bit length + bytes |

use glam::{Quat, Vec3};
use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::{
    BoolSerializer, FloatRangeConfig, IntConfig, NetSerializer, NoConfig, QuantizedQuat,
    QuatConfig, QuatSerializer, RangedF32Serializer, SerializeError, StringConfig,
    StringSerializer, U8Serializer, U32Serializer, Vec3Serializer, VectorConfig,
};
use serde::{Deserialize, Serialize};

/// The game-side player state.
///
/// It also derives [`Replicated`](replicate::Replicated) with the same serializers and
/// configs as the hand-written [`serialize`], so the benchmark can time the generated
/// code too (the tests check both write the same bits).
#[derive(replicate::Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bench::GameState")]
pub struct GameState {
    /// World position in metres.
    #[net(min = -4096.0, max = 4096.0, precision = 0.01)]
    pub position: Vec3,
    /// Orientation (unit quaternion), smallest three at 12 bits per component.
    #[net(bits = 12)]
    pub rotation: Quat,
    /// Velocity in metres per second.
    #[net(min = -64.0, max = 64.0, precision = 0.01)]
    pub velocity: Vec3,
    /// Health, 0 to 100.
    #[net(min = 0.0, max = 100.0, bits = 10)]
    pub health: f32,
    /// Rounds left.
    pub ammo: u8,
    /// Equipped weapon, 0 to 15.
    #[net(bits = 4)]
    pub weapon: u8,
    /// Score.
    pub score: u32,
    /// Whether the player crouches.
    pub crouching: bool,
    /// Team, 0 to 3.
    #[net(bits = 2)]
    pub team: u8,
    /// Display name (at most 31 bytes are replicated).
    #[net(max_len = 31)]
    pub name: String,
}

const POSITION: VectorConfig = VectorConfig {
    min: -4096.0,
    max: 4096.0,
    precision: 0.01,
    bits: 32,
};
const VELOCITY: VectorConfig = VectorConfig {
    min: -64.0,
    max: 64.0,
    precision: 0.01,
    bits: 32,
};
const ROTATION: QuatConfig = QuatConfig::DEFAULT;
const HEALTH: FloatRangeConfig = FloatRangeConfig::with_bits(0.0, 100.0, 10);
const AMMO: IntConfig = IntConfig::DEFAULT;
const WEAPON: IntConfig = IntConfig { bits: 4 };
const SCORE: IntConfig = IntConfig::DEFAULT;
const TEAM: IntConfig = IntConfig { bits: 2 };
/// The longest name replicated, in bytes.
pub const MAX_NAME_BYTES: usize = 31;
const NAME: StringConfig = StringConfig {
    max_len: MAX_NAME_BYTES as u32,
};

/// The most bits [`serialize`] writes for one struct (a 31-byte name).
pub const MAX_STRUCT_BITS: usize =
    3 * 20 + 38 + 3 * 14 + 10 + 8 + 4 + 33 + 1 + 2 + 1 + 5 + 8 * MAX_NAME_BYTES;

/// The quantized twin of [`GameState`] (each member its serializer's `Quantized`):
/// what is compared, stored and sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GameStateQ {
    /// Step indices (1 cm) per component.
    pub position: [u32; 3],
    /// Smallest-three quaternion.
    pub rotation: QuantizedQuat,
    /// Step indices (1 cm/s) per component.
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
    /// The name, truncated to at most [`MAX_NAME_BYTES`] on a char boundary.
    pub name: String,
}

/// Game state → quantized state (done once per object per tick on a server).
pub fn quantize(s: &GameState) -> GameStateQ {
    let mut q = GameStateQ::default();
    quantize_into(s, &mut q);
    q
}

/// [`quantize`] into existing storage (what a server does every tick with the
/// quantized state it keeps per object). The name is only re-quantized (which
/// allocates) when it changed.
pub fn quantize_into(s: &GameState, q: &mut GameStateQ) {
    q.position = Vec3Serializer::quantize(&POSITION, &s.position);
    q.rotation = QuatSerializer::quantize(&ROTATION, &s.rotation);
    q.velocity = Vec3Serializer::quantize(&VELOCITY, &s.velocity);
    q.health = RangedF32Serializer::quantize(&HEALTH, &s.health);
    q.ammo = U8Serializer::quantize(&AMMO, &s.ammo);
    q.weapon = U8Serializer::quantize(&WEAPON, &s.weapon);
    q.score = U32Serializer::quantize(&SCORE, &s.score);
    q.crouching = BoolSerializer::quantize(&NoConfig, &s.crouching);
    q.team = U8Serializer::quantize(&TEAM, &s.team);
    if q.name != s.name {
        q.name = StringSerializer::quantize(&NAME, &s.name);
    }
}

/// Quantized state → game state (on a client, after [`deserialize`]).
pub fn dequantize(q: &GameStateQ) -> GameState {
    GameState {
        position: Vec3Serializer::dequantize(&POSITION, &q.position),
        rotation: QuatSerializer::dequantize(&ROTATION, &q.rotation),
        velocity: Vec3Serializer::dequantize(&VELOCITY, &q.velocity),
        health: RangedF32Serializer::dequantize(&HEALTH, &q.health),
        ammo: U8Serializer::dequantize(&AMMO, &q.ammo),
        weapon: U8Serializer::dequantize(&WEAPON, &q.weapon),
        score: U32Serializer::dequantize(&SCORE, &q.score),
        crouching: BoolSerializer::dequantize(&NoConfig, &q.crouching),
        team: U8Serializer::dequantize(&TEAM, &q.team),
        name: StringSerializer::dequantize(&NAME, &q.name),
    }
}

/// Writes every member (a full, non-delta state).
#[inline]
pub fn serialize(q: &GameStateQ, w: &mut BitWriter) {
    Vec3Serializer::serialize(&POSITION, &q.position, w);
    QuatSerializer::serialize(&ROTATION, &q.rotation, w);
    Vec3Serializer::serialize(&VELOCITY, &q.velocity, w);
    RangedF32Serializer::serialize(&HEALTH, &q.health, w);
    U8Serializer::serialize(&AMMO, &q.ammo, w);
    U8Serializer::serialize(&WEAPON, &q.weapon, w);
    U32Serializer::serialize(&SCORE, &q.score, w);
    BoolSerializer::serialize(&NoConfig, &q.crouching, w);
    U8Serializer::serialize(&TEAM, &q.team, w);
    StringSerializer::serialize(&NAME, &q.name, w);
}

/// Reads what [`serialize`] wrote; bounds-checked (a truncated stream is an error).
#[inline]
pub fn deserialize(r: &mut BitReader) -> Result<GameStateQ, SerializeError> {
    Ok(GameStateQ {
        position: Vec3Serializer::deserialize(&POSITION, r)?,
        rotation: QuatSerializer::deserialize(&ROTATION, r)?,
        velocity: Vec3Serializer::deserialize(&VELOCITY, r)?,
        health: RangedF32Serializer::deserialize(&HEALTH, r)?,
        ammo: U8Serializer::deserialize(&AMMO, r)?,
        weapon: U8Serializer::deserialize(&WEAPON, r)?,
        score: U32Serializer::deserialize(&SCORE, r)?,
        crouching: BoolSerializer::deserialize(&NoConfig, r)?,
        team: U8Serializer::deserialize(&TEAM, r)?,
        name: StringSerializer::deserialize(&NAME, r)?,
    })
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

/// The quantized values as plain integers (size table only): what postcard and
/// bitcode would send given the same quantization as replicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct GameStateInts {
    /// Step indices.
    pub position: [u32; 3],
    /// Smallest-three: dropped component's index.
    pub rotation_largest: u8,
    /// Smallest-three: the other components' indices.
    pub rotation: [u16; 3],
    /// Step indices.
    pub velocity: [u16; 3],
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
            position: q.position,
            rotation_largest: q.rotation.largest,
            rotation: q.rotation.components.map(|c| c as u16),
            velocity: q.velocity.map(|c| c as u16),
            health: q.health as u16,
            ammo: q.ammo,
            weapon: q.weapon,
            score: q.score,
            crouching: q.crouching,
            team: q.team,
            name: q.name.clone(),
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
    fn derived_code_writes_the_same_bits_as_the_hand_written_path() {
        use replicate::{ChangeMask, Replicated, ReplicatedState};
        let all = ChangeMask::all(GameState::descriptor().change_mask_bits);
        for s in make_states(100, 11) {
            let mut hand = BitWriter::with_capacity_bits(MAX_STRUCT_BITS);
            serialize(&quantize(&s), &mut hand);
            let mut derived = BitWriter::with_capacity_bits(MAX_STRUCT_BITS);
            s.to_state().serialize(&all, 0, &mut derived);
            assert_eq!(derived.position(), hand.position());
            assert_eq!(derived.finish(), hand.finish());
            let bytes = hand.to_bytes();
            let mut back = <GameState as Replicated>::State::default();
            let mut r = BitReader::with_bit_len(&bytes, hand.position());
            back.deserialize(&all, 0, &mut r).expect("reads back");
            assert_eq!(back, s.to_state());
            assert_eq!(r.bits_left(), 0);
        }
    }

    #[test]
    fn max_struct_bits_is_the_worst_case() {
        let mut s = make_states(1, 1).remove(0);
        s.name = "x".repeat(40);
        s.score = u32::MAX;
        let mut w = BitWriter::with_capacity_bits(MAX_STRUCT_BITS);
        serialize(&quantize(&s), &mut w);
        assert_eq!(w.position(), MAX_STRUCT_BITS);
        assert!(!w.is_overflown());
    }

    #[test]
    fn long_names_truncate_on_a_char_boundary() {
        let mut s = make_states(1, 1).remove(0);
        s.name = "é".repeat(20); // 40 bytes
        let q = quantize(&s);
        assert_eq!(q.name.len(), 30);
        assert_eq!(q.name, "é".repeat(15));
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
