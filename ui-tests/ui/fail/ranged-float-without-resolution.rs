use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    // A range but no resolution: `precision` or `bits` is missing.
    #[net(min = 0.0, max = 100.0)]
    hp: f32,
}

fn main() {}
