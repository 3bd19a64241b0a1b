use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(min = 0.0, max = 100.0, bits = 40)]
    hp: f32,
}

fn main() {}
