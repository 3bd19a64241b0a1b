use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(init, cond = Never)]
    team: u8,
}

fn main() {}
