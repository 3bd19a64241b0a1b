//! Generated code is warning-free in a strict crate.
#![deny(warnings, missing_docs, unused, nonstandard_style, rust_2018_idioms, unused_qualifications)]
#![deny(clippy::all, clippy::pedantic)]

use replicate::{NetEnum, Replicated};

/// A public replicated type with every kind of member.
#[derive(Replicated, Debug, Default)]
pub struct Player {
    /// Hit points.
    #[net(notify = on_hp)]
    pub hp: u16,
    /// Grouped.
    #[net(group = "pos")]
    pub x: i32,
    /// Grouped.
    #[net(group = "pos")]
    pub y: i32,
    /// Nested.
    pub stats: Stats,
    /// Enum.
    pub weapon: Weapon,
    /// Local.
    #[net(skip)]
    pub local: u32,
}

impl Player {
    fn on_hp(&mut self, _old: &u16) {
        self.local += 1;
    }
}

/// Nested stats.
#[derive(Replicated, Debug, Default, Clone, PartialEq)]
pub struct Stats {
    /// Level.
    #[net(bits = 5)]
    pub level: u8,
}

/// A weapon.
#[derive(NetEnum, Debug, Default, PartialEq)]
pub enum Weapon {
    /// None.
    #[default]
    Fists,
    /// A bow.
    Bow(u8),
}

fn main() {
    let p = Player::default();
    let _ = p.to_state();
    let _ = Weapon::Bow(1);
}
