//! [`ClockSync`]: the client's estimate of the server's clock.

use std::collections::VecDeque;

/// Most samples kept per direction (a bound for any sample rate).
const MAX_SAMPLES: usize = 1024;

/// Echo samples before the estimate starts slewing instead of snapping.
const WARM_UP_SAMPLES: u32 = 16;

/// Echo samples before the estimate counts as settled (about a second of echoes).
const SETTLED_SAMPLES: u32 = 30;

/// Estimates the server's clock from packet timing, all times in seconds.
///
/// Two kinds of samples, each `(one-way delay ± offset)` where `offset` is server
/// clock minus client clock:
///
/// - *down*: a server packet written at server time `t2` arrives at client time `t3`:
///   `t3 - t2 = down_delay - offset`;
/// - *up*: a client packet sent at client time `t0` is received by the server at server
///   time `t1` (echoed back): `t1 - t0 = up_delay + offset`.
///
/// Delays only ever grow from their minimum (jitter, queues, frame waits), so over a
/// sliding window the minima are the least-delayed packets of each direction, and
/// `(min(t1 - t0) - min(t3 - t2)) / 2` is the offset, exact when the two directions'
/// least delays are equal. Outliers (late packets) never move a minimum. The
/// published offset is slewed: after a warm-up it moves towards the target at most
/// `slew_rate` seconds per second, unless it is off by more than `snap_threshold`.
///
/// ```
/// use replicate::time::ClockSync;
/// let mut sync = ClockSync::new(2.0);
/// // Server clock = client clock + 10 s; 40 ms each way.
/// for i in 0..100 {
///     let c = f64::from(i) * 0.03;
///     sync.on_echo(c, c + 10.0 + 0.04, c + 0.08);
///     sync.on_server_time(c + 0.04, c + 10.0);
/// }
/// sync.update(3.0);
/// assert!((sync.server_time(3.0).unwrap() - 13.0).abs() < 1e-9);
/// ```
#[derive(Debug, Clone)]
pub struct ClockSync {
    window: f64,
    /// (client time of the sample, t1 - t0)
    up: VecDeque<(f64, f64)>,
    /// (client time of the sample, t3 - t2)
    down: VecDeque<(f64, f64)>,
    target: Option<f64>,
    offset: Option<f64>,
    last_update: Option<f64>,
    up_count: u32,
    /// Largest rate of change of the published offset after the warm-up (s per s).
    pub slew_rate: f64,
    /// A target further than this from the published offset is taken at once (s).
    pub snap_threshold: f64,
}

impl ClockSync {
    /// A synchroniser keeping samples for `window` seconds.
    pub fn new(window: f64) -> Self {
        Self {
            window: window.max(0.1),
            up: VecDeque::new(),
            down: VecDeque::new(),
            target: None,
            offset: None,
            last_update: None,
            up_count: 0,
            slew_rate: 0.05,
            snap_threshold: 0.25,
        }
    }

    fn push(samples: &mut VecDeque<(f64, f64)>, at: f64, value: f64, window: f64) {
        if !value.is_finite() || !at.is_finite() {
            return;
        }
        while samples
            .front()
            .is_some_and(|&(t, _)| t < at - window || samples.len() >= MAX_SAMPLES)
        {
            samples.pop_front();
        }
        samples.push_back((at, value));
    }

    fn min(samples: &VecDeque<(f64, f64)>) -> Option<f64> {
        samples.iter().map(|&(_, v)| v).reduce(f64::min)
    }

    fn max(samples: &VecDeque<(f64, f64)>) -> Option<f64> {
        samples.iter().map(|&(_, v)| v).reduce(f64::max)
    }

    fn retarget(&mut self) {
        let down = Self::min(&self.down);
        let up = Self::min(&self.up);

        self.target = match (up, down) {
            (Some(a), Some(b)) => Some((a - b) / 2.0),
            // No echo yet: assume no delay until one comes back.
            (None, Some(b)) => Some(-b),
            (Some(a), None) => Some(a),
            (None, None) => None,
        };
    }

    /// A server packet written at server time `server_time` arrived at `client_now`.
    pub fn on_server_time(&mut self, client_now: f64, server_time: f64) {
        Self::push(
            &mut self.down,
            client_now,
            client_now - server_time,
            self.window,
        );
        self.retarget();
        if self.offset.is_none() {
            self.offset = self.target;
        }
    }

