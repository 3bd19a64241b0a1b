//! [`Link`]: a server and one client joined by a hand-driven link (no connection layer,
//! no sequence prefix): each test decides which packets share a tick, which are lost,
//! and when time passes. Both ends take every type registered in the test binary.

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::object::ConnectionId;
use replicate::internals::protocol::ProtocolRegistry;
use replicate::internals::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
use replicate::internals::stream::WriteResult;
use std::sync::Arc;
use std::time::Duration;

/// The server, its one connection and the client.
pub struct Link {
    pub server: ReplicationServer,
    pub client: ReplicationClient,
    pub conn: ConnectionId,
    pub seq: u16,
    pub now: Duration,
}

impl Link {
    /// Both ends with `config` and every registered type.
    pub fn new(config: ReplicationConfig) -> Self {
        let registry = Arc::new(ProtocolRegistry::from_inventory().expect("registry"));
        let mut server = ReplicationServer::new(registry.clone(), config.clone());
        let client = ReplicationClient::new(registry, config);
        let conn = server.add_connection();
        Self {
            server,
            client,
            conn,
            seq: 0,
            now: Duration::ZERO,
        }
    }

    /// Writes one 1200-byte packet (without a tick) and delivers it; returns whether
    /// the server had anything to send.
    pub fn packet(&mut self) -> bool {
        self.packet_lossy(false)
    }

    /// Writes one packet and delivers it, or loses it (reported lost to the server).
    pub fn packet_lossy(&mut self, lose: bool) -> bool {
        let seq = PacketSequence(self.seq);
        self.seq = self.seq.wrapping_add(1);
        let mut w = BitWriter::with_capacity_bytes(1200);
        if self.server.write_packet(self.conn, seq, &mut w) == WriteResult::NoData {
            return false;
        }
        if lose {
            self.server
                .process_delivery(self.conn, seq, DeliveryStatus::Lost);
            return true;
        }
        let bits = w.position();
        let bytes = w.finish().expect("packet");
        self.client
            .read_packet(self.now, seq, &mut BitReader::with_bit_len(&bytes, bits))
            .expect("read");
        self.server
            .process_delivery(self.conn, seq, DeliveryStatus::Delivered);
        true
    }

    /// Advances the clock by one 16 ms tick and ticks the server (no packet).
    pub fn tick(&mut self) {
        self.now += Duration::from_millis(16);
        self.server.tick(self.now);
    }

    /// One server tick and every packet it produces.
    pub fn step(&mut self) {
        self.tick();
        while self.packet() {}
    }
}
