//! The [`Server`]: accepts clients over a [`ServerTransport`], checks their registry in
//! the handshake, and replicates the object table to every accepted client, one
//! [`Connection`] and one replication connection each.

use super::insights::ServerInsights;
use super::ownership::{OwnershipAnnouncer, OwnershipNotice};
use super::stats::StatsTracker;
use super::{
    CLOSE_LINGER, CONTROL_TAG, Control, DEFAULT_ACK_TIMEOUT, DEFAULT_KEEP_ALIVE_INTERVAL,
    DEFAULT_MAX_PACKET_BYTES, DisconnectReason, FacadeError, Liveness, NetStats, PROTOCOL_VERSION,
    RefusalLog,
};
use crate::bits::{BitReader, BitWriter};
use crate::blob::DeliveryMode;
use crate::connection::{Connection, ConnectionConfig, MAX_HEADER_BITS};
use crate::handle::{Handle, HandleOf, NetRefHandle};
use crate::interest::BandwidthBudget;
use crate::object::{ConnectionId, ObjectError, ObjectTable};
use crate::protocol::ProtocolRegistry;
use crate::replication::attachment::{MessageError, ReceivedMessage};
use crate::replication::{PacketWrite, ReplicationConfig, ReplicationServer};
use crate::state::Replicated;
use crate::stream::{StreamKey, WriteResult};
use crate::time::wire::ServerTimeStream;
use crate::time::{InputStats, NetInput, Tick, TimeConfig};
#[cfg(feature = "udp")]
use crate::transport::udp::{ConnectTokenIssuer, UdpServerConfig, UdpServerTransport};
use crate::transport::{ClientId, ServerTransport, ServerTransportEvent};
use std::collections::{BTreeMap, VecDeque};
#[cfg(feature = "udp")]
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// Settings of a [`Server`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The replication core's settings.
    pub replication: ReplicationConfig,
    /// Each client connection's settings (the clients must use the same
    /// `protocol_tag`).
    pub connection: ConnectionConfig,
    /// Largest packet sent, in bytes (default [`DEFAULT_MAX_PACKET_BYTES`], at most the
    /// transport's maximum payload).
    pub max_packet_bytes: usize,
    /// Most packets sent to one client per tick, when it has that much to send
    /// (default 4).
    pub max_packets_per_tick: usize,
    /// A client that connected on the transport but sent no valid hello within this
    /// time is dropped (default 5 s).
    pub handshake_timeout: Duration,
    /// How long a refused client is kept so its refusal can be repeated before the
    /// connection is closed (default 500 ms).
    pub refusal_linger: Duration,
    /// Most clients, for [`Server::bind`] (default 64).
    pub max_clients: usize,
    /// A connected client none of whose packets was acknowledged for this long is
    /// closed with [`DisconnectReason::AckTimedOut`] (default
    /// [`DEFAULT_ACK_TIMEOUT`](super::DEFAULT_ACK_TIMEOUT), 5 s). Keep it well above
    /// [`keep_alive_interval`](Self::keep_alive_interval) plus the worst round trip.
    pub ack_timeout: Duration,
    /// An empty ack-eliciting packet is sent to a client that got no ack-eliciting
    /// packet for this long, so a live client always has something to acknowledge
    /// (default [`DEFAULT_KEEP_ALIVE_INTERVAL`](super::DEFAULT_KEEP_ALIVE_INTERVAL),
    /// 250 ms).
    pub keep_alive_interval: Duration,
    /// Most bytes of replication state kept for one client only because it has not
    /// acknowledged them (see [`ReplicationServer::pending_bytes`]); above it the
    /// client is closed with [`DisconnectReason::PendingStateOverflow`] (default
    /// 8 MiB).
    pub max_pending_bytes: usize,
    /// The time model: the fixed tick rate [`Server::tick`] is called at, input
    /// redundancy (see [`crate::time`]).
    pub time: TimeConfig,
    /// Network insights: how finely each sent packet is split (default off; see
    /// [`crate::insights`] and [`Server::attribution`]).
    pub attribution: crate::insights::AttributionLevel,
    /// Records the session (every packet's split, connection statistics) into this
    /// file for `replicate-insights report` (default none). Recording turns
    /// attribution on at the `Framing` level at least.
    pub record: Option<std::path::PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            replication: ReplicationConfig::default(),
            connection: ConnectionConfig::default(),
            max_packet_bytes: DEFAULT_MAX_PACKET_BYTES,
            max_packets_per_tick: 4,
            handshake_timeout: Duration::from_secs(5),
            refusal_linger: Duration::from_millis(500),
            max_clients: 64,
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            keep_alive_interval: DEFAULT_KEEP_ALIVE_INTERVAL,
            max_pending_bytes: 8 * 1024 * 1024,
            time: TimeConfig::default(),
            attribution: crate::insights::AttributionLevel::Off,
            record: None,
        }
    }
}

/// Something that happened on a [`Server`], drained with [`Server::poll_event`] or
/// [`Server::events`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A client passed the handshake; objects now replicate to it.
    ClientConnected {
        /// The client.
        client: ClientId,
        /// Its connect token's user data (e.g. an account id set by the backend).
        user_data: Vec<u8>,
    },
    /// A connected client left.
    ClientDisconnected {
        /// The client.
        client: ClientId,
        /// Why.
        reason: DisconnectReason,
    },
    /// A client was refused in the handshake (it sees the same reason, from its side).
    ClientRefused {
        /// The client.
        client: ClientId,
        /// Why ([`DisconnectReason::RegistryMismatch`] or
        /// [`DisconnectReason::VersionMismatch`]); `ours` is the server's.
        reason: DisconnectReason,
    },
    /// A client reported that it could not read an object (it marked it broken, Iris's
    /// `ReplicationDisabled`); the server destroys it on that client and creates it
    /// again from its current state.
    ObjectRecovered {
        /// The client.
        client: ClientId,
        /// The object (the root, if the client reported a subobject).
        handle: NetRefHandle,
    },
}

