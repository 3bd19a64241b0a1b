//! Hashing for the interest layer's sets and maps of object indices, group ids and grid
//! cells: small integers the server chose, never bytes from the network, so a
//! multiply-and-rotate hash (FxHash's) serves them better than the standard library's
//! SipHash, which defends against inputs an attacker picks.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-and-rotate hasher (FxHash's constant).
#[derive(Debug, Default, Clone, Copy)]
pub struct IndexHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IndexHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IndexHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.add(u64::from(i as u32));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// Builds [`IndexHasher`]s.
pub type BuildIndexHasher = BuildHasherDefault<IndexHasher>;

/// A set of object indices or group ids.
pub type IndexSet = HashSet<u32, BuildIndexHasher>;

/// A map keyed by object indices or grid cells.
pub type IndexMap<K, V> = HashMap<K, V, BuildIndexHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(t: &T) -> u64 {
        BuildIndexHasher::default().hash_one(t)
    }

    #[test]
    fn nearby_keys_hash_apart_and_equal_keys_alike() {
        assert_eq!(hash(&7u32), hash(&7u32));
        let hashes: HashSet<u64> = (0..10_000u32).map(|i| hash(&i)).collect();
        assert_eq!(hashes.len(), 10_000);
        // Cells one step apart in either axis.
        let cells: HashSet<u64> = (-50..50)
            .flat_map(|x| (-50..50).map(move |y| (x, y)))
            .map(|c: (i32, i32)| hash(&c))
            .collect();
        assert_eq!(cells.len(), 10_000);
        // A set works as one (its buckets take the hash's top bits).
        let set: IndexSet = (0..1000).map(|i| i * 4096).collect();
        assert!((0..1000).all(|i| set.contains(&(i * 4096))));
        assert!(!set.contains(&1));
    }
}
