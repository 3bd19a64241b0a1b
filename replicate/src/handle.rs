//! [`NetRefHandle`]: the network identity of a replicated object, and its serializer;
//! [`Handle<T>`]: the same identity with the object's type.
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

/// A typed handle: the [`NetRefHandle`] of an object whose type `T` is known, so
/// reading or writing it needs neither a downcast nor the type named again.
///
/// [`Server::spawn`](crate::Server::spawn) returns one; [`Server::handle`](crate::Server::handle)
/// and [`Client::handle`](crate::Client::handle) check an untyped handle's type and
/// make one. It converts back with [`raw`](Self::raw) or `NetRefHandle::from`, and
/// compares equal to its untyped handle. The type is checked where the handle is
/// made, so `get` with a typed handle finds the object as long as it exists.
///
/// A handle made by the server's object table also remembers where the object sits in
/// that table, so a lookup with it reads that slot instead of the handle map (a cache
/// miss less when the table is large). The slot is only a hint, checked against the
/// handle on every use; equality, ordering and hashing ignore it.
///
/// ```
/// use replicate::{Handle, NetRefHandle, Replicated, Server};
/// use replicate::transport::LinkConditioner;
/// use replicate::transport::memory::MemoryServerTransport;
///
/// #[derive(Replicated, Debug, Default)]
/// #[net(name = "docs::handle::Door")] // unique among the crate's doc tests
/// struct Door { open: bool }
///
/// let registry = std::sync::Arc::new(replicate::ProtocolRegistry::from_inventory().unwrap());
/// let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
/// let mut server = Server::new(transport, registry, Default::default()).unwrap();
///
/// let door: Handle<Door> = server.spawn(Door::default()).unwrap();
/// server.get_mut(door).unwrap().open = true; // no turbofish, no downcast
/// assert!(server.get(door).unwrap().open);
///
/// let raw: NetRefHandle = door.raw();
/// assert_eq!(raw, door);
/// assert_eq!(server.handle::<Door>(raw), Some(door)); // checked: it is a Door
/// ```
pub struct Handle<T> {
    raw: NetRefHandle,
    /// The object's column (its type's protocol index) and row in the table that
    /// made the handle, or [`NO_SLOT`]: a hint a lookup checks before the handle map.
    slot: (u32, u32),
    _type: std::marker::PhantomData<fn() -> T>,
}

/// The slot of a handle that remembers none.
const NO_SLOT: (u32, u32) = (u32::MAX, u32::MAX);

impl<T> Handle<T> {
    /// Wraps `raw` as a handle of a `T` **without checking** that it names one (a
    /// wrong type makes every typed lookup return `None`). Prefer the checked
    /// [`Server::handle`](crate::Server::handle) / [`Client::handle`](crate::Client::handle).
    pub const fn from_raw_unchecked(raw: NetRefHandle) -> Self {
        Self::with_slot(raw, NO_SLOT)
    }

    /// A handle that remembers where its object sits in the table making it.
    pub(crate) const fn with_slot(raw: NetRefHandle, slot: (u32, u32)) -> Self {
        Self {
            raw,
            slot,
            _type: std::marker::PhantomData,
        }
    }

    /// The untyped handle.
    pub const fn raw(self) -> NetRefHandle {
        self.raw
    }

    /// Whether the handle names anything.
    pub const fn is_valid(self) -> bool {
        self.raw.is_valid()
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl<T> Eq for Handle<T> {}
impl<T> PartialEq<NetRefHandle> for Handle<T> {
    fn eq(&self, other: &NetRefHandle) -> bool {
        self.raw == *other
    }
}
impl<T> PartialEq<Handle<T>> for NetRefHandle {
    fn eq(&self, other: &Handle<T>) -> bool {
        *self == other.raw
    }
}
impl<T> std::hash::Hash for Handle<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.raw.hash(state)
    }
}
impl<T> PartialOrd for Handle<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Handle<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.raw.cmp(&other.raw)
    }
}
impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ty = std::any::type_name::<T>();
        let short = ty.rsplit("::").next().unwrap_or(ty);
        write!(f, "Handle<{short}>({:?})", self.raw)
    }
}
impl<T> std::fmt::Display for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
impl<T> From<Handle<T>> for NetRefHandle {
    fn from(h: Handle<T>) -> Self {
        h.raw
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::NetRefHandle {}
    impl<T> Sealed for super::Handle<T> {}
}

/// A handle that may name an object of type `T`: a [`Handle<T>`] (the type is known,
/// and inferred by the call) or an untyped [`NetRefHandle`] (the type is checked by
/// the lookup, which returns `None` on a mismatch). Methods such as
/// [`Server::get`](crate::Server::get) and [`Client::get`](crate::Client::get) take
/// either:
///
/// ```
/// # use replicate::{Handle, NetRefHandle, Replicated, Server};
/// # use replicate::transport::LinkConditioner;
/// # use replicate::transport::memory::MemoryServerTransport;
/// # #[derive(Replicated, Debug, Default)]
/// # #[net(name = "docs::handle_of::Score")]
/// # struct Score { points: u32 }
/// # let registry = std::sync::Arc::new(replicate::ProtocolRegistry::from_inventory().unwrap());
/// # let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
/// # let mut server = Server::new(transport, registry, Default::default()).unwrap();
/// let score = server.spawn(Score { points: 3 }).unwrap();
/// let raw: NetRefHandle = score.into();
/// assert_eq!(server.get(score).unwrap().points, 3);       // typed: inferred
/// assert_eq!(server.get::<Score>(raw).unwrap().points, 3); // untyped: named
/// ```
///
/// Sealed: implemented for these two types only.
pub trait HandleOf<T>: sealed::Sealed + Copy {
    /// The untyped handle.
    fn to_raw(self) -> NetRefHandle;

    /// Where the object may sit in the object table (see [`Handle`]): a hint, checked
    /// before use.
    #[doc(hidden)]
    fn slot(self) -> Option<(u32, u32)> {
        None
    }
}

impl<T> HandleOf<T> for Handle<T> {
    fn to_raw(self) -> NetRefHandle {
        self.raw
    }

    fn slot(self) -> Option<(u32, u32)> {
        (self.slot != NO_SLOT).then_some(self.slot)
    }
}

impl<T> HandleOf<T> for NetRefHandle {
    fn to_raw(self) -> NetRefHandle {
        self
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