/// Bytes a [`Server`] holds on behalf of its clients ([`Server::held_bytes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldBytes {
    /// Replication state and messages kept until the client acknowledges them.
    pub pending: usize,
    /// Received messages waiting for game code, out-of-order reliable messages and
    /// partly reassembled ones.
    pub receive: usize,
}

enum Phase {
    AwaitingHello {
        since: Duration,
    },
    Active {
        conn: ConnectionId,
        connection: Box<Connection>,
        liveness: Liveness,
        refusals: RefusalLog,
    },
    /// Refused in the handshake, or closed by the server for a reason the client
    /// must learn: `frame` (the refusal or close frame) is repeated whenever the
    /// client sends something, until the transport connection is closed at `until`.
    Lingering {
        until: Duration,
        frame: Vec<u8>,
    },
}

struct Peer {
    phase: Phase,
    user_data: Vec<u8>,
    stats: StatsTracker,
}

/// A client being written to in a tick's write passes.
struct Flush<'a> {
    client: ClientId,
    conn: ConnectionId,
    peer: &'a mut Peer,
    /// The connection header's bits in the packet being written.
    header_bits: usize,
    /// Whether a packet was sent to the client this tick.
    sent_any: bool,
}

/// A replication server over a transport (netcode.io over UDP by default).
///
/// One [`tick`](Self::tick) per frame receives what arrived, runs the handshake and
/// timeouts, replicates what changed since the last tick and sends it. Mutate objects
/// between ticks through [`get_mut`](Self::get_mut) (push mode) or
/// [`objects_mut`](Self::objects_mut).
///
/// ```no_run
/// use replicate::{Replicated, Server, ServerEvent};
/// use replicate::transport::udp::ConnectTokenIssuer;
/// use std::time::Instant;
///
/// #[derive(Replicated, Debug, Default)]
/// #[net(name = "docs::server::Score")] // unique among the crate's doc tests
/// struct Score { points: u32 }
///
/// let issuer = ConnectTokenIssuer::with_random_key(0x5EED);
/// let mut server = Server::bind("0.0.0.0:5000", &issuer, Default::default()).unwrap();
/// let score = server.spawn(Score::default()).unwrap();
/// let start = Instant::now();
/// loop {
///     server.tick(start.elapsed()).unwrap();
///     while let Some(event) = server.poll_event() {
///         match event {
///             ServerEvent::ClientConnected { client, .. } => println!("{client} joined"),
///             ServerEvent::ClientDisconnected { client, reason } => println!("{client} left: {reason}"),
///             ServerEvent::ClientRefused { client, reason } => println!("{client} refused: {reason}"),
///             ServerEvent::ObjectRecovered { client, handle } => println!("{handle} re-sent to {client}"),
///         }
///     }
///     if let Some(s) = server.get_mut::<Score>(score) { s.points += 1; }
///     std::thread::sleep(std::time::Duration::from_millis(33));
/// }
/// ```
pub struct Server<T: ServerTransport = crate::transport::DefaultServerTransport> {
    transport: T,
    replication: ReplicationServer,
    registry_hash: u64,
    config: ServerConfig,
    peers: BTreeMap<ClientId, Peer>,
    events: VecDeque<ServerEvent>,
    now: Duration,
    tick: Tick,
    /// Network insights (attribution totals, recorder); `None` when off.
    insights: Option<Box<ServerInsights>>,
    /// What each client was told it owns.
    ownership: OwnershipAnnouncer,
    /// Every connection's time stream, added right after the built-in streams (so one
    /// key reaches it on every connection); `None` before the first client.
    time_stream: Option<StreamKey<ServerTimeStream>>,
}

impl<T: ServerTransport> std::fmt::Debug for Server<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("clients", &self.client_count())
            .field("objects", &self.replication.objects().len())
            .field(
                "registry_hash",
                &format_args!("{:#018x}", self.registry_hash),
            )
            .finish()
    }
}

#[cfg(feature = "udp")]
impl Server<UdpServerTransport> {
    /// Binds a netcode.io UDP server on `addr` accepting connect tokens from `issuer`,
    /// replicating every `#[derive(Replicated)]` type linked into the program.
    pub fn bind(
        addr: impl ToSocketAddrs,
        issuer: &ConnectTokenIssuer,
        config: ServerConfig,
    ) -> Result<Self, FacadeError> {
        let transport =
            UdpServerTransport::bind(addr, UdpServerConfig::secure(issuer, config.max_clients))?;
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        Self::new(transport, registry, config)
    }

    /// The bound UDP address (put it in connect tokens).
    pub fn local_addr(&self) -> SocketAddr {
        self.transport.local_addr()
    }
}

