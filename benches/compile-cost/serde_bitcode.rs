//! The seven game types of the derive compile-cost measurement with serde + bitcode
//! derives (the baseline; `replicated.rs` holds the same types with
//! `#[derive(Replicated)]`). glam types become arrays (bitcode derives no glam).

use serde::{Deserialize, Serialize};

macro_rules! both {
    ($item:item) => {
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
        $item
    };
}

both! {
    pub enum Stance {
        #[default]
        Standing,
        Crouching,
        Prone,
    }
}

both! {
    pub enum Weapon {
        #[default]
        Fists,
        Sword { sharpness: u8 },
        Bow(u8, bool),
    }
}

both! {
    pub struct Player {
        pub position: [f32; 3],
        pub velocity: [f32; 3],
        pub yaw: f32,
        pub pitch: f32,
        pub health: u8,
        pub ammo: u8,
        pub weapon_slot: u8,
        pub name: String,
        pub stance: Stance,
        #[serde(skip)]
        pub acceleration: [f32; 3],
    }
}

both! {
    pub struct Projectile {
        pub position: [f32; 3],
        pub velocity: [f32; 3],
        pub owner: u16,
    }
}

both! {
    pub struct Vehicle {
        pub position: [f32; 3],
        pub velocity: [f32; 3],
        pub rotation: [f32; 4],
        pub damage: u16,
        pub headlights: bool,
    }
}

both! {
    pub struct Avatar {
        pub x: i32,
        pub y: i32,
        pub facing: i8,
    }
}

both! {
    pub struct GameState {
        pub position: [f32; 3],
        pub rotation: [f32; 4],
        pub velocity: [f32; 3],
        pub health: f32,
        pub ammo: u8,
        pub weapon: u8,
        pub score: u32,
        pub crouching: bool,
        pub team: u8,
        pub name: String,
    }
}

both! {
    pub struct Inventory {
        pub items: Vec<u16>,
        pub ammo_per_slot: Vec<u8>,
        pub selected: u8,
        pub gold: u32,
        pub weapon: Weapon,
    }
}

both! {
    pub struct Pickup {
        pub position: [f32; 2],
        pub available: bool,
        pub respawn_in: f32,
        pub kind: u8,
    }
}
