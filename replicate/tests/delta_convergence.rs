//! Convergence with delta compression on, over the lossy, duplicating, reordering link
//! simulator: objects change, change owner, leave and re-enter scope, are destroyed
//! and spawned; after the links quiet every client equals the server, and baselines
//! were created, promoted and used all along.

mod common;

use common::core_suite::*;
use common::*;
use replicate::NetRefHandle;
use replicate::internals::link::LinkConditioner;
use replicate::internals::replication::{DeltaSettings, GroupCopies, StateCopies};
use std::time::Duration;

struct World {
    sim: Sim,
    rng: Rng,
    objects: Vec<NetRefHandle>,
    secrets: Vec<NetRefHandle>,
}

impl World {
    fn spawn(&mut self) {
        let o = self.sim.server.objects_mut();
        match self.rng.below(3) {
            0 => self.objects.push(
                o.spawn(Pawn {
                    x: self.rng.below(1000) as i32,
                    ..Default::default()
                })
                .unwrap(),
            ),
            1 => self.objects.push(
                o.spawn(Big {
                    a: self.rng.next_u64(),
                    ..Default::default()
                })
                .unwrap(),
            ),
            _ => {
                let h = o
                    .spawn(Secret {
                        public: 1,
                        mine: 2,
                        theirs: 3,
                        initial: 4,
                        ..Default::default()
                    })
                    .unwrap();
                self.secrets.push(h);
            }
        }
    }

    fn mutate(&mut self) {
        let all = self.objects.len() + self.secrets.len();
        let k = self.rng.below(all as u64) as usize;
        let step = self.rng.below(7) as i64 - 3;
        let o = self.sim.server.objects_mut();
        if k < self.objects.len() {
            let h = self.objects[k];
            if let Some(p) = o.get_mut::<Pawn>(h) {
                p.x = p.x.wrapping_add(step as i32);
                if step == 3 {
                    p.hp = p.hp.wrapping_add(1);
                }
            } else if let Some(b) = o.get_mut::<Big>(h) {
                b.b = b.b.wrapping_add(step as u64);
                if step == -3 {
                    b.f = b.f.wrapping_mul(31).wrapping_add(7);
                }
            }
        } else {
            let h = self.secrets[k - self.objects.len()];
            let s = o.get_mut::<Secret>(h).unwrap();
            match self.rng.below(3) {
                0 => s.public = s.public.wrapping_add(1),
                1 => s.mine = s.mine.wrapping_add(1),
                _ => s.theirs = s.theirs.wrapping_add(1),
            }
        }
    }

    fn change_owner(&mut self) {
        if self.secrets.is_empty() {
            return;
        }
        let h = self.secrets[self.rng.below(self.secrets.len() as u64) as usize];
        let peers = self.sim.peers.len() as u64;
        let owner = match self.rng.below(peers + 1) {
            n if n == peers => None,
            n => Some(self.sim.peers[n as usize].conn),
        };
        self.sim
            .server
            .objects_mut()
            .set_owner_connection(h, owner)
            .unwrap();
    }

    fn destroy(&mut self) {
        if self.objects.len() < 2 {
            return;
        }
        let k = self.rng.below(self.objects.len() as u64) as usize;
        let h = self.objects.swap_remove(k);
        self.sim.server.objects_mut().destroy(h).unwrap();
    }

    fn toggle_scope(&mut self) {
        if self.objects.is_empty() {
            return;
        }
        let h = self.objects[self.rng.below(self.objects.len() as u64) as usize];
        let p = self.rng.below(self.sim.peers.len() as u64) as usize;
        let conn = self.sim.peers[p].conn;
        let now_in = self.rng.chance(0.5);
        self.sim.server.set_in_scope(conn, h, now_in);
    }
}

fn run(seed: u64, objects: usize, ticks: usize, peers: usize, min_frames: u32) {
    run_world(
        seed,
        objects,
        ticks,
        peers,
        min_frames,
        Writes::PerConnection,
        LinkConditioner::bad(),
    );
}

/// How a run writes the server's packets.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Writes {
    /// Connection by connection, sharing the tick's encodings.
    PerConnection,
    /// Connection by connection, each encoding its batches alone.
    Unshared,
    /// In passes over every connection, on this many writer threads.
    Batched(usize),
}

/// What a run sent: per connection, the digest of its packets; the server's counts of
/// batch segments copied and encoded.
struct Sent {
    digests: Vec<u64>,
    segments: (u64, u64),
    /// Objects sections replayed from a connection in step, and their batches.
    replayed: (u64, u64),
    /// The states the connections in step shared (see `ReplicationServer::group_copies`).
    copies: GroupCopies,
}

