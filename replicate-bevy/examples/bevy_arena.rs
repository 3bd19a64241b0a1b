//! The arena through the Bevy plugin: one headless server app and several headless
//! client apps in one process. 32 players (each owned by a client, its ammo visible to
//! the owner only), 50 projectiles that live 2 s, 8 vehicles driving circles; clients
//! fire through a validated message and the server spawns their projectiles.
//!
//! By default over the in-memory transport with a lossy link (5 % loss, 30 ms ± 20 ms)
//! and a simulated clock (runs as fast as it can); `--udp` uses netcode.io over UDP on
//! 127.0.0.1 in real time. After the run the link turns perfect for a second and every
//! client must hold exactly the server's entities with the server's quantized state:
//! the exit code is 1 if one diverges.
//!
//! Run: `cargo run -p replicate-bevy --example bevy_arena -- [--quick] [--udp] [--clients N] [--seconds S]`

use bevy_app::{App, Update};
use bevy_ecs::prelude::*;
use replicate::transport::memory::{MemoryNetwork, MemoryServerTransport};
use replicate::transport::udp::{ConnectTokenIssuer, UdpClientTransport};
use replicate::transport::{ClientId, LinkConditioner};
use replicate::{DeliveryMode, Replicated};
use replicate_bevy::*;
use std::time::{Duration, Instant};

mod arena;

use arena::*;

/// Client → server: fire from my player.
#[derive(Replicated, Debug, Clone, Default)]
#[net(name = "bevy_arena::Fire")]
struct Fire {
    #[net(min = -180.0, max = 180.0, bits = 12)]
    yaw: f32,
}

fn register(app: &mut App) {
    app.replicate::<Player>()
        .replicate::<Projectile>()
        .replicate::<Vehicle>()
        .add_net_message::<Fire>();
}

/// Clients fire; the server spends their player's ammo and spawns the projectile.
fn handle_fire(
    mut commands: Commands,
    mut fires: MessageReader<FromClient<Fire>>,
    mut players: Query<(&mut Player, &NetOwner)>,
    mut fired: ResMut<FireCount>,
) {
    for fire in fires.read() {
        if let Some((mut p, _)) = players
            .iter_mut()
            .find(|(p, o)| o.0 == fire.client && p.ammo > 0)
        {
            p.ammo -= 1;
            let from = p.position;
            spawn_projectile(&mut commands, from, fire.message.yaw);
            fired.0 += 1;
        }
    }
}

#[derive(Resource, Default)]
struct FireCount(u64);

/// Whether the simulation runs (it stops for the settling second).
#[derive(Resource)]
struct Running(bool);

/// Client side: fire about once a second while connected.
fn client_fire(mut frame: Local<u32>, net: Res<NetClient>, mut out: MessageWriter<ToServer<Fire>>) {
    *frame += 1;
    if net.is_connected() && (*frame).is_multiple_of(30) {
        out.write(ToServer {
            message: Fire {
                yaw: (*frame % 360) as f32 - 180.0,
            },
            mode: DeliveryMode::ReliableOrdered,
            target: None,
        });
    }
}

