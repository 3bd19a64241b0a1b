//! Property tests of the connection against hostile and arbitrary input: random bytes,
//! mutated genuine packets, and a model network that reorders, duplicates and drops
//! packets in arbitrary ways. `read_header` never panics, every packet is accounted
//! for in the stats exactly once, and the delivery notifications stay consistent:
//! every sent packet reported exactly once, in send order.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use proptest::prelude::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{
    ConnectionConfig, ConnectionError, ConnectionStats, DeliveryStatus, HEADER_MAGIC_V1,
    MAX_HEADER_BITS, MIN_HEADER_BITS, PacketSequence,
};

type Connection = replicate::internals::connection::Connection;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A connection plus what the test knows it sent.
struct Tracker {
    conn: Connection,
    /// Sent and not yet notified, in send order.
    unresolved: VecDeque<PacketSequence>,
    /// Sequences and outcomes, in notification order.
    outcomes: Vec<(PacketSequence, DeliveryStatus)>,
    sent: usize,
}

impl Tracker {
    fn new(initial_sequence: u16) -> Self {
        Self {
            conn: Connection::new(ConnectionConfig {
                initial_sequence,
                ..ConnectionConfig::default()
            }),
            unresolved: VecDeque::new(),
            outcomes: Vec::new(),
            sent: 0,
        }
    }

    /// A packet: header, then one payload byte.
    fn send(&mut self, now: Duration) -> Vec<u8> {
        let mut w = BitWriter::with_capacity_bytes(32);
        let seq = self.conn.write_header(now, &mut w);
        w.write_bits(0x5A, 8);
        self.unresolved.push_back(seq);
        self.sent += 1;
        w.finish().expect("fits")
    }

    /// Feeds arbitrary bytes; checks that exactly one stats counter moved and that an
    /// accepted header left the reader right after itself.
    fn feed(&mut self, now: Duration, bytes: &[u8]) -> Result<PacketSequence, ConnectionError> {
        let before = received_total(self.conn.stats());
        let mut r = BitReader::new(bytes);
        let result = self.conn.read_header(now, &mut r);
        assert_eq!(received_total(self.conn.stats()), before + 1);
        if result.is_ok() {
            assert!(
                r.position() == MIN_HEADER_BITS || r.position() == MAX_HEADER_BITS,
                "{}",
                r.position()
            );
            assert!(r.check().is_ok());
        }
        self.poll(now);
        result
    }

    /// Drains notifications, checking send order and exactly-once.
    fn poll(&mut self, now: Duration) {
        self.conn.update(now);
        while let Some((seq, status)) = self.conn.poll_delivery() {
            assert_eq!(
                self.unresolved.pop_front(),
                Some(seq),
                "notification out of order or for a packet never sent"
            );
            self.outcomes.push((seq, status));
        }
        assert!(self.conn.in_flight() <= self.unresolved.len());
    }

    /// Lets every packet resolve and checks that all were notified.
    fn settle(&mut self, now: Duration) {
        self.poll(now + Duration::from_secs(60));
        assert!(self.unresolved.is_empty(), "packets never notified");
        assert_eq!(self.outcomes.len(), self.sent);
        assert_eq!(self.conn.in_flight(), 0);
        let s = self.conn.stats();
        assert_eq!(s.packets_delivered + s.packets_lost, self.sent as u64);
    }
}

fn received_total(s: &ConnectionStats) -> u64 {
    s.packets_received + s.duplicates + s.stale + s.malformed
}

/// Two trackers after `rounds` clean exchanges.
fn established(rounds: usize, seq_a: u16, seq_b: u16) -> (Tracker, Tracker, Duration) {
    let mut a = Tracker::new(seq_a);
    let mut b = Tracker::new(seq_b);
    let mut now = Duration::ZERO;
    for _ in 0..rounds {
        let p = a.send(now);
        b.feed(now, &p).expect("clean packet");
        let p = b.send(now);
        a.feed(now, &p).expect("clean packet");
        now += ms(16);
    }
    (a, b, now)
}

/// Clean traffic after an attack; then both sides settle.
fn continue_and_settle(mut a: Tracker, mut b: Tracker, mut now: Duration) {
    for _ in 0..40 {
        let p = a.send(now);
        let _ = b.feed(now, &p);
        let p = b.send(now);
        let _ = a.feed(now, &p);
        now += ms(16);
    }
    a.settle(now);
    b.settle(now);
}

#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize),
    Truncate(usize),
    Append(Vec<u8>),
    SetByte(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => any::<usize>().prop_map(Mutation::FlipBit),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => proptest::collection::vec(any::<u8>(), 1..8).prop_map(Mutation::Append),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::FlipBit(i) if !bytes.is_empty() => {
            let bit = i % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
        Mutation::Truncate(n) => bytes.truncate(n % (bytes.len() + 1)),
        Mutation::Append(extra) => bytes.extend_from_slice(extra),
        Mutation::SetByte(i, v) if !bytes.is_empty() => {
            let n = bytes.len();
            bytes[i % n] = *v;
        }
        _ => {}
    }
}

