//! [`NetRefHandle`]: the network identity of a replicated object, and its serializer.
//!
//! The layout follows Iris's `FNetRefHandle`: a 64-bit value whose low 60 bits are the
//! id and whose high 4 bits hold the replication system id plus one (0 = unset). Bit 0
//! of the id is the *static* flag: static handles name objects both sides know without
//! a message (level geometry), dynamic handles are assigned by the server.
//!
//! This module owns the handle value only: its wire encoding and serializer live in the
//! serialization layer ([`crate::serialize::reference`]); allocation and the
//! handle-to-object tables live in the object layer.

/// A network object handle. Equality, hashing and ordering use the id only and ignore
/// the replication system id.
///
/// ```
/// use replicate::NetRefHandle;
/// let h = NetRefHandle::new(5, false, 0);
/// assert_eq!(h.id(), 10);          // counter 5, dynamic -> id 10
/// assert!(h.is_dynamic());
/// assert_eq!(h.replication_system_id(), Some(0));
/// assert_eq!(h, NetRefHandle::new(5, false, 3)); // system id ignored
/// assert!(NetRefHandle::new(5, true, 0).is_static()); // id 11
/// ```
#[derive(Clone, Copy, Default)]
pub struct NetRefHandle(u64);

impl NetRefHandle {
    /// Bits of the id.
    pub const ID_BITS: u32 = 60;
    /// Bits of the stored (biased) replication system id.
    pub const REPLICATION_SYSTEM_ID_BITS: u32 = 4;
    /// Mask of the id.
    pub const ID_MASK: u64 = (1 << Self::ID_BITS) - 1;
    /// Largest usable replication system id (stored biased by one, 15 is reserved).
    pub const MAX_REPLICATION_SYSTEM_ID: u32 = 14;
    /// Mask of the 59-bit counter inside an id.
    pub const COUNTER_MASK: u64 = (1 << (Self::ID_BITS - 1)) - 1;
    /// The invalid handle (value 0).
    pub const INVALID: NetRefHandle = NetRefHandle(0);

    /// A handle from a counter value (`1..2^59`), the static flag and a replication
    /// system id (`0..=14`, clamped).
    pub const fn new(counter: u64, is_static: bool, replication_system_id: u32) -> Self {
        let id = ((counter & Self::COUNTER_MASK) << 1) | is_static as u64;
        Self::from_id(id, replication_system_id)
    }

    /// A handle from a raw id (counter and static bit) and a replication system id.
    pub const fn from_id(id: u64, replication_system_id: u32) -> Self {
        let sys = if replication_system_id > Self::MAX_REPLICATION_SYSTEM_ID {
            Self::MAX_REPLICATION_SYSTEM_ID
        } else {
            replication_system_id
        };
        if id & Self::ID_MASK == 0 {
            return Self::INVALID;
        }
        Self((id & Self::ID_MASK) | ((sys as u64 + 1) << Self::ID_BITS))
    }

    /// The raw 64-bit value.
    pub const fn value(self) -> u64 {
        self.0
    }

    /// The 60-bit id (counter << 1 | static).
    pub const fn id(self) -> u64 {
        self.0 & Self::ID_MASK
    }

    /// The counter part of the id.
    pub const fn counter(self) -> u64 {
        self.id() >> 1
    }

    /// The replication system id, or `None` when unset.
    pub const fn replication_system_id(self) -> Option<u32> {
        let stored = (self.0 >> Self::ID_BITS) as u32;
        if stored == 0 { None } else { Some(stored - 1) }
    }

    /// Whether the handle names anything.
    pub const fn is_valid(self) -> bool {
        self.id() != 0
    }

    /// Valid and carrying a replication system id.
    pub const fn is_complete(self) -> bool {
        self.is_valid() && self.replication_system_id().is_some()
    }

    /// A static handle (pre-placed object, same on both sides).
    pub const fn is_static(self) -> bool {
        self.0 & 1 == 1
    }

    /// A valid, server-assigned handle.
    pub const fn is_dynamic(self) -> bool {
        self.is_valid() && !self.is_static()
    }

    /// The counter that follows `counter`: wraps within 59 bits and skips 0.
    pub const fn next_counter(counter: u64) -> u64 {
        let next = counter.wrapping_add(1) & Self::COUNTER_MASK;
        if next == 0 { 1 } else { next }
    }
}

impl PartialEq for NetRefHandle {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}
impl Eq for NetRefHandle {}
impl std::hash::Hash for NetRefHandle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}
impl PartialOrd for NetRefHandle {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for NetRefHandle {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id().cmp(&other.id())
    }
}

impl std::fmt::Debug for NetRefHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_valid() {
            return write!(f, "NetRefHandle(invalid)");
        }
        let kind = if self.is_static() {
            "static"
        } else {
            "dynamic"
        };
        write!(f, "NetRefHandle({} {kind}", self.counter())?;
        if let Some(sys) = self.replication_system_id() {
            write!(f, " sys {sys}")?;
        }
        write!(f, ")")
    }
}

impl std::fmt::Display for NetRefHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serialize::{NetRefHandleSerializer, NoConfig, roundtrip};

    #[test]
    fn iris_handle_layout() {
        assert_eq!(NetRefHandle::new(1, false, 0).id(), 2);
        assert_eq!(NetRefHandle::new(1, true, 0).id(), 3);
        assert_eq!(NetRefHandle::new(5, true, 0).id(), 11);
        assert_eq!(NetRefHandle::new(5, false, 0).id(), 10);
        let h = NetRefHandle::new(5, false, 2);
        assert_eq!(h.value() >> 60, 3);
        assert_eq!(h.replication_system_id(), Some(2));
        assert!(!NetRefHandle::INVALID.is_valid());
        assert_eq!(NetRefHandle::INVALID.replication_system_id(), None);
        assert_eq!(NetRefHandle::next_counter(NetRefHandle::COUNTER_MASK), 1);
        assert_eq!(NetRefHandle::next_counter(7), 8);
    }

    #[test]
    fn handle_roundtrip_bits() {
        let cfg = NoConfig;
        assert_eq!(
            roundtrip::<NetRefHandleSerializer>(&cfg, &NetRefHandle::INVALID)
                .unwrap()
                .0,
            1
        );
        let h = NetRefHandle::new(3, false, 0);
        let (bits, back) = roundtrip::<NetRefHandleSerializer>(&cfg, &h).unwrap();
        assert_eq!(back, h);
        assert_eq!(bits, 1 + 6 + 3);
    }
}
