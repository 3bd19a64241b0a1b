//! The S1 "arena" world: 32 players, 50 projectiles and 8 vehicles (the composition of
//! naia's `halo_btb_16v16`), moved by a seeded simulation at a fixed tick rate.
//!
//! Motion, as `BENCHMARKS.md` fixes it: players random-walk with a new acceleration
//! about every 0.5 s, at most 6 m/s, a quarter of them standing still at any moment;
//! projectiles fly ballistic at 40 m/s and live 2 s, respawned so 50 are alive;
//! vehicles drive circles at 15 m/s.

use glam::{Quat, Vec3};
use replicate::Replicated;
use replicate::internals::link::SplitMix64;

/// Half the arena's edge, in metres.
pub const ARENA_HALF_EXTENT: f32 = 512.0;

/// A player: the owning client sees its ammo, everyone else does not.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "arena::Player")]
pub struct Player {
    /// ±512 m at 1 cm.
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    /// ±32 m/s at 1 cm/s.
    #[net(min = -32.0, max = 32.0, precision = 0.01)]
    pub velocity: Vec3,
    /// Heading in degrees, 0.09° steps.
    #[net(min = -180.0, max = 180.0, bits = 12)]
    pub yaw: f32,
    /// Look pitch in degrees, 0.18° steps.
    #[net(min = -90.0, max = 90.0, bits = 10)]
    pub pitch: f32,
    /// 0..=100.
    #[net(bits = 7)]
    pub health: u8,
    /// Only the owner sees its ammunition.
    #[net(cond = OwnerOnly)]
    pub ammo: u8,
    /// Weapon slot 0..=7.
    #[net(bits = 3)]
    pub weapon: u8,
    /// Sent once, with the creation.
    #[net(init, max_len = 32)]
    pub name: String,
    /// Server-side simulation state, never replicated.
    #[net(skip)]
    pub acceleration: Vec3,
}

impl replicate::time::Interpolate for Player {
    /// Position, velocity and look blend linearly (the heading the short way round);
    /// everything else steps.
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        use replicate::time::lerp_angle_degrees;
        let step = t >= 1.0;
        Player {
            position: from.position.lerp(to.position, t),
            velocity: from.velocity.lerp(to.velocity, t),
            yaw: {
                let y = lerp_angle_degrees(from.yaw, to.yaw, t);
                (y + 180.0).rem_euclid(360.0) - 180.0
            },
            pitch: from.pitch + (to.pitch - from.pitch) * t,
            ..if step { to.clone() } else { from.clone() }
        }
    }

    /// A respawn moves a player far in one tick: show the jump.
    fn is_teleport(from: &Self, to: &Self) -> bool {
        from.position.distance(to.position) > 5.0
    }
}

/// The player avatar client 1 controls and predicts (with `--predict`): integer
/// centimetres, so the client's prediction and the server's step agree exactly.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "arena::Avatar")]
pub struct Avatar {
    /// X in centimetres.
    #[net(group = "position")]
    pub x: i32,
    /// Y in centimetres.
    #[net(group = "position")]
    pub y: i32,
}

impl replicate::time::Interpolate for Avatar {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        let lerp = |a: i32, b: i32| (a as f32 + (b - a) as f32 * t).round() as i32;
        Avatar {
            x: lerp(from.x, to.x),
            y: lerp(from.y, to.y),
        }
    }
}

/// One tick of the avatar's stick: centimetres per tick along x and y.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AvatarInput {
    /// Centimetres along x.
    pub dx: i8,
    /// Centimetres along y.
    pub dy: i8,
}

impl replicate::time::NetInput for AvatarInput {
    fn write(&self, w: &mut replicate::bits::BitWriter) {
        w.write_bits(u64::from(self.dx as u8), 8);
        w.write_bits(u64::from(self.dy as u8), 8);
    }
    fn read(r: &mut replicate::bits::BitReader) -> Option<Self> {
        let input = AvatarInput {
            dx: r.read_bits(8) as u8 as i8,
            dy: r.read_bits(8) as u8 as i8,
        };
        r.check().ok().map(|_| input)
    }
}

impl AvatarInput {
    /// The bot's stick at `tick`: a new direction every half second.
    pub fn scripted(tick: u32) -> Self {
        const DIRECTIONS: [(i8, i8); 6] = [(15, 0), (10, 10), (0, 15), (-15, 5), (-5, -15), (0, 0)];
        let (dx, dy) = DIRECTIONS[(tick / 15) as usize % DIRECTIONS.len()];
        AvatarInput { dx, dy }
    }
}

