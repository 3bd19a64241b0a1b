//! Replicated structs as members of other replicated structs: [`NestedSerializer`], the
//! default serializer of every `#[derive(Replicated)]` type. A nested member occupies
//! the inner type's change-mask bits inside the outer mask, so a change to one inner
//! member sends only that member, and arrays of nested structs track each element.
//!
//! This module also holds the small helpers generated code calls (re-exported through
//! `__private`).

use crate::bits::{BitReader, BitWriter};
use crate::handle::NetRefHandle;
use crate::protocol::ValidateConfigs;
use crate::serialize::{NetSerializer, NoConfig, Result, StableHasher};
use crate::state::{ChangeMask, Replicated, ReplicatedState};
use std::marker::PhantomData;

/// Facts about a derived type that serializers need as constants. Implemented by
/// `#[derive(Replicated)]`.
pub trait NestedReplicated: Replicated + ValidateConfigs {
    /// Whether any member's quantized value owns heap memory.
    const HAS_DYNAMIC_STATE: bool;
    /// Whether any member can contain object references.
    const HAS_OBJECT_REFERENCES: bool;

    /// Applies the members selected by `mask` bits `offset..` (this type's bits inside
    /// an outer mask) in place, then calls this type's `notify` hooks.
    fn apply_at(&mut self, state: &Self::State, mask: &ChangeMask, offset: u32);
}

/// The serializer of a replicated struct used as a member: quantizes to the inner
/// twin, occupies the inner type's change-mask bits and forwards every masked hook to
/// the inner state, at the member's offset.
///
/// Encoding: the inner members selected by the mask, in order (a full value selects all
/// of them). Delta: each selected member against the baseline's.
///
/// On apply, the receiving side applies only the inner members selected by the mask,
/// in place: the inner type's skipped fields keep their values and its own `notify`
/// hooks run. Exceptions, where the member is rebuilt whole with `from_state` (inner
/// skipped fields reset to `Default`, inner hooks do not run): when the outer member has
/// its own `notify` (it needs the old value), is in a `group`, or its type depends on a
/// generic parameter.
///
/// ```
/// use replicate::Replicated;
/// use replicate::serialize::{NetDefault, NetSerializer};
///
/// #[derive(Replicated, Debug, PartialEq, Clone, Default)]
/// #[net(register = false)]
/// struct Stats { hp: u16, #[net(bits = 4)] level: u8 }
///
/// type S = <Stats as NetDefault>::Serializer;
/// assert_eq!(S::change_mask_bits(&Default::default()), 2);
/// ```
pub struct NestedSerializer<T>(PhantomData<fn() -> T>);

impl<T: NestedReplicated> NetSerializer for NestedSerializer<T> {
    type Source = T;
    type Quantized = T::State;
    type Config = NoConfig;
    const NAME: &'static str = "Nested";
    const HAS_DYNAMIC_STATE: bool = T::HAS_DYNAMIC_STATE;
    const HAS_OBJECT_REFERENCES: bool = T::HAS_OBJECT_REFERENCES;

    fn quantize(_: &NoConfig, source: &T) -> T::State {
        source.to_state()
    }

    fn dequantize(_: &NoConfig, quantized: &T::State) -> T {
        T::from_state(quantized)
    }

    fn serialize(_: &NoConfig, quantized: &T::State, writer: &mut BitWriter) {
        let all = ChangeMask::all(T::descriptor().change_mask_bits);
        quantized.serialize(&all, 0, writer);
    }

    fn deserialize(_: &NoConfig, reader: &mut BitReader) -> Result<T::State> {
        let all = ChangeMask::all(T::descriptor().change_mask_bits);
        let mut state = T::State::default();
        state.deserialize(&all, 0, reader)?;
        Ok(state)
    }

    fn serialize_delta(
        _: &NoConfig,
        quantized: &T::State,
        prev: &T::State,
        writer: &mut BitWriter,
    ) {
        let all = ChangeMask::all(T::descriptor().change_mask_bits);
        quantized.serialize_delta(prev, &all, 0, writer);
    }

    fn deserialize_delta(
        _: &NoConfig,
        prev: &T::State,
        reader: &mut BitReader,
    ) -> Result<T::State> {
        let all = ChangeMask::all(T::descriptor().change_mask_bits);
        let mut state = prev.clone();
        state.deserialize_delta(prev, &all, 0, reader)?;
        Ok(state)
    }

    fn validate(_: &NoConfig, quantized: &T::State) -> Result<()> {
        quantized.validate(&ChangeMask::all(T::descriptor().change_mask_bits), 0)
    }

    fn validate_config(_: &NoConfig) -> std::result::Result<(), String> {
        T::validate_configs()
    }

    fn change_mask_bits(_: &NoConfig) -> u32 {
        T::descriptor().change_mask_bits
    }