impl<T: ServerTransport> Server<T> {
    /// A server on any transport, replicating the types in `registry` (clients must
    /// have an equal registry).
    pub fn new(
        transport: T,
        registry: Arc<ProtocolRegistry>,
        config: ServerConfig,
    ) -> Result<Self, FacadeError> {
        let max_packet_bytes = config.max_packet_bytes;
        if max_packet_bytes * 8 < MAX_HEADER_BITS + 64 {
            return Err(FacadeError::Config(format!(
                "max_packet_bytes = {max_packet_bytes} is too small (at least {})",
                (MAX_HEADER_BITS + 64).div_ceil(8)
            )));
        }
        if max_packet_bytes > transport.max_payload_bytes() {
            return Err(FacadeError::Config(format!(
                "max_packet_bytes = {max_packet_bytes} exceeds the transport's maximum payload of {} bytes",
                transport.max_payload_bytes()
            )));
        }
        if config.connection.protocol_tag == CONTROL_TAG {
            return Err(FacadeError::Config(format!(
                "connection.protocol_tag must not be {CONTROL_TAG:#04x} (the control frame tag)"
            )));
        }
        config.time.validate().map_err(FacadeError::Config)?;
        if config.max_packets_per_tick == 0 {
            return Err(FacadeError::Config(
                "max_packets_per_tick must be at least 1".into(),
            ));
        }
        let recording: Option<Box<dyn std::io::Write + Send>> = match &config.record {
            Some(path) => Some(Box::new(std::fs::File::create(path).map_err(|e| {
                FacadeError::Config(format!(
                    "cannot create the session file {}: {e}",
                    path.display()
                ))
            })?)),
            None => None,
        };
        let mut server = Self {
            transport,
            registry_hash: registry.hash(),
            replication: ReplicationServer::new(registry, config.replication.clone()),
            config,
            peers: BTreeMap::new(),
            events: VecDeque::new(),
            now: Duration::ZERO,
            tick: 0,
            insights: None,
            ownership: OwnershipAnnouncer::default(),
            time_stream: None,
        };
        let level = server.config.attribution;
        server.start_insights(level, recording);
        Ok(server)
    }

    /// Turns network insights on: every packet sent is split at `level` (at least
    /// `Framing` when recording), summed per client ([`attribution`](Self::attribution))
    /// and, with `recording`, written to it as a session (see [`crate::insights`]).
    /// Replaces any earlier recording (which is flushed). `Off` without a recording
    /// turns insights off.
    pub fn start_insights(
        &mut self,
        level: crate::insights::AttributionLevel,
        recording: Option<Box<dyn std::io::Write + Send>>,
    ) {
        use crate::insights::AttributionLevel;
        let level = if recording.is_some() && level == AttributionLevel::Off {
            AttributionLevel::Framing
        } else {
            level
        };
        self.replication.set_attribution(level);
        self.insights = level
            .is_on()
            .then(|| Box::new(ServerInsights::new(level, recording)));
        let clients: Vec<(ClientId, ConnectionId)> = self
            .clients()
            .filter_map(|c| Some((c, self.connection_id(c)?)))
            .collect();
        if let Some(i) = self.insights.as_mut() {
            for (client, conn) in clients {
                i.ensure_schema(
                    self.replication.objects().registry(),
                    self.replication.stream_names(conn),
                );
                i.on_connected(self.now, client);
            }
        }
    }

    /// Writes out what the session recorder has buffered. Returns false when recording
    /// failed (the error was logged and recording stopped); true when it works or
    /// nothing is recorded. Dropping the server flushes too.
    pub fn flush_recording(&mut self) -> bool {
        self.insights.as_mut().is_none_or(|i| i.flush())
    }

    /// The value ranges observed per member so far (attribution at the `Members`
    /// level): the basis of the report's quantization hint.
    pub fn member_ranges(&self) -> &[crate::insights::MemberRange] {
        self.insights.as_ref().map_or(&[], |i| i.ranges())
    }

    /// Whether a session is being recorded.
    pub fn is_recording(&self) -> bool {
        self.insights.as_ref().is_some_and(|i| i.is_recording())
    }

    /// Where the bits sent to a client went so far (connection header, stream
    /// framing, each stream, padding, the replication stream's parts, per type and
    /// member), when attribution is on ([`ServerConfig::attribution`]).
    pub fn attribution(&self, client: ClientId) -> Option<&crate::insights::AttributionTotals> {
        self.insights.as_ref()?.totals.get(&client)
    }

    /// Where the bits received from a client went so far (connection header, stream
    /// framing, each stream, padding), when attribution is on.
    pub fn received_attribution(
        &self,
        client: ClientId,
    ) -> Option<&crate::insights::AttributionTotals> {
        self.insights.as_ref()?.received.get(&client)
    }

    /// One frame: receive, handshake and timeouts, replicate, send. `now` is a
    /// monotonic time since an arbitrary epoch (e.g. `Instant::elapsed` of the start).
    /// Errors only on a transport failure (a socket error), never because of what a
    /// client sent.
    ///
    /// One call is one server tick, expected every `1 / time.tick_rate` seconds: the
    /// packets it sends carry [`current_tick`](Self::current_tick), which advances by
    /// one when it returns (see [`crate::time`]). Every connected client gets at least
    /// one packet per tick, also when nothing changed: the tick and the clock
    /// echo ride in it.
    pub fn tick(&mut self, now: Duration) -> Result<(), FacadeError> {
        self.now = now;
        let tick = self.tick;
        for conn in self.active_connections() {
            if let Some(s) = self.time_stream(conn) {
                s.set_tick(tick);
            }
        }
        self.transport.update(now)?;
        while let Some(event) = self.transport.poll_event() {
            self.handle_transport_event(event);
        }
        self.run_timeouts();
        if let Some(i) = self.insights.as_mut() {
            i.on_tick(now);
        }
        let active = self.active_connections();
        self.ownership.announce(&mut self.replication, &active);
        self.replication.tick(now);
        self.flush_peers();
        self.tick = self.tick.saturating_add(1);
        Ok(())
    }

    fn active_connections(&self) -> Vec<ConnectionId> {
        self.peers
            .values()
            .filter_map(|p| match p.phase {
                Phase::Active { conn, .. } => Some(conn),
                _ => None,
            })
            .collect()
    }

    /// The tick being simulated: game code between two [`tick`](Self::tick) calls
    /// simulates it, and the next `tick` sends its state stamped with it.
    pub fn current_tick(&self) -> Tick {
        self.tick
    }

