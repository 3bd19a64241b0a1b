//! Shared helpers of the `attachment_*` and `huge_*` tests: derived message and object
//! types, and a server/clients simulation over the real [`Connection`] and the seeded
//! [`LinkSimulator`] (loss, duplication, reordering).

#![allow(dead_code)]

use replicate::Replicated;
use replicate::bits::{BitReader, BitWriter};
use replicate::connection::{Connection, ConnectionConfig};
use replicate::link::{LinkConditioner, LinkSimulator};
use replicate::object::ConnectionId;
use replicate::protocol::ProtocolRegistry;
use replicate::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
use replicate::stream::WriteResult;
use std::sync::Arc;
use std::time::Duration;

/// A chat line (a message type).
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Chat {
    pub seq: u32,
    #[net(max_len = 64)]
    pub text: String,
}

/// A request a client may send; the server only accepts `amount <= 10`.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Buy {
    pub item: u16,
    pub amount: u8,
}

/// A small replicated object.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Door {
    pub open: bool,
    pub code: u32,
}

/// An object whose state may exceed a packet by far.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
pub struct Blobby {
    pub id: u32,
    #[net(max_len = 65535)]
    pub data: Vec<u64>,
}

pub fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(ProtocolRegistry::from_inventory().expect("registry"))
}

/// Deterministic data of `len` bytes (rounded up to whole words).
pub fn bytes(seed: u64, len: usize) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len.div_ceil(8))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect()
}

pub struct Peer {
    pub conn: ConnectionId,
    pub client: ReplicationClient,
    pub server_conn: Connection,
    pub client_conn: Connection,
    pub down: LinkSimulator,
    pub up: LinkSimulator,
    pub stream_errors: usize,
}

pub struct Sim {
    pub server: ReplicationServer,
    pub peers: Vec<Peer>,
    pub now: Duration,
    pub mtu: usize,
    pub packets_per_tick: usize,
    pub config: ReplicationConfig,
    seed: u64,
    conditioner: LinkConditioner,
}

impl Sim {
    pub fn new(seed: u64, conditioner: LinkConditioner, config: ReplicationConfig) -> Self {
        let mut sim = Self {
            server: ReplicationServer::new(registry(), config.clone()),
            peers: Vec::new(),
            now: Duration::ZERO,
            mtu: 1200,
            packets_per_tick: 8,
            config,
            seed,
            conditioner,
        };
        sim.add_peer();
        sim
    }

    pub fn add_peer(&mut self) -> usize {
        let n = self.peers.len() as u64;
        let seed = self.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9));
        let conn = self.server.add_connection();
        self.peers.push(Peer {
            conn,
            client: ReplicationClient::new(registry(), self.config.clone()),
            server_conn: Connection::new(ConnectionConfig::default()),
            client_conn: Connection::new(ConnectionConfig::default()),
            down: LinkSimulator::new(self.conditioner.clone(), seed),
            up: LinkSimulator::new(self.conditioner.clone(), seed ^ 0xABCD),
            stream_errors: 0,
        });
        self.peers.len() - 1
    }

    pub fn set_conditioner(&mut self, c: LinkConditioner) {
        for p in &mut self.peers {
            p.down.set_conditioner(c.clone());
            p.up.set_conditioner(c.clone());
        }
    }

    /// Deliver arrived packets both ways, process notifications, tick the server, then
    /// write up to `packets_per_tick` server packets and one client packet per peer.
    pub fn step(&mut self, dt: Duration) {
        self.now += dt;
        let now = self.now;
        for p in &mut self.peers {
            let arrived: Vec<Vec<u8>> = p.down.drain(now).collect();
            for b in arrived {
                let mut r = BitReader::new(&b);
                if let Ok(seq) = p.client_conn.read_header(now, &mut r)
                    && p.client.read_packet(now, seq, &mut r).is_err()
                {
                    p.stream_errors += 1;
                }
            }
            let arrived: Vec<Vec<u8>> = p.up.drain(now).collect();
            for b in arrived {
                let mut r = BitReader::new(&b);
                if p.server_conn.read_header(now, &mut r).is_ok()
                    && self.server.read_packet(p.conn, &mut r).is_err()
                {
                    p.stream_errors += 1;
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
        for p in &mut self.peers {
            for _ in 0..self.packets_per_tick {
                let mut w = BitWriter::with_capacity_bytes(self.mtu);
                let seq = p.server_conn.write_header(now, &mut w);
                let result = self.server.write_packet(p.conn, seq, &mut w);
                p.down.send(now, &w.finish().expect("fits"));
                if result != WriteResult::HasMoreData {
                    break;
                }
            }
            for _ in 0..2 {
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

    pub fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.step(Duration::from_millis(16));
        }
    }

    /// Steps until `done` holds (checked after each step); panics after `max` steps.
    pub fn run_until(&mut self, max: usize, mut done: impl FnMut(&mut Sim) -> bool) -> usize {
        for i in 0..max {
            self.step(Duration::from_millis(16));
            if done(self) {
                return i + 1;
            }
        }
        panic!("condition not reached after {max} steps");
    }
}
