use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits = 5)]
    #[net(bits = 6)]
    ammo: u16,
}

fn main() {}
