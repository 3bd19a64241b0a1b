use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits = 7)]
    name: String,
}

fn main() {}
