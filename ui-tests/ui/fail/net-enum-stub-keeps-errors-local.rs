// A failed `#[derive(NetEnum)]` still gives the enum a (stub) default serializer, so
// the struct using it reports nothing more than the real mistake.
use replicate::{NetEnum, Replicated};

#[derive(NetEnum)]
enum Weapon {
    Sword,
    Bow(#[net(bits = 0)] u8),
}

#[derive(Replicated)]
struct Player {
    weapon: Weapon,
}

fn main() {}
