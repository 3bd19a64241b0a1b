use replicate::Replicated;

const AMMO_BITS: u32 = 0;

#[derive(Replicated)]
struct Player {
    #[net(bits = AMMO_BITS)]
    ammo: u16,
}

fn main() {}
