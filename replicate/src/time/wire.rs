//! The time streams: the server tick, the clock-synchronisation stamps and the inputs
//! ride in every packet as one more [`DataStream`], after the replication, token,
//! huge-object and message streams.
//!
//! Server → client section:
//!
//! ```text
//! [short:1] short: [tick & 0xFF : 8]   (the client resolves it against its newest tick)
//!           else:  [tick : 32][tick rate in Hz : 10]
//! [echo:1]  echo:  [client stamp : 16][ticks held : 4]
//! ```
//!
//! The short form is used while a packet stamped at most [`SHORT_TICK_SPAN`] ticks ago
//! was acknowledged: the client then holds a tick within 128 of this one.
//!
//! Client → server section (in every client packet: the client sends one per frame):
//!
//! ```text
//! [stamp:1] stamp: [client time in 1/4 ms, wrapping : 16]
//! [input count : 3] count > 0: [newest input tick & 0xFFF : 12]
//!                   then per input, newest first, consecutive ticks: [bytes : 6][bytes × 8]
//! ```

use super::input::InputBuffer;
use super::{ClockSync, MAX_INPUT_BYTES, MAX_INPUT_REDUNDANCY, Tick, TimeConfig};
use crate::bits::{BitReader, BitWriter};
use crate::connection::DeliveryStatus;
use crate::stream::{DataStream, StreamError, WriteResult};
use std::collections::VecDeque;

/// The stream's name on both ends.
pub(crate) const NAME: &str = "time";

/// Most ticks between an acknowledged tick and the one written for the 9-bit form.
pub(crate) const SHORT_TICK_SPAN: Tick = 100;

/// Bits of the tick rate in the full form.
const TICK_RATE_BITS: u32 = 10;

/// Client stamp units per second (1/4 ms).
const STAMP_UNITS: f64 = 4000.0;

/// Sent stamps remembered for their echo.
const STAMP_MEMORY: usize = 64;

/// Resolves the low `bits` bits of a value against a nearby `reference`.
fn resolve_low_bits(low: u32, bits: u32, reference: Tick) -> Option<Tick> {
    let span = 1i64 << bits;
    let mask = span - 1;
    let diff = (i64::from(low) - (i64::from(reference) & mask)).rem_euclid(span);
    let diff = if diff >= span / 2 { diff - span } else { diff };
    Tick::try_from(i64::from(reference) + diff).ok()
}

/// The server's end of one client's time stream.
#[derive(Debug)]
pub(crate) struct ServerTimeStream {
    tick: Tick,
    tick_rate: u32,
    acked: Option<Tick>,
    records: VecDeque<Tick>,
    echo: Option<(u16, Tick)>,
    pub(crate) inputs: InputBuffer,
    /// Bits of the tick field (flag included) written so far.
    pub(crate) tick_bits: u64,
    /// Bits of the whole section (tick and echoes) written so far.
    pub(crate) section_bits: u64,
    /// Sections written.
    pub(crate) packets: u64,
}

impl ServerTimeStream {
    pub(crate) fn new(tick: Tick, tick_rate: u32) -> Self {
        Self {
            tick,
            tick_rate: tick_rate.clamp(1, (1 << TICK_RATE_BITS) - 1),
            acked: None,
            records: VecDeque::new(),
            echo: None,
            inputs: InputBuffer::new(),
            tick_bits: 0,
            section_bits: 0,
            packets: 0,
        }
    }

    /// The tick being received and sent.
    pub(crate) fn set_tick(&mut self, tick: Tick) {
        self.tick = tick;
    }
}

impl<C: ?Sized> DataStream<C> for ServerTimeStream {
    fn name(&self) -> &str {
        NAME
    }

    fn write_data(&mut self, _: &C, w: &mut BitWriter) -> WriteResult {
        let start = w.position();
        let tick = self.tick;
        let short = self
            .acked
            .is_some_and(|a| tick >= a && tick - a <= SHORT_TICK_SPAN);
        w.write_bool(short);
        if short {
            w.write_bits(u64::from(tick & 0xFF), 8);
        } else {
            w.write_bits(u64::from(tick), 32);
            w.write_bits(u64::from(self.tick_rate), TICK_RATE_BITS);
        }
        self.tick_bits += w.position().saturating_sub(start) as u64;
        match self
            .echo
            .take()
            .map(|(stamp, at)| (stamp, tick.saturating_sub(at)))
            .filter(|&(_, held)| held < 16)
        {
            Some((stamp, held)) => {
                w.write_bool(true);
                w.write_bits(u64::from(stamp), 16);
                w.write_bits(u64::from(held), 4);
            }
            None => {
                w.write_bool(false);
            }
        }
        self.section_bits += w.position().saturating_sub(start) as u64;
        self.packets += 1;
        self.records.push_back(tick);
        WriteResult::Ok
    }

