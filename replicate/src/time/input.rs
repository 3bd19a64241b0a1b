//! Client inputs: the [`NetInput`] encoding and the server's per-client
//! [`InputBuffer`].

use super::Tick;
use crate::bits::{BitReader, BitWriter};
use std::collections::BTreeMap;

/// A client input (buttons, axes, aim) the client sends to the server for one tick.
///
/// The encoding must be symmetric and at most [`MAX_INPUT_BYTES`](super::MAX_INPUT_BYTES)
/// bytes; `read` must return `None`, never panic, on anything malformed (it comes from
/// the network).
///
/// ```
/// use replicate::bits::{BitReader, BitWriter};
/// use replicate::time::NetInput;
///
/// #[derive(Debug, Clone, PartialEq, Default)]
/// struct Move { dx: i8, dy: i8, fire: bool }
///
/// impl NetInput for Move {
///     fn write(&self, w: &mut BitWriter) {
///         w.write_bits(self.dx as u8 as u64, 8);
///         w.write_bits(self.dy as u8 as u64, 8);
///         w.write_bool(self.fire);
///     }
///     fn read(r: &mut BitReader) -> Option<Self> {
///         let m = Move { dx: r.read_bits(8) as u8 as i8, dy: r.read_bits(8) as u8 as i8, fire: r.read_bool() };
///         r.check().ok().map(|_| m)
///     }
/// }
/// ```
pub trait NetInput: Sized {
    /// Writes the input.
    fn write(&self, w: &mut BitWriter);
    /// Reads an input written by [`write`](Self::write); `None` if malformed.
    fn read(r: &mut BitReader) -> Option<Self>;
}

/// Counters of an [`InputBuffer`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InputStats {
    /// Ticks taken that had their own input.
    pub on_time: u64,
    /// Ticks taken without their input (the last one was repeated, if any).
    pub missing: u64,
    /// Moving average of how many ticks ahead of the server's tick inputs arrive
    /// (first arrival of each input).
    pub mean_lead_ticks: f64,
}

/// Most inputs held per client (further ones are dropped, oldest first).
const CAPACITY: usize = 128;

/// Most ticks an input may be ahead of the server's tick.
const MAX_LEAD: Tick = 1024;

/// The server's buffer of one client's inputs (encoded), by tick.
///
/// Policy for a tick without an input: [`take`](Self::take) returns the last input
/// taken (the player keeps doing what they did), counted as
/// [`missing`](InputStats::missing); before any input it returns `None`.
#[derive(Debug, Default)]
pub struct InputBuffer {
    inputs: BTreeMap<Tick, Vec<u8>>,
    last: Option<(Tick, Vec<u8>)>,
    stats: InputStats,
}

impl InputBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores the input for `tick`, received during server tick `now` (duplicates,
    /// inputs for ticks already taken and inputs too far ahead are ignored).
    pub fn insert(&mut self, tick: Tick, input: Vec<u8>, now: Tick) {
        if self.last.as_ref().is_some_and(|&(t, _)| tick <= t) {
            // Its tick was taken already (a redundant copy, or too late).
            return;
        }
        if tick > now.saturating_add(MAX_LEAD) || self.inputs.contains_key(&tick) {
            return;
        }
        let lead = f64::from(tick) - f64::from(now);
        self.stats.mean_lead_ticks = if self.inputs.is_empty() && self.last.is_none() {
            lead
        } else {
            self.stats.mean_lead_ticks * 0.95 + lead * 0.05
        };
        self.inputs.insert(tick, input);
        while self.inputs.len() > CAPACITY {
            self.inputs.pop_last();
        }
    }

    /// The input for `tick` (older ones are dropped): its own, or the last one taken
    /// repeated when it is missing.
    pub fn take(&mut self, tick: Tick) -> Option<&[u8]> {
        while let Some(entry) = self.inputs.first_entry() {
            if *entry.key() >= tick {
                break;
            }
            entry.remove();
        }
        match self.inputs.remove(&tick) {
            Some(input) => {
                self.stats.on_time += 1;
                self.last = Some((tick, input));
            }
            None => {
                self.stats.missing += 1;
                if let Some(last) = self.last.as_mut() {
                    last.0 = last.0.max(tick);
                }
            }
        }
        self.last.as_ref().map(|(_, b)| b.as_slice())
    }

    /// Whether the input for `tick` is here.
    pub fn has(&self, tick: Tick) -> bool {
        self.inputs.contains_key(&tick)
    }

    /// The counters.
    pub fn stats(&self) -> InputStats {
        self.stats
    }
}

/// Encodes an input into bytes; `None` when it is longer than the limit.
pub(crate) fn encode<I: NetInput>(input: &I) -> Option<Vec<u8>> {
    let mut w = BitWriter::with_capacity_bytes(super::MAX_INPUT_BYTES);
    input.write(&mut w);
    w.finish().ok()
}

/// Decodes an input.
pub(crate) fn decode<I: NetInput>(bytes: &[u8]) -> Option<I> {
    I::read(&mut BitReader::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ticks_repeat_the_last_input_and_are_counted() {
        let mut b = InputBuffer::new();
        assert_eq!(b.take(1), None);
        b.insert(3, vec![3], 1);
        b.insert(3, vec![9], 1);
        b.insert(5, vec![5], 1);
        assert_eq!(b.take(2), None);
        assert_eq!(b.take(3), Some(&[3][..]));
        assert_eq!(b.take(4), Some(&[3][..]));
        b.insert(4, vec![4], 4);
        assert!(!b.has(4));
        assert_eq!(b.take(5), Some(&[5][..]));
        b.insert(10_000, vec![1], 5);
        assert!(!b.has(10_000));
        let s = b.stats();
        assert_eq!((s.on_time, s.missing), (2, 3));
        assert!((s.mean_lead_ticks - 2.0).abs() < 0.2);
    }
}
