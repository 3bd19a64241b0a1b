//! The fixed benchmark scenarios of `BENCHMARKS.md` — S1 "arena" (bandwidth), S2
//! "battle royale" (server CPU and scale), S3 "cubes" (the Gaffer on Games anchor) —
//! and the wire accounting they share.
//!
//! Every scenario drives the sans-IO core directly: `ReplicationServer::write_packet`
//! into a bit writer, the bytes handed to `ReplicationClient::read_packet`, each packet
//! reported `Delivered` (a lossless link). What a packet costs on the wire is counted
//! exactly as [`wire_bytes`] describes, the same for replicate and for the baselines.

pub mod entropy;
pub mod range_coding;
pub mod s1;
pub mod s2;
pub mod s3;

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, MAX_HEADER_BITS, PacketSequence};
use replicate::internals::object::ConnectionId;
use replicate::internals::replication::{
    DeltaSettings, PacketWrite, ReplicationClient, ReplicationConfig, ReplicationServer,
};
use replicate::internals::stream::WriteResult;
use std::time::Duration;

/// Whether replicate sends members as deltas against acked baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaMode {
    /// Delta compression against acknowledged baselines.
    On,
    /// Every changed member in full.
    Off,
}

/// The replication settings of a variant: the one place the delta switch is set
/// (`ReplicationConfig::delta.enabled`, on by default; per-type `#[net(delta = ..)]`
/// defaults stay as declared).
pub fn replication_config(delta: DeltaMode) -> ReplicationConfig {
    ReplicationConfig {
        delta: DeltaSettings {
            enabled: delta == DeltaMode::On,
            ..DeltaSettings::default()
        },
        ..ReplicationConfig::default()
    }
}

static ATTRIBUTION: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Runs the scenarios set up from now on with network-insights attribution at `level`
/// (default off): each packet is split and its split summed, as a server recording a
/// session does, to measure what attribution costs.
pub fn set_attribution(level: replicate::insights::AttributionLevel) {
    use replicate::insights::AttributionLevel as L;
    let v = match level {
        L::Off => 0,
        L::Framing => 1,
        L::Members => 2,
    };
    ATTRIBUTION.store(v, std::sync::atomic::Ordering::Relaxed);
}

/// The attribution level of the scenarios.
pub fn attribution() -> replicate::insights::AttributionLevel {
    use replicate::insights::AttributionLevel as L;
    match ATTRIBUTION.load(std::sync::atomic::Ordering::Relaxed) {
        1 => L::Framing,
        2 => L::Members,
        _ => L::Off,
    }
}

/// Extra packets per tick the interest layer allows each connection in the scenarios
/// (its default is 3): the harness measures what a tick produces, not a bandwidth cap.
pub const UNCAPPED_EXTRA_PACKETS: u32 = 100_000;

/// Adds a server connection without the interest layer's bandwidth budget (its default
/// is 64 KB/s): the scenarios measure what a tick produces, not a throttle.
pub fn add_uncapped_connection(server: &mut ReplicationServer) -> ConnectionId {
    server.set_attribution(attribution());
    let id = server.add_connection();
    server.set_connection_budget(id, replicate::interest::BandwidthBudget::Unlimited);
    id
}

/// A server with every registered type and one uncapped connection whose packets a
/// real client decodes (S1, S3).
pub fn one_client_session(delta: DeltaMode) -> Result<(ReplicationServer, Link), SanityError> {
    let registry = std::sync::Arc::new(
        replicate::ProtocolRegistry::from_inventory()
            .map_err(|e| SanityError(format!("registry: {e}")))?,
    );
    let config = replication_config(delta);
    let mut server = ReplicationServer::new(registry.clone(), config.clone());
    // No per-tick packet cap: every scenario writes until nothing is left.
    server.set_max_extra_packets(UNCAPPED_EXTRA_PACKETS);
    let conn = add_uncapped_connection(&mut server);
    let client = replicate::internals::replication::ReplicationClient::new(registry, config);
    Ok((server, Link::new(conn, Some(client))))
}

