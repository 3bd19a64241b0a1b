//! The plugins over netcode.io UDP on 127.0.0.1, in real time.

use crate::common::{Health, Position};
use bevy_app::App;
use replicate::transport::udp::{ConnectTokenIssuer, UdpClientTransport};
use replicate_bevy::*;
use std::time::{Duration, Instant};

fn app(plugin: impl bevy_app::Plugin) -> App {
    let mut app = App::new();
    app.add_plugins(plugin)
        .replicate::<Position>()
        .replicate::<Health>();
    app
}

#[test]
fn entities_replicate_over_udp() {
    let issuer = ConnectTokenIssuer::with_random_key(0xB7);
    let net = NetServer::bind("127.0.0.1:0", &issuer, Default::default()).unwrap();
    let addr = net.local_addr().unwrap();
    let mut server = app(ServerPlugin);
    server.insert_resource(net);
    let mut clients: Vec<App> = (1..=2u64)
        .map(|id| {
            let token = issuer.issue(id, vec![addr], 30, 5).unwrap();
            let transport = UdpClientTransport::connect("127.0.0.1:0", token).unwrap();
            let mut c = app(ClientPlugin);
            c.insert_resource(NetClient::udp(transport, Default::default()).unwrap());
            c
        })
        .collect();
    let mine = server
        .world_mut()
        .spawn((
            Replicate,
            NetOwner(2),
            Health { hp: 40 },
            Position::default(),
        ))
        .id();

    let converged = |server: &App, clients: &mut [App]| {
        let x = server.world().get::<Position>(mine).unwrap().x;
        let Some(h) = server.world().resource::<ServerEntityMap>().handle(mine) else {
            return false;
        };
        clients.iter_mut().enumerate().all(|(i, c)| {
            let Some(e) = c.world().resource::<ClientEntityMap>().entity(h) else {
                return false;
            };
            let w = c.world();
            w.get::<Position>(e).is_some_and(|p| p.x == x)
                && w.get::<Health>(e) == Some(&Health { hp: 40 })
                && w.get::<Owned>(e).is_some() == (i == 1)
        })
    };
    let start = Instant::now();
    let mut moved = 0;
    let mut ok = false;
    while start.elapsed() < Duration::from_secs(10) {
        if moved < 30 {
            server.world_mut().get_mut::<Position>(mine).unwrap().x += 1.0;
            moved += 1;
        }
        server.update();
        for c in &mut clients {
            c.update();
        }
        if moved == 30 && converged(&server, &mut clients) {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ok, "clients did not converge over UDP within 10 s");
    assert_eq!(server.world().get::<Position>(mine).unwrap().x, 30.0);
    let stats = server.world().resource::<ServerStats>();
    assert_eq!(stats.clients.len(), 2);
    assert!(stats.clients.values().all(|s| s.bytes_out > 0));
}
