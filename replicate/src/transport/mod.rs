//! Transports: how packets reach the other side. The replication core is sans-IO and
//! produces and consumes whole packets; a transport moves them and tells who connected
//! and who left.
//!
//! - `udp` (feature `udp`, on by default): UDP secured with netcode.io (through `renetcode`): connect tokens,
//!   encryption, replay protection.
//! - [`memory`]: an in-process network for tests and single-process games, and
//!   [`conditioned`]: any transport behind a seeded link conditioner (loss, latency,
//!   jitter, duplication, reordering).
//! - Implement [`ServerTransport`] / [`ClientTransport`] to plug in another one (Steam,
//!   WebTransport, an in-memory pipe for tests).
//!
//! This layer knows nothing about replication; it only moves byte payloads of at most
//! [`ServerTransport::max_payload_bytes`].
//!
//! # The integrity contract
//!
//! A transport **must deliver every payload either exactly as it was sent or not at
//! all**: it may lose, duplicate and reorder payloads, but never alter one. Replication
//! packets carry no checksum of their own: a bit flipped on the way may decode as a
//! valid, wrong value, which is then applied and acknowledged. [`udp`] meets the
//! contract (netcode.io authenticates every packet with ChaCha20-Poly1305 and drops
//! any that fails); so does [`memory`] unless its
//! [`LinkConditioner::corrupt`](crate::link::LinkConditioner::corrupt) is set, which
//! flips one bit of a packet copy with that probability (seeded) to test what happens
//! when the contract is broken. A transport over an unauthenticated medium must add at
//! least a checksum and drop payloads that fail it.
//!
//! What replication does with the payloads it cannot read: a payload whose framing
//! breaks closes the connection with
//! [`DisconnectReason::ReadError`](crate::DisconnectReason::ReadError) on both sides,
//! and nothing that arrives from the network panics.

pub mod conditioned;
pub mod memory;
#[cfg(feature = "udp")]
pub mod udp;

/// The largest payload a packet carries (1300 bytes, netcode.io's limit; the in-memory
/// transport uses it too, so tests see the same packet sizes as UDP).
pub const MAX_PAYLOAD_BYTES: usize = 1300;
/// The most clients one server accepts.
pub const MAX_CLIENTS: usize = 1024;

/// The transport a [`Server`](crate::Server) uses when none is named: UDP with
/// netcode.io (feature `udp`, on by default), else the in-memory transport.
#[cfg(feature = "udp")]
pub type DefaultServerTransport = udp::UdpServerTransport;
/// The transport a [`Server`](crate::Server) uses when none is named: UDP with
/// netcode.io (feature `udp`, on by default), else the in-memory transport.
#[cfg(not(feature = "udp"))]
pub type DefaultServerTransport = memory::MemoryServerTransport;
/// The transport a [`Client`](crate::Client) uses when none is named (see
/// [`DefaultServerTransport`]).
#[cfg(feature = "udp")]
pub type DefaultClientTransport = udp::UdpClientTransport;
/// The transport a [`Client`](crate::Client) uses when none is named (see
/// [`DefaultServerTransport`]).
#[cfg(not(feature = "udp"))]
pub type DefaultClientTransport = memory::MemoryClientTransport;

pub use crate::link::{LinkConditioner, LinkStats};
use std::time::Duration;
use thiserror::Error;

/// A client's identity on a server (netcode's client id).
pub type ClientId = u64;

/// Why a transport-level connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportDisconnect {
    /// Nothing was heard from the peer within the timeout.
    TimedOut,
    /// The peer closed the connection.
    ByPeer,
    /// This side closed the connection.
    ByLocal,
    /// The server refused the connection (full, or a bad connect token).
    Denied,
    /// The connect token expired before the connection was established.
    TokenExpired,
}

impl std::fmt::Display for TransportDisconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::TimedOut => "timed out",
            Self::ByPeer => "closed by the peer",
            Self::ByLocal => "closed locally",
            Self::Denied => "connection denied by the server",
            Self::TokenExpired => "connect token expired",
        })
    }
}

/// Something that happened on a server transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerTransportEvent {
    /// A client completed the handshake.
    Connected {
        /// Its id.
        client: ClientId,
        /// The user data of its connect token (256 bytes with netcode).
        user_data: Vec<u8>,
    },
    /// A client left.
    Disconnected {
        /// Its id.
        client: ClientId,
        /// Why.
        reason: TransportDisconnect,
    },
    /// A payload arrived from a connected client.
    Payload {
        /// Its sender.
        client: ClientId,
        /// The bytes.
        payload: Vec<u8>,
    },
}

/// Something that happened on a client transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientTransportEvent {
    /// The handshake completed.
    Connected,
    /// The connection ended (or never got established).
    Disconnected(TransportDisconnect),
    /// A payload arrived from the server.
    Payload(Vec<u8>),
}

/// A transport error.
#[derive(Debug, Error)]
pub enum TransportError {
    /// A socket error.
    #[error("transport i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A payload is larger than the transport carries.
    #[error("payload of {len} bytes exceeds the transport maximum of {max} bytes")]
    PayloadTooLarge {
        /// The payload size.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The client is not connected (yet, or any more).
    #[error("not connected")]
    NotConnected,
    /// No such client on this server.
    #[error("unknown client {0}")]
    UnknownClient(ClientId),
    /// The transport's configuration is invalid.
    #[error("invalid transport configuration: {0}")]
    Config(String),
    /// netcode.io reported an error.
    #[error("netcode: {0}")]
    Netcode(String),
}

/// The server side of a transport.
pub trait ServerTransport {
    /// Advances the transport to `now` (a monotonic time since an arbitrary epoch):
    /// receives what arrived, runs timeouts and keep-alives.
    fn update(&mut self, now: Duration) -> Result<(), TransportError>;
    /// The next event, if any.
    fn poll_event(&mut self) -> Option<ServerTransportEvent>;
    /// Sends one payload to a connected client.
    fn send(&mut self, client: ClientId, payload: &[u8]) -> Result<(), TransportError>;
    /// Closes a client's connection.
    fn disconnect(&mut self, client: ClientId);
    /// Largest payload [`send`](Self::send) accepts.
    fn max_payload_bytes(&self) -> usize;
}

/// The client side of a transport.
pub trait ClientTransport {
    /// Advances the transport to `now`: receives what arrived, runs the handshake,
    /// timeouts and keep-alives.
    fn update(&mut self, now: Duration) -> Result<(), TransportError>;
    /// The next event, if any.
    fn poll_event(&mut self) -> Option<ClientTransportEvent>;
    /// Sends one payload to the server.
    fn send(&mut self, payload: &[u8]) -> Result<(), TransportError>;
    /// Closes the connection.
    fn disconnect(&mut self);
    /// Whether the handshake has completed and the connection is open.
    fn is_connected(&self) -> bool;
    /// Largest payload [`send`](Self::send) accepts.
    fn max_payload_bytes(&self) -> usize;
}
