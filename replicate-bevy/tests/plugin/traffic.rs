//! What goes on the wire: unchanged components cost nothing, changed ones only
//! themselves, and a lossy link only delays convergence.

use crate::common::*;
use bevy_ecs::prelude::*;
use replicate::transport::LinkConditioner;
use replicate_bevy::*;
use std::time::Duration;

/// Bits of `Health` batches client `i` has read.
fn health_bits(h: &Harness, i: usize) -> u64 {
    h.clients[i]
        .world()
        .resource::<NetClient>()
        .with_client(|c| {
            c.bits_per_type()
                .into_iter()
                .find(|(name, _)| name.ends_with("Health"))
                .map_or(0, |(_, bits)| bits)
        })
}

#[test]
fn unchanged_components_send_nothing() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    let entities: Vec<Entity> = (0..20)
        .map(|i| {
            h.spawn((
                Replicate,
                Health { hp: i },
                Position {
                    x: f32::from(i),
                    y: 0.0,
                },
            ))
        })
        .collect();
    h.steps(3);
    assert!(h.diverges(0).is_none());
    let quiet = h.batches(0);
    h.steps(30);
    assert_eq!(h.batches(0), quiet, "nothing changed: no object batch");

    // Written with equal values (Bevy's change detection fires): the core's quantized
    // compare finds nothing to send.
    h.server.add_systems(
        bevy_app::Update,
        |mut q: Query<(&mut Health, &mut Position)>| {
            for (mut health, mut position) in &mut q {
                health.set_changed();
                position.set_changed();
            }
        },
    );
    h.steps(30);
    assert_eq!(h.batches(0), quiet, "equal values: no object batch");

    // One component of one entity changes: that subobject only.
    let health_before = health_bits(&h, 0);
    h.server
        .world_mut()
        .get_mut::<Position>(entities[3])
        .unwrap()
        .x = 42.0;
    h.steps(2);
    assert_eq!(h.batches(0), quiet + 1, "one batch for the one change");
    assert_eq!(health_bits(&h, 0), health_before, "Health untouched");
    assert_eq!(h.client_get::<Position>(0, entities[3]).unwrap().x, 42.0);
}

#[test]
fn quiet_server_sends_only_keep_alives() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    for i in 0..200u8 {
        h.spawn((Replicate, Health { hp: i % 100 }));
    }
    h.steps(20);
    let client = h.client_id(0);
    let sent = |h: &Harness| h.server.world().resource::<ServerStats>().clients[&client].bytes_out;
    let before = sent(&h);
    h.steps(60); // two seconds
    let quiet_bytes = sent(&h) - before;
    // Keep-alives and acks: a few bytes per frame, nothing per entity.
    assert!(
        quiet_bytes < 60 * 40,
        "{quiet_bytes} bytes in 60 quiet frames with 200 entities"
    );
}

/// A deterministic generator for the mutations.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn clients_converge_over_a_lossy_link() {
    for seed in 1..=16 {
        converge_over_a_lossy_link(seed);
    }
}

fn converge_over_a_lossy_link(seed: u64) {
    let link = LinkConditioner {
        loss: 0.2,
        latency: Duration::from_millis(50),
        jitter: Duration::from_millis(40),
        duplicate: 0.05,
        reorder: 0.05,
        ..LinkConditioner::perfect()
    };
    let mut h = Harness::new(3, link);
    h.connect();
    let mut rng = Lcg(seed);
    let mut alive: Vec<Entity> = Vec::new();
    for frame in 0..200 {
        // Spawn, change, insert, remove and despawn at random.
        match rng.below(10) {
            0 | 1 => {
                let e = h.spawn((
                    Replicate,
                    Health {
                        hp: rng.below(100) as u8,
                    },
                ));
                alive.push(e);
            }
            2 if alive.len() > 3 => {
                let e = alive.swap_remove(rng.below(alive.len() as u64) as usize);
                h.server.world_mut().despawn(e);
            }
            3 if !alive.is_empty() => {
                let e = alive[rng.below(alive.len() as u64) as usize];
                let mut entity = h.server.world_mut().entity_mut(e);
                if rng.below(3) == 0 {
                    // Health is usually the root: its removal rebuilds the entity.
                    if entity.contains::<Health>() {
                        entity.remove::<Health>();
                    } else {
                        entity.insert(Health { hp: 1 });
                    }
                } else if entity.contains::<Position>() {
                    entity.remove::<Position>();
                } else {
                    entity.insert(Position {
                        x: frame as f32,
                        y: 1.0,
                    });
                }
            }
            _ => {
                for _ in 0..3 {
                    if alive.is_empty() {
                        break;
                    }
                    let e = alive[rng.below(alive.len() as u64) as usize];
                    let hp = rng.below(100) as u8;
                    if let Some(mut health) = h.server.world_mut().get_mut::<Health>(e) {
                        health.hp = hp;
                    }
                }
            }
        }
        h.step();
    }
    assert!(
        alive.len() >= 3,
        "seed {seed}: the run must leave entities to compare"
    );
    // Let the network quiet down: no more loss, everything in flight lands.
    h.network.set_conditioner(LinkConditioner::perfect());
    h.steps(150);
    for i in 0..3 {
        if let Some(d) = h.diverges(i) {
            panic!("seed {seed}: {d}; extra: {:?}", h.extra_entities(i));
        }
        let lost = h.clients[i]
            .world()
            .resource::<ClientStats>()
            .0
            .packets_lost;
        let server_lost: u64 = h
            .server
            .world()
            .resource::<ServerStats>()
            .clients
            .values()
            .map(|s| s.packets_lost)
            .sum();
        assert!(lost + server_lost > 0, "the link really lost packets");
    }
}

