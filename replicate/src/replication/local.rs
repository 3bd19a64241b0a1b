//! [`LocalIndices`]: the connection-local object indices a writer names objects by on
//! the wire (see `wire`): dense, lowest free first, reused once the remote has let go.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::replication::wire::MAX_OBJECT_INDEX;

/// The connection-local indices of one writer.
///
/// An index is assigned when an object starts replicating to the connection and freed
/// when the writer forgets it. Freed indices are reused lowest first, so the indices in
/// use stay dense and the width a packet announces stays small. The writer frees an
/// object's index only once the remote no longer uses it: after its destroy or tear-off
/// is acknowledged, or at once when no creation ever went out. Packets are read in send
/// order (see `connection`), so nothing written before that acknowledgement can reach
/// the remote after a creation that reuses the index.
#[derive(Debug, Default)]
pub struct LocalIndices {
    /// One past the largest index ever assigned.
    end: u32,
    free: BinaryHeap<Reverse<u32>>,
}

impl LocalIndices {
    /// Assigns the lowest free index; `None` when all `2^24` are in use.
    pub fn assign(&mut self) -> Option<u32> {
        if let Some(Reverse(i)) = self.free.pop() {
            return Some(i);
        }
        if self.end > MAX_OBJECT_INDEX {
            return None;
        }
        self.end += 1;
        Some(self.end - 1)
    }

    /// Frees `index` for reuse.
    pub fn free(&mut self, index: u32) {
        debug_assert!(index < self.end);
        if index + 1 == self.end {
            // Shrink past the free indices at the end, so the width can drop again.
            self.end -= 1;
            while self.end > 0 && self.free.peek().is_some() {
                let top = self.end - 1;
                if !self.remove_free(top) {
                    break;
                }
                self.end -= 1;
            }
        } else {
            self.free.push(Reverse(index));
        }
    }

    /// One past the largest index in use (what a section's width must cover).
    pub fn end(&self) -> u32 {
        self.end
    }

    fn remove_free(&mut self, index: u32) -> bool {
        // Rare (only when the highest indices go): rebuild without `index`.
        let before = self.free.len();
        let kept: Vec<_> = self.free.drain().filter(|r| r.0 != index).collect();
        self.free = kept.into();
        self.free.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_dense_and_reused_lowest_first() {
        let mut l = LocalIndices::default();
        let a: Vec<u32> = (0..5).map(|_| l.assign().unwrap()).collect();
        assert_eq!(a, [0, 1, 2, 3, 4]);
        l.free(3);
        l.free(1);
        assert_eq!(l.assign(), Some(1));
        assert_eq!(l.assign(), Some(3));
        assert_eq!(l.assign(), Some(5));
        assert_eq!(l.end(), 6);
    }

    #[test]
    fn freeing_the_highest_indices_shrinks_the_end() {
        let mut l = LocalIndices::default();
        for _ in 0..6 {
            l.assign();
        }
        l.free(4);
        l.free(3);
        assert_eq!(l.end(), 6);
        l.free(5);
        assert_eq!(l.end(), 3, "5, then the free 4 and 3 go");
        assert_eq!(l.assign(), Some(3));
    }
}
