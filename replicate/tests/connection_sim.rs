//! Two `Connection`s talking over a seeded `LinkPair` for thousands of packets, on
//! links from perfect to terrible: every sent packet gets exactly one notification, in
//! send order; a packet reported delivered was really accepted by the peer; a packet
//! the peer never accepted is never reported delivered; every packet copy the link
//! delivers is accepted once or rejected as a duplicate / stale; the same seed replays
//! the same trace.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{
    Connection, ConnectionConfig, ConnectionError, DeliveryStatus, PacketSequence,
};
use replicate::internals::link::{LinkConditioner, LinkPair, SplitMix64};

const TICK: Duration = Duration::from_millis(16);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One end: a connection plus the ground truth the test checks it against.
struct Peer {
    conn: Connection,
    /// Packets sent and not notified yet, in send order: (sequence, payload id).
    unresolved: VecDeque<(PacketSequence, u32)>,
    /// Outcome per payload id (ids count this side's packets from 0).
    outcomes: Vec<Option<DeliveryStatus>>,
    /// Whether each of our packets was an ack-only one.
    ack_only: Vec<bool>,
    /// Ids of the other side's packets this side accepted.
    accepted: HashSet<u32>,
    /// Every notification, in the order polled.
    trace: Vec<(u16, DeliveryStatus)>,
}

impl Peer {
    fn new(config: ConnectionConfig) -> Self {
        Self {
            conn: Connection::new(config),
            unresolved: VecDeque::new(),
            outcomes: Vec::new(),
            ack_only: Vec::new(),
            accepted: HashSet::new(),
            trace: Vec::new(),
        }
    }

    /// Stamps a packet whose payload is its id.
    fn send(&mut self, now: Duration, ack_only: bool) -> Vec<u8> {
        let mut w = BitWriter::with_capacity_bytes(64);
        let seq = if ack_only {
            self.conn.write_ack_only_header(now, &mut w)
        } else {
            self.conn.write_header(now, &mut w)
        };
        let id = self.outcomes.len() as u32;
        w.write_bits(u64::from(id), 32);
        self.unresolved.push_back((seq, id));
        self.outcomes.push(None);
        self.ack_only.push(ack_only);
        w.finish().expect("header and id fit")
    }

    /// Reads a packet; on acceptance records its payload id (which must be new).
    fn receive(&mut self, now: Duration, bytes: &[u8]) -> Result<u32, ConnectionError> {
        let mut r = BitReader::new(bytes);
        let seq = self.conn.read_header(now, &mut r)?;
        let id = r.read_bits(32) as u32;
        assert!(r.check().is_ok(), "payload of {seq:?} unreadable");
        assert!(
            self.accepted.insert(id),
            "packet {id} ({seq:?}) accepted twice"
        );
        Ok(id)
    }

    /// Drains notifications, checking them against what was sent and what the peer
    /// accepted.
    fn poll(&mut self, now: Duration, peer_accepted: &HashSet<u32>) {
        self.conn.update(now);
        while let Some((seq, status)) = self.conn.poll_delivery() {
            let (expected, id) = self
                .unresolved
                .pop_front()
                .unwrap_or_else(|| panic!("notification for {seq:?}, which was never sent"));
            assert_eq!(seq, expected, "notification out of send order");
            let slot = &mut self.outcomes[id as usize];
            assert_eq!(*slot, None, "packet {id} notified twice");
            *slot = Some(status);
            if status == DeliveryStatus::Delivered {
                assert!(
                    peer_accepted.contains(&id),
                    "packet {id} ({seq:?}) reported delivered but never accepted by the peer"
                );
            }
            self.trace.push((seq.0, status));
        }
        // Undecided packets are a subset of the not yet notified ones.
        assert!(self.conn.in_flight() <= self.unresolved.len());
        if self.conn.in_flight() == 0 {
            assert!(self.unresolved.is_empty(), "decided packets left unpolled");
        }
    }

    fn count(&self, status: DeliveryStatus) -> usize {
        self.outcomes.iter().filter(|o| **o == Some(status)).count()
    }
}

struct Sim {
    link: LinkConditioner,
    /// The link once the traffic stops.
    quiet: LinkConditioner,
    conn: ConnectionConfig,
    seed: u64,
    /// Ticks of lossy traffic before the link turns perfect and the peers go quiet.
    ticks: u32,
    /// Probability that a side has data to send in a tick.
    send_a: f32,
    send_b: f32,
}

