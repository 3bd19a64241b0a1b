//! The facade over real UDP on 127.0.0.1 (netcode.io): a compressed arena session where
//! every one of 8 clients converges, a client built with other replicated types is
//! refused with a clear reason on both sides, silent clients time out, and
//! unauthenticated or replayed packets change nothing.
//!
//! Built to pass on a loaded 2-core machine: converge-by-deadline loops with generous
//! deadlines, no timing assertions.

use replicate::internals::facade::ClientState;
use replicate::transport::ClientTransport;
use replicate::transport::udp::{
    ConnectTokenIssuer, UdpClientTransport, UdpServerConfig, UdpServerTransport,
};
use replicate::{
    Client, ClientConfig, ClientEvent, DisconnectReason, ProtocolRegistry, Registration,
    Replicated, Server, ServerConfig, ServerEvent,
};
use replicate_examples::arena_session::{Session, SessionConfig, SessionPhase, differences};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROTOCOL: u64 = 0xFACA_DE00_0000_0001;

/// A replicated object known to both ends.
#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "facade_test::Door")]
struct Door {
    open: bool,
    #[net(bits = 10)]
    count: u16,
}

/// A type only the mismatched client registers.
#[derive(Replicated, Debug, Default)]
#[net(name = "facade_test::OnlyOnTheClient", register = false)]
struct OnlyOnTheClient {
    value: u32,
}

struct Clock(Instant);

impl Clock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Ticks `server` and `clients` every ~5 ms until `done` or the deadline.
fn pump_until(
    clock: &Clock,
    server: &mut Server,
    clients: &mut [&mut Client],
    server_events: &mut Vec<ServerEvent>,
    client_events: &mut Vec<Vec<ClientEvent>>,
    deadline: Duration,
    mut done: impl FnMut(&Server, &[&mut Client], &[ServerEvent]) -> bool,
) -> bool {
    client_events.resize_with(clients.len(), Vec::new);
    let end = clock.now() + deadline;
    while clock.now() < end {
        server.tick(clock.now()).unwrap();
        server_events.extend(server.events());
        for (i, c) in clients.iter_mut().enumerate() {
            c.tick(clock.now()).unwrap();
            client_events[i].extend(c.events());
        }
        if done(server, clients, server_events) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn server_and_issuer(config: ServerConfig) -> (ConnectTokenIssuer, Server) {
    let issuer = ConnectTokenIssuer::with_random_key(PROTOCOL);
    let server = Server::bind("127.0.0.1:0", &issuer, config).unwrap();
    (issuer, server)
}

fn client_for(issuer: &ConnectTokenIssuer, id: u64, addr: SocketAddr, timeout: i32) -> Client {
    let token = issuer.issue(id, vec![addr], 60, timeout).unwrap();
    Client::connect(token, ClientConfig::default()).unwrap()
}

#[test]
fn eight_clients_converge_in_a_compressed_arena_session() {
    let mut config = SessionConfig::s1(8);
    config.run_for = Duration::from_secs(2);
    config.settle_timeout = Duration::from_secs(90);
    config.conditioner.loss = 0.05;
    config.conditioner.latency = Duration::from_millis(10);
    config.conditioner.jitter = Duration::from_millis(5);
    config.seed = 7;
    let mut session = Session::start(config).unwrap();
    while session.tick().unwrap() != SessionPhase::Done {}
    session.check_convergence();
    for bot in &session.bots {
        assert!(
            bot.converged,
            "client {} did not converge: state {:?}, {} of {} objects: {}",
            bot.id,
            bot.client.state(),
            bot.client.object_count(),
            session.server_objects(),
            differences(&session.server, &bot.client)
        );
        assert_eq!(bot.client.object_count(), session.server_objects());
        assert!(
            bot.spawned >= 90,
            "client {} saw {} spawns",
            bot.id,
            bot.spawned
        );
        assert!(bot.changes > 0);
        assert!(bot.client.stats().bytes_in > 0);
    }
    let per_type = session.server.bits_per_type(1);
    let names: Vec<&str> = per_type.iter().map(|(n, _)| *n).collect();
    for ty in ["arena::Player", "arena::Projectile", "arena::Vehicle"] {
        assert!(names.contains(&ty), "{per_type:?}");
    }
    // Projectiles respawn every 2 s: at least one respawn reached the clients as a
    // destroy (unless a client joined after every respawn, which 2 s of motion rules out).
    assert!(session.bots.iter().any(|b| b.destroyed > 0));
    let connected = session
        .server_events
        .iter()
        .filter(|e| matches!(e, ServerEvent::ClientConnected { .. }))
        .count();
    assert_eq!(connected, 8);
    session.finish().unwrap();
    let left = session
        .server_events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ServerEvent::ClientDisconnected {
                    reason: DisconnectReason::ClosedByClient,
                    ..
                }
            )
        })
        .count();
    // Graceful disconnects travel as netcode disconnect packets (sent redundantly);
    // on loopback they arrive.
    assert_eq!(left, 8, "{:?}", session.server_events);
}

