//! Byte caps on what a peer can fill: a client flooding 8 KiB messages that the server
//! never reads holds at most the configured bytes in the server's receive buffers, the
//! refused messages are counted, and the log gets a bounded number of lines (counted
//! by a `tracing` subscriber in this test).

mod common;

use common::robust_suite::*;
use replicate::internals::blob::DeliveryMode;
use replicate::internals::link::LinkConditioner;
use replicate::internals::replication::ReplicationConfig;
use replicate::internals::replication::attachment::AttachmentConfig;
use replicate::{ClientConfig, ServerConfig};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Floods for `ticks` ticks of 2 ms; returns (largest receive bytes held, refused
/// messages, refused bytes, log lines, warnings).
fn flood(attachments: AttachmentConfig, ticks: u32) -> (usize, u64, u64, u64, u64) {
    let counter = Arc::new(LineCounter::default());
    let subscriber = CountingSubscriber(counter.clone());
    let result = tracing::subscriber::with_default(subscriber, || {
        let config = ServerConfig {
            replication: ReplicationConfig {
                attachments: attachments.clone(),
                ..ReplicationConfig::default()
            },
            ..ServerConfig::default()
        };
        let (mut server, network) = server(LinkConditioner::lan(), 3, config);
        let (mut client, _) = client(&network, ClientConfig::default());
        let tick = Duration::from_millis(2);
        let mut now = Duration::ZERO;
        let mut seq = 0u32;
        let mut max_held = 0;
        for _ in 0..ticks {
            now += tick;
            server.tick(now).unwrap();
            let _ = server.events();
            // The server never calls receive_messages().
            client.tick(now).unwrap();
            let _ = client.events();
            if client.is_connected() {
                // Keep the client's send queue full of 8 KiB messages.
                while client
                    .send_message(
                        &Bulk {
                            seq,
                            data: vec![seq as u8; 8000],
                        },
                        DeliveryMode::ReliableOrdered,
                    )
                    .is_ok()
                {
                    seq += 1;
                    if seq % 64 == 0 {
                        break;
                    }
                }
            }
            max_held = max_held.max(server.held_bytes(None).receive);
        }
        assert!(client.is_connected(), "{:?}", client.state());
        let id = server.clients().next().expect("connected");
        let conn = server.connection_id(id).unwrap();
        let stats = server.replication_mut().message_stats(conn).unwrap();
        // The facade's per-client statistics count them too.
        assert_eq!(server.stats(id).unwrap().messages_refused, stats.rejected);
        assert!(stats.rejected >= stats.refused_over_cap);
        (max_held, stats.refused_over_cap, stats.refused_bytes)
    });
    (
        result.0,
        result.1,
        result.2,
        counter.lines.load(Ordering::Relaxed),
        counter.warnings.load(Ordering::Relaxed),
    )
}

#[test]
fn a_message_flood_is_held_within_the_byte_cap_and_logged_a_bounded_number_of_times() {
    let defaults = AttachmentConfig::default();
    assert!(defaults.max_received_bytes <= 1024 * 1024);
    // 12 s of simulated flooding at up to 500 packets per second: several MiB offered.
    let (held, refused, refused_bytes, lines, warnings) = flood(defaults.clone(), 6000);
    eprintln!(
        "default caps: held at most {held} B; refused {refused} messages ({refused_bytes} B); {lines} log lines ({warnings} warnings)"
    );
    assert!(
        refused > 100,
        "the flood must exceed the cap (refused {refused})"
    );
    assert!(refused_bytes > 2 * 1024 * 1024);
    let bound = defaults.max_received_bytes + 3 * defaults.max_out_of_order_bytes + 8192;
    assert!(held <= bound, "held {held} B, cap {bound} B");
    assert!(
        held >= defaults.max_received_bytes - 16 * 1024,
        "the queue filled up to its cap ({held} B)"
    );
    // One summary per 10 s interval, not a line per refused message.
    assert!(
        lines <= 10,
        "{lines} log lines for {refused} refused messages"
    );
    assert!(warnings >= 1, "the refusals are reported");

    // A configured cap holds as well.
    let small = AttachmentConfig {
        max_received_bytes: 64 * 1024,
        ..defaults
    };
    let (held, refused, _, lines, _) = flood(small.clone(), 2000);
    eprintln!("64 KiB cap: held at most {held} B; refused {refused}; {lines} log lines");
    assert!(held <= 64 * 1024 + 3 * small.max_out_of_order_bytes + 8192);
    assert!(refused > 100);
    assert!(lines <= 10);
}