/// Largest packet payload netcode.io carries (`NETCODE_MAX_PAYLOAD_BYTES`): the
/// connection header plus the replication data must fit in it.
pub const MTU_BYTES: usize = 1200;

/// Bytes netcode.io adds to every encrypted payload packet besides its variable-length
/// sequence number: one prefix byte and the 16-byte Poly1305 authentication tag.
pub const NETCODE_FIXED_OVERHEAD: usize = 1 + 16;

/// Bytes of netcode.io's packed sequence number for packet number `n` (1 to 8).
pub fn netcode_sequence_bytes(n: u64) -> usize {
    (((64 - n.leading_zeros()) as usize).div_ceil(8)).max(1)
}

/// What one packet costs on the wire, UDP/IP headers excluded: the payload (which for
/// replicate already contains the bit-packed connection header) plus netcode.io's
/// prefix, sequence and authentication tag.
pub fn wire_bytes(payload_bytes: usize, netcode_sequence: u64) -> usize {
    payload_bytes + NETCODE_FIXED_OVERHEAD + netcode_sequence_bytes(netcode_sequence)
}

/// The connection header in whole bytes, as the byte-oriented baselines pay it.
pub const CONNECTION_HEADER_BYTES: usize = MAX_HEADER_BITS.div_ceil(8);

/// Wire cost of a byte-oriented baseline message of `len` bytes: split into packets of
/// at most [`MTU_BYTES`], each with the byte-aligned connection header and netcode.io's
/// overhead. Advances `sequence` by the number of packets. Returns `(packets, bytes)`.
pub fn baseline_wire(len: usize, sequence: &mut u64) -> (usize, usize) {
    if len == 0 {
        return (0, 0);
    }
    let room = MTU_BYTES - CONNECTION_HEADER_BYTES;
    let packets = len.div_ceil(room);
    let mut bytes = len;
    for _ in 0..packets {
        bytes +=
            CONNECTION_HEADER_BYTES + NETCODE_FIXED_OVERHEAD + netcode_sequence_bytes(*sequence);
        *sequence += 1;
    }
    (packets, bytes)
}

/// Traffic of one tick on one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Packets sent.
    pub packets: usize,
    /// Replication payload bits (after the connection header).
    pub payload_bits: usize,
    /// Bytes on the wire ([`wire_bytes`] of each packet).
    pub wire_bytes: usize,
}

/// Hands a packet (header reserved in front) to the client, then takes its events as a
/// game would every frame (the scenarios check state, not events).
fn hand_to_client(
    client: &mut ReplicationClient,
    now: Duration,
    seq: PacketSequence,
    bytes: &[u8],
) {
    let mut r = BitReader::new(bytes);
    r.skip(MAX_HEADER_BITS);
    // A stream error here would be a bug; convergence checks catch it.
    let _ = client.read_packet(now, seq, &mut r);
    drop(client.drain_events());
}

/// A digest of a packet's bits, a word at a time, and its length: equal for equal
/// packets, and in practice different otherwise. Each word is mixed with its position
/// on its own and the results summed, so the words are independent (no chain of
/// multiplications from one to the next) and the harness spends little of the timed
/// tick on it. It reads the writer's words in place (their bits past the packet's end
/// are zero): no copy into bytes.
fn packet_digest(w: &BitWriter) -> u64 {
    let mix = |i: usize, x: u64| {
        (x ^ (i as u64).wrapping_mul(0xCBF2_9CE4_8422_2325))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29)
    };
    let words = w
        .words()
        .iter()
        .enumerate()
        .fold(0u64, |h, (i, &x)| h.wrapping_add(mix(i, x)));
    mix(w.position(), words)
}

impl std::ops::AddAssign for Traffic {
    fn add_assign(&mut self, o: Self) {
        self.packets += o.packets;
        self.payload_bits += o.payload_bits;
        self.wire_bytes += o.wire_bytes;
    }
}