    /// The server received, at server time `server_received`, a packet this client
    /// sent at `client_sent`; the echo came back at `client_now`.
    pub fn on_echo(&mut self, client_sent: f64, server_received: f64, client_now: f64) {
        if client_sent > client_now {
            return;
        }
        Self::push(
            &mut self.up,
            client_now,
            server_received - client_sent,
            self.window,
        );
        self.up_count = self.up_count.saturating_add(1);
        self.retarget();
    }

    /// Moves the published offset towards the target (call once per frame).
    pub fn update(&mut self, client_now: f64) {
        let elapsed = self.last_update.map_or(0.0, |t| (client_now - t).max(0.0));
        self.last_update = Some(client_now);
        let Some(target) = self.target else {
            return;
        };

        match self.offset {
            Some(offset)
                if self.up_count >= WARM_UP_SAMPLES
                    && (target - offset).abs() <= self.snap_threshold =>
            {
                let step = self.slew_rate * elapsed;
                self.offset = Some(offset + (target - offset).clamp(-step, step));
            }
            _ => self.offset = Some(target),
        }
    }

    /// Whether at least one server packet was timed.
    pub fn is_synchronized(&self) -> bool {
        self.offset.is_some()
    }

    /// Whether enough round trips were timed for the delay extremes to be known
    /// (about a second of echoes): inputs should wait for it.
    pub fn is_settled(&self) -> bool {
        self.offset.is_some() && self.up_count >= SETTLED_SAMPLES
    }

    /// Server clock minus client clock (published, slewed), in seconds.
    pub fn offset(&self) -> Option<f64> {
        self.offset
    }

    /// The estimated server time at client time `client_now`.
    pub fn server_time(&self, client_now: f64) -> Option<f64> {
        self.offset.map(|o| client_now + o)
    }

    /// The largest one-way delay from the server (frame wait included) in the window.
    pub fn max_down_delay(&self) -> Option<f64> {
        Some((Self::max(&self.down)? + self.offset?).max(0.0))
    }

    /// The largest one-way delay to the server (until the server's tick read it) in the
    /// window.
    pub fn max_up_delay(&self) -> Option<f64> {
        Some((Self::max(&self.up)? - self.offset?).max(0.0))
    }

    /// Down samples in the window.
    pub fn sample_count(&self) -> usize {
        self.down.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minima_cancel_jitter_and_the_offset_is_recovered() {
        let mut sync = ClockSync::new(2.0);
        let mut x = 1u64;
        let mut rnd = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        for i in 0..200 {
            let c = f64::from(i) * 0.02;
            let up = 0.02 + 0.06 * rnd();
            let down = 0.02 + 0.06 * rnd();
            sync.on_echo(c, c + 5.0 + up, c + up + down);
            sync.on_server_time(c + down, c + 5.0);
            sync.update(c);
        }
        let err = sync.offset().unwrap() - 5.0;
        assert!(err.abs() < 0.002, "{err}");
        assert!((sync.max_down_delay().unwrap() - 0.08).abs() < 0.005);
    }

    #[test]
    fn slews_after_warm_up_and_ignores_garbage() {
        let mut sync = ClockSync::new(1.0);
        assert_eq!(sync.server_time(1.0), None);
        for i in 0..40 {
            let c = f64::from(i) * 0.01;
            sync.on_echo(c, c + 1.0, c);
            sync.on_server_time(c, c + 1.0);
            sync.update(c);
        }
        assert!((sync.offset().unwrap() - 1.0).abs() < 1e-9);
        // The server clock jumps ahead by 100 ms: the target moves by 50 ms (the old
        // echo minimum is still in the window) and the estimate slews at 5 %.
        for i in 40..60 {
            let c = f64::from(i) * 0.01;
            sync.on_server_time(c, c + 1.1);
            sync.on_echo(c, c + 1.1, c);
        }
        sync.update(0.6);
        let o = sync.offset().unwrap();
        assert!(o > 1.0 && o < 1.02, "{o}");
        sync.on_server_time(f64::NAN, 1.0);
        sync.on_echo(5.0, 1.0, 1.0);
        assert!(sync.offset().unwrap().is_finite());
    }
}
