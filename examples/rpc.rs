//! RPCs and when they run: the server hits a tower (an RPC) and lowers its health in the
//! same tick, then sends a last RPC and destroys the tower in the same tick. On the
//! client the reliable RPC runs *before* its packet's state is applied, so the handler
//! sees the tower as it was, and the last one still finds the tower its packet
//! destroys. In-memory transport with a simulated clock: instant and deterministic.
//!
//! Run: `cargo run --example rpc`

use replicate::DeliveryMode;
use replicate::transport::LinkConditioner;
use replicate::transport::memory::MemoryServerTransport;
use replicate::{Client, ClientEvent, ProtocolRegistry, Replicated, Server, ServerEvent};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A replicated object.
#[derive(Replicated, Debug, Default)]
struct Tower {
    #[net(bits = 7)]
    health: u8,
}

/// An RPC to a tower.
#[derive(Replicated, Debug, Default)]
struct Hit {
    #[net(bits = 7)]
    damage: u8,
}

/// A hit's damage and the tower's health the client handler saw.
type HitSeen = (u8, Option<u8>);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Arc::new(ProtocolRegistry::from_inventory()?);
    let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 7);
    let network = transport.network();
    let mut server = Server::new(transport, registry.clone(), Default::default())?;
    let mut client = Client::new(network.connect(&[]), registry, Default::default())?;
    let tower = server.spawn(Tower { health: 100 })?;

    // What the handler saw: (damage, the tower's health on the client at that moment).
    let seen: Arc<Mutex<Vec<HitSeen>>> = Arc::default();
    let log = seen.clone();
    client.on_message(move |hit: Hit, info, world| {
        let health = info
            .target
            .and_then(|h| world.get::<Tower>(h))
            .map(|t| t.health);
        println!(
            "client: hit for {} runs; tower health here: {health:?}",
            hit.damage
        );
        log.lock().unwrap().push((hit.damage, health));
    })?;

    let mut now = Duration::ZERO;
    let mut client_id = None;
    for tick in 0..120u32 {
        now += Duration::from_millis(16);
        // Server frame: at tick 60 a hit and its damage; at tick 90 a last hit, then
        // the tower goes.
        if let Some(id) = client_id {
            let damage = match tick {
                60 => Some(30),
                90 => Some(70),
                _ => None,
            };
            if let Some(damage) = damage {
                server.send_object_message(
                    id,
                    tower,
                    &Hit { damage },
                    DeliveryMode::ReliableOrdered,
                )?;
                println!("server: hit for {damage}");
                if tick == 90 {
                    server.destroy(tower)?;
                    println!("server: tower destroyed");
                } else if let Some(t) = server.get_mut::<Tower>(tower) {
                    t.health -= damage;
                }
            }
        }
        server.tick(now)?;
        for event in server.events() {
            if let ServerEvent::ClientConnected { client, .. } = event {
                client_id = Some(client);
            }
        }
        // Client frame: handlers run inside tick, then the events.
        client.tick(now)?;
        for event in client.events() {
            match event {
                ClientEvent::Changed { handle, .. } => {
                    println!(
                        "client: tower health now {:?}",
                        client.get::<Tower>(handle).map(|t| t.health)
                    );
                }
                ClientEvent::Destroyed { .. } => println!("client: tower destroyed"),
                _ => {}
            }
        }
    }
    let seen = seen.lock().unwrap().clone();
    // The first hit saw 100 (its damage not applied yet); the last found the tower
    // its own packet destroyed.
    if seen != [(30, Some(100)), (70, Some(70))] {
        return Err(format!("unexpected handler order: {seen:?}").into());
    }
    println!("ok: both RPCs ran before their packets' state");
    Ok(())
}
