//! Read errors are never silent. Over a transport that breaks the integrity contract
//! (the in-memory link flips one bit in 2 % of the packet copies, seeded) for 1200
//! ticks and then a clean link, every client either converges to the server's state
//! or was closed with `DisconnectReason::ReadError`, reported on both sides. Objects a
//! client could not read are reported, destroyed there and created again
//! (`ServerEvent::ObjectRecovered`).
//!
//! What no reader can see: a flipped bit inside a member value that still decodes. It
//! is applied like any value, and when it lands in a nominated baseline every later
//! delta builds on it. That is why transports must deliver payloads intact or not at
//! all (`transport` module docs; UDP authenticates every packet). The runs allow one
//! such client in eight: the rare-corruption run, where clients stay connected long
//! enough for it, sees two or three of 32 (a lean format has few bits whose flip it can
//! detect: most flips in a plain update decode).

mod common;

use common::robust_suite::*;
use replicate::internals::link::LinkConditioner;
use replicate::internals::replication::ReplicationEvent;
use replicate::{ClientConfig, ClientEvent, DisconnectReason, ServerConfig, ServerEvent};
use std::collections::BTreeMap;
use std::time::Duration;

const CLIENTS: usize = 4;
const OBJECTS: usize = 30;

#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    converged: usize,
    /// Connected and readable, yet holding a wrong value: a flipped bit inside a
    /// member decoded as a valid value (see the module docs).
    diverged: usize,
    closed_read_error: usize,
    recovered: usize,
    object_errors: usize,
}

fn run(seed: u64, rate: f32, corrupt_ticks: u64) -> Outcome {
    let corrupt = LinkConditioner {
        corrupt: rate,
        ..LinkConditioner::lan()
    };
    let (mut server, network) = server(corrupt, seed, ServerConfig::default());
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
    let ids: Vec<_> = clients.iter().map(|c| c.transport().inner.id()).collect();
    let mut server_reasons = BTreeMap::new();
    let mut outcome = Outcome::default();
    let mut now = Duration::ZERO;
    let mut tick = 0u64;
    let mut step = |server: &mut MemServer,
                    clients: &mut Vec<MemClient>,
                    movers: &mut Vec<replicate::NetRefHandle>,
                    outcome: &mut Outcome,
                    animating: bool| {
        tick += 1;
        now += TICK;
        if animating {
            animate(server, movers, tick);
            if tick % 40 == 0 {
                // Some churn: creations and destroys cross the bad link too.
                let i = (tick / 40) as usize % OBJECTS;
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
        server.tick(now).unwrap();
        for e in server.events() {
            match e {
                ServerEvent::ClientDisconnected { client, reason } => {
                    server_reasons.insert(client, reason);
                }
                ServerEvent::ObjectRecovered { .. } => outcome.recovered += 1,
                _ => {}
            }
        }
        for c in clients.iter_mut() {
            c.tick(now).unwrap();
            for e in c.events() {
                if let ClientEvent::Replication(ReplicationEvent::ObjectError { .. }) = e {
                    outcome.object_errors += 1;
                }
            }
        }
    };
    for _ in 0..corrupt_ticks {
        step(&mut server, &mut clients, &mut movers, &mut outcome, true);
    }
    network.set_conditioner(LinkConditioner::lan());
    // A few more seconds of play on the clean link, then the world holds still.
    for _ in 0..90 {
        step(&mut server, &mut clients, &mut movers, &mut outcome, true);
    }
    for _ in 0..600 {
        step(&mut server, &mut clients, &mut movers, &mut outcome, false);
        if clients
            .iter()
            .all(|c| c.is_disconnected() || converged(&server, c))
        {
            break;
        }
    }
    for (i, c) in clients.iter().enumerate() {
        if c.is_disconnected() {
            assert_eq!(
                c.disconnect_reason(),
                Some(DisconnectReason::ReadError),
                "seed {seed}, client {i}: closed for another reason (server: {:?}, stats {:?})",
                server_reasons.get(&ids[i]),
                c.stats()
            );
            assert_eq!(
                server_reasons.get(&ids[i]),
                Some(&DisconnectReason::ReadError),
                "seed {seed}, client {i}: the server does not report the read error"
            );
            outcome.closed_read_error += 1;
        } else {
            assert!(!server_reasons.contains_key(&ids[i]));
            if converged(&server, c) {
                outcome.converged += 1;
            } else {
                outcome.diverged += 1;
            }
        }
    }
    outcome
}

#[test]
fn corrupted_packets_end_in_convergence_or_a_read_error_close() {
    let mut total = Outcome::default();
    for seed in 1..=8 {
        let o = run(seed, 0.02, 1200);
        eprintln!("seed {seed}: {o:?}");
        total.converged += o.converged;
        total.diverged += o.diverged;
        total.closed_read_error += o.closed_read_error;
        total.recovered += o.recovered;
        total.object_errors += o.object_errors;
    }
    eprintln!("total: {total:?}");
    assert_eq!(
        total.converged + total.closed_read_error + total.diverged,
        8 * CLIENTS
    );
    assert!(total.diverged <= CLIENTS, "{total:?}");
    // Objects a client could not read were reported before the framing of some packet
    // broke and closed the connection. (Whether a recreation completes first is luck
    // here; `core_reader` tests recovery step by step.)
    assert!(total.object_errors > 0, "{total:?}");
}

/// Rarer corruption: some clients ride it out and converge; the others are closed with
/// a read error.
#[test]
fn rare_corruption_is_recovered_or_closed_never_silent() {
    let mut total = Outcome::default();
    for seed in 11..=18 {
        let o = run(seed, 0.001, 600);
        eprintln!("seed {seed}: {o:?}");
        total.converged += o.converged;
        total.diverged += o.diverged;
        total.closed_read_error += o.closed_read_error;
        total.recovered += o.recovered;
        total.object_errors += o.object_errors;
    }
    eprintln!("total: {total:?}");
    assert_eq!(
        total.converged + total.closed_read_error + total.diverged,
        8 * CLIENTS
    );
    assert!(total.diverged <= CLIENTS, "{total:?}");
    // Both outcomes occur, and objects that failed to decode were reported. (A client
    // whose creation of an object failed cannot read that object's unsized updates
    // that follow: it closes with a read error rather than waiting for the
    // recreation, so recoveries are rarer than object errors here.)
    assert!(
        total.converged > 0 && total.closed_read_error > 0 && total.object_errors > 0,
        "{total:?}"
    );
}
