//! The [`Client`]: connects over a [`ClientTransport`], proves in the handshake that it
//! was built with the server's replicated types, then applies what the server
//! replicates and exposes the objects with their types.

use super::ownership::{OwnershipChange, OwnershipNotice, OwnershipTracker};
use super::stats::StatsTracker;
use super::time::ClientTime;
use super::{
    CLOSE_LINGER, CONTROL_TAG, Control, DEFAULT_ACK_TIMEOUT, DEFAULT_KEEP_ALIVE_INTERVAL,
    DEFAULT_MAX_PACKET_BYTES, DisconnectReason, FacadeError, HELLO_RESEND, Liveness, NetStats,
    PROTOCOL_VERSION, RefusalLog,
};
use crate::bits::{BitReader, BitWriter};
use crate::blob::DeliveryMode;
use crate::connection::{Connection, ConnectionConfig, MAX_HEADER_BITS};
use crate::handle::{Handle, HandleOf, NetRefHandle};
use crate::protocol::{ProtocolIndex, ProtocolRegistry};
use crate::replication::attachment::{MessageError, MessageInfo, ReceivedMessage};
use crate::replication::{
    ClientObject, ClientWorld, ReplicationClient, ReplicationConfig, ReplicationEvent,
};
use crate::state::{ChangeMask, MemberKey, Replicated};
use crate::stream::{StreamKey, WriteResult};
use crate::time::wire::ClientTimeStream;
use crate::time::{Interpolate, InterpolationStats, NetInput, Sampled, Tick, TimeConfig};
#[cfg(feature = "udp")]
use crate::transport::udp::{ConnectToken, UdpClientTransport};
use crate::transport::{ClientTransport, ClientTransportEvent};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Settings of a [`Client`].
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The replication core's settings.
    pub replication: ReplicationConfig,
    /// The connection's settings (`protocol_tag` must equal the server's).
    pub connection: ConnectionConfig,
    /// Largest packet sent, in bytes (default [`DEFAULT_MAX_PACKET_BYTES`]).
    pub max_packet_bytes: usize,
    /// Give up when the server has not answered the hello within this time, counted
    /// from the transport connection (default 5 s).
    pub handshake_timeout: Duration,
    /// Local address to bind for [`Client::connect`]; by default any address of the
    /// server's family, port 0.
    pub bind_addr: Option<SocketAddr>,
    /// Once connected, give up when none of the client's packets was acknowledged
    /// for this long ([`DisconnectReason::AckTimedOut`]; default
    /// [`DEFAULT_ACK_TIMEOUT`](super::DEFAULT_ACK_TIMEOUT), 5 s).
    pub ack_timeout: Duration,
    /// An empty ack-eliciting packet is sent when the client sent none for this long
    /// (default [`DEFAULT_KEEP_ALIVE_INTERVAL`](super::DEFAULT_KEEP_ALIVE_INTERVAL)).
    pub keep_alive_interval: Duration,
    /// The time model. Its `tick_rate` is only used until the server's first packet,
    /// which carries the server's rate.
    pub time: TimeConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            replication: ReplicationConfig::default(),
            connection: ConnectionConfig::default(),
            max_packet_bytes: DEFAULT_MAX_PACKET_BYTES,
            handshake_timeout: Duration::from_secs(5),
            bind_addr: None,
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            keep_alive_interval: DEFAULT_KEEP_ALIVE_INTERVAL,
            time: TimeConfig::default(),
        }
    }
}

/// Where a [`Client`] is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// The transport is connecting (netcode's handshake).
    Connecting,
    /// The transport is connected; the replication hello awaits an answer.
    Handshaking,
    /// Accepted: objects replicate.
    Connected,
    /// The connection ended; the client stays in this state.
    Disconnected(DisconnectReason),
}

/// Something that happened on a [`Client`], drained with [`Client::poll_event`] or
/// [`Client::events`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The server accepted this client.
    Connected,
    /// The connection ended (or was refused).
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
    /// An object was created from the network; see [`Client::get`].
    Spawned {
        /// Its handle.
        handle: NetRefHandle,
        /// Its type's wire index.
        protocol: ProtocolIndex,
    },
    /// Members of an object changed (notify hooks already ran).
    Changed {
        /// The object.
        handle: NetRefHandle,
        /// The members applied.
        mask: ChangeMask,
    },
    /// An object was destroyed.
    Destroyed {
        /// Its handle.
        handle: NetRefHandle,
    },
    /// Another replication event (torn-off objects, tags, resolved references, errors).
    Replication(ReplicationEvent),
    /// This client owns an object now (the server called
    /// [`Server::set_owner`](crate::Server::set_owner) with it), or its role changed
    /// while it owns it. Raised once the object exists here (after its
    /// [`Spawned`](Self::Spawned)), see [`Client::is_owned`].
    OwnershipGained {
        /// The root object.
        handle: NetRefHandle,
        /// Whether this client controls it (its `AutonomousOnly` members come here).
        autonomous: bool,
    },
    /// This client no longer owns an object that still exists here. An object that is
    /// destroyed or torn off raises its [`Destroyed`](Self::Destroyed) or
    /// [`Replication`](Self::Replication) event instead (preceded by this one only when
    /// the server's notice arrives in an earlier packet than the destroy).
    OwnershipLost {
        /// The root object.
        handle: NetRefHandle,
    },
}

