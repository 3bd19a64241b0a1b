//! An in-memory, seeded, deterministic network link for tests and simulations.
//!
//! This module owns the simulated wire: a [`LinkSimulator`] carries byte packets one
//! way and degrades them according to a [`LinkConditioner`] (latency, jitter, loss,
//! duplication, reordering, optional bit corruption, a queue limit); a [`LinkPair`]
//! holds the two directions between two peers (the in-memory transport,
//! [`crate::transport::memory`], puts a pair per client behind the transport traits,
//! so a whole server and its clients can run in one process over a bad network).
//! It never touches a clock or a socket:
//! time comes in as a [`Duration`] since an arbitrary epoch, exactly like the
//! [`connection`](crate::connection) layer above it, and all randomness comes from
//! its own [`SplitMix64`] generator seeded by the caller. The same seed, conditioner
//! and sequence of calls always produce the same deliveries, on every platform, so a
//! failing convergence test can be replayed from its seed.
//!
//! It knows nothing about what the bytes mean.
//!
//! # Model
//!
//! Each packet given to [`LinkSimulator::send`] independently:
//! 1. is dropped if the link already holds [`LinkConditioner::queue_limit`] packets;
//! 2. with a [`bandwidth`](LinkConditioner::bandwidth) cap, waits for the packets
//!    before it to be transmitted and then takes `len / bandwidth` itself: its
//!    departure time;
//! 3. is lost with probability [`loss`](LinkConditioner::loss);
//! 4. otherwise is delivered once, plus a second time with probability
//!    [`duplicate`](LinkConditioner::duplicate); every copy draws its own delay
//!    after departure, `latency + uniform(0..=jitter)`, plus
//!    [`reorder_delay`](LinkConditioner::reorder_delay) with probability
//!    [`reorder`](LinkConditioner::reorder);
//! 5. has one random bit flipped with probability [`corrupt`](LinkConditioner::corrupt)
//!    (per copy; off in every preset, as real transports checksum their packets).
//!
//! By default a copy is never delivered before one sent earlier: jitter behaves like
//! queueing delay, as on most real paths, and only the explicit `reorder` probability
//! reorders. With [`jitter_reorders`](LinkConditioner::jitter_reorders) on, jitter
//! alone reorders packets sent closer together than the jitter, like a multi-path
//! network. Packets due at the same instant come out in send order.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use replicate::internals::link::{LinkConditioner, LinkPair};
//!
//! let ms = Duration::from_millis;
//! let mut pair = LinkPair::new(LinkConditioner { latency: ms(30), ..LinkConditioner::perfect() }, 42);
//! pair.send_to_b(ms(0), b"hello");
//! assert_eq!(pair.receive_at_b(ms(29)), None);
//! assert_eq!(pair.receive_at_b(ms(30)).as_deref(), Some(&b"hello"[..]));
//!
//! // The same seed replays the same fate for every packet.
//! let run = |seed| {
//!     let mut link = replicate::internals::link::LinkSimulator::new(LinkConditioner::bad(), seed);
//!     for i in 0..100u8 {
//!         link.send(ms(u64::from(i) * 10), &[i]);
//!     }
//!     link.drain(ms(10_000)).collect::<Vec<_>>()
//! };
//! assert_eq!(run(7), run(7));
//! assert_ne!(run(7), run(8));
//! ```

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

