//! `bits` wider than the named integer serializer's type, through a constant.
use replicate::Replicated;
use replicate::serialize::U8Serializer;

const AMMO_BITS: u32 = 9;

#[derive(Replicated)]
struct Player {
    #[net(serializer = U8Serializer, bits = AMMO_BITS)]
    ammo: u8,
}

fn main() {}
