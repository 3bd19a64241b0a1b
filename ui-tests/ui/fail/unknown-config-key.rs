use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    // `max_len` is a config key, but not one of the integer serializer's.
    #[net(max_len = 16)]
    score: u32,
}

fn main() {}