impl ClientEvent {
    /// The object the event is about, if any.
    pub fn handle(&self) -> Option<NetRefHandle> {
        match self {
            Self::Spawned { handle, .. }
            | Self::Changed { handle, .. }
            | Self::Destroyed { handle }
            | Self::OwnershipGained { handle, .. }
            | Self::OwnershipLost { handle } => Some(*handle),
            Self::Replication(
                ReplicationEvent::Spawned { handle, .. }
                | ReplicationEvent::MembersChanged { handle, .. }
                | ReplicationEvent::ReferencesResolved { handle, .. }
                | ReplicationEvent::Destroyed { handle }
                | ReplicationEvent::TornOff { handle }
                | ReplicationEvent::TagsChanged { handle }
                | ReplicationEvent::ObjectError { handle, .. },
            ) => Some(*handle),
            Self::Connected | Self::Disconnected { .. } => None,
        }
    }
}

/// Which members of an object of type `T` changed: the typed form of
/// [`ClientEvent::Changed`], from [`Client::changed`] or [`Client::changes`]. Test
/// members with the member key constants the derive generates (`Player::HEALTH`).
pub struct Changes<T> {
    handle: Handle<T>,
    mask: ChangeMask,
}

impl<T: Replicated> Changes<T> {
    /// The object.
    pub fn handle(&self) -> Handle<T> {
        self.handle
    }

    /// Whether `member` was applied.
    pub fn contains(&self, member: MemberKey<T>) -> bool {
        self.mask.contains(member)
    }

    /// The members applied, in declaration order.
    pub fn members(&self) -> impl Iterator<Item = MemberKey<T>> + '_ {
        T::descriptor()
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| self.mask.any_in(m.change_mask_offset, m.change_mask_bits))
            .map(|(i, _)| MemberKey::new(i))
    }

    /// The change mask itself (offset 0 is the first member of `T`).
    pub fn mask(&self) -> &ChangeMask {
        &self.mask
    }
}

impl<T> Clone for Changes<T> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle,
            mask: self.mask.clone(),
        }
    }
}

impl<T> PartialEq for Changes<T> {
    fn eq(&self, other: &Self) -> bool {
        self.handle == other.handle && self.mask == other.mask
    }
}

impl<T: Replicated> std::fmt::Debug for Changes<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes")
            .field("handle", &self.handle)
            .field(
                "members",
                &self.members().map(|m| m.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl From<ReplicationEvent> for ClientEvent {
    fn from(e: ReplicationEvent) -> Self {
        match e {
            ReplicationEvent::Spawned { handle, protocol } => Self::Spawned { handle, protocol },
            ReplicationEvent::MembersChanged { handle, mask }
            | ReplicationEvent::ReferencesResolved { handle, mask } => {
                Self::Changed { handle, mask }
            }
            ReplicationEvent::Destroyed { handle } => Self::Destroyed { handle },
            other => Self::Replication(other),
        }
    }
}

/// A replication client over a transport (netcode.io over UDP by default).
///
/// One [`tick`](Self::tick) per frame receives and applies what the server sent,
/// answers with acks, and queues events. Read replicated objects with
/// [`get`](Self::get).
///
/// ```no_run
/// use replicate::{Client, ClientEvent, Replicated};
/// use replicate::transport::udp::ConnectToken;
/// use std::time::Instant;
///
/// #[derive(Replicated, Debug, Default)]
/// #[net(name = "docs::client::Score")] // unique among the crate's doc tests
/// struct Score { points: u32 }
///
/// # fn token_from_backend() -> ConnectToken {
/// #     let issuer = replicate::transport::udp::ConnectTokenIssuer::with_random_key(1);
/// #     issuer.issue(1, vec!["127.0.0.1:5000".parse().unwrap()], 30, 5).unwrap()
/// # }
/// let token: ConnectToken = token_from_backend(); // e.g. over HTTPS, ConnectToken::read
/// let mut client = Client::connect(token, Default::default()).unwrap();
/// let start = Instant::now();
/// while !client.is_disconnected() {
///     client.tick(start.elapsed()).unwrap();
///     for event in client.events() {
///         match event {
///             ClientEvent::Changed { handle, .. } => {
///                 if let Some(score) = client.get::<Score>(handle) { println!("{}", score.points); }
///             }
///             ClientEvent::Disconnected { reason } => eprintln!("{reason}"),
///             _ => {}
///         }
///     }
///     std::thread::sleep(std::time::Duration::from_millis(16));
/// }
/// ```
pub struct Client<T: ClientTransport = crate::transport::DefaultClientTransport> {
    transport: T,
    replication: ReplicationClient,
    registry_hash: u64,
    config: ClientConfig,
    connection: Connection,
    state: ClientState,
    events: VecDeque<ClientEvent>,
    stats: StatsTracker,
    handshake_started: Duration,
    last_hello: Option<Duration>,
    now: Duration,
    liveness: Liveness,
    refusals: RefusalLog,
    /// After closing for a reason the server must learn: the close frame, repeated
    /// until the transport is closed at the given time.
    closing: Option<(Duration, Vec<u8>)>,
    time: ClientTime,
    /// The time stream (tick, clock echoes, inputs), after the built-in streams.
    time_stream: StreamKey<ClientTimeStream>,
    /// What the server says this client owns.
    ownership: OwnershipTracker,
    /// Ownership notices taken by the message handler, not yet given to `ownership`.
    notices: Arc<Mutex<Vec<OwnershipNotice>>>,
}

impl<T: ClientTransport> std::fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("state", &self.state)
            .field("objects", &self.replication.len())
            .finish()
    }
}

