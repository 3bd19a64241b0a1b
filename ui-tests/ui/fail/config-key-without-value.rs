use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits)]
    ammo: u16,
}

fn main() {}
