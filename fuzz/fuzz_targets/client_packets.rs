//! Packets from a (malicious) server into the client: the stream manager, replication
//! reader (creations, delta batches, destroys, references), tokens, huge-object parts
//! and messages. Never a panic; the client stays within its caps.
#![no_main]

use libfuzzer_sys::fuzz_target;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::replication::{ReplicationClient, ReplicationConfig};
use replicate_fuzz::{packets, registry};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let config = ReplicationConfig {
        max_client_objects: 256,
        ..ReplicationConfig::default()
    };
    let mut client = ReplicationClient::new(registry(), config);
    let mut seq = 0u16;
    let mut now = Duration::ZERO;
    for (step, packet) in packets(data) {
        seq = seq.wrapping_add(u16::from(step)).wrapping_sub(1);
        now += Duration::from_millis(16);
        let _ = client.read_packet(now, PacketSequence(seq), &mut BitReader::new(packet));
        client.update(now);
        // The client answers (broken-object reports, messages) and hears back.
        let mut w = BitWriter::with_capacity_bytes(1200);
        client.write_packet(PacketSequence(seq), &mut w);
        client.process_delivery(PacketSequence(seq), DeliveryStatus::Delivered);
        let _ = client.drain_messages();
        let _ = client.drain_events();
        assert!(client.len() <= 256, "object cap exceeded");
        seq = seq.wrapping_add(1);
    }
});
