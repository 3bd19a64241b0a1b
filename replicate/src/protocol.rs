//! The protocol registry: every replicated type registers itself through `inventory`;
//! [`ProtocolRegistry::from_inventory`] collects them at start-up, sorts them by their
//! stable name, assigns compact wire ids, rejects duplicates and computes the registry
//! hash both ends compare at connect.
//!
//! It also defines the type-erased views of states and objects ([`ErasedState`],
//! [`ErasedObject`]) through which the runtime handles objects of any registered type.

use crate::bits::{BitReader, BitWriter};
use crate::handle::NetRefHandle;
use crate::serialize::{Result, StableHasher};
use crate::state::{ChangeMask, Replicated, ReplicatedState, StateDescriptor};
use std::any::{Any, TypeId};
use thiserror::Error;

/// A quantized state of any replicated type.
pub trait ErasedState: Any + Send + Sync + std::fmt::Debug {
    /// The type's descriptor.
    fn type_descriptor(&self) -> &'static StateDescriptor;
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn ErasedState>;
    /// A shared copy.
    fn clone_arc(&self) -> std::sync::Arc<dyn ErasedState>;
    /// Equality with a state of possibly another type.
    fn eq_dyn(&self, other: &dyn ErasedState) -> bool;
    /// See [`ReplicatedState::diff`]; a state of another type counts as all changed.
    fn diff(&self, previous: &dyn ErasedState, mask: &mut ChangeMask) -> bool;
    /// See [`ReplicatedState::serialize`].
    fn serialize(&self, mask: &ChangeMask, writer: &mut BitWriter);
    /// See [`ReplicatedState::deserialize`].
    fn deserialize(&mut self, mask: &ChangeMask, reader: &mut BitReader) -> Result<()>;
    /// See [`ReplicatedState::serialize_delta`]. A baseline of another type falls back
    /// to a full serialization.
    fn serialize_delta(
        &self,
        baseline: &dyn ErasedState,
        mask: &ChangeMask,
        writer: &mut BitWriter,
    );
    /// See [`ReplicatedState::deserialize_delta`].
    fn deserialize_delta(
        &mut self,
        baseline: &dyn ErasedState,
        mask: &ChangeMask,
        reader: &mut BitReader,
    ) -> Result<()>;
    /// See [`ReplicatedState::validate`].
    fn validate(&self, mask: &ChangeMask) -> Result<()>;
    /// See [`ReplicatedState::shift`]; `self` equals `x`. `false` when a state is of
    /// another type or the step fails.
    fn shift(
        &mut self,
        x: &dyn ErasedState,
        y: &dyn ErasedState,
        z: &dyn ErasedState,
        mask: &ChangeMask,
    ) -> bool;
    /// See [`ReplicatedState::collect_references`].
    fn collect_references(&self, out: &mut Vec<NetRefHandle>);
    /// Upcast for downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
    /// Upcast for downcasting to the concrete type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// Hints the CPU to bring the state in without waiting for it (a read-ahead: the
    /// writer reads the states of the objects it writes next this way).
    #[doc(hidden)]
    fn prefetch(&self);
    /// Makes this state a copy of `other`, reusing what it owns (the baseline storage
    /// copies a snapshot into a state let go of); `false`, unchanged, when `other` is
    /// of another type.
    #[doc(hidden)]
    fn copy_from(&mut self, other: &dyn ErasedState) -> bool;
}

