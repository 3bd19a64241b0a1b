//! What the plugin costs over the core, on the same Bevy world with the same seed:
//!
//! - **bytes**: the arena world (S1's composition: 32 players, 50 projectiles,
//!   8 vehicles, 30 Hz, 4 clients, perfect link) replicated through `ServerPlugin`
//!   (the first component of an entity its root, the others subobjects) and through the core
//!   directly (one root object per component, polled by a hand-written system);
//! - **CPU**: 10 000 entities whose one component changes every frame, the server's
//!   `PostUpdate` (sync and tick, no client) through the plugin and through the core
//!   directly; the difference per dirty entity is the plugin's overhead.
//!
//! Run: `cargo run --release -p replicate-bevy --example bevy_overhead -- [--quick]`

use bevy_app::{App, PostUpdate, Update};
use bevy_ecs::prelude::*;
use replicate::transport::LinkConditioner;
use replicate::transport::memory::MemoryServerTransport;
use replicate::{NetRefHandle, Replicated, ServerEvent};
use replicate_bevy::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

mod arena;

use arena::*;

/// The world's objects when the core is driven directly: one root per component.
#[derive(Resource, Default)]
struct CoreHandles(HashMap<Entity, NetRefHandle>);

/// Polls component `C` into the core directly (the baseline).
fn core_sync<C: NetComponent>(
    mut net: ResMut<NetServer>,
    mut handles: ResMut<CoreHandles>,
    changed: Query<(Entity, &C, Option<&NetOwner>), Changed<C>>,
    mut removed: RemovedComponents<C>,
) {
    let server = net.server_mut();
    for e in removed.read() {
        if let Some(h) = handles.0.remove(&e) {
            let _ = server.destroy(h);
        }
    }
    for (e, c, owner) in &changed {
        match handles.0.get(&e) {
            Some(&h) => {
                server.objects_mut().poll(h, c);
            }
            None => {
                let h = server.objects_mut().spawn_polled(c).expect("registered");
                if let Some(o) = owner {
                    let _ = server.set_owner(h, Some(o.0), true);
                }
                handles.0.insert(e, h);
            }
        }
    }
}

/// The baseline's tick: owners are given again when a client connects.
fn core_tick(
    mut net: ResMut<NetServer>,
    clock: Res<NetClock>,
    handles: Res<CoreHandles>,
    owners: Query<(Entity, &NetOwner)>,
) {
    let server = net.server_mut();
    let connected = server
        .events()
        .any(|e| matches!(e, ServerEvent::ClientConnected { .. }));
    if connected {
        for (e, o) in &owners {
            if let Some(&h) = handles.0.get(&e) {
                let _ = server.set_owner(h, Some(o.0), true);
            }
        }
    }
    server.tick(clock.now()).expect("tick");
}

fn client_app(net: NetClient) -> App {
    let mut app = App::new();
    app.add_plugins(ClientPlugin)
        .insert_resource(NetClock::fixed(TICK))
        .insert_resource(net)
        .replicate::<Player>()
        .replicate::<Projectile>()
        .replicate::<Vehicle>();
    app
}

