//! The time model: server ticks, clock synchronisation, snapshot interpolation, input
//! and client-side prediction, lag compensation.
//!
//! Everything here is sans-IO and engine-agnostic: time comes in as a value, never
//! from a clock. The [`Server`](crate::Server) and [`Client`](crate::Client) wire it
//! up; the types are public so an engine can also drive them directly.
//!
//! # Model
//!
//! - **Fixed tick rate.** The server simulates at [`TimeConfig::tick_rate`] ticks per
//!   second. Tick `n` is server time `n / tick_rate`. One
//!   [`Server::tick`](crate::Server::tick) call is one tick: it receives what arrived
//!   (inputs are stored, time stamps answered), sends the state of tick
//!   [`Server::current_tick`](crate::Server::current_tick), then advances the counter.
//!   Game code simulates `current_tick()` between two calls, with the inputs
//!   [`Server::take_input`](crate::Server::take_input) returns for it. The game loop is
//!   expected to call `tick` every `1 / tick_rate` seconds.
//! - **Ticks on the wire.** Every server packet carries the tick it was written at, in
//!   9 bits while the client acknowledges packets (the low 8 bits of the tick, which the
//!   client resolves against the newest tick it received; otherwise 43 bits: the whole
//!   tick and the server's tick rate). The
//!   client knows the tick of every packet and, per object, the tick of its last
//!   update ([`Client::last_received_tick`](crate::Client::last_received_tick),
//!   [`Client::object_tick`](crate::Client::object_tick)).
//! - **Clock synchronisation** ([`ClockSync`]). The client stamps every packet with its
//!   own time; the server echoes, per tick, the latest stamp it read (the least
//!   delayed of that tick's) with the number of ticks it held it.
//!   That gives, per direction, samples of "one-way delay ± clock offset"; over a
//!   sliding window the minimum of each direction is the least-delayed packet
//!   (jitter, queueing, frame waits and outliers only ever add delay), and half the
//!   difference of the two minima is the clock offset. The estimate is slewed (a
//!   bounded rate of change), so the client's view of server time never jumps once it
//!   has settled.
//! - **Snapshot interpolation** ([`SnapshotBuffer`], [`Interpolate`]). For types the
//!   game opts in ([`Client::interpolate`](crate::Client::interpolate)), the client
//!   keeps the last received states of each object with their ticks and presents the
//!   state at *interpolation time* = estimated server time − delay. The delay covers
//!   one tick, the largest one-way delay seen in the window (so jitter is absorbed) and
//!   one lost packet; it adapts as the measured delays change. When data is late the
//!   buffer extrapolates for at most [`TimeConfig::max_extrapolation`], then holds.
//!   An object whose later packets arrive without an update for it is at rest: it is
//!   held, not extrapolated. A jump the type calls a teleport
//!   ([`Interpolate::is_teleport`]) snaps.
//! - **Input** ([`NetInput`], [`InputBuffer`]). The client stamps each input with the
//!   server tick it is for, ahead of the server by its measured one-way delay plus a
//!   margin ([`Client::input_tick`](crate::Client::input_tick)), and repeats the last
//!   [`TimeConfig::input_redundancy`] inputs in every packet. The server keeps them per
//!   client; for a tick without an input it repeats the last one it had
//!   ([`InputBuffer::take`]).
//! - **Prediction** ([`Predictor`]): the owning client steps its object with its own
//!   inputs at once, keeps the inputs and predicted states, and on the authoritative
//!   state for a tick compares, rolls back and re-simulates, smoothing the visible
//!   correction.
//! - **Lag compensation** ([`StateHistory`]): the server records chosen state for the
//!   last N ticks and answers "state of object X at tick T". To judge a shot against
//!   what the shooter saw, the client puts its
//!   [`interpolation_time`](crate::Client::interpolation_time) in the input and the
//!   server rewinds to it ([`StateHistory::at_time`]).

mod clock;
mod history;
mod input;
mod interpolate;
mod predict;
pub(crate) mod wire;

pub use clock::ClockSync;
pub use history::StateHistory;
pub use input::{InputBuffer, InputStats, NetInput};
pub(crate) use input::{decode as input_decode, encode as input_encode};
pub use interpolate::{
    Interpolate, InterpolationStats, SampleKind, Sampled, SnapshotBuffer, lerp_angle_degrees,
};
pub use predict::Predictor;

use std::time::Duration;

/// A server tick number: tick `n` is server time `n / tick_rate`.
pub type Tick = u32;

/// Settings of the time model. The server's `tick_rate` is the one that counts: it
/// rides in the packets that carry a full tick, and the client takes it from there.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeConfig {
    /// Server ticks per second (default 30).
    pub tick_rate: u32,
    /// How far back clock-synchronisation samples are kept (default 4 s).
    pub sync_window: Duration,
    /// Inputs repeated in every client packet, the newest first (default 3, at most
    /// [`MAX_INPUT_REDUNDANCY`]).
    pub input_redundancy: u8,
    /// Extra lead of inputs over the measured one-way delay (default 50 ms).
    pub input_margin: Duration,
    /// Longest an interpolated object is extrapolated past its newest state before it
    /// holds (default 100 ms).
    pub max_extrapolation: Duration,
    /// Extra interpolation delay on top of the measured one (default 10 ms).
    pub interpolation_margin: Duration,
}

/// Most inputs per client packet.
pub const MAX_INPUT_REDUNDANCY: u8 = 7;

/// Largest encoded input, in bytes.
pub const MAX_INPUT_BYTES: usize = 63;

impl Default for TimeConfig {
    fn default() -> Self {
        Self {
            tick_rate: 30,
            sync_window: Duration::from_secs(4),
            input_redundancy: 3,
            input_margin: Duration::from_millis(50),
            max_extrapolation: Duration::from_millis(100),
            interpolation_margin: Duration::from_millis(10),
        }
    }
}

impl TimeConfig {
    /// Seconds per tick.
    pub fn tick_seconds(&self) -> f64 {
        1.0 / f64::from(self.tick_rate.max(1))
    }

    /// Checks the settings; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.tick_rate == 0 || self.tick_rate > 1000 {
            return Err(format!(
                "time.tick_rate = {} must be in 1..=1000",
                self.tick_rate
            ));
        }
        if self.input_redundancy == 0 || self.input_redundancy > MAX_INPUT_REDUNDANCY {
            return Err(format!(
                "time.input_redundancy = {} must be in 1..={MAX_INPUT_REDUNDANCY}",
                self.input_redundancy
            ));
        }
        if self.sync_window < Duration::from_millis(100) {
            return Err("time.sync_window must be at least 100 ms".into());
        }
        Ok(())
    }
}