#[test]
fn components_toggled_every_frame_converge_over_a_lossy_link() {
    // A component removed and inserted again in the next frame: the new object's
    // creation can overtake the old one's destroy (its packet was lost), and late
    // updates of the old one can arrive after the new one exists.
    for seed in 0..8u64 {
        let link = LinkConditioner {
            loss: 0.3,
            latency: Duration::from_millis(30),
            jitter: Duration::from_millis(60),
            reorder: 0.2,
            ..LinkConditioner::perfect()
        };
        let mut h = Harness::new(1, link);
        h.connect();
        let entities: Vec<Entity> = (0..8)
            .map(|i| h.spawn((Replicate, Health { hp: i })))
            .collect();
        let mut rng = Lcg(seed);
        for frame in 0..120 {
            for &e in &entities {
                let mut entity = h.server.world_mut().entity_mut(e);
                match entity.get_mut::<Position>() {
                    Some(mut p) if rng.below(2) == 0 => p.x = frame as f32,
                    Some(_) => {
                        entity.remove::<Position>();
                    }
                    None => {
                        entity.insert(Position {
                            x: frame as f32,
                            y: seed as f32,
                        });
                    }
                }
            }
            h.step();
        }
        h.network.set_conditioner(LinkConditioner::perfect());
        h.steps(150);
        if let Some(d) = h.diverges(0) {
            panic!("seed {seed}: {d}");
        }
    }
}

#[test]
fn priority_decides_who_goes_first_when_packets_are_full() {
    // Small packets, one per tick: about a dozen object updates fit in each.
    let config = replicate::ServerConfig {
        max_packet_bytes: 160,
        max_packets_per_tick: 1,
        ..Default::default()
    };
    let mut h = Harness::with_config(1, LinkConditioner::perfect(), config);
    h.connect();
    let movers: Vec<Entity> = (0..100)
        .map(|i| {
            h.spawn((
                Replicate,
                Position {
                    x: f32::from(i as u8),
                    y: 0.0,
                },
            ))
        })
        .collect();
    let (urgent, plain) = (movers[0], movers[1]);
    h.server
        .world_mut()
        .entity_mut(urgent)
        .insert(NetPriority(1000.0));
    h.steps(40); // every creation lands
    assert!(h.diverges(0).is_none(), "{:?}", h.diverges(0));
    // Every entity moves every frame: the packets cannot carry it all.
    let (mut urgent_fresh, mut plain_fresh) = (0, 0);
    for frame in 1..=30 {
        for &e in &movers {
            h.server.world_mut().get_mut::<Position>(e).unwrap().y = frame as f32;
        }
        h.step();
        urgent_fresh += usize::from(h.client_get::<Position>(0, urgent).unwrap().y == frame as f32);
        plain_fresh += usize::from(h.client_get::<Position>(0, plain).unwrap().y == frame as f32);
    }
    assert!(
        urgent_fresh >= 28,
        "urgent entity fresh in {urgent_fresh} of 30 frames"
    );
    assert!(
        plain_fresh <= 10,
        "plain entity fresh in {plain_fresh} of 30 frames"
    );
}
