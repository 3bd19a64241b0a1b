//! The interest layer wired into the replication driver: [`InterestHooks`] (each
//! connection's [`WriterHooks`]: priorities from the prioritizers, `Custom` condition
//! switches) and the [`ReplicationServer`] API game code uses to steer interest —
//! filters, groups, positions, views, allow/deny lists, prioritizers, owners, custom
//! conditions, bandwidth budgets.
//!
//! The server keeps one [`InterestManager`] shared (behind a read-write lock) between
//! itself and its writers' hooks, which only read it: once per tick for the priorities,
//! and per batch only for objects with `Custom` conditions. Each tick,
//! before the writers take the tick's changes, the manager's scope decisions are
//! applied through [`ReplicationWriter::set_in_scope`]: leaving scope destroys the
//! object on that client through the normal lifecycle, re-entering creates it again
//! with its current state. Each packet's stream data is limited to the connection's
//! token bucket, and at most `1 + max_extra_packets` packets carry data per tick.
//!
//! Conditions: the writer applies the role conditions itself (owner, autonomous flag of
//! the object, creation batch); the hooks add the `Custom` switches. An owner change,
//! an autonomous-flag change or a custom switch goes through
//! [`ReplicationWriter::on_conditions_changed`] (members owed afresh), after the
//! object's delta baselines for that connection were released.
//!
//! Scope set by hand with [`ReplicationServer::set_in_scope`] and scope decided here do
//! not know of each other: for objects under a filter, steer scope with the allow and
//! deny lists instead.

use super::{ReplicationServer, ReplicationWriter, WriterHooks};
use crate::handle::NetRefHandle;
use crate::interest::{
    BandwidthBudget, FilterKind, InterestConfig, InterestManager, ObjectFilter, Prioritizer,
    PrioritizerKind,
};
use crate::object::{ConnectionId, InternalIndex, ObjectError, ObjectTable};
use crate::protocol::ErasedState;
use crate::state::{ChangeMask, Condition};
use glam::Vec3;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The interest state shared by a server and its writers' hooks (which only read it,
/// several writer threads at once).
pub type SharedInterest = Arc<RwLock<InterestManager>>;

/// Changes the interest state (a poisoned lock still yields it).
pub(super) fn lock(shared: &SharedInterest) -> RwLockWriteGuard<'_, InterestManager> {
    shared.write().unwrap_or_else(|e| e.into_inner())
}

/// Reads the interest state.
fn read(shared: &SharedInterest) -> RwLockReadGuard<'_, InterestManager> {
    shared.read().unwrap_or_else(|e| e.into_inner())
}

/// A connection's writer hooks backed by the server's [`InterestManager`].
#[derive(Debug)]
pub struct InterestHooks {
    shared: SharedInterest,
    connection: ConnectionId,
}

impl InterestHooks {
    /// Hooks for connection `connection`.
    pub fn new(shared: SharedInterest, connection: ConnectionId) -> Self {
        Self { shared, connection }
    }
}

fn has_custom(table: &ObjectTable, index: InternalIndex) -> bool {
    table.entry_at(index).is_some_and(|e| {
        e.descriptor()
            .condition_masks
            .iter()
            .any(|(c, _)| *c == Condition::Custom)
    })
}

impl WriterHooks for InterestHooks {
    fn priority(&mut self, table: &ObjectTable, index: InternalIndex) -> f32 {
        read(&self.shared).priority(table, self.connection, index)
    }

    fn priorities(&mut self, table: &ObjectTable, objects: &[InternalIndex], out: &mut Vec<f32>) {
        // Static priorities never get here: the writer reads those itself
        // (`static_priorities`).
        let interest = read(&self.shared);
        out.extend(
            objects
                .iter()
                .map(|&i| interest.priority(table, self.connection, i)),
        );
    }

    fn static_priorities(&self) -> bool {
        read(&self.shared).all_static()
    }

    fn filter_members(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        _creating: bool,
        mask: &mut ChangeMask,
    ) {
        if has_custom(table, index) {
            read(&self.shared).filter_custom(table, index, mask);
        }
    }

    fn filters_only_custom(&self) -> bool {
        true
    }
}

impl ReplicationServer {
    pub(super) fn new_interest() -> SharedInterest {
        Arc::new(RwLock::new(InterestManager::default()))
    }

    /// Registers a new connection with the interest layer and installs its hooks.
    pub(super) fn interest_add_connection(
        &mut self,
        id: ConnectionId,
        writer: &mut ReplicationWriter,
    ) {
        lock(&self.interest).add_connection(id);
        writer.set_hooks(Box::new(InterestHooks::new(self.interest.clone(), id)));
    }