/// One server connection and (optionally) the client at its other end, over a lossless
/// in-memory link.
#[derive(Debug)]
pub struct Link {
    /// The server's connection id.
    pub conn: ConnectionId,
    /// The receiving client, if this link has one (S2 only decodes connection 0).
    pub client: Option<ReplicationClient>,
    sequence: u16,
    netcode_sequence: u64,
    /// Hold packets for the client until [`Link::flush`] (keeps decoding out of timed
    /// server work).
    pub defer: bool,
    pending: Vec<(PacketSequence, Vec<u8>)>,
    conditions: LinkConditions,
    rng: replicate::internals::link::SplitMix64,
    /// Calls to [`Link::send`] so far (ticks).
    tick: u64,
    /// Packets whose fate the server has not learnt yet: (tick due, sequence, delivered).
    fates: std::collections::VecDeque<(u64, PacketSequence, bool)>,
    /// Every packet's split, summed (network insights; when attribution is on).
    pub attribution: replicate::insights::AttributionTotals,
    /// Keep the packets sent for [`Link::take_digest`], which checks them outside the
    /// timed tick (checking packets is not server work); off, a packet's writer is
    /// reused at once.
    pub keep_sent: bool,
    /// Writers of earlier packets, reused for the next (a server keeps its buffers).
    spares: Vec<BitWriter>,
    /// The packets kept since the last [`Link::take_digest`].
    sent: Vec<BitWriter>,
}

/// What the link does to packets: by default nothing (every packet arrives at once and
/// is acknowledged in the same tick).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkConditions {
    /// Ticks between sending a packet and the server learning its fate (the round
    /// trip: 3 ticks at 30 Hz for 100 ms).
    pub ack_delay_ticks: u64,
    /// Fraction of packets lost (seeded, independent per packet).
    pub loss: f64,
    /// Seed of the loss draws.
    pub seed: u64,
}

