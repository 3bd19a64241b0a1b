//! Net tokens (Iris's `NetToken` exports): strings that recur (type names, tags, player
//! names) are exported once per connection and then referenced by a small id.
//!
//! - [`TokenExports`] is the sending side's table: [`TokenExports::token_for`] assigns an
//!   id; an export is *pending* until written, *in flight* until its packet's fate is
//!   known, and *acked* after. A token may be referenced alone only once
//!   [`TokenExports::is_acked`]; until then its export must travel with the data that
//!   references it ([`TokenExports::write_exports`] for a batch).
//! - [`TokenImports`] is the receiving side's table, filled by
//!   [`TokenImports::read_exports`].
//! - [`TokenStream`] is a [`DataStream`] that sends pending exports on their own,
//!   re-sending lost ones.
//!
//! Export wire format: `[1][id: 16][len: 8][len bytes]` per export, then `[0]`.
//! Strings longer than [`MAX_TOKEN_LEN`] bytes are refused at export.

use super::flagged::{Flag, FlaggedGuard, FlaggedMutex};
use super::{DataStream, StreamError, WriteResult};
use crate::bits::{BitReader, BitWriter};
use crate::connection::DeliveryStatus;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// A connection's export table, shared by the replication writer (exports attached to
/// batches) and the [`TokenStream`] (exports sent on their own). Whether an export is
/// pending is kept beside the lock ([`FlaggedMutex`]): the token stream's write of a
/// packet with nothing to export (most packets) takes no lock.
pub type SharedExports = Arc<FlaggedMutex<TokenExports>>;

/// The locked export table of a [`SharedExports`].
pub type ExportsGuard<'a> = FlaggedGuard<'a, TokenExports>;

impl Flag for TokenExports {
    /// Whether some export waits to be written.
    fn flag(&self) -> bool {
        self.has_pending()
    }
}

/// A connection's import table, shared by the replication reader and the token stream.
pub type SharedImports = Arc<Mutex<TokenImports>>;

/// Locks a shared table; a poisoned lock (a panic elsewhere) still yields the data.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A token id, valid on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetToken(pub u16);

pub use crate::object::MAX_TOKEN_LEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExportState {
    Pending,
    InFlight,
    Acked,
}

/// The sending side's token table for one connection.
#[derive(Debug, Default, Clone)]
pub struct TokenExports {
    by_string: HashMap<String, NetToken>,
    strings: Vec<(String, ExportState)>,
    pending: VecDeque<NetToken>,
}

impl TokenExports {
    /// The token of `s`, assigning one (and queueing its export) on first use. `None`
    /// when `s` is too long or the table is full (65536 tokens).
    pub fn token_for(&mut self, s: &str) -> Option<NetToken> {
        if let Some(t) = self.by_string.get(s) {
            return Some(*t);
        }
        if s.len() > MAX_TOKEN_LEN || self.strings.len() > u16::MAX as usize {
            return None;
        }
        let t = NetToken(self.strings.len() as u16);
        self.strings.push((s.to_string(), ExportState::Pending));
        self.by_string.insert(s.to_string(), t);
        self.pending.push_back(t);
        Some(t)
    }

    /// Whether the peer acknowledged the token's export (it can be referenced alone).
    pub fn is_acked(&self, t: NetToken) -> bool {
        self.strings
            .get(t.0 as usize)
            .is_some_and(|(_, s)| *s == ExportState::Acked)
    }

