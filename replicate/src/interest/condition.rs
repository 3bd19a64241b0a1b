//! Per-member conditions evaluated per connection.
//!
//! A connection's *role* towards an object decides which members it may receive:
//!
//! - **owner**: the object's owning connection;
//! - **autonomous**: the owner, when the object is marked as controlled by its owner
//!   (a player's pawn); everyone else, and the owner of an uncontrolled object, sees
//!   the object **simulated**;
//! - **initial**: whether this is the creation batch for that connection.
//!
//! [`apply_role_conditions`] is the one place conditions are evaluated: the replication
//! writer applies it to every batch (it replaced the core's own copy of these rules;
//! `replication::apply_conditions` is now a shorthand for it). Per type it loops over
//! the descriptor's per-condition masks (at most nine), so it costs a few mask ANDs per
//! batch. `Custom` members pass here; their per-object runtime switches
//! ([`CustomConditions`]) are applied by the interest layer's writer hook.

use crate::state::{ChangeMask, Condition, StateDescriptor};

/// The role of a connection towards one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConditionContext {
    /// The connection owns the object.
    pub is_owner: bool,
    /// The connection controls the object (owner of an autonomous object).
    pub is_autonomous: bool,
    /// The batch is the object's creation on this connection.
    pub is_initial: bool,
}

/// Whether a member with `condition` (and `init_only`) is sent in `ctx`. `Custom`
/// members count as allowed here; their runtime switch is applied separately.
///
/// ```
/// use replicate::Condition;
/// use replicate::interest::ConditionContext;
/// use replicate::interest::condition::allows;
/// let owner = ConditionContext { is_owner: true, is_autonomous: true, is_initial: false };
/// let other = ConditionContext::default();
/// assert!(allows(Condition::OwnerOnly, false, owner));
/// assert!(!allows(Condition::OwnerOnly, false, other));
/// assert!(allows(Condition::SimulatedOnly, false, other));
/// assert!(!allows(Condition::InitialOnly, false, owner));
/// ```
pub fn allows(condition: Condition, init_only: bool, ctx: ConditionContext) -> bool {
    if init_only && !ctx.is_initial {
        return false;
    }
    match condition {
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

/// Removes from `mask` the members a connection in role `ctx` must not receive: the
/// descriptor's init-only members outside the creation batch and every member whose
/// condition `ctx` does not meet. `Custom` members stay (their per-object switches are
/// applied by the interest layer). This is what the replication writer applies to every
/// batch.
///
/// ```
/// use replicate::interest::ConditionContext;
/// use replicate::interest::condition::apply_role_conditions;
/// # use replicate::{ChangeMask, Condition, StateDescriptor};
/// # use replicate::state::MemberDescriptor;
/// # fn m(name: &'static str, bit: u32, condition: Condition) -> MemberDescriptor {
/// #     MemberDescriptor { name, serializer: "u8", change_mask_offset: bit, change_mask_bits: 1,
/// #         condition, init_only: false, has_notify: false, group: None,
/// #         has_object_references: false, has_dynamic_state: false, max_bits: Some(8), fingerprint: 0 }
/// # }
/// let d = StateDescriptor::new("T", vec![m("hp", 0, Condition::None), m("ammo", 1, Condition::OwnerOnly)], true);
/// let mut mask = ChangeMask::all(2);
/// apply_role_conditions(&mut mask, &d, ConditionContext::default());
/// assert_eq!(mask.to_u64(), 0b01);
/// ```
pub fn apply_role_conditions(mask: &mut ChangeMask, desc: &StateDescriptor, ctx: ConditionContext) {
    if !desc.has_conditions() {
        return;
    }
    if !ctx.is_initial {
        mask.and_not(&desc.init_mask);
    }
    for (cond, bits) in &desc.condition_masks {
        if !allows(*cond, false, ctx) {
            mask.and_not(bits);
        }
    }
}

/// The runtime switches of one object's `Custom` members (all on by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomConditions {
    enabled: ChangeMask,
}

impl CustomConditions {
    /// All switches on, for a type of `bits` change-mask bits.
    pub fn all_enabled(bits: u32) -> Self {
        Self {
            enabled: ChangeMask::all(bits),
        }
    }

    /// Turns the member at `offset..offset + count` on or off; returns whether it changed.
    pub fn set(&mut self, offset: u32, count: u32, enabled: bool) -> bool {
        let was = self.enabled.any_in(offset, count);
        for i in offset..offset + count {
            if enabled {
                self.enabled.set(i);
            } else {
                self.enabled.clear_bit(i);
            }
        }
        was != enabled
    }

    /// Whether the member at `offset` is on.
    pub fn is_enabled(&self, offset: u32) -> bool {
        self.enabled.get(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemberDescriptor;

    fn member(
        name: &'static str,
        offset: u32,
        condition: Condition,
        init_only: bool,
    ) -> MemberDescriptor {
        MemberDescriptor {
            name,
            serializer: "u8",
            change_mask_offset: offset,
            change_mask_bits: 1,
            condition,
            init_only,
            has_notify: false,
            group: None,
            has_object_references: false,
            has_dynamic_state: false,
            max_bits: Some(8),
            fingerprint: 0,
        }
    }

    #[test]
    fn role_table() {
        let d = StateDescriptor::new(
            "T",
            vec![
                member("always", 0, Condition::None, false),
                member("ammo", 1, Condition::OwnerOnly, false),
                member("name", 2, Condition::None, true),
                member("skip", 3, Condition::SkipOwner, false),
                member("custom", 4, Condition::Custom, false),
                member("never", 5, Condition::Never, false),
                member("init_or_owner", 6, Condition::InitialOrOwner, false),
                member("sim", 7, Condition::SimulatedOnly, false),
                member("auto", 8, Condition::AutonomousOnly, false),
            ],
            true,
        );
        let bits = |ctx| {
            let mut m = ChangeMask::all(d.change_mask_bits);
            apply_role_conditions(&mut m, &d, ctx);
            m.iter_ones().collect::<Vec<_>>()
        };
        let owner_ctl = ConditionContext {
            is_owner: true,
            is_autonomous: true,
            is_initial: false,
        };
        let other = ConditionContext::default();
        let other_init = ConditionContext {
            is_initial: true,
            ..other
        };
        let owner_sim = ConditionContext {
            is_owner: true,
            is_autonomous: false,
            is_initial: false,
        };
        assert_eq!(bits(owner_ctl), vec![0, 1, 4, 6, 8]);
        assert_eq!(bits(other), vec![0, 3, 4, 7]);
        assert_eq!(bits(other_init), vec![0, 2, 3, 4, 6, 7]);
        assert_eq!(bits(owner_sim), vec![0, 1, 4, 6, 7]);

        let mut custom = CustomConditions::all_enabled(d.change_mask_bits);
        assert!(custom.set(4, 1, false));
        assert!(!custom.set(4, 1, false));
        assert!(!custom.is_enabled(4) && custom.is_enabled(3));
    }
}
