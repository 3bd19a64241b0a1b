use replicate::NetEnum;

#[derive(NetEnum)]
struct Weapon {
    damage: u8,
}

fn main() {}
