use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    // A resolution but no range.
    #[net(precision = 0.1)]
    hp: f32,
}

fn main() {}
