use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(cond = OwnerOnyl)]
    ammo: u16,
}

fn main() {}
