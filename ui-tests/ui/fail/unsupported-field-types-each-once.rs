//! Each member whose type has no serializer is reported once, at its type, whether
//! the type is registered, member-only or generic.
use replicate::Replicated;
use std::collections::HashMap;

struct Inventory;

#[derive(Replicated)]
struct Player {
    hp: u16,
    inventory: Inventory,
    stash: HashMap<u8, Inventory>,
}

#[derive(Replicated)]
#[net(register = false)]
struct Buff {
    source: Inventory,
}

#[derive(Replicated)]
struct Tagged<T: Send + 'static> {
    value: T,
    extra: Vec<Inventory>,
}

fn main() {}