impl Link {
    /// A link for server connection `conn`.
    pub fn new(conn: ConnectionId, client: Option<ReplicationClient>) -> Self {
        Self {
            conn,
            client,
            sequence: 0,
            netcode_sequence: 0,
            defer: false,
            pending: Vec::new(),
            conditions: LinkConditions::default(),
            rng: replicate::internals::link::SplitMix64::new(0),
            tick: 0,
            fates: std::collections::VecDeque::new(),
            attribution: Default::default(),
            keep_sent: false,
            spares: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// Sets what the link does to packets from now on: a packet reaches the client at
    /// once unless it is lost; the server learns its fate `ack_delay_ticks` sends later.
    pub fn set_conditions(&mut self, conditions: LinkConditions) {
        self.conditions = conditions;
        self.rng = replicate::internals::link::SplitMix64::new(conditions.seed);
    }

    /// Reports every packet whose fate is due by tick `until` to the server.
    fn report_fates(&mut self, server: &mut ReplicationServer, until: u64) {
        while let Some(&(due, seq, delivered)) = self.fates.front() {
            if due > until {
                break;
            }
            self.fates.pop_front();
            let status = if delivered {
                DeliveryStatus::Delivered
            } else {
                DeliveryStatus::Lost
            };
            server.process_delivery(self.conn, seq, status);
        }
    }

    /// Reports every packet still in flight (the link quietens).
    pub fn settle(&mut self, server: &mut ReplicationServer) {
        self.report_fates(server, u64::MAX);
    }

    /// Hands the packets held back by [`Link::defer`] to the client.
    pub fn flush(&mut self, now: Duration) {
        let Some(client) = &mut self.client else {
            self.pending.clear();
            return;
        };
        for (seq, bytes) in self.pending.drain(..) {
            hand_to_client(client, now, seq, &bytes);
        }
    }

    /// Writes packets for this connection until the server has nothing more (at most
    /// `max_packets`), delivers them to the client, and reports them delivered — or,
    /// under [`LinkConditions`], loses some and reports fates some ticks later.
    ///
    /// Each packet reserves the full connection header ([`MAX_HEADER_BITS`]: tag,
    /// sequence, ack and 32 ack bits) in front of the replication payload.
    pub fn send(
        &mut self,
        server: &mut ReplicationServer,
        now: Duration,
        max_packets: usize,
    ) -> Traffic {
        let mut t = Traffic::default();
        self.begin_tick(server);
        for _ in 0..max_packets {
            let (seq, mut w) = self.new_packet();
            let result = server.write_packet(self.conn, seq, &mut w);
            if !self.on_written(server, now, seq, w, result, &mut t) {
                break;
            }
        }
        t
    }

    /// A digest of the packets kept since the last call ([`Link::keep_sent`]; see
    /// `packet_digest`, with the connection's id), combined by addition, so the order
    /// links are written in does not matter. Their writers are reused.
    pub fn take_digest(&mut self) -> u64 {
        let conn = u64::from(self.conn).wrapping_mul(0x9E37_79B9);
        let mut digest = 0u64;
        for w in self.sent.drain(..) {
            digest = digest.wrapping_add(packet_digest(&w) ^ conn);
            self.spares.push(w);
        }
        digest
    }

    /// Starts a tick: the fates now due reach the server (and the packets of earlier
    /// ticks, if nobody took their digest, give their writers back).
    fn begin_tick(&mut self, server: &mut ReplicationServer) {
        self.spares.append(&mut self.sent);
        self.tick += 1;
        self.report_fates(server, self.tick);
    }

    /// The next packet's sequence and a writer holding its connection header.
    fn new_packet(&mut self) -> (PacketSequence, BitWriter) {
        let mut w = match self.spares.pop() {
            Some(mut w) => {
                w.reset(MTU_BYTES * 8);
                w
            }
            None => BitWriter::with_capacity_bytes(MTU_BYTES),
        };
        w.write_bits(0, 64);
        w.write_bits(0, (MAX_HEADER_BITS - 64) as u32);
        (PacketSequence(self.sequence), w)
    }

    /// Sends a packet the server wrote (unless it wrote nothing), counting it in `t`;
    /// returns whether the server has more for this connection.
    fn on_written(
        &mut self,
        server: &mut ReplicationServer,
        now: Duration,
        seq: PacketSequence,
        w: BitWriter,
        result: WriteResult,
        t: &mut Traffic,
    ) -> bool {
        if matches!(result, WriteResult::NoData) {
            self.spares.push(w);
            return false;
        }
        self.sequence = self.sequence.wrapping_add(1);
        if let Some(mut bits) = server.packet_attribution(self.conn) {
            bits.header = MAX_HEADER_BITS as u64;
            bits.wire_bits = w.byte_len() as u64 * 8;
            bits.padding = bits.wire_bits - w.position() as u64;
            self.attribution.add(&bits);
        }
        t.packets += 1;
        t.payload_bits += w.position() - MAX_HEADER_BITS;
        t.wire_bytes += wire_bytes(w.byte_len(), self.netcode_sequence);
        self.netcode_sequence += 1;
        let delivered = self.conditions.loss <= 0.0 || self.rng.next_f64() >= self.conditions.loss;
        if !delivered {
            // Lost on the way: the client never sees it.
        } else if self.defer && self.client.is_some() {
            self.pending.push((seq, w.to_bytes()));
        } else if let Some(client) = &mut self.client {
            hand_to_client(client, now, seq, &w.to_bytes());
        }
        if self.conditions.ack_delay_ticks == 0 {
            let status = if delivered {
                DeliveryStatus::Delivered
            } else {
                DeliveryStatus::Lost
            };
            server.process_delivery(self.conn, seq, status);
        } else {
            self.fates
                .push_back((self.tick + self.conditions.ack_delay_ticks, seq, delivered));
        }
        if self.keep_sent {
            self.sent.push(w);
        } else {
            self.spares.push(w);
        }
        matches!(result, WriteResult::HasMoreData)
    }
}

/// [`Link::send`] for every link at once, in passes: each pass writes one packet for
/// every link whose connection has more, with [`ReplicationServer::write_packets`]
/// (on the server's writer threads), at most `max_packets` passes.
pub fn send_all(
    links: &mut [Link],
    server: &mut ReplicationServer,
    now: Duration,
    max_packets: usize,
) -> Traffic {
    let mut t = Traffic::default();
    for l in links.iter_mut() {
        l.begin_tick(server);
    }
    server.write_passes(
        links,
        max_packets,
        |l| {
            let (seq, w) = l.new_packet();
            Some(PacketWrite::new(l.conn, seq, w))
        },
        |server, l, p| l.on_written(server, now, p.sequence, p.writer, p.result, &mut t),
    );
    t
}

/// CPU time consumed by the calling thread, in nanoseconds (Linux
/// `CLOCK_THREAD_CPUTIME_ID`; `None` elsewhere). The harness machine is shared, so the
/// S2 tables report thread CPU time, which other processes' load inflates far less than
/// wall time; wall time is kept in the JSON.
pub fn thread_cpu_ns() -> Option<u64> {
    // CLOCK_THREAD_CPUTIME_ID
    cpu_clock_ns(3)
}

/// CPU time consumed by every thread of the process so far, in nanoseconds (Linux
/// `CLOCK_PROCESS_CPUTIME_ID`; `None` elsewhere): what writer threads cost together.
pub fn process_cpu_ns() -> Option<u64> {
    // CLOCK_PROCESS_CPUTIME_ID
    cpu_clock_ns(2)
}

#[allow(unsafe_code)] // FFI to clock_gettime
fn cpu_clock_ns(clock: i32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            tv_sec: i64,
            tv_nsec: i64,
        }
        unsafe extern "C" {
            fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
        }
        let mut ts = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec (64-bit Linux layout); the call
        // only writes into it.
        let rc = unsafe { clock_gettime(clock, &mut ts) };
        if rc == 0 {
            return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = clock;
        None
    }
}

/// Measures wall time and (where available) thread CPU time of a section.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: std::time::Instant,
    cpu: Option<u64>,
    process: Option<u64>,
}

