//! Replication state: change masks, member conditions, state descriptors, and the two
//! traits the derive implements ([`Replicated`] for the game type, [`ReplicatedState`]
//! for its quantized twin).
//!
//! This layer describes *what* a type replicates and how its members map to change-mask
//! bits. It uses [`crate::serialize`] and [`crate::bits`] and knows nothing about
//! objects, connections or packets.

use crate::bits::{BitReader, BitWriter};
use crate::handle::NetRefHandle;
pub use crate::serialize::ChangeMask;
use crate::serialize::{Result, StableHasher};

/// Who receives a member: evaluated per connection from its role towards the object.
///
/// | condition | sent to |
/// |---|---|
/// | `None` | everyone with the object in scope |
/// | `InitialOnly` | everyone, in the creation batch only |
/// | `OwnerOnly` | the owning connection |
/// | `SkipOwner` | everyone but the owner |
/// | `SimulatedOnly` | connections for which the object is simulated (not the owner's controlled object) |
/// | `AutonomousOnly` | the connection controlling the object (its owner) |
/// | `InitialOrOwner` | the owner always, everyone else in the creation batch only |
/// | `Custom` | where a runtime switch for this object and member is on |
/// | `Never` | nobody (server-only state that still has a descriptor entry) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Condition {
    /// Always sent.
    #[default]
    None,
    /// Sent only with the creation.
    InitialOnly,
    /// Sent only to the owner.
    OwnerOnly,
    /// Sent to everyone but the owner.
    SkipOwner,
    /// Sent where the object is simulated.
    SimulatedOnly,
    /// Sent where the object is autonomous (its owner).
    AutonomousOnly,
    /// Sent to the owner always, to others only with the creation.
    InitialOrOwner,
    /// Sent where a runtime switch allows it.
    Custom,
    /// Never sent.
    Never,
}

impl Condition {
    /// Stable name (part of the protocol identifier).
    pub const fn name(self) -> &'static str {
        match self {
            Condition::None => "None",
            Condition::InitialOnly => "InitialOnly",
            Condition::OwnerOnly => "OwnerOnly",
            Condition::SkipOwner => "SkipOwner",
            Condition::SimulatedOnly => "SimulatedOnly",
            Condition::AutonomousOnly => "AutonomousOnly",
            Condition::InitialOrOwner => "InitialOrOwner",
            Condition::Custom => "Custom",
            Condition::Never => "Never",
        }
    }
}

/// The role of a connection towards one object, which decides the members it may
/// receive:
///
/// - **owner**: the object's owning connection;
/// - **autonomous**: the owner, when the object is controlled by its owner (a player's
///   pawn); everyone else, and the owner of an uncontrolled object, sees the object
///   **simulated**;
/// - **initial**: the batch is the object's creation on this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConditionContext {
    /// The connection owns the object.
    pub is_owner: bool,
    /// The connection controls the object (owner of an autonomous object).
    pub is_autonomous: bool,
    /// The batch is the object's creation on this connection.
    pub is_initial: bool,
}

impl Condition {
    /// Whether a member with this condition (and `init_only`) is sent in `ctx`.
    /// `Custom` members count as allowed here; their per-object runtime switches are
    /// applied by the interest layer.
    ///
    /// ```
    /// use replicate::Condition;
    /// use replicate::internals::state::ConditionContext;
    /// let owner = ConditionContext { is_owner: true, is_autonomous: true, is_initial: false };
    /// let other = ConditionContext::default();
    /// assert!(Condition::OwnerOnly.allows(false, owner));
    /// assert!(!Condition::OwnerOnly.allows(false, other));
    /// assert!(Condition::SimulatedOnly.allows(false, other));
    /// assert!(!Condition::InitialOnly.allows(false, owner));
    /// ```
    pub fn allows(self, init_only: bool, ctx: ConditionContext) -> bool {
        if init_only && !ctx.is_initial {
            return false;
        }
        match self {
            Condition::None | Condition::Custom => true,
            Condition::InitialOnly => ctx.is_initial,
            Condition::OwnerOnly => ctx.is_owner,
            Condition::SkipOwner => !ctx.is_owner,
            Condition::SimulatedOnly => !ctx.is_autonomous,
            Condition::AutonomousOnly => ctx.is_autonomous,
            Condition::InitialOrOwner => ctx.is_owner || ctx.is_initial,
            Condition::Never => false,
        }
    }
}

