#![no_implicit_prelude]

// Generated code must not rely on the prelude: every path is fully qualified.

#[derive(::replicate::Replicated, ::std::fmt::Debug)]
struct Player {
    #[net(notify = on_hp)]
    hp: u16,
    #[net(bits = 5, cond = OwnerOnly)]
    ammo: u8,
    #[net(group = "pos")]
    x: i32,
    #[net(group = "pos")]
    y: i32,
    #[net(init)]
    team: u8,
    #[net(skip)]
    local: ::std::vec::Vec<u8>,
    weapon: Weapon,
}

impl Player {
    fn on_hp(&mut self, _old: &u16) {}
}

#[derive(::replicate::NetEnum, ::std::fmt::Debug, ::std::cmp::PartialEq)]
enum Weapon {
    Fists,
    Sword { sharp: bool },
    Bow(#[net(bits = 6)] u8),
}

fn main() {}
