use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits = -1)]
    ammo: u16,
}

fn main() {}