/// A small, fast, deterministic pseudo-random generator (Sebastiano Vigna's
/// SplitMix64). Not cryptographic; its output sequence is fixed for a seed on every
/// platform, which is what reproducible simulations need.
///
/// ```
/// use replicate::internals::link::SplitMix64;
/// let mut a = SplitMix64::new(1);
/// let mut b = SplitMix64::new(1);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// assert!((0.0..1.0).contains(&a.next_f64()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed` (any value, including 0).
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `0.0..1.0` (53 random bits).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A value in `0..n` (0 when `n` is 0), by multiply-shift (bias below 2^-64 · n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` (clamped to `0..=1`; NaN counts as 0).
    ///
    /// Always draws one number, so the random sequence does not depend on `p`.
    pub fn chance(&mut self, p: f32) -> bool {
        let x = self.next_f64();
        p.is_finite() && x < f64::from(p)
    }

    /// A uniform duration in `0..=max` (nanosecond resolution).
    pub fn duration_up_to(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.below(nanos.saturating_add(1)))
    }
}

/// How a [`LinkSimulator`] degrades the packets it carries. Build one from a preset
/// and adjust fields with struct update syntax:
///
/// ```
/// use std::time::Duration;
/// use replicate::internals::link::LinkConditioner;
///
/// let flaky = LinkConditioner { loss: 0.5, ..LinkConditioner::lan() };
/// let slow = LinkConditioner { latency: Duration::from_millis(300), ..LinkConditioner::perfect() };
/// # let _ = (flaky, slow);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConditioner {
    /// Base one-way delay of every packet.
    pub latency: Duration,
    /// Extra delay, uniform in `0..=jitter`, drawn per packet copy (so the mean
    /// one-way delay is `latency + jitter / 2`).
    pub jitter: Duration,
    /// Probability that a packet is dropped.
    pub loss: f32,
    /// Probability that a delivered packet arrives a second time (with its own delay).
    pub duplicate: f32,
    /// Probability that a packet copy is held back by an extra
    /// [`reorder_delay`](Self::reorder_delay), letting later packets overtake it.
    pub reorder: f32,
    /// The extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Whether jitter may deliver a packet before one sent earlier. When false (the
    /// default, in every preset), a copy that is not explicitly reordered is never
    /// delivered before the copies sent before it.
    pub jitter_reorders: bool,
    /// Probability that one random bit of a packet copy is flipped. For robustness
    /// tests only: every preset leaves it at 0.
    pub corrupt: f32,
    /// Packets the link holds at most; more are dropped (a full router queue).
    pub queue_limit: usize,
    /// Capacity in bytes per second (`None`: unlimited; `Some(0)` counts as 1). A
    /// packet occupies the link for `len / bandwidth` once the packets sent before it
    /// are through, so bursts queue up behind each other (and beyond `queue_limit`
    /// are dropped).
    pub bandwidth: Option<u64>,
}

impl Default for LinkConditioner {
    /// [`LinkConditioner::perfect`].
    fn default() -> Self {
        Self::perfect()
    }
}

impl LinkConditioner {
    /// No delay, no loss, no duplication, no reordering: a packet sent at `t` is
    /// received at `t`, in send order.
    pub const fn perfect() -> Self {
        Self {
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            jitter_reorders: false,
            corrupt: 0.0,
            queue_limit: 1 << 16,
            bandwidth: None,
        }
    }

    /// A local network: 1 ms latency, up to 1 ms jitter, nothing lost.
    pub const fn lan() -> Self {
        Self {
            latency: Duration::from_millis(1),
            jitter: Duration::from_millis(1),
            ..Self::perfect()
        }
    }

    /// A decent internet path: 40 ms latency, up to 20 ms jitter, 1% loss, 0.1%
    /// duplication, 0.5% reordered by 30 ms.
    pub const fn wan() -> Self {
        Self {
            latency: Duration::from_millis(40),
            jitter: Duration::from_millis(20),
            loss: 0.01,
            duplicate: 0.001,
            reorder: 0.005,
            reorder_delay: Duration::from_millis(30),
            ..Self::perfect()
        }
    }

    /// A terrible path, for convergence tests: 50 ms latency, up to 100 ms jitter,
    /// 20% loss, 5% duplication, 2% reordered by a further 50 ms.
    pub const fn bad() -> Self {
        Self {
            latency: Duration::from_millis(50),
            jitter: Duration::from_millis(100),
            loss: 0.2,
            duplicate: 0.05,
            reorder: 0.02,
            reorder_delay: Duration::from_millis(50),
            ..Self::perfect()
        }
    }

    /// The longest a packet copy can stay on the link after its departure:
    /// `latency + jitter + reorder_delay` (waiting for bandwidth comes on top).
    pub fn max_delay(&self) -> Duration {
        self.latency
            .saturating_add(self.jitter)
            .saturating_add(self.reorder_delay)
    }
}

/// Counters of a [`LinkSimulator`], all since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets given to [`LinkSimulator::send`].
    pub sent: u64,
    /// Packets dropped by the `loss` probability.
    pub lost: u64,
    /// Packets dropped because the queue was full.
    pub overflowed: u64,
    /// Extra copies created by the `duplicate` probability.
    pub duplicated: u64,
    /// Copies held back by the `reorder` probability.
    pub reordered: u64,
    /// Copies with a flipped bit.
    pub corrupted: u64,
    /// Copies handed out by [`LinkSimulator::receive`].
    pub delivered: u64,
    /// Copies thrown away by [`LinkSimulator::clear`].
    pub cleared: u64,
}

