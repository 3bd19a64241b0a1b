//! The plain-text summary printed by `replicate-insights report`.

use crate::{Analysis, fmt_bytes, pct};
use std::fmt::Write;

/// Lines shown per list.
pub const TOP: usize = 8;

/// The summary: totals, framing share, top types and members, connections.
pub fn summary(a: &Analysis) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "session: {:.1} s, {} ticks, {} clients, {} packets ({} ack-only), {} on the wire, {:.1} kbit/s",
        a.duration_s,
        a.ticks,
        a.clients.len(),
        a.packets,
        a.ack_only_packets,
        fmt_bytes(a.wire_bits),
        a.mean_kbps()
    );
    if a.inexact_packets > 0 {
        let _ = writeln!(
            o,
            "warning: {} packets' parts do not sum to their size",
            a.inexact_packets
        );
    }
    let _ = writeln!(o, "\nwhere the bits went:");
    let mut shares = a.framing_share();
    shares.sort_by_key(|s| std::cmp::Reverse(s.bits));
    for s in shares.iter().filter(|s| s.bits > 0) {
        let _ = writeln!(
            o,
            "  {:<32} {:>10} {:>6}",
            s.name,
            fmt_bytes(s.bits),
            pct(s.bits, a.wire_bits)
        );
    }
    let _ = writeln!(o, "\ntop types:");
    for t in a.types.iter().take(TOP) {
        let _ = writeln!(
            o,
            "  {:<32} {:>10} {:>6}  {} batches, {:.1} bits each",
            t.name,
            fmt_bytes(t.bits),
            pct(t.bits, a.wire_bits),
            t.batches,
            t.bits as f64 / t.batches.max(1) as f64
        );
    }
    if !a.members.is_empty() {
        let _ = writeln!(o, "\ntop members:");
        for m in a.members.iter().take(TOP) {
            let _ = writeln!(
                o,
                "  {:<40} {:>10} {:>6}  {:.1} bits each, full {}, changes in {:.0}% of batches{}",
                m.label(),
                fmt_bytes(m.bits),
                pct(m.bits, a.wire_bits),
                m.mean_bits(),
                m.full_width.map_or("–".into(), |w| w.to_string()),
                m.change_rate() * 100.0,
                m.hint.as_ref().map_or(String::new(), |h| format!("; {h}"))
            );
        }
    }
    let u = &a.upstream;
    if u.packets > 0 {
        let _ = writeln!(
            o,
            "\nclient → server: {} packets, {} ({} headers, {} stream framing, {} streams, {} padding)",
            u.packets,
            fmt_bytes(u.wire_bits),
            fmt_bytes(u.header),
            fmt_bytes(u.stream_framing),
            fmt_bytes(u.streams.iter().sum()),
            fmt_bytes(u.padding),
        );
    }
    let _ = writeln!(o, "\nconnections:");
    for c in &a.clients {
        let _ = writeln!(
            o,
            "  client {:<6} {:>6} packets {:>10}  rtt {:>6.1} ms  loss {:>5.1}%",
            c.id,
            c.packets,
            fmt_bytes(c.wire_bits),
            c.mean_rtt_ms(),
            c.loss() * 100.0
        );
    }
    o
}
