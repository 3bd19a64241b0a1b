//! The streams every connection is built with, as typed fields: on the server the
//! replication writer, the token stream, the huge-object stream and the message stream;
//! on the client their receiving ends. The drivers reach each one through its field;
//! the stream manager multiplexes them, in this order, before any stream game code adds.

use crate::object::ObjectTable;
use crate::replication::attachment::MessageStream;
use crate::replication::reader::{ClientWorld, ReplicationReader};
use crate::replication::writer::ReplicationWriter;
use crate::replication::writer::huge::{HugeObjectReceiver, HugeObjectStream};
use crate::stream::tokens::TokenStream;
use crate::stream::{DataStream, DataStreamManager, StreamSet};
use std::time::Duration;

/// Implements [`StreamSet`] for a struct whose fields are its streams, numbered in the
/// order listed.
macro_rules! stream_set {
    ($set:ty, $ctx:ty, [$($index:literal => $field:ident),+ $(,)?]) => {
        impl StreamSet<$ctx> for $set {
            const LEN: usize = [$($index),+].len();

            fn stream(&self, index: usize) -> Option<&dyn DataStream<$ctx>> {
                match index {
                    $($index => Some(&self.$field),)+
                    _ => None,
                }
            }

            fn stream_mut(&mut self, index: usize) -> Option<&mut dyn DataStream<$ctx>> {
                match index {
                    $($index => Some(&mut self.$field),)+
                    _ => None,
                }
            }
        }
    };
}

/// A server connection's streams.
pub(crate) struct ServerStreams {
    /// Replication: the connection's [`ReplicationWriter`].
    pub(crate) writer: ReplicationWriter,
    /// Exported names and tokens.
    pub(crate) tokens: TokenStream,
    /// Huge objects' parts.
    pub(crate) huge: HugeObjectStream,
    /// Messages and RPCs.
    pub(crate) messages: MessageStream,
}

impl ServerStreams {
    /// The replication stream's index in every packet.
    pub(crate) const REPLICATION: usize = 0;
    /// The huge-object stream's index in every packet.
    pub(crate) const HUGE: usize = 2;

    /// After the writer's update, every tick: gives the huge-object queue the time
    /// and moves held object messages on.
    pub(crate) fn after_tick(&mut self, table: &ObjectTable, now: Duration) {
        self.huge.queue().lock().set_now(now);
        self.release_held(table);
    }

    /// Moves held object messages on: those whose object the writer has now created
    /// go out, those whose object left its scope are dropped.
    pub(crate) fn release_held(&mut self, table: &ObjectTable) {
        self.messages.release_held(&self.writer, table);
    }
}

stream_set!(ServerStreams, ObjectTable, [0 => writer, 1 => tokens, 2 => huge, 3 => messages]);

/// A server connection's stream manager.
pub(crate) type ServerStreamManager = DataStreamManager<ObjectTable, ServerStreams>;

/// The client's streams, each the receiving end of the server's at the same index.
pub(crate) struct ClientStreams {
    /// Replication: the [`ReplicationReader`].
    pub(crate) reader: ReplicationReader,
    /// Imported names and tokens.
    pub(crate) tokens: TokenStream,
    /// Huge objects' parts, reassembled.
    pub(crate) huge: HugeObjectReceiver,
    /// Messages and RPCs.
    pub(crate) messages: MessageStream,
}

stream_set!(ClientStreams, ClientWorld, [0 => reader, 1 => tokens, 2 => huge, 3 => messages]);

/// The client's stream manager.
pub(crate) type ClientStreamManager = DataStreamManager<ClientWorld, ClientStreams>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtocolRegistry;
    use crate::replication::{ReplicationClient, ReplicationConfig, ReplicationServer};
    use std::sync::Arc;

    #[test]
    fn both_sides_number_their_streams_alike() {
        let registry = Arc::new(ProtocolRegistry::default());
        let mut server = ReplicationServer::new(registry.clone(), ReplicationConfig::default());
        let client = ReplicationClient::new(registry, ReplicationConfig::default());
        let conn = server.add_connection();
        let names = server.stream_names(conn);
        assert_eq!(names, client.stream_names());
        assert_eq!(names.len(), <ServerStreams as StreamSet<ObjectTable>>::LEN);
        assert_eq!(names[ServerStreams::REPLICATION], ReplicationWriter::NAME);
        assert_eq!(names[ServerStreams::HUGE], HugeObjectStream::NAME);
    }
}
