//! Bandwidth budgets: a token bucket of bytes per connection.
//!
//! Each tick the bucket refills at `bytes_per_second` (capped at `burst` bytes); the
//! writer may fill packets while tokens remain and pays for what it wrote. Going a
//! little negative is allowed (a packet is never cut in the middle), and the debt is
//! repaid before the next packet, so over any window the average stays within the rate.

use std::time::Duration;

/// A connection's bandwidth limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandwidthBudget {
    /// No limit beyond the packet size and packets per tick.
    Unlimited,
    /// At most this many bytes per second (default 64 KB/s).
    BytesPerSecond(u32),
}

impl Default for BandwidthBudget {
    fn default() -> Self {
        BandwidthBudget::BytesPerSecond(64 * 1024)
    }
}

/// A token bucket measured in bytes.
///
/// ```
/// use replicate::interest::TokenBucket;
/// use std::time::Duration;
/// let mut b = TokenBucket::new(1000, 1000);
/// b.refill(Duration::from_millis(0));
/// assert_eq!(b.available(), 1000);
/// b.consume(1200);
/// b.refill(Duration::from_millis(100)); // +100 bytes, still 100 in debt
/// assert_eq!(b.available(), 0);
/// b.refill(Duration::from_millis(400)); // +300
/// assert_eq!(b.available(), 200);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Duration>,
}

impl TokenBucket {
    /// A full bucket refilling `bytes_per_second`, holding at most `burst` bytes.
    pub fn new(bytes_per_second: u32, burst: u32) -> Self {
        Self {
            rate: bytes_per_second as f64,
            burst: burst.max(1) as f64,
            tokens: burst.max(1) as f64,
            last: None,
        }
    }

    /// A bucket for `budget` sending `ticks_per_second` ticks, with a burst of
    /// `burst_ticks` ticks' worth (at least one packet of `mtu` bytes); `None` when
    /// unlimited.
    pub fn for_budget(budget: BandwidthBudget, tick_rate: f32, mtu: usize) -> Option<Self> {
        match budget {
            BandwidthBudget::Unlimited => None,
            BandwidthBudget::BytesPerSecond(rate) => {
                let per_tick = rate as f64 / tick_rate.max(1.0) as f64;
                let burst = (per_tick * 2.0).max(mtu as f64) as u32;
                Some(Self::new(rate, burst))
            }
        }
    }

    /// Adds the tokens earned since the last refill.
    pub fn refill(&mut self, now: Duration) {
        if let Some(last) = self.last {
            let dt = now.saturating_sub(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        }
        self.last = Some(now);
    }

    /// Whole bytes available now (0 while in debt).
    pub fn available(&self) -> usize {
        self.tokens.max(0.0) as usize
    }

    /// Pays for `bytes` sent (may go into debt).
    pub fn consume(&mut self, bytes: usize) {
        self.tokens -= bytes as f64;
    }

    /// The refill rate in bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_rate_holds_over_ten_seconds() {
        let mut b = TokenBucket::for_budget(BandwidthBudget::BytesPerSecond(64 * 1024), 30.0, 1200)
            .unwrap();
        let mut sent = 0usize;
        for tick in 0..=300u64 {
            b.refill(Duration::from_micros(tick * 1_000_000 / 30));
            // A greedy writer sending whole 1200-byte packets while tokens remain.
            while b.available() > 0 {
                b.consume(1200);
                sent += 1200;
            }
        }
        let expected = 64.0 * 1024.0 * 10.0;
        let err = (sent as f64 - expected).abs() / expected;
        assert!(err < 0.05, "sent {sent} vs {expected}");
    }
}