struct Options {
    seconds: f32,
    clients: usize,
    udp: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        seconds: 10.0,
        clients: 4,
        udp: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.seconds = 3.0,
            "--udp" => o.udp = true,
            "--clients" => {
                o.clients = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--clients needs a positive number")?;
            }
            "--seconds" => {
                o.seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--seconds needs a number")?;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

/// Differences between the server's quantized state and client `app`'s.
fn divergence(server: &mut App, client: &mut App) -> Vec<String> {
    let local = client.world().resource::<NetClient>().local_id();
    let mut problems = Vec::new();
    let sw = server.world_mut();
    let mut q = sw.query::<(
        Entity,
        Option<&Player>,
        Option<&Projectile>,
        Option<&Vehicle>,
        Option<&NetOwner>,
    )>();
    let server_entities: Vec<_> = q
        .iter(sw)
        .filter(|(_, a, b, c, _)| a.is_some() || b.is_some() || c.is_some())
        .map(|(e, p, pr, v, o)| (e, p.cloned(), pr.cloned(), v.cloned(), o.copied()))
        .collect();
    let smap = sw.resource::<ServerEntityMap>();
    let cw = client.world();
    let cmap = cw.resource::<ClientEntityMap>();
    for (e, player, projectile, vehicle, owner) in &server_entities {
        let Some(ce) = smap.handle(*e).and_then(|h| cmap.entity(h)) else {
            problems.push(format!("missing {e}"));
            continue;
        };
        if let Some(p) = player {
            let mut expected = p.clone();
            if owner.map(|o| o.0) != local {
                expected.ammo = 0; // owner-only
            }
            let same = cw
                .get::<Player>(ce)
                .is_some_and(|c| c.to_state() == expected.to_state());
            if !same {
                problems.push(format!("player {e} differs"));
            }
            let owned = cw.get::<Owned>(ce).is_some();
            if owned != (owner.map(|o| o.0) == local) {
                problems.push(format!("ownership marker of {e} wrong"));
            }
        }
        if let Some(p) = projectile
            && !cw
                .get::<Projectile>(ce)
                .is_some_and(|c| c.to_state() == p.to_state())
        {
            problems.push(format!("projectile {e} differs"));
        }
        if let Some(v) = vehicle
            && !cw
                .get::<Vehicle>(ce)
                .is_some_and(|c| c.to_state() == v.to_state())
        {
            problems.push(format!("vehicle {e} differs"));
        }
    }
    if cmap.len() != server_entities.len() {
        problems.push(format!(
            "{} entities here, {} on the server",
            cmap.len(),
            server_entities.len()
        ));
    }
    // The states compared are quantized: keep the diff small in the output.
    problems.truncate(5);
    problems
}

fn main() -> std::process::ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bevy_arena: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bevy_arena: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(o: &Options) -> Result<bool, Box<dyn std::error::Error>> {
    let lossy = LinkConditioner {
        loss: 0.05,
        latency: Duration::from_millis(30),
        jitter: Duration::from_millis(20),
        ..LinkConditioner::perfect()
    };
    let mut server = App::new();
    server.add_plugins(ServerPlugin);
    register(&mut server);
    server
        .insert_resource(Rng(0xA7E4A))
        .init_resource::<FireCount>()
        .insert_resource(Running(true))
        .add_systems(
            Update,
            (simulate, handle_fire).run_if(|r: Res<Running>| r.0),
        )
        .validate_net_message::<Fire>(|_, fire: &Fire, _| fire.yaw.is_finite());

    let mut clients: Vec<App> = Vec::new();
    let mut network: Option<MemoryNetwork> = None;
    let make_client = |net: NetClient, clock: NetClock| {
        let mut app = App::new();
        app.add_plugins(ClientPlugin);
        register(&mut app);
        app.insert_resource(clock)
            .insert_resource(net)
            .add_systems(Update, client_fire);
        app
    };
    let ids: Vec<ClientId> = (1..=o.clients as u64).collect();
    if o.udp {
        let issuer = ConnectTokenIssuer::with_random_key(0xA7E4A);
        let net = NetServer::bind("127.0.0.1:0", &issuer, Default::default())?;
        let addr = net.local_addr().ok_or("no address")?;
        server
            .insert_resource(net)
            .insert_resource(NetClock::real());
        for &id in &ids {
            let token = issuer.issue(id, vec![addr], 30, 5)?;
            let transport = UdpClientTransport::connect("127.0.0.1:0", token)?;
            clients.push(make_client(
                NetClient::udp(transport, Default::default())?,
                NetClock::real(),
            ));
        }
    } else {
        let transport = MemoryServerTransport::new(lossy, 0xA7E4A);
        let net = transport.network();
        server
            .insert_resource(NetServer::new(transport, Default::default())?)
            .insert_resource(NetClock::fixed(TICK));
        for _ in &ids {
            clients.push(make_client(
                NetClient::memory(net.connect(b""), Default::default())?,
                NetClock::fixed(TICK),
            ));
        }
        network = Some(net);
    }
    let client_ids: Vec<ClientId> = clients
        .iter()
        .filter_map(|c| c.world().resource::<NetClient>().local_id())
        .collect();
    server.insert_resource(ClientIds(client_ids));
    server.add_systems(bevy_app::Startup, spawn_world);

    let frames = (o.seconds / TICK.as_secs_f32()) as usize;
    let settle = (1.0 / TICK.as_secs_f32()) as usize;
    let wall = Instant::now();
    for frame in 0..frames + settle {
        if frame == frames
            && let Some(net) = &network
        {
            // Quiet down: everything in flight lands, nothing more is lost.
            net.set_conditioner(LinkConditioner::perfect());
        }
        let started = Instant::now();
        // The last second: the world stands still so the clients can catch up.
        if frame == frames {
            server.insert_resource(Running(false));
        }
        server.update();
        for c in &mut clients {
            c.update();
        }
        if o.udp {
            std::thread::sleep(TICK.saturating_sub(started.elapsed()));
        }
    }

    let mut all_converged = true;
    let entities = server.world().resource::<ServerEntityMap>().len();
    let fired = server.world().resource::<FireCount>().0;
    println!(
        "bevy_arena: {} clients, {:.1} s simulated + 1 s settling in {:.2} s, {} entities on the server, {fired} shots fired by clients, over {}",
        clients.len(),
        o.seconds,
        wall.elapsed().as_secs_f32(),
        entities,
        if o.udp {
            "UDP"
        } else {
            "a lossy in-memory link"
        },
    );
    for (i, c) in clients.iter_mut().enumerate() {
        let stats = c.world().resource::<ClientStats>().0.clone();
        let problems = divergence(&mut server, c);
        let ok = problems.is_empty();
        all_converged &= ok;
        println!(
            "  client {}: {} entities, {} bytes in, {} packets lost, {}",
            i + 1,
            c.world().resource::<ClientEntityMap>().len(),
            stats.bytes_in,
            stats.packets_lost,
            if ok {
                "converged".to_string()
            } else {
                format!("DIVERGED: {problems:?}")
            }
        );
    }
    if fired == 0 {
        println!("bevy_arena: no client message reached the server");
        all_converged = false;
    }
    println!(
        "bevy_arena: {}",
        if all_converged {
            "ok: every client converged"
        } else {
            "FAILED"
        }
    );
    Ok(all_converged)
}
