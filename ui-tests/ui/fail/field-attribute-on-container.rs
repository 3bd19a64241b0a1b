use replicate::Replicated;

#[derive(Replicated)]
#[net(skip)]
struct Player {
    hp: u16,
}

fn main() {}
