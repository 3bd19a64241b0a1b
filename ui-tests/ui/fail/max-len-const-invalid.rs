//! `max_len` through constants is checked like a literal: not 0, not above the
//! container's limit.
use replicate::Replicated;

const NAME_LEN: u32 = 0;
const INVENTORY_LEN: u32 = 70_000;

#[derive(Replicated)]
struct Player {
    #[net(max_len = NAME_LEN)]
    name: String,
    #[net(max_len = INVENTORY_LEN)]
    items: Vec<u8>,
}

fn main() {}