/// Static facts about one replicated member.
#[derive(Debug, Clone)]
pub struct MemberDescriptor {
    /// The field name (or tuple index) as written in the source.
    pub name: &'static str,
    /// The serializer's [`NAME`](crate::serialize::NetSerializer::NAME).
    pub serializer: &'static str,
    /// First change-mask bit.
    pub change_mask_offset: u32,
    /// Change-mask bits (1, or more for arrays and nested structs).
    pub change_mask_bits: u32,
    /// Who receives it.
    pub condition: Condition,
    /// Sent only with the creation (`#[net(init)]`).
    pub init_only: bool,
    /// Has a `notify` hook.
    pub has_notify: bool,
    /// The `group = "..."` name, if the member shares a change bit with others.
    pub group: Option<&'static str>,
    /// Can contain object references.
    pub has_object_references: bool,
    /// The quantized value owns heap memory.
    pub has_dynamic_state: bool,
    /// Most bits a full value can take, if bounded.
    pub max_bits: Option<u32>,
    /// The serializer's identity and config (stable hash).
    pub fingerprint: u64,
}

/// Everything the runtime needs to know about a replicated type, built once per type.
#[derive(Debug, Clone)]
pub struct StateDescriptor {
    /// The stable wire name (`#[net(name = "...")]` or the type's path).
    pub name: &'static str,
    /// Members in declaration order (skipped fields excluded).
    pub members: Vec<MemberDescriptor>,
    /// Total change-mask bits.
    pub change_mask_bits: u32,
    /// Delta compression allowed for this type (`#[net(delta = false)]` turns it off).
    pub delta_compression: bool,
    /// The stable 64-bit protocol identifier.
    pub protocol_id: u64,
    /// The change-mask bits of members with `init`/`InitialOnly` (sent only at creation).
    pub init_mask: ChangeMask,
    /// For each [`Condition`], the bits of members with that condition
    /// (indexed by `Condition as usize`).
    pub condition_masks: Vec<(Condition, ChangeMask)>,
}

impl StateDescriptor {
    /// Builds a descriptor, computing the protocol identifier, the init mask and the
    /// condition masks from `members`.
    pub fn new(
        name: &'static str,
        members: Vec<MemberDescriptor>,
        delta_compression: bool,
    ) -> Self {
        let change_mask_bits = members
            .iter()
            .map(|m| m.change_mask_offset + m.change_mask_bits)
            .max()
            .unwrap_or(0);
        let mut h = StableHasher::new();
        h.write_str("replicate/protocol/v1");
        h.write_str(name);
        h.write_u32(members.len() as u32);
        for m in &members {
            h.write_str(m.name);
            h.write_u64(m.fingerprint);
            h.write_u32(m.change_mask_offset);
            h.write_u32(m.change_mask_bits);
            h.write_str(m.condition.name());
            h.write_bool(m.init_only);
        }
        let mut init_mask = ChangeMask::new(change_mask_bits);
        let mut condition_masks: Vec<(Condition, ChangeMask)> = Vec::new();
        for m in &members {
            if m.init_only || m.condition == Condition::InitialOnly {
                init_mask.set_range(m.change_mask_offset, m.change_mask_bits);
            }
            if m.condition != Condition::None {
                match condition_masks.iter_mut().find(|(c, _)| *c == m.condition) {
                    Some((_, mask)) => mask.set_range(m.change_mask_offset, m.change_mask_bits),
                    None => {
                        let mut mask = ChangeMask::new(change_mask_bits);
                        mask.set_range(m.change_mask_offset, m.change_mask_bits);
                        condition_masks.push((m.condition, mask));
                    }
                }
            }
        }
        Self {
            name,
            members,
            change_mask_bits,
            delta_compression,
            protocol_id: h.finish(),
            init_mask,
            condition_masks,
        }
    }

    /// The member that owns change-mask bit `bit`.
    pub fn member_for_bit(&self, bit: u32) -> Option<&MemberDescriptor> {
        self.members.iter().find(|m| {
            bit >= m.change_mask_offset && bit < m.change_mask_offset + m.change_mask_bits
        })
    }

