use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net = "skip"]
    ammo: u16,
}

fn main() {}
