//! UDP secured with netcode.io, through the `renetcode` crate.
//!
//! netcode.io gives every connection: connect tokens issued by a trusted backend
//! (the client cannot forge one), encryption and authentication of every packet
//! (ChaCha20-Poly1305), and replay protection. Packets from unknown addresses, with a
//! bad MAC, or replayed, are dropped before they reach replication.
//!
//! ```no_run
//! use replicate::transport::udp::{ConnectTokenIssuer, UdpClientTransport, UdpServerConfig, UdpServerTransport};
//! use replicate::transport::{ClientTransport, ServerTransport};
//! use std::time::Duration;
//!
//! // The backend (here: the same process) owns the private key and issues tokens.
//! let issuer = ConnectTokenIssuer::with_random_key(0x5EED);
//! let mut server = UdpServerTransport::bind("127.0.0.1:0", UdpServerConfig::secure(&issuer, 64)).unwrap();
//! let token = issuer.issue(42, vec![server.local_addr()], 30, 5).unwrap();
//! let mut client = UdpClientTransport::connect("127.0.0.1:0", token).unwrap();
//! for ms in 0..100u64 {
//!     let now = Duration::from_millis(ms * 10);
//!     server.update(now).unwrap();
//!     client.update(now).unwrap();
//! }
//! ```

use super::{
    ClientId, ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
    TransportDisconnect, TransportError,
};
use renetcode::{
    ClientAuthentication, DisconnectReason, NETCODE_KEY_BYTES, NETCODE_MAX_PAYLOAD_BYTES,
    NETCODE_USER_DATA_BYTES, NetcodeClient, NetcodeServer, ServerAuthentication, ServerConfig,
    ServerResult,
};
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;

pub use renetcode::ConnectToken;

pub use super::{MAX_CLIENTS, MAX_PAYLOAD_BYTES};
const _: () = assert!(MAX_PAYLOAD_BYTES == NETCODE_MAX_PAYLOAD_BYTES);

/// netcode's clock: connect tokens carry wall-clock expiry times.
fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Issues connect tokens: the matchmaking backend's job.
///
/// For local play, [`with_random_key`](Self::with_random_key) makes a key in process.
/// For a real deployment, the backend keeps the 32-byte private key (shared with the
/// game servers, never with clients), authenticates the player, calls
/// [`issue`](Self::issue) and sends the token to the client over HTTPS
/// ([`ConnectToken::write`] / [`ConnectToken::read`] give its 2048-byte wire form).
#[derive(Clone)]
pub struct ConnectTokenIssuer {
    protocol_id: u64,
    private_key: [u8; NETCODE_KEY_BYTES],
}

impl std::fmt::Debug for ConnectTokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectTokenIssuer")
            .field("protocol_id", &self.protocol_id)
            .finish_non_exhaustive()
    }
}

impl ConnectTokenIssuer {
    /// An issuer with a known key (the deployment's secret).
    pub fn new(protocol_id: u64, private_key: [u8; NETCODE_KEY_BYTES]) -> Self {
        Self {
            protocol_id,
            private_key,
        }
    }

    /// An issuer with a fresh random key, for local play and tests.
    pub fn with_random_key(protocol_id: u64) -> Self {
        Self::new(protocol_id, renetcode::generate_random_bytes())
    }

    /// The application's protocol id (both ends must use the same).
    pub fn protocol_id(&self) -> u64 {
        self.protocol_id
    }

    /// The private key servers need.
    pub fn private_key(&self) -> [u8; NETCODE_KEY_BYTES] {
        self.private_key
    }

