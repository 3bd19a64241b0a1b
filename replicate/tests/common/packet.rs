//! Packets driven by hand, without a connection: a 16-bit sequence standing in for the
//! connection header, then the replication streams ([`core_suite::Manual`] and
//! [`interest_suite::Net`] write and read theirs with these).
//!
//! [`core_suite::Manual`]: super::core_suite::Manual
//! [`interest_suite::Net`]: super::interest_suite::Net

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::PacketSequence;
use replicate::internals::object::ConnectionId;
use replicate::internals::replication::{ReplicationClient, ReplicationServer};
use replicate::internals::stream::{StreamError, WriteResult};
use std::time::Duration;

/// Writes one packet for `conn` without ticking: `seq` in 16 bits, then the streams,
/// within `mtu` bytes of payload. Returns what the writer said and the bytes.
pub fn write_manual_packet(
    server: &mut ReplicationServer,
    conn: ConnectionId,
    seq: PacketSequence,
    mtu: usize,
) -> (WriteResult, Vec<u8>) {
    let mut w = BitWriter::with_capacity_bits(16 + mtu * 8);
    w.write_bits(seq.0 as u64, 16);
    let result = server.write_packet(conn, seq, &mut w);
    (result, w.finish().expect("packet fits"))
}

/// Reads a packet made by [`write_manual_packet`] (16-bit sequence, then the streams).
pub fn read_manual_packet(
    client: &mut ReplicationClient,
    now: Duration,
    bytes: &[u8],
) -> Result<(), StreamError> {
    let mut r = BitReader::new(bytes);
    let seq = PacketSequence(r.read_bits(16) as u16);
    client.read_packet(now, seq, &mut r)
}