impl Sim {
    fn new(link: LinkConditioner, seed: u64) -> Self {
        Self {
            link,
            quiet: LinkConditioner::perfect(),
            conn: ConnectionConfig::default(),
            seed,
            ticks: 2_000,
            send_a: 0.9,
            send_b: 0.5,
        }
    }
}

struct Outcome {
    a: Peer,
    b: Peer,
    pair: LinkPair,
    /// Ticks the quiet phase took to resolve everything.
    settle_ticks: u32,
    /// Packets sent per side after the traffic stopped.
    quiet_sent: [u64; 2],
}

fn receive_all(peer: &mut Peer, now: Duration, packets: Vec<Vec<u8>>) {
    for p in packets {
        if let Err(e) = peer.receive(now, &p) {
            assert!(e.is_benign(), "uncorrupted packet rejected: {e}");
        }
    }
}

fn run(sim: &Sim) -> Outcome {
    let mut pair = LinkPair::new(sim.link.clone(), sim.seed);
    let mut rng = SplitMix64::new(sim.seed ^ 0xA5A5_5A5A);
    // Start a near the top of the sequence space so it wraps during the run.
    let mut a = Peer::new(ConnectionConfig {
        initial_sequence: u16::MAX - 700,
        ..sim.conn.clone()
    });
    let mut b = Peer::new(ConnectionConfig {
        initial_sequence: 12_345,
        ..sim.conn.clone()
    });
    let mut now = Duration::ZERO;
    let mut sent_at_quiet = [0u64; 2];
    let mut tick = 0u32;
    loop {
        if tick == sim.ticks {
            pair.set_conditioner(sim.quiet.clone());
            sent_at_quiet = [a.conn.stats().packets_sent, b.conn.stats().packets_sent];
        }
        let active = tick < sim.ticks;
        let to_a: Vec<_> = pair.b_to_a.drain(now).collect();
        receive_all(&mut a, now, to_a);
        let to_b: Vec<_> = pair.a_to_b.drain(now).collect();
        receive_all(&mut b, now, to_b);
        a.poll(now, &b.accepted);
        b.poll(now, &a.accepted);

        let a_data = active && rng.chance(sim.send_a);
        if a_data || a.conn.needs_ack() {
            let p = a.send(now, !a_data);
            pair.send_to_b(now, &p);
        }
        let b_data = active && rng.chance(sim.send_b);
        if b_data || b.conn.needs_ack() {
            let p = b.send(now, !b_data);
            pair.send_to_a(now, &p);
        }

        if !active && pair.is_idle() && a.unresolved.is_empty() && b.unresolved.is_empty() {
            break;
        }
        assert!(tick < sim.ticks + 500, "the quiet network did not settle");
        tick += 1;
        now += TICK;
    }
    let quiet_sent = [
        a.conn.stats().packets_sent - sent_at_quiet[0],
        b.conn.stats().packets_sent - sent_at_quiet[1],
    ];
    Outcome {
        settle_ticks: tick - sim.ticks,
        quiet_sent,
        a,
        b,
        pair,
    }
}

/// The invariants every run must satisfy.
fn check(o: &Outcome) {
    for (me, peer, link) in [(&o.a, &o.b, &o.pair.a_to_b), (&o.b, &o.a, &o.pair.b_to_a)] {
        let stats = me.conn.stats();
        let sent = me.outcomes.len();
        // Every packet notified exactly once (poll checked order and uniqueness).
        assert!(me.outcomes.iter().all(Option::is_some));
        assert_eq!(me.trace.len(), sent);
        assert_eq!(me.conn.in_flight(), 0);
        assert_eq!(stats.packets_sent, sent as u64);
        assert_eq!(
            stats.packets_delivered as usize,
            me.count(DeliveryStatus::Delivered)
        );
        assert_eq!(stats.packets_lost as usize, me.count(DeliveryStatus::Lost));
        assert_eq!(stats.packets_delivered + stats.packets_lost, sent as u64);
        // Never-accepted packets are never reported delivered (the converse of the
        // check in `poll`, stated over the whole run).
        for (id, outcome) in me.outcomes.iter().enumerate() {
            if !peer.accepted.contains(&(id as u32)) {
                assert_eq!(*outcome, Some(DeliveryStatus::Lost), "packet {id}");
            }
        }
        // A late ack is proof of arrival: each one is a packet the peer accepted but
        // that was reported lost (a spurious loss).
        let accepted_but_lost = (0..sent)
            .filter(|&id| {
                me.outcomes[id] == Some(DeliveryStatus::Lost)
                    && peer.accepted.contains(&(id as u32))
            })
            .count() as u64;
        assert!(stats.late_acks <= accepted_but_lost);
        // Every copy the link handed over was accepted once or rejected as benign.
        let ps = peer.conn.stats();
        assert_eq!(ps.malformed, 0);
        assert_eq!(
            ps.packets_received + ps.duplicates + ps.stale,
            link.stats().delivered
        );
        assert_eq!(ps.packets_received as usize, peer.accepted.len());
        assert_eq!(link.stats().sent, sent as u64);
    }
}

