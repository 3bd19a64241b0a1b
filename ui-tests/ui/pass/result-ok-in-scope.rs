// Items named like prelude items must not confuse the generated code.
#![allow(dead_code)]

use replicate::{NetEnum, Replicated};

struct Result;
struct Ok;
struct Err;
struct Option;
struct Some;
struct None;
struct Vec;
struct Box;
struct String;
struct Default;
struct Clone;
struct PartialEq;
trait Send {}

#[derive(Replicated)]
struct Player {
    #[net(notify = on_hp)]
    hp: u16,
    #[net(group = "g")]
    a: u8,
    #[net(group = "g")]
    b: u8,
    #[net(skip)]
    timer: u32,
    kind: Kind,
}

impl Player {
    fn on_hp(&mut self, _old: &u16) {}
}

#[derive(NetEnum, PartialEq)]
enum Kind {
    A,
    B(u8),
}

fn main() {}
