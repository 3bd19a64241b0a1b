//! The user-facing [`Server`] and [`Client`]: a transport, one sans-IO
//! [`Connection`](crate::connection::Connection) per peer and the replication drivers
//! ([`ReplicationServer`](crate::replication::ReplicationServer) /
//! [`ReplicationClient`](crate::replication::ReplicationClient)), advanced together by
//! one `tick(now)` per frame, with events and per-connection statistics.
//!
//! This module owns the game-loop API, the registry handshake, disconnect reasons and
//! statistics. It does not own any encoding of replicated data (that is the core's) nor
//! how bytes travel (that is the [`transport`](crate::transport)'s).
//!
//! # Wire
//!
//! Every transport payload is either a replication packet (a connection header, whose
//! first byte is [`ConnectionConfig::protocol_tag`](crate::connection::ConnectionConfig),
//! followed by the streams), or a small control frame whose first byte is
//! [`CONTROL_TAG`]:
//!
//! | frame | direction | bytes after the tag |
//! |---|---|---|
//! | hello | client → server | `1`, protocol version (u16 LE), registry hash (u64 LE) |
//! | welcome | server → client | `2` |
//! | refuse | server → client | `3`, reason code (u8), server version (u16 LE), server registry hash (u64 LE) |
//! | close | either way | `4`, reason code (u8): the sender closed the connection for this [`DisconnectReason`] |
//!
//! The client resends its hello until it is answered; the server only starts
//! replicating to a client whose hello matched its own version and registry hash, and a
//! replication packet arriving at the client counts as a welcome.
//!
//! Ownership is not a control frame: the server tells each client which root objects
//! it owns with a reliable ordered message of the registered type
//! `replicate::OwnershipNotice` (an object handle, owned, autonomous), sent on the
//! connection's message channel when the owner changes, when the object ends, and for
//! what a client already owns when it connects (see [`Client::is_owned`]).
//!
//! # Dead peers, read errors and caps
//!
//! Once connected, each side watches the other (Iris closes a connection on the same
//! conditions):
//!
//! - **No ack progress**: every side sends at least one ack-eliciting packet per
//!   [`ServerConfig::keep_alive_interval`] (an empty one when it has nothing to say),
//!   so a live peer always has something to acknowledge. When none of this side's
//!   packets was acknowledged for [`ServerConfig::ack_timeout`] /
//!   [`ClientConfig::ack_timeout`] (default 5 s), the connection is closed with
//!   [`DisconnectReason::AckTimedOut`], even if the transport still sees the peer
//!   (netcode.io keep-alives alone keep a UDP connection open).
//! - **Pending state**: the server estimates, per client, the bytes it keeps only
//!   because that client has not acknowledged them (packet records in flight, objects
//!   destroyed on the server that wait for the client's destroy confirmation, queued
//!   messages). Above [`ServerConfig::max_pending_bytes`] the client is closed with
//!   [`DisconnectReason::PendingStateOverflow`].
//! - **Read errors close the connection.** A packet is acknowledged by its
//!   connection header before its payload is parsed, so a payload that fails to parse
//!   (a framing error: the streams are out of step, or the packet was corrupted or
//!   forged on a transport without integrity checks) cannot be taken back: the peer
//!   already counts it delivered. Rather than stay connected with state that silently
//!   differs from the peer's, the side that fails to read closes the connection with
//!   [`DisconnectReason::ReadError`] and tells the peer, which reports the same reason.
//!   A replication packet whose connection header is malformed (wrong tag, truncated,
//!   an implausible sequence or ack), or a long run of stale packets (the receive
//!   window was moved by a sequence number the peer never sent), counts as a read
//!   error too: over a transport that keeps the
//!   [integrity contract](crate::transport#the-integrity-contract) neither happens.
//!   An error confined to one object's batch (its size prefix still delimits it)
//!   does not close anything: the client marks the object broken and reports it, the
//!   server destroys it on that client and creates it again
//!   ([`ServerEvent::ObjectRecovered`], [`ClientEvent::Replication`] with
//!   [`ReplicationEvent::ObjectError`](crate::replication::ReplicationEvent::ObjectError)).
//!
//! A close frame is sent when a side closes for one of these reasons (and repeated
//! while the peer keeps sending for a short linger), so both ends report the same
//! [`DisconnectReason`].
//! After the replication, token, huge-object and message streams, every replication
//! packet carries the [`time`](crate::time) stream: the server's tick (9 bits while
//! acks flow) and a clock echo one way, a clock stamp and the redundant inputs the
//! other way.
//!
//! # Game loop
//!
//! ```no_run
//! use replicate::{Client, ClientEvent, Replicated, Server, ServerEvent};
//! use replicate::transport::udp::ConnectTokenIssuer;
//! use std::time::{Duration, Instant};
//!
//! #[derive(Replicated, Debug, Default)]
//! #[net(name = "docs::facade::Door")] // unique among the crate's doc tests
//! struct Door { open: bool }
//!
//! let issuer = ConnectTokenIssuer::with_random_key(0x5EED);
//! let mut server = Server::bind("127.0.0.1:0", &issuer, Default::default()).unwrap();
//! let door = server.spawn(Door::default()).unwrap();
//!
//! let token = issuer.issue(1, vec![server.local_addr()], 30, 5).unwrap();
//! let mut client = Client::connect(token, Default::default()).unwrap();
//!
//! let start = Instant::now();
//! while start.elapsed() < Duration::from_secs(1) {
//!     let now = start.elapsed();
//!     if let Some(d) = server.get_mut::<Door>(door) { d.open = !d.open; }
//!     server.tick(now).unwrap();
//!     for event in server.events() {
//!         if let ServerEvent::ClientConnected { client, .. } = event { println!("{client} joined"); }
//!     }
//!     client.tick(now).unwrap();
//!     for event in client.events() {
//!         if let ClientEvent::Changed { handle, .. } = event {
//!             println!("door open: {:?}", client.get::<Door>(handle).map(|d| d.open));
//!         }
//!     }
//!     std::thread::sleep(Duration::from_millis(16));
//! }
//! ```

