//! A ranged `f32` whose `precision` asks for more than `f32` holds far from zero.
use replicate::Replicated;
use replicate::serialize::RangedF64Serializer;

#[derive(Replicated)]
struct Player {
    #[net(min = -1.0e6, max = 1.0e6, precision = 0.001)]
    x: f32,
    /// The same range is fine as `f64`...
    #[net(min = -1.0e6, max = 1.0e6, precision = 0.001)]
    y: f64,
    /// ...but not 32 bits over a range this far from zero, even for `f64`.
    #[net(serializer = RangedF64Serializer, min = 1.0e15, max = 1.0e15 + 10.0, bits = 32)]
    z: f64,
}

fn main() {}