    /// A token for `client_id` to connect to one of `servers`, valid for
    /// `expire_seconds`, with a connection timeout of `timeout_seconds`.
    ///
    /// Every parameter is checked (see [`TokenError`]): 1 to 32 distinct, routable
    /// server addresses; `expire_seconds` in `1..=`[`MAX_TOKEN_EXPIRE_SECONDS`];
    /// `timeout_seconds` in `1..=`[`MAX_TOKEN_TIMEOUT_SECONDS`] (netcode.io reads a
    /// negative timeout as "never time out", which a server must not hand out).
    ///
    /// ```
    /// use replicate::transport::udp::{ConnectTokenIssuer, TokenError};
    /// let issuer = ConnectTokenIssuer::with_random_key(1);
    /// let addr = "127.0.0.1:5000".parse().unwrap();
    /// assert!(issuer.issue(7, vec![addr], 30, 5).is_ok());
    /// assert!(matches!(
    ///     issuer.issue(7, vec![addr], u64::MAX, 5),
    ///     Err(TokenError::ExpireOutOfRange { .. })
    /// ));
    /// ```
    pub fn issue(
        &self,
        client_id: ClientId,
        servers: Vec<SocketAddr>,
        expire_seconds: u64,
        timeout_seconds: i32,
    ) -> Result<ConnectToken, TokenError> {
        self.issue_with_user_data(client_id, servers, expire_seconds, timeout_seconds, None)
    }

    /// Like [`issue`](Self::issue), with 256 bytes of user data the server receives
    /// on connect (e.g. an account id).
    pub fn issue_with_user_data(
        &self,
        client_id: ClientId,
        servers: Vec<SocketAddr>,
        expire_seconds: u64,
        timeout_seconds: i32,
        user_data: Option<&[u8; NETCODE_USER_DATA_BYTES]>,
    ) -> Result<ConnectToken, TokenError> {
        validate_token_parameters(&servers, expire_seconds, timeout_seconds)?;
        ConnectToken::generate(
            wall_clock(),
            self.protocol_id,
            expire_seconds,
            client_id,
            timeout_seconds,
            servers,
            user_data,
            &self.private_key,
        )
        .map_err(|e| TokenError::Netcode(e.to_string()))
    }
}

/// Longest validity of a connect token [`ConnectTokenIssuer::issue`] accepts: one day
/// (a token is meant to be used within seconds of being issued).
pub const MAX_TOKEN_EXPIRE_SECONDS: u64 = 24 * 60 * 60;

/// Longest connection timeout [`ConnectTokenIssuer::issue`] accepts: one hour.
pub const MAX_TOKEN_TIMEOUT_SECONDS: i32 = 60 * 60;

/// Most server addresses in one connect token (netcode.io's limit).
pub const MAX_TOKEN_SERVERS: usize = 32;

/// Why [`ConnectTokenIssuer::issue`] refused to make a token.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    /// No server address was given.
    #[error("a connect token needs at least one server address")]
    NoServerAddresses,
    /// More than [`MAX_TOKEN_SERVERS`] server addresses.
    #[error("a connect token names at most {MAX_TOKEN_SERVERS} server addresses, got {0}")]
    TooManyServerAddresses(usize),
    /// The same server address twice.
    #[error("server address {0} is listed twice")]
    DuplicateServerAddress(SocketAddr),
    /// An address no client can reach: unspecified (`0.0.0.0`, `::`) or port 0.
    #[error("server address {0} is not routable (unspecified address or port 0)")]
    UnroutableServerAddress(SocketAddr),
    /// `expire_seconds` is 0 (already expired) or above [`MAX_TOKEN_EXPIRE_SECONDS`]
    /// (a huge value would also wrap the expiry timestamp into the past).
    #[error("expire_seconds = {0} is outside 1..={MAX_TOKEN_EXPIRE_SECONDS}")]
    ExpireOutOfRange(u64),
    /// `timeout_seconds` is not in `1..=`[`MAX_TOKEN_TIMEOUT_SECONDS`] (netcode.io
    /// reads a negative timeout as "never time out").
    #[error("timeout_seconds = {0} is outside 1..={MAX_TOKEN_TIMEOUT_SECONDS}")]
    TimeoutOutOfRange(i32),
    /// netcode.io could not encode the token.
    #[error("netcode: {0}")]
    Netcode(String),
}

impl From<TokenError> for TransportError {
    fn from(e: TokenError) -> Self {
        TransportError::Config(e.to_string())
    }
}

