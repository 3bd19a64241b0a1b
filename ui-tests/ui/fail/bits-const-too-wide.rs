use replicate::Replicated;

const SCORE_BITS: u32 = 40;

#[derive(Replicated)]
struct Player {
    #[net(bits = SCORE_BITS)]
    score: u32,
}

fn main() {}