mod client;
mod insights;
#[cfg(feature = "metrics")]
mod metrics;
mod ownership;
mod server;
mod stats;
mod time;

pub use client::{Changes, Client, ClientConfig, ClientEvent, ClientState};
pub use server::{HeldBytes, Server, ServerConfig, ServerEvent};
pub use stats::NetStats;

use crate::transport::{TransportDisconnect, TransportError};
use std::time::Duration;
use thiserror::Error;

/// First byte of a control frame. A [`ConnectionConfig::protocol_tag`] must differ from
/// it (the facade refuses such a config).
///
/// [`ConnectionConfig::protocol_tag`]: crate::connection::ConnectionConfig::protocol_tag
pub const CONTROL_TAG: u8 = 0xC5;

/// Version of the facade's handshake and packet layout; both ends must agree.
pub const PROTOCOL_VERSION: u16 = 1;

/// Default largest packet (replication packet or control frame), in bytes.
pub const DEFAULT_MAX_PACKET_BYTES: usize = 1200;

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_REFUSE: u8 = 3;
const KIND_CLOSE: u8 = 4;

const REFUSE_REGISTRY: u8 = 1;
const REFUSE_VERSION: u8 = 2;

/// Why a connection ended (or never got established).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisconnectReason {
    /// The two ends were built with different replicated types: the protocol registry
    /// hashes differ. `ours` is this side's hash, `theirs` the peer's.
    RegistryMismatch {
        /// This side's registry hash.
        ours: u64,
        /// The peer's registry hash.
        theirs: u64,
    },
    /// The two ends run different versions of the facade protocol.
    VersionMismatch {
        /// This side's [`PROTOCOL_VERSION`].
        ours: u16,
        /// The peer's.
        theirs: u16,
    },
    /// The transport connected but the replication handshake did not complete in time.
    HandshakeTimedOut,
    /// Nothing was heard from the peer within the timeout.
    TimedOut,
    /// The client closed the connection.
    ClosedByClient,
    /// The server closed the connection.
    ClosedByServer,
    /// The server refused the transport connection (full, or a bad connect token).
    Denied,
    /// The connect token expired before the connection was established.
    TokenExpired,
    /// None of this side's packets was acknowledged within the ack timeout
    /// ([`ServerConfig::ack_timeout`], [`ClientConfig::ack_timeout`]) although the
    /// transport still saw the peer: it stopped processing replication.
    AckTimedOut,
    /// The server held more state for this client than
    /// [`ServerConfig::max_pending_bytes`] because the client did not acknowledge it.
    PendingStateOverflow,
    /// A packet's payload could not be read (the streams are out of step, or the
    /// packet was corrupted or forged): the connection cannot be trusted any more.
    ReadError,
}