fn lossy_fraction(p: &Peer) -> f64 {
    p.count(DeliveryStatus::Lost) as f64 / p.outcomes.len() as f64
}

#[test]
fn bad_link_every_packet_notified_once_in_order() {
    for seed in 1..=4 {
        let o = run(&Sim::new(LinkConditioner::bad(), seed));
        check(&o);
        // Thousands of packets, through the u16 wraparound on `a`.
        assert!(o.a.outcomes.len() > 1_800, "{}", o.a.outcomes.len());
        assert!(o.b.outcomes.len() > 1_200, "{}", o.b.outcomes.len());
        // The link really misbehaved in both directions.
        for link in [&o.pair.a_to_b, &o.pair.b_to_a] {
            let s = link.stats();
            assert!(
                s.lost > 200 && s.duplicated > 40 && s.reordered > 10,
                "{s:?}"
            );
        }
        let dup = o.b.conn.stats().duplicates + o.a.conn.stats().duplicates;
        assert!(dup > 50, "duplicates were not rejected: {dup}");
        // 20% loss, plus the few packets reordered behind a newer one (accepted in
        // order only, they count as lost).
        for p in [&o.a, &o.b] {
            let lost = lossy_fraction(p);
            assert!((0.15..0.3).contains(&lost), "seed {seed}: lost {lost}");
        }
        // No ack ping-pong once the data stops: only ack-only replies to data
        // packets still on the link, which delivers everything within `max_delay`.
        let bound = (LinkConditioner::bad().max_delay().as_millis() / TICK.as_millis()) as u64 + 2;
        assert!(
            o.quiet_sent.iter().all(|&n| n <= bound),
            "{:?}",
            o.quiet_sent
        );
        assert!(o.settle_ticks < 100, "{}", o.settle_ticks);
    }
}

#[test]
fn heavy_reordering_drops_every_late_packet_and_reports_it_lost_exactly() {
    let link = LinkConditioner {
        latency: ms(20),
        jitter: ms(200),
        loss: 0.1,
        duplicate: 0.1,
        reorder: 0.1,
        reorder_delay: ms(150),
        ..LinkConditioner::perfect()
    };
    let run_with = |reorder_threshold| {
        let mut sim = Sim::new(link.clone(), 99);
        sim.conn.reorder_threshold = reorder_threshold;
        let o = run(&sim);
        check(&o);
        o
    };
    // Packets are accepted in order only: one that arrives after a newer one is
    // dropped unacknowledged (stale). So a packet older than an acknowledged one is
    // lost for certain, and the packet threshold never reports a loss that an ack
    // later contradicts; the timeout alone finds the same losses, later.
    let timeout = run_with(None);
    let threshold = run_with(Some(3));
    for o in [&timeout, &threshold] {
        for (me, peer) in [(&o.a, &o.b), (&o.b, &o.a)] {
            assert!(peer.conn.stats().stale > 100, "the link reordered");
            // Only a timeout that fired before a slow ack is contradicted later.
            let spurious = (0..me.outcomes.len())
                .filter(|&id| {
                    me.outcomes[id] == Some(DeliveryStatus::Lost)
                        && peer.accepted.contains(&(id as u32))
                })
                .count();
            assert!(spurious < me.outcomes.len() / 50, "{spurious}");
        }
    }
    // The packet threshold finds the same losses as the timeout: never more.
    let (a, b) = (lossy_fraction(&timeout.a), lossy_fraction(&threshold.a));
    assert!((a - b).abs() < 0.03, "{a} vs {b}");
    assert_eq!(
        threshold.a.conn.reorder_threshold(),
        Some(3),
        "nothing to adapt to"
    );
}

