//! [`Sim`]: a server and clients over the crate's sans-IO [`Connection`]s and seeded
//! [`LinkSimulator`]s (loss, duplication, jitter and reordering), shared by every suite;
//! each suite's module gives it a [`Setup`] (registry, config, packets per tick).

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{Connection, ConnectionConfig};
use replicate::internals::link::{LinkConditioner, LinkSimulator};
use replicate::internals::object::ConnectionId;
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::{
    PacketWrite, ReplicationClient, ReplicationConfig, ReplicationServer,
};
use replicate::internals::stream::WriteResult;
use std::sync::Arc;
use std::time::Duration;

/// What a [`Sim`] is built from: the suite's registry and config, how many clients it
/// starts with and how many packets each side may write per tick.
#[derive(Clone)]
pub struct Setup {
    /// The protocol registry of the server and every client.
    pub registry: Arc<ProtocolRegistry>,
    /// The replication config of the server and every client.
    pub config: ReplicationConfig,
    /// Clients connected by [`Sim::new`].
    pub peers: usize,
    /// Most server packets per client per tick (while the writer has more).
    pub packets_per_tick: usize,
    /// Most client packets per tick (while the client has more: messages to send).
    pub client_packets_per_tick: usize,
}

impl Setup {
    /// One client, the default config, 3 server packets and 1 client packet per tick.
    pub fn new(registry: Arc<ProtocolRegistry>) -> Self {
        Self {
            registry,
            config: ReplicationConfig::default(),
            peers: 1,
            packets_per_tick: 3,
            client_packets_per_tick: 1,
        }
    }
}

/// One client of a [`Sim`]: its connection on both ends and its two links.
pub struct Peer {
    pub conn: ConnectionId,
    pub client: ReplicationClient,
    pub server_conn: Connection,
    pub client_conn: Connection,
    /// Server to client.
    pub down: LinkSimulator,
    /// Client to server.
    pub up: LinkSimulator,
    /// Packets whose streams failed to read (either direction).
    pub stream_errors: usize,
    /// Packets whose connection header was rejected for a reason that is not benign.
    pub header_errors: usize,
    /// A digest (FNV-1a) of every packet the server sent this client, in order.
    pub sent_digest: u64,
}

impl Peer {
    /// Sends a server packet down the link, adding it to the digest.
    fn send_down(&mut self, now: Duration, w: BitWriter) {
        let bytes = w.finish().expect("fits");
        for &b in &bytes {
            self.sent_digest = (self.sent_digest ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
        self.down.send(now, &bytes);
    }
}

/// A server and clients over sans-IO connections and seeded lossy links.
pub struct Sim {
    pub server: ReplicationServer,
    pub peers: Vec<Peer>,
    pub now: Duration,
    pub mtu: usize,
    pub packets_per_tick: usize,
    pub client_packets_per_tick: usize,
    pub registry: Arc<ProtocolRegistry>,
    pub config: ReplicationConfig,
    /// Each connection encodes its batches alone: the tick's shared segments are
    /// dropped before every connection's packets (for differential tests).
    pub unshared_encoding: bool,
    /// Every client's packets of a tick are written in passes of one packet each
    /// ([`ReplicationServer::write_packets`], on the config's writer threads) rather
    /// than client by client.
    pub batched_writes: bool,
    seed: u64,
    conditioner: LinkConditioner,
}

impl Sim {
    /// A server with `setup.peers` clients over links with `conditioner`, seeded by `seed`.
    pub fn new(setup: Setup, seed: u64, conditioner: LinkConditioner) -> Self {
        let mut sim = Self {
            server: ReplicationServer::new(setup.registry.clone(), setup.config.clone()),
            peers: Vec::new(),
            now: Duration::ZERO,
            mtu: 1200,
            packets_per_tick: setup.packets_per_tick,
            client_packets_per_tick: setup.client_packets_per_tick,
            registry: setup.registry,
            config: setup.config,
            unshared_encoding: false,
            batched_writes: false,
            seed,
            conditioner,
        };
        for _ in 0..setup.peers {
            sim.add_peer();
        }
        sim
    }

    /// Connects another client; returns its index in `peers`.
    pub fn add_peer(&mut self) -> usize {
        let n = self.peers.len() as u64;
        let seed = self.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9));
        let conn = self.server.add_connection();
        self.peers.push(Peer {
            conn,
            client: ReplicationClient::new(self.registry.clone(), self.config.clone()),
            server_conn: Connection::new(ConnectionConfig::default()),
            client_conn: Connection::new(ConnectionConfig::default()),
            down: LinkSimulator::new(self.conditioner.clone(), seed),
            up: LinkSimulator::new(self.conditioner.clone(), seed ^ 0xABCD),
            stream_errors: 0,
            header_errors: 0,
            sent_digest: 0xCBF2_9CE4_8422_2325,
        });
        self.peers.len() - 1
    }

    /// Replaces every link's conditions (for example to let the links quiet).
    pub fn set_conditioner(&mut self, c: LinkConditioner) {
        for p in &mut self.peers {
            p.down.set_conditioner(c.clone());
            p.up.set_conditioner(c.clone());
        }
    }

