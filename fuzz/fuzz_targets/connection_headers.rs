//! Packet headers into the sans-IO connection (sequence, acks, ack bits, RTT samples),
//! interleaved with packets it sends and time passing. Never a panic; the in-flight
//! window stays bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{Connection, ConnectionConfig};
use replicate_fuzz::packets;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let mut conn = Connection::new(ConnectionConfig::default());
    let mut now = Duration::ZERO;
    for (step, packet) in packets(data) {
        now += Duration::from_millis(u64::from(step));
        for _ in 0..(step % 4) {
            let mut w = BitWriter::with_capacity_bytes(64);
            conn.write_header(now, &mut w);
        }
        let _ = conn.read_header(now, &mut BitReader::new(packet));
        conn.update(now);
        while conn.poll_delivery().is_some() {}
        assert!(conn.in_flight() <= 1 << 16);
        let _ = (conn.rtt(), conn.packet_loss());
    }
});
