//! Configs at the edge of what the compile-time checks accept.
use replicate::Replicated;
use replicate::serialize::{
    I16Serializer, RangedF32Serializer, RangedF64Serializer, U8Serializer, Vec3Serializer,
};

const AMMO_BITS: u32 = 8;

#[derive(Replicated, Default)]
struct Player {
    /// `-1..1` in `f32` allows up to 20 bits.
    #[net(min = -1.0, max = 1.0, bits = 20)]
    a: f32,
    #[net(serializer = RangedF32Serializer, min = 0.0, max = 100.0, precision = 0.01)]
    b: f32,
    #[net(serializer = RangedF64Serializer, min = -1.0e6, max = 1.0e6, bits = 32)]
    c: f64,
    #[net(serializer = U8Serializer, bits = AMMO_BITS)]
    d: u8,
    #[net(serializer = I16Serializer)]
    e: i16,
    #[net(serializer = Vec3Serializer, min = -100.0, max = 100.0, precision = 0.01)]
    f: glam::Vec3,
}

fn main() {}
