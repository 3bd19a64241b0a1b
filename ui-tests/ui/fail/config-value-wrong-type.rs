use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(bits = "seven")]
    ammo: u16,
}

fn main() {}