#[derive(Debug)]
struct InFlight {
    deliver_at: Duration,
    order: u64,
    bytes: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.deliver_at, self.order).cmp(&(other.deliver_at, other.order))
    }
}

/// A one-way simulated link: packets go in with [`send`](Self::send) and come out of
/// [`receive`](Self::receive) once their simulated delay has passed. See the
/// module docs for the model.
///
/// ```
/// use std::time::Duration;
/// use replicate::internals::link::{LinkConditioner, LinkSimulator};
///
/// let ms = Duration::from_millis;
/// let mut link = LinkSimulator::new(LinkConditioner { loss: 1.0, ..LinkConditioner::perfect() }, 1);
/// link.send(ms(0), &[1, 2, 3]);
/// assert!(link.is_idle());
/// assert_eq!(link.stats().lost, 1);
///
/// // Let the network quiet down: later packets get through.
/// link.set_conditioner(LinkConditioner::lan());
/// link.send(ms(10), &[4]);
/// assert_eq!(link.receive(ms(10)), None);
/// assert_eq!(link.receive(ms(12)), Some(vec![4]));
/// ```
#[derive(Debug)]
pub struct LinkSimulator {
    conditioner: LinkConditioner,
    rng: SplitMix64,
    queue: BinaryHeap<Reverse<InFlight>>,
    next_order: u64,
    /// Latest delivery time scheduled for a copy that was not explicitly reordered
    /// (for `jitter_reorders == false`).
    last_in_order: Duration,
    /// When the last packet finishes transmitting (with a bandwidth cap).
    link_free_at: Duration,
    stats: LinkStats,
}

impl LinkSimulator {
    /// A link degrading packets as `conditioner` says, with randomness from `seed`.
    pub fn new(conditioner: LinkConditioner, seed: u64) -> Self {
        Self {
            conditioner,
            rng: SplitMix64::new(seed),
            queue: BinaryHeap::new(),
            next_order: 0,
            last_in_order: Duration::ZERO,
            link_free_at: Duration::ZERO,
            stats: LinkStats::default(),
        }
    }

    /// The current conditioner.
    pub fn conditioner(&self) -> &LinkConditioner {
        &self.conditioner
    }

    /// Replaces the conditioner; applies to packets sent from now on (packets already
    /// on the link keep their fate).
    pub fn set_conditioner(&mut self, conditioner: LinkConditioner) {
        self.conditioner = conditioner;
    }

    /// Puts a packet on the link at time `now`.
    pub fn send(&mut self, now: Duration, packet: &[u8]) {
        self.stats.sent += 1;
        if self.queue.len() >= self.conditioner.queue_limit {
            self.stats.overflowed += 1;
            return;
        }
        let departure = match self.conditioner.bandwidth {
            Some(bandwidth) => {
                let start = now.max(self.link_free_at);
                let nanos =
                    (packet.len() as u128 * 1_000_000_000).div_ceil(u128::from(bandwidth.max(1)));
                let transmit = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
                self.link_free_at = start.saturating_add(transmit);
                self.link_free_at
            }
            None => now,
        };
        if self.rng.chance(self.conditioner.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.conditioner.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            if self.queue.len() >= self.conditioner.queue_limit {
                self.stats.overflowed += 1;
                break;
            }
            let c = &self.conditioner;
            let mut delay = c.latency.saturating_add(self.rng.duration_up_to(c.jitter));
            let reordered = self.rng.chance(c.reorder);
            let mut deliver_at = departure.saturating_add(delay);
            if reordered {
                self.stats.reordered += 1;
                delay = delay.saturating_add(c.reorder_delay);
                deliver_at = departure.saturating_add(delay);
            } else if !c.jitter_reorders {
                deliver_at = deliver_at.max(self.last_in_order);
                self.last_in_order = deliver_at;
            }
            let mut bytes = packet.to_vec();
            if self.rng.chance(c.corrupt) && !bytes.is_empty() {
                let bit = self.rng.below(bytes.len() as u64 * 8);
                if let Some(b) = bytes.get_mut((bit / 8) as usize) {
                    *b ^= 1 << (bit % 8);
                    self.stats.corrupted += 1;
                }
            }
            self.queue.push(Reverse(InFlight {
                deliver_at,
                order: self.next_order,
                bytes,
            }));
            self.next_order += 1;
        }
    }

