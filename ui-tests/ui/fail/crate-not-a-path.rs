use replicate::Replicated;

#[derive(Replicated)]
#[net(crate = "not a path")]
struct Player {
    hp: u16,
}

fn main() {}