/// The avatar's deterministic step, the same on the server and in client 1's prediction.
pub fn step_avatar(avatar: &mut Avatar, input: &AvatarInput) {
    avatar.x += i32::from(input.dx);
    avatar.y += i32::from(input.dy);
}

/// A projectile in flight.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "arena::Projectile")]
pub struct Projectile {
    /// ±512 m at 1 cm.
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    /// ±64 m/s at 1 cm/s.
    #[net(min = -64.0, max = 64.0, precision = 0.01)]
    pub velocity: Vec3,
}

/// A vehicle driving in circles.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "arena::Vehicle")]
pub struct Vehicle {
    /// ±512 m at 1 cm.
    #[net(min = -512.0, max = 512.0, precision = 0.01)]
    pub position: Vec3,
    /// ±32 m/s at 1 cm/s.
    #[net(min = -32.0, max = 32.0, precision = 0.01)]
    pub velocity: Vec3,
    /// Smallest-three, 12 bits per component.
    #[net(bits = 12)]
    pub rotation: Quat,
}

/// Per-projectile simulation data.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectileSim {
    /// The replicated part.
    pub state: Projectile,
    /// Seconds left to live.
    pub ttl: f32,
    /// Incremented each respawn, so a respawn can be replicated as destroy + spawn.
    pub generation: u32,
}

/// Per-vehicle simulation data.
#[derive(Debug, Clone, PartialEq)]
pub struct VehicleSim {
    /// The replicated part.
    pub state: Vehicle,
    /// Circle centre.
    pub centre: Vec3,
    /// Circle radius.
    pub radius: f32,
    /// Current angle on the circle.
    pub angle: f32,
}

/// The arena world.
#[derive(Debug, Clone)]
pub struct ArenaWorld {
    /// The players (player 0 belongs to the measured client).
    pub players: Vec<Player>,
    /// The live projectiles.
    pub projectiles: Vec<ProjectileSim>,
    /// The vehicles.
    pub vehicles: Vec<VehicleSim>,
    rng: SplitMix64,
    time: f32,
    next_acceleration_change: Vec<f32>,
}

/// What [`ArenaWorld::step`] changed structurally (respawned projectiles).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepEvents {
    /// Indices of projectiles that expired and were respawned this step.
    pub respawned_projectiles: Vec<usize>,
}

impl ArenaWorld {
    /// The standard composition: 32 players, 50 projectiles, 8 vehicles.
    pub fn new(seed: u64) -> Self {
        Self::with_counts(seed, 32, 50, 8)
    }

    /// A world with the given counts.
    pub fn with_counts(seed: u64, players: usize, projectiles: usize, vehicles: usize) -> Self {
        let mut rng = SplitMix64::new(seed);
        let range = |rng: &mut SplitMix64, r: f32| (rng.next_f64() as f32 * 2.0 - 1.0) * r;
        let players = (0..players)
            .map(|i| Player {
                position: Vec3::new(range(&mut rng, 400.0), range(&mut rng, 400.0), 0.0),
                health: 100,
                ammo: 200,
                weapon: (i % 8) as u8,
                name: format!("player-{i:02}"),
                ..Player::default()
            })
            .collect();
        let vehicles = (0..vehicles)
            .map(|i| {
                let centre = Vec3::new(range(&mut rng, 300.0), range(&mut rng, 300.0), 0.0);
                VehicleSim {
                    state: Vehicle::default(),
                    centre,
                    radius: 40.0 + 10.0 * i as f32,
                    angle: range(&mut rng, std::f32::consts::PI),
                }
            })
            .collect();
        let mut world = Self {
            players,
            projectiles: Vec::new(),
            vehicles,
            rng,
            time: 0.0,
            next_acceleration_change: Vec::new(),
        };
        world.next_acceleration_change = vec![0.0; world.players.len()];
        for i in 0..projectiles {
            let p = world.new_projectile(i as u32);
            // Stagger lifetimes so respawns spread over time.
            world.projectiles.push(ProjectileSim {
                ttl: 2.0 * (i as f32 + 1.0) / projectiles as f32,
                ..p
            });
        }
        world.step(0.0);
        world
    }