impl<T: ReplicatedState> ErasedState for T {
    #[inline]
    fn prefetch(&self) {
        crate::read_ahead::prefetch(self);
    }
    fn copy_from(&mut self, other: &dyn ErasedState) -> bool {
        match other.as_any().downcast_ref::<T>() {
            Some(o) => {
                self.clone_from(o);
                true
            }
            None => false,
        }
    }
    fn type_descriptor(&self) -> &'static StateDescriptor {
        T::descriptor()
    }
    fn clone_box(&self) -> Box<dyn ErasedState> {
        Box::new(self.clone())
    }
    fn clone_arc(&self) -> std::sync::Arc<dyn ErasedState> {
        std::sync::Arc::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn ErasedState) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn diff(&self, previous: &dyn ErasedState, mask: &mut ChangeMask) -> bool {
        match previous.as_any().downcast_ref::<T>() {
            Some(p) => ReplicatedState::diff(self, p, mask, 0),
            None => {
                mask.set_all();
                true
            }
        }
    }
    fn serialize(&self, mask: &ChangeMask, writer: &mut BitWriter) {
        ReplicatedState::serialize(self, mask, 0, writer)
    }
    fn deserialize(&mut self, mask: &ChangeMask, reader: &mut BitReader) -> Result<()> {
        ReplicatedState::deserialize(self, mask, 0, reader)
    }
    fn serialize_delta(
        &self,
        baseline: &dyn ErasedState,
        mask: &ChangeMask,
        writer: &mut BitWriter,
    ) {
        match baseline.as_any().downcast_ref::<T>() {
            Some(b) => ReplicatedState::serialize_delta(self, b, mask, 0, writer),
            None => ReplicatedState::serialize(self, mask, 0, writer),
        }
    }
    fn deserialize_delta(
        &mut self,
        baseline: &dyn ErasedState,
        mask: &ChangeMask,
        reader: &mut BitReader,
    ) -> Result<()> {
        match baseline.as_any().downcast_ref::<T>() {
            Some(b) => ReplicatedState::deserialize_delta(self, b, mask, 0, reader),
            None => ReplicatedState::deserialize(self, mask, 0, reader),
        }
    }
    fn validate(&self, mask: &ChangeMask) -> Result<()> {
        ReplicatedState::validate(self, mask, 0)
    }
    fn shift(
        &mut self,
        x: &dyn ErasedState,
        y: &dyn ErasedState,
        z: &dyn ErasedState,
        mask: &ChangeMask,
    ) -> bool {
        let [Some(x), Some(y), Some(z)] = [x, y, z].map(|s| s.as_any().downcast_ref::<T>()) else {
            return false;
        };
        ReplicatedState::shift(self, [x, y, z], mask, 0).is_ok()
    }
    fn collect_references(&self, out: &mut Vec<NetRefHandle>) {
        ReplicatedState::collect_references(self, out)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A game object of any replicated type.
pub trait ErasedObject: Any + Send + Sync {
    /// The type's descriptor.
    fn type_descriptor(&self) -> &'static StateDescriptor;
    /// A fresh quantized state.
    fn to_state(&self) -> Box<dyn ErasedState>;
    /// See [`Replicated::poll`]: `None` when `state` is of another type.
    fn poll_into(&self, state: &mut dyn ErasedState, mask: &mut ChangeMask) -> Option<bool>;
    /// Applies the members of `state` selected by `mask`, firing notify hooks.
    fn apply(&mut self, state: &dyn ErasedState, mask: &ChangeMask) -> bool;
    /// Upcast for downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
    /// Upcast for downcasting to the concrete type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Replicated> ErasedObject for T {
    fn type_descriptor(&self) -> &'static StateDescriptor {
        T::descriptor()
    }
    fn poll_into(&self, state: &mut dyn ErasedState, mask: &mut ChangeMask) -> Option<bool> {
        let state = state.as_any_mut().downcast_mut::<T::State>()?;
        Some(Replicated::poll(self, state, mask))
    }
    fn to_state(&self) -> Box<dyn ErasedState> {
        Box::new(Replicated::to_state(self))
    }
    fn apply(&mut self, state: &dyn ErasedState, mask: &ChangeMask) -> bool {
        match state.as_any().downcast_ref::<T::State>() {
            Some(s) => {
                Replicated::apply(self, s, mask);
                true
            }
            None => false,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// What a replicated type submits to `inventory` (the derive does it for non-generic
/// types; call [`ProtocolRegistry::register`] with [`Registration::of`] for generic
/// ones).
#[derive(Clone, Copy)]
pub struct Registration {
    /// The Rust type name (for error messages).
    pub rust_type: fn() -> &'static str,
    /// The Rust type id.
    pub type_id: fn() -> TypeId,
    /// The descriptor.
    pub descriptor: fn() -> &'static StateDescriptor,
    /// A default quantized state.
    pub new_state: fn() -> Box<dyn ErasedState>,
    /// Builds a game object from a complete state (the receiving side's factory).
    pub create: fn(&dyn ErasedState) -> Option<Box<dyn ErasedObject>>,
    /// Checks every member's serializer config.
    pub validate_configs: fn() -> std::result::Result<(), String>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("rust_type", &(self.rust_type)())
            .finish()
    }
}

fn create_object<T: Replicated>(state: &dyn ErasedState) -> Option<Box<dyn ErasedObject>> {
    let s = state.as_any().downcast_ref::<T::State>()?;
    Some(Box::new(T::from_state(s)))
}

/// Config validation hook a replicated type can provide.
pub trait ValidateConfigs {
    /// Checks every member's serializer config.
    fn validate_configs() -> std::result::Result<(), String>;
}

impl Registration {
    /// The registration record of `T`.
    pub const fn of<T: Replicated + ValidateConfigs>() -> Self {
        Self {
            rust_type: std::any::type_name::<T>,
            type_id: TypeId::of::<T>,
            descriptor: <T::State as ReplicatedState>::descriptor,
            new_state: new_state::<T>,
            create: create_object::<T>,
            validate_configs: T::validate_configs,
        }
    }
}

fn new_state<T: Replicated>() -> Box<dyn ErasedState> {
    Box::new(T::State::default())
}

inventory::collect!(Registration);

/// Registers concrete instantiations of generic replicated types, which
/// `#[derive(Replicated)]` cannot register itself (it does not know which
/// instantiations the game uses). Write it at item level, once per instantiation
/// (anywhere in the program that is linked in); each gets its own wire name
/// (`Tagged<u32>`) and protocol id.
///
/// ```
/// use replicate::{ProtocolRegistry, Replicated};
///
/// #[derive(Replicated, Default)]
/// struct Tagged<T: Send + 'static> {
///     tag: u8,
///     value: T,
/// }
///
/// replicate::register!(Tagged<u32>, Tagged<String>);
///
/// let registry = ProtocolRegistry::from_inventory().unwrap();
/// assert!(registry.index_of::<Tagged<u32>>().is_some());
/// assert!(registry.index_of::<Tagged<String>>().is_some());
/// assert!(registry.index_of::<Tagged<u8>>().is_none());
/// ```
///
/// Non-generic types are registered by the derive (unless `#[net(register = false)]`);
/// registering one again is a duplicate-name error at start-up.
#[macro_export]
macro_rules! register {
    ($($ty:ty),+ $(,)?) => {
        $(
            $crate::__private::inventory::submit! {
                $crate::__private::Registration::of::<$ty>()
            }
        )+
    };
}

/// A registry error, raised at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// Two types registered under one stable name.
    #[error(
        "replicated types `{first}` and `{second}` both use the wire name `{name}`; give one of them `#[net(name = \"...\")]`"
    )]
    DuplicateName {
        /// The shared name.
        name: String,
        /// One type.
        first: String,
        /// The other type.
        second: String,
    },
    /// A member's serializer config is invalid.
    #[error("replicated type `{rust_type}`: {message}")]
    InvalidConfig {
        /// The type.
        rust_type: String,
        /// What is wrong.
        message: String,
    },
}