    pub(super) fn interest_remove_connection(&mut self, id: ConnectionId) {
        lock(&self.interest).remove_connection(id);
    }

    /// Applies the tick's scope decisions to the writers (before they take the tick's
    /// changes, so an object spawned out of scope is never created on the client).
    pub(super) fn interest_begin_tick(&mut self) {
        let changes = lock(&self.interest).begin_tick(&self.objects, self.now);
        for ch in changes {
            if let Some(w) = super::writer_of(&mut self.connections, &self.objects, ch.connection) {
                w.set_in_scope(&mut self.objects, ch.object, ch.in_scope);
            }
        }
    }

    /// The interest state (read it, or change it directly; the per-handle methods below
    /// are the usual way).
    pub fn interest(&self) -> RwLockWriteGuard<'_, InterestManager> {
        lock(&self.interest)
    }

    /// Replaces the interest settings (grid, sphere, default filter and prioritizer,
    /// default budget, extra packets per tick).
    pub fn set_interest_config(&mut self, config: InterestConfig) {
        lock(&self.interest).set_config(config);
    }

    fn root_index(&self, handle: NetRefHandle) -> Result<InternalIndex, ObjectError> {
        let i = self
            .objects
            .index_of(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        if self.objects.is_subobject(i) {
            return Err(ObjectError::Invalid(
                handle,
                "interest is set on root objects; subobjects follow their owner",
            ));
        }
        Ok(i)
    }

    /// Sets a root object's filter (`None`: the default filter,
    /// [`InterestConfig::default_filter`]). Takes effect at the next tick.
    ///
    /// ```
    /// use glam::Vec3;
    /// use replicate::interest::FilterKind;
    /// use replicate::internals::protocol::Registration;
    /// use replicate::internals::replication::{ReplicationConfig, ReplicationServer};
    /// use replicate::{ProtocolRegistry, Replicated};
    /// use std::sync::Arc;
    ///
    /// #[derive(Replicated, Debug, Default)]
    /// #[net(register = false)]
    /// struct Npc {
    ///     hp: u8,
    /// }
    ///
    /// let registry = ProtocolRegistry::from_registrations([Registration::of::<Npc>()]).unwrap();
    /// let mut server = ReplicationServer::new(Arc::new(registry), ReplicationConfig::default());
    /// let conn = server.add_connection();
    /// let npc = server.objects_mut().spawn(Npc::default()).unwrap();
    /// server.set_object_filter(npc, Some(FilterKind::Spatial)).unwrap();
    /// server.set_object_position(npc, Vec3::new(90_000.0, 0.0, 0.0)).unwrap();
    /// server.set_view_position(conn, Vec3::ZERO);
    /// server.tick(std::time::Duration::ZERO);
    /// // Beyond the grid's cull distance (50 000): never created there.
    /// assert_eq!(server.writer(conn).unwrap().tracked_objects(), 0);
    /// server.set_view_position(conn, Vec3::new(60_000.0, 0.0, 0.0));
    /// server.tick(std::time::Duration::from_millis(33));
    /// assert_eq!(server.writer(conn).unwrap().tracked_objects(), 1);
    /// ```
    pub fn set_object_filter(
        &mut self,
        handle: NetRefHandle,
        filter: Option<FilterKind>,
    ) -> Result<(), ObjectError> {
        let i = self.root_index(handle)?;
        lock(&self.interest).set_filter(i, handle, filter);
        Ok(())
    }

    /// Tags a root object with groups: only connections subscribed to one of them see
    /// it (an empty list lifts the restriction).
    pub fn set_object_groups(
        &mut self,
        handle: NetRefHandle,
        groups: Vec<u32>,
    ) -> Result<(), ObjectError> {
        let i = self.root_index(handle)?;
        lock(&self.interest).set_groups(i, handle, groups);
        Ok(())
    }

    /// Sets a root object's world position (grid filter, sphere prioritizer); call it
    /// whenever the object moves, or use [`set_location_fn`](Self::set_location_fn).
    pub fn set_object_position(
        &mut self,
        handle: NetRefHandle,
        position: Vec3,
    ) -> Result<(), ObjectError> {
        let i = self.root_index(handle)?;
        lock(&self.interest).set_position(i, handle, Some(position));
        Ok(())
    }

    /// Derives the position of every object with quantized state `S` from that state
    /// (evaluated when such an object is created or changes).
    pub fn set_location_fn<S: ErasedState>(
        &mut self,
        f: impl Fn(&S) -> Vec3 + Send + Sync + 'static,
    ) {
        lock(&self.interest).set_location_fn(f);
    }

    /// Adds a user filter; give its [`FilterKind`] to objects.
    pub fn add_object_filter(&mut self, filter: Box<dyn ObjectFilter>) -> FilterKind {
        lock(&self.interest).add_filter(filter)
    }

    /// Adds a user prioritizer; give its [`PrioritizerKind`] to objects.
    pub fn add_prioritizer(&mut self, prioritizer: Box<dyn Prioritizer>) -> PrioritizerKind {
        lock(&self.interest).add_prioritizer(prioritizer)
    }

    /// Sets a root object's prioritizer (`None`: the default,
    /// [`InterestConfig::default_prioritizer`]).
    pub fn set_object_prioritizer(
        &mut self,
        handle: NetRefHandle,
        prioritizer: Option<PrioritizerKind>,
    ) -> Result<(), ObjectError> {
        let i = self.root_index(handle)?;
        lock(&self.interest).set_prioritizer(i, handle, prioritizer);
        Ok(())
    }

    /// Sets a connection's view position.
    pub fn set_view_position(&mut self, id: ConnectionId, position: Vec3) {
        lock(&self.interest).set_view_position(id, position);
    }

    /// Subscribes a connection to a group of objects, or unsubscribes it.
    pub fn set_group_subscription(&mut self, id: ConnectionId, group: u32, subscribed: bool) {
        lock(&self.interest).set_group_subscription(id, group, subscribed);
    }

    /// Puts a root object on or off a connection's allow list (in scope whatever its
    /// filter, unless denied).
    pub fn set_object_allowed(
        &mut self,
        id: ConnectionId,
        handle: NetRefHandle,
        allowed: bool,
    ) -> Result<(), ObjectError> {
        let i = self.root_index(handle)?;
        lock(&self.interest).set_allowed(id, i, handle, allowed);
        Ok(())
    }

    /// Puts a root object on or off a connection's deny list (never in scope).
    pub fn set_object_denied(
        &mut self,
        id: ConnectionId,
        handle: NetRefHandle,
        denied: bool,
    ) -> Result<(), ObjectError> {
        let i = self.root_index(handle)?;
        lock(&self.interest).set_denied(id, i, handle, denied);
        Ok(())
    }

    /// Sets an object's owning connection and whether that connection controls it
    /// (`autonomous`: `AutonomousOnly` members go to the owner, `SimulatedOnly` ones to
    /// everyone else; otherwise the owner sees it simulated too). Takes effect at the
    /// next tick: a connection that newly qualifies for a member receives its current
    /// value, one that no longer does stops receiving it.
    pub fn set_owner(
        &mut self,
        handle: NetRefHandle,
        owner: Option<ConnectionId>,
        autonomous: bool,
    ) -> Result<(), ObjectError> {
        self.objects.set_owner_connection(handle, owner)?;
        self.objects.set_autonomous(handle, autonomous)
    }

    /// Switches an object's `Custom` members named `member` (a member or group name) on
    /// or off, at once for every connection: switching on re-sends the current value.
    /// Returns whether a switch changed; an error when the object has no `Custom`
    /// member of that name.
    pub fn set_custom_condition(
        &mut self,
        handle: NetRefHandle,
        member: &str,
        enabled: bool,
    ) -> Result<bool, ObjectError> {
        let i = self
            .objects
            .index_of(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        let (bits, changed) =
            lock(&self.interest).set_custom_condition(&self.objects, i, member, enabled);
        if !bits.any() {
            return Err(ObjectError::Invalid(
                handle,
                "no Custom member of that name",
            ));
        }
        if changed {
            let owed = if enabled {
                bits
            } else {
                ChangeMask::new(bits.len())
            };
            for conn in self.connections.iter_mut().flatten() {
                let w = conn.writer_mut();
                w.catch_up(&self.objects);
                // Baselines taken while the switch was the other way hold values
                // this connection never received (or may no longer use).
                w.invalidate_baselines(&self.objects, i);
                w.on_conditions_changed(&self.objects, i, &owed);
            }
        }
        Ok(changed)
    }

    /// Sets a connection's bandwidth budget (default
    /// [`InterestConfig::default_budget`], 64 KB/s).
    pub fn set_connection_budget(&mut self, id: ConnectionId, budget: BandwidthBudget) {
        lock(&self.interest).set_budget(id, budget);
    }

    /// Stream bytes written to a connection so far (what its budget paid for).
    pub fn bytes_sent(&self, id: ConnectionId) -> u64 {
        lock(&self.interest).bytes_sent(id)
    }

    /// Sets how many packets beyond the first a connection may write per tick while
    /// data is pending (every connection; default 3).
    pub fn set_max_extra_packets(&mut self, extra: u32) {
        let mut i = lock(&self.interest);
        let mut c = *i.config();
        c.max_extra_packets = extra;
        i.set_config(c);
    }
}
