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
//! ## Example: every attribute
//!
//! ```
//! use replicate::bits::{BitReader, BitWriter};
//! use replicate::serialize::{IntConfig, Rotator, U8Serializer};
//! use replicate::{ChangeMask, NetEnum, ProtocolRegistry, Replicated, ReplicatedState};
//!
//! /// A named config, reusable across members (Iris's `NetSerializerConfig="..."`).
//! const AMMO_7_BITS: IntConfig = IntConfig { bits: 7 };
//!
//! #[derive(Replicated, Debug, Default)]
//! #[net(crate = "replicate", name = "game::Enemy", delta = true, register = true)]
//! struct Enemy {
//!     /// f32 with range keys: quantized to 0.1 steps in 0..=1000 (14 bits).
//!     #[net(min = 0.0, max = 1000.0, precision = 0.1)]
//!     health: f32,
//!     /// glam::Vec3 without keys: lossless, each axis as a full `f32`.
//!     position: glam::Vec3,
//!     /// Receiving side calls `on_rotation(&old)` after the new value is applied.
//!     #[net(notify = on_rotation)]
//!     rotation: Rotator,
//!     /// An explicit serializer with one of its config keys.
//!     #[net(serializer = U8Serializer, bits = 5, cond = OwnerOnly)]
//!     ammo_in_clip: u8,
//!     /// A whole named config.
//!     #[net(config = AMMO_7_BITS, cond = OwnerOnly)]
//!     reserve_ammo: u8,
//!     /// Sent only in the creation batch.
//!     #[net(init)]
//!     team: Team,
//!     /// Other conditions: SkipOwner, SimulatedOnly, AutonomousOnly, InitialOnly,
//!     /// InitialOrOwner, Custom, Never.
//!     #[net(cond = SkipOwner)]
//!     stance: Stance,
//!     /// Members of a group share one change bit and are sent together.
//!     #[net(group = "aim")]
//!     aim_pitch: i16,
//!     #[net(group = "aim")]
//!     aim_yaw: i16,
//!     /// Strings and arrays cap their length; arrays can track elements in the mask.
//!     #[net(max_len = 32)]
//!     name: String,
//!     #[net(max_len = 8, element_bits = 8)]
//!     buffs: Vec<Buff>,
//!     /// Never replicated; rebuilt as `Default` on the receiving side.
//!     #[net(skip)]
//!     rotation_changes: u32,
//! }
//!
//! impl Enemy {
//!     fn on_rotation(&mut self, _old: &Rotator) {
//!         self.rotation_changes += 1;
//!     }
//! }
//!
//! /// A fieldless member enum: its index in the fewest bits.
//! #[derive(Replicated, Debug, Clone, Copy, PartialEq, Default)]
//! enum Team { #[default] Red, Blue }
//!
//! /// An enum with data: the variant index, then that variant's fields.
//! #[derive(NetEnum, Debug, PartialEq, Default)]
//! enum Stance { #[default] Standing, Crouching { depth: u8 }, Prone(#[net(bits = 4)] u8) }
//!
//! /// A replicated struct used as a member: its own descriptor and change bits.
//! #[derive(Replicated, Debug, Clone, Default, PartialEq)]
//! #[net(register = false)]
//! struct Buff { id: u16, #[net(bits = 6)] stacks: u8 }
//!
//! // Start-up: collect every registered type, check configs, assign wire ids.
//! let registry = ProtocolRegistry::from_inventory().unwrap();
//! assert!(registry.index_of::<Enemy>().is_some());
//!
//! // Server tick: quantize and compare with the last state (the poll).
//! let mut server = Enemy { health: 100.0, ..Default::default() };
//! let last = server.to_state();
//! server.health = 80.0;
//! server.rotation = Rotator::new(0.0, 90.0, 0.0);
//! let now = server.to_state();
//! let bits = Enemy::descriptor().change_mask_bits;
//! let mut mask = ChangeMask::new(bits);
//! now.diff(&last, &mut mask, 0);
//! assert_eq!(mask.to_u64(), 0b101); // health and rotation
//!
//! // Write the mask and the changed members only.
//! let mut w = BitWriter::with_capacity_bytes(1200);
//! mask.write(&mut w);
//! now.serialize(&mask, 0, &mut w);
//! let bytes = w.finish().unwrap();
//!
//! // Client: read, apply, notifications run after the apply.
//! let mut r = BitReader::new(&bytes);
//! let mask = ChangeMask::read(bits, &mut r).unwrap();
//! let mut state = last.clone();
//! state.deserialize(&mask, 0, &mut r).unwrap();
//! let mut client = Enemy::from_state(&last);
//! client.apply(&state, &mask);
//! assert!((client.health - 80.0).abs() <= 0.1);
//! assert_eq!(client.rotation_changes, 1);
//! ```
//!
//! ## Attribute reference
//!
//! Field attributes, `#[net(...)]` on a field of a `#[derive(Replicated)]` struct:
//!
//! | attribute | meaning |
//! |---|---|
//! | `serializer = Path` | the member's [`NetSerializer`](serialize::NetSerializer); its `Source` must be the field's type (otherwise the field's default, below) |
//! | `bits = N` | config key: bits on the wire (`1..=` the type's width for integers, `1..=32` for quantized floats and vectors, `4..=20` for quaternions) |
//! | `min = X`, `max = X` | config keys: the quantization range (`min < max`) |
//! | `precision = X` | config key: the largest acceptable error (`> 0`), not a grid step: the serializer picks a step no coarser than it, so a value in range arrives within `precision` |
//! | `max_len = N` | config key: most bytes of a string, most elements of a container (`>= 1`) |
//! | `element_bits = N` | config key: per-element change-mask bits of a `Vec`/array (`1 + N` bits in all) |
//! | `element = CONFIG`, `max_count = N`, `scale = X` | further config keys, for serializers whose config has them |
//! | `config = CONST` | a whole config value as the base (keys on the same field override its fields) |
//! | `cond = C` | who receives it: `None` (default), `InitialOnly`, `OwnerOnly`, `SkipOwner`, `SimulatedOnly`, `AutonomousOnly`, `InitialOrOwner`, `Custom`, `Never` (see [`Condition`]) |
//! | `init` | sent only with the creation; cannot be combined with `cond = Never`, `InitialOnly` or `InitialOrOwner` |
//! | `skip` | not replicated; `Default` on the receiving side; takes no other attribute |
//! | `notify = method` | after an apply that changed the member, the receiving side calls `fn method(&mut self, old: &FieldType)` (the field type must be `PartialEq`) |
//! | `group = "name"` | members with the same group share one change bit and are sent together; they must share `cond` and `init` |
//!
//! Float members are lossless unless they ask for quantization: any of `min`, `max`,
//! `precision` or `bits` (without `serializer = ...`) selects the type's quantizing
//! serializer ([`NetQuantize`](serialize::NetQuantize)) instead of its lossless
//! default. A quantized `f32`/`f64` needs `min`, `max` and exactly one of `precision` or
//! `bits`; a vector takes a range and a `precision` (or `bits`).
//!
//! A config key becomes a field of the serializer's config struct, so a key the chosen
//! serializer does not have is a compile error at the key. Literal values are checked
//! by the derive (`bits = 0` or negative, `bits` wider than the type, `min >= max`,
//! `precision <= 0`, `max_len = 0`, a quantized float without range or resolution);
//! constant expressions (`bits = MY_BITS`, `max_len = MY_LEN`) and every quantized
//! member's whole config are checked at compile time by `const` assertions (the
//! config's `const_check`), and so are the configs of the built-in serializers named
//! with `serializer = ...`
//! (integers, ranged floats, vectors, `QuatSerializer`, recognised by name) and the
//! float resolution of a ranged `f32`/`f64` (a step finer than the float type holds
//! over the range). What remains (the configs of your own serializers, a ranged float
//! behind a type alias) is checked by
//! [`NetSerializer::validate_config`](serialize::NetSerializer::validate_config) when
//! the type is registered. A field type without a serializer is one error, at the
//! field.
//!
//! Container attributes, `#[net(...)]` on the type:
//!
//! | attribute | meaning |
//! |---|---|
//! | `name = "..."` | the stable wire name (default: the type's identifier; generic types append their type arguments); part of the protocol id, and must be unique in a registry |
//! | `crate = "path"` | where the runtime is, when it is renamed or re-exported (default `::replicate`) |
//! | `delta = false` | turn off delta compression against acknowledged baselines for this type |
//! | `register = false` | do not submit the type to the `inventory` registry (for member-only types and tests); generic types are never submitted by the derive (`register = true` on one is a compile error): register each instantiation with [`register!`]`(Tagged<u32>)` |
//!
//! Default serializer per field type (`<T as NetDefault>::Serializer`):
//!
//! | field type | serializer | default encoding |
//! |---|---|---|
//! | `bool` | `BoolSerializer` | 1 bit |
//! | `u8`, `i8` | `U8Serializer`, `I8Serializer` | 8 bits |
//! | `u16`..`u64`, `i16`..`i64` | `U16Serializer`.. | a zero flag, then the full width (`[1]` for zero) |
//! | `f32`, `f64` | `F32Serializer`, `F64Serializer` | lossless: `[0]` for `0.0`, else `[1]` + 32/64 bits |
//! | `glam::Vec2`, `Vec3`, `Vec4` | `Vec2F32Serializer`, `Vec3F32Serializer`, `Vec4F32Serializer` | lossless: each axis as `f32` (1 or 33 bits) |
//! | `glam::Quat` | `QuatF32Serializer` | lossless: four `f32` components, not renormalised |
//! | `f32`/`f64` with `min`, `max` and `precision` or `bits` | `RangedF32Serializer`, `RangedF64Serializer` | `bits` per value (from `precision` when unset) |
//! | `glam::Vec2`/`Vec3`/`Vec4` with `min`/`max`/`precision`/`bits` | `Vec2Serializer`, `Vec3Serializer`, `Vec4Serializer` | per axis over the range (unset keys: `-2^20..2^20`, precision 1, at most 32 bits) |
//! | `glam::Quat` with `bits` | `QuatSerializer` | smallest three, `2 + 3 * bits` |
//! | [`Transform`](serialize::Transform) | `TransformF32Serializer` | lossless: translation, rotation, scale as above; the quantizing `TransformSerializer` is opt-in with `serializer = TransformSerializer` |
//! | [`Rotator`](serialize::Rotator) | `RotatorSerializer` | 3 "non-zero" bits, 16 bits per non-zero angle |
//! | `String` | `StringSerializer` | `max_len` 1024 bytes, length prefix then UTF-8 |
//! | `Option<T>`, `Vec<T>`, `[T; N]`, `BTreeMap`, `BTreeSet` | the container serializers | elements by `T`'s default; `max_len` 1024 |
//! | `usize`, `isize` | `UsizeSerializer`, `IsizeSerializer` | as `u64` / `i64`; a value that does not fit the receiver's width is a read error |
//! | `u128`, `i128` | `U128Serializer`, `I128Serializer` | a zero flag, then 128 bits |
//! | `char` | `CharSerializer` | as `u32`; not a Unicode scalar value is a read error |
//! | `Box<T>` | `BoxSerializer` | as `T` |
//! | `std::time::Duration` | `DurationSerializer` | seconds as `u64`, then 30 bits of nanoseconds (checked `< 10^9`) |
//! | tuples of 2 to 4 elements | `Tuple2Serializer`.. | each element by its default; `config = (A, B)` |
//! | `VecDeque<T>` | `VecDequeSerializer` | as `Vec<T>` |
//! | `HashMap<K, V>`, `HashSet<T>` | `HashMapSerializer`, `HashSetSerializer` | as `BTreeMap` / `BTreeSet`: sorted by quantized key (deterministic); keys must be `Ord` |
//! | `glam::IVec2/3`, `UVec2/3`, `DVec3`, `Vec3A` | `IVec2Serializer`.. | each component by its scalar default (lossless) |
//! | [`NetRefHandle`] | `NetRefHandleSerializer` | an object reference |
//! | a `#[derive(Replicated)]` struct | [`NestedSerializer`](nested::NestedSerializer) | the inner members selected by its own change bits |
//! | a fieldless enum with `#[default]` (`Replicated` or `NetEnum` derive) | `EnumSerializer` | the variant index in `ceil(log2(variants))` bits |
//! | any other `#[derive(NetEnum)]` enum | generated | the variant index, then that variant's fields |
//!
//! Any other field type needs `serializer = ...`, a `NetDefault` impl, or `skip`.
//!
//! ## Public API
//!
//! Everything a game uses is at the crate root or in six modules:
//!
//! | where | what |
//! |---|---|
//! | root: [`Server`], [`Client`], [`ServerConfig`], [`ClientConfig`], [`ServerEvent`], [`ClientEvent`], [`ClientState`], [`DisconnectReason`], [`FacadeError`], [`NetStats`], [`ConnectionStats`] | the game-loop API: bind or connect, tick, events (typed: [`Changes`]), ownership ([`Client::is_owned`]), statistics |
//! | root: [`Handle`], [`HandleOf`] | typed handles: [`Server::spawn`] returns a [`Handle<T>`] that reads and writes the `T` without naming it again |
//! | root: [`Replicated`] (derive and trait), [`NetEnum`], [`ReplicatedState`], [`StateDescriptor`], [`MemberDescriptor`], [`MemberKey`], [`ChangeMask`], [`Condition`], [`ReplicationFragment`] | replicated types: what the derive generates and the traits behind it |
//! | root: [`ProtocolRegistry`], [`Registration`], [`ProtocolError`] | type registration, wire ids, the registry hash |
//! | root: [`NetRefHandle`], [`ObjectTable`], [`ObjectError`], [`ClientObject`], [`ClientWorld`] | objects on the server (subobjects, dependents, tags, priorities) and on the client |
//! | root: [`ReplicationConfig`], [`DeltaSettings`], [`AttachmentConfig`], [`SplitConfig`] | settings of the replication core, delta compression, messages and huge objects |
//! | root: [`DeliveryMode`], [`MessageInfo`], [`ReceivedMessage`], [`MessageError`], [`MessageStats`] | messages and RPCs |
//! | [`serialize`] | the [`NetSerializer`](serialize::NetSerializer) trait, the built-in serializers and their configs |
//! | [`bits`] | the bit stream, for custom serializers |
//! | [`interest`] | scope filters, prioritizers, bandwidth budgets |
//! | [`time`] | the time model: server ticks, clock synchronisation, snapshot interpolation, input by tick, prediction and reconciliation, lag compensation |
//! | [`transport`] | UDP with netcode.io (feature `udp`), in-memory, the link conditioner, and the traits to plug in another transport |
//! | [`insights`] | network insights: where every bit of a sent packet goes ([`ServerConfig::attribution`], [`Server::attribution`]) and the recorded session file ([`ServerConfig::record`]) read by the `replicate-insights` report |
//!
//! Features: `udp` (the netcode.io transport and `Server::bind` / `Client::connect`)
//! and `serde` (the [`SerdeSerializer`](serialize::SerdeSerializer) fallback), both
//! on by default; `metrics` publishes [`NetStats`] and the attribution counters through
//! the `metrics` facade while insights are on.
//!
//! ## Layers
//!
//! Inside, the runtime is built in layers, each importing only from those below it (a
//! test, `tests/layers.rs`, keeps it so): `bits` → `read_ahead` (cache prefetch
//! hints) → `insights` → `handle` →
//! `serialize` (with the change mask) → `state` → `protocol` → `fragment`, `nested` →
//! `object` → `connection` → `link` → `stream` → `blob` → `interest` → `replication`
//! (batch framing, records, baselines, scheduling, reader, writer, attachments, the
//! server and client drivers) → `time` → `stats` → `transport` → `facade`. The internal
//! layers are reachable through `replicate::internals` for the project's own tests and
//! tools; it is not part of the public API.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bits;
pub mod insights;
pub mod interest;
pub mod serialize;
pub mod time;
pub mod transport;

