use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    // Smallest three takes 4..=20 bits per component.
    #[net(bits = 30)]
    rotation: glam::Quat,
}

fn main() {}
