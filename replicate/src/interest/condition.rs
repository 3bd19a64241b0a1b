//! Per-member conditions evaluated per connection.
//!
//! The rules themselves belong to the state layer
//! ([`Condition::allows`](crate::Condition::allows),
//! [`StateDescriptor::restrict_to_role`](crate::StateDescriptor::restrict_to_role)),
//! which the replication writer applies to every batch. This module owns what the
//! interest layer adds on top: the per-object runtime switches of `Custom` members
//! ([`CustomConditions`]), applied by the interest layer's writer hook.

use crate::state::ChangeMask;
pub use crate::state::ConditionContext;

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
    use crate::state::{Condition, MemberDescriptor, StateDescriptor};

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
            d.restrict_to_role(&mut m, ctx);
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
