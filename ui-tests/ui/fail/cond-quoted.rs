use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(cond = "OwnerOnly")]
    ammo: u16,
}

fn main() {}