    /// Bits of all members with condition `c` (empty mask when none).
    pub fn condition_mask(&self, c: Condition) -> ChangeMask {
        self.condition_masks
            .iter()
            .find(|(cond, _)| *cond == c)
            .map(|(_, m)| m.clone())
            .unwrap_or_else(|| ChangeMask::new(self.change_mask_bits))
    }

    /// Removes from `mask` the members a connection in role `ctx` must not receive:
    /// init-only members outside the creation batch and every member whose condition
    /// `ctx` does not meet (`Custom` members stay; their switches are applied by the
    /// interest layer). The replication writer applies this to every batch; it costs a
    /// few mask operations (at most one per condition kind).
    ///
    /// ```
    /// # use replicate::{ChangeMask, Condition, StateDescriptor};
    /// # use replicate::internals::state::{ConditionContext, MemberDescriptor};
    /// # fn m(name: &'static str, bit: u32, condition: Condition) -> MemberDescriptor {
    /// #     MemberDescriptor { name, serializer: "u8", change_mask_offset: bit, change_mask_bits: 1,
    /// #         condition, init_only: false, has_notify: false, group: None,
    /// #         has_object_references: false, has_dynamic_state: false, max_bits: Some(8), fingerprint: 0 }
    /// # }
    /// let d = StateDescriptor::new("T", vec![m("hp", 0, Condition::None), m("ammo", 1, Condition::OwnerOnly)], true);
    /// let mut mask = ChangeMask::all(2);
    /// d.restrict_to_role(&mut mask, ConditionContext::default());
    /// assert_eq!(mask.to_u64(), 0b01);
    /// ```
    pub fn restrict_to_role(&self, mask: &mut ChangeMask, ctx: ConditionContext) {
        if !self.has_conditions() {
            return;
        }
        if !ctx.is_initial {
            mask.and_not(&self.init_mask);
        }
        for (cond, bits) in &self.condition_masks {
            if !cond.allows(false, ctx) {
                mask.and_not(bits);
            }
        }
    }

    /// Whether any member has a non-`None` condition or is init-only.
    pub fn has_conditions(&self) -> bool {
        !self.condition_masks.is_empty() || self.init_mask.any()
    }
}

/// The quantized twin of a replicated type: what is compared, stored and sent.
///
/// Generated by `#[derive(Replicated)]`; every method is statically dispatched per
/// member. Offsets let a state nest inside another one's change mask.
pub trait ReplicatedState:
    Clone + PartialEq + Default + std::fmt::Debug + Send + Sync + 'static
{
    /// The type's descriptor.
    fn descriptor() -> &'static StateDescriptor;

    /// Sets the bits (from `offset`) of members where `self` differs from `previous`.
    /// Returns whether anything differed.
    fn diff(&self, previous: &Self, mask: &mut ChangeMask, offset: u32) -> bool;

    /// Writes the members selected by `mask` (from `offset`), in declaration order.
    fn serialize(&self, mask: &ChangeMask, offset: u32, writer: &mut BitWriter);

    /// Reads the members selected by `mask` into `self`.
    fn deserialize(&mut self, mask: &ChangeMask, offset: u32, reader: &mut BitReader)
    -> Result<()>;

    /// Writes the members selected by `mask`, each relative to the same member of
    /// `baseline`.
    fn serialize_delta(
        &self,
        baseline: &Self,
        mask: &ChangeMask,
        offset: u32,
        writer: &mut BitWriter,
    );

    /// Reads what [`serialize_delta`](Self::serialize_delta) wrote against the same
    /// `baseline`.
    fn deserialize_delta(
        &mut self,
        baseline: &Self,
        mask: &ChangeMask,
        offset: u32,
        reader: &mut BitReader,
    ) -> Result<()>;

    /// Checks received members selected by `mask`.
    fn validate(&self, mask: &ChangeMask, offset: u32) -> Result<()>;

    /// One step of a baseline prediction for the members selected by `mask`: `self`
    /// (equal to `x`) becomes `x` moved by the step the members' delta code measures
    /// from `z` to `y`, that is `y` written against `z` with
    /// [`serialize_delta`](Self::serialize_delta) and read back against `x`, then
    /// validated (see [`crate::serialize::shift`]).
    ///
    /// Default: runs the code. The derive moves each member with its serializer's
    /// [`shift_masked`](crate::serialize::NetSerializer::shift_masked), which gives the
    /// same value.
    fn shift(&mut self, [x, y, z]: [&Self; 3], mask: &ChangeMask, offset: u32) -> Result<()> {
        crate::serialize::shift::through_code(
            |w| y.serialize_delta(z, mask, offset, w),
            |r| self.deserialize_delta(x, mask, offset, r),
        )?;
        self.validate(mask, offset)
    }

    /// Appends every object reference in the state.
    fn collect_references(&self, out: &mut Vec<NetRefHandle>);
}

