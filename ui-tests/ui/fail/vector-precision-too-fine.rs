use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    // 1 mm over the default range of ±2^20: finer than f32 resolves there.
    #[net(precision = 0.001)]
    position: glam::Vec3,
}

fn main() {}
