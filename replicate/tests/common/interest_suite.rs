//! The `interest_*` suite: derived types with every condition, their registry and
//! [`setup`] for a [`Sim`](super::Sim), a decoder of the replication stream's wire
//! format (which members each batch carried, checked to the last bit) and a
//! packet-by-packet server with several clients ([`Net`]).

use super::{Setup, read_manual_packet, write_manual_packet};
use replicate::bits::BitReader;
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::object::ConnectionId;
use replicate::internals::protocol::{ProtocolRegistry, Registration};
use replicate::internals::replication::{
    ReplicationClient, ReplicationConfig, ReplicationServer, ReplicationWriter,
};
use replicate::internals::stream::WriteResult;
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

/// A [`Sim`](super::Sim) of these types: `peers` clients, 4 server packets per tick
/// (delta compression stays on there).
pub fn setup(peers: usize) -> Setup {
    Setup {
        peers,
        packets_per_tick: 4,
        ..Setup::new(registry())
    }
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
    pub state: Box<dyn replicate::internals::protocol::ErasedState>,
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

/// What a [`decode_packet`] caller knows of one connection's objects: the types of
/// the handles created so far and the handle each object index names.
#[derive(Debug, Default)]
pub struct WireTypes {
    by_handle: HashMap<NetRefHandle, usize>,
    by_index: HashMap<u32, NetRefHandle>,
}

/// Decodes the replication stream of a packet written after a 16-bit sequence (as
/// [`Net`] writes them), independently of the client: stream header, destroys, then
/// each batch's index, form, head, change mask and members, checking that a long
/// form's members fill the batch to the last bit (a member written without its mask
/// bit would break that). `types` learns the objects' types from their creations.
pub fn decode_packet(
    registry: &ProtocolRegistry,
    types: &mut WireTypes,
    bytes: &[u8],
) -> WirePacket {
    use replicate::internals::replication::wire::{BatchHead, SectionFrame, read_mask};
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
    let mut frame = SectionFrame::begin_read(&mut r).expect("index width");
    while let Some(index) = frame.read_index(&mut r).expect("object index") {
        let long_form = r.read_bool();
        let (mut b, size) = if long_form {
            let size = replicate::internals::replication::read_batch_size(&mut r);
            (r.substream(size), Some(size))
        } else {
            (r.clone(), None)
        };
        let start = b.position();
        let has_exports = long_form && b.read_bool();
        assert!(!has_exports, "the interest tests use no tags");
        let creation = long_form && b.read_bool();
        let handle = if creation {
            let handle = NetRefHandle::read(&mut b).expect("creation handle");
            let p = b.read_bits(registry.index_bits()) as usize;
            types.by_handle.insert(handle, p);
            types.by_index.insert(index, handle);
            if b.read_bool() {
                NetRefHandle::read(&mut b).expect("owner");
            }
            handle
        } else {
            *types
                .by_index
                .get(&index)
                .expect("batch of an object never created")
        };
        let _tear_off = long_form && b.read_bool();
        let head = if long_form {
            BatchHead::read(&mut b, |_| false).expect("head")
        } else {
            frame.read_head(&mut b, |_| false).expect("head")
        };
        assert_eq!(head, BatchHead::Full, "decoder does not read delta batches");
        let has_tags = long_form && b.read_bool();
        assert!(!has_tags);
        let p = types.by_handle[&handle];
        let reg = registry.get(p as u16).expect("protocol");
        let bits = (reg.descriptor)().change_mask_bits;
        let mask = if long_form {
            read_mask(&mut b, bits, None).expect("mask")
        } else {
            frame.read_mask(&mut b, p as u16, bits, None).expect("mask")
        };
        if !long_form {
            frame.note_plain(head, p as u16, &mask);
        }
        let mut state = (reg.new_state)();
        state.deserialize(&mask, &mut b).expect("members");
        match size {
            Some(size) => assert_eq!(
                b.position() - start,
                size,
                "batch of {handle} holds bits beyond its masked members"
            ),
            None => r = b,
        }
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
    pub types: WireTypes,
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
            types: WireTypes::default(),
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
                let (result, bytes) = write_manual_packet(&mut self.server, c.conn, seq, self.mtu);
                let decoded = decode_packet(&self.registry, &mut c.types, &bytes);
                if lose(ci, pi) {
                    self.server
                        .process_delivery(c.conn, seq, DeliveryStatus::Lost);
                } else {
                    read_manual_packet(&mut c.client, self.now, &bytes)
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
