//! The plugins end to end: headless server and client apps over the in-memory
//! transport (and UDP on localhost), asserting the client worlds. One test binary, so
//! Bevy is linked once.

mod common;
mod interest;
mod lifecycle;
mod messages;
mod traffic;
mod udp;
