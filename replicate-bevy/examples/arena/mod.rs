//! The arena world shared by the Bevy examples: 32 players (each owned by a client,
//! its ammo visible to the owner only), 50 projectiles that live 2 s, 8 vehicles
//! driving circles, moved by a seeded simulation at 30 Hz.

use bevy_ecs::prelude::*;
use glam::Vec3;
use replicate::Replicated;
use replicate::transport::ClientId;
use replicate_bevy::{NetOwner, Replicate};
use std::time::Duration;

pub const TICK: Duration = Duration::from_millis(33);
pub const HALF_EXTENT: f32 = 512.0;

/// A player; the owning client alone sees its ammunition.
#[derive(Component, Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bevy_arena::Player")]
pub struct Player {
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    #[net(min = -180.0, max = 180.0, bits = 12)]
    pub yaw: f32,
    #[net(bits = 7)]
    pub health: u8,
    #[net(cond = OwnerOnly)]
    pub ammo: u8,
    #[net(init, max_len = 32)]
    pub name: String,
}

/// A projectile: ballistic, 2 s of life.
#[derive(Component, Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bevy_arena::Projectile")]
pub struct Projectile {
    #[net(min = -1024.0, max = 1024.0, precision = 0.01)]
    pub position: Vec3,
    #[net(init, min = -64.0, max = 64.0, precision = 0.01)]
    pub velocity: Vec3,
}

/// A vehicle driving a circle.
#[derive(Component, Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bevy_arena::Vehicle")]
pub struct Vehicle {
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    #[net(min = -180.0, max = 180.0, bits = 12)]
    pub yaw: f32,
}

/// Server-only simulation state.
#[derive(Component)]
pub struct Walk {
    pub velocity: Vec3,
}
#[derive(Component)]
pub struct Lifetime(pub Duration);
#[derive(Component)]
pub struct Circle {
    pub center: Vec3,
    pub angle: f32,
}

/// A seeded generator.
#[derive(Resource)]
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next()
    }
}

pub fn spawn_world(mut commands: Commands, mut rng: ResMut<Rng>, clients: Res<ClientIds>) {
    for i in 0..32 {
        let owner = clients.0[i % clients.0.len()];
        commands.spawn((
            Replicate,
            NetOwner(owner),
            Player {
                position: Vec3::new(rng.range(-200.0, 200.0), 0.0, rng.range(-200.0, 200.0)),
                yaw: 0.0,
                health: 100,
                ammo: 30,
                name: format!("player-{i}"),
            },
            Walk {
                velocity: Vec3::ZERO,
            },
        ));
    }
    for i in 0..8 {
        commands.spawn((
            Replicate,
            Vehicle::default(),
            Circle {
                center: Vec3::new(i as f32 * 100.0 - 400.0, 0.0, 0.0),
                angle: i as f32,
            },
        ));
    }
}

pub fn spawn_projectile(commands: &mut Commands, from: Vec3, yaw: f32) {
    let dir = Vec3::new(yaw.to_radians().cos(), 0.0, yaw.to_radians().sin());
    commands.spawn((
        Replicate,
        Projectile {
            position: from,
            velocity: dir * 40.0,
        },
        Lifetime(Duration::from_secs(2)),
    ));
}

pub fn simulate(
    mut commands: Commands,
    mut rng: ResMut<Rng>,
    mut players: Query<(&mut Player, &mut Walk)>,
    mut projectiles: Query<(Entity, &mut Projectile, &mut Lifetime)>,
    mut vehicles: Query<(&mut Vehicle, &mut Circle)>,
) {
    let dt = TICK.as_secs_f32();
    for (mut p, mut walk) in &mut players {
        if rng.next() < dt * 2.0 {
            // A new heading about every 0.5 s; a quarter stand still.
            walk.velocity = if rng.next() < 0.25 {
                Vec3::ZERO
            } else {
                Vec3::new(rng.range(-6.0, 6.0), 0.0, rng.range(-6.0, 6.0))
            };
        }
        if walk.velocity != Vec3::ZERO {
            let next = (p.position + walk.velocity * dt).clamp(
                Vec3::splat(-HALF_EXTENT + 1.0),
                Vec3::splat(HALF_EXTENT - 1.0),
            );
            p.position = next;
            p.yaw = walk.velocity.z.atan2(walk.velocity.x).to_degrees();
        }
    }
    let mut alive = 0;
    for (e, mut proj, mut life) in &mut projectiles {
        life.0 = life.0.saturating_sub(TICK);
        if life.0.is_zero() || proj.position.abs().max_element() > 1000.0 {
            commands.entity(e).despawn();
        } else {
            let v = proj.velocity;
            proj.position += v * dt;
            alive += 1;
        }
    }
    for _ in alive..50 {
        let from = Vec3::new(rng.range(-300.0, 300.0), 1.0, rng.range(-300.0, 300.0));
        spawn_projectile(&mut commands, from, rng.range(-180.0, 180.0));
    }
    for (mut v, mut c) in &mut vehicles {
        // 15 m/s on a 40 m circle.
        c.angle += 15.0 / 40.0 * dt;
        v.position = c.center + Vec3::new(c.angle.cos(), 0.0, c.angle.sin()) * 40.0;
        v.yaw = (c.angle.to_degrees() + 90.0 + 180.0).rem_euclid(360.0) - 180.0;
    }
}

/// The clients the players are given to, round robin.
#[derive(Resource)]
pub struct ClientIds(pub Vec<ClientId>);
