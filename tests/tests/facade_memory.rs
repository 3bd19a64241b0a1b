//! The facade over the in-memory transport with a simulated clock (deterministic):
//! convergence over a bad link with a small packet cap the transport enforces,
//! disconnects in both directions, and configuration checks.

use replicate::interest::BandwidthBudget;
use replicate::internals::link::LinkConditioner;
use replicate::transport::memory::{MemoryClientTransport, MemoryServerTransport};
use replicate::{
    Client, ClientConfig, ClientEvent, DisconnectReason, ProtocolRegistry, Replicated, Server,
    ServerConfig, ServerEvent,
};
use std::sync::Arc;
use std::time::Duration;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "facade_memory::Crate")]
struct Crate {
    #[net(min = -100.0, max = 100.0, precision = 0.01)]
    position: glam::Vec3,
    #[net(bits = 10)]
    hp: u16,
}

type MemServer = Server<MemoryServerTransport>;
type MemClient = Client<MemoryClientTransport>;

fn setup(
    conditioner: LinkConditioner,
    max_packet: usize,
    clients: usize,
) -> (MemServer, Vec<MemClient>) {
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport = MemoryServerTransport::with_limits(conditioner, 42, max_packet, 16);
    let network = transport.network();
    let server = Server::new(
        transport,
        registry.clone(),
        ServerConfig {
            max_packet_bytes: max_packet,
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let clients = (0..clients)
        .map(|_| {
            Client::new(
                network.connect(&[]),
                registry.clone(),
                ClientConfig {
                    max_packet_bytes: max_packet,
                    ..ClientConfig::default()
                },
            )
            .unwrap()
        })
        .collect();
    (server, clients)
}

fn converged(server: &MemServer, client: &MemClient) -> bool {
    client.is_connected()
        && client.object_count() == server.objects().len()
        && server.objects().handles_iter().all(|h| {
            client.get::<Crate>(h).is_some() && server.get::<Crate>(h).is_some() && {
                let ours = server.objects().state(h).unwrap();
                ours.eq_dyn(client.world().object(h).unwrap().state())
            }
        })
}

#[test]
fn converges_over_a_bad_link_with_a_small_packet_cap() {
    let (mut server, mut clients) = setup(LinkConditioner::bad(), 300, 4);
    let crates: Vec<_> = (0..40)
        .map(|i| {
            server
                .spawn(Crate {
                    position: glam::Vec3::splat(i as f32),
                    hp: 100,
                })
                .unwrap()
        })
        .collect();
    let dt = Duration::from_millis(16);
    let mut now = Duration::ZERO;
    let mut connected = 0;
    for tick in 0..6000u32 {
        now += dt;
        if tick < 300 {
            for (i, &h) in crates.iter().enumerate() {
                let c = server.get_mut::<Crate>(h).unwrap();
                c.position.x = ((tick as f32) * 0.1 + i as f32).sin() * 90.0;
                if (tick as usize + i).is_multiple_of(17) {
                    c.hp = (c.hp + 7) % 1000;
                }
            }
        }
        server.tick(now).unwrap();
        connected += server
            .events()
            .filter(|e| matches!(e, ServerEvent::ClientConnected { .. }))
            .count();
        for c in &mut clients {
            c.tick(now).unwrap();
            let _ = c.events();
        }
        if tick > 300 && clients.iter().all(|c| converged(&server, c)) {
            break;
        }
    }
    assert_eq!(connected, 4);
    for (i, c) in clients.iter().enumerate() {
        assert!(converged(&server, c), "client {i}: {:?}", c.state());
        // The transport refuses anything over 300 bytes: everything went through it.
        let s = c.stats();
        assert!(s.packets_in > 0 && s.bytes_in > 0);
    }
    let id = server.clients().next().unwrap();
    let stats = server.stats(id).unwrap();
    assert!(stats.packets_lost > 0, "the bad link loses packets");
    assert!(stats.bytes_out as f64 / stats.packets_out as f64 <= 300.0);
    assert_eq!(
        server.bits_per_type(id).first().map(|(n, _)| *n),
        Some("facade_memory::Crate")
    );
    // The receiving side counts too: one type, and no more bits than the payloads held.
    for c in &clients {
        let got = c.bits_per_type();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "facade_memory::Crate");
        assert!(got[0].1 > 0 && got[0].1 <= c.stats().bytes_in * 8);
    }
}

#[test]
fn disconnects_are_reported_on_both_sides() {
    let (mut server, mut clients) = setup(LinkConditioner::perfect(), 1200, 2);
    server.spawn(Crate::default()).unwrap();
    let mut now = Duration::ZERO;
    let mut run = |server: &mut MemServer, clients: &mut [MemClient], ticks: u32| {
        let mut sev = Vec::new();
        let mut cev = vec![Vec::new(); clients.len()];
        for _ in 0..ticks {
            now += Duration::from_millis(16);
            server.tick(now).unwrap();
            sev.extend(server.events());
            for (i, c) in clients.iter_mut().enumerate() {
                c.tick(now).unwrap();
                cev[i].extend(c.events());
            }
        }
        (sev, cev)
    };
    let (_, cev) = run(&mut server, &mut clients, 20);
    for ev in &cev {
        assert_eq!(ev.first(), Some(&ClientEvent::Connected));
        assert!(ev.iter().any(|e| matches!(e, ClientEvent::Spawned { .. })));
    }
    let ids: Vec<_> = server.clients().collect();
    assert_eq!(ids.len(), 2);

    // The server kicks the first client; the second leaves by itself.
    server.disconnect(ids[0]);
    clients[1].disconnect();
    let (sev, cev) = run(&mut server, &mut clients, 20);
    assert_eq!(
        clients[0].disconnect_reason(),
        Some(DisconnectReason::ClosedByServer)
    );
    assert!(cev[0].contains(&ClientEvent::Disconnected {
        reason: DisconnectReason::ClosedByServer
    }));
    assert_eq!(
        clients[1].disconnect_reason(),
        Some(DisconnectReason::ClosedByClient)
    );
    assert!(sev.contains(&ServerEvent::ClientDisconnected {
        client: ids[1],
        reason: DisconnectReason::ClosedByClient
    }));
    assert_eq!(server.client_count(), 0);
    // Disconnected clients stay disconnected and quiet.
    let before = clients[0].stats().packets_out;
    let _ = run(&mut server, &mut clients, 10);
    assert_eq!(clients[0].stats().packets_out, before);
}

#[test]
fn invalid_configurations_are_refused() {
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport = MemoryServerTransport::with_limits(LinkConditioner::perfect(), 1, 500, 4);
    let err = Server::new(transport, registry.clone(), ServerConfig::default()).unwrap_err();
    assert!(err.to_string().contains("max_packet_bytes"), "{err}");

    let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
    let mut config = ServerConfig::default();
    config.connection.protocol_tag = replicate::internals::facade::CONTROL_TAG;
    assert!(Server::new(transport, registry.clone(), config).is_err());

    let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
    let config = ServerConfig {
        max_packet_bytes: 4,
        ..ServerConfig::default()
    };
    assert!(Server::new(transport, registry, config).is_err());
}

#[test]
fn scope_per_client_through_the_server() {
    let (mut server, mut clients) = setup(LinkConditioner::lan(), 1200, 2);
    let a = server.spawn(Crate::default()).unwrap();
    let b = server.spawn(Crate::default()).unwrap();
    let mut now = Duration::ZERO;
    let mut run = |server: &mut MemServer, clients: &mut [MemClient], ticks: u32| {
        for _ in 0..ticks {
            now += Duration::from_millis(16);
            server.tick(now).unwrap();
            let _ = server.events();
            for c in clients.iter_mut() {
                c.tick(now).unwrap();
                let _ = c.events();
            }
        }
    };
    run(&mut server, &mut clients, 30);
    let ids: Vec<_> = server.clients().collect();
    assert_eq!(ids.len(), 2);
    assert!(clients.iter().all(|c| c.object_count() == 2));
    // Which client has which id: the ids follow the connection order.
    assert!(server.set_in_scope(ids[0], b, false));
    assert!(!server.set_in_scope(999, b, false));
    server.get_mut::<Crate>(a).unwrap().hp = 5;
    run(&mut server, &mut clients, 30);
    let counts: Vec<usize> = clients.iter().map(|c| c.object_count()).collect();
    assert!(counts.contains(&1) && counts.contains(&2), "{counts:?}");
    for c in &clients {
        assert_eq!(c.get::<Crate>(a).map(|x| x.hp), Some(5));
    }
}

/// A chat line: messages are replicated types too.
#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "facade_memory::Chat")]
struct Chat {
    #[net(bits = 16)]
    seq: u16,
    #[net(max_len = 64)]
    text: String,
}

#[test]
fn reliable_messages_both_ways_over_a_bad_link() {
    let (mut server, mut clients) = setup(LinkConditioner::bad(), 1200, 1);
    let mut now = Duration::ZERO;
    let mut client_sent = 0u16;
    let mut at_server = Vec::new();
    let mut at_client = Vec::new();
    for tick in 0..5000u32 {
        now += Duration::from_millis(16);
        server.tick(now).unwrap();
        for e in server.events() {
            if let ServerEvent::ClientConnected { client, .. } = e {
                for seq in 0..20u16 {
                    let line = Chat {
                        seq,
                        text: format!("welcome {seq}"),
                    };
                    server
                        .send_message(
                            client,
                            &line,
                            replicate::internals::blob::DeliveryMode::ReliableOrdered,
                        )
                        .unwrap();
                }
            }
        }
        for (from, m) in server.receive_messages() {
            at_server.push((from, m.take::<Chat>().unwrap().seq));
        }
        let c = &mut clients[0];
        c.tick(now).unwrap();
        let _ = c.events();
        if c.is_connected() && client_sent < 20 && tick % 3 == 0 {
            let line = Chat {
                seq: client_sent,
                text: "hi".into(),
            };
            c.send_message(
                &line,
                replicate::internals::blob::DeliveryMode::ReliableOrdered,
            )
            .unwrap();
            client_sent += 1;
        }
        at_client.extend(
            c.receive_messages()
                .into_iter()
                .map(|m| m.take::<Chat>().unwrap()),
        );
        if at_server.len() == 20 && at_client.len() == 20 {
            break;
        }
    }
    let id = server.clients().next().unwrap();
    let seqs: Vec<u16> = at_server.iter().map(|&(_, s)| s).collect();
    assert_eq!(seqs, (0..20).collect::<Vec<_>>(), "exactly once, in order");
    assert!(at_server.iter().all(|&(from, _)| from == id));
    assert_eq!(
        at_client,
        (0..20)
            .map(|seq| Chat {
                seq,
                text: format!("welcome {seq}")
            })
            .collect::<Vec<_>>()
    );
    assert!(
        server
            .send_message(
                999,
                &Chat::default(),
                replicate::internals::blob::DeliveryMode::Unreliable
            )
            .is_err()
    );
}

#[test]
fn a_bandwidth_budget_per_client_limits_what_it_is_sent() {
    let (mut server, mut clients) = setup(LinkConditioner::perfect(), 1200, 2);
    let crates: Vec<_> = (0..60)
        .map(|_| server.spawn(Crate::default()).unwrap())
        .collect();
    let mut now = Duration::ZERO;
    let mut tick = |server: &mut MemServer, clients: &mut [MemClient], n: u32| {
        for _ in 0..n {
            now += Duration::from_millis(33);
            for (i, &h) in crates.iter().enumerate() {
                let c = server.get_mut::<Crate>(h).unwrap();
                c.position.x = (now.as_secs_f32() * 3.0 + i as f32).sin() * 90.0;
                c.position.y = (now.as_secs_f32() * 2.0 + i as f32).cos() * 90.0;
            }
            server.tick(now).unwrap();
            let _ = server.events();
            for c in clients.iter_mut() {
                c.tick(now).unwrap();
                let _ = c.events();
            }
        }
    };
    tick(&mut server, &mut clients, 10);
    let ids: Vec<_> = server.clients().collect();
    assert_eq!(ids.len(), 2);
    assert!(server.set_bandwidth_budget(ids[0], BandwidthBudget::BytesPerSecond(1_000)));
    assert!(server.set_view_position(ids[1], glam::Vec3::ZERO));
    let before: Vec<u64> = ids
        .iter()
        .map(|&id| server.stats(id).unwrap().bytes_out)
        .collect();
    tick(&mut server, &mut clients, 90); // about 3 s
    let sent: Vec<u64> = ids
        .iter()
        .map(|&id| server.stats(id).unwrap().bytes_out)
        .zip(&before)
        .map(|(after, before)| after - before)
        .collect();
    // 1 kB/s for 3 s, plus one burst and packet headers; the other is unthrottled
    // (and, the crates moving smoothly, well compressed).
    assert!(sent[0] < 6_000, "{sent:?}");
    assert!(sent[1] > 2 * sent[0], "{sent:?}");
}

#[test]
fn object_rpcs_run_in_a_client_handler_exactly_once_in_order() {
    let (mut server, mut clients) = setup(LinkConditioner::bad(), 1200, 1);
    let target = server.spawn(Crate::default()).unwrap();
    type Log = std::sync::Mutex<Vec<(u16, Option<replicate::NetRefHandle>)>>;
    let got: Arc<Log> = Arc::default();
    let log = got.clone();
    clients[0]
        .on_message(move |line: Chat, info, world| {
            assert!(info.target.is_none_or(|h| world.get::<Crate>(h).is_some()));
            log.lock().unwrap().push((line.seq, info.target));
        })
        .unwrap();
    let mut now = Duration::ZERO;
    let mut sent = 0u16;
    for _ in 0..5000u32 {
        now += Duration::from_millis(16);
        server.tick(now).unwrap();
        let id = server.clients().next();
        if let Some(id) = id
            && sent < 30
        {
            let line = Chat {
                seq: sent,
                text: "rpc".into(),
            };
            // Held until the crate exists on that client, then sent reliably.
            server
                .send_object_message(
                    id,
                    target,
                    &line,
                    replicate::internals::blob::DeliveryMode::ReliableOrdered,
                )
                .unwrap();
            sent += 1;
        }
        clients[0].tick(now).unwrap();
        let _ = clients[0].events();
        assert!(
            clients[0].receive_messages().is_empty(),
            "the handler takes them"
        );
        if got.lock().unwrap().len() == 30 {
            break;
        }
    }
    let got = got.lock().unwrap().clone();
    assert_eq!(
        got,
        (0..30).map(|s| (s, Some(target.raw()))).collect::<Vec<_>>(),
        "exactly once, in order, to the crate"
    );
}
