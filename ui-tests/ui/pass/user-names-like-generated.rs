// Types named like the twin (`DoorState`) or an enum's quantized form must not be
// shadowed by the generated code (whose own items all start with `__`).
#![allow(dead_code, non_camel_case_types)]

use replicate::{NetEnum, Replicated};

#[derive(NetEnum, Debug, PartialEq)]
enum DoorState {
    Open,
    Closed(u8),
}

#[derive(NetEnum, Debug, PartialEq)]
enum DoorStateQuantized {
    A,
    B(bool),
}

struct __rp;
struct __NetApply;
type Count = u64;

#[derive(Replicated)]
struct Door {
    state: DoorState,
    other: DoorStateQuantized,
    count: Count,
}

fn main() {
    let d = <Door as Replicated>::descriptor();
    assert_eq!(d.members[0].serializer, "DoorState");
    assert_eq!(d.members[2].serializer, "u64");
}
