use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(init, cond = InitialOnly)]
    team: u8,
}

fn main() {}