fn run_world(
    seed: u64,
    objects: usize,
    ticks: usize,
    peers: usize,
    min_frames: u32,
    writes: Writes,
    link: LinkConditioner,
) -> Sent {
    let lossy = link != LinkConditioner::perfect();
    let mut setup = setup();
    if let Writes::Batched(threads) = writes {
        setup.config.writer_threads = threads;
    }
    let mut w = World {
        sim: Sim::new(setup, seed, link),
        rng: Rng(seed ^ 0xD17A),
        objects: Vec::new(),
        secrets: Vec::new(),
    };
    w.sim.server.baselines_mut().set_settings(DeltaSettings {
        min_frames_between_baselines: min_frames,
        ..DeltaSettings::default()
    });
    w.sim.unshared_encoding = writes == Writes::Unshared;
    w.sim.batched_writes = matches!(writes, Writes::Batched(_));
    for _ in 1..peers {
        w.sim.add_peer();
    }
    for _ in 0..objects {
        w.spawn();
    }
    let dt = Duration::from_millis(33);
    for t in 0..ticks {
        for _ in 0..objects / 4 {
            w.mutate();
        }
        if w.rng.chance(0.1) {
            w.change_owner();
        }
        if w.rng.chance(0.05) {
            w.destroy();
            w.spawn();
        }
        if w.rng.chance(0.05) {
            w.toggle_scope();
        }
        w.sim.step(dt);
        if t == ticks / 2 {
            // Everything back in scope for the second half.
            let conns: Vec<_> = w.sim.peers.iter().map(|p| p.conn).collect();
            for &h in &w.objects {
                for &c in &conns {
                    w.sim.server.set_in_scope(c, h, true);
                }
            }
        }
    }
    let conns: Vec<_> = w.sim.peers.iter().map(|p| p.conn).collect();
    for &h in &w.objects {
        for &c in &conns {
            w.sim.server.set_in_scope(c, h, true);
        }
    }
    w.sim.set_conditioner(quiet_bad_link());
    let (_, settled) = settle(&mut w.sim, 2000, |sim| sim.step(dt), Sim::writers_idle);
    assert!(settled, "writers never went idle");
    let mut mismatches = Vec::new();
    for p in &w.sim.peers {
        assert_eq!(p.stream_errors, 0);
        assert!(
            !p.client
                .world()
                .objects()
                .any(|o| p.client.world().is_broken(o.handle())),
            "no object broken"
        );
        for &h in &w.objects {
            let server = w.sim.server.objects().state(h).unwrap();
            match p.client.state(h) {
                Some(c) if c.eq_dyn(server) => {}
                other => mismatches.push(format!("conn {} {h}: {other:?} vs {server:?}", p.conn)),
            }
        }
        for &h in &w.secrets {
            let s = w.sim.server.objects().get::<Secret>(h).unwrap();
            let owner = w
                .sim
                .server
                .objects()
                .entry_at(w.sim.server.objects().index_of(h).unwrap())
                .unwrap()
                .owner_connection();
            let Some(c) = p.client.get::<Secret>(h) else {
                mismatches.push(format!("conn {} {h}: missing", p.conn));
                continue;
            };
            let ok = c.public == s.public
                && c.initial == s.initial
                && if owner == Some(p.conn) {
                    c.mine == s.mine
                } else {
                    c.theirs == s.theirs
                };
            if !ok {
                mismatches.push(format!("conn {} secret {h}: {c:?} vs {s:?}", p.conn));
            }
        }
        let stats = w.sim.server.writer(p.conn).unwrap().stats().clone();
        assert!(!lossy || stats.lost_records > 0, "the link lost packets");
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches: {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(5)]
    );
    let b = w.sim.server.baselines().stats().clone();
    eprintln!("seed {seed}: baselines {b:?}");
    assert!(b.baselines_created > objects as u64, "{b:?}");
    assert!(b.clones > 0 && b.clones <= b.reserved);
    assert!(b.delta_batches > b.full_batches, "{b:?}");
    // Memory stays bounded: at most eight baselines per (object, connection).
    let tracked: usize = w.sim.server.objects().len() * peers;
    assert!(w.sim.server.baselines().live_snapshots() <= 8 * tracked);
    for p in &w.sim.peers {
        let wr = w.sim.server.writer(p.conn).unwrap();
        assert!(wr.baselines().total() <= 8 * w.sim.server.objects().len());
    }
    Sent {
        digests: w.sim.peers.iter().map(|p| p.sent_digest).collect(),
        segments: w.sim.server.segment_counts(),
        replayed: w.sim.server.replayed_sections(),
        copies: w.sim.server.group_copies(),
    }
}

