//! The server facade with parallel writer threads: six clients over a lossy,
//! duplicating, reordering in-memory network while objects move, are destroyed and
//! spawned. Written on two threads, every client converges once the network quiets,
//! and the server sends each client exactly the packets it sends on one thread (same
//! byte and packet counts, same client states along the way).

mod common;

use common::robust_suite::*;
use replicate::internals::link::LinkConditioner;
use replicate::internals::replication::ReplicationConfig;
use replicate::{ClientConfig, ServerConfig};
use std::time::Duration;

const CLIENTS: usize = 6;
const OBJECTS: usize = 40;

/// What one run observed: per client, (packets, bytes) the server sent, and a digest
/// of the client's replicated states sampled every 50 ticks.
#[derive(Debug, PartialEq)]
struct Observed {
    sent: Vec<(u64, u64)>,
    samples: Vec<Vec<u64>>,
    converged: usize,
}

fn digest(server: &MemServer, client: &MemClient) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for handle in server.objects().handles_iter() {
        let text = match client.world().object(handle) {
            Some(o) => format!("{:?}", o.state()),
            None => "-".into(),
        };
        for b in text.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    h
}

fn run(threads: usize) -> Observed {
    let config = ServerConfig {
        replication: ReplicationConfig {
            writer_threads: threads,
            ..ReplicationConfig::default()
        },
        ..ServerConfig::default()
    };
    let (mut server, network) = server(LinkConditioner::bad(), 0x9A2A, config);
    let mut movers: Vec<_> = (0..OBJECTS)
        .map(|i| {
            server
                .spawn(Mover {
                    label: i as u32,
                    ..Mover::default()
                })
                .unwrap()
                .raw()
        })
        .collect();
    let mut clients: Vec<_> = (0..CLIENTS)
        .map(|_| client(&network, ClientConfig::default()).0)
        .collect();
    let mut now = Duration::ZERO;
    let mut samples = Vec::new();
    let mut settled = 0;
    for tick in 1..=1200u64 {
        now += TICK;
        if tick <= 400 {
            animate(&mut server, &movers, tick);
            if tick % 25 == 0 {
                let i = (tick / 25) as usize % OBJECTS;
                server.destroy(movers[i]).unwrap();
                movers[i] = server
                    .spawn(Mover {
                        label: tick as u32,
                        ..Mover::default()
                    })
                    .unwrap()
                    .raw();
            }
        }
        if tick == 400 {
            network.set_conditioner(LinkConditioner::lan());
        }
        server.tick(now).unwrap();
        let _ = server.events().count();
        for c in clients.iter_mut() {
            c.tick(now).unwrap();
            let _ = c.events().count();
        }
        if tick % 50 == 0 {
            samples.push(clients.iter().map(|c| digest(&server, c)).collect());
        }
        settled = clients.iter().filter(|c| converged(&server, c)).count();
        if tick > 400 && settled == CLIENTS {
            break;
        }
    }
    let sent = server
        .clients()
        .map(|id| {
            let s = server.stats(id).unwrap();
            (s.packets_out, s.bytes_out)
        })
        .collect();
    Observed {
        sent,
        samples,
        converged: settled,
    }
}

#[test]
fn two_writer_threads_converge_and_send_what_one_sends() {
    let one = run(1);
    let two = run(2);
    eprintln!("sent per client (packets, bytes): {:?}", one.sent);
    assert_eq!(one.converged, CLIENTS, "one thread: {one:?}");
    assert_eq!(two.converged, CLIENTS, "two threads: {two:?}");
    assert!(
        one.sent.iter().all(|&(packets, _)| packets > 100),
        "{one:?}"
    );
    assert_eq!(one, two);
}
