//! Interest management: who sees which objects, which members, in what order, within
//! what bandwidth.
//!
//! - [`condition`]: per-member conditions (`OwnerOnly`, `InitialOnly`, ...) turned into
//!   a per-connection mask of the members a connection may receive.
//! - [`filter`]: which objects are in a connection's scope (always relevant, owner
//!   only, allow/deny lists, groups, a spatial grid, user filters).
//! - [`priority`]: how urgent an object is for a connection (static, sphere around the
//!   view position, user prioritizers).
//! - [`budget`]: bytes per second per connection (a token bucket).
//!
//! These are pure components over dense object indices and connection ids; the
//! replication writer consults them each tick.

pub mod budget;
pub mod condition;
pub mod filter;
pub mod priority;

pub use budget::{BandwidthBudget, TokenBucket};
pub use condition::{ConditionContext, ConditionMasks, CustomConditions};
pub use filter::{
    ConnectionScope, FilterKind, GridFilter, GridFilterConfig, ObjectFilter, ObjectFilterInfo,
    ViewInfo, in_scope,
};
pub use priority::{Prioritizer, SpherePrioritizer, SpherePrioritizerConfig, StaticPrioritizer};