    fn read_data(&mut self, _: &mut C, r: &mut BitReader) -> Result<(), StreamError> {
        let malformed = |e: &dyn std::fmt::Display| StreamError::malformed(NAME, e);
        let stamp = r.read_bool().then(|| r.read_bits(16) as u16);
        let count = r.read_bits(3) as usize;
        let mut inputs = Vec::new();
        if count > 0 {
            let low = r.read_bits(12) as u32;
            for _ in 0..count {
                let len = r.read_bits(6) as usize;
                r.check().map_err(|e| malformed(&e))?;
                if len > MAX_INPUT_BYTES || len * 8 > r.bits_left() {
                    return Err(malformed(&"input longer than the packet"));
                }
                inputs.push((0..len).map(|_| r.read_bits(8) as u8).collect::<Vec<u8>>());
            }
            r.check().map_err(|e| malformed(&e))?;
            if let Some(newest) = resolve_low_bits(low, 12, self.tick) {
                for (i, bytes) in inputs.into_iter().enumerate() {
                    if let Some(t) = newest.checked_sub(i as Tick) {
                        self.inputs.insert(t, bytes, self.tick);
                    }
                }
            }
        }
        r.check().map_err(|e| malformed(&e))?;
        if let Some(stamp) = stamp {
            // Of the stamps read in one tick, the latest sent has the least delay
            // (they share the receive time): echo that one.
            let newer = match self.echo {
                Some((old, at)) if at == self.tick => (stamp.wrapping_sub(old) as i16) > 0,
                _ => true,
            };
            if newer {
                self.echo = Some((stamp, self.tick));
            }
        }
        Ok(())
    }

    fn process_delivery(&mut self, _: &mut C, status: DeliveryStatus) {
        if let Some(tick) = self.records.pop_front()
            && status == DeliveryStatus::Delivered
        {
            self.acked = Some(self.acked.map_or(tick, |a| a.max(tick)));
        }
    }
}

/// The client's end of the time stream.
#[derive(Debug)]
pub(crate) struct ClientTimeStream {
    tick_seconds: f64,
    tick_rate: u32,
    window: f64,
    redundancy: usize,
    pub(crate) clock: ClockSync,
    now: f64,
    newest: Option<Tick>,
    packet_tick: Option<Tick>,
    stamps: VecDeque<(u16, f64)>,
    inputs: VecDeque<(Tick, Vec<u8>)>,
}

impl ClientTimeStream {
    pub(crate) fn new(config: &TimeConfig) -> Self {
        let tick_seconds = config.tick_seconds();
        Self {
            tick_seconds,
            tick_rate: config.tick_rate,
            window: config.sync_window.as_secs_f64(),
            redundancy: usize::from(config.input_redundancy.clamp(1, MAX_INPUT_REDUNDANCY)),
            clock: ClockSync::new(config.sync_window.as_secs_f64()),
            now: 0.0,
            newest: None,
            packet_tick: None,
            stamps: VecDeque::new(),
            inputs: VecDeque::new(),
        }
    }

    /// The client's time, before reading or writing a packet.
    pub(crate) fn set_now(&mut self, now: f64) {
        self.now = now;
    }

    /// Seconds per server tick: the server's rate once a packet said it, the
    /// configured one before.
    pub(crate) fn tick_seconds(&self) -> f64 {
        self.tick_seconds
    }

    /// The tick of the packet just read (once).
    pub(crate) fn take_packet_tick(&mut self) -> Option<Tick> {
        self.packet_tick.take()
    }

