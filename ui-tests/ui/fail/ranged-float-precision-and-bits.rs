use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(min = 0.0, max = 100.0, precision = 0.1, bits = 8)]
    hp: f32,
}

fn main() {}