impl DisconnectReason {
    /// The reason for a transport-level disconnect seen from `side`.
    fn from_transport(reason: TransportDisconnect, on_server: bool) -> Self {
        match reason {
            TransportDisconnect::TimedOut => Self::TimedOut,
            TransportDisconnect::ByPeer if on_server => Self::ClosedByClient,
            TransportDisconnect::ByPeer => Self::ClosedByServer,
            TransportDisconnect::ByLocal if on_server => Self::ClosedByServer,
            TransportDisconnect::ByLocal => Self::ClosedByClient,
            TransportDisconnect::Denied => Self::Denied,
            TransportDisconnect::TokenExpired => Self::TokenExpired,
        }
    }

    /// Wire code of a reason carried by a close frame (0: a plain close).
    fn close_code(self) -> u8 {
        match self {
            Self::AckTimedOut => 1,
            Self::PendingStateOverflow => 2,
            Self::ReadError => 3,
            _ => 0,
        }
    }

    /// The reason a close frame with `code` stands for, received by the client when
    /// `on_client`.
    fn from_close_code(code: u8, on_client: bool) -> Self {
        match code {
            1 => Self::AckTimedOut,
            2 => Self::PendingStateOverflow,
            3 => Self::ReadError,
            _ if on_client => Self::ClosedByServer,
            _ => Self::ClosedByClient,
        }
    }
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RegistryMismatch { ours, theirs } => write!(
                f,
                "replicated types differ between client and server (registry hash {ours:#018x} here, \
                 {theirs:#018x} on the other side): rebuild both from the same code, with the same \
                 #[derive(Replicated)] types"
            ),
            Self::VersionMismatch { ours, theirs } => write!(
                f,
                "replicate protocol version {ours} here, {theirs} on the other side: use the same \
                 version of the replicate crate on both ends"
            ),
            Self::HandshakeTimedOut => f.write_str("the replication handshake timed out"),
            Self::TimedOut => f.write_str("timed out: nothing heard from the peer"),
            Self::ClosedByClient => f.write_str("the client closed the connection"),
            Self::ClosedByServer => f.write_str("the server closed the connection"),
            Self::Denied => f.write_str("the server denied the connection (full, or a bad token)"),
            Self::TokenExpired => f.write_str("the connect token expired"),
            Self::AckTimedOut => {
                f.write_str("timed out: the peer stopped acknowledging replication packets")
            }
            Self::PendingStateOverflow => f.write_str(
                "the server held too much unacknowledged replication state for this client",
            ),
            Self::ReadError => f.write_str(
                "a replication packet could not be read (streams out of step, or corrupted data)",
            ),
        }
    }
}

/// An error of the [`Server`] or [`Client`] API (never caused by what a peer sent:
/// bad input from the network is dropped and counted, or ends that peer's connection).
#[derive(Debug, Error)]
pub enum FacadeError {
    /// The transport failed (socket error, bad configuration).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The replicated types could not be registered.
    #[error("protocol registry: {0}")]
    Registry(#[from] crate::protocol::ProtocolError),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A connect token could not be issued.
    #[cfg(feature = "udp")]
    #[error("connect token: {0}")]
    Token(#[from] crate::transport::udp::TokenError),
}

/// A decoded control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Hello {
        version: u16,
        registry_hash: u64,
    },
    Welcome,
    Refuse {
        reason: DisconnectReason,
    },
    /// The sender closed the connection; the code is [`DisconnectReason::close_code`].
    Close {
        code: u8,
    },
}

