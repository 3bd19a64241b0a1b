use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(max_len = 0)]
    name: String,
}

fn main() {}