#[cfg(feature = "udp")]
impl Client<UdpClientTransport> {
    /// Connects over netcode.io UDP with a connect token from the backend (or from
    /// [`ConnectTokenIssuer`](crate::transport::udp::ConnectTokenIssuer) for local
    /// play), with every `#[derive(Replicated)]` type linked into the program.
    pub fn connect(token: ConnectToken, config: ClientConfig) -> Result<Self, FacadeError> {
        let bind = config.bind_addr.unwrap_or_else(|| {
            let v6 = token
                .server_addresses
                .iter()
                .flatten()
                .next()
                .is_some_and(SocketAddr::is_ipv6);
            if v6 {
                SocketAddr::from(([0u16; 8], 0))
            } else {
                SocketAddr::from(([0, 0, 0, 0], 0))
            }
        });
        let transport = UdpClientTransport::connect(bind, token)?;
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        Self::new(transport, registry, config)
    }
}

impl<T: ClientTransport> Client<T> {
    /// A client on any transport, for the types in `registry` (must equal the
    /// server's, or the server refuses it).
    pub fn new(
        transport: T,
        registry: Arc<ProtocolRegistry>,
        config: ClientConfig,
    ) -> Result<Self, FacadeError> {
        let max = config.max_packet_bytes;
        if max * 8 < MAX_HEADER_BITS + 64 || max > transport.max_payload_bytes() {
            return Err(FacadeError::Config(format!(
                "max_packet_bytes = {max} must be in {}..={}",
                (MAX_HEADER_BITS + 64).div_ceil(8),
                transport.max_payload_bytes()
            )));
        }
        if config.connection.protocol_tag == CONTROL_TAG {
            return Err(FacadeError::Config(format!(
                "connection.protocol_tag must not be {CONTROL_TAG:#04x} (the control frame tag)"
            )));
        }
        config.time.validate().map_err(FacadeError::Config)?;
        let mut replication = ReplicationClient::new(registry.clone(), config.replication.clone());
        // The time stream follows the built-in streams (the server adds its end at the
        // same position when it accepts the client).
        let time_stream = replication
            .add_stream(ClientTimeStream::new(&config.time))
            .map_err(|e| FacadeError::Config(e.to_string()))?;
        let notices = Arc::new(Mutex::new(Vec::new()));
        let queue = notices.clone();
        // A registry built without the notice type (not from `inventory`) cannot
        // receive ownership; the server's cannot send it either.
        let _ = replication.on_message(move |n: OwnershipNotice, _info, _world| {
            queue.lock().unwrap_or_else(|p| p.into_inner()).push(n);
        });
        Ok(Self {
            transport,
            registry_hash: registry.hash(),
            replication,
            time: ClientTime::new(config.time.clone()),
            time_stream,
            connection: Connection::new(config.connection.clone()),
            config,
            state: ClientState::Connecting,
            events: VecDeque::new(),
            stats: StatsTracker::default(),
            handshake_started: Duration::ZERO,
            last_hello: None,
            now: Duration::ZERO,
            liveness: Liveness::new(Duration::ZERO),
            refusals: RefusalLog::default(),
            closing: None,
            ownership: OwnershipTracker::default(),
            notices,
        })
    }

