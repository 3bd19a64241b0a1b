use replicate::Replicated;

// Three independent mistakes: all three are reported in one compilation.
#[derive(Replicated)]
struct Player {
    #[net(bits = 0)]
    ammo: u16,
    #[net(cond = Owner)]
    secret: u32,
    #[net(colour = 3)]
    hp: u16,
}

fn main() {}
