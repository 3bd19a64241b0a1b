//! Shared helpers of the `interest_*` tests: derived types with every condition, a
//! decoder of the replication stream's wire format (which members each batch carried,
//! checked to the last bit), a packet-by-packet server with several clients
//! ([`Net`]) and a simulation over real connections and lossy links ([`Sim`]).

#![allow(dead_code)]

use replicate::bits::{BitReader, BitWriter};
use replicate::connection::{Connection, ConnectionConfig, DeliveryStatus, PacketSequence};
use replicate::link::{LinkConditioner, LinkSimulator};
use replicate::object::ConnectionId;
use replicate::protocol::{ProtocolRegistry, Registration};
use replicate::replication::{
    ReplicationClient, ReplicationConfig, ReplicationServer, ReplicationWriter,
};
use replicate::stream::WriteResult;
use replicate::{ChangeMask, NetRefHandle, Replicated};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A player with one member of every condition.
#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(register = false)]
pub struct Hero {
    pub hp: u8,
    #[net(cond = OwnerOnly)]
    pub ammo: u32,
    #[net(cond = SkipOwner)]
    pub disguise: u8,
    #[net(cond = AutonomousOnly)]
    pub input_seq: u16,
    #[net(cond = SimulatedOnly)]
    pub smoothed: u16,
    #[net(init)]
    pub team: u8,
    #[net(cond = Custom)]
    pub secret: u16,
    #[net(cond = InitialOrOwner)]
    pub spawn_point: u16,
    #[net(cond = InitialOnly)]
    pub seed: u32,
    #[net(cond = Never)]
    pub server_only: u8,
}

/// A thing in the world with a position (grid filter, sphere prioritizer).
#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(register = false)]
pub struct Rock {
    pub x: i32,
    pub y: i32,
    pub hp: u32,
    pub payload: u64,
}

pub fn registry() -> Arc<ProtocolRegistry> {
    Arc::new(
        ProtocolRegistry::from_registrations([
            Registration::of::<Hero>(),
            Registration::of::<Rock>(),
        ])
        .expect("registry"),
    )
}

/// Change-mask bit of a member by name.
pub fn bit_of<T: Replicated>(name: &str) -> u32 {
    T::descriptor()
        .members
        .iter()
        .find(|m| m.name == name)
        .map(|m| m.change_mask_offset)
        .unwrap_or_else(|| panic!("no member {name}"))
}

/// One object batch as it was on the wire.
#[derive(Debug)]
pub struct WireBatch {
    pub handle: NetRefHandle,
    pub creation: bool,
    pub mask: ChangeMask,
    /// The members' values as decoded (a quantized state with only `mask` applied).
    pub state: Box<dyn replicate::protocol::ErasedState>,
}

impl Clone for WireBatch {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle,
            creation: self.creation,
            mask: self.mask.clone(),
            state: self.state.clone_box(),
        }
    }
}

impl WireBatch {
    pub fn has(&self, member_bit: u32) -> bool {
        self.mask.get(member_bit)
    }
}

/// What one packet carried in its replication stream.
#[derive(Debug, Clone, Default)]
pub struct WirePacket {
    pub destroys: Vec<NetRefHandle>,
    pub batches: Vec<WireBatch>,
}

/// Decodes the replication stream of a packet written after a 16-bit sequence (as
/// [`Net`] writes them), independently of the client: stream header, destroys, then
/// each batch's header, change mask and members, checking that the members fill the
/// batch to the last bit (a member written without its mask bit would break that).
/// `types` maps handles to their type once their creation was seen.
pub fn decode_packet(
    registry: &ProtocolRegistry,
    types: &mut HashMap<NetRefHandle, usize>,
    bytes: &[u8],
) -> WirePacket {
    let mut out = WirePacket::default();
    let mut r = BitReader::new(bytes);
    let _seq = r.read_bits(16);
    if r.bits_left() < 7 {
        return out;
    }
    let count = r.read_bits(5) + 1;
    let mask = r.read_bits(count as u32);
    if mask & 1 == 0 {
        return out;
    }
    while r.read_bool() {
        out.destroys
            .push(NetRefHandle::read(&mut r).expect("destroy handle"));
    }
    while r.read_bool() {
        let handle = NetRefHandle::read(&mut r).expect("batch handle");
        let size = ReplicationWriter::read_batch_size(&mut r);
        let mut b = r.substream(size);
        let has_exports = b.read_bool();
        assert!(!has_exports, "the interest tests use no tags");
        let creation = b.read_bool();
        if creation {
            let p = b.read_bits(registry.index_bits()) as usize;
            types.insert(handle, p);
            if b.read_bool() {
                NetRefHandle::read(&mut b).expect("owner");
            }
        }
        let _tear_off = b.read_bool();
        let delta = b.read_bool();
        assert!(!delta, "decoder does not read delta batches");
        let has_tags = b.read_bool();
        assert!(!has_tags);
        let p = *types
            .get(&handle)
            .expect("batch of an object never created");
        let reg = registry.get(p as u16).expect("protocol");
        let bits = (reg.descriptor)().change_mask_bits;
        let mask = ChangeMask::read(bits, &mut b).expect("mask");
        let mut state = (reg.new_state)();
        state.deserialize(&mask, &mut b).expect("members");
        assert_eq!(
            b.bits_left(),
            0,
            "batch of {handle} holds bits beyond its masked members"
        );
        out.batches.push(WireBatch {
            handle,
            creation,
            mask,
            state,
        });
    }
    out
}

pub struct NetClient {
    pub conn: ConnectionId,
    pub client: ReplicationClient,
    pub types: HashMap<NetRefHandle, usize>,
    /// Every packet this client was sent, decoded.
    pub wire: Vec<WirePacket>,
}

