use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits = 0)]
    ammo: u16,
}

fn main() {}