#[test]
fn converges_with_delta_on_one_connection() {
    run(0xDE17A, 120, 600, 1, 4);
}

#[test]
fn converges_with_delta_on_three_connections_and_owner_changes() {
    run(0xBA5E, 60, 500, 3, 2);
}

#[test]
fn converges_with_default_throttle() {
    run(3, 40, 400, 2, 60);
}

#[test]
fn shared_segments_send_the_bytes_each_connection_encodes_alone() {
    // Four connections over lossy, reordering links with delays of their own: each
    // batch segment is encoded once per tick and copied to the connections that code
    // the same members against the same state. Encoding every connection alone must
    // send exactly the same packets.
    let shared = run_world(
        0x5E65,
        50,
        300,
        4,
        4,
        Writes::PerConnection,
        LinkConditioner::bad(),
    );
    let alone = run_world(
        0x5E65,
        50,
        300,
        4,
        4,
        Writes::Unshared,
        LinkConditioner::bad(),
    );
    assert_eq!(shared.digests, alone.digests, "packets differ");
    let (hits, misses) = shared.segments;
    let (alone_hits, _) = alone.segments;
    assert!(
        hits > 0 && alone_hits * 10 < hits,
        "connections share segments: {hits} copied ({alone_hits} alone), {misses} encoded"
    );
}

#[test]
fn connections_in_step_encode_each_segment_once() {
    // Acks in step: every connection codes against the same baselines, so of four
    // connections one encodes and three copy.
    let sent = run_world(
        0x57E9,
        40,
        200,
        4,
        4,
        Writes::PerConnection,
        LinkConditioner::perfect(),
    );
    let (hits, misses) = sent.segments;
    assert!(
        hits >= 2 * misses,
        "{hits} copied, {misses} encoded (expected about 3 copies per encoding)"
    );
}

#[test]
fn parallel_writers_send_the_bytes_of_one_thread() {
    // Five connections over lossy, duplicating, reordering links, objects changing
    // owner and scope, destroyed and spawned: written in passes over every connection
    // on one, two and three threads, every client receives exactly the same packets
    // (and converges, checked by the run).
    let one = run_world(
        0x7A2A,
        50,
        300,
        5,
        4,
        Writes::Batched(1),
        LinkConditioner::bad(),
    );
    let two = run_world(
        0x7A2A,
        50,
        300,
        5,
        4,
        Writes::Batched(2),
        LinkConditioner::bad(),
    );
    let three = run_world(
        0x7A2A,
        50,
        300,
        5,
        4,
        Writes::Batched(3),
        LinkConditioner::bad(),
    );
    assert_eq!(one.digests, two.digests, "two threads send other packets");
    assert_eq!(
        one.digests, three.digests,
        "three threads send other packets"
    );
    // Each thread shares its encodings among the connections it writes.
    let (hits, _) = two.segments;
    assert!(hits > 0, "connections written by one thread share segments");
}

#[test]
fn replayed_sections_are_the_sections_each_connection_writes_alone() {
    // Written in passes on one thread, a connection whose state matches one written
    // before it in the pass takes that connection's objects section (bits and state
    // changes) instead of writing its own. On as many threads as connections nothing
    // is shared: every connection writes alone. Both must send exactly the same
    // packets, in step (perfect links) and out of step (lossy, duplicating, reordering links, owners and scope changing).
    for (seed, link) in [
        (0x4E9A, LinkConditioner::perfect()),
        (0x4E9B, LinkConditioner::bad()),
    ] {
        let shared = run_world(seed, 40, 240, 4, 4, Writes::Batched(1), link.clone());
        let alone = run_world(seed, 40, 240, 4, 4, Writes::Batched(4), link.clone());
        assert_eq!(
            shared.digests, alone.digests,
            "{link:?}: replays changed packets"
        );
        assert_eq!(alone.replayed, (0, 0), "nothing is shared across threads");
        for c in [alone.copies.send_states, alone.copies.baselines] {
            assert_eq!(
                c,
                StateCopies { held: 4, made: 0 },
                "no state is shared either"
            );
        }
        for c in [shared.copies.send_states, shared.copies.baselines] {
            assert!(c.made > 0, "{link:?}: connections in step shared states");
        }
        let (sections, batches) = shared.replayed;
        assert!(
            sections > 0 && batches > sections,
            "{link:?}: {sections} sections ({batches} batches) replayed"
        );
    }
}