    /// One tick of `dt`: deliver arrived packets both ways, process delivery
    /// notifications, tick the server once, then for every client write up to
    /// `packets_per_tick` server packets and up to `client_packets_per_tick` client
    /// packets (the first carries the acks), each time while the writer has more.
    pub fn step(&mut self, dt: Duration) {
        self.now += dt;
        let now = self.now;
        for p in &mut self.peers {
            let arrived: Vec<Vec<u8>> = p.down.drain(now).collect();
            for bytes in arrived {
                let mut r = BitReader::new(&bytes);
                match p.client_conn.read_header(now, &mut r) {
                    Ok(seq) => {
                        if p.client.read_packet(now, seq, &mut r).is_err() {
                            p.stream_errors += 1;
                        }
                    }
                    Err(e) if e.is_benign() => {}
                    Err(_) => p.header_errors += 1,
                }
            }
            let arrived: Vec<Vec<u8>> = p.up.drain(now).collect();
            for bytes in arrived {
                let mut r = BitReader::new(&bytes);
                match p.server_conn.read_header(now, &mut r) {
                    Ok(_) => {
                        if self.server.read_packet(p.conn, &mut r).is_err() {
                            p.stream_errors += 1;
                        }
                    }
                    Err(e) if e.is_benign() => {}
                    Err(_) => p.header_errors += 1,
                }
            }
            p.server_conn.update(now);
            while let Some((seq, status)) = p.server_conn.poll_delivery() {
                self.server.process_delivery(p.conn, seq, status);
            }
            p.client_conn.update(now);
            while let Some((seq, status)) = p.client_conn.poll_delivery() {
                p.client.process_delivery(seq, status);
            }
        }
        self.server.tick(now);
        if self.batched_writes {
            self.write_batched(now);
        } else {
            for p in &mut self.peers {
                if self.unshared_encoding {
                    // A mutable borrow of the table drops the shared segments.
                    let _ = self.server.objects_mut();
                }
                for _ in 0..self.packets_per_tick {
                    let mut w = BitWriter::with_capacity_bytes(self.mtu);
                    let seq = p.server_conn.write_header(now, &mut w);
                    let result = self.server.write_packet(p.conn, seq, &mut w);
                    p.send_down(now, w);
                    if result != WriteResult::HasMoreData {
                        break;
                    }
                }
            }
        }
        for p in &mut self.peers {
            for _ in 0..self.client_packets_per_tick {
                let mut w = BitWriter::with_capacity_bytes(self.mtu);
                let seq = p.client_conn.write_header(now, &mut w);
                let result = p.client.write_packet(seq, &mut w);
                p.up.send(now, &w.finish().expect("fits"));
                if result != WriteResult::HasMoreData {
                    break;
                }
            }
            p.client.update(now);
        }
    }

    /// The server's packets of a tick in passes: each pass writes one packet for
    /// every client whose writer had more.
    fn write_batched(&mut self, now: Duration) {
        let mtu = self.mtu;
        self.server.write_passes(
            &mut self.peers,
            self.packets_per_tick,
            |p| {
                let mut w = BitWriter::with_capacity_bytes(mtu);
                let seq = p.server_conn.write_header(now, &mut w);
                Some(PacketWrite::new(p.conn, seq, w))
            },
            |_, p, packet| {
                let more = packet.result == WriteResult::HasMoreData;
                p.send_down(now, packet.writer);
                more
            },
        );
    }

    /// `steps` ticks of 16 ms.
    pub fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.step(Duration::from_millis(16));
        }
    }

    /// Steps 16 ms at a time until `done` holds (checked after each step); returns the
    /// steps taken; panics after `max` steps.
    pub fn run_until(&mut self, max: usize, mut done: impl FnMut(&mut Sim) -> bool) -> usize {
        for i in 0..max {
            self.step(Duration::from_millis(16));
            if done(self) {
                return i + 1;
            }
        }
        panic!("condition not reached after {max} steps");
    }

    /// Whether the server's writer of every client is idle (nothing dirty, nothing in
    /// flight).
    pub fn writers_idle(&self) -> bool {
        self.peers
            .iter()
            .all(|p| self.server.writer(p.conn).is_some_and(|w| w.is_idle()))
    }
}

/// [`LinkConditioner::bad`] without loss or duplication: still slow, jittery and
/// reordering, so everything sent arrives in the end (the links "quiet").
pub fn quiet_bad_link() -> LinkConditioner {
    LinkConditioner {
        loss: 0.0,
        duplicate: 0.0,
        ..LinkConditioner::bad()
    }
}

/// Ticks in a row every writer must be idle before a simulation counts as settled
/// (longer than the bad link's largest delay, so everything sent has arrived).
pub const SETTLED_IDLE_TICKS: usize = 30;

/// Calls `step` until `idle` has held after [`SETTLED_IDLE_TICKS`] steps in a row, at
/// most `max` steps; returns the steps taken and whether it settled.
pub fn settle<W>(
    world: &mut W,
    max: usize,
    mut step: impl FnMut(&mut W),
    mut idle: impl FnMut(&W) -> bool,
) -> (usize, bool) {
    let mut idle_run = 0;
    for steps in 1..=max {
        step(world);
        idle_run = if idle(world) { idle_run + 1 } else { 0 };
        if idle_run >= SETTLED_IDLE_TICKS {
            return (steps, true);
        }
    }
    (max, false)
}
