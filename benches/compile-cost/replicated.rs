//! The seven game types of the derive compile-cost measurement, with
//! `#[derive(Replicated)]` (see `run.sh`; `serde_bitcode.rs` holds the same types with
//! serde + bitcode derives).

use glam::{Quat, Vec2, Vec3};
use replicate::{NetEnum, Replicated};

/// A fieldless member enum.
#[derive(NetEnum, Debug, Clone, Copy, PartialEq, Default)]
pub enum Stance {
    #[default]
    Standing,
    Crouching,
    Prone,
}

/// A member enum with data.
#[derive(NetEnum, Debug, Clone, PartialEq)]
pub enum Weapon {
    Fists,
    Sword { sharpness: u8 },
    Bow(#[net(bits = 6)] u8, bool),
}

impl Default for Weapon {
    fn default() -> Self {
        Weapon::Fists
    }
}

/// The arena player.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::Player")]
pub struct Player {
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    #[net(min = -32.0, max = 32.0, precision = 0.01)]
    pub velocity: Vec3,
    #[net(min = -180.0, max = 180.0, bits = 12)]
    pub yaw: f32,
    #[net(min = -90.0, max = 90.0, bits = 10)]
    pub pitch: f32,
    #[net(bits = 7, notify = on_health)]
    pub health: u8,
    #[net(cond = OwnerOnly)]
    pub ammo: u8,
    #[net(bits = 3)]
    pub weapon_slot: u8,
    #[net(init, max_len = 32)]
    pub name: String,
    pub stance: Stance,
    #[net(skip)]
    pub acceleration: Vec3,
}

impl Player {
    fn on_health(&mut self, _old: &u8) {}
}

/// A projectile.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::Projectile")]
pub struct Projectile {
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    #[net(min = -64.0, max = 64.0, precision = 0.01)]
    pub velocity: Vec3,
    #[net(init)]
    pub owner: u16,
}

/// A vehicle.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::Vehicle")]
pub struct Vehicle {
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    #[net(min = -32.0, max = 32.0, precision = 0.01)]
    pub velocity: Vec3,
    #[net(bits = 12)]
    pub rotation: Quat,
    #[net(notify = on_damage)]
    pub damage: u16,
    pub headlights: bool,
}

impl Vehicle {
    fn on_damage(&mut self, _old: &u16) {}
}

/// A predicted avatar: integer centimetres sent together.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::Avatar")]
pub struct Avatar {
    #[net(group = "position")]
    pub x: i32,
    #[net(group = "position")]
    pub y: i32,
    #[net(cond = SkipOwner)]
    pub facing: i8,
}

/// The benchmark's player state.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::GameState")]
pub struct GameState {
    #[net(min = -4096.0, max = 4096.0, precision = 0.01)]
    pub position: Vec3,
    #[net(bits = 12)]
    pub rotation: Quat,
    #[net(min = -64.0, max = 64.0, precision = 0.01)]
    pub velocity: Vec3,
    #[net(min = 0.0, max = 100.0, bits = 10)]
    pub health: f32,
    pub ammo: u8,
    #[net(bits = 4)]
    pub weapon: u8,
    pub score: u32,
    pub crouching: bool,
    #[net(bits = 2)]
    pub team: u8,
    #[net(max_len = 31)]
    pub name: String,
}

/// An inventory with containers.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::Inventory")]
pub struct Inventory {
    #[net(max_len = 16)]
    pub items: Vec<u16>,
    #[net(max_len = 8)]
    pub ammo_per_slot: Vec<u8>,
    #[net(bits = 4)]
    pub selected: u8,
    #[net(cond = OwnerOnly)]
    pub gold: u32,
    pub weapon: Weapon,
}

/// A pickup on the ground.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "cost::Pickup")]
pub struct Pickup {
    #[net(min = -512.0, max = 512.0, precision = 0.05)]
    pub position: Vec2,
    #[net(notify = on_available)]
    pub available: bool,
    #[net(min = 0.0, max = 60.0, bits = 8)]
    pub respawn_in: f32,
    #[net(bits = 5)]
    pub kind: u8,
}

impl Pickup {
    fn on_available(&mut self, _old: &bool) {}
}