/// An operation of the model network between `a` and `b`.
#[derive(Debug, Clone)]
enum Op {
    /// `a` (true) or `b` sends a packet onto the wire.
    Send(bool),
    /// Deliver the in-flight packet at this (modular) index; keep a copy on the wire
    /// (duplication) if the flag is set.
    Deliver(usize, bool),
    /// Drop the in-flight packet at this index.
    Drop(usize),
    /// Advance time by this many milliseconds.
    Wait(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<bool>().prop_map(Op::Send),
        4 => (any::<usize>(), proptest::bool::weighted(0.1)).prop_map(|(i, d)| Op::Deliver(i, d)),
        1 => any::<usize>().prop_map(Op::Drop),
        2 => any::<u8>().prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..24),
        with_tag in any::<bool>(),
        rounds in 0usize..40,
        seq_a in any::<u16>(),
        seq_b in any::<u16>(),
    ) {
        let (a, mut b, now) = established(rounds, seq_a, seq_b);
        let mut bytes = bytes;
        if with_tag {
            // Get past the tag check so the rest of the header is exercised.
            bytes.insert(0, HEADER_MAGIC_V1);
        }
        let _ = b.feed(now, &bytes);
        continue_and_settle(a, b, now);
    }

    #[test]
    fn mutated_packets_keep_state_consistent(
        rounds in 0usize..50,
        seq_a in any::<u16>(),
        seq_b in any::<u16>(),
        mutations in proptest::collection::vec(proptest::collection::vec(mutation(), 1..4), 1..8),
    ) {
        let (mut a, mut b, mut now) = established(rounds, seq_a, seq_b);
        for ms_list in &mutations {
            // A genuine packet in flight, plus a mutated copy arriving first.
            let genuine = a.send(now);
            let mut evil = genuine.clone();
            for m in ms_list {
                apply(&mut evil, m);
            }
            let evil_result = b.feed(now, &evil);
            let genuine_result = b.feed(now, &genuine);
            if evil == genuine {
                // The same packet twice: never accepted twice.
                prop_assert!(genuine_result.is_err());
                if evil_result.is_ok() {
                    let duplicate = matches!(genuine_result, Err(ConnectionError::Duplicate { .. }));
                    prop_assert!(duplicate);
                }
            }
            let reply = b.send(now);
            let _ = a.feed(now, &reply);
            now += ms(16);
        }
        continue_and_settle(a, b, now);
    }

    #[test]
    fn header_round_trips(
        seq_a in any::<u16>(),
        seq_b in any::<u16>(),
        rounds in 1usize..80,
        payload in any::<u32>(),
    ) {
        let (mut a, mut b, now) = established(rounds, seq_a, seq_b);
        let mut w = BitWriter::with_capacity_bytes(32);
        let seq = a.conn.write_header(now, &mut w);
        prop_assert_eq!(seq.0, seq_a.wrapping_add(rounds as u16));
        prop_assert_eq!(w.position(), MAX_HEADER_BITS);
        w.write_bits(u64::from(payload), 32);
        let bytes = w.finish().unwrap();
        let mut r = BitReader::new(&bytes);
        prop_assert_eq!(b.conn.read_header(now, &mut r), Ok(seq));
        prop_assert_eq!(r.read_bits(32), u64::from(payload));
        prop_assert_eq!(b.conn.latest_received(), Some(seq));
    }

    /// `a` sends `n` packets; `b` receives an arbitrary subset in an arbitrary order,
    /// then acks once. Exactly the packets `b` accepted and can still ack are
    /// delivered; nothing else is.
    #[test]
    fn ack_bitfield_matches_what_was_accepted(
        seq_a in any::<u16>(),
        n in 1usize..60,
        picks in proptest::collection::vec(any::<usize>(), 0..80),
    ) {
        let mut a = Tracker::new(seq_a);
        let mut b = Tracker::new(0);
        let packets: Vec<Vec<u8>> = (0..n).map(|_| a.send(Duration::ZERO)).collect();
        let mut accepted = HashSet::new();
        for p in &picks {
            let i = p % n;
            if b.feed(ms(1), &packets[i]).is_ok() {
                prop_assert!(accepted.insert(i), "packet {} accepted twice", i);
            }
        }
        let ack = b.send(ms(2));
        prop_assert!(a.feed(ms(3), &ack).is_ok());
        a.settle(ms(3));
        let latest = b.conn.latest_received().map(|s| s.0.wrapping_sub(seq_a) as usize);
        for (i, (seq, status)) in a.outcomes.iter().enumerate() {
            prop_assert_eq!(seq.0, seq_a.wrapping_add(i as u16));
            let in_window = latest.is_some_and(|l| i <= l && l - i <= 32);
            let expected = if accepted.contains(&i) && in_window {
                DeliveryStatus::Delivered
            } else {
                DeliveryStatus::Lost
            };
            prop_assert_eq!(*status, expected, "packet {}", i);
        }
    }

    /// A model network under the test's full control: arbitrary reordering,
    /// duplication, loss and timing. Delivered always means accepted, every packet is
    /// notified once in order, every wire copy is accepted once at most.
    #[test]
    fn arbitrary_network_schedules(
        seq_a in any::<u16>(),
        seq_b in any::<u16>(),
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let starts = [seq_a, seq_b];
        let mut peers = [Tracker::new(seq_a), Tracker::new(seq_b)];
        // (receiving side, payload id = the sender's packet count, bytes)
        let mut wire: Vec<(usize, u32, Vec<u8>)> = Vec::new();
        // Payload ids each side accepted from the other.
        let mut accepted: [HashSet<u32>; 2] = [HashSet::new(), HashSet::new()];
        // Notifications already checked, per side.
        let mut checked = [0usize; 2];
        let mut now = Duration::ZERO;
        // Outcome k of a side is its k-th packet (Tracker::poll checked the order):
        // its sequence is start + k, and if delivered the peer accepted payload id k.
        let check = |peers: &[Tracker; 2], accepted: &[HashSet<u32>; 2], checked: &mut [usize; 2]| {
            for side in 0..2 {
                for (k, (seq, status)) in peers[side].outcomes.iter().enumerate().skip(checked[side]) {
                    assert_eq!(seq.0, starts[side].wrapping_add(k as u16));
                    if *status == DeliveryStatus::Delivered {
                        assert!(accepted[1 - side].contains(&(k as u32)), "delivered but never accepted");
                    }
                }
                checked[side] = peers[side].outcomes.len();
            }
        };
        for op in &ops {
            match *op {
                Op::Send(from_a) => {
                    let side = usize::from(!from_a);
                    let id = peers[side].sent as u32;
                    let mut w = BitWriter::with_capacity_bytes(32);
                    let seq = peers[side].conn.write_header(now, &mut w);
                    w.write_bits(u64::from(id), 32);
                    peers[side].unresolved.push_back(seq);
                    peers[side].sent += 1;
                    wire.push((1 - side, id, w.finish().unwrap()));
                    peers[side].poll(now);
                }
                Op::Deliver(i, keep) if !wire.is_empty() => {
                    let i = i % wire.len();
                    let (to, id, bytes) = if keep { wire[i].clone() } else { wire.swap_remove(i) };
                    let mut r = BitReader::new(&bytes);
                    let before = received_total(peers[to].conn.stats());
                    match peers[to].conn.read_header(now, &mut r) {
                        Ok(_) => {
                            prop_assert_eq!(r.read_bits(32) as u32, id);
                            prop_assert!(accepted[to].insert(id), "accepted twice");
                        }
                        Err(e) => prop_assert!(e.is_benign(), "{}", e),
                    }
                    prop_assert_eq!(received_total(peers[to].conn.stats()), before + 1);
                    peers[to].poll(now);
                }
                Op::Drop(i) if !wire.is_empty() => {
                    let i = i % wire.len();
                    wire.swap_remove(i);
                }
                Op::Wait(d) => {
                    now += ms(u64::from(d));
                    peers[0].poll(now);
                    peers[1].poll(now);
                }
                _ => {}
            }
            check(&peers, &accepted, &mut checked);
        }
        for p in &mut peers {
            p.settle(now);
        }
        check(&peers, &accepted, &mut checked);
        prop_assert_eq!(checked, [peers[0].sent, peers[1].sent]);
    }
}

#[test]
fn every_truncation_of_a_full_header_is_rejected() {
    let (mut a, mut b, now) = established(3, 65_530, 7);
    let bytes = a.send(now);
    for bits in 0..MAX_HEADER_BITS {
        let mut r = BitReader::with_bit_len(&bytes, bits);
        let e = b.conn.read_header(now, &mut r).unwrap_err();
        assert!(matches!(e, ConnectionError::Truncated(_)), "{bits}: {e}");
    }
    assert_eq!(b.conn.stats().malformed, MAX_HEADER_BITS as u64);
    // The untruncated packet is still accepted: the failures changed nothing.
    assert!(b.feed(now, &bytes).is_ok());
}

#[test]
fn reader_already_in_error_is_rejected() {
    let (mut a, mut b, now) = established(1, 0, 0);
    let bytes = a.send(now);
    let mut r = BitReader::new(&bytes);
    r.skip(bytes.len() * 8 + 1);
    assert!(matches!(
        b.conn.read_header(now, &mut r),
        Err(ConnectionError::Truncated(_))
    ));
}
