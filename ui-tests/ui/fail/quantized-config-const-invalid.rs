use replicate::Replicated;

const LOW: f64 = 5.0;

#[derive(Replicated)]
struct Player {
    // min >= max through a constant: caught by the config's const check.
    #[net(min = LOW, max = 1.0, bits = 8)]
    hp: f32,
}

fn main() {}
