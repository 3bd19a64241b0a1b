use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(name = "hp")]
    hp: u16,
}

fn main() {}