/// A typed key for one replicated member of `T`: `#[derive(Replicated)]` generates
/// one per named member as an associated constant, the member's name in upper case
/// (`Player::HEALTH` for `health`), so game code tests change masks without strings.
///
/// ```
/// use replicate::{ChangeMask, Replicated, ReplicatedState};
///
/// #[derive(Replicated, Default)]
/// #[net(register = false)]
/// struct Player { health: u8, #[net(group = "aim")] pitch: i16, ammo: u16, #[net(group = "aim")] yaw: i16 }
///
/// let before = Player::default().to_state();
/// let now = Player { ammo: 3, yaw: 9, ..Default::default() }.to_state();
/// let mut mask = ChangeMask::new(Player::descriptor().change_mask_bits);
/// now.diff(&before, &mut mask, 0);
/// assert!(mask.contains(Player::AMMO) && mask.contains(Player::YAW));
/// assert!(mask.contains(Player::PITCH)); // shares the group's bit
/// assert!(!mask.contains(Player::HEALTH));
/// assert_eq!(Player::AMMO.name(), "ammo");
/// ```
pub struct MemberKey<T> {
    index: usize,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T> Clone for MemberKey<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for MemberKey<T> {}

impl<T> std::fmt::Debug for MemberKey<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MemberKey").field(&self.index).finish()
    }
}

impl<T: Replicated> MemberKey<T> {
    /// The key of the member at `index` in `T`'s descriptor (generated code only).
    #[doc(hidden)]
    pub const fn new(index: usize) -> Self {
        Self {
            index,
            _type: std::marker::PhantomData,
        }
    }

    /// The member's position in `T`'s descriptor.
    pub fn index(self) -> usize {
        self.index
    }

    /// The member's descriptor (name, change-mask bits, serializer, condition).
    pub fn descriptor(self) -> &'static MemberDescriptor {
        &T::descriptor().members[self.index]
    }

    /// The member's name.
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }
}

impl ChangeMask {
    /// Whether any change bit of `member` is set (a mask of `T`, at offset 0).
    pub fn contains<T: Replicated>(&self, member: MemberKey<T>) -> bool {
        let m = member.descriptor();
        self.any_in(m.change_mask_offset, m.change_mask_bits)
    }
}