    fn diff(
        _: &NoConfig,
        current: &T::State,
        previous: &T::State,
        mask: &mut ChangeMask,
        offset: u32,
    ) -> bool {
        current.diff(previous, mask, offset)
    }

    fn serialize_masked(
        _: &NoConfig,
        quantized: &T::State,
        mask: &ChangeMask,
        offset: u32,
        writer: &mut BitWriter,
    ) {
        quantized.serialize(mask, offset, writer)
    }

    fn deserialize_masked(
        _: &NoConfig,
        target: &mut T::State,
        mask: &ChangeMask,
        offset: u32,
        reader: &mut BitReader,
    ) -> Result<()> {
        target.deserialize(mask, offset, reader)
    }

    fn serialize_masked_delta(
        _: &NoConfig,
        quantized: &T::State,
        prev: &T::State,
        mask: &ChangeMask,
        offset: u32,
        writer: &mut BitWriter,
    ) {
        quantized.serialize_delta(prev, mask, offset, writer)
    }

    fn deserialize_masked_delta(
        _: &NoConfig,
        target: &mut T::State,
        prev: &T::State,
        mask: &ChangeMask,
        offset: u32,
        reader: &mut BitReader,
    ) -> Result<()> {
        target.deserialize_delta(prev, mask, offset, reader)
    }

    fn shift_masked(
        _: &NoConfig,
        target: &mut T::State,
        x: &T::State,
        y: &T::State,
        z: &T::State,
        mask: &ChangeMask,
        offset: u32,
    ) -> Result<()> {
        target.shift([x, y, z], mask, offset)
    }

    fn max_bits(_: &NoConfig) -> Option<u32> {
        T::descriptor()
            .members
            .iter()
            .try_fold(0u32, |acc, m| acc.checked_add(m.max_bits?))
    }

    fn collect_references(_: &NoConfig, quantized: &T::State, out: &mut Vec<NetRefHandle>) {
        quantized.collect_references(out)
    }

    fn fingerprint(_: &NoConfig, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        hasher.write_u64(T::descriptor().protocol_id);
    }
}

/// Generated code's helpers. Not public API.
#[doc(hidden)]
pub mod support {
    use super::*;
    use crate::state::StateDescriptor;