mod blob;
mod connection;
mod derive_checks;
mod facade;
mod fragment;
mod handle;
mod link;
mod member_ops;
mod nested;
mod object;
mod protocol;
mod read_ahead;
mod replication;
mod state;
mod stats;
mod stream;

pub use blob::{DeliveryMode, SplitConfig};
pub use connection::ConnectionStats;
pub use facade::{
    Changes, Client, ClientConfig, ClientEvent, ClientState, DisconnectReason, FacadeError,
    NetStats, Server, ServerConfig, ServerEvent,
};
pub use fragment::ReplicationFragment;
pub use handle::{Handle, HandleOf, NetRefHandle};
pub use object::{ObjectError, ObjectTable};
pub use protocol::{ProtocolError, ProtocolRegistry, Registration};
pub use replicate_derive::{NetEnum, Replicated};
pub use replication::attachment::{
    AttachmentConfig, MessageError, MessageInfo, MessageStats, ReceivedMessage,
};
pub use replication::{ClientObject, ClientWorld, DeltaSettings, ReplicationConfig};
pub use state::{
    ChangeMask, Condition, MemberDescriptor, MemberKey, Replicated, ReplicatedState,
    StateDescriptor,
};

/// What generated code needs. Not public API: may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::NetRefHandle;
    pub use crate::bits::{BitReader, BitWriter};
    pub use crate::derive_checks::ranged_float_resolution;
    pub use crate::fragment::{
        FragmentError, FragmentOwner, FragmentTraits, Notifications, ReplicationFragment,
        downcast_state, downcast_state_mut, poll_replicated,
    };
    pub use crate::member_ops::{
        CheckConfigs, DiffMembers, MemberFacts, ReadMembers, ShiftMembers, ValidateMembers,
        WriteMembers, apply_member, member_descriptor, poll_group_member,
    };
    pub use crate::nested::support::{
        ApplyNestedMember, ApplyPlainMember, MemberProbe, StubSerializer, StubState,
        dequantize_member, fingerprint, generic_name, prefix_error, quantize_member,
    };
    pub use crate::nested::{NestedReplicated, NestedSerializer};
    pub use crate::protocol::ErasedState;
    pub use crate::protocol::{Registration, ValidateConfigs};
    pub use crate::serialize::NoConfig;
    pub use crate::serialize::{EnumSerializer, NetEnum, RangedF32Serializer, RangedF64Serializer};
    pub use crate::serialize::{
        NetDefault, NetSerializer, NetSerializerConfig, Result, SerializeError, StableHasher,
    };
    pub use crate::state::{
        ChangeMask, Condition, MemberDescriptor, Replicated, ReplicatedState, StateDescriptor,
    };
    pub use crate::{nested::support::NotifyCompare, serialize::NetQuantize, state::MemberKey};
    pub use inventory;
    pub use std::sync::OnceLock;

    /// A compile error at the field's type when it has no default serializer (the
    /// derive's one check of it; its other uses are bounded so they add no error).
    pub const fn assert_net_default<T: ?Sized + NetDefault>() {}

    /// Like [`assert_net_default`], for a field with quantization keys.
    pub const fn assert_net_quantize<T: ?Sized + NetQuantize>() {}

    /// The registration of `T` when it is a complete replicated type. When it is not
    /// (a member type has no serializer, which the derive reports at the member),
    /// [`RegistrationFallback`] answers instead, so the registration adds no second
    /// error: the program does not compile either way.
    pub struct RegistrationProbe<T>(::core::marker::PhantomData<T>);

    impl<T: Replicated + ValidateConfigs> RegistrationProbe<T> {
        /// `T`'s registration.
        pub const REGISTRATION: Registration = Registration::of::<T>();
    }

    /// See [`RegistrationProbe`].
    pub trait RegistrationFallback {
        /// A placeholder, never registered (the crate does not compile).
        const REGISTRATION: Registration = Registration::of::<NeverRegistered>();
    }

    impl<T> RegistrationFallback for RegistrationProbe<T> {}

    /// The placeholder type of [`RegistrationFallback`].
    pub struct NeverRegistered;

    impl Replicated for NeverRegistered {
        type State = StubState;
        fn quantize(&self, _: &mut StubState) {}
        fn apply(&mut self, _: &StubState, _: &ChangeMask) {}
        fn from_state(_: &StubState) -> Self {
            NeverRegistered
        }
    }

    impl ValidateConfigs for NeverRegistered {
        fn validate_configs() -> ::core::result::Result<(), String> {
            Err("a placeholder: #[derive(Replicated)] failed to compile".into())
        }
    }

    /// The descriptor of a non-generic type, built on first use into the type's own
    /// `static` cell. One instance for all types (a generated `get_or_init` would be
    /// one per type).
    pub fn cached_descriptor(
        cell: &'static OnceLock<StateDescriptor>,
        build: fn() -> StateDescriptor,
    ) -> &'static StateDescriptor {
        cell.get_or_init(build)
    }

    /// A per-type descriptor cache that also works for generic types (a `static` in a
    /// generic function is shared by all its instantiations, so it cannot be used).
    #[inline]
    pub fn descriptor_for<T: 'static>(build: fn() -> StateDescriptor) -> &'static StateDescriptor {
        descriptor_for_id(std::any::TypeId::of::<T>(), build)
    }

    /// [`descriptor_for`], one instance for all types.
    fn descriptor_for_id(
        id: std::any::TypeId,
        build: fn() -> StateDescriptor,
    ) -> &'static StateDescriptor {
        use std::any::TypeId;
        use std::collections::HashMap;
        use std::sync::RwLock;
        static CACHE: RwLock<Option<HashMap<TypeId, &'static StateDescriptor>>> = RwLock::new(None);
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

/// The runtime's internal layers, re-exported for the project's own tests, benchmarks
/// and fuzzers.
///
/// **Unstable**: not part of the public API and not covered by semantic versioning;
/// anything here may change or disappear in any release. Game code uses the items at
/// the crate root and in [`bits`], [`serialize`], [`interest`], [`transport`], [`time`]
/// and [`insights`].
#[doc(hidden)]
pub mod internals {
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod blob {
        pub use crate::blob::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod connection {
        pub use crate::connection::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod facade {
        pub use crate::facade::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod fragment {
        pub use crate::fragment::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod handle {
        pub use crate::handle::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod link {
        pub use crate::link::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod nested {
        pub use crate::nested::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod object {
        pub use crate::object::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod protocol {
        pub use crate::protocol::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod replication {
        pub use crate::replication::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod state {
        pub use crate::state::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod stats {
        pub use crate::stats::*;
    }
    /// Internal layer (unstable): see [`crate::internals`].
    pub mod stream {
        pub use crate::stream::*;
    }
}