    /// One frame: receive and apply, handshake and timeouts, acks. `now` is a
    /// monotonic time since an arbitrary epoch. Errors only on a transport failure.
    pub fn tick(&mut self, now: Duration) -> Result<(), FacadeError> {
        self.now = now;
        if matches!(self.state, ClientState::Disconnected(_)) {
            self.linger(now)?;
            return Ok(());
        }
        self.transport.update(now)?;
        while let Some(event) = self.transport.poll_event() {
            match event {
                ClientTransportEvent::Connected => {
                    if self.state == ClientState::Connecting {
                        self.state = ClientState::Handshaking;
                        self.handshake_started = now;
                        self.send_hello();
                    }
                }
                ClientTransportEvent::Disconnected(reason) => {
                    self.end(DisconnectReason::from_transport(reason, false), false);
                }
                ClientTransportEvent::Payload(payload) => self.receive(&payload),
            }
            if matches!(self.state, ClientState::Disconnected(_)) {
                return Ok(());
            }
        }
        match self.state {
            ClientState::Handshaking => {
                if now.saturating_sub(self.handshake_started) >= self.config.handshake_timeout {
                    self.end(DisconnectReason::HandshakeTimedOut, true);
                } else if self
                    .last_hello
                    .is_none_or(|t| now.saturating_sub(t) >= HELLO_RESEND)
                {
                    self.send_hello();
                }
            }
            ClientState::Connected => {
                if self
                    .liveness
                    .timed_out(now, &self.connection, self.config.ack_timeout)
                {
                    tracing::warn!("client: closing: {}", DisconnectReason::AckTimedOut);
                    self.close(DisconnectReason::AckTimedOut);
                } else {
                    self.flush();
                    let refused = self.replication.message_stats().rejected;
                    self.stats.stats.messages_refused = refused;
                    self.refusals.report(now, refused, format_args!("client"));
                }
            }
            _ => {}
        }
        if let Some(stream) = self.replication.stream_mut(self.time_stream) {
            let tick_seconds = stream.tick_seconds();
            self.time
                .update(&mut stream.clock, tick_seconds, now.as_secs_f64());
        }
        let events = self.replication.drain_events();
        self.push_events(events);
        let connection = (self.state == ClientState::Connected).then_some(&self.connection);
        self.stats.update(now, connection);
        Ok(())
    }

    fn send_hello(&mut self) {
        self.last_hello = Some(self.now);
        let hello = Control::Hello {
            version: PROTOCOL_VERSION,
            registry_hash: self.registry_hash,
        }
        .encode();
        self.send_raw(&hello);
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        match self.transport.send(bytes) {
            Ok(()) => self.stats.on_send(bytes.len()),
            Err(e) => tracing::debug!("client: send failed: {e}"),
        }
    }

    fn accept(&mut self) {
        if self.state == ClientState::Handshaking {
            self.state = ClientState::Connected;
            self.liveness = Liveness::new(self.now);
            self.events.push_back(ClientEvent::Connected);
        }
    }

    /// Closes the connection for `reason` and tells the server why (a close frame,
    /// repeated for a short linger before the transport is closed).
    fn close(&mut self, reason: DisconnectReason) {
        if matches!(self.state, ClientState::Disconnected(_)) {
            return;
        }
        let frame = Control::Close {
            code: reason.close_code(),
        }
        .encode();
        self.send_raw(&frame);
        self.closing = Some((self.now + CLOSE_LINGER, frame));
        self.end(reason, false);
    }

    /// While closing: keep the transport going, answer what the server still sends
    /// with the close frame, and close the transport when the linger is over.
    fn linger(&mut self, now: Duration) -> Result<(), FacadeError> {
        let Some((until, frame)) = self.closing.take() else {
            return Ok(());
        };
        if now >= until {
            self.transport.disconnect();
            return Ok(());
        }
        self.transport.update(now)?;
        let mut answer = false;
        while let Some(event) = self.transport.poll_event() {
            match event {
                ClientTransportEvent::Payload(_) => answer = true,
                ClientTransportEvent::Disconnected(_) => return Ok(()),
                ClientTransportEvent::Connected => {}
            }
        }
        if answer {
            self.send_raw(&frame);
        }
        self.closing = Some((until, frame));
        Ok(())
    }

    /// Ends the connection with `reason` (once); `close` also closes the transport.
    fn end(&mut self, reason: DisconnectReason, close: bool) {
        if matches!(self.state, ClientState::Disconnected(_)) {
            return;
        }
        if close {
            self.transport.disconnect();
        }
        self.connection.discard_in_flight();
        while let Some((seq, status)) = self.connection.poll_delivery() {
            self.replication.process_delivery(seq, status);
        }
        self.state = ClientState::Disconnected(reason);
        let events = self.replication.drain_events();
        self.push_events(events);
        self.events.push_back(ClientEvent::Disconnected { reason });
    }

