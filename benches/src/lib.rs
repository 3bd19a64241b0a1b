//! Workloads shared by the `replicate` benchmarks and the `sizes` table.
//!
//! - [`fields`]: a sequence of mixed-width fields, written and read with replicate's
//!   `BitWriter`/`BitReader` and with the fastest idiomatic `bitvec` code we know;
//! - [`game`]: a 10-member game struct encoded with replicate's serializers, postcard
//!   and bitcode.
//!
//! Everything here is plain code the benchmarks call; the unit tests check that the
//! competing encoders produce the same bits / round-trip the same values, so a
//! benchmark can never time an encoder that is silently wrong.

pub mod fields;
pub mod game;

/// A tiny deterministic generator (xorshift64*), so every run benchmarks the same data
/// without a `rand` dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed (zero is replaced by a fixed constant).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform value in `0..n` (`n > 0`; slightly biased, fine for test data).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A uniform `f32` in `lo..hi`.
    pub fn range_f32(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f32) -> bool {
        self.range_f32(0.0, 1.0) < p
    }
}
