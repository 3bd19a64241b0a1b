//! Per-connection replication statistics: one snapshot per connection gathering
//! the connection's packet counters, the replication writer's, the huge-object queue's
//! and the message stream's.
//!
//! This module only reads counters the other layers keep; it owns no state. Bytes are
//! counted by whoever moves them (the transport or the facade) and passed in.
//!
//! ```
//! use replicate::internals::protocol::ProtocolRegistry;
//! use replicate::internals::replication::{ReplicationConfig, ReplicationServer};
//! use replicate::internals::stats::ReplicationStats;
//! use std::sync::Arc;
//!
//! let mut server = ReplicationServer::new(Arc::new(ProtocolRegistry::default()), ReplicationConfig::default());
//! let conn = server.add_connection();
//! let stats = ReplicationStats::collect(&mut server, conn, None, (0, 0));
//! assert_eq!(stats.huge_objects_active, 0);
//! assert_eq!(stats.attachments_sent, 0);
//! ```

use crate::connection::ConnectionStats;
use crate::object::ConnectionId;
use crate::replication::ReplicationServer;
use std::time::Duration;

/// Statistics of one server connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationStats {
    /// Huge objects in transit now.
    pub huge_objects_active: usize,
    /// Huge objects waiting for a free transit slot now.
    pub huge_objects_queued: usize,
    /// Huge objects fully sent and waiting for acknowledgement now.
    pub huge_objects_waiting_for_ack: usize,
    /// Times the huge-object queue started stalling (every slot busy, objects waiting).
    pub huge_object_stalls: u64,
    /// Total time the huge-object queue stalled.
    pub huge_object_stall_time: Duration,
    /// Huge objects delivered in full.
    pub huge_objects_completed: u64,
    /// Huge objects cancelled in flight (destroyed or out of scope).
    pub huge_objects_cancelled: u64,
    /// Packets sent (from the connection, when given).
    pub packets_sent: u64,
    /// Packets lost (from the connection, when given).
    pub packets_lost: u64,
    /// Packets received (from the connection, when given).
    pub packets_received: u64,
    /// Bytes sent (passed in by the caller).
    pub bytes_sent: u64,
    /// Bytes received (passed in by the caller).
    pub bytes_received: u64,
    /// Object batches written (creations and updates, re-sends included).
    pub objects_replicated: u64,
    /// Object creations written.
    pub objects_created: u64,
    /// Messages queued for the client.
    pub attachments_sent: u64,
    /// Messages received from the client (after validation).
    pub attachments_received: u64,
    /// Object messages dropped because the object was not in scope.
    pub attachments_dropped: u64,
    /// Client messages rejected (invalid or refused by the validator).
    pub attachments_rejected: u64,
}

impl ReplicationStats {
    /// Gathers the statistics of connection `conn` of `server`; `connection` is the
    /// transport-level connection (packet counters) and `bytes` is
    /// `(sent, received)` as counted by the caller.
    pub fn collect(
        server: &mut ReplicationServer,
        conn: ConnectionId,
        connection: Option<&ConnectionStats>,
        bytes: (u64, u64),
    ) -> ReplicationStats {
        let mut s = ReplicationStats {
            bytes_sent: bytes.0,
            bytes_received: bytes.1,
            ..Default::default()
        };
        if let Some(c) = connection {
            s.packets_sent = c.packets_sent;
            s.packets_lost = c.packets_lost;
            s.packets_received = c.packets_received;
        }
        if let Some(w) = server.writer(conn) {
            s.objects_replicated = w.stats().batches;
            s.objects_created = w.stats().creations;
        }
        if let Some(h) = server.huge_stream(conn) {
            let h = h.stats();
            s.huge_objects_active = h.active;
            s.huge_objects_queued = h.queued;
            s.huge_objects_waiting_for_ack = h.waiting_for_ack;
            s.huge_object_stalls = h.stalls;
            s.huge_object_stall_time = h.stall_time;
            s.huge_objects_completed = h.completed;
            s.huge_objects_cancelled = h.cancelled;
        }
        if let Some(m) = server.message_stats(conn) {
            s.attachments_sent = m.queued;
            s.attachments_received = m.received;
            s.attachments_dropped = m.dropped_not_in_scope;
            s.attachments_rejected = m.rejected;
        }
        s
    }
}