impl Stopwatch {
    /// Starts measuring. The CPU clocks are system calls (about half a microsecond
    /// each on a virtual machine): the process's is read first, so that its call
    /// falls outside the thread CPU time and the wall time measured.
    pub fn start() -> Self {
        let process = process_cpu_ns();
        let cpu = thread_cpu_ns();
        Self {
            cpu,
            process,
            wall: std::time::Instant::now(),
        }
    }

    /// `(wall ns, CPU ns)`; the CPU figure falls back to wall time without a CPU clock.
    pub fn stop(&self) -> (f64, f64) {
        let wall = self.wall.elapsed().as_nanos() as f64;
        let cpu = match (self.cpu, thread_cpu_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64,
            _ => wall,
        };
        (wall, cpu)
    }

    /// CPU ns of every thread of the process since the start (thread CPU time where
    /// there is no process clock, wall time where there is neither).
    pub fn process_cpu(&self) -> f64 {
        match (self.process, process_cpu_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64,
            _ => self.stop().1,
        }
    }
}

/// Mean and 95th percentile of a sample.
pub fn mean_p95(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let idx = ((sorted.len() as f64 * 0.95).ceil() as usize).clamp(1, sorted.len()) - 1;
    (mean, sorted[idx])
}

/// The median of a sample (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted[sorted.len() / 2]
}

/// A failed sanity check of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanityError(pub String);

impl std::fmt::Display for SanityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SanityError {}

/// Returns an error with `msg` unless `cond` holds.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), SanityError> {
    if cond {
        Ok(())
    } else {
        Err(SanityError(msg()))
    }
}