    fn new_projectile(&mut self, generation: u32) -> ProjectileSim {
        let shooter = if self.players.is_empty() {
            Vec3::ZERO
        } else {
            self.players[self.rng.below(self.players.len() as u64) as usize].position
        };
        let angle = self.rng.next_f64() as f32 * std::f32::consts::TAU;
        let elevation = self.rng.next_f64() as f32 * 0.3;
        let dir = Vec3::new(
            angle.cos() * elevation.cos(),
            angle.sin() * elevation.cos(),
            elevation.sin(),
        );
        ProjectileSim {
            state: Projectile {
                position: shooter + Vec3::Z * 1.5,
                velocity: dir * 40.0,
            },
            ttl: 2.0,
            generation,
        }
    }

    /// Advances the simulation by `dt` seconds.
    pub fn step(&mut self, dt: f32) -> StepEvents {
        self.time += dt;
        let mut events = StepEvents::default();
        let clamp = |v: Vec3| {
            v.clamp(
                Vec3::splat(-ARENA_HALF_EXTENT),
                Vec3::splat(ARENA_HALF_EXTENT),
            )
        };
        for (i, p) in self.players.iter_mut().enumerate() {
            if self.time >= self.next_acceleration_change[i] {
                self.next_acceleration_change[i] =
                    self.time + 0.25 + self.rng.next_f64() as f32 * 0.5;
                // A quarter of the players stand still at any moment.
                if self.rng.chance(0.25) {
                    p.acceleration = Vec3::ZERO;
                    p.velocity = Vec3::ZERO;
                } else {
                    let a = self.rng.next_f64() as f32 * std::f32::consts::TAU;
                    p.acceleration = Vec3::new(a.cos(), a.sin(), 0.0) * 4.0;
                }
                if self.rng.chance(0.1) {
                    p.weapon = self.rng.below(8) as u8;
                }
            }
            if p.acceleration != Vec3::ZERO {
                p.velocity = (p.velocity + p.acceleration * dt).clamp_length_max(6.0);
            }
            p.position = clamp(p.position + p.velocity * dt);
            if p.velocity.length_squared() > 0.01 {
                p.yaw = p.velocity.y.atan2(p.velocity.x).to_degrees();
            }
            p.pitch = (self.time * 0.7 + i as f32).sin() * 20.0;
            if self.rng.chance(0.02) {
                p.health = p.health.saturating_sub(self.rng.below(20) as u8);
                if p.health == 0 {
                    p.health = 100;
                }
            }
            if self.rng.chance(0.05) {
                p.ammo = if p.ammo == 0 { 200 } else { p.ammo - 1 };
            }
        }
        for i in 0..self.projectiles.len() {
            let pr = &mut self.projectiles[i];
            pr.ttl -= dt;
            if pr.ttl <= 0.0 {
                let generation = pr.generation + 1;
                self.projectiles[i] = self.new_projectile(generation);
                events.respawned_projectiles.push(i);
                continue;
            }
            pr.state.velocity.z -= 9.81 * dt;
            pr.state.position = clamp(pr.state.position + pr.state.velocity * dt);
        }
        for v in &mut self.vehicles {
            let omega = 15.0 / v.radius;
            v.angle += omega * dt;
            let offset = Vec3::new(v.angle.cos(), v.angle.sin(), 0.0) * v.radius;
            v.state.position = clamp(v.centre + offset);
            let tangent = Vec3::new(-v.angle.sin(), v.angle.cos(), 0.0);
            v.state.velocity = tangent * 15.0;
            v.state.rotation = Quat::from_rotation_z(tangent.y.atan2(tangent.x));
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn motion_stays_in_spec() {
        let mut w = ArenaWorld::new(1);
        let mut respawns = 0;
        for _ in 0..300 {
            respawns += w.step(1.0 / 30.0).respawned_projectiles.len();
            assert_eq!(w.projectiles.len(), 50);
            for p in &w.players {
                assert!(p.velocity.length() <= 6.0 + 1e-3);
                assert!(p.position.abs().max_element() <= ARENA_HALF_EXTENT);
            }
            for v in &w.vehicles {
                assert!((v.state.velocity.length() - 15.0).abs() < 1e-3);
            }
        }
        // 10 s with 2 s lifetimes: every projectile respawned about 5 times.
        assert!((200..=300).contains(&respawns), "{respawns}");
        let still = w
            .players
            .iter()
            .filter(|p| p.velocity == Vec3::ZERO)
            .count();
        assert!(still > 0 && still < 20, "{still}");
    }

    #[test]
    fn deterministic() {
        let run = |seed| {
            let mut w = ArenaWorld::new(seed);
            for _ in 0..100 {
                w.step(1.0 / 30.0);
            }
            w.players[3].position
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