#[test]
fn perfect_link_delivers_everything() {
    let mut sim = Sim::new(
        LinkConditioner {
            latency: ms(30),
            ..LinkConditioner::perfect()
        },
        5,
    );
    sim.quiet = sim.link.clone();
    sim.send_a = 1.0;
    sim.send_b = 1.0;
    sim.ticks = 1_000;
    let o = run(&sim);
    check(&o);
    for p in [&o.a, &o.b] {
        // The last packets of each side are acked only by ack-only packets that
        // nobody acks back; those are the only losses.
        let lost: Vec<usize> = (0..p.outcomes.len())
            .filter(|&i| p.outcomes[i] == Some(DeliveryStatus::Lost))
            .collect();
        assert!(
            lost.iter().all(|&i| p.ack_only[i]),
            "data packets lost: {lost:?}"
        );
        assert!(lost.len() <= 2);
        assert_eq!(p.conn.stats().late_acks, 0);
        assert_eq!(p.conn.packet_loss(), 0.0);
        // RTT = 60 ms of flight plus up to a tick of waiting at each end.
        let rtt = p.conn.rtt();
        assert!(rtt >= ms(60) && rtt <= ms(60) + TICK * 2, "{rtt:?}");
    }
}

#[test]
fn loss_estimate_tracks_link_loss() {
    let mut sim = Sim::new(
        LinkConditioner {
            latency: ms(10),
            loss: 0.1,
            ..LinkConditioner::perfect()
        },
        17,
    );
    sim.send_a = 1.0;
    sim.send_b = 1.0;
    let o = run(&sim);
    check(&o);
    for p in [&o.a, &o.b] {
        let lost = lossy_fraction(p);
        assert!((0.07..0.14).contains(&lost), "{lost}");
        let estimate = f64::from(p.conn.packet_loss());
        assert!((0.01..0.3).contains(&estimate), "{estimate}");
        // No reordering: a spurious loss needs every ack of a packet to be lost
        // until it times out (several reverse packets in a row).
        let late = p.conn.stats().late_acks;
        assert!(late * 200 < p.outcomes.len() as u64, "{late}");
    }
}

#[test]
fn same_seed_same_trace() {
    let trace = |seed| {
        let mut sim = Sim::new(LinkConditioner::bad(), seed);
        sim.ticks = 600;
        let o = run(&sim);
        check(&o);
        (
            o.a.trace,
            o.b.trace,
            o.a.conn.rtt(),
            o.b.conn.stats().late_acks,
        )
    };
    let first = trace(42);
    assert_eq!(first, trace(42));
    assert_ne!(first.0, trace(43).0);
}

#[test]
fn idle_peers_do_not_ping_pong_acks() {
    let mut pair = LinkPair::new(LinkConditioner::lan(), 1);
    let mut a = Peer::new(ConnectionConfig::default());
    let mut b = Peer::new(ConnectionConfig::default());
    let mut now = Duration::ZERO;
    pair.send_to_b(now, &a.send(now, false));
    for _ in 0..100 {
        now += TICK;
        let to_a: Vec<_> = pair.b_to_a.drain(now).collect();
        receive_all(&mut a, now, to_a);
        let to_b: Vec<_> = pair.a_to_b.drain(now).collect();
        receive_all(&mut b, now, to_b);
        a.poll(now, &b.accepted);
        b.poll(now, &a.accepted);
        for (me, to_peer) in [(&mut a, true), (&mut b, false)] {
            if me.conn.needs_ack() {
                let p = me.send(now, true);
                if to_peer {
                    pair.send_to_b(now, &p);
                } else {
                    pair.send_to_a(now, &p);
                }
            }
        }
    }
    assert_eq!(a.outcomes, vec![Some(DeliveryStatus::Delivered)]);
    // b answered once; nobody acks an ack-only packet, so it times out as lost.
    assert_eq!(b.outcomes, vec![Some(DeliveryStatus::Lost)]);
    assert_eq!(b.conn.stats().ack_only_sent, 1);
    assert_eq!(
        b.conn.packet_loss(),
        0.0,
        "ack-only losses are not link losses"
    );
}
