//! Type-erased transports, so the plugin's resources and systems are not generic over
//! the transport: any [`ServerTransport`] / [`ClientTransport`] that is `Send` is boxed
//! once when the [`NetServer`](crate::NetServer) / [`NetClient`](crate::NetClient) is
//! built; a packet then costs one dynamic call.

use replicate::transport::{
    ClientId, ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
    TransportError,
};
use std::time::Duration;

/// Any server transport, boxed (what [`NetServer`](crate::NetServer) runs on).
pub struct AnyServerTransport(Box<dyn ServerTransport + Send>);

impl AnyServerTransport {
    /// Boxes `transport`.
    pub fn new(transport: impl ServerTransport + Send + 'static) -> Self {
        Self(Box::new(transport))
    }
}

impl std::fmt::Debug for AnyServerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnyServerTransport")
    }
}

impl ServerTransport for AnyServerTransport {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.0.update(now)
    }
    fn poll_event(&mut self) -> Option<ServerTransportEvent> {
        self.0.poll_event()
    }
    fn send(&mut self, client: ClientId, payload: &[u8]) -> Result<(), TransportError> {
        self.0.send(client, payload)
    }
    fn disconnect(&mut self, client: ClientId) {
        self.0.disconnect(client);
    }
    fn max_payload_bytes(&self) -> usize {
        self.0.max_payload_bytes()
    }
}

/// Any client transport, boxed (what [`NetClient`](crate::NetClient) runs on).
pub struct AnyClientTransport(Box<dyn ClientTransport + Send>);

impl AnyClientTransport {
    /// Boxes `transport`.
    pub fn new(transport: impl ClientTransport + Send + 'static) -> Self {
        Self(Box::new(transport))
    }
}

impl std::fmt::Debug for AnyClientTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnyClientTransport")
    }
}

impl ClientTransport for AnyClientTransport {
    fn update(&mut self, now: Duration) -> Result<(), TransportError> {
        self.0.update(now)
    }
    fn poll_event(&mut self) -> Option<ClientTransportEvent> {
        self.0.poll_event()
    }
    fn send(&mut self, payload: &[u8]) -> Result<(), TransportError> {
        self.0.send(payload)
    }
    fn disconnect(&mut self) {
        self.0.disconnect();
    }
    fn is_connected(&self) -> bool {
        self.0.is_connected()
    }
    fn max_payload_bytes(&self) -> usize {
        self.0.max_payload_bytes()
    }
}