    /// The next packet due at or before `now`, earliest first (ties in send order).
    pub fn receive(&mut self, now: Duration) -> Option<Vec<u8>> {
        if self.queue.peek()?.0.deliver_at > now {
            return None;
        }
        let Reverse(p) = self.queue.pop()?;
        self.stats.delivered += 1;
        Some(p.bytes)
    }

    /// Every packet due at or before `now`, earliest first.
    pub fn drain(&mut self, now: Duration) -> impl Iterator<Item = Vec<u8>> + '_ {
        std::iter::from_fn(move || self.receive(now))
    }

    /// When the next packet is due, if any is on the link.
    pub fn next_delivery_at(&self) -> Option<Duration> {
        self.queue.peek().map(|p| p.0.deliver_at)
    }

    /// Packet copies on the link.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is on the link.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Drops every packet on the link (a cable pulled).
    pub fn clear(&mut self) {
        self.stats.cleared += self.queue.len() as u64;
        self.queue.clear();
    }

    /// Counters since creation.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }
}

/// Both directions between two peers, `a` and `b` (say server and client), each a
/// [`LinkSimulator`] with its own random stream derived from one seed.
///
/// ```
/// use std::time::Duration;
/// use replicate::internals::link::{LinkConditioner, LinkPair};
///
/// let mut pair = LinkPair::new(LinkConditioner::lan(), 3);
/// let t = Duration::from_millis(5);
/// pair.send_to_b(Duration::ZERO, b"ping");
/// let ping = pair.receive_at_b(t).unwrap();
/// pair.send_to_a(t, b"pong");
/// assert_eq!(ping, b"ping");
/// assert_eq!(pair.receive_at_a(t * 2).unwrap(), b"pong");
/// assert!(pair.is_idle());
/// ```
#[derive(Debug)]
pub struct LinkPair {
    /// Packets from `a` to `b`.
    pub a_to_b: LinkSimulator,
    /// Packets from `b` to `a`.
    pub b_to_a: LinkSimulator,
}

impl LinkPair {
    /// Both directions conditioned alike; seeds for the two directions are derived
    /// from `seed`.
    pub fn new(conditioner: LinkConditioner, seed: u64) -> Self {
        Self::with_conditioners(conditioner.clone(), conditioner, seed)
    }

    /// Each direction with its own conditioner (asymmetric links).
    pub fn with_conditioners(a_to_b: LinkConditioner, b_to_a: LinkConditioner, seed: u64) -> Self {
        let mut seeds = SplitMix64::new(seed);
        Self {
            a_to_b: LinkSimulator::new(a_to_b, seeds.next_u64()),
            b_to_a: LinkSimulator::new(b_to_a, seeds.next_u64()),
        }
    }

    /// Replaces the conditioner of both directions (e.g. [`LinkConditioner::perfect`]
    /// to let the network quiet down at the end of a convergence test).
    pub fn set_conditioner(&mut self, conditioner: LinkConditioner) {
        self.a_to_b.set_conditioner(conditioner.clone());
        self.b_to_a.set_conditioner(conditioner);
    }

    /// Sends a packet from `a` to `b`.
    pub fn send_to_b(&mut self, now: Duration, packet: &[u8]) {
        self.a_to_b.send(now, packet);
    }

    /// Sends a packet from `b` to `a`.
    pub fn send_to_a(&mut self, now: Duration, packet: &[u8]) {
        self.b_to_a.send(now, packet);
    }

    /// The next packet arriving at `b` by `now`.
    pub fn receive_at_b(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.a_to_b.receive(now)
    }

    /// The next packet arriving at `a` by `now`.
    pub fn receive_at_a(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.b_to_a.receive(now)
    }

    /// Whether both directions are empty.
    pub fn is_idle(&self) -> bool {
        self.a_to_b.is_idle() && self.b_to_a.is_idle()
    }