/// A compact wire id for a registered type (its index in the sorted registry).
pub type ProtocolIndex = u16;

/// The registered replicated types, in stable order.
#[derive(Debug, Clone, Default)]
pub struct ProtocolRegistry {
    entries: Vec<Registration>,
    by_type: std::collections::HashMap<TypeId, ProtocolIndex>,
    hash: u64,
}

impl ProtocolRegistry {
    /// Every type registered through `inventory` (all non-generic derived types linked
    /// into the program).
    pub fn from_inventory() -> std::result::Result<Self, ProtocolError> {
        Self::from_registrations(inventory::iter::<Registration>.into_iter().copied())
    }

    /// A registry of exactly these types.
    pub fn from_registrations(
        regs: impl IntoIterator<Item = Registration>,
    ) -> std::result::Result<Self, ProtocolError> {
        let mut reg = Self::default();
        for r in regs {
            reg.insert(r)?;
        }
        reg.rebuild();
        Ok(reg)
    }

    /// Adds one type (for generic types, which are not auto-registered).
    pub fn register(&mut self, r: Registration) -> std::result::Result<(), ProtocolError> {
        self.insert(r)?;
        self.rebuild();
        Ok(())
    }

    fn insert(&mut self, r: Registration) -> std::result::Result<(), ProtocolError> {
        if self.entries.iter().any(|e| (e.type_id)() == (r.type_id)()) {
            return Ok(());
        }
        (r.validate_configs)().map_err(|message| ProtocolError::InvalidConfig {
            rust_type: (r.rust_type)().to_string(),
            message,
        })?;
        let name = (r.descriptor)().name;
        if let Some(e) = self.entries.iter().find(|e| (e.descriptor)().name == name) {
            let (mut first, mut second) =
                ((e.rust_type)().to_string(), (r.rust_type)().to_string());
            if first > second {
                std::mem::swap(&mut first, &mut second);
            }
            return Err(ProtocolError::DuplicateName {
                name: name.to_string(),
                first,
                second,
            });
        }
        self.entries.push(r);
        Ok(())
    }

    fn rebuild(&mut self) {
        self.entries.sort_by_key(|e| (e.descriptor)().name);
        self.by_type = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.type_id)(), i as ProtocolIndex))
            .collect();
        let mut h = StableHasher::new();
        h.write_str("replicate/registry/v1");
        h.write_u32(self.entries.len() as u32);
        for e in &self.entries {
            let d = (e.descriptor)();
            h.write_str(d.name);
            h.write_u64(d.protocol_id);
        }
        self.hash = h.finish();
    }

    /// The registry hash: equal on both ends iff they registered the same types with the
    /// same descriptors.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Number of registered types.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bits needed to write a [`ProtocolIndex`].
    pub fn index_bits(&self) -> u32 {
        crate::bits::bits_for_count(self.entries.len() as u64).max(1)
    }

    /// The wire index of `T`.
    pub fn index_of<T: 'static>(&self) -> Option<ProtocolIndex> {
        self.by_type.get(&TypeId::of::<T>()).copied()
    }

    /// The wire index of a type id.
    pub fn index_of_type_id(&self, id: TypeId) -> Option<ProtocolIndex> {
        self.by_type.get(&id).copied()
    }

    /// The registration at a wire index.
    pub fn get(&self, index: ProtocolIndex) -> Option<&Registration> {
        self.entries.get(index as usize)
    }

    /// All registrations in wire order.
    pub fn iter(&self) -> impl Iterator<Item = (ProtocolIndex, &Registration)> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, r)| (i as ProtocolIndex, r))
    }
}