    /// Queues an input for `tick` (ticks must increase); false when it does not.
    pub(crate) fn push_input(&mut self, tick: Tick, bytes: Vec<u8>) -> bool {
        if bytes.len() > MAX_INPUT_BYTES || self.inputs.back().is_some_and(|&(t, _)| t >= tick) {
            return false;
        }
        if self.inputs.back().is_some_and(|&(t, _)| t + 1 != tick) {
            // A gap: the redundant inputs of a packet must be consecutive.
            self.inputs.clear();
        }
        self.inputs.push_back((tick, bytes));
        while self.inputs.len() > self.redundancy {
            self.inputs.pop_front();
        }
        true
    }
}

impl<C: ?Sized> DataStream<C> for ClientTimeStream {
    fn name(&self) -> &str {
        NAME
    }

    fn write_data(&mut self, _: &C, w: &mut BitWriter) -> WriteResult {
        // Every packet is stamped: the more samples, the closer the delay minima.
        let stamp = ((self.now * STAMP_UNITS) as u64 & 0xFFFF) as u16;
        w.write_bool(true);
        w.write_bits(u64::from(stamp), 16);
        if self.stamps.len() >= STAMP_MEMORY {
            self.stamps.pop_front();
        }
        self.stamps.push_back((stamp, self.now));
        w.write_bits(self.inputs.len() as u64, 3);
        if let Some(&(newest, _)) = self.inputs.back() {
            w.write_bits(u64::from(newest & 0xFFF), 12);
            for (_, bytes) in self.inputs.iter().rev() {
                w.write_bits(bytes.len() as u64, 6);
                for &b in bytes {
                    w.write_bits(u64::from(b), 8);
                }
            }
        }
        WriteResult::Ok
    }

    fn read_data(&mut self, _: &mut C, r: &mut BitReader) -> Result<(), StreamError> {
        let malformed = |e: &dyn std::fmt::Display| StreamError::malformed(NAME, e);
        let tick = if r.read_bool() {
            let low = r.read_bits(8) as u32;
            r.check().map_err(|e| malformed(&e))?;
            let reference = self
                .newest
                .ok_or_else(|| malformed(&"a short tick before any full one"))?;
            resolve_low_bits(low, 8, reference).ok_or_else(|| malformed(&"tick out of range"))?
        } else {
            let tick = r.read_bits(32) as Tick;
            let rate = r.read_bits(TICK_RATE_BITS) as u32;
            r.check().map_err(|e| malformed(&e))?;
            if rate == 0 {
                return Err(malformed(&"tick rate 0"));
            }
            if rate != self.tick_rate {
                // The server's rate wins; samples in the old unit are dropped.
                tracing::debug!("server tick rate {rate} Hz (configured {})", self.tick_rate);
                self.tick_rate = rate;
                self.tick_seconds = 1.0 / f64::from(rate);
                self.clock = ClockSync::new(self.window);
            }
            tick
        };
        let echo = r
            .read_bool()
            .then(|| (r.read_bits(16) as u16, r.read_bits(4) as Tick));
        r.check().map_err(|e| malformed(&e))?;
        self.packet_tick = Some(tick);
        self.newest = Some(self.newest.map_or(tick, |n| n.max(tick)));
        let now = self.now;
        self.clock
            .on_server_time(now, f64::from(tick) * self.tick_seconds);
        if let Some((stamp, held)) = echo
            && let Some(&(_, sent)) = self.stamps.iter().rev().find(|(s, _)| *s == stamp)
            && let Some(received) = tick.checked_sub(held)
        {
            self.clock
                .on_echo(sent, f64::from(received) * self.tick_seconds, now);
        }
        Ok(())
    }

    fn process_delivery(&mut self, _: &mut C, _: DeliveryStatus) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::PacketSequence;
    use crate::stream::{DataStreamManager, StreamKey};

    #[test]
    fn low_bits_resolve_around_the_reference() {
        assert_eq!(resolve_low_bits(5, 8, 250), Some(261));
        assert_eq!(resolve_low_bits(250, 8, 261), Some(250));
        assert_eq!(resolve_low_bits(3, 8, 3), Some(3));
        assert_eq!(resolve_low_bits(200, 8, 3), None);
        assert_eq!(resolve_low_bits(0xFFF, 12, 0x1001), Some(0xFFF));
    }

    /// The server's and the client's time stream, each the only stream of its peer.
    const SERVER: StreamKey<ServerTimeStream> = StreamKey::first();
    const CLIENT: StreamKey<ClientTimeStream> = StreamKey::first();

