//! The empirical entropy bound of S1: zeroth-order entropy of the quantized per-member
//! first differences actually sent, and of the second differences (what a
//! constant-velocity predictor leaves), each from the run's own histogram per member
//! component ("channel").
//!
//! A sample is recorded for every component of every member that changed in a tick
//! (a changed `Vec3` records all three components, as the member is what is sent). The
//! bound is `Σ −log2 p(value)` over the samples, `p` from the channel's histogram over
//! the whole run — an oracle code that knows the exact distribution in advance and pays
//! nothing to say *which* members changed, so no real encoder reaches it.

use std::collections::HashMap;

/// Histograms of first and second differences per channel.
#[derive(Debug, Clone, Default)]
pub struct EntropyMeter {
    first: Vec<HashMap<i64, u64>>,
    second: Vec<HashMap<i64, u64>>,
    /// When set, the samples per object and tick for the range-coding measurement
    /// ([`super::range_coding`]); the caller feeds it.
    pub symbols: Option<super::range_coding::SymbolLog>,
}

impl EntropyMeter {
    /// A meter with `channels` channels.
    pub fn new(channels: usize) -> Self {
        Self {
            first: vec![HashMap::new(); channels],
            second: vec![HashMap::new(); channels],
            symbols: None,
        }
    }

    /// Records one sent component of `channel`: its first difference `d1` (new value
    /// minus the previous tick's) and second difference `d2` (`d1` minus the previous
    /// tick's `d1`).
    pub fn record(&mut self, channel: usize, d1: i64, d2: i64) {
        *self.first[channel].entry(d1).or_default() += 1;
        *self.second[channel].entry(d2).or_default() += 1;
    }

    /// Total bits of the first-difference bound.
    pub fn first_bits(&self) -> f64 {
        self.first.iter().map(histogram_bits).sum()
    }

    /// Total bits of the second-difference bound.
    pub fn second_bits(&self) -> f64 {
        self.second.iter().map(histogram_bits).sum()
    }

    /// Number of samples recorded.
    pub fn samples(&self) -> u64 {
        self.first.iter().flat_map(|h| h.values()).sum()
    }
}

/// `Σ −log2 p` over a histogram's samples, `p = count / total`.
pub fn histogram_bits(h: &HashMap<i64, u64>) -> f64 {
    let total: u64 = h.values().sum();
    if total == 0 {
        return 0.0;
    }
    let t = total as f64;
    h.values()
        .map(|&c| {
            let c = c as f64;
            c * (t / c).log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_over_four_values_costs_two_bits_each() {
        let mut m = EntropyMeter::new(1);
        for v in 0..4 {
            for _ in 0..10 {
                m.record(0, v, 0);
            }
        }
        assert!((m.first_bits() - 80.0).abs() < 1e-9);
        // A constant second difference carries no information.
        assert_eq!(m.second_bits(), 0.0);
        assert_eq!(m.samples(), 40);
    }

    #[test]
    fn channels_are_separate() {
        let mut m = EntropyMeter::new(2);
        m.record(0, 1, 1);
        m.record(1, 2, 2);
        // Each channel alone is constant: zero bits; pooled they would cost 2 bits.
        assert_eq!(m.first_bits(), 0.0);
    }
}
