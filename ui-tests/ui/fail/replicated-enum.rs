use replicate::Replicated;

#[derive(Replicated)]
enum Weapon {
    Sword,
    Bow { arrows: u8 },
}

fn main() {}
