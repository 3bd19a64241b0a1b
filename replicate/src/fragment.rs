//! Replication fragments: the bridge between a game object and the replication system
//! (Iris's `FReplicationFragment`). On the sending side a fragment *polls* the object
//! into its quantized state and reports which members changed; on the receiving side it
//! *applies* received members to the object and afterwards *calls the notifications*
//! (rep-notifies) with the previous values. It also reports its *owner*, the object it
//! writes into, so the runtime can run per-object hooks around a receive.
//!
//! `#[derive(Replicated)]` implements [`ReplicationFragment`] for every derived type
//! (the type is its own fragment, like Iris's property fragment). Hand-written fragments
//! implement the same trait and sit beside generated ones, for example a fast-array
//! fragment that polls only items marked dirty and sends only changed items.
//!
//! This module owns the fragment interface and the helpers generated code calls; it
//! knows nothing about connections or packets.
//!
//! ```
//! use replicate::internals::fragment::{Notifications, ReplicationFragment};
//! use replicate::{ChangeMask, Replicated};
//!
//! #[derive(Replicated, Default)]
//! #[net(register = false)]
//! struct Lamp {
//!     #[net(notify = on_lit)]
//!     lit: bool,
//!     #[net(skip)]
//!     flips: u32,
//! }
//! impl Lamp {
//!     fn on_lit(&mut self, _old: &bool) { self.flips += 1; }
//! }
//!
//! // Server: poll the object into its shared quantized state.
//! let mut server = Lamp { lit: true, ..Lamp::default() };
//! let mut state = server.new_state();
//! let mut mask = ChangeMask::new(server.state_descriptor().change_mask_bits);
//! assert!(server.poll_state(state.as_mut(), &mut mask).unwrap());
//! assert_eq!(mask.to_u64(), 0b1);
//!
//! // Client: apply every fragment of the object first, then call notifications.
//! let mut client = Lamp::default();
//! let pending: Notifications = client.apply_state(state.as_ref(), &mask).unwrap();
//! assert!(client.lit && client.flips == 0);
//! client.call_notifies(pending);
//! assert_eq!(client.flips, 1);
//! ```

use crate::protocol::ErasedState;
use crate::state::{ChangeMask, Replicated, StateDescriptor};
use std::any::Any;
use thiserror::Error;

/// What a fragment can do, in the spirit of Iris's `EReplicationFragmentTraits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FragmentTraits(u32);

impl FragmentTraits {
    /// No traits.
    pub const NONE: Self = Self(0);
    /// [`ReplicationFragment::call_notifies`] may call hooks.
    pub const HAS_NOTIFIES: Self = Self(1 << 1);
    /// The fragment keeps the previous value for its notifications.
    pub const KEEP_PREVIOUS_STATE: Self = Self(1 << 2);
    /// The fragment can be sent (server side).
    pub const CAN_REPLICATE: Self = Self(1 << 5);
    /// The fragment can be received (client side).
    pub const CAN_RECEIVE: Self = Self(1 << 6);
    /// [`ReplicationFragment::poll_state`] must run to find changes.
    pub const NEEDS_POLL: Self = Self(1 << 7);
    /// Dirtiness is pushed by the game (the fragment tracks it itself).
    pub const HAS_PUSH_BASED_DIRTINESS: Self = Self(1 << 11);
    /// The state can contain object references.
    pub const HAS_OBJECT_REFERENCE: Self = Self(1 << 13);

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every trait in `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets of traits.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The traits of a generated fragment for `T`.
    #[inline]
    pub fn generated<T: Replicated>(has_notifies: bool) -> Self {
        Self::generated_for(T::descriptor(), has_notifies)
    }

    /// [`generated`](Self::generated), one instance for all types.
    fn generated_for(descriptor: &StateDescriptor, has_notifies: bool) -> Self {
        let mut t = Self::CAN_REPLICATE
            .union(Self::CAN_RECEIVE)
            .union(Self::NEEDS_POLL);
        if has_notifies {
            t = t.union(Self::HAS_NOTIFIES).union(Self::KEEP_PREVIOUS_STATE);
        }
        if descriptor.members.iter().any(|m| m.has_object_references) {
            t = t.union(Self::HAS_OBJECT_REFERENCE);
        }
        t
    }
}

impl std::ops::BitOr for FragmentTraits {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// A fragment was handed a state of another type.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FragmentError {
    /// The state is not the fragment's quantized type.
    #[error("fragment of `{fragment}` was given a state of `{state}`")]
    StateTypeMismatch {
        /// The fragment's descriptor name.
        fragment: &'static str,
        /// The state's descriptor name.
        state: &'static str,
    },
}

/// Notifications recorded by [`ReplicationFragment::apply_state`], to be passed to
/// [`ReplicationFragment::call_notifies`] of the same fragment once every fragment of
/// the object has been applied. Holds the previous values of the changed members that
/// have a `notify` hook (no allocation when there are none).
#[derive(Default)]
pub struct Notifications(Option<Box<dyn Any + Send>>);

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Notifications")
            .field(&self.0.is_some())
            .finish()
    }
}

impl Notifications {
    /// Nothing to notify.
    pub const fn none() -> Self {
        Self(None)
    }

    /// Pending notification data of a fragment (any type it chooses).
    pub fn pending<P: Any + Send>(data: P) -> Self {
        Self(Some(Box::new(data)))
    }

    /// Whether anything is pending.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Takes the pending data back, if it is a `P`.
    pub fn take<P: Any>(self) -> Option<P> {
        self.0?.downcast::<P>().ok().map(|b| *b)
    }
}

/// The object a fragment reads from and writes into (Iris's `CollectOwner`).
#[derive(Debug, Clone, Copy)]
pub struct FragmentOwner {
    /// The owner's Rust type name.
    pub type_name: &'static str,
    /// The owner's type id.
    pub type_id: std::any::TypeId,
}

impl FragmentOwner {
    /// The owner record for type `T`.
    pub fn of<T: 'static>() -> Self {
        Self {
            type_name: std::any::type_name::<T>(),
            type_id: std::any::TypeId::of::<T>(),
        }
    }
}

/// The bridge between a game object and the replication system (object safe).
///
/// Generated for every `#[derive(Replicated)]` type; implement it by hand for fragments
/// with their own change tracking. The runtime calls, per object:
/// - sending side: [`poll_state`](Self::poll_state) once per tick into the object's shared state;
/// - receiving side: [`apply_state`](Self::apply_state) on every fragment of the object, then
///   [`call_notifies`](Self::call_notifies) on each with what its `apply` returned.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a replication fragment",
    note = "add `#[derive(Replicated)]` to `{Self}`, or implement `ReplicationFragment` by hand"
)]
pub trait ReplicationFragment: Send {
    /// What the fragment can do.
    fn traits(&self) -> FragmentTraits;

