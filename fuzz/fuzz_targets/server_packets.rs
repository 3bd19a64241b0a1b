//! Packets from a (malicious) client into the server: broken-object reports and
//! messages (decoding, validation, large-message reassembly). Never a panic; the
//! server's objects never change.
#![no_main]

use libfuzzer_sys::fuzz_target;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::replication::{ReplicationConfig, ReplicationServer};
use replicate_fuzz::{Pawn, packets, registry};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let mut server = ReplicationServer::new(registry(), ReplicationConfig::default());
    let conn = server.add_connection();
    let pawn = Pawn {
        health: 42,
        ..Pawn::default()
    };
    let h = server.objects_mut().spawn(pawn.clone()).expect("spawn");
    let mut now = Duration::ZERO;
    let mut seq = 0u16;
    for (_, packet) in packets(data) {
        now += Duration::from_millis(16);
        server.tick(now);
        let mut w = BitWriter::with_capacity_bytes(1200);
        server.write_packet(conn, PacketSequence(seq), &mut w);
        server.process_delivery(conn, PacketSequence(seq), DeliveryStatus::Delivered);
        seq = seq.wrapping_add(1);
        let _ = server.read_packet(conn, &mut BitReader::new(packet));
        let _ = server.drain_messages(conn);
    }
    assert_eq!(
        server.objects().get::<Pawn>(h),
        Some(&pawn),
        "a client wrote server state"
    );
});