impl Control {
    fn encode(self) -> Vec<u8> {
        let mut out = vec![CONTROL_TAG];
        match self {
            Control::Hello {
                version,
                registry_hash,
            } => {
                out.push(KIND_HELLO);
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&registry_hash.to_le_bytes());
            }
            Control::Welcome => out.push(KIND_WELCOME),
            Control::Refuse { reason } => {
                out.push(KIND_REFUSE);
                // The refusing side's own values (the receiver sees them as "theirs").
                let (code, version, hash) = match reason {
                    DisconnectReason::VersionMismatch { ours, .. } => (REFUSE_VERSION, ours, 0),
                    DisconnectReason::RegistryMismatch { ours, .. } => {
                        (REFUSE_REGISTRY, PROTOCOL_VERSION, ours)
                    }
                    _ => (0, PROTOCOL_VERSION, 0),
                };
                out.push(code);
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&hash.to_le_bytes());
            }
            Control::Close { code } => {
                out.push(KIND_CLOSE);
                out.push(code);
            }
        }
        out
    }

    /// Decodes a control frame; `local_hash` fills the receiver's side of a refusal.
    /// `None` for anything malformed.
    fn decode(bytes: &[u8], local_hash: u64) -> Option<Control> {
        let (&tag, rest) = bytes.split_first()?;
        if tag != CONTROL_TAG {
            return None;
        }
        let (&kind, rest) = rest.split_first()?;
        let u16_at = |b: &[u8], at: usize| -> Option<u16> {
            Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
        };
        let u64_at = |b: &[u8], at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        match kind {
            KIND_HELLO => Some(Control::Hello {
                version: u16_at(rest, 0)?,
                registry_hash: u64_at(rest, 2)?,
            }),
            KIND_WELCOME => Some(Control::Welcome),
            KIND_REFUSE => {
                let (&code, rest) = rest.split_first()?;
                let version = u16_at(rest, 0)?;
                let hash = u64_at(rest, 2)?;
                let reason = match code {
                    REFUSE_REGISTRY => DisconnectReason::RegistryMismatch {
                        ours: local_hash,
                        theirs: hash,
                    },
                    REFUSE_VERSION => DisconnectReason::VersionMismatch {
                        ours: PROTOCOL_VERSION,
                        theirs: version,
                    },
                    _ => DisconnectReason::ClosedByServer,
                };
                Some(Control::Refuse { reason })
            }
            KIND_CLOSE => Some(Control::Close {
                code: *rest.first()?,
            }),
            _ => None,
        }
    }
}

/// The README's Rust snippets compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// How often an unanswered hello is resent.
const HELLO_RESEND: Duration = Duration::from_millis(100);

/// Default [`ServerConfig::ack_timeout`] and [`ClientConfig::ack_timeout`].
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// Default [`ServerConfig::keep_alive_interval`] and
/// [`ClientConfig::keep_alive_interval`].
pub const DEFAULT_KEEP_ALIVE_INTERVAL: Duration = Duration::from_millis(250);

/// How long a side that closed a connection for a [`DisconnectReason`] keeps
/// repeating its close frame before it closes the transport.
const CLOSE_LINGER: Duration = Duration::from_millis(500);

/// How often refused input (messages over a cap, unreadable packets) is summarised in
/// the log, per connection.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Watches one connection for ack progress and sends keep-alives: the shared part of
/// the dead-peer detection of [`Server`] and [`Client`].
#[derive(Debug, Clone, Copy)]
struct Liveness {
    /// When one of this side's packets was last acknowledged (or the connection
    /// started).
    last_progress: Duration,
    /// When this side last sent an ack-eliciting packet.
    last_eliciting: Duration,
    /// `packets_delivered` of the connection at `last_progress`.
    delivered: u64,
    /// Packets rejected as stale since the last accepted one.
    stale_run: u32,
}

/// This many packets in a row rejected as stale (older than the newest received) mean the
/// receive window was moved by a packet that was not the peer's (a corrupted or forged
/// sequence number): a read error. Reordering alone never delays 64 packets in a row
/// behind a newer one.
const MAX_STALE_RUN: u32 = 64;

impl Liveness {
    fn new(now: Duration) -> Self {
        Self {
            last_progress: now,
            last_eliciting: now,
            delivered: 0,
            stale_run: 0,
        }
    }

    /// Judges the outcome of [`Connection::read_header`](crate::connection::Connection::read_header)
    /// for a replication packet: true when the connection must be closed with
    /// [`DisconnectReason::ReadError`]. A malformed header (wrong tag, truncated, an
    /// implausible sequence or ack) never comes from a peer over a transport that keeps
    /// the integrity contract; duplicates are ordinary; stale packets are, unless they
    /// keep coming ([`MAX_STALE_RUN`]).
    fn header_is_fatal(
        &mut self,
        result: &Result<crate::connection::PacketSequence, crate::connection::ConnectionError>,
    ) -> bool {
        use crate::connection::ConnectionError as E;
        match result {
            Ok(_) => {
                self.stale_run = 0;
                false
            }
            Err(E::Duplicate { .. }) => false,
            Err(E::Stale { .. }) => {
                self.stale_run += 1;
                self.stale_run >= MAX_STALE_RUN
            }
            Err(_) => true,
        }
    }