/// A scenario's results: the markdown (tables and notes) and the JSON.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Markdown text (tables and notes).
    pub markdown: String,
    /// Machine-readable results.
    pub json: crate::report::Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netcode_sequence_is_packed_to_its_bytes() {
        assert_eq!(netcode_sequence_bytes(0), 1);
        assert_eq!(netcode_sequence_bytes(255), 1);
        assert_eq!(netcode_sequence_bytes(256), 2);
        assert_eq!(netcode_sequence_bytes(u64::MAX), 8);
        assert_eq!(wire_bytes(100, 300), 100 + 17 + 2);
    }

    #[test]
    fn baselines_split_at_the_mtu() {
        let mut seq = 0;
        assert_eq!(baseline_wire(0, &mut seq), (0, 0));
        let room = MTU_BYTES - CONNECTION_HEADER_BYTES;
        let (p, b) = baseline_wire(room + 1, &mut seq);
        assert_eq!(p, 2);
        assert_eq!(b, room + 1 + 2 * (CONNECTION_HEADER_BYTES + 18));
        assert_eq!(seq, 2);
    }

    #[test]
    fn s1_small_run_converges_and_beats_the_postcard_model() {
        let p = s1::S1Params {
            warmup: 5,
            ticks: 40,
            seed: 7,
        };
        let r = s1::replicate_run(p, s1::DeltaMode::Off).unwrap();
        assert_eq!(r.converged_objects, 90);
        // The switch works both ways: delta on converges too and sends fewer bytes.
        let d = s1::replicate_run(p, s1::DeltaMode::On).unwrap();
        assert_eq!(d.converged_objects, 90);
        assert!(mean_p95(&d.series.wire).0 < mean_p95(&r.series.wire).0);
        let b = s1::baseline_run(p);
        let (replicate, _) = mean_p95(&r.series.wire);
        let (replicon, _) = mean_p95(&b.replicon.wire);
        assert!(
            replicate > 0.0 && replicate < replicon,
            "{replicate} vs {replicon}"
        );
        // The oracle bounds are below any real encoding, and prediction helps.
        assert!(b.entropy_first < replicate && b.entropy_second < b.entropy_first);
        // The range-coding measurement sees exactly the meter's samples.
        let ticks = p.ticks as f64;
        for m in &b.range_coded {
            let creations = m.payload.iter().sum::<f64>() - m.coded_bytes as f64;
            let bound = (m.entropy_bits / 8.0 + creations) / ticks;
            let meter = match m.diff {
                range_coding::Diff::First => b.entropy_first,
                range_coding::Diff::Second => b.entropy_second,
            };
            assert!((bound - meter).abs() < 1e-6, "{bound} vs {meter}");
        }
        assert_eq!(b.range_coded.len(), 6);
    }

    #[test]
    fn s2_grid_scope_converges_with_fewer_pairs_than_all_in_scope() {
        let setup = s2::Setup {
            objects: 600,
            players: 6,
            connections: 6,
            dirty_fraction: 0.1,
            scope: s2::ScopeMode::All,
            ticks: 3,
            seed: 3,
            delta: DeltaMode::On,
            acks: s2::AckTiming::Instant,
            writers: s2::Writers::PerConnection,
            churn: 0,
        };
        let all = s2::measure(setup).unwrap();
        assert_eq!(all.converged, 600);
        assert_eq!(all.pairs, 60.0 * 6.0);
        assert!(all.payload_bytes > 0.0 && all.payload_bytes < all.baseline_bytes);
        let grid = s2::measure(s2::Setup {
            scope: s2::ScopeMode::Grid,
            ..setup
        })
        .unwrap();
        assert!(grid.converged < 600, "{}", grid.converged);
        assert!(grid.pairs < all.pairs);
    }

    #[test]
    fn a_packet_digest_tells_packets_apart_by_every_bit_and_position() {
        let packet = |words: &[u64], extra_bits: u32| {
            let mut w = BitWriter::with_capacity_bytes(64);
            for &x in words {
                w.write_bits(x, 64);
            }
            w.write_bits(0b101, extra_bits);
            w
        };
        let base = packet_digest(&packet(&[1, 2, 3], 3));
        assert_eq!(base, packet_digest(&packet(&[1, 2, 3], 3)), "equal bytes");
        assert_ne!(base, packet_digest(&packet(&[1, 3, 2], 3)), "words swapped");
        assert_ne!(
            base,
            packet_digest(&packet(&[1, 2, 3 ^ 1 << 40], 3)),
            "a bit flipped"
        );
        assert_ne!(
            base,
            packet_digest(&packet(&[1, 2, 3], 4)),
            "another length"
        );
        assert_ne!(
            base,
            packet_digest(&packet(&[1, 2, 3, 0], 3)),
            "a zero word more"
        );
    }

    #[test]
    fn s2_parallel_writers_write_the_bytes_of_one_and_converge() {
        let setup = s2::Setup {
            objects: 500,
            players: 7,
            connections: 7,
            dirty_fraction: 0.2,
            scope: s2::ScopeMode::All,
            ticks: 4,
            seed: 9,
            delta: DeltaMode::On,
            acks: s2::AckTiming::Spread {
                min_ms: 20,
                max_ms: 200,
            },
            writers: s2::Writers::Passes(1),
            churn: 0,
        };
        let one = s2::measure(setup).unwrap();
        let two = s2::measure(s2::Setup {
            writers: s2::Writers::Passes(2),
            ..setup
        })
        .unwrap();
        assert_eq!(one.converged, 500);
        assert_eq!(two.converged, 500);
        assert_ne!(one.digest, 0);
        assert_eq!(one.digest, two.digest, "other packets on two threads");
        assert_eq!(one.payload_bytes, two.payload_bytes);
    }

    #[test]
    fn s2_with_creations_and_destroys_replays_and_sends_what_each_writes_alone() {
        // Each tick spawns objects and destroys those of two ticks before: a tick's
        // first packets carry creations and are each connection's own, the later
        // ones are replayed again. On as many threads as connections nothing is
        // replayed. Both send the same packets.
        let setup = s2::Setup {
            objects: 3000,
            players: 6,
            connections: 6,
            dirty_fraction: 0.2,
            scope: s2::ScopeMode::All,
            ticks: 6,
            seed: 11,
            delta: DeltaMode::On,
            acks: s2::AckTiming::Instant,
            writers: s2::Writers::Passes(1),
            churn: 2,
        };
        let shared = s2::measure(setup).unwrap();
        let alone = s2::measure(s2::Setup {
            writers: s2::Writers::Passes(6),
            ..setup
        })
        .unwrap();
        assert_eq!(shared.converged, 3000);
        assert_eq!(alone.replayed_share, 0.0);
        assert!(shared.replayed_share > 0.2, "{}", shared.replayed_share);
        assert_ne!(shared.digest, 0);
        assert_eq!(shared.digest, alone.digest, "replays changed packets");
    }

    #[test]
    fn s2_converges_with_round_trips_spread_and_shares_fewer_segments() {
        let setup = s2::Setup {
            objects: 400,
            players: 8,
            connections: 8,
            dirty_fraction: 0.2,
            scope: s2::ScopeMode::All,
            ticks: 6,
            seed: 5,
            delta: DeltaMode::On,
            acks: s2::AckTiming::Instant,
            writers: s2::Writers::PerConnection,
            churn: 0,
        };
        let in_step = s2::measure(setup).unwrap();
        assert_eq!(in_step.converged, 400);
        // Eight connections in step: one encodes, seven copy.
        assert!(
            in_step.copies_per_encoding > 6.0,
            "{}",
            in_step.copies_per_encoding
        );
        let spread = s2::measure(s2::Setup {
            acks: s2::AckTiming::Spread {
                min_ms: 20,
                max_ms: 200,
            },
            ..setup
        })
        .unwrap();
        assert_eq!(spread.converged, 400);
        assert!(spread.copies_per_encoding < in_step.copies_per_encoding);
        assert_eq!(s2::AckTiming::Instant.delay_ticks(3, 8), 0);
        let spread_ticks = |c| {
            s2::AckTiming::Spread {
                min_ms: 20,
                max_ms: 200,
            }
            .delay_ticks(c, 8)
        };
        assert_eq!((spread_ticks(0), spread_ticks(7)), (1, 6));
    }

    #[test]
    fn thread_cpu_time_advances_with_work() {
        let w = Stopwatch::start();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let (wall, cpu) = w.stop();
        assert!(cpu > 0.0 && wall > 0.0);
        // CPU time of this thread cannot exceed its wall time by more than clock slack.
        assert!(cpu <= wall * 1.05 + 100_000.0, "{cpu} > {wall}");
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(mean_p95(&v), (50.5, 95.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}
