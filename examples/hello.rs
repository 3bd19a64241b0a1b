//! The smallest server and client: one replicated door, opened by the server, seen by
//! the client, over netcode.io UDP on localhost.
//!
//! Run: `cargo run --example hello`

use replicate::transport::udp::ConnectTokenIssuer;
use replicate::{Client, ClientEvent, Replicated, Server, ServerEvent};
use std::time::{Duration, Instant};

/// A replicated object: the derive generates its wire format.
#[derive(Replicated, Debug, Default)]
struct Door {
    open: bool,
    #[net(bits = 7)]
    opened_count: u8,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The backend's key issues connect tokens; here it lives in the same process.
    let issuer = ConnectTokenIssuer::with_random_key(0x4E110);
    let mut server = Server::bind("127.0.0.1:0", &issuer, Default::default())?;
    let door = server.spawn(Door::default())?;

    let token = issuer.issue(7, vec![server.local_addr()], 30, 5)?;
    let mut client = Client::connect(token, Default::default())?;

    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        let now = start.elapsed();
        // Server frame: game logic, then one tick sends what changed.
        if now > Duration::from_secs(1)
            && let Some(d) = server.get_mut::<Door>(door).filter(|d| !d.open)
        {
            d.open = true;
            d.opened_count += 1;
        }
        server.tick(now)?;
        for event in server.events() {
            if let ServerEvent::ClientConnected { client, .. } = event {
                println!("server: client {client} connected");
            }
        }
        // Client frame: one tick receives, then react to events.
        client.tick(now)?;
        for event in client.events() {
            match event {
                ClientEvent::Connected => println!("client: connected"),
                ClientEvent::Spawned { handle, .. } | ClientEvent::Changed { handle, .. } => {
                    println!("client: door {:?}", client.get::<Door>(handle));
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(16));
    }
    client.disconnect();
    Ok(())
}