/// The checks of [`ConnectTokenIssuer::issue`], in parameter order.
fn validate_token_parameters(
    servers: &[SocketAddr],
    expire_seconds: u64,
    timeout_seconds: i32,
) -> Result<(), TokenError> {
    if servers.is_empty() {
        return Err(TokenError::NoServerAddresses);
    }
    if servers.len() > MAX_TOKEN_SERVERS {
        return Err(TokenError::TooManyServerAddresses(servers.len()));
    }
    for (i, addr) in servers.iter().enumerate() {
        if addr.ip().is_unspecified() || addr.port() == 0 {
            return Err(TokenError::UnroutableServerAddress(*addr));
        }
        if servers[..i].contains(addr) {
            return Err(TokenError::DuplicateServerAddress(*addr));
        }
    }
    if !(1..=MAX_TOKEN_EXPIRE_SECONDS).contains(&expire_seconds) {
        return Err(TokenError::ExpireOutOfRange(expire_seconds));
    }
    if !(1..=MAX_TOKEN_TIMEOUT_SECONDS).contains(&timeout_seconds) {
        return Err(TokenError::TimeoutOutOfRange(timeout_seconds));
    }
    Ok(())
}

/// How a UDP server authenticates clients.
#[derive(Clone)]
pub enum UdpAuthentication {
    /// Connect tokens signed with this private key (production).
    Secure {
        /// The key shared with the token issuer.
        private_key: [u8; NETCODE_KEY_BYTES],
    },
    /// No tokens: anyone may connect. For prototypes on a trusted network only.
    Unsecure,
}

/// Configuration of a [`UdpServerTransport`].
#[derive(Clone)]
pub struct UdpServerConfig {
    /// The application's protocol id (must match the tokens).
    pub protocol_id: u64,
    /// Most simultaneous clients (at most [`MAX_CLIENTS`]).
    pub max_clients: usize,
    /// Addresses clients are told to connect to; empty means the bound address.
    pub public_addresses: Vec<SocketAddr>,
    /// Authentication mode.
    pub authentication: UdpAuthentication,
}

impl UdpServerConfig {
    /// A secure server accepting tokens from `issuer`.
    pub fn secure(issuer: &ConnectTokenIssuer, max_clients: usize) -> Self {
        Self {
            protocol_id: issuer.protocol_id,
            max_clients,
            public_addresses: Vec::new(),
            authentication: UdpAuthentication::Secure {
                private_key: issuer.private_key,
            },
        }
    }
}

/// A netcode.io server on a non-blocking UDP socket.
pub struct UdpServerTransport {
    socket: UdpSocket,
    netcode: NetcodeServer,
    last_update: Option<Duration>,
    events: VecDeque<ServerTransportEvent>,
    buffer: Box<[u8; 1500]>,
}

impl std::fmt::Debug for UdpServerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpServerTransport")
            .field("local_addr", &self.socket.local_addr().ok())
            .finish()
    }
}

fn map_reason(reason: DisconnectReason) -> TransportDisconnect {
    match reason {
        DisconnectReason::ConnectTokenExpired => TransportDisconnect::TokenExpired,
        DisconnectReason::ConnectionTimedOut
        | DisconnectReason::ConnectionResponseTimedOut
        | DisconnectReason::ConnectionRequestTimedOut => TransportDisconnect::TimedOut,
        DisconnectReason::ConnectionDenied => TransportDisconnect::Denied,
        DisconnectReason::DisconnectedByClient => TransportDisconnect::ByLocal,
        DisconnectReason::DisconnectedByServer => TransportDisconnect::ByPeer,
    }
}

