//! A built-in serializer named with `serializer = ...` gets its config checked at
//! compile time: this range has no resolution (neither `bits` nor `precision`).
use replicate::Replicated;
use replicate::serialize::RangedF32Serializer;

#[derive(Replicated)]
struct Player {
    #[net(serializer = RangedF32Serializer, min = 0.0, max = 100.0)]
    hp: f32,
}

fn main() {}
