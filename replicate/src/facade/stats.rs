//! Per-connection statistics of the facade: totals, rates over a sliding one-second
//! window, and the connection's RTT and loss estimates.

use crate::connection::Connection;
use crate::protocol::{ProtocolIndex, ProtocolRegistry};
use std::time::Duration;

/// Per-type bit counters (indexed by protocol index) as `(type name, bits)` for the
/// types with any bits, largest first.
pub(crate) fn bits_by_type_name(
    registry: &ProtocolRegistry,
    bits_per_type: &[u64],
) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = bits_per_type
        .iter()
        .enumerate()
        .filter(|&(_, &bits)| bits > 0)
        .filter_map(|(i, &bits)| {
            let index = ProtocolIndex::try_from(i).ok()?;
            Some(((registry.get(index)?.descriptor)().name, bits))
        })
        .collect();
    out.sort_by_key(|&(_, bits)| std::cmp::Reverse(bits));
    out
}

/// Statistics of one connection (a client on the server, or the server on a client).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetStats {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Moving average of the fraction of packets lost, `0.0..=1.0`.
    pub packet_loss: f32,
    /// Bytes received per second (transport payloads, last full second).
    pub bytes_in_per_sec: f64,
    /// Bytes sent per second (transport payloads, last full second).
    pub bytes_out_per_sec: f64,
    /// Transport payloads received.
    pub packets_in: u64,
    /// Transport payloads sent.
    pub packets_out: u64,
    /// Payload bytes received.
    pub bytes_in: u64,
    /// Payload bytes sent.
    pub bytes_out: u64,
    /// Payloads dropped before replication saw them (duplicates, stale, malformed).
    pub packets_rejected: u64,
    /// Packets declared lost by the connection.
    pub packets_lost: u64,
    /// Packets acknowledged by the peer.
    pub packets_delivered: u64,
    /// Messages from the peer refused: over a receive cap
    /// ([`AttachmentConfig::max_received_messages`](crate::replication::attachment::AttachmentConfig::max_received_messages),
    /// [`max_received_bytes`](crate::replication::attachment::AttachmentConfig::max_received_bytes)),
    /// undecodable, or rejected by the validator. Summarised in the log at most once
    /// per 10 s per connection.
    pub messages_refused: u64,
}

/// Running counters behind [`NetStats`].
#[derive(Debug, Clone, Default)]
pub(crate) struct StatsTracker {
    pub(crate) stats: NetStats,
    window_start: Option<Duration>,
    window_in: u64,
    window_out: u64,
}

impl StatsTracker {
    pub(crate) fn on_receive(&mut self, bytes: usize) {
        self.stats.packets_in += 1;
        self.stats.bytes_in += bytes as u64;
        self.window_in += bytes as u64;
    }

    pub(crate) fn on_send(&mut self, bytes: usize) {
        self.stats.packets_out += 1;
        self.stats.bytes_out += bytes as u64;
        self.window_out += bytes as u64;
    }

    pub(crate) fn on_reject(&mut self) {
        self.stats.packets_rejected += 1;
    }

    /// Refreshes the rates (once a second) and copies the connection's estimates.
    pub(crate) fn update(&mut self, now: Duration, connection: Option<&Connection>) {
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.saturating_sub(start);
        if elapsed >= Duration::from_secs(1) {
            let secs = elapsed.as_secs_f64();
            self.stats.bytes_in_per_sec = self.window_in as f64 / secs;
            self.stats.bytes_out_per_sec = self.window_out as f64 / secs;
            self.window_in = 0;
            self.window_out = 0;
            self.window_start = Some(now);
        }
        if let Some(c) = connection {
            self.stats.rtt = c.rtt();
            self.stats.packet_loss = c.packet_loss();
            self.stats.packets_lost = c.stats().packets_lost;
            self.stats.packets_delivered = c.stats().packets_delivered;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_cover_the_last_full_second() {
        let mut t = StatsTracker::default();
        t.update(Duration::ZERO, None);
        for _ in 0..10 {
            t.on_send(100);
            t.on_receive(50);
        }
        t.update(Duration::from_millis(500), None);
        assert_eq!(t.stats.bytes_out_per_sec, 0.0);
        t.update(Duration::from_secs(2), None);
        assert_eq!(t.stats.bytes_out_per_sec, 500.0);
        assert_eq!(t.stats.bytes_in_per_sec, 250.0);
        assert_eq!((t.stats.packets_out, t.stats.bytes_in), (10, 500));
        t.update(Duration::from_secs(3), None);
        assert_eq!(t.stats.bytes_out_per_sec, 0.0);
    }
}