    /// The input a client sent for `tick` (see [`crate::time`]), taking it out of the
    /// client's input buffer. When the input for `tick` did not arrive in time, the
    /// last input taken is repeated (the player keeps doing what they did); `None`
    /// before any input, for an unknown client, or when the input does not decode.
    pub fn take_input<I: NetInput>(&mut self, client: ClientId, tick: Tick) -> Option<I> {
        let conn = self.connection_id(client)?;
        let stream = self.time_stream(conn)?;
        stream.inputs.take(tick).and_then(crate::time::input_decode)
    }

    /// Counters of a client's input buffer (inputs on time, missing, their lead).
    pub fn input_stats(&mut self, client: ClientId) -> Option<InputStats> {
        let conn = self.connection_id(client)?;
        self.time_stream(conn).map(|s| s.inputs.stats())
    }

    /// Bits spent on the time model in the packets sent to a client:
    /// `(tick field bits, whole time section bits (tick and clock echoes), packets)`.
    pub fn time_bits(&mut self, client: ClientId) -> Option<(u64, u64, u64)> {
        let conn = self.connection_id(client)?;
        self.time_stream(conn)
            .map(|s| (s.tick_bits, s.section_bits, s.packets))
    }

    /// The time stream of connection `conn`.
    fn time_stream(&mut self, conn: ConnectionId) -> Option<&mut ServerTimeStream> {
        let key = self.time_stream?;
        self.replication.stream_mut(conn, key)
    }

    fn handle_transport_event(&mut self, event: ServerTransportEvent) {
        match event {
            ServerTransportEvent::Connected { client, user_data } => {
                tracing::debug!("client {client}: transport connected, awaiting hello");
                self.peers.insert(
                    client,
                    Peer {
                        phase: Phase::AwaitingHello { since: self.now },
                        user_data,
                        stats: StatsTracker::default(),
                    },
                );
            }
            ServerTransportEvent::Disconnected { client, reason } => {
                if let Some(peer) = self.peers.remove(&client) {
                    if let Phase::Active { conn, .. } = peer.phase {
                        if let Some(i) = self.insights.as_mut() {
                            i.add_ranges(self.replication.take_member_ranges(conn));
                            i.on_disconnected(self.now, client);
                        }
                        self.replication.remove_connection(conn);
                        self.ownership.disconnected(&mut self.replication, conn);
                        self.events.push_back(ServerEvent::ClientDisconnected {
                            client,
                            reason: DisconnectReason::from_transport(reason, true),
                        });
                    }
                }
            }
            ServerTransportEvent::Payload { client, payload } => self.receive(client, &payload),
        }
    }

    fn receive(&mut self, client: ClientId, payload: &[u8]) {
        let now = self.now;
        let Some(peer) = self.peers.get_mut(&client) else {
            return;
        };
        peer.stats.on_receive(payload.len());
        if payload.first() == Some(&CONTROL_TAG) {
            match Control::decode(payload, self.registry_hash) {
                Some(Control::Hello {
                    version,
                    registry_hash,
                }) => self.on_hello(client, version, registry_hash),
                Some(Control::Close { code }) => {
                    let reason = DisconnectReason::from_close_code(code, false);
                    tracing::debug!("client {client} closed the connection: {reason}");
                    self.drop_peer(client, Some(reason));
                    self.transport.disconnect(client);
                }
                _ => peer.stats.on_reject(),
            }
            return;
        }
        let (conn, connection, liveness) = match &mut peer.phase {
            Phase::Active {
                conn,
                connection,
                liveness,
                ..
            } => (*conn, connection, liveness),
            Phase::Lingering { frame, .. } => {
                // The client has not heard why yet: tell it again.
                let frame = frame.clone();
                peer.stats.on_reject();
                if !frame.is_empty() {
                    Self::send_raw(&mut self.transport, client, &mut peer.stats, &frame);
                }
                return;
            }
            Phase::AwaitingHello { .. } => {
                peer.stats.on_reject();
                return;
            }
        };
        let mut r = BitReader::new(payload);
        let header = connection.read_header(now, &mut r);
        if liveness.header_is_fatal(&header) {
            if let Err(e) = header {
                tracing::warn!("client {client}: unreadable packet header, closing: {e}");
            }
            peer.stats.on_reject();
            self.close_peer(client, DisconnectReason::ReadError);
            return;
        }
        match header {
            Ok(_) => {
                let header_bits = r.position();
                let read = self.replication.read_packet(conn, &mut r);
                if let Some(i) = self.insights.as_mut()
                    && let Some(mut bits) = self.replication.received_attribution(conn)
                {
                    bits.wire_bits = payload.len() as u64 * 8;
                    bits.header = header_bits as u64;
                    bits.padding = bits.wire_bits.saturating_sub(r.position() as u64);
                    i.on_received(now, client, bits);
                }
                if let Err(e) = read {
                    // The packet is already acknowledged (see the module docs): close.
                    tracing::warn!("client {client}: unreadable packet, closing: {e}");
                    peer.stats.on_reject();
                    self.close_peer(client, DisconnectReason::ReadError);
                }
            }
            Err(e) => {
                if !e.is_benign() {
                    tracing::debug!("client {client}: rejected packet: {e}");
                }
                peer.stats.on_reject();
            }
        }
    }