    fn receive(&mut self, payload: &[u8]) {
        self.stats.on_receive(payload.len());
        if payload.first() == Some(&CONTROL_TAG) {
            match Control::decode(payload, self.registry_hash) {
                Some(Control::Welcome) => self.accept(),
                Some(Control::Refuse { reason }) => {
                    tracing::warn!("refused by the server: {reason}");
                    self.end(reason, true);
                }
                Some(Control::Close { code }) => {
                    let reason = DisconnectReason::from_close_code(code, true);
                    tracing::warn!("the server closed the connection: {reason}");
                    self.end(reason, true);
                }
                _ => self.stats.on_reject(),
            }
            return;
        }
        // A replication packet means the server accepted us (its welcome may be lost).
        self.accept();
        if self.state != ClientState::Connected {
            self.stats.on_reject();
            return;
        }
        let mut r = BitReader::new(payload);
        let header = self.connection.read_header(self.now, &mut r);
        if self.liveness.header_is_fatal(&header) {
            if let Err(e) = header {
                tracing::warn!("client: unreadable packet header, closing: {e}");
            }
            self.stats.on_reject();
            self.close(DisconnectReason::ReadError);
            return;
        }
        match header {
            Ok(seq) => {
                self.set_stream_now();
                let seen = self.time.newest_tick;
                if let Err(e) = self.replication.read_packet(self.now, seq, &mut r) {
                    // The packet is already acknowledged (see the module docs): close.
                    tracing::warn!("client: unreadable packet, closing: {e}");
                    self.stats.on_reject();
                    self.close(DisconnectReason::ReadError);
                }
                let tick = self
                    .replication
                    .stream_mut(self.time_stream)
                    .and_then(ClientTimeStream::take_packet_tick);
                let events = self.replication.drain_events();
                self.time
                    .on_packet(self.replication.world(), tick, seen, &events);
                self.push_events(events);
            }
            Err(e) => {
                if !e.is_benign() {
                    tracing::debug!("client: rejected packet: {e}");
                }
                self.stats.on_reject();
            }
        }
    }

    /// Queues replication events for game code, with the ownership changes they and
    /// the ownership notices received meanwhile make.
    fn push_events(&mut self, events: Vec<ReplicationEvent>) {
        let notices = std::mem::take(&mut *self.notices.lock().unwrap_or_else(|p| p.into_inner()));
        for n in notices {
            self.ownership.on_notice(n);
        }
        for e in events {
            match &e {
                ReplicationEvent::Spawned { handle, .. } => self.ownership.on_spawned(*handle),
                ReplicationEvent::Destroyed { handle } | ReplicationEvent::TornOff { handle } => {
                    self.ownership.on_gone(*handle)
                }
                _ => {}
            }
            self.events.push_back(e.into());
        }
        for change in self.ownership.settle(self.replication.world()) {
            self.events.push_back(match change {
                OwnershipChange::Gained(handle, autonomous) => {
                    ClientEvent::OwnershipGained { handle, autonomous }
                }
                OwnershipChange::Lost(handle) => ClientEvent::OwnershipLost { handle },
            });
        }
    }

    fn set_stream_now(&mut self) {
        let now = self.now.as_secs_f64();
        if let Some(stream) = self.replication.stream_mut(self.time_stream) {
            stream.set_now(now);
        }
    }

