use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(cond = OwnerOnly, cond = SkipOwner)]
    ammo: u16,
}

fn main() {}
