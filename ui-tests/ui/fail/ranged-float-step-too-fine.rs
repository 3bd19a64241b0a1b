//! A ranged `f32` whose step is finer than `f32` can represent over the range (24
//! bits over 10000..10001, where `f32` values are about 0.001 apart).
use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(min = 10000.0, max = 10001.0, bits = 24)]
    altitude: f32,
}

fn main() {}