    fn flush(&mut self) {
        let now = self.now;
        self.set_stream_now();
        self.replication.update(now);
        self.connection.update(now);
        while let Some((seq, status)) = self.connection.poll_delivery() {
            self.replication.process_delivery(seq, status);
        }
        let mut w = BitWriter::with_capacity_bytes(self.config.max_packet_bytes);
        let seq = self.connection.write_header(now, &mut w);
        let sent = match self.replication.write_packet(seq, &mut w) {
            WriteResult::NoData => {
                self.connection.cancel_header(seq);
                false
            }
            _ => match w.finish() {
                Ok(bytes) => {
                    self.send_raw(&bytes);
                    true
                }
                Err(e) => {
                    tracing::warn!("client: packet overflow: {e}");
                    false
                }
            },
        };
        if sent {
            self.liveness.last_eliciting = now;
        } else if self
            .liveness
            .keep_alive_due(now, self.config.keep_alive_interval)
        {
            // Nothing to send for a while: an empty packet the server must ack.
            let mut w = BitWriter::with_capacity_bytes(MAX_HEADER_BITS.div_ceil(8));
            self.connection.write_header(now, &mut w);
            if let Ok(bytes) = w.finish() {
                self.send_raw(&bytes);
            }
            self.liveness.last_eliciting = now;
        } else if self.connection.needs_ack() {
            let (_, bytes) = self.connection.ack_only_packet(now);
            self.send_raw(&bytes);
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Takes every queued event. The iterator owns them, so `self` stays free to use
    /// while handling them (`for e in client.events() { client.get(..) }`).
    pub fn events(&mut self) -> std::collections::vec_deque::IntoIter<ClientEvent> {
        std::mem::take(&mut self.events).into_iter()
    }

    /// A replicated object as its concrete type: by a typed [`Handle`] (the type is
    /// inferred) or by a [`NetRefHandle`] with the type named (`get::<Door>(raw)`;
    /// `None` when the object is of another type or not here).
    pub fn get<O: Replicated>(&self, handle: impl HandleOf<O>) -> Option<&O> {
        self.replication.get(handle.to_raw())
    }

    /// The typed handle of a replicated object of type `O`; `None` when `handle`
    /// names no object here or one of another type.
    ///
    /// ```
    /// # use replicate::{Client, ClientEvent, Handle, Replicated};
    /// # #[derive(Replicated, Debug, Default)]
    /// # #[net(name = "docs::client_handle::Door")]
    /// # struct Door { open: bool }
    /// fn on_event<T: replicate::transport::ClientTransport>(client: &Client<T>, event: &ClientEvent) {
    ///     if let ClientEvent::Spawned { handle, .. } = *event
    ///         && let Some(door) = client.handle::<Door>(handle)
    ///     {
    ///         let door: Handle<Door> = door;
    ///         println!("a door, open: {}", client.get(door).unwrap().open);
    ///     }
    /// }
    /// ```
    pub fn handle<O: Replicated>(&self, handle: NetRefHandle) -> Option<Handle<O>> {
        let world = self.replication.world();
        let protocol = world.registry().index_of::<O>()?;
        (world.object(handle)?.protocol() == protocol).then(|| Handle::from_raw_unchecked(handle))
    }

    /// The typed changes of objects of type `O` among `events`: one [`Changes`] per
    /// [`ClientEvent::Changed`] of an object of type `O` that is still here (an object
    /// destroyed in the same tick is skipped: its type is no longer known).
    ///
    /// ```no_run
    /// # use replicate::{Client, ClientEvent, Replicated};
    /// #[derive(Replicated, Debug, Default)]
    /// #[net(name = "docs::client_changed::Player")]
    /// struct Player { health: u8, ammo: u16 }
    ///
    /// # fn frame(client: &mut Client) {
    /// let events: Vec<ClientEvent> = client.events().collect();
    /// for changes in client.changed::<Player>(&events) {
    ///     if changes.contains(Player::HEALTH) {
    ///         let player = client.get(changes.handle()).unwrap();
    ///         println!("health {}", player.health);
    ///     }
    /// }
    /// # }
    /// ```
    pub fn changed<'a, O: Replicated>(
        &'a self,
        events: &'a [ClientEvent],
    ) -> impl Iterator<Item = Changes<O>> + 'a {
        events.iter().filter_map(|e| self.changes(e))
    }

    /// The typed form of one event: `Some` for a [`ClientEvent::Changed`] of an object
    /// of type `O` that is here.
    pub fn changes<O: Replicated>(&self, event: &ClientEvent) -> Option<Changes<O>> {
        let ClientEvent::Changed { handle, mask } = event else {
            return None;
        };
        Some(Changes {
            handle: self.handle::<O>(*handle)?,
            mask: mask.clone(),
        })
    }

