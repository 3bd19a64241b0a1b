//! The `metrics` feature: [`NetStats`](super::NetStats) and the network-insights
//! attribution counters published through the `metrics` facade, labelled by client.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `replicate_packets_sent_total` | counter | `client`, `kind` (`data`, `ack_only`, `control`) |
//! | `replicate_sent_bits_total` | counter | `client`, `part` (`header`, `stream_framing`, `padding`, `stream:<index>`) |
//! | `replicate_replication_bits_total` | counter | `client`, `part` (a [`ReplicationPart`] name) |
//! | `replicate_type_bits_total` | counter | `client`, `protocol` |
//! | `replicate_rtt_seconds`, `replicate_packet_loss`, `replicate_bytes_in_per_second`, `replicate_bytes_out_per_second` | gauge | `client` |
//! | `replicate_bytes_in_total`, `replicate_bytes_out_total`, `replicate_packets_lost_total`, `replicate_packets_delivered_total` | counter (absolute) | `client` |
//!
//! Statistics are published every tick for every client while insights are on
//! ([`Server::start_insights`](super::Server::start_insights) or
//! [`ServerConfig::attribution`](super::ServerConfig::attribution)).

use crate::insights::{PacketBits, PacketKind, ReplicationPart};
use crate::transport::ClientId;

pub(crate) fn publish_packet(client: ClientId, bits: &PacketBits) {
    let c = client.to_string();
    let kind = match bits.kind {
        PacketKind::Data => "data",
        PacketKind::AckOnly => "ack_only",
        PacketKind::Control => "control",
    };
    metrics::counter!("replicate_packets_sent_total", "client" => c.clone(), "kind" => kind)
        .increment(1);
    let sent = |part: String, v: u64| {
        if v > 0 {
            metrics::counter!("replicate_sent_bits_total", "client" => c.clone(), "part" => part)
                .increment(v);
        }
    };
    sent("header".into(), bits.header);
    sent("stream_framing".into(), bits.stream_framing);
    sent("padding".into(), bits.padding);
    for (i, &s) in bits.streams.iter().enumerate() {
        sent(format!("stream:{i}"), s);
    }
    if let Some(r) = &bits.replication {
        for part in ReplicationPart::ALL {
            let v = r.parts[part as usize];
            if v > 0 {
                metrics::counter!(
                    "replicate_replication_bits_total",
                    "client" => c.clone(),
                    "part" => part.name()
                )
                .increment(v);
            }
        }
        for t in &r.types {
            metrics::counter!(
                "replicate_type_bits_total",
                "client" => c.clone(),
                "protocol" => t.protocol.to_string()
            )
            .increment(t.bits);
        }
    }
}

pub(crate) fn publish_stats(client: ClientId, s: &super::NetStats) {
    let c = client.to_string();
    metrics::gauge!("replicate_rtt_seconds", "client" => c.clone()).set(s.rtt.as_secs_f64());
    metrics::gauge!("replicate_packet_loss", "client" => c.clone()).set(f64::from(s.packet_loss));
    metrics::gauge!("replicate_bytes_in_per_second", "client" => c.clone()).set(s.bytes_in_per_sec);
    metrics::gauge!("replicate_bytes_out_per_second", "client" => c.clone())
        .set(s.bytes_out_per_sec);
    metrics::counter!("replicate_bytes_in_total", "client" => c.clone()).absolute(s.bytes_in);
    metrics::counter!("replicate_bytes_out_total", "client" => c.clone()).absolute(s.bytes_out);
    metrics::counter!("replicate_packets_lost_total", "client" => c.clone())
        .absolute(s.packets_lost);
    metrics::counter!("replicate_packets_delivered_total", "client" => c)
        .absolute(s.packets_delivered);
}
