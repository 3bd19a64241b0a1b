//! # replicate
//!
//! State replication for authoritative multiplayer game servers, modelled on Unreal
//! Engine 5's **Iris**. Annotate plain structs with `#[derive(Replicated)]`; the derive
//! generates at compile time what Iris builds from reflection at run time (a state
//! descriptor, a change-mask layout, a quantized twin type and statically dispatched
//! quantize / serialize / apply code), and the runtime replicates those objects from a
//! server to many clients over a lossy network, sending only what changed, in as few
//! bits as possible, most important first.
//!
//! ## Layers
//!
//! | module | owns |
//! |---|---|
//! | [`bits`] | the `u64`-word bit writer and bounds-checked reader |
//! | [`serialize`] | the [`NetSerializer`](serialize::NetSerializer) trait and the built-in serializers |
//! | [`state`] | change masks, conditions, descriptors, the [`Replicated`] traits |
//! | [`protocol`] | type registration, wire ids, the registry hash |
//! | [`handle`] | [`NetRefHandle`], the network identity of an object |

#![warn(missing_docs)]

pub mod bits;
pub mod blob;
pub mod connection;
pub mod handle;
pub mod interest;
pub mod link;
pub mod protocol;
pub mod serialize;
pub mod state;
pub mod transport;

pub use handle::NetRefHandle;
pub use protocol::{ProtocolRegistry, Registration};
pub use state::{ChangeMask, Condition, Replicated, ReplicatedState, StateDescriptor};

/// What generated code needs. Not public API: may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::NetRefHandle;
    pub use crate::bits::{BitReader, BitWriter};
    pub use crate::protocol::{Registration, ValidateConfigs};
    pub use crate::serialize::{
        NetDefault, NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher,
    };
    pub use crate::state::{
        ChangeMask, Condition, MemberDescriptor, Replicated, ReplicatedState, StateDescriptor,
    };
    pub use inventory;
    pub use std::sync::OnceLock;

    /// A per-type descriptor cache that also works for generic types (a `static` in a
    /// generic function is shared by all its instantiations, so it cannot be used).
    pub fn descriptor_for<T: 'static>(build: fn() -> StateDescriptor) -> &'static StateDescriptor {
        use std::any::TypeId;
        use std::collections::HashMap;
        use std::sync::RwLock;
        static CACHE: RwLock<Option<HashMap<TypeId, &'static StateDescriptor>>> = RwLock::new(None);
        let id = TypeId::of::<T>();
        if let Some(d) = CACHE
            .read()
            .ok()
            .and_then(|c| c.as_ref().and_then(|m| m.get(&id).copied()))
        {
            return d;
        }
        let built: &'static StateDescriptor = Box::leak(Box::new(build()));
        let mut guard = match CACHE.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard
            .get_or_insert_with(HashMap::new)
            .entry(id)
            .or_insert(built)
    }
}
