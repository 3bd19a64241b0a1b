//! Random and mutated packets into the client's and the server's stream managers:
//! never a panic, and the client keeps working.

mod common;

use common::Rng;
use common::core_suite::*;
use common::*;
use proptest::prelude::*;
use replicate::bits::BitReader;
use replicate::internals::connection::DeliveryStatus;
use replicate::internals::replication::{ReplicationClient, ReplicationConfig};
use std::time::Duration;

/// A session's packets (stream payloads), recorded from a server with churn.
fn record_session(seed: u64) -> Vec<Vec<u8>> {
    let mut m = Manual::new();
    let mut rng = Rng(seed);
    let mut handles = Vec::new();
    let mut packets = Vec::new();
    for tick in 0..60 {
        for _ in 0..3 {
            let h = match rng.below(4) {
                0 => m.server.objects_mut().spawn(Pawn {
                    x: rng.next_u64() as i32,
                    ..Default::default()
                }),
                1 => m.server.objects_mut().spawn(Crate {
                    amount: rng.next_u64() as u32,
                    ..Default::default()
                }),
                2 => m.server.objects_mut().spawn(Tag {
                    value: rng.next_u64(),
                    target: handles.first().copied().unwrap_or_default(),
                    ..Default::default()
                }),
                _ => m.server.objects_mut().spawn(Big {
                    a: rng.next_u64(),
                    ..Default::default()
                }),
            };
            handles.push(h.unwrap());
        }
        if tick % 5 == 4 && handles.len() > 4 {
            let h = handles.remove(rng.below(handles.len() as u64) as usize);
            if rng.chance(0.5) {
                m.server.objects_mut().destroy(h).unwrap();
            } else {
                m.server.objects_mut().tear_off(h).unwrap();
            }
        }
        for h in &handles {
            if let Some(p) = m.server.objects_mut().get_mut::<Pawn>(*h) {
                p.hp = p.hp.wrapping_add(1);
            }
        }
        let (seq, bytes) = m.tick_and_write();
        m.ack(seq, DeliveryStatus::Delivered);
        packets.push(bytes);
    }
    packets
}

fn mutate(rng: &mut Rng, packet: &[u8]) -> Vec<u8> {
    let mut p = packet.to_vec();
    match rng.below(6) {
        0 => {
            for _ in 0..=rng.below(8) {
                if !p.is_empty() {
                    let i = rng.below(p.len() as u64) as usize;
                    p[i] ^= 1 << rng.below(8);
                }
            }
        }
        1 => {
            let n = rng.below(p.len() as u64 + 1) as usize;
            p.truncate(n);
        }
        2 => {
            for _ in 0..rng.below(64) {
                p.push(rng.next_u64() as u8);
            }
        }
        3 => {
            if !p.is_empty() {
                let i = rng.below(p.len() as u64) as usize;
                for b in &mut p[i..] {
                    *b = rng.next_u64() as u8;
                }
            }
        }
        4 => {
            p = (0..rng.below(300)).map(|_| rng.next_u64() as u8).collect();
        }
        _ => {
            // Keep the stream header, randomize a run of bits in the middle.
            if p.len() > 2 {
                let i = 1 + rng.below(p.len() as u64 - 1) as usize;
                let j = (i + 1 + rng.below(6) as usize).min(p.len());
                for b in &mut p[i..j] {
                    *b = rng.next_u64() as u8;
                }
            }
        }
    }
    p
}

#[test]
fn mutated_packets_never_panic_and_valid_ones_still_work() {
    let session = record_session(7);
    let reg = registry();
    let mut rng = Rng(99);
    for round in 0..200 {
        let mut client = ReplicationClient::new(reg.clone(), ReplicationConfig::default());
        let mut now = Duration::ZERO;
        for (k, p) in session.iter().enumerate() {
            now += Duration::from_millis(16);
            // Interleave garbage with the valid stream.
            for _ in 0..3 {
                let pick = rng.below(session.len() as u64) as usize;
                let bad = mutate(&mut rng, &session[pick]);
                let _ = read_manual_packet(&mut client, now, &bad);
                client.update(now + Duration::from_millis(rng.below(5000)));
            }
            if k % 2 == round % 2 {
                let _ = read_manual_packet(&mut client, now, p);
            }
            client.drain_events();
        }
    }
    // A clean client reading the clean session ends with the server's objects.
    let mut client = ReplicationClient::new(reg, ReplicationConfig::default());
    for p in &session {
        read_manual_packet(&mut client, Duration::ZERO, p).unwrap();
    }
    assert!(!client.is_empty());
}

#[test]
fn random_packets_into_the_server_never_panic() {
    let mut m = Manual::new();
    m.server.objects_mut().spawn(Pawn::default()).unwrap();
    m.round_trip();
    let mut rng = Rng(5);
    for _ in 0..5000 {
        let len = rng.below(64) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let _ = m.server.read_packet(m.conn, &mut BitReader::new(&bytes));
    }
    // Still replicating.
    let h = m.server.objects_mut().spawn(Crate::default()).unwrap();
    m.round_trip();
    assert!(m.client.contains(h));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_into_a_client(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut client = ReplicationClient::new(registry(), ReplicationConfig::default());
        let _ = read_manual_packet(&mut client, Duration::ZERO, &bytes);
        let _ = client.read_packet(Duration::from_secs(2), replicate::internals::connection::PacketSequence(9), &mut BitReader::new(&bytes));
        client.update(Duration::from_secs(5));
    }
}

#[test]
fn corrupted_packets_through_real_connections_never_panic() {
    use replicate::internals::link::LinkConditioner;
    let mut sim = Sim::new(
        setup(),
        11,
        LinkConditioner {
            corrupt: 0.5,
            ..LinkConditioner::bad()
        },
    );
    let mut rng = Rng(3);
    let mut handles = Vec::new();
    for tick in 0..400 {
        if handles.len() < 50 {
            handles.push(
                sim.server
                    .objects_mut()
                    .spawn(Tag {
                        value: rng.next_u64(),
                        target: handles.last().copied().unwrap_or_default(),
                        ..Default::default()
                    })
                    .unwrap(),
            );
        }
        if tick % 7 == 0 {
            let h = handles.swap_remove(rng.below(handles.len() as u64) as usize);
            sim.server.objects_mut().destroy(h).unwrap();
        }
        for h in &handles {
            if rng.chance(0.2)
                && let Some(t) = sim.server.objects_mut().get_mut::<Tag>(*h)
            {
                t.value = rng.next_u64();
            }
        }
        sim.step(Duration::from_millis(16));
        // Random bytes straight into both connections, then into the streams.
        let junk: Vec<u8> = (0..rng.below(80)).map(|_| rng.next_u64() as u8).collect();
        let now = sim.now;
        let p = &mut sim.peers[0];
        let mut r = BitReader::new(&junk);
        if let Ok(seq) = p.client_conn.read_header(now, &mut r) {
            let _ = p.client.read_packet(now, seq, &mut r);
        }
        let mut r = BitReader::new(&junk);
        if p.server_conn.read_header(now, &mut r).is_ok() {
            let _ = sim.server.read_packet(p.conn, &mut r);
        }
        p.client.drain_events();
    }
    // The server side is unaffected by what the client got: still consistent.
    assert_eq!(sim.server.objects().len(), handles.len());
}