/// A server and clients driven packet by packet (no link): every packet arrives and
/// is acked, unless the test drops it. Delta compression is off, so every batch can be
/// decoded on its own.
pub struct Net {
    pub server: ReplicationServer,
    pub clients: Vec<NetClient>,
    pub registry: Arc<ProtocolRegistry>,
    pub now: Duration,
    pub seq: u16,
    pub dt: Duration,
    pub mtu: usize,
    pub packets_per_tick: usize,
}

impl Net {
    pub fn new(clients: usize) -> Self {
        let registry = registry();
        // The wire decoder reads full batches: delta compression off here (the
        // simulation keeps it on).
        let mut config = ReplicationConfig::default();
        config.delta.enabled = false;
        let mut net = Self {
            server: ReplicationServer::new(registry.clone(), config),
            clients: Vec::new(),
            registry,
            now: Duration::ZERO,
            seq: 0,
            dt: Duration::from_micros(33_333),
            mtu: 1200,
            packets_per_tick: 8,
        };
        for _ in 0..clients {
            net.add_client();
        }
        net
    }

    pub fn add_client(&mut self) -> usize {
        let conn = self.server.add_connection();
        self.clients.push(NetClient {
            conn,
            client: ReplicationClient::new(self.registry.clone(), ReplicationConfig::default()),
            types: HashMap::new(),
            wire: Vec::new(),
        });
        self.clients.len() - 1
    }

    /// Ticks the server and writes packets to every client (up to
    /// `packets_per_tick`, while the writer has more); `lose(client, packet)` decides
    /// which packets are lost (reported lost, not delivered). Returns what each client
    /// was sent this tick.
    pub fn tick_with(
        &mut self,
        mut lose: impl FnMut(usize, usize) -> bool,
    ) -> Vec<Vec<WirePacket>> {
        self.now += self.dt;
        self.server.tick(self.now);
        let mut sent = Vec::new();
        for (ci, c) in self.clients.iter_mut().enumerate() {
            let mut this = Vec::new();
            for pi in 0..self.packets_per_tick {
                let seq = PacketSequence(self.seq);
                self.seq = self.seq.wrapping_add(1);
                let mut w = BitWriter::with_capacity_bits(16 + self.mtu * 8);
                w.write_bits(seq.0 as u64, 16);
                let result = self.server.write_packet(c.conn, seq, &mut w);
                let bytes = w.finish().expect("fits");
                let decoded = decode_packet(&self.registry, &mut c.types, &bytes);
                if lose(ci, pi) {
                    self.server
                        .process_delivery(c.conn, seq, DeliveryStatus::Lost);
                } else {
                    let mut r = BitReader::new(&bytes);
                    let s = PacketSequence(r.read_bits(16) as u16);
                    c.client
                        .read_packet(self.now, s, &mut r)
                        .expect("well-formed packet");
                    self.server
                        .process_delivery(c.conn, seq, DeliveryStatus::Delivered);
                }
                c.wire.push(decoded.clone());
                this.push(decoded);
                if result != WriteResult::HasMoreData {
                    break;
                }
            }
            sent.push(this);
        }
        sent
    }

    pub fn tick(&mut self) -> Vec<Vec<WirePacket>> {
        self.tick_with(|_, _| false)
    }

    pub fn client(&self, i: usize) -> &ReplicationClient {
        &self.clients[i].client
    }
}

/// SplitMix64.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One client of a [`Sim`].
pub struct Peer {
    pub conn: ConnectionId,
    pub client: ReplicationClient,
    pub server_conn: Connection,
    pub client_conn: Connection,
    pub down: LinkSimulator,
    pub up: LinkSimulator,
    pub stream_errors: usize,
}

/// A server and clients over sans-IO connections and seeded lossy links.
pub struct Sim {
    pub server: ReplicationServer,
    pub peers: Vec<Peer>,
    pub now: Duration,
    pub mtu: usize,
    pub packets_per_tick: usize,
    seed: u64,
    conditioner: LinkConditioner,
}

impl Sim {
    pub fn new(seed: u64, conditioner: LinkConditioner, peers: usize) -> Self {
        let mut sim = Self {
            server: ReplicationServer::new(registry(), ReplicationConfig::default()),
            peers: Vec::new(),
            now: Duration::ZERO,
            mtu: 1200,
            packets_per_tick: 4,
            seed,
            conditioner,
        };
        for _ in 0..peers {
            sim.add_peer();
        }
        sim
    }

    pub fn add_peer(&mut self) -> usize {
        let n = self.peers.len() as u64;
        let seed = self.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9));
        let conn = self.server.add_connection();
        self.peers.push(Peer {
            conn,
            client: ReplicationClient::new(registry(), ReplicationConfig::default()),
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

    pub fn step(&mut self, dt: Duration) {
        self.now += dt;
        let now = self.now;
        for p in &mut self.peers {
            let arrived: Vec<Vec<u8>> = p.down.drain(now).collect();
            for bytes in arrived {
                let mut r = BitReader::new(&bytes);
                if let Ok(seq) = p.client_conn.read_header(now, &mut r)
                    && p.client.read_packet(now, seq, &mut r).is_err()
                {
                    p.stream_errors += 1;
                }
            }
            let arrived: Vec<Vec<u8>> = p.up.drain(now).collect();
            for bytes in arrived {
                let mut r = BitReader::new(&bytes);
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
            let mut w = BitWriter::with_capacity_bytes(self.mtu);
            let seq = p.client_conn.write_header(now, &mut w);
            p.client.write_packet(seq, &mut w);
            p.up.send(now, &w.finish().expect("fits"));
            p.client.update(now);
        }
    }
}
