use replicate::Replicated;

struct Inventory;

#[derive(Replicated)]
struct Player {
    hp: u16,
    inventory: Inventory,
}

fn main() {}