    /// The descriptor of the fragment's state.
    fn state_descriptor(&self) -> &'static StateDescriptor;

    /// A default quantized state of the fragment's type.
    fn new_state(&self) -> Box<dyn ErasedState>;

    /// Quantizes the owner into `state` (the last polled state), setting the bits of
    /// members that changed in `mask`. Returns whether anything changed.
    fn poll_state(
        &mut self,
        state: &mut dyn ErasedState,
        mask: &mut ChangeMask,
    ) -> Result<bool, FragmentError>;

    /// Writes the members of `state` selected by `mask` into the owner, without calling
    /// notification hooks; returns what [`call_notifies`](Self::call_notifies) needs.
    fn apply_state(
        &mut self,
        state: &dyn ErasedState,
        mask: &ChangeMask,
    ) -> Result<Notifications, FragmentError>;

    /// Calls the notification hooks recorded by [`apply_state`](Self::apply_state), with the
    /// previous values.
    fn call_notifies(&mut self, notifications: Notifications);

    /// Appends the objects this fragment writes into.
    fn collect_owner(&self, owners: &mut Vec<FragmentOwner>);
}

/// Downcasts an erased state to `T`'s twin.
pub fn downcast_state<T: Replicated>(state: &dyn ErasedState) -> Result<&T::State, FragmentError> {
    match state.as_any().downcast_ref::<T::State>() {
        Some(s) => Ok(s),
        None => Err(state_mismatch(T::descriptor(), state.type_descriptor())),
    }
}

/// Downcasts an erased state to `T`'s twin, mutably.
pub fn downcast_state_mut<T: Replicated>(
    state: &mut dyn ErasedState,
) -> Result<&mut T::State, FragmentError> {
    let state_descriptor = state.type_descriptor();
    match state.as_any_mut().downcast_mut::<T::State>() {
        Some(s) => Ok(s),
        None => Err(state_mismatch(T::descriptor(), state_descriptor)),
    }
}

/// The error of a failed downcast (one instance for all types).
#[cold]
fn state_mismatch(fragment: &StateDescriptor, state: &StateDescriptor) -> FragmentError {
    FragmentError::StateTypeMismatch {
        fragment: fragment.name,
        state: state.name,
    }
}

/// A whole-state [`ReplicationFragment::poll_state`] for hand-written fragments over a
/// replicated type: [`Replicated::poll`] into `state` (the type's own poll, member by
/// member in place for a derived type).
pub fn poll_replicated<T: Replicated>(
    obj: &T,
    state: &mut dyn ErasedState,
    mask: &mut ChangeMask,
) -> Result<bool, FragmentError> {
    let fragment = T::descriptor().name;
    let state_name = state.type_descriptor().name;
    let state =
        state
            .as_any_mut()
            .downcast_mut::<T::State>()
            .ok_or(FragmentError::StateTypeMismatch {
                fragment,
                state: state_name,
            })?;
    Ok(obj.poll(state, mask))
}
