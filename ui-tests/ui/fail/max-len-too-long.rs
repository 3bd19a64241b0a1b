use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(max_len = 100000)]
    inventory: Vec<u16>,
}

fn main() {}