    /// The comparison behind `#[net(notify = ...)]`: the hook runs only when the applied
    /// value differs from the old one, so the member's type must be `PartialEq`.
    #[diagnostic::on_unimplemented(
        message = "`#[net(notify = ...)]` compares the old and the new value, but `{Self}` is not `PartialEq`",
        label = "`{Self}` cannot be compared",
        note = "derive or implement `PartialEq` for `{Self}`, or remove `notify` from this member"
    )]
    pub trait NotifyCompare {
        /// Whether `self` (the new value) differs from `old`.
        fn notify_changed(&self, old: &Self) -> bool;
    }

    impl<T: PartialEq> NotifyCompare for T {
        #[inline]
        fn notify_changed(&self, old: &Self) -> bool {
            self != old
        }
    }

    /// The stable fingerprint of a member's serializer and config.
    pub fn fingerprint<S: NetSerializer>(config: &S::Config) -> u64 {
        let mut h = StableHasher::new();
        S::fingerprint(config, &mut h);
        h.finish()
    }

    /// `S::quantize` for a member of type `F` (the bound puts a serializer/field type
    /// mismatch in one error at the field). One instance per serializer, shared by all
    /// members that use it.
    #[inline(never)]
    pub fn quantize_member<S: NetSerializer<Source = F>, F>(
        config: &S::Config,
        value: &F,
    ) -> S::Quantized {
        S::quantize(config, value)
    }

    /// `S::dequantize` for a member of type `F`, like [`quantize_member`].
    #[inline(never)]
    pub fn dequantize_member<S: NetSerializer<Source = F>, F>(
        config: &S::Config,
        quantized: &S::Quantized,
    ) -> F {
        S::dequantize(config, quantized)
    }

    /// `"member `x`: " + error`.
    pub fn prefix_error(prefix: &str, error: String) -> String {
        format!("{prefix}{error}")
    }

    /// The wire name of a generic instantiation: `Base<arg, ...>`, leaked once per
    /// instantiation (the descriptor is cached).
    pub fn generic_name(base: &str, args: &[String]) -> &'static str {
        Box::leak(format!("{base}<{}>", args.join(", ")).into_boxed_str())
    }

    /// Selects how a member is applied (autoref specialization): nested replicated
    /// structs in place through [`NestedReplicated::apply_at`], everything else by
    /// dequantizing the whole value.
    pub struct MemberProbe<S>(PhantomData<fn() -> S>);

    impl<S> MemberProbe<S> {
        /// The probe.
        pub const fn new() -> Self {
            Self(PhantomData)
        }
    }

    impl<S> Default for MemberProbe<S> {
        fn default() -> Self {
            Self::new()
        }
    }

    /// Applies a nested replicated member in place (chosen first).
    pub trait ApplyNestedMember {
        /// The nested type.
        type Target: NestedReplicated;
        /// Applies the inner members of `quantized` selected by `mask` (this member's
        /// bits from `offset`) to `target`; returns the offset of the next member.
        fn apply_member(
            &self,
            config: &NoConfig,
            target: &mut Self::Target,
            quantized: &<Self::Target as Replicated>::State,
            mask: &ChangeMask,
            offset: u32,
        ) -> u32;
    }

    impl<T: NestedReplicated> ApplyNestedMember for &MemberProbe<NestedSerializer<T>> {
        type Target = T;
        #[inline]
        fn apply_member(
            &self,
            _: &NoConfig,
            target: &mut T,
            quantized: &T::State,
            mask: &ChangeMask,
            offset: u32,
        ) -> u32 {
            apply_nested_member(target, quantized, mask, offset)
        }
    }

    /// [`ApplyNestedMember::apply_member`], one instance per nested type.
    #[inline(never)]
    fn apply_nested_member<T: NestedReplicated>(
        target: &mut T,
        quantized: &T::State,
        mask: &ChangeMask,
        offset: u32,
    ) -> u32 {
        let n = T::descriptor().change_mask_bits;
        if mask.any_in(offset, n) {
            target.apply_at(quantized, mask, offset);
        }
        offset + n
    }

    /// Applies any other member by dequantizing it whole.
    pub trait ApplyPlainMember {
        /// The member's serializer.
        type Serializer: NetSerializer;
        /// `*target = dequantize(quantized)` when `mask` selects the member (its bits
        /// from `offset`); returns the offset of the next member.
        fn apply_member(
            &self,
            config: &<Self::Serializer as NetSerializer>::Config,
            target: &mut <Self::Serializer as NetSerializer>::Source,
            quantized: &<Self::Serializer as NetSerializer>::Quantized,
            mask: &ChangeMask,
            offset: u32,
        ) -> u32;
    }

    impl<S: NetSerializer> ApplyPlainMember for MemberProbe<S> {
        type Serializer = S;
        #[inline]
        fn apply_member(
            &self,
            config: &S::Config,
            target: &mut S::Source,
            quantized: &S::Quantized,
            mask: &ChangeMask,
            offset: u32,
        ) -> u32 {
            crate::member_ops::apply_member::<S>(config, target, quantized, mask, offset)
        }
    }

    /// The serializer of an enum whose `#[derive(NetEnum)]` failed: only ever seen by
    /// the type checker (the crate does not compile), so uses of the enum as a member do
    /// not add errors on top of the real one.
    pub struct StubSerializer<T>(PhantomData<fn() -> T>);

    impl<T: 'static> NetSerializer for StubSerializer<T> {
        type Source = T;
        type Quantized = ();
        type Config = NoConfig;
        const NAME: &'static str = "<stub>";
        fn quantize(_: &NoConfig, _: &T) {}
        fn dequantize(_: &NoConfig, _: &()) -> T {
            unreachable!("a type whose derive failed cannot be part of a compiled program")
        }
        fn serialize(_: &NoConfig, _: &(), _: &mut BitWriter) {}
        fn deserialize(_: &NoConfig, _: &mut BitReader) -> Result<()> {
            Ok(())
        }
    }

    /// The state of a type whose derive failed (only ever seen by the type checker).
    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct StubState;

    impl ReplicatedState for StubState {
        fn descriptor() -> &'static StateDescriptor {
            static D: std::sync::OnceLock<StateDescriptor> = std::sync::OnceLock::new();
            D.get_or_init(|| StateDescriptor::new("<stub>", Vec::new(), false))
        }
        fn diff(&self, _: &Self, _: &mut ChangeMask, _: u32) -> bool {
            false
        }
        fn serialize(&self, _: &ChangeMask, _: u32, _: &mut BitWriter) {}
        fn deserialize(&mut self, _: &ChangeMask, _: u32, _: &mut BitReader) -> Result<()> {
            Ok(())
        }
        fn serialize_delta(&self, _: &Self, _: &ChangeMask, _: u32, _: &mut BitWriter) {}
        fn deserialize_delta(
            &mut self,
            _: &Self,
            _: &ChangeMask,
            _: u32,
            _: &mut BitReader,
        ) -> Result<()> {
            Ok(())
        }
        fn validate(&self, _: &ChangeMask, _: u32) -> Result<()> {
            Ok(())
        }
        fn collect_references(&self, _: &mut Vec<NetRefHandle>) {}
    }
}
