//! Writes seed inputs for the packet targets from recorded sessions:
//! `cargo run --bin seed_corpus` (from `fuzz/`) fills `corpus/<target>/`.

use replicate::bits::BitWriter;
use replicate::internals::connection::{Connection, ConnectionConfig};
use replicate_fuzz::{join, record_session};
use std::time::Duration;

fn write(target: &str, name: &str, data: &[u8]) -> std::io::Result<()> {
    let dir = std::path::Path::new("corpus").join(target);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(name), data)
}

fn main() -> std::io::Result<()> {
    let mut count = 0;
    for seed in 1..=8u64 {
        let (to_client, to_server) = record_session(seed, 40 + seed as u32 * 10);
        // Whole sessions, and short windows of them.
        write(
            "client_packets",
            &format!("session-{seed}"),
            &join(&to_client),
        )?;
        write(
            "server_packets",
            &format!("session-{seed}"),
            &join(&to_server),
        )?;
        for (i, w) in to_client.chunks(6).enumerate() {
            write("client_packets", &format!("window-{seed}-{i}"), &join(w))?;
            count += 1;
        }
        count += 2;
    }
    // Headers a peer sends while acking ours.
    let mut a = Connection::new(ConnectionConfig::default());
    let mut b = Connection::new(ConnectionConfig::default());
    let mut headers = Vec::new();
    for t in 0..64u64 {
        let now = Duration::from_millis(t * 16);
        let mut w = BitWriter::with_capacity_bytes(64);
        a.write_header(now, &mut w);
        let bytes = w.finish().unwrap_or_default();
        let _ = b.read_header(now, &mut replicate::bits::BitReader::new(&bytes));
        let mut w = BitWriter::with_capacity_bytes(64);
        b.write_header(now, &mut w);
        headers.push(w.finish().unwrap_or_default());
    }
    write("connection_headers", "session", &join(&headers))?;
    println!("wrote {} seed inputs under corpus/", count + 1);
    Ok(())
}