#[test]
fn a_client_with_other_replicated_types_is_refused_on_both_sides() {
    let clock = Clock(Instant::now());
    let (issuer, mut server) = server_and_issuer(ServerConfig::default());
    let door = server.spawn(Door::default()).unwrap();

    // Same build plus one extra type: a different registry hash.
    let mut registry = ProtocolRegistry::from_inventory().unwrap();
    registry
        .register(Registration::of::<OnlyOnTheClient>())
        .unwrap();
    let registry = Arc::new(registry);
    assert_ne!(registry.hash(), server.registry_hash());
    let token = issuer.issue(5, vec![server.local_addr()], 60, 10).unwrap();
    let transport = UdpClientTransport::connect("127.0.0.1:0", token).unwrap();
    let mut bad = Client::new(transport, registry.clone(), ClientConfig::default()).unwrap();

    // A matching client next to it is served normally.
    let mut good = client_for(&issuer, 6, server.local_addr(), 10);

    let (mut sev, mut cev) = (Vec::new(), Vec::new());
    let finished = pump_until(
        &clock,
        &mut server,
        &mut [&mut bad, &mut good],
        &mut sev,
        &mut cev,
        Duration::from_secs(30),
        |_, clients, _| clients[0].is_disconnected() && clients[1].get::<Door>(door).is_some(),
    );
    assert!(finished, "bad: {:?}, good: {:?}", bad.state(), good.state());

    let expected_client_side = DisconnectReason::RegistryMismatch {
        ours: registry.hash(),
        theirs: server.registry_hash(),
    };
    assert_eq!(bad.state(), ClientState::Disconnected(expected_client_side));
    assert!(cev[0].contains(&ClientEvent::Disconnected {
        reason: expected_client_side
    }));
    assert!(!cev[0].contains(&ClientEvent::Connected));
    assert_eq!(
        bad.object_count(),
        0,
        "a refused client receives no objects"
    );
    assert!(expected_client_side.to_string().contains("rebuild both"));

    assert!(sev.contains(&ServerEvent::ClientRefused {
        client: 5,
        reason: DisconnectReason::RegistryMismatch {
            ours: server.registry_hash(),
            theirs: registry.hash(),
        },
    }));
    assert!(
        !sev.iter()
            .any(|e| matches!(e, ServerEvent::ClientConnected { client: 5, .. }))
    );
    assert_eq!(server.clients().collect::<Vec<_>>(), vec![6]);
    assert!(good.is_connected());
}