/// Bytes the server sent to all clients over `seconds` of the arena.
fn arena_bytes(through_plugin: bool, seconds: f32) -> (u64, usize) {
    let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 0x51);
    let network = transport.network();
    let mut server = App::new();
    server
        .insert_resource(NetClock::fixed(TICK))
        .insert_resource(NetServer::new(transport, Default::default()).expect("server"))
        .insert_resource(Rng(0xA7E4A))
        .add_systems(bevy_app::Startup, spawn_world)
        .add_systems(Update, simulate);
    if through_plugin {
        server
            .add_plugins(ServerPlugin)
            .replicate::<Player>()
            .replicate::<Projectile>()
            .replicate::<Vehicle>();
    } else {
        server
            .init_resource::<CoreHandles>()
            // No plugin: the clock is advanced here.
            .add_systems(bevy_app::First, |mut c: ResMut<NetClock>| c.advance())
            .add_systems(
                PostUpdate,
                (
                    core_sync::<Player>,
                    core_sync::<Projectile>,
                    core_sync::<Vehicle>,
                    core_tick,
                )
                    .chain(),
            );
    }
    let mut clients: Vec<App> = (0..4)
        .map(|_| client_app(NetClient::memory(network.connect(b""), Default::default()).unwrap()))
        .collect();
    let ids = clients
        .iter()
        .filter_map(|c| c.world().resource::<NetClient>().local_id())
        .collect();
    server.insert_resource(ClientIds(ids));
    let frames = (seconds / TICK.as_secs_f32()) as usize;
    for _ in 0..frames {
        server.update();
        for c in &mut clients {
            c.update();
        }
    }
    let bytes = server.world().resource::<NetServer>().with_server(|s| {
        s.clients()
            .filter_map(|c| s.stats(c))
            .map(|st| st.bytes_out)
            .sum()
    });
    let entities = clients[0].world().resource::<ClientEntityMap>().len();
    (bytes, entities)
}

/// One component every entity changes every frame.
#[derive(Component, Replicated, Debug, Clone, Default, PartialEq)]
#[net(name = "bevy_overhead::Mover")]
struct Mover {
    #[net(min = -1000.0, max = 1000.0, precision = 0.01)]
    x: f32,
}

fn move_all(mut q: Query<&mut Mover>) {
    for mut m in &mut q {
        m.x = if m.x > 900.0 { -900.0 } else { m.x + 0.5 };
    }
}

/// Mean time of one frame with `n` entities all dirty, no client.
fn frame_time(through_plugin: bool, n: usize, frames: usize) -> Duration {
    let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 0x52);
    let mut server = App::new();
    server
        .insert_resource(NetClock::fixed(TICK))
        .insert_resource(NetServer::new(transport, Default::default()).expect("server"))
        .add_systems(Update, move_all);
    if through_plugin {
        server.add_plugins(ServerPlugin).replicate::<Mover>();
    } else {
        server
            .init_resource::<CoreHandles>()
            .add_systems(bevy_app::First, |mut c: ResMut<NetClock>| c.advance())
            .add_systems(PostUpdate, (core_sync::<Mover>, core_tick).chain());
    }
    for i in 0..n {
        server.world_mut().spawn((
            Replicate,
            Mover {
                x: i as f32 % 900.0,
            },
        ));
    }
    // Warm up: the spawns.
    for _ in 0..5 {
        server.update();
    }
    let start = Instant::now();
    for _ in 0..frames {
        server.update();
    }
    start.elapsed() / frames as u32
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let seconds = if quick { 3.0 } else { 10.0 };
    let (core, core_entities) = arena_bytes(false, seconds);
    let (plugin, plugin_entities) = arena_bytes(true, seconds);
    let per_client_s = |b: u64| b as f64 / 4.0 / f64::from(seconds);
    println!("arena world, 4 clients, {seconds} s, perfect link:");
    println!(
        "  core directly : {:>9} bytes sent ({:.0} B/s per client), {core_entities} entities on a client",
        core,
        per_client_s(core)
    );
    println!(
        "  through plugin: {:>9} bytes sent ({:.0} B/s per client), {plugin_entities} entities on a client, {:+.2} %",
        plugin,
        per_client_s(plugin),
        (plugin as f64 / core as f64 - 1.0) * 100.0
    );

    let (n, frames) = if quick { (10_000, 20) } else { (10_000, 100) };
    let core_t = frame_time(false, n, frames);
    let plugin_t = frame_time(true, n, frames);
    println!("{n} entities, one component each, all dirty every frame, no client:");
    println!(
        "  core directly : {:>8.2} ms per frame",
        core_t.as_secs_f64() * 1e3
    );
    println!(
        "  through plugin: {:>8.2} ms per frame, overhead {:.0} ns per dirty entity",
        plugin_t.as_secs_f64() * 1e3,
        (plugin_t.as_secs_f64() - core_t.as_secs_f64()) * 1e9 / n as f64
    );
}
