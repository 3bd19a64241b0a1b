//! Encodes a small game struct member by member with the built-in serializers and
//! prints the bits each member costs against the bytes a byte-aligned encoding uses.
//!
//! Run: `cargo run --example encode`

use replicate::serialize::{
    BoolSerializer, I32Serializer, IntConfig, NetSerializer, NoConfig, U8Serializer, U16Serializer,
    roundtrip,
};

fn row<S: NetSerializer>(name: &str, config: &S::Config, value: &S::Source, raw_bytes: usize)
where
    S::Source: std::fmt::Debug,
{
    match roundtrip::<S>(config, value) {
        Ok((bits, back)) => println!(
            "| {name:<10} | {value:>12?} | {back:>12?} | {bits:>4} | {:>5} |",
            raw_bytes * 8
        ),
        Err(e) => println!("| {name:<10} | error: {e} |"),
    }
}

fn main() {
    println!("| member     |        value |     received | bits | naive |");
    println!("|------------|--------------|--------------|------|-------|");
    row::<I32Serializer>("health", &IntConfig::DEFAULT, &100, 4);
    row::<I32Serializer>("shield", &IntConfig::DEFAULT, &0, 4);
    row::<U8Serializer>("ammo", &IntConfig { bits: 7 }, &30, 1);
    row::<U8Serializer>("weapon", &IntConfig { bits: 3 }, &5, 1);
    row::<U16Serializer>("score", &IntConfig::DEFAULT, &1234, 2);
    row::<BoolSerializer>("crouching", &NoConfig, &true, 1);
}