    /// When the next packet is due in either direction.
    pub fn next_delivery_at(&self) -> Option<Duration> {
        match (
            self.a_to_b.next_delivery_at(),
            self.b_to_a.next_delivery_at(),
        ) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Sends `n` numbered packets 10 ms apart and returns (id, arrival) pairs.
    fn trace(conditioner: LinkConditioner, seed: u64, n: u32) -> Vec<(u32, Duration)> {
        let mut link = LinkSimulator::new(conditioner, seed);
        for i in 0..n {
            link.send(ms(u64::from(i) * 10), &i.to_le_bytes());
        }
        let mut out = Vec::new();
        let mut now = Duration::ZERO;
        while !link.is_idle() {
            now += ms(1);
            for p in link.drain(now) {
                let id = u32::from_le_bytes(p.try_into().unwrap());
                out.push((id, now));
            }
        }
        out
    }

    #[test]
    fn splitmix_matches_reference_values() {
        // First outputs of SplitMix64 seeded with 0 (reference implementation).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn splitmix_helpers_stay_in_range() {
        let mut r = SplitMix64::new(99);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(r.below(7) < 7);
            assert!(r.duration_up_to(ms(5)) <= ms(5));
            hits += r.chance(0.25) as u32;
        }
        assert!((2_200..2_800).contains(&hits), "{hits}");
        assert_eq!(r.below(0), 0);
        assert!(!r.chance(f32::NAN));
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        assert_eq!(r.duration_up_to(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn perfect_link_is_instant_and_ordered() {
        let t = trace(LinkConditioner::perfect(), 1, 100);
        assert_eq!(t.len(), 100);
        for (i, (id, at)) in t.iter().enumerate() {
            assert_eq!(*id, i as u32);
            // Sent at 10 i ms, seen at the first 1 ms step at or after it.
            assert_eq!(*at, ms(u64::from(*id) * 10).max(ms(1)));
        }
    }

    #[test]
    fn latency_and_jitter_bound_the_delay() {
        let c = LinkConditioner {
            latency: ms(20),
            jitter: ms(30),
            jitter_reorders: true,
            ..LinkConditioner::perfect()
        };
        let t = trace(c, 5, 2000);
        assert_eq!(t.len(), 2000);
        let mut reordered = 0;
        let mut max_seen = Duration::ZERO;
        for w in t.windows(2) {
            reordered += (w[1].0 < w[0].0) as u32;
        }
        for &(id, at) in &t {
            let delay = at - ms(u64::from(id) * 10);
            assert!(delay >= ms(20) && delay <= ms(51), "{delay:?}");
            max_seen = max_seen.max(delay);
        }
        assert!(
            max_seen >= ms(48),
            "jitter never reached its range: {max_seen:?}"
        );
        assert!(
            reordered > 100,
            "30 ms jitter on 10 ms spacing must reorder: {reordered}"
        );
    }

    #[test]
    fn jitter_without_reordering_keeps_order() {
        let c = LinkConditioner {
            latency: ms(20),
            jitter: ms(30),
            jitter_reorders: false,
            ..LinkConditioner::perfect()
        };
        let t = trace(c, 5, 2000);
        assert_eq!(t.len(), 2000);
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn explicit_reorder_lets_later_packets_overtake() {
        let c = LinkConditioner {
            latency: ms(5),
            reorder: 0.1,
            reorder_delay: ms(35),
            jitter_reorders: false,
            ..LinkConditioner::perfect()
        };
        let mut link = LinkSimulator::new(c, 11);
        for i in 0..1000u32 {
            link.send(ms(u64::from(i) * 10), &i.to_le_bytes());
        }
        let reordered = link.stats().reordered;
        assert!((60..140).contains(&reordered), "{reordered}");
        let out: Vec<u32> = link
            .drain(ms(100_000))
            .map(|p| u32::from_le_bytes(p.try_into().unwrap()))
            .collect();
        assert_eq!(out.len(), 1000);
        // Every reordered packet is overtaken by the next three (sent 10, 20, 30 ms
        // later, 35 ms extra delay), except among the last three sent.
        let mut newest = 0;
        let mut overtaken = 0;
        for (k, &id) in out.iter().enumerate() {
            if k > 0 && id < newest {
                overtaken += 1;
            }
            newest = newest.max(id);
        }
        assert!(
            overtaken <= reordered && overtaken + 3 >= reordered,
            "{overtaken} vs {reordered}"
        );
    }

    #[test]
    fn loss_and_duplication_rates_match_the_conditioner() {
        let c = LinkConditioner {
            loss: 0.2,
            duplicate: 0.1,
            ..LinkConditioner::perfect()
        };
        let t = trace(c, 1234, 10_000);
        let mut counts = vec![0u32; 10_000];
        for (id, _) in &t {
            counts[*id as usize] += 1;
        }
        let lost = counts.iter().filter(|&&c| c == 0).count();
        let doubled = counts.iter().filter(|&&c| c == 2).count();
        assert!(counts.iter().all(|&c| c <= 2));
        assert!((1_800..2_200).contains(&lost), "lost {lost}");
        // 10% of the 80% that survive.
        assert!((650..950).contains(&doubled), "doubled {doubled}");
    }

    #[test]
    fn corruption_flips_exactly_one_bit() {
        let c = LinkConditioner {
            corrupt: 1.0,
            ..LinkConditioner::perfect()
        };
        let mut link = LinkSimulator::new(c, 3);
        let packet = [0u8; 16];
        for _ in 0..100 {
            link.send(Duration::ZERO, &packet);
        }
        link.send(Duration::ZERO, &[]);
        for p in link.drain(Duration::ZERO) {
            let ones: u32 = p.iter().map(|b| b.count_ones()).sum();
            assert_eq!(ones, u32::from(!p.is_empty()));
        }
        assert_eq!(link.stats().corrupted, 100);
    }

    #[test]
    fn bandwidth_serializes_packets() {
        let c = LinkConditioner {
            latency: ms(10),
            bandwidth: Some(1000),
            ..LinkConditioner::perfect()
        };
        let mut link = LinkSimulator::new(c, 0);
        for _ in 0..5 {
            link.send(Duration::ZERO, &[0; 100]);
        }
        let mut arrivals = Vec::new();
        while let Some(at) = link.next_delivery_at() {
            arrivals.extend(link.drain(at).map(|_| at));
        }
        assert_eq!(arrivals, [110, 210, 310, 410, 510].map(ms));
        // An idle link sends at once again.
        link.send(ms(1000), &[0; 50]);
        assert_eq!(link.next_delivery_at(), Some(ms(1060)));
    }

    #[test]
    fn queue_limit_drops_excess_and_clear_empties() {
        let c = LinkConditioner {
            latency: ms(10),
            queue_limit: 3,
            ..LinkConditioner::perfect()
        };
        let mut link = LinkSimulator::new(c, 0);
        for i in 0..5u8 {
            link.send(Duration::ZERO, &[i]);
        }
        assert_eq!(link.in_flight(), 3);
        assert_eq!(link.stats().overflowed, 2);
        assert_eq!(link.next_delivery_at(), Some(ms(10)));
        link.clear();
        assert!(link.is_idle());
        assert_eq!(link.stats().cleared, 3);
        assert_eq!(link.receive(ms(100)), None);
    }

    #[test]
    fn same_seed_same_trace_different_seed_different_trace() {
        let a = trace(LinkConditioner::bad(), 77, 500);
        let b = trace(LinkConditioner::bad(), 77, 500);
        let c = trace(LinkConditioner::bad(), 78, 500);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn pair_directions_are_independent() {
        let mut pair = LinkPair::with_conditioners(
            LinkConditioner {
                latency: ms(10),
                ..LinkConditioner::perfect()
            },
            LinkConditioner {
                latency: ms(30),
                ..LinkConditioner::perfect()
            },
            9,
        );
        pair.send_to_b(Duration::ZERO, &[1]);
        pair.send_to_a(Duration::ZERO, &[2]);
        assert_eq!(pair.next_delivery_at(), Some(ms(10)));
        assert_eq!(pair.receive_at_a(ms(10)), None);
        assert_eq!(pair.receive_at_b(ms(10)), Some(vec![1]));
        assert_eq!(pair.next_delivery_at(), Some(ms(30)));
        assert_eq!(pair.receive_at_a(ms(30)), Some(vec![2]));
        assert!(pair.is_idle());
        assert_eq!(pair.next_delivery_at(), None);
    }

    fn conditioner() -> impl proptest::strategy::Strategy<Value = LinkConditioner> {
        use proptest::prelude::*;
        (
            (0u64..50, 0u64..50, 0u64..80),
            (0.0f32..=1.0, 0.0f32..=1.0, 0.0f32..=1.0, 0.0f32..=0.2),
            (
                any::<bool>(),
                1usize..64,
                proptest::option::of(1u64..10_000),
            ),
        )
            .prop_map(
                |(
                    (latency, jitter, reorder_delay),
                    (loss, duplicate, reorder, corrupt),
                    (jr, limit, bandwidth),
                )| {
                    LinkConditioner {
                        latency: ms(latency),
                        jitter: ms(jitter),
                        loss,
                        duplicate,
                        reorder,
                        reorder_delay: ms(reorder_delay),
                        jitter_reorders: jr,
                        corrupt,
                        queue_limit: limit,
                        bandwidth,
                    }
                },
            )
    }

    proptest::proptest! {
        /// Whatever the conditions: every copy is accounted for, arrives no earlier
        /// than `latency` and, unless held back behind earlier packets, no later than
        /// `max_delay` after it was sent; only duplicates arrive twice; without
        /// corruption the bytes are intact.
        #[test]
        fn link_conserves_and_bounds_packets(
            c in conditioner(),
            seed in proptest::prelude::any::<u64>(),
            gaps in proptest::collection::vec(0u64..30, 1..200),
        ) {
            let mut link = LinkSimulator::new(c.clone(), seed);
            let mut now = Duration::ZERO;
            let mut sent_at = Vec::new();
            let mut arrivals = vec![0u32; gaps.len()];
            let mut received = Vec::new();
            for (i, gap) in gaps.iter().enumerate() {
                // Receive at the exact due times up to the next send.
                now += ms(*gap);
                while let Some(at) = link.next_delivery_at().filter(|&at| at <= now) {
                    for p in link.drain(at) {
                        received.push((p, at));
                    }
                }
                sent_at.push(now);
                let mut packet = (i as u32).to_le_bytes().to_vec();
                packet.extend_from_slice(&[0xEE; 4]);
                link.send(now, &packet);
            }
            // 200 packets of 8 bytes at 1 byte/s at worst, plus the delays.
            let end = now + c.max_delay() + Duration::from_secs(1600);
            // Step through the tail so arrival times stay exact.
            while let Some(at) = link.next_delivery_at() {
                proptest::prop_assert!(at <= end);
                for p in link.drain(at) {
                    received.push((p, at));
                }
            }
            let s = *link.stats();
            proptest::prop_assert_eq!(s.sent, gaps.len() as u64);
            proptest::prop_assert_eq!(s.delivered, received.len() as u64);
            proptest::prop_assert_eq!(s.delivered, s.sent - s.lost + s.duplicated - s.overflowed);
            for (p, at) in &received {
                proptest::prop_assert_eq!(p.len(), 8);
                if s.corrupted > 0 {
                    continue;
                }
                proptest::prop_assert_eq!(&p[4..], &[0xEE; 4][..]);
                let id = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
                arrivals[id] += 1;
                let delay = *at - sent_at[id];
                proptest::prop_assert!(delay >= c.latency, "{:?} < {:?}", delay, c.latency);
                if c.jitter_reorders && c.bandwidth.is_none() {
                    proptest::prop_assert!(delay <= c.max_delay(), "{:?} > {:?}", delay, c.max_delay());
                }
            }
            if s.corrupted == 0 {
                proptest::prop_assert!(arrivals.iter().all(|&n| n <= 2));
                let twice = arrivals.iter().filter(|&&n| n == 2).count() as u64;
                proptest::prop_assert!(twice <= s.duplicated);
            }
        }
    }

    #[test]
    fn presets_are_sane() {
        for c in [
            LinkConditioner::perfect(),
            LinkConditioner::lan(),
            LinkConditioner::wan(),
            LinkConditioner::bad(),
        ] {
            for p in [c.loss, c.duplicate, c.reorder, c.corrupt] {
                assert!((0.0..=1.0).contains(&p));
            }
            assert_eq!(c.corrupt, 0.0);
        }
        let bad = LinkConditioner::bad();
        assert_eq!((bad.loss, bad.duplicate, bad.jitter), (0.2, 0.05, ms(100)));
        assert_eq!(bad.max_delay(), ms(200));
        assert_eq!(LinkConditioner::default(), LinkConditioner::perfect());
    }
}