    fn on_hello(&mut self, client: ClientId, version: u16, registry_hash: u64) {
        let now = self.now;
        let Some(peer) = self.peers.get_mut(&client) else {
            return;
        };
        match &peer.phase {
            Phase::Active { .. } => {
                // The welcome was lost: repeat it.
                Self::send_raw(
                    &mut self.transport,
                    client,
                    &mut peer.stats,
                    &Control::Welcome.encode(),
                );
                return;
            }
            Phase::Lingering { frame, .. } => {
                let frame = frame.clone();
                if !frame.is_empty() {
                    Self::send_raw(&mut self.transport, client, &mut peer.stats, &frame);
                }
                return;
            }
            Phase::AwaitingHello { .. } => {}
        }
        let refusal = if version != PROTOCOL_VERSION {
            Some(DisconnectReason::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: version,
            })
        } else if registry_hash != self.registry_hash {
            Some(DisconnectReason::RegistryMismatch {
                ours: self.registry_hash,
                theirs: registry_hash,
            })
        } else {
            None
        };
        if let Some(reason) = refusal {
            tracing::warn!("client {client} refused: {reason}");
            let frame = Control::Refuse { reason }.encode();
            Self::send_raw(&mut self.transport, client, &mut peer.stats, &frame);
            peer.phase = Phase::Lingering {
                until: now + self.config.refusal_linger,
                frame,
            };
            self.events
                .push_back(ServerEvent::ClientRefused { client, reason });
            return;
        }
        let conn = self.replication.add_connection();
        self.ownership.connected(&self.replication, conn);
        // The time stream follows the built-in ones, like the client's.
        let time = ServerTimeStream::new(self.tick, self.config.time.tick_rate);
        match self.replication.add_stream(conn, time) {
            Ok(key) => self.time_stream = Some(key),
            Err(e) => tracing::error!("client {client}: no time stream: {e}"),
        }
        peer.phase = Phase::Active {
            conn,
            connection: Box::new(Connection::new(self.config.connection.clone())),
            liveness: Liveness::new(now),
            refusals: RefusalLog::default(),
        };
        Self::send_raw(
            &mut self.transport,
            client,
            &mut peer.stats,
            &Control::Welcome.encode(),
        );
        tracing::debug!("client {client} accepted as connection {conn}");
        if let Some(i) = self.insights.as_mut() {
            i.ensure_schema(
                self.replication.objects().registry(),
                self.replication.stream_names(conn),
            );
            i.on_connected(now, client);
        }
        self.events.push_back(ServerEvent::ClientConnected {
            client,
            user_data: peer.user_data.clone(),
        });
    }

    fn run_timeouts(&mut self) {
        let now = self.now;
        let mut drop = Vec::new();
        let mut close = Vec::new();
        for (&client, peer) in &mut self.peers {
            match &mut peer.phase {
                Phase::AwaitingHello { since }
                    if now.saturating_sub(*since) >= self.config.handshake_timeout =>
                {
                    tracing::debug!("client {client}: no hello in time, dropped");
                    drop.push(client);
                }
                Phase::Lingering { until, .. } if now >= *until => drop.push(client),
                Phase::Active {
                    conn,
                    connection,
                    liveness,
                    refusals,
                } => {
                    if liveness.timed_out(now, connection, self.config.ack_timeout) {
                        close.push((client, DisconnectReason::AckTimedOut));
                    } else if self.replication.pending_bytes(*conn) > self.config.max_pending_bytes
                    {
                        close.push((client, DisconnectReason::PendingStateOverflow));
                    }
                    let refused = self
                        .replication
                        .message_stats(*conn)
                        .map_or(0, |s| s.rejected);
                    peer.stats.stats.messages_refused = refused;
                    refusals.report(now, refused, format_args!("client {client}"));
                }
                _ => {}
            }
        }
        for client in drop {
            self.peers.remove(&client);
            self.transport.disconnect(client);
        }
        for (client, reason) in close {
            tracing::warn!("client {client}: closing: {reason}");
            self.close_peer(client, reason);
        }
    }

    /// Closes a connected client for `reason`: its replication state is released now
    /// and [`ServerEvent::ClientDisconnected`] raised; a close frame tells the client
    /// why, and the transport connection is closed after a short linger.
    fn close_peer(&mut self, client: ClientId, reason: DisconnectReason) {
        if !self.drop_peer(client, Some(reason)) {
            return;
        }
        let frame = Control::Close {
            code: reason.close_code(),
        }
        .encode();
        let Some(peer) = self.peers.get_mut(&client) else {
            return;
        };
        Self::send_raw(&mut self.transport, client, &mut peer.stats, &frame);
        peer.phase = Phase::Lingering {
            until: self.now + CLOSE_LINGER,
            frame,
        };
    }

    /// Ends a connected client's replication (keeping the peer entry) and raises
    /// [`ServerEvent::ClientDisconnected`] when `reason` is given. Returns whether the
    /// client was connected.
    fn drop_peer(&mut self, client: ClientId, reason: Option<DisconnectReason>) -> bool {
        let Some(peer) = self.peers.get_mut(&client) else {
            return false;
        };
        let Phase::Active { conn, .. } = peer.phase else {
            return false;
        };
        peer.phase = Phase::Lingering {
            until: self.now,
            frame: Vec::new(),
        };
        self.replication.remove_connection(conn);
        self.ownership.disconnected(&mut self.replication, conn);
        if let Some(reason) = reason {
            self.events
                .push_back(ServerEvent::ClientDisconnected { client, reason });
        }
        true
    }

    fn send_raw(transport: &mut T, client: ClientId, stats: &mut StatsTracker, bytes: &[u8]) {
        match transport.send(client, bytes) {
            Ok(()) => stats.on_send(bytes.len()),
            Err(e) => tracing::debug!("client {client}: send failed: {e}"),
        }
    }

    /// Sends every client what the tick has for it: deliveries are processed first,
    /// then every client's packets are written in passes of one packet each
    /// ([`ReplicationServer::write_packets`], on the replication config's writer
    /// threads), then idle clients get a keep-alive or an ack.
    fn flush_peers(&mut self) {
        let now = self.now;
        let ids: Vec<ClientId> = self.peers.keys().copied().collect();
        let mut open: Vec<(ClientId, ConnectionId)> = Vec::new();
        for client in ids {
            if let Some(conn) = self.take_deliveries(client) {
                open.push((client, conn));
            }
        }
        // The clients with an open connection, in id order (as `open`).
        let mut flushes: Vec<Flush<'_>> = Vec::with_capacity(open.len());
        let mut next = open.iter().peekable();
        for (&client, peer) in self.peers.iter_mut() {
            if let Some(&&(_, conn)) = next.peek().filter(|(c, _)| *c == client) {
                next.next();
                flushes.push(Flush {
                    client,
                    conn,
                    peer,
                    header_bits: 0,
                    sent_any: false,
                });
            }
        }
        let (transport, insights) = (&mut self.transport, &mut self.insights);
        let max_packet_bytes = self.config.max_packet_bytes;
        self.replication.write_passes(
            &mut flushes,
            self.config.max_packets_per_tick,
            |f| {
                let Phase::Active { connection, .. } = &mut f.peer.phase else {
                    return None;
                };
                let mut w = BitWriter::with_capacity_bytes(max_packet_bytes);
                let seq = connection.write_header(now, &mut w);
                f.header_bits = w.position();
                Some(PacketWrite::new(f.conn, seq, w))
            },
            |replication, f, packet| {
                let more = packet.result == WriteResult::HasMoreData;
                let sent = Self::send_packet(transport, insights, replication, now, f, packet);
                f.sent_any |= sent;
                sent && more
            },
        );
        let keep_alive_interval = self.config.keep_alive_interval;
        for f in flushes {
            Self::finish_peer(
                transport,
                insights,
                &mut self.replication,
                keep_alive_interval,
                now,
                f,
            );
        }
    }

    /// Processes a client's deliveries (and reports recovered objects); returns its
    /// connection if it is active.
    fn take_deliveries(&mut self, client: ClientId) -> Option<ConnectionId> {
        let now = self.now;
        let peer = self.peers.get_mut(&client)?;
        let Phase::Active {
            conn, connection, ..
        } = &mut peer.phase
        else {
            peer.stats.update(now, None);
            return None;
        };
        let conn = *conn;
        connection.update(now);
        while let Some((seq, status)) = connection.poll_delivery() {
            self.replication.process_delivery(conn, seq, status);
        }
        for handle in self.replication.take_recovered(conn) {
            self.events
                .push_back(ServerEvent::ObjectRecovered { client, handle });
        }
        Some(conn)
    }

    /// Sends a packet the replication server wrote for a client (after its
    /// `header_bits` of connection header); a packet it wrote nothing into is
    /// cancelled instead. Returns whether it was sent.
    fn send_packet(
        transport: &mut T,
        insights: &mut Option<Box<ServerInsights>>,
        replication: &ReplicationServer,
        now: Duration,
        f: &mut Flush<'_>,
        packet: PacketWrite,
    ) -> bool {
        let Phase::Active { connection, .. } = &mut f.peer.phase else {
            return false;
        };
        if packet.result == WriteResult::NoData {
            connection.cancel_header(packet.sequence);
            return false;
        }
        let (client, w) = (f.client, packet.writer);
        match w.finish() {
            Ok(bytes) => {
                Self::send_raw(transport, client, &mut f.peer.stats, &bytes);
                if let Some(i) = insights.as_mut()
                    && let Some(mut bits) = replication.packet_attribution(f.conn)
                {
                    bits.wire_bits = bytes.len() as u64 * 8;
                    bits.header = f.header_bits as u64;
                    bits.padding = bits.wire_bits.saturating_sub(w.position() as u64);
                    i.on_packet(now, client, bits);
                }
            }
            // Cannot happen with a writer bounded by its capacity; the stamped
            // packet is then reported lost and its contents re-sent.
            Err(e) => tracing::warn!("client {client}: packet overflow: {e}"),
        }
        true
    }

    /// After a tick's packets: a keep-alive or an ack for a client that got none,
    /// then its statistics.
    fn finish_peer(
        transport: &mut T,
        insights: &mut Option<Box<ServerInsights>>,
        replication: &mut ReplicationServer,
        keep_alive_interval: Duration,
        now: Duration,
        f: Flush<'_>,
    ) {
        let (client, peer) = (f.client, f.peer);
        let Phase::Active {
            connection,
            liveness,
            ..
        } = &mut peer.phase
        else {
            return;
        };
        if f.sent_any {
            liveness.last_eliciting = now;
        } else if liveness.keep_alive_due(now, keep_alive_interval) {
            // Nothing to send for a while: an empty packet the client must ack.
            let mut w = BitWriter::with_capacity_bytes(MAX_HEADER_BITS.div_ceil(8));
            connection.write_header(now, &mut w);
            if let Ok(bytes) = w.finish() {
                Self::send_raw(transport, client, &mut peer.stats, &bytes);
            }
            liveness.last_eliciting = now;
        } else if connection.needs_ack() {
            let (_, bytes) = connection.ack_only_packet(now);
            Self::send_raw(transport, client, &mut peer.stats, &bytes);
            if let Some(i) = insights.as_mut() {
                i.on_ack_only(now, client, bytes.len());
            }
        }
        peer.stats.update(now, Some(connection));
        if let Some(i) = insights.as_mut() {
            i.on_stats(now, client, &peer.stats.stats);
            i.add_ranges(replication.take_member_ranges(f.conn));
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Takes every queued event. The iterator owns them, so `self` stays free to use
    /// while handling them (`for e in client.events() { client.get(..) }`).
    pub fn events(&mut self) -> std::collections::vec_deque::IntoIter<ServerEvent> {
        std::mem::take(&mut self.events).into_iter()
    }

    /// Spawns an object (push mode: change it through [`get_mut`](Self::get_mut)); it
    /// replicates to every client from the next tick. The typed [`Handle`] reads and
    /// writes it without naming its type again (`server.get_mut(handle)`); its
    /// [`raw`](Handle::raw) handle is the same on every client.
    pub fn spawn<O: Replicated>(&mut self, object: O) -> Result<Handle<O>, ObjectError> {
        let objects = self.replication.objects_mut();
        let raw = objects.spawn(object)?;
        Ok(objects
            .handle(raw)
            .unwrap_or(Handle::from_raw_unchecked(raw)))
    }

    /// Destroys an object on the server and, from the next tick, on every client.
    pub fn destroy(&mut self, handle: impl Into<NetRefHandle>) -> Result<(), ObjectError> {
        let handle = handle.into();
        self.replication.objects_mut().destroy(handle)?;
        self.ownership.touch(handle);
        Ok(())
    }

    /// A spawned object: by its typed [`Handle`] (the type is inferred), or by a
    /// [`NetRefHandle`] with the type named (`get::<Door>(raw)`; `None` when the object
    /// is of another type).
    pub fn get<O: Replicated>(&self, handle: impl HandleOf<O>) -> Option<&O> {
        self.replication.objects().get(handle)
    }

    /// A spawned object, marked dirty: its changes are sent at the next tick. Takes a
    /// typed or an untyped handle, like [`get`](Self::get).
    pub fn get_mut<O: Replicated>(&mut self, handle: impl HandleOf<O>) -> Option<&mut O> {
        self.replication.objects_mut().get_mut(handle)
    }

    /// The typed handle of an object of type `O`; `None` when `handle` names no live
    /// object or one of another type.
    pub fn handle<O: Replicated>(&self, handle: NetRefHandle) -> Option<Handle<O>> {
        self.replication.objects().handle(handle)
    }

    /// Makes `client` the owner of an object (owner conditions such as `OwnerOnly`
    /// follow it), or nobody; `autonomous` says whether the owner controls it
    /// (`AutonomousOnly` members go to it, `SimulatedOnly` ones to everyone else).
    ///
    /// The clients learn it: from the next tick the owner sees
    /// [`Client::is_owned`](crate::Client::is_owned) true and gets
    /// [`ClientEvent::OwnershipGained`](crate::ClientEvent::OwnershipGained) (the
    /// previous owner [`OwnershipLost`](crate::ClientEvent::OwnershipLost)); see
    /// [`Client::is_owned`](crate::Client::is_owned) for how it travels. Subobjects
    /// follow their owner. When the owning client disconnects, its objects are owned
    /// by nobody (a client connecting later does not inherit them).
    pub fn set_owner(
        &mut self,
        handle: impl Into<NetRefHandle>,
        client: Option<ClientId>,
        autonomous: bool,
    ) -> Result<(), ObjectError> {
        let handle = handle.into();
        let conn = client.and_then(|c| self.connection_id(c));
        self.replication.set_owner(handle, conn, autonomous)?;
        self.ownership.touch(handle);
        Ok(())
    }

    /// The client that owns an object (set with [`set_owner`](Self::set_owner)), if
    /// it is connected.
    pub fn owner(&self, handle: impl Into<NetRefHandle>) -> Option<ClientId> {
        let objects = self.replication.objects();
        let entry = objects.entry_at(objects.index_of(handle.into())?)?;
        let conn = entry.owner_connection()?;
        self.peers.iter().find_map(|(&id, p)| match p.phase {
            Phase::Active { conn: c, .. } if c == conn => Some(id),
            _ => None,
        })
    }

    /// Sets a connected client's view position (for the grid filter and the sphere
    /// prioritizer). Returns false when the client is not connected.
    pub fn set_view_position(&mut self, client: ClientId, position: glam::Vec3) -> bool {
        match self.connection_id(client) {
            Some(conn) => {
                self.replication.set_view_position(conn, position);
                true
            }
            None => false,
        }
    }

    /// Sets a connected client's bandwidth budget. Returns false when the client is
    /// not connected.
    pub fn set_bandwidth_budget(&mut self, client: ClientId, budget: BandwidthBudget) -> bool {
        match self.connection_id(client) {
            Some(conn) => {
                self.replication.set_connection_budget(conn, budget);
                true
            }
            None => false,
        }
    }

    /// Sends a message (any registered replicated type) to a connected client.
    pub fn send_message<M: Replicated>(
        &mut self,
        client: ClientId,
        message: &M,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        let conn = self
            .connection_id(client)
            .ok_or(MessageError::NoConnection(u32::MAX))?;
        self.replication.send_message(conn, message, mode)
    }

    /// Sends a message to every connected client.
    pub fn broadcast_message<M: Replicated>(
        &mut self,
        message: &M,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        self.replication.broadcast_message(message, mode)
    }

    /// Sends a message targeting an object (an RPC) to a connected client; it is held
    /// until the client has the object, dropped if the object is not in its scope.
    pub fn send_object_message<M: Replicated>(
        &mut self,
        client: ClientId,
        object: impl Into<NetRefHandle>,
        message: &M,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        let object = object.into();
        let conn = self
            .connection_id(client)
            .ok_or(MessageError::NoConnection(u32::MAX))?;
        self.replication
            .send_object_message(conn, object, message, mode)
            .map(|_| ())
    }

    /// Takes the messages received from every connected client (validated), with
    /// their sender. Read them with [`ReceivedMessage::get`] / [`ReceivedMessage::take`].
    pub fn receive_messages(&mut self) -> Vec<(ClientId, ReceivedMessage)> {
        let active: Vec<(ClientId, ConnectionId)> = self
            .peers
            .iter()
            .filter_map(|(&id, p)| match p.phase {
                Phase::Active { conn, .. } => Some((id, conn)),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        for (client, conn) in active {
            out.extend(
                self.replication
                    .drain_messages(conn)
                    .into_iter()
                    // Ownership notices only go to clients; one from a client is noise.
                    .filter(|m| !m.is::<OwnershipNotice>())
                    .map(|m| (client, m)),
            );
        }
        out
    }

    /// Puts a root object in or out of a connected client's scope (every object is in
    /// scope by default); leaving the scope destroys it on that client. Returns false
    /// when the client is not connected.
    pub fn set_in_scope(
        &mut self,
        client: ClientId,
        handle: impl Into<NetRefHandle>,
        in_scope: bool,
    ) -> bool {
        match self.connection_id(client) {
            Some(conn) => {
                self.replication.set_in_scope(conn, handle.into(), in_scope);
                true
            }
            None => false,
        }
    }

    /// The object table (subobjects, dependents, tags, priorities, poll mode).
    pub fn objects(&self) -> &ObjectTable {
        self.replication.objects()
    }

    /// The object table, mutably.
    pub fn objects_mut(&mut self) -> &mut ObjectTable {
        self.replication.objects_mut()
    }

    /// The replication core (scope, writer hooks, extra streams per connection).
    ///
    /// Unstable: an escape hatch into the internal layers, for the project's tests and
    /// tools; not covered by semantic versioning.
    #[doc(hidden)]
    pub fn replication(&self) -> &ReplicationServer {
        &self.replication
    }

    /// The replication core, mutably (interest filters, prioritizers, groups, allow
    /// and deny lists, custom conditions, delta switches):
    /// [`set_in_scope`](ReplicationServer::set_in_scope),
    /// [`set_writer_hooks`](ReplicationServer::set_writer_hooks),
    /// [`add_stream`](ReplicationServer::add_stream), addressed by
    /// [`connection_id`](Self::connection_id).
    ///
    /// Unstable: an escape hatch into the internal layers, for the project's tests and
    /// tools; not covered by semantic versioning.
    #[doc(hidden)]
    pub fn replication_mut(&mut self) -> &mut ReplicationServer {
        &mut self.replication
    }

    /// The replication connection of a connected client.
    pub fn connection_id(&self, client: ClientId) -> Option<ConnectionId> {
        match self.peers.get(&client)?.phase {
            Phase::Active { conn, .. } => Some(conn),
            _ => None,
        }
    }

    /// The connected clients (past the handshake).
    pub fn clients(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.peers
            .iter()
            .filter(|(_, p)| matches!(p.phase, Phase::Active { .. }))
            .map(|(&id, _)| id)
    }

    /// Number of connected clients.
    pub fn client_count(&self) -> usize {
        self.clients().count()
    }

    /// Bytes held for one connected client, or, with `None`, the totals over every
    /// connected client: state kept because the client has not acknowledged it
    /// ([`ReplicationServer::pending_bytes`], capped per client by
    /// [`ServerConfig::max_pending_bytes`]) and its receive buffers
    /// ([`ReplicationServer::buffered_receive_bytes`], capped by the
    /// [`AttachmentConfig`](crate::replication::attachment::AttachmentConfig) byte limits).
    pub fn held_bytes(&self, client: Option<ClientId>) -> HeldBytes {
        let mut total = HeldBytes::default();
        for (&id, peer) in &self.peers {
            if client.is_some_and(|c| c != id) {
                continue;
            }
            if let Phase::Active { conn, .. } = peer.phase {
                total.pending += self.replication.pending_bytes(conn);
                total.receive += self.replication.buffered_receive_bytes(conn);
            }
        }
        total
    }

    /// Statistics of a client's connection.
    pub fn stats(&self, client: ClientId) -> Option<&NetStats> {
        self.peers.get(&client).map(|p| &p.stats.stats)
    }

    /// Bits of object batches sent to a client so far, per replicated type name (the
    /// types that were sent at all), largest first.
    pub fn bits_per_type(&self, client: ClientId) -> Vec<(&'static str, u64)> {
        let Some(writer) = self
            .connection_id(client)
            .and_then(|c| self.replication.writer(c))
        else {
            return Vec::new();
        };
        let bits: Vec<u64> = writer.stats().per_type.iter().map(|t| t.bits).collect();
        super::stats::bits_by_type_name(self.replication.objects().registry(), &bits)
    }

    /// The sans-IO connection of a connected client (acks, RTT, loss counters).
    ///
    /// Unstable: an escape hatch into the internal layers, for the project's tests and
    /// tools; not covered by semantic versioning.
    #[doc(hidden)]
    pub fn connection(&self, client: ClientId) -> Option<&Connection> {
        match &self.peers.get(&client)?.phase {
            Phase::Active { connection, .. } => Some(connection),
            _ => None,
        }
    }

    /// Closes a client's connection; it sees [`DisconnectReason::ClosedByServer`].
    pub fn disconnect(&mut self, client: ClientId) {
        self.transport.disconnect(client);
        while let Some(event) = self.transport.poll_event() {
            self.handle_transport_event(event);
        }
    }

    /// Closes every connection (a graceful shutdown).
    pub fn disconnect_all(&mut self) {
        let ids: Vec<ClientId> = self.peers.keys().copied().collect();
        for id in ids {
            self.disconnect(id);
        }
    }

    /// The hash of the replicated types, compared with each client's in the handshake.
    pub fn registry_hash(&self) -> u64 {
        self.registry_hash
    }

    /// The time of the last tick.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, mutably.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
}