/// A game type replicated by the system (`#[derive(Replicated)]`).
///
/// `Send + Sync`: the server's writer threads read the object table together (see
/// [`ReplicationConfig::writer_threads`](crate::internals::replication::ReplicationConfig::writer_threads)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a replicated type",
    note = "add `#[derive(Replicated)]` to `{Self}`"
)]
pub trait Replicated: Send + Sync + 'static {
    /// The quantized twin.
    type State: ReplicatedState;

    /// The type's descriptor.
    fn descriptor() -> &'static StateDescriptor {
        <Self::State as ReplicatedState>::descriptor()
    }

    /// Quantizes every member into `out`.
    fn quantize(&self, out: &mut Self::State);

    /// Quantizes into a fresh state.
    fn to_state(&self) -> Self::State {
        let mut s = Self::State::default();
        self.quantize(&mut s);
        s
    }

    /// Quantizes into `state` (the last quantized state) the members whose quantized
    /// value changed, setting their bits in `mask`; returns whether any did. The same
    /// as quantizing into a fresh state, diffing and copying it over, without the fresh
    /// state (`#[derive(Replicated)]` writes it member by member).
    fn poll(&self, state: &mut Self::State, mask: &mut ChangeMask) -> bool {
        let fresh = self.to_state();
        let changed = fresh.diff(state, mask, 0);
        if changed {
            *state = fresh;
        }
        changed
    }

    /// Dequantizes the members selected by `mask` into `self`, then calls the `notify`
    /// hooks of members whose value changed, with their previous value.
    fn apply(&mut self, state: &Self::State, mask: &ChangeMask);

    /// Builds an instance from a complete state (on the receiving side, at creation).
    /// Skipped fields take their `Default`. No `notify` hook runs.
    fn from_state(state: &Self::State) -> Self
    where
        Self: Sized;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_roundtrip_small_and_large() {
        for bits in [0u32, 3, 8, 9, 64, 65, 200] {
            for pattern in 0..4u32 {
                let mut m = ChangeMask::new(bits);
                for i in 0..bits {
                    let on = match pattern {
                        0 => false,
                        1 => true,
                        2 => i % 37 == 5,
                        _ => i % 2 == 0,
                    };
                    if on {
                        m.set(i);
                    }
                }
                let mut w = BitWriter::with_capacity_bits(4096);
                m.write(&mut w);
                let bytes = w.finish().unwrap();
                let mut r = BitReader::new(&bytes);
                let back = ChangeMask::read(bits, &mut r).unwrap();
                assert_eq!(back, m, "bits {bits} pattern {pattern}");
                assert_eq!(r.position(), w.position());
                if bits > 8 {
                    assert!(w.position() <= bits as usize + 1);
                }
            }
        }
    }

    #[test]
    fn masks_stay_small() {
        assert_eq!(std::mem::size_of::<ChangeMask>(), 16);
        let big = ChangeMask::all(200);
        assert_eq!(
            (big.len(), big.count_ones(), big.words().len()),
            (200, 200, 4)
        );
        assert_ne!(ChangeMask::new(64), ChangeMask::new(65));
    }

    #[test]
    fn sparse_mask_is_short() {
        let mut m = ChangeMask::new(200);
        m.set(150);
        let mut w = BitWriter::with_capacity_bits(4096);
        m.write(&mut w);
        assert_eq!(w.position(), 1 + 8 + 8);
    }

    #[test]
    fn bad_sparse_index_is_an_error() {
        let mut w = BitWriter::with_capacity_bits(64);
        w.write_bool(true);
        w.write_bits(0, 4); // one set bit
        w.write_bits(15, 4); // index 15 >= 10
        let bytes = w.finish().unwrap();
        assert!(ChangeMask::read(10, &mut BitReader::new(&bytes)).is_err());
    }

    #[test]
    fn hinted_mask_roundtrip_and_mostly_ones_is_short() {
        for bits in [3u32, 9, 64, 65, 200] {
            for pattern in 0..4u32 {
                let mut m = ChangeMask::all(bits);
                for i in 0..bits {
                    let off = match pattern {
                        0 => false,
                        1 => true,
                        2 => i % 37 == 5,
                        _ => i % 2 == 0,
                    };
                    if off {
                        m.clear_bit(i);
                    }
                }
                for hint in [false, true] {
                    let mut w = BitWriter::with_capacity_bits(4096);
                    m.write_with_hint(&mut w, hint);
                    let bytes = w.finish().unwrap();
                    let mut r = BitReader::new(&bytes);
                    assert_eq!(ChangeMask::read_with_hint(bits, &mut r, hint).unwrap(), m);
                    assert_eq!(r.position(), w.position());
                }
            }
        }
        let mut m = ChangeMask::all(200);
        m.clear_bit(7);
        let mut w = BitWriter::with_capacity_bits(4096);
        m.write_with_hint(&mut w, true);
        assert_eq!(w.position(), 1 + 8 + 8);
    }

    #[test]
    fn set_all_and_ops() {
        let mut a = ChangeMask::all(70);
        assert_eq!(a.count_ones(), 70);
        let b = ChangeMask::from_u64(70, 0b1010);
        a.and_not(&b);
        assert_eq!(a.count_ones(), 68);
        a.and_with(&b);
        assert!(!a.any());
        a.or_with(&b);
        assert_eq!(a.iter_ones().collect::<Vec<_>>(), vec![1, 3]);
    }
}
