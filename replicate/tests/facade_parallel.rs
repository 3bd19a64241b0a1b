//! The server facade with parallel writer threads: six clients over a lossy,
//! duplicating, reordering in-memory network while objects move, are destroyed and
//! spawned. Written on two threads, every client converges once the network quiets,
//! and the server sends each client exactly the packets it sends on one thread (same
//! byte and packet counts, same client states along the way). On six threads, one
//! client each, no client can replay another's objects section: it sends the same.
//! Over a perfect network the clients are in step and share most sections.

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

/// A run on `threads` writer threads over `link` while objects move (a LAN after), and
/// the objects sections it replayed.
fn run(threads: usize, link: LinkConditioner) -> (Observed, (u64, u64)) {
    let config = ServerConfig {
        replication: ReplicationConfig {
            writer_threads: threads,
            ..ReplicationConfig::default()
        },
        ..ServerConfig::default()
    };
    let (mut server, network) = server(link, 0x9A2A, config);
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
    let observed = Observed {
        sent,
        samples,
        converged: settled,
    };
    (observed, server.replication().replayed_sections())
}

#[test]
fn two_writer_threads_converge_and_send_what_one_sends() {
    let (one, _) = run(1, LinkConditioner::bad());
    let (two, _) = run(2, LinkConditioner::bad());
    eprintln!("sent per client (packets, bytes): {:?}", one.sent);
    assert_eq!(one.converged, CLIENTS, "one thread: {one:?}");
    assert_eq!(two.converged, CLIENTS, "two threads: {two:?}");
    assert!(
        one.sent.iter().all(|&(packets, _)| packets > 100),
        "{one:?}"
    );
    assert_eq!(one, two);
    // Alone on a thread, no client can replay another's section.
    let (alone, none) = run(CLIENTS, LinkConditioner::bad());
    assert_eq!(none, (0, 0));
    assert_eq!(one, alone);
}

#[test]
fn clients_in_step_share_objects_sections_and_send_what_each_writes_alone() {
    // A perfect network: the clients' acknowledgements are in step, so most packets'
    // objects sections are written once and replayed for the other clients (which
    // joined at other times and number their packets differently).
    let (shared, replayed) = run(1, LinkConditioner::perfect());
    let (alone, none) = run(CLIENTS, LinkConditioner::perfect());
    assert_eq!(shared.converged, CLIENTS, "{shared:?}");
    assert_eq!(none, (0, 0));
    let (sections, batches) = replayed;
    assert!(
        sections > 100 && batches > sections,
        "{sections} sections ({batches} batches) replayed"
    );
    assert_eq!(
        shared, alone,
        "replayed sections are the ones each client writes alone"
    );
}