#[test]
fn silent_clients_time_out() {
    let clock = Clock(Instant::now());
    let config = ServerConfig {
        handshake_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let (issuer, mut server) = server_and_issuer(config);
    server.spawn(Door::default()).unwrap();

    // 1. A client that connects, then stops ticking altogether (netcode timeout 1 s).
    let mut quiet = client_for(&issuer, 1, server.local_addr(), 1);
    let (mut sev, mut cev) = (Vec::new(), Vec::new());
    assert!(pump_until(
        &clock,
        &mut server,
        &mut [&mut quiet],
        &mut sev,
        &mut cev,
        Duration::from_secs(30),
        |s, c, _| s.client_count() == 1 && c[0].object_count() == 1,
    ));
    let timed_out = pump_until(
        &clock,
        &mut server,
        &mut [],
        &mut sev,
        &mut cev,
        Duration::from_secs(30),
        |_, _, ev| {
            ev.contains(&ServerEvent::ClientDisconnected {
                client: 1,
                reason: DisconnectReason::TimedOut,
            })
        },
    );
    assert!(timed_out, "{sev:?}");
    assert_eq!(server.client_count(), 0);
    assert!(server.stats(1).is_none());

    // 2. A transport that connects but never sends the replication hello: dropped
    //    after the handshake timeout, never reported as connected.
    let token = issuer.issue(2, vec![server.local_addr()], 60, 10).unwrap();
    let mut mute = UdpClientTransport::connect("127.0.0.1:0", token).unwrap();
    let mut was_connected = false;
    let mut dropped = false;
    let end = clock.now() + Duration::from_secs(30);
    while clock.now() < end && !dropped {
        server.tick(clock.now()).unwrap();
        sev.extend(server.events());
        mute.update(clock.now()).unwrap();
        while let Some(e) = mute.poll_event() {
            match e {
                replicate::transport::ClientTransportEvent::Connected => was_connected = true,
                replicate::transport::ClientTransportEvent::Disconnected(_) => dropped = true,
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(was_connected && dropped, "mute client not dropped");
    assert!(!mute.is_connected());
    assert!(
        !sev.iter()
            .any(|e| matches!(e, ServerEvent::ClientConnected { client: 2, .. })),
        "{sev:?}"
    );
}

#[test]
fn unauthenticated_and_replayed_packets_change_nothing() {
    let clock = Clock(Instant::now());
    // A man in the middle: the token names the proxy, the server advertises it.
    let proxy = UdpSocket::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let issuer = ConnectTokenIssuer::with_random_key(PROTOCOL);
    let mut udp_config = UdpServerConfig::secure(&issuer, 8);
    udp_config.public_addresses = vec![proxy.local_addr().unwrap()];
    let udp = UdpServerTransport::bind("127.0.0.1:0", udp_config).unwrap();
    let server_addr = udp.local_addr();
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let mut server = Server::new(udp, registry, ServerConfig::default()).unwrap();
    let door = server.spawn(Door::default()).unwrap();
    let token = issuer
        .issue(9, vec![proxy.local_addr().unwrap()], 60, 10)
        .unwrap();
    let mut client = Client::connect(token, ClientConfig::default()).unwrap();

    let mut recorded: Vec<Vec<u8>> = Vec::new();
    let mut client_addr = None;
    let mut forward = |record: bool, recorded: &mut Vec<Vec<u8>>| {
        let mut buf = [0u8; 1500];
        while let Ok((len, from)) = proxy.recv_from(&mut buf) {
            if from == server_addr {
                if let Some(c) = client_addr {
                    let _ = proxy.send_to(&buf[..len], c);
                }
            } else {
                client_addr = Some(from);
                if record {
                    recorded.push(buf[..len].to_vec());
                }
                let _ = proxy.send_to(&buf[..len], server_addr);
            }
        }
    };

    // Run until the client has the door open with count 3.
    let end = clock.now() + Duration::from_secs(30);
    let mut step = 0u32;
    while clock.now() < end {
        step += 1;
        if step.is_multiple_of(10)
            && let Some(d) = server.get_mut::<Door>(door).filter(|d| d.count < 3)
        {
            d.count += 1;
            d.open = true;
        }
        server.tick(clock.now()).unwrap();
        let _ = server.events();
        forward(true, &mut recorded);
        client.tick(clock.now()).unwrap();
        let _ = client.events();
        forward(true, &mut recorded);
        if client.get::<Door>(door)
            == Some(&Door {
                open: true,
                count: 3,
            })
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        client.get::<Door>(door),
        Some(&Door {
            open: true,
            count: 3
        })
    );
    assert!(recorded.len() > 3, "{} client packets seen", recorded.len());
    // Let in-flight acks settle, then freeze the client (it stops sending).
    for _ in 0..20 {
        server.tick(clock.now()).unwrap();
        forward(false, &mut recorded);
        client.tick(clock.now()).unwrap();
        forward(false, &mut recorded);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The client stamps packets for clock synchronisation while connected: let the
    // server read the last ones it sent before taking the counters.
    for _ in 0..5 {
        server.tick(clock.now()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = client.events();
    let _ = server.events();
    let before = server.stats(9).cloned().unwrap();
    let received_before = server.connection(9).unwrap().stats().packets_received;
    let client_id = server.connection_id(9);

    // Replay every recorded client packet from the proxy (the client's address as the
    // server knows it), send garbage from it and from a stranger, and a forged
    // replication header from a stranger.
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut forged = vec![0xA1u8, 0xFF, 0xFF, 0xFF];
    forged.extend_from_slice(&[0u8; 60]);
    for packet in &recorded {
        proxy.send_to(packet, server_addr).unwrap();
    }
    for i in 0..50u8 {
        let garbage: Vec<u8> = (0..(i as usize * 7 % 200 + 1))
            .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i))
            .collect();
        proxy.send_to(&garbage, server_addr).unwrap();
        stranger.send_to(&garbage, server_addr).unwrap();
    }
    stranger.send_to(&forged, server_addr).unwrap();
    let mut tampered = recorded.last().unwrap().clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x55;
    proxy.send_to(&tampered, server_addr).unwrap();
    for _ in 0..40 {
        server.tick(clock.now()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }

    let events: Vec<_> = server.events().collect();
    assert!(events.is_empty(), "{events:?}");
    let after = server.stats(9).cloned().unwrap();
    assert_eq!(after.packets_in, before.packets_in, "a payload got through");
    assert_eq!(after.bytes_in, before.bytes_in);
    assert_eq!(after.packets_rejected, before.packets_rejected);
    assert_eq!(
        server.connection(9).unwrap().stats().packets_received,
        received_before
    );
    assert_eq!(server.clients().collect::<Vec<_>>(), vec![9]);
    assert_eq!(server.connection_id(9), client_id);
    assert_eq!(
        server.get::<Door>(door),
        Some(&Door {
            open: true,
            count: 3
        })
    );

    // The client, resumed, is still served.
    server.get_mut::<Door>(door).unwrap().count = 4;
    let end = clock.now() + Duration::from_secs(30);
    while clock.now() < end && client.get::<Door>(door).map(|d| d.count) != Some(4) {
        server.tick(clock.now()).unwrap();
        forward(false, &mut recorded);
        client.tick(clock.now()).unwrap();
        forward(false, &mut recorded);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(client.get::<Door>(door).map(|d| d.count), Some(4));
    assert!(client.is_connected());
}
