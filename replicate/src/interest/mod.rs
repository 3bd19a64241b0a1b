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
//! - [`index_hash`]: the fast hash of the sets and maps of indices above.
//!
//! - [`manager`]: the server's interest state over all of these ([`InterestManager`]):
//!   what each object and connection was given, and the per-tick decisions.
//!
//! The components are pure, over dense object indices and connection ids. The
//! replication driver owns an [`InterestManager`], applies its scope changes to the
//! writers each tick, and installs hooks on every writer that ask it for priorities and
//! `Custom` switches (`replication::interest_hooks`; the game-facing API is on
//! [`ReplicationServer`](crate::replication::ReplicationServer)).

pub mod budget;
pub mod condition;
pub mod filter;
pub mod index_hash;
pub mod manager;
pub mod priority;

pub use budget::{BandwidthBudget, TokenBucket};
pub use condition::{ConditionContext, CustomConditions};
pub use filter::{
    ConnectionScope, FilterKind, GridFilter, GridFilterConfig, ObjectFilter, ObjectFilterInfo,
    ViewInfo, in_scope,
};
pub use index_hash::{IndexMap, IndexSet};
pub use manager::{InterestConfig, InterestManager, PrioritizerKind, ScopeChange};
pub use priority::{Prioritizer, SpherePrioritizer, SpherePrioritizerConfig, StaticPrioritizer};