impl UdpServerTransport {
    /// Binds a socket and starts a netcode server on it.
    pub fn bind(addr: impl ToSocketAddrs, config: UdpServerConfig) -> Result<Self, TransportError> {
        if config.max_clients == 0 || config.max_clients > MAX_CLIENTS {
            return Err(TransportError::Config(format!(
                "max_clients must be 1..={MAX_CLIENTS}, got {}",
                config.max_clients
            )));
        }
        let socket = UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        let public_addresses = if config.public_addresses.is_empty() {
            vec![socket.local_addr()?]
        } else {
            config.public_addresses
        };
        let authentication = match config.authentication {
            UdpAuthentication::Secure { private_key } => {
                ServerAuthentication::Secure { private_key }
            }
            UdpAuthentication::Unsecure => ServerAuthentication::Unsecure,
        };
        let netcode = NetcodeServer::new(ServerConfig {
            current_time: wall_clock(),
            max_clients: config.max_clients,
            protocol_id: config.protocol_id,
            public_addresses,
            authentication,
        });
        Ok(Self {
            socket,
            netcode,
            last_update: None,
            events: VecDeque::new(),
            buffer: Box::new([0; 1500]),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Ids of the connected clients.
    pub fn clients(&self) -> Vec<ClientId> {
        self.netcode.clients_id()
    }

    fn send_to(socket: &UdpSocket, addr: SocketAddr, bytes: &[u8]) {
        if let Err(e) = socket.send_to(bytes, addr) {
            tracing::debug!("udp send to {addr} failed: {e}");
        }
    }

    fn handle(
        events: &mut VecDeque<ServerTransportEvent>,
        socket: &UdpSocket,
        result: ServerResult<'_, '_>,
        timeout: bool,
    ) {
        match result {
            ServerResult::None => {}
            ServerResult::PacketToSend { addr, payload } => Self::send_to(socket, addr, payload),
            ServerResult::Payload { client_id, payload } => {
                events.push_back(ServerTransportEvent::Payload {
                    client: client_id,
                    payload: payload.to_vec(),
                })
            }
            ServerResult::ClientConnected {
                client_id,
                addr,
                user_data,
                payload,
            } => {
                Self::send_to(socket, addr, payload);
                events.push_back(ServerTransportEvent::Connected {
                    client: client_id,
                    user_data: user_data.to_vec(),
                });
            }
            ServerResult::ClientDisconnected {
                client_id,
                addr,
                payload,
            } => {
                if let Some(p) = payload {
                    Self::send_to(socket, addr, p);
                }
                let reason = if timeout {
                    TransportDisconnect::TimedOut
                } else {
                    TransportDisconnect::ByPeer
                };
                events.push_back(ServerTransportEvent::Disconnected {
                    client: client_id,
                    reason,
                });
            }
        }
    }
}

impl ServerTransport for UdpServerTransport {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        let delta = self
            .last_update
            .map_or(Duration::ZERO, |last| now.saturating_sub(last));
        self.last_update = Some(now);
        self.netcode.update(delta);
        loop {
            match self.socket.recv_from(&mut self.buffer[..]) {
                Ok((len, addr)) => {
                    let result = self.netcode.process_packet(addr, &mut self.buffer[..len]);
                    Self::handle(&mut self.events, &self.socket, result, false);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // A previous send bounced (ICMP port unreachable): not fatal.
                Err(e) if e.kind() == ErrorKind::ConnectionReset => continue,
                Err(e) => return Err(e.into()),
            }
        }
        for client in self.netcode.clients_id() {
            let result = self.netcode.update_client(client);
            Self::handle(&mut self.events, &self.socket, result, true);
        }
        Ok(())
    }

    fn poll_event(&mut self) -> Option<ServerTransportEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, client: ClientId, payload: &[u8]) -> Result<(), TransportError> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(TransportError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD_BYTES,
            });
        }
        match self.netcode.generate_payload_packet(client, payload) {
            Ok((addr, bytes)) => {
                self.socket.send_to(bytes, addr)?;
                Ok(())
            }
            Err(renetcode::NetcodeError::ClientNotFound) => {
                Err(TransportError::UnknownClient(client))
            }
            Err(e) => Err(TransportError::Netcode(e.to_string())),
        }
    }

    fn disconnect(&mut self, client: ClientId) {
        if let ServerResult::ClientDisconnected { addr, payload, .. } =
            self.netcode.disconnect(client)
        {
            if let Some(p) = payload {
                Self::send_to(&self.socket, addr, p);
            }
            self.events.push_back(ServerTransportEvent::Disconnected {
                client,
                reason: TransportDisconnect::ByLocal,
            });
        }
    }

    fn max_payload_bytes(&self) -> usize {
        MAX_PAYLOAD_BYTES
    }
}

/// A netcode.io client on a non-blocking UDP socket.
pub struct UdpClientTransport {
    socket: UdpSocket,
    netcode: NetcodeClient,
    last_update: Option<Duration>,
    events: VecDeque<ClientTransportEvent>,
    reported_connected: bool,
    reported_disconnected: bool,
    buffer: Box<[u8; 1500]>,
}