    fn pair() -> (DataStreamManager<()>, DataStreamManager<()>) {
        let mut server = DataStreamManager::new();
        assert_eq!(
            server.add_stream(ServerTimeStream::new(1000, 30)),
            Ok(SERVER)
        );
        let mut client = DataStreamManager::new();
        let time = ClientTimeStream::new(&TimeConfig::default());
        assert_eq!(client.add_stream(time), Ok(CLIENT));
        (server, client)
    }

    #[test]
    fn tick_is_full_until_acked_then_nine_bits() {
        let (mut server, mut client) = pair();
        for (i, seq) in (1000..1003).zip(1u16..) {
            server.stream_mut(SERVER).unwrap().set_tick(i);
            let mut w = BitWriter::with_capacity_bytes(64);
            server.write_packet(&(), PacketSequence(seq), &mut w);
            let bytes = w.finish().unwrap();
            client
                .read_packet(&mut (), &mut BitReader::new(&bytes))
                .unwrap();
            let c = client.stream_mut(CLIENT).unwrap();
            assert_eq!(c.take_packet_tick(), Some(i));
            server.process_delivery(&mut (), PacketSequence(seq), DeliveryStatus::Delivered);
        }
        let s = server.stream_mut(SERVER).unwrap();
        assert_eq!(s.tick_bits, 43 + 9 + 9);
    }

    #[test]
    fn the_client_takes_the_server_tick_rate() {
        let mut server = DataStreamManager::<()>::new();
        server.add_stream(ServerTimeStream::new(7, 60)).unwrap();
        let (_, mut client) = pair();
        let mut w = BitWriter::with_capacity_bytes(64);
        server.write_packet(&(), PacketSequence(1), &mut w);
        let bytes = w.finish().unwrap();
        client
            .read_packet(&mut (), &mut BitReader::new(&bytes))
            .unwrap();
        let c = client.stream_mut(CLIENT).unwrap();
        assert!((c.tick_seconds() - 1.0 / 60.0).abs() < 1e-12);
        assert_eq!(c.take_packet_tick(), Some(7));
    }

    #[test]
    fn truncated_and_hostile_sections_are_errors_not_panics() {
        let (_, mut client) = pair();
        // A short tick before any full one.
        let mut w = BitWriter::with_capacity_bytes(8);
        w.write_bits(0, 5); // one stream
        w.write_bits(1, 1); // mask
        w.write_bool(true);
        w.write_bits(7, 8);
        w.write_bool(false);
        let bytes = w.finish().unwrap();
        assert!(
            client
                .read_packet(&mut (), &mut BitReader::new(&bytes))
                .is_err()
        );
        // Inputs claiming more bytes than the packet has.
        let mut server = DataStreamManager::<()>::new();
        server.add_stream(ServerTimeStream::new(5, 30)).unwrap();
        let mut w = BitWriter::with_capacity_bytes(8);
        w.write_bits(0, 5);
        w.write_bits(1, 1);
        w.write_bool(false);
        w.write_bits(7, 3);
        w.write_bits(5, 12);
        w.write_bits(63, 6);
        let bytes = w.finish().unwrap();
        assert!(
            server
                .read_packet(&mut (), &mut BitReader::new(&bytes))
                .is_err()
        );
        for len in 0..bytes.len() {
            let _ = server.read_packet(&mut (), &mut BitReader::new(&bytes[..len]));
        }
    }

    #[test]
    fn inputs_ride_redundantly_and_land_in_the_server_buffer() {
        let (mut server, mut client) = pair();
        let c = client.stream_mut(CLIENT).unwrap();
        for t in 1001..1005 {
            assert!(c.push_input(t, vec![t as u8]));
        }
        assert!(!c.push_input(1004, vec![0]));
        let mut w = BitWriter::with_capacity_bytes(64);
        client.write_packet(&(), PacketSequence(1), &mut w);
        let bytes = w.finish().unwrap();
        server
            .read_packet(&mut (), &mut BitReader::new(&bytes))
            .unwrap();
        let s = server.stream_mut(SERVER).unwrap();
        // Redundancy 3: the last three.
        assert_eq!(s.inputs.take(1001), None);
        assert_eq!(s.inputs.take(1002), Some(&[0xEA][..]));
        assert_eq!(s.inputs.take(1004), Some(&[0xEC][..]));
        assert!(s.echo.is_some());
    }
}