    /// The objects of type `O` spawned among `events` that are still here.
    pub fn spawned<'a, O: Replicated>(
        &'a self,
        events: &'a [ClientEvent],
    ) -> impl Iterator<Item = Handle<O>> + 'a {
        events.iter().filter_map(|e| match e {
            ClientEvent::Spawned { handle, .. } => self.handle::<O>(*handle),
            _ => None,
        })
    }

    /// Whether this client owns an object that is here (the server made it its owner
    /// with [`Server::set_owner`](crate::Server::set_owner)); a subobject is owned
    /// with its root object.
    ///
    /// The server tells each client what it owns with a reliable message when the
    /// owner changes (see [`ClientEvent::OwnershipGained`] and
    /// [`ClientEvent::OwnershipLost`]). A notice that arrives before its object is
    /// kept until the object is spawned here, so `is_owned` is true from the
    /// [`Spawned`](ClientEvent::Spawned) event on when the object was owned at its
    /// creation. An object that is destroyed here stops being owned; if it comes back
    /// into scope it is owned again.
    ///
    /// ```no_run
    /// # use replicate::{Client, ClientEvent};
    /// # fn frame(client: &mut Client) {
    /// for event in client.events() {
    ///     match event {
    ///         ClientEvent::OwnershipGained { handle, autonomous } => {
    ///             assert!(client.is_owned(handle));
    ///             println!("{handle} is mine (I control it: {autonomous})");
    ///         }
    ///         ClientEvent::OwnershipLost { handle } => assert!(!client.is_owned(handle)),
    ///         _ => {}
    ///     }
    /// }
    /// let mine = client.owned_objects();
    /// # }
    /// ```
    pub fn is_owned(&self, handle: impl Into<NetRefHandle>) -> bool {
        self.owner_role(handle.into()).is_some()
    }

    /// Whether this client owns an object that is here and controls it (the server
    /// set it autonomous).
    pub fn is_autonomous(&self, handle: impl Into<NetRefHandle>) -> bool {
        self.owner_role(handle.into()) == Some(true)
    }

    /// The root objects here that this client owns, in handle order.
    pub fn owned_objects(&self) -> Vec<NetRefHandle> {
        self.ownership.owned()
    }

    fn owner_role(&self, handle: NetRefHandle) -> Option<bool> {
        let object = self.replication.world().object(handle)?;
        self.ownership.owns(object.owner().unwrap_or(handle))
    }

    /// Sends a message (any registered replicated type) to the server. Messages sent
    /// before the server accepted this client wait for the connection.
    pub fn send_message<M: Replicated>(
        &mut self,
        message: &M,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        self.replication.send_message(message, mode)
    }

    /// Sends a message targeting a replicated object (an RPC) to the server.
    pub fn send_object_message<M: Replicated>(
        &mut self,
        object: impl Into<NetRefHandle>,
        message: &M,
        mode: DeliveryMode,
    ) -> Result<(), MessageError> {
        self.replication
            .send_object_message(object.into(), message, mode)
    }

    /// Takes the messages received from the server that no handler took, in the order
    /// they executed. Read them with [`ReceivedMessage::get`] / [`ReceivedMessage::take`].
    pub fn receive_messages(&mut self) -> Vec<ReceivedMessage> {
        self.replication.drain_messages()
    }

    /// Runs `handler` for every message of type `M` from the server when it executes,
    /// during [`tick`](Self::tick): a reliable message before the state of its packet
    /// is applied (so the handler sees the objects as they were), an unreliable one
    /// after it. See [`ReplicationClient::on_message`] for the exact rules and
    /// [`AttachmentConfig::reliable_before_state`](crate::replication::attachment::AttachmentConfig::reliable_before_state)
    /// to turn the "before" off.
    pub fn on_message<M: Replicated>(
        &mut self,
        handler: impl FnMut(M, MessageInfo, &mut ClientWorld) + Send + 'static,
    ) -> Result<(), MessageError> {
        self.replication.on_message(handler)
    }

    /// Every replicated object (handle, type, last received state).
    pub fn objects(&self) -> impl Iterator<Item = &ClientObject> {
        self.replication.world().objects()
    }

    /// Number of replicated objects.
    pub fn object_count(&self) -> usize {
        self.replication.len()
    }

    /// The client's world (objects, torn-off objects, reader statistics).
    pub fn world(&self) -> &ClientWorld {
        self.replication.world()
    }

    /// The replication core (extra streams, static objects).
    ///
    /// Unstable: an escape hatch into the internal layers, for the project's tests and
    /// tools; not covered by semantic versioning.
    #[doc(hidden)]
    pub fn replication(&self) -> &ReplicationClient {
        &self.replication
    }

    /// The replication core, mutably.
    ///
    /// Unstable: an escape hatch into the internal layers, for the project's tests and
    /// tools; not covered by semantic versioning.
    #[doc(hidden)]
    pub fn replication_mut(&mut self) -> &mut ReplicationClient {
        &mut self.replication
    }

    /// Where the client is.
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// Whether the server accepted this client and the connection is open.
    pub fn is_connected(&self) -> bool {
        self.state == ClientState::Connected
    }

    /// Whether the connection ended.
    pub fn is_disconnected(&self) -> bool {
        matches!(self.state, ClientState::Disconnected(_))
    }

    /// Why the connection ended, once it has.
    pub fn disconnect_reason(&self) -> Option<DisconnectReason> {
        match self.state {
            ClientState::Disconnected(r) => Some(r),
            _ => None,
        }
    }

    /// Statistics of the connection to the server.
    pub fn stats(&self) -> &NetStats {
        &self.stats.stats
    }

    /// Bits of object batches received so far (framing included), per replicated type
    /// name (the types received at all), largest first: where the bandwidth goes.
    pub fn bits_per_type(&self) -> Vec<(&'static str, u64)> {
        let world = self.replication.world();
        super::stats::bits_by_type_name(world.registry(), &world.stats().bits_per_type)
    }

    /// The sans-IO connection (acks, RTT, loss counters).
    ///
    /// Unstable: an escape hatch into the internal layers, for the project's tests and
    /// tools; not covered by semantic versioning.
    #[doc(hidden)]
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The hash of the replicated types, sent to the server in the hello.
    pub fn registry_hash(&self) -> u64 {
        self.registry_hash
    }

    /// Closes the connection (the server sees [`DisconnectReason::ClosedByClient`]).
    pub fn disconnect(&mut self) {
        if self.closing.take().is_some() {
            // Already closed for a reason; stop lingering.
            self.transport.disconnect();
            return;
        }
        self.end(DisconnectReason::ClosedByClient, true);
    }

    /// The server tick of the newest packet received (see [`crate::time`]).
    pub fn last_received_tick(&self) -> Option<Tick> {
        self.time.newest_tick
    }

    /// The server tick of the last update applied to an object (its creation or a
    /// change).
    pub fn object_tick(&self, handle: impl Into<NetRefHandle>) -> Option<Tick> {
        self.time.object_tick(handle.into())
    }

    /// The estimated server time now (server tick `n` is `n / tick_rate`), once a
    /// packet was timed: clock synchronisation from packet timing, see
    /// [`ClockSync`](crate::time::ClockSync).
    pub fn estimated_server_time(&self) -> Option<Duration> {
        let t = self.time.server_time(self.now.as_secs_f64())?;
        Duration::try_from_secs_f64(t.max(0.0)).ok()
    }

    /// The server tick being simulated now, as estimated.
    pub fn server_tick(&self) -> Option<Tick> {
        let t = self.time.server_time(self.now.as_secs_f64())?;
        let tick = (t / self.time.tick_seconds()).floor();
        (tick >= 0.0 && tick < f64::from(Tick::MAX)).then_some(tick as Tick)
    }

    /// The server time interpolated objects are presented at: estimated server time
    /// minus [`interpolation_delay`](Self::interpolation_delay).
    pub fn interpolation_time(&self) -> Option<Duration> {
        let t = self.time.interpolation_time(self.now.as_secs_f64())?;
        Duration::try_from_secs_f64(t.max(0.0)).ok()
    }

    /// The current interpolation delay: two ticks (one between states, one lost
    /// packet), the largest one-way delay of the synchronisation window and
    /// [`TimeConfig::interpolation_margin`]; it follows the measured delays slowly.
    pub fn interpolation_delay(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.time.delay()?).ok()
    }

    /// Interpolates objects of type `O` from now on: the client keeps their last
    /// received states and [`interpolated`](Self::interpolated) presents them at
    /// [`interpolation_time`](Self::interpolation_time).
    pub fn interpolate<O: Replicated + Interpolate + Send>(&mut self) {
        self.time.interpolate::<O>();
    }

    /// An interpolated object's state at [`interpolation_time`](Self::interpolation_time),
    /// with how it was obtained; `None` when `O` is not interpolated (see
    /// [`interpolate`](Self::interpolate)), the object has no state yet or the clock is
    /// not synchronised. Counted in [`interpolation_stats`](Self::interpolation_stats).
    pub fn interpolated<O: Replicated + Interpolate + Send>(
        &mut self,
        handle: impl HandleOf<O>,
    ) -> Option<Sampled<O>> {
        self.time
            .sample::<O>(handle.to_raw(), self.now.as_secs_f64())
    }

    /// How the values [`interpolated`](Self::interpolated) returned were obtained.
    pub fn interpolation_stats(&self) -> InterpolationStats {
        self.time.stats
    }

    /// The tick the next input should be for: the estimated server tick plus the
    /// largest one-way delay to the server in the window plus
    /// [`TimeConfig::input_margin`], so it arrives before the server simulates it.
    /// `None` until the clock has settled (about a second of round trips after the
    /// first packet): inputs sent earlier could arrive late.
    pub fn input_tick(&self) -> Option<Tick> {
        self.time.input_tick(self.now.as_secs_f64())
    }

    /// Queues the input for server tick `tick` ([`input_tick`](Self::input_tick)); it
    /// rides in every packet until [`TimeConfig::input_redundancy`] newer inputs
    /// replaced it. Returns false when the input is too large or `tick` is not after
    /// the previous input's.
    pub fn send_input<I: NetInput>(&mut self, tick: Tick, input: &I) -> bool {
        let Some(bytes) = crate::time::input_encode(input) else {
            return false;
        };
        self.replication
            .stream_mut(self.time_stream)
            .is_some_and(|s| s.push_input(tick, bytes))
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, mutably.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }
}