    /// Records the connection's acks; true when nothing was acknowledged for
    /// `timeout`.
    fn timed_out(
        &mut self,
        now: Duration,
        connection: &crate::connection::Connection,
        timeout: Duration,
    ) -> bool {
        let delivered = connection.stats().packets_delivered;
        if delivered != self.delivered {
            self.delivered = delivered;
            self.last_progress = now;
        }
        now.saturating_sub(self.last_progress) >= timeout
    }

    /// Whether an (empty) ack-eliciting packet is due.
    fn keep_alive_due(&self, now: Duration, interval: Duration) -> bool {
        now.saturating_sub(self.last_eliciting) >= interval
    }
}

/// Counts refused input of one connection and logs it at most once per
/// [`REFUSAL_LOG_INTERVAL`] (a flooding peer must not flood the log too).
#[derive(Debug, Clone, Copy, Default)]
struct RefusalLog {
    /// Refusals counted by the layers below at the last log line.
    logged: u64,
    last_log: Option<Duration>,
}

impl RefusalLog {
    /// Logs `total - logged` new refusals if the interval has passed.
    fn report(&mut self, now: Duration, total: u64, who: std::fmt::Arguments<'_>) {
        if total <= self.logged {
            return;
        }
        if self
            .last_log
            .is_some_and(|t| now.saturating_sub(t) < REFUSAL_LOG_INTERVAL)
        {
            return;
        }
        tracing::warn!(
            "{who}: {} messages refused (over a receive cap, undecodable or invalid) since the last report",
            total - self.logged
        );
        self.logged = total;
        self.last_log = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::BitWriter;
    use crate::connection::{Connection, ConnectionConfig};

    #[test]
    fn control_frames_round_trip_and_reject_garbage() {
        let hello = Control::Hello {
            version: 7,
            registry_hash: 0x0123_4567_89AB_CDEF,
        };
        assert_eq!(Control::decode(&hello.encode(), 0), Some(hello));
        assert_eq!(
            Control::decode(&Control::Welcome.encode(), 0),
            Some(Control::Welcome)
        );
        let refuse = Control::Refuse {
            reason: DisconnectReason::RegistryMismatch {
                ours: 11,
                theirs: 22,
            },
        };
        // The receiver sees the sender's hash as "theirs" and its own as "ours".
        assert_eq!(
            Control::decode(&refuse.encode(), 22),
            Some(Control::Refuse {
                reason: DisconnectReason::RegistryMismatch {
                    ours: 22,
                    theirs: 11
                }
            })
        );
        let bytes = hello.encode();
        for len in 0..bytes.len() {
            assert_eq!(Control::decode(&bytes[..len], 0), None, "len {len}");
        }
        assert_eq!(Control::decode(&[CONTROL_TAG, 99], 0), None);
        for reason in [
            DisconnectReason::AckTimedOut,
            DisconnectReason::PendingStateOverflow,
            DisconnectReason::ReadError,
        ] {
            let frame = Control::Close {
                code: reason.close_code(),
            }
            .encode();
            let Some(Control::Close { code }) = Control::decode(&frame, 0) else {
                panic!("close frame did not decode");
            };
            assert_eq!(DisconnectReason::from_close_code(code, true), reason);
            assert_eq!(DisconnectReason::from_close_code(code, false), reason);
        }
        assert_eq!(
            DisconnectReason::from_close_code(0, true),
            DisconnectReason::ClosedByServer
        );
        assert_eq!(Control::decode(&[CONTROL_TAG, KIND_CLOSE], 0), None);
        assert_eq!(Control::decode(&[0xA1, KIND_WELCOME], 0), None);
    }

    #[test]
    fn replication_packets_start_with_the_header_tag() {
        let mut c = Connection::new(ConnectionConfig::default());
        let mut w = BitWriter::with_capacity_bytes(64);
        c.write_header(Duration::ZERO, &mut w);
        let bytes = w.finish().unwrap();
        assert_eq!(bytes[0], ConnectionConfig::default().protocol_tag);
        assert_ne!(bytes[0], CONTROL_TAG);
    }

    #[test]
    fn registry_mismatch_message_says_what_to_do() {
        let msg = DisconnectReason::RegistryMismatch { ours: 1, theirs: 2 }.to_string();
        assert!(msg.contains("rebuild both"), "{msg}");
        assert!(msg.contains("0x0000000000000001"), "{msg}");
    }
}
