use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits = 40)]
    score: u32,
}

fn main() {}
