use replicate::Replicated;

#[derive(Replicated)]
#[net(delta = 0)]
struct Player {
    hp: u16,
}

fn main() {}