    /// Whether some export waits to be written.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn write_one(&self, t: NetToken, w: &mut BitWriter) {
        if let Some((s, _)) = self.strings.get(t.0 as usize) {
            w.write_bool(true);
            w.write_bits(t.0 as u64, 16);
            w.write_bits(s.len() as u64, 8);
            w.write_bytes(s.as_bytes());
        }
    }

    /// Writes the exports of `tokens` that are not acked (for a batch referencing
    /// them), then the terminator. Returns the tokens written (to record).
    pub fn write_exports(&mut self, tokens: &[NetToken], w: &mut BitWriter) -> Vec<NetToken> {
        let mut out = Vec::new();
        for &t in tokens {
            if !self.is_acked(t) && !out.contains(&t) {
                self.write_one(t, w);
                out.push(t);
            }
        }
        w.write_bool(false);
        for &t in &out {
            if let Some(e) = self.strings.get_mut(t.0 as usize)
                && e.1 == ExportState::Pending
            {
                e.1 = ExportState::InFlight;
            }
        }
        self.pending.retain(|t| !out.contains(t));
        out
    }

    /// The packet carrying these exports was delivered or lost.
    pub fn on_delivery(&mut self, tokens: &[NetToken], status: DeliveryStatus) {
        for &t in tokens {
            let Some(e) = self.strings.get_mut(t.0 as usize) else {
                continue;
            };
            match status {
                DeliveryStatus::Delivered => e.1 = ExportState::Acked,
                DeliveryStatus::Lost if e.1 != ExportState::Acked => {
                    e.1 = ExportState::Pending;
                    if !self.pending.contains(&t) {
                        self.pending.push_back(t);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The receiving side's token table for one connection.
#[derive(Debug, Default, Clone)]
pub struct TokenImports {
    strings: HashMap<NetToken, String>,
}

impl TokenImports {
    /// The string of a received token.
    pub fn resolve(&self, t: NetToken) -> Option<&str> {
        self.strings.get(&t).map(String::as_str)
    }

    /// Number of known tokens.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether no token is known.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Reads an export list written by [`TokenExports::write_exports`].
    pub fn read_exports(&mut self, r: &mut BitReader) -> Result<usize, StreamError> {
        let mut n = 0;
        while r.read_bool() {
            let id = NetToken(r.read_bits(16) as u16);
            let len = r.read_bits(8) as usize;
            let mut buf = vec![0u8; len.min(MAX_TOKEN_LEN)];
            r.read_bytes(&mut buf);
            r.check().map_err(|e| StreamError::malformed("tokens", e))?;
            let s = String::from_utf8(buf)
                .map_err(|_| StreamError::malformed("tokens", "export is not UTF-8"))?;
            if self.strings.len() > u16::MAX as usize && !self.strings.contains_key(&id) {
                return Err(StreamError::malformed("tokens", "too many tokens"));
            }
            self.strings.insert(id, s);
            n += 1;
        }
        r.check().map_err(|e| StreamError::malformed("tokens", e))?;
        Ok(n)
    }
}

/// A data stream carrying token exports on their own (for tokens not sent with a
/// batch), re-sending lost exports until acknowledged.
///
/// ```
/// use replicate::internals::stream::tokens::TokenStream;
/// let s = TokenStream::default();
/// let t = s.exports().token_for("Player").unwrap();
/// assert_eq!(s.exports().token_for("Player"), Some(t));
/// assert!(!s.exports().is_acked(t));
/// ```
#[derive(Debug, Default, Clone)]
pub struct TokenStream {
    exports: SharedExports,
    imports: SharedImports,
    in_flight: VecDeque<Vec<NetToken>>,
}

impl TokenStream {
    /// The stream's name.
    pub const NAME: &'static str = "tokens";

    /// A stream over shared tables (the replication writer and reader use the same).
    pub fn with_tables(exports: SharedExports, imports: SharedImports) -> Self {
        Self {
            exports,
            imports,
            in_flight: VecDeque::new(),
        }
    }

    /// The sending side's table.
    pub fn exports(&self) -> ExportsGuard<'_> {
        self.exports.lock()
    }

    /// The receiving side's table.
    pub fn imports(&self) -> MutexGuard<'_, TokenImports> {
        lock(&self.imports)
    }
}

impl<C: ?Sized> DataStream<C> for TokenStream {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn write_data(&mut self, _ctx: &C, w: &mut BitWriter) -> WriteResult {
        if !self.exports.flag() {
            // No export pending (read without locking).
            return WriteResult::NoData;
        }
        let mut exports = self.exports.lock();
        let mut written = Vec::new();
        while let Some(&t) = exports.pending.front() {
            let m = w.mark();
            exports.write_one(t, w);
            // Keep room for the terminator.
            if w.is_overflown() || w.bits_left() < 1 {
                w.rollback(m);
                break;
            }
            exports.pending.pop_front();
            if let Some(e) = exports.strings.get_mut(t.0 as usize) {
                e.1 = ExportState::InFlight;
            }
            written.push(t);
        }
        if written.is_empty() {
            return WriteResult::NoData;
        }
        w.write_bool(false);
        let more = exports.has_pending();
        drop(exports);
        self.in_flight.push_back(written);
        if more {
            WriteResult::HasMoreData
        } else {
            WriteResult::Ok
        }
    }

    fn read_data(&mut self, _ctx: &mut C, r: &mut BitReader) -> Result<(), StreamError> {
        lock(&self.imports).read_exports(r).map(|_| ())
    }

    fn process_delivery(&mut self, _ctx: &mut C, status: DeliveryStatus) {
        if let Some(tokens) = self.in_flight.pop_front() {
            self.exports.lock().on_delivery(&tokens, status);
        }
    }

    fn has_acknowledged_all_reliable_data(&self) -> bool {
        // (The flag: an export is pending.)
        !self.exports.flag() && self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::PacketSequence;
    use crate::stream::DataStreamManager;

    #[test]
    fn export_once_resend_on_loss_then_acked() {
        let mut tx = DataStreamManager::<()>::new();
        let tokens = tx.add_stream(TokenStream::default()).unwrap();
        let mut rx = DataStreamManager::<()>::new();
        rx.add_stream(TokenStream::default()).unwrap();
        let s = tx.stream_mut(tokens).unwrap();
        let a = s.exports().token_for("Captain").unwrap();
        let b = s.exports().token_for("red team").unwrap();
        assert_eq!(s.exports().token_for("Captain"), Some(a));

        // Packet 0 lost.
        let mut w = BitWriter::with_capacity_bytes(128);
        tx.write_packet(&(), PacketSequence(0), &mut w);
        tx.process_delivery(&mut (), PacketSequence(0), DeliveryStatus::Lost);
        // Packet 1 carries both again and is delivered.
        let mut w = BitWriter::with_capacity_bytes(128);
        tx.write_packet(&(), PacketSequence(1), &mut w);
        let bytes = w.finish().unwrap();
        rx.read_packet(&mut (), &mut BitReader::new(&bytes))
            .unwrap();
        tx.process_delivery(&mut (), PacketSequence(1), DeliveryStatus::Delivered);

        let s = tx.stream(tokens).unwrap();
        assert!(s.exports().is_acked(a) && s.exports().is_acked(b));
        assert!(DataStream::<()>::has_acknowledged_all_reliable_data(s));
        let r = rx.stream(tokens).unwrap();
        assert_eq!(r.imports().resolve(a), Some("Captain"));
        assert_eq!(r.imports().resolve(b), Some("red team"));

        // Nothing more to send.
        let mut w = BitWriter::with_capacity_bytes(128);
        tx.write_packet(&(), PacketSequence(2), &mut w);
        assert_eq!(w.position(), 5 + 1);
    }

    proptest::proptest! {
        #[test]
        fn exports_roundtrip_exactly(strings in proptest::collection::vec("\\PC{0,40}", 0..20)) {
            let mut e = TokenExports::default();
            let tokens: Vec<NetToken> = strings.iter().filter_map(|s| e.token_for(s)).collect();
            let mut w = BitWriter::with_capacity_bytes(64 * 1024);
            let written = e.write_exports(&tokens, &mut w);
            let bytes = w.finish().unwrap();
            let mut r = BitReader::with_bit_len(&bytes, w.position());
            let mut imp = TokenImports::default();
            imp.read_exports(&mut r).unwrap();
            proptest::prop_assert_eq!(r.position(), w.position());
            for (s, t) in strings.iter().zip(&tokens) {
                proptest::prop_assert_eq!(imp.resolve(*t), Some(s.as_str()));
            }
            let mut unique = tokens.clone();
            unique.sort();
            unique.dedup();
            proptest::prop_assert_eq!(written.len(), unique.len());
        }
    }

    #[test]
    fn the_pending_flag_follows_the_table_through_every_unlock() {
        let shared = SharedExports::default();
        let mut stream = TokenStream::with_tables(shared.clone(), SharedImports::default());
        assert!(!shared.flag());
        let t = shared.lock().token_for("Captain").unwrap();
        assert!(shared.flag(), "a new token's export waits");
        let mut w = BitWriter::with_capacity_bytes(64);
        assert_ne!(
            DataStream::<()>::write_data(&mut stream, &(), &mut w),
            WriteResult::NoData
        );
        assert!(!shared.flag(), "written, in flight");
        DataStream::<()>::process_delivery(&mut stream, &mut (), DeliveryStatus::Lost);
        assert!(shared.flag(), "lost: pending again");
        let mut w = BitWriter::with_capacity_bytes(64);
        DataStream::<()>::write_data(&mut stream, &(), &mut w);
        DataStream::<()>::process_delivery(&mut stream, &mut (), DeliveryStatus::Delivered);
        assert!(!shared.flag() && shared.lock().is_acked(t));
        // Nothing pending: nothing written, and the table is not needed to say so.
        let mut w = BitWriter::with_capacity_bytes(64);
        assert_eq!(
            DataStream::<()>::write_data(&mut stream, &(), &mut w),
            WriteResult::NoData
        );
        assert_eq!(w.position(), 0);
    }

    #[test]
    fn too_long_is_refused_and_bad_utf8_is_an_error() {
        let mut e = TokenExports::default();
        assert!(e.token_for(&"x".repeat(300)).is_none());
        let mut w = BitWriter::with_capacity_bytes(16);
        w.write_bool(true);
        w.write_bits(0, 16);
        w.write_bits(1, 8);
        w.write_bits(0xFF, 8);
        w.write_bool(false);
        let bytes = w.finish().unwrap();
        let mut imp = TokenImports::default();
        assert!(imp.read_exports(&mut BitReader::new(&bytes)).is_err());
    }
}