impl std::fmt::Debug for UdpClientTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpClientTransport")
            .field("client_id", &self.netcode.client_id())
            .field("connected", &self.netcode.is_connected())
            .finish()
    }
}

impl UdpClientTransport {
    /// Binds `bind_addr` (e.g. `"127.0.0.1:0"`) and starts connecting with `token`.
    pub fn connect(
        bind_addr: impl ToSocketAddrs,
        token: ConnectToken,
    ) -> Result<Self, TransportError> {
        Self::with_authentication(
            bind_addr,
            ClientAuthentication::Secure {
                connect_token: token,
            },
        )
    }

    /// Connects without a token to an [`UdpAuthentication::Unsecure`] server.
    pub fn connect_unsecure(
        bind_addr: impl ToSocketAddrs,
        server: SocketAddr,
        protocol_id: u64,
        client_id: ClientId,
    ) -> Result<Self, TransportError> {
        Self::with_authentication(
            bind_addr,
            ClientAuthentication::Unsecure {
                protocol_id,
                client_id,
                server_addr: server,
                user_data: None,
            },
        )
    }

    fn with_authentication(
        bind_addr: impl ToSocketAddrs,
        auth: ClientAuthentication,
    ) -> Result<Self, TransportError> {
        let socket = UdpSocket::bind(bind_addr)?;
        socket.set_nonblocking(true)?;
        let netcode = NetcodeClient::new(wall_clock(), auth)
            .map_err(|e| TransportError::Netcode(e.to_string()))?;
        Ok(Self {
            socket,
            netcode,
            last_update: None,
            events: VecDeque::new(),
            reported_connected: false,
            reported_disconnected: false,
            buffer: Box::new([0; 1500]),
        })
    }

    /// This client's id.
    pub fn client_id(&self) -> ClientId {
        self.netcode.client_id()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    fn track_state(&mut self) {
        if self.netcode.is_connected() && !self.reported_connected {
            self.reported_connected = true;
            self.events.push_back(ClientTransportEvent::Connected);
        }
        if let Some(reason) = self.netcode.disconnect_reason() {
            if !self.reported_disconnected {
                self.reported_disconnected = true;
                self.events
                    .push_back(ClientTransportEvent::Disconnected(map_reason(reason)));
            }
        }
    }
}

impl ClientTransport for UdpClientTransport {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        let delta = self
            .last_update
            .map_or(Duration::ZERO, |last| now.saturating_sub(last));
        self.last_update = Some(now);
        if self.netcode.is_disconnected() {
            self.track_state();
            return Ok(());
        }
        let server = self.netcode.server_addr();
        loop {
            match self.socket.recv_from(&mut self.buffer[..]) {
                Ok((len, addr)) => {
                    if addr != server {
                        continue;
                    }
                    if let Some(payload) = self.netcode.process_packet(&mut self.buffer[..len]) {
                        self.events
                            .push_back(ClientTransportEvent::Payload(payload.to_vec()));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => continue,
                Err(e) => return Err(e.into()),
            }
        }
        if let Some((packet, addr)) = self.netcode.update(delta) {
            if let Err(e) = self.socket.send_to(packet, addr) {
                tracing::debug!("udp send to {addr} failed: {e}");
            }
        }
        self.track_state();
        Ok(())
    }

    fn poll_event(&mut self) -> Option<ClientTransportEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), TransportError> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(TransportError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD_BYTES,
            });
        }
        if !self.netcode.is_connected() {
            return Err(TransportError::NotConnected);
        }
        let (addr, bytes) = self
            .netcode
            .generate_payload_packet(payload)
            .map_err(|e| TransportError::Netcode(e.to_string()))?;
        self.socket.send_to(bytes, addr)?;
        Ok(())
    }

    fn disconnect(&mut self) {
        if let Ok((addr, bytes)) = self.netcode.disconnect() {
            if let Err(e) = self.socket.send_to(bytes, addr) {
                tracing::debug!("udp send to {addr} failed: {e}");
            }
        }
        self.track_state();
    }

    fn is_connected(&self) -> bool {
        self.netcode.is_connected()
    }

    fn max_payload_bytes(&self) -> usize {
        MAX_PAYLOAD_BYTES
    }
}
