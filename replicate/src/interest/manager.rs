//! [`InterestManager`]: the server's interest state — per-object filter, groups,
//! position, prioritizer and `Custom` condition switches; per-connection view, group
//! subscriptions, allow/deny lists, bandwidth budget and packet allowance — and the
//! per-tick decisions made from it (which root objects each connection has in scope,
//! how urgent a dirty object is for a connection, which `Custom` members a batch may
//! carry, how many bits the next packet may hold).
//!
//! It owns no writer and writes nothing: the replication driver
//! ([`ReplicationServer`](crate::replication::ReplicationServer)) asks it for scope
//! changes each tick and applies them to its writers, and the writers' hooks ask it for
//! priorities and member filters. Objects are addressed by internal index, each slot
//! remembering its handle so a reused index never inherits a dead object's settings.
//!
//! Position (for the grid filter and the sphere prioritizer): set explicitly each time
//! the object moves ([`InterestManager::set_position`]) or computed from the object's
//! quantized state by a per-type location function
//! ([`InterestManager::set_location_fn`], evaluated on creation and whenever the object
//! changes). A marked location member in the derive was not added: the location
//! function covers it without another attribute.

use super::budget::{BandwidthBudget, TokenBucket};
use super::condition::CustomConditions;
use super::filter::{
    ConnectionScope, FilterKind, GridFilter, GridFilterConfig, ObjectFilter, ObjectFilterInfo,
    ViewInfo, in_scope,
};
use super::index_hash::IndexSet;
use super::priority::{Prioritizer, SpherePrioritizer, SpherePrioritizerConfig};
use crate::handle::NetRefHandle;
use crate::object::{ConnectionId, InternalIndex, ObjectTable};
use crate::protocol::ErasedState;
use crate::serialize::BitArray;
use crate::state::{ChangeMask, Condition};
use glam::Vec3;
use std::any::TypeId;
use std::collections::HashMap;
use std::time::Duration;

/// Which prioritizer decides an object's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PrioritizerKind {
    /// The object's static priority
    /// ([`ObjectTable::set_priority`](crate::object::ObjectTable::set_priority),
    /// default 1.0).
    #[default]
    Static,
    /// The [`SpherePrioritizer`] around the connection's view position.
    Sphere,
    /// The user prioritizer with this index
    /// ([`InterestManager::add_prioritizer`]).
    Custom(u16),
}

/// Settings of the interest layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterestConfig {
    /// The grid filter's cell size and cull distance (5000 / 50 000).
    pub grid: GridFilterConfig,
    /// The sphere prioritizer's radii and priorities (1000 / 10 000; 1.0 / 0.1 / 0.01).
    pub sphere: SpherePrioritizerConfig,
    /// The filter of objects that were given none (default always relevant). Setting
    /// it to [`FilterKind::Spatial`] puts every object under the grid filter.
    pub default_filter: FilterKind,
    /// The prioritizer of objects that were given none (default static).
    pub default_prioritizer: PrioritizerKind,
    /// The budget of new connections (default 64 KB/s).
    pub default_budget: BandwidthBudget,
    /// Packets a connection may write per tick beyond the first while data is pending
    /// (Iris's `MaxAllowedPacketsIfNotHugeObject`, default 3).
    pub max_extra_packets: u32,
    /// Ticks per second, to size the budget's burst (two ticks' worth, at least one
    /// packet; default 30).
    pub tick_rate: f32,
    /// Below this many budget bytes a packet carries no stream data (default 16).
    pub min_packet_bytes: usize,
}

impl Default for InterestConfig {
    fn default() -> Self {
        Self {
            grid: GridFilterConfig::default(),
            sphere: SpherePrioritizerConfig::default(),
            default_filter: FilterKind::AlwaysRelevant,
            default_prioritizer: PrioritizerKind::Static,
            default_budget: BandwidthBudget::default(),
            max_extra_packets: 3,
            tick_rate: 30.0,
            min_packet_bytes: 16,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct ObjectInterest {
    handle: NetRefHandle,
    filter: Option<FilterKind>,
    groups: Vec<u32>,
    position: Option<Vec3>,
    prioritizer: Option<PrioritizerKind>,
    custom: Option<CustomConditions>,
}

#[derive(Debug, Clone)]
struct ConnectionInterest {
    view: Vec3,
    scope: ConnectionScope,
    /// Root objects this layer took out of the connection's scope, by internal index
    /// (a bit per object: most of a large world is out of a view, and the tick asks
    /// about every object it evaluates).
    excluded: BitArray,
    /// The view position scope was last evaluated from (`None`: never).
    evaluated_view: Option<Vec3>,
    /// Objects whose allow/deny entry changed since the last tick.
    touched: Vec<u32>,
    /// Evaluate every object at the next tick (a new connection, new settings).
    full: bool,
    budget: BandwidthBudget,
    bucket: Option<TokenBucket>,
    packets_this_tick: u32,
    bytes_sent: u64,
}

type LocationFn = Box<dyn Fn(&dyn ErasedState) -> Option<Vec3> + Send + Sync>;

/// The server's interest state and decisions (see the module docs).
///
/// ```
/// use glam::Vec3;
/// use replicate::interest::{FilterKind, InterestConfig, InterestManager};
/// let mut interest = InterestManager::new(InterestConfig::default());
/// interest.add_connection(0);
/// interest.set_view_position(0, Vec3::new(100.0, 0.0, 0.0));
/// assert_eq!(interest.view_position(0), Some(Vec3::new(100.0, 0.0, 0.0)));
/// assert_eq!(interest.config().default_filter, FilterKind::AlwaysRelevant);
/// ```
pub struct InterestManager {
    config: InterestConfig,
    grid: GridFilter,
    sphere: SpherePrioritizer,
    filters: Vec<Box<dyn ObjectFilter>>,
    prioritizers: Vec<Box<dyn Prioritizer>>,
    location_fns: HashMap<TypeId, LocationFn>,
    objects: Vec<ObjectInterest>,
    /// Whether an object was ever given a prioritizer of its own (until then every
    /// priority is the default prioritizer's).
    object_prioritizers: bool,
    /// Objects whose scope may change any tick for reasons this state does not see
    /// (owner-only and user filters, groups): evaluated every tick.
    per_tick: IndexSet,
    /// Objects whose filter, groups or grid presence changed, or that were created,
    /// since the last tick: evaluated once for every connection.
    touched: Vec<u32>,
    connections: Vec<Option<ConnectionInterest>>,
    now: Duration,
}

impl std::fmt::Debug for InterestManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterestManager")
            .field("config", &self.config)
            .field("per_tick", &self.per_tick.len())
            .field("connections", &self.connections.iter().flatten().count())
            .finish()
    }
}

impl Default for InterestManager {
    fn default() -> Self {
        Self::new(InterestConfig::default())
    }
}

/// One scope change the driver applies to a connection's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopeChange {
    /// The connection.
    pub connection: ConnectionId,
    /// The root object's internal index.
    pub object: InternalIndex,
    /// Whether it enters (true) or leaves the connection's scope.
    pub in_scope: bool,
}

impl InterestManager {
    /// An empty interest state.
    pub fn new(config: InterestConfig) -> Self {
        Self {
            grid: GridFilter::new(config.grid),
            sphere: SpherePrioritizer::new(config.sphere),
            config,
            filters: Vec::new(),
            prioritizers: Vec::new(),
            location_fns: HashMap::new(),
            objects: Vec::new(),
            object_prioritizers: false,
            per_tick: IndexSet::default(),
            touched: Vec::new(),
            connections: Vec::new(),
            now: Duration::ZERO,
        }
    }

    /// The settings.
    pub fn config(&self) -> &InterestConfig {
        &self.config
    }

    /// Replaces the settings (the grid is rebuilt with the new cell size; budgets of
    /// existing connections stay).
    pub fn set_config(&mut self, config: InterestConfig) {
        if config.grid != self.config.grid {
            let mut grid = GridFilter::new(config.grid);
            for (i, o) in self.objects.iter().enumerate() {
                if let Some(p) = o.position {
                    grid.update_object(i as u32, p);
                }
            }
            self.grid = grid;
        }
        self.sphere = SpherePrioritizer::new(config.sphere);
        if config.default_filter != self.config.default_filter || config.grid != self.config.grid {
            for c in self.connections.iter_mut().flatten() {
                c.full = true;
            }
        }
        self.config = config;
    }

    /// The grid filter.
    pub fn grid(&self) -> &GridFilter {
        &self.grid
    }

    /// Adds a user filter; objects use it with the returned [`FilterKind::Custom`].
    pub fn add_filter(&mut self, filter: Box<dyn ObjectFilter>) -> FilterKind {
        self.filters.push(filter);
        FilterKind::Custom((self.filters.len() - 1).min(u16::MAX as usize) as u16)
    }

    /// Adds a user prioritizer; objects use it with the returned
    /// [`PrioritizerKind::Custom`].
    pub fn add_prioritizer(&mut self, prioritizer: Box<dyn Prioritizer>) -> PrioritizerKind {
        self.prioritizers.push(prioritizer);
        PrioritizerKind::Custom((self.prioritizers.len() - 1).min(u16::MAX as usize) as u16)
    }

    /// Computes the world position of every object of state type `S` from its quantized
    /// state (on creation and whenever it changes), instead of
    /// [`set_position`](Self::set_position).
    pub fn set_location_fn<S: ErasedState>(
        &mut self,
        f: impl Fn(&S) -> Vec3 + Send + Sync + 'static,
    ) {
        self.location_fns.insert(
            TypeId::of::<S>(),
            Box::new(move |s: &dyn ErasedState| s.as_any().downcast_ref::<S>().map(&f)),
        );
    }

    fn slot(&mut self, index: InternalIndex, handle: NetRefHandle) -> &mut ObjectInterest {
        let i = index as usize;
        if self.objects.len() <= i {
            self.objects.resize_with(i + 1, ObjectInterest::default);
        }
        if self.objects[i].handle != handle {
            self.reset_slot(index);
            self.objects[i].handle = handle;
        }
        &mut self.objects[i]
    }

    fn reset_slot(&mut self, index: InternalIndex) {
        if let Some(o) = self.objects.get_mut(index as usize) {
            *o = ObjectInterest::default();
        }
        self.grid.remove_object(index);
        self.per_tick.remove(&index);
        self.touched.push(index);
        for c in self.connections.iter_mut().flatten() {
            c.scope.allow.remove(&index);
            c.scope.deny.remove(&index);
            c.excluded.clear(index);
        }
    }

    fn object(&self, index: InternalIndex, handle: NetRefHandle) -> Option<&ObjectInterest> {
        self.objects
            .get(index as usize)
            .filter(|o| o.handle == handle && handle.is_valid())
    }

    fn refresh_filtered(&mut self, index: InternalIndex) {
        let per_tick = self.objects.get(index as usize).is_some_and(|o| {
            !o.groups.is_empty()
                || matches!(
                    o.filter,
                    Some(FilterKind::OwnerOnly | FilterKind::Custom(_))
                )
        });
        if per_tick {
            self.per_tick.insert(index);
        } else {
            self.per_tick.remove(&index);
        }
        self.touched.push(index);
    }

    /// Sets the filter of the root object at `index` (`None`: the default filter).
    pub fn set_filter(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        filter: Option<FilterKind>,
    ) {
        self.slot(index, handle).filter = filter;
        self.refresh_filtered(index);
    }

    /// The groups of the object at `index`: a connection subscribed to none of them does
    /// not see it (an object without groups is not restricted by groups).
    pub fn set_groups(&mut self, index: InternalIndex, handle: NetRefHandle, groups: Vec<u32>) {
        self.slot(index, handle).groups = groups;
        self.refresh_filtered(index);
    }

    /// Sets (or with `None` clears) the world position of the object at `index`.
    pub fn set_position(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        position: Option<Vec3>,
    ) {
        let position = position.filter(|p| p.is_finite());
        let slot = self.slot(index, handle);
        let had = slot.position.is_some();
        slot.position = position;
        if had != position.is_some() {
            self.touched.push(index);
        }
        match position {
            // A new cell: every connection evaluates the object again.
            Some(p) => {
                if self.grid.update_object(index, p) {
                    self.touched.push(index);
                }
            }
            None => self.grid.remove_object(index),
        }
    }

    /// The position of the object at `index`, if it has one.
    pub fn position(&self, index: InternalIndex, handle: NetRefHandle) -> Option<Vec3> {
        self.object(index, handle).and_then(|o| o.position)
    }

    /// Sets the prioritizer of the object at `index` (`None`: the default).
    pub fn set_prioritizer(
        &mut self,
        index: InternalIndex,
        handle: NetRefHandle,
        prioritizer: Option<PrioritizerKind>,
    ) {
        self.object_prioritizers |= prioritizer.is_some();
        self.slot(index, handle).prioritizer = prioritizer;
    }

    /// Whether every object's priority is its static one (the default prioritizer is
    /// [`PrioritizerKind::Static`] and no object has one of its own): then
    /// [`priority`](Self::priority) needs no lookup.
    pub fn all_static(&self) -> bool {
        !self.object_prioritizers && self.config.default_prioritizer == PrioritizerKind::Static
    }

    /// Switches the `Custom` members of the object at `index` whose name or group is
    /// `member` on or off. Returns the bits of the switched members (empty when no
    /// `Custom` member has that name) and whether any switch changed.
    pub fn set_custom_condition(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        member: &str,
        enabled: bool,
    ) -> (ChangeMask, bool) {
        let Some(entry) = table.entry_at(index) else {
            return (ChangeMask::new(0), false);
        };
        let desc = entry.descriptor();
        let handle = entry.handle();
        let mut bits = ChangeMask::new(desc.change_mask_bits);
        let slot = self.slot(index, handle);
        let custom = slot
            .custom
            .get_or_insert_with(|| CustomConditions::all_enabled(desc.change_mask_bits));
        let mut changed = false;
        for m in &desc.members {
            if m.condition == Condition::Custom && (m.name == member || m.group == Some(member)) {
                bits.set_range(m.change_mask_offset, m.change_mask_bits);
                changed |= custom.set(m.change_mask_offset, m.change_mask_bits, enabled);
            }
        }
        (bits, changed)
    }

    /// Clears the `Custom` members switched off for the object at `index` from `mask`.
    pub fn filter_custom(&self, table: &ObjectTable, index: InternalIndex, mask: &mut ChangeMask) {
        let Some(entry) = table.entry_at(index) else {
            return;
        };
        let Some(custom) = self
            .object(index, entry.handle())
            .and_then(|o| o.custom.as_ref())
        else {
            return;
        };
        for m in &entry.descriptor().members {
            if m.condition == Condition::Custom && !custom.is_enabled(m.change_mask_offset) {
                for b in m.change_mask_offset..m.change_mask_offset + m.change_mask_bits {
                    mask.clear_bit(b);
                }
            }
        }
    }

    /// Registers a connection with the default budget.
    pub fn add_connection(&mut self, id: ConnectionId) {
        let i = id as usize;
        if self.connections.len() <= i {
            self.connections.resize_with(i + 1, || None);
        }
        let budget = self.config.default_budget;
        self.connections[i] = Some(ConnectionInterest {
            view: Vec3::ZERO,
            scope: ConnectionScope::default(),
            excluded: BitArray::default(),
            evaluated_view: None,
            touched: Vec::new(),
            full: true,
            budget,
            bucket: TokenBucket::for_budget(budget, self.config.tick_rate, 1200),
            packets_this_tick: 0,
            bytes_sent: 0,
        });
    }

    /// Forgets a connection.
    pub fn remove_connection(&mut self, id: ConnectionId) {
        if let Some(c) = self.connections.get_mut(id as usize) {
            *c = None;
        }
    }

    fn conn_mut(&mut self, id: ConnectionId) -> Option<&mut ConnectionInterest> {
        self.connections
            .get_mut(id as usize)
            .and_then(Option::as_mut)
    }

    fn conn(&self, id: ConnectionId) -> Option<&ConnectionInterest> {
        self.connections.get(id as usize).and_then(Option::as_ref)
    }

    /// Sets where a connection's viewer stands (grid filter, sphere prioritizer).
    pub fn set_view_position(&mut self, id: ConnectionId, position: Vec3) {
        if let Some(c) = self.conn_mut(id)
            && position.is_finite()
        {
            c.view = position;
        }
    }

    /// A connection's view position.
    pub fn view_position(&self, id: ConnectionId) -> Option<Vec3> {
        self.conn(id).map(|c| c.view)
    }

    /// Subscribes a connection to a group (or unsubscribes it).
    pub fn set_group_subscription(&mut self, id: ConnectionId, group: u32, subscribed: bool) {
        if let Some(c) = self.conn_mut(id) {
            if subscribed {
                c.scope.groups.insert(group);
            } else {
                c.scope.groups.remove(&group);
            }
        }
    }

    /// Puts an object on (or off) a connection's allow list: always in scope unless
    /// denied.
    pub fn set_allowed(
        &mut self,
        id: ConnectionId,
        index: InternalIndex,
        handle: NetRefHandle,
        on: bool,
    ) {
        self.set_listed(id, index, handle, on, |scope| &mut scope.allow);
    }

    /// Puts an object on (or off) a connection's deny list: never in scope.
    pub fn set_denied(
        &mut self,
        id: ConnectionId,
        index: InternalIndex,
        handle: NetRefHandle,
        on: bool,
    ) {
        self.set_listed(id, index, handle, on, |scope| &mut scope.deny);
    }

    /// Puts an object on (or off) the list `list` picks in a connection's scope, and
    /// marks the object for a scope re-check.
    fn set_listed(
        &mut self,
        id: ConnectionId,
        index: InternalIndex,
        handle: NetRefHandle,
        on: bool,
        list: impl FnOnce(&mut ConnectionScope) -> &mut IndexSet,
    ) {
        self.slot(index, handle);
        if let Some(c) = self.conn_mut(id) {
            c.touched.push(index);
            let list = list(&mut c.scope);
            if on {
                list.insert(index);
            } else {
                list.remove(&index);
            }
        }
    }

    /// Sets a connection's bandwidth budget (the bucket starts full).
    pub fn set_budget(&mut self, id: ConnectionId, budget: BandwidthBudget) {
        let rate = self.config.tick_rate;
        let now = self.now;
        if let Some(c) = self.conn_mut(id) {
            c.budget = budget;
            c.bucket = TokenBucket::for_budget(budget, rate, 1200);
            if let Some(b) = c.bucket.as_mut() {
                b.refill(now);
            }
        }
    }

    /// A connection's bandwidth budget.
    pub fn budget(&self, id: ConnectionId) -> Option<BandwidthBudget> {
        self.conn(id).map(|c| c.budget)
    }

    /// Bytes of stream data a connection's packets carried so far.
    pub fn bytes_sent(&self, id: ConnectionId) -> u64 {
        self.conn(id).map_or(0, |c| c.bytes_sent)
    }

    /// Whether the root object at `index` is in this layer's scope for connection `id`.
    pub fn is_in_scope(&self, table: &ObjectTable, id: ConnectionId, index: InternalIndex) -> bool {
        let Some(c) = self.conn(id) else {
            return false;
        };
        self.evaluate(table, id, c, index).unwrap_or(true)
    }

    /// `None` when the index holds no live root object.
    fn evaluate(
        &self,
        table: &ObjectTable,
        id: ConnectionId,
        c: &ConnectionInterest,
        index: InternalIndex,
    ) -> Option<bool> {
        let entry = table.entry_at(index)?;
        if !entry.is_alive() || entry.root().is_some() {
            return None;
        }
        let o = self.object(index, entry.handle());
        let kind = o
            .and_then(|o| o.filter)
            .unwrap_or(self.config.default_filter);
        let groups = o.map_or(&[][..], |o| &o.groups[..]);
        let position = o.and_then(|o| o.position);
        let info = ObjectFilterInfo {
            object: index,
            owner: entry.owner_connection(),
            position,
        };
        let view = ViewInfo {
            connection: id,
            position: c.view,
        };
        // An object without a position has no place in the grid: it stays in scope.
        let kind = if kind == FilterKind::Spatial && position.is_none() {
            FilterKind::AlwaysRelevant
        } else {
            kind
        };
        Some(in_scope(
            &info,
            kind,
            groups,
            &view,
            &c.scope,
            &self.grid,
            &self.filters,
        ))
    }

    /// Start of a server tick (after the table's `begin_tick`, before the writers take
    /// the tick's changes): forgets destroyed objects, updates positions from location
    /// functions, refills budgets, and returns the scope changes of every connection.
    pub fn begin_tick(&mut self, table: &ObjectTable, now: Duration) -> Vec<ScopeChange> {
        self.now = now;
        for &i in table.tick_destroyed().iter().chain(table.tick_torn_off()) {
            self.reset_slot(i);
        }
        if !self.location_fns.is_empty() {
            let touched: Vec<InternalIndex> = table
                .tick_created()
                .iter()
                .copied()
                .chain(table.tick_dirty())
                .collect();
            for i in touched {
                let Some(e) = table.entry_at(i) else {
                    continue;
                };
                if !e.is_alive() {
                    continue;
                }
                let Some(f) = self.location_fns.get(&e.state().as_any().type_id()) else {
                    continue;
                };
                if let Some(p) = f(e.state()) {
                    let h = e.handle();
                    self.set_position(i, h, Some(p));
                }
            }
        }
        for c in self.connections.iter_mut().flatten() {
            c.packets_this_tick = 0;
            if let Some(b) = c.bucket.as_mut() {
                b.refill(now);
            }
        }
        self.scope_changes(table)
    }

    fn scope_changes(&mut self, table: &ObjectTable) -> Vec<ScopeChange> {
        // Created roots are decided before the writers start them.
        self.touched.extend(table.tick_created().iter().copied());
        let touched = std::mem::take(&mut self.touched);
        let mut changes = Vec::new();
        // Owner-only or user filters as the default: every object, every tick.
        let all = matches!(
            self.config.default_filter,
            FilterKind::OwnerOnly | FilterKind::Custom(_)
        );
        let mut flipped = Vec::new();
        for id in 0..self.connections.len() {
            let Some(c) = self.connections[id].as_mut() else {
                continue;
            };
            let conn_touched = std::mem::take(&mut c.touched);
            let full = std::mem::take(&mut c.full);
            // Grid visibility: objects that moved to another cell are in `touched`;
            // besides them, only the objects of cells that entered or left the view's
            // range since the last evaluation are re-evaluated (nothing when the view
            // stayed put).
            flipped.clear();
            match c.evaluated_view {
                // Every object is evaluated anyway.
                _ if all || full => {}
                Some(from) if from != c.view => self.grid.view_changes(from, c.view, &mut flipped),
                Some(_) => {}
                None => self.grid.visible_objects(c.view, &mut flipped),
            }
            c.evaluated_view = Some(c.view);
            let Some(c) = self.connections[id].as_ref() else {
                continue;
            };
            let id = id as ConnectionId;
            let check = |index: InternalIndex, changes: &mut Vec<ScopeChange>| {
                let Some(want) = self.evaluate(table, id, c, index) else {
                    return;
                };
                if want == c.excluded.get(index) {
                    changes.push(ScopeChange {
                        connection: id,
                        object: index,
                        in_scope: want,
                    });
                }
            };
            if all || full {
                for i in 0..table.index_capacity() as InternalIndex {
                    check(i, &mut changes);
                }
            } else {
                for &i in self
                    .per_tick
                    .iter()
                    .chain(&touched)
                    .chain(&conn_touched)
                    .chain(&flipped)
                {
                    check(i, &mut changes);
                }
            }
        }
        changes.sort_unstable_by_key(|c| (c.connection, c.object));
        changes.dedup();
        for ch in &changes {
            if let Some(c) = self.conn_mut(ch.connection) {
                if ch.in_scope {
                    c.excluded.clear(ch.object);
                } else {
                    c.excluded.set(ch.object);
                }
            }
        }
        changes
    }

    /// The priority the root object at `index` adds this tick for connection `id`.
    pub fn priority(&self, table: &ObjectTable, id: ConnectionId, index: InternalIndex) -> f32 {
        let Some(entry) = table.entry_at(index) else {
            return 0.0;
        };
        let o = self.object(index, entry.handle());
        let kind = o
            .and_then(|o| o.prioritizer)
            .unwrap_or(self.config.default_prioritizer);
        if kind == PrioritizerKind::Static {
            return table.priority(index);
        }
        let info = ObjectFilterInfo {
            object: index,
            owner: entry.owner_connection(),
            position: o.and_then(|o| o.position),
        };
        let view = ViewInfo {
            connection: id,
            position: self.conn(id).map_or(Vec3::ZERO, |c| c.view),
        };
        let p = match kind {
            PrioritizerKind::Static => table.priority(index),
            PrioritizerKind::Sphere => self.sphere.priority(&info, &view),
            PrioritizerKind::Custom(i) => self
                .prioritizers
                .get(i as usize)
                .map_or(table.priority(index), |p| p.priority(&info, &view)),
        };
        if p.is_finite() { p.max(0.0) } else { 0.0 }
    }

    /// How many bits the next packet of connection `id` may carry (`None`: no limit
    /// beyond the packet), or `Some(0)` when it must carry no stream data (budget spent,
    /// or the tick's packets used up). Counts the packet.
    pub fn begin_packet(&mut self, id: ConnectionId) -> Option<usize> {
        let max_packets = 1 + self.config.max_extra_packets;
        let min_bytes = self.config.min_packet_bytes;
        let c = self.conn_mut(id)?;
        if c.packets_this_tick >= max_packets {
            return Some(0);
        }
        let allowed = match &c.bucket {
            None => None,
            Some(b) => {
                let avail = b.available();
                if avail < min_bytes {
                    return Some(0);
                }
                Some(avail * 8)
            }
        };
        c.packets_this_tick += 1;
        allowed
    }

    /// Pays for `bits` of stream data a packet of connection `id` carried.
    pub fn end_packet(&mut self, id: ConnectionId, bits: usize) {
        if let Some(c) = self.conn_mut(id) {
            let bytes = bits.div_ceil(8);
            c.bytes_sent += bytes as u64;
            if let Some(b) = c.bucket.as_mut() {
                b.consume(bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtocolRegistry;
    use std::sync::Arc;

    #[test]
    fn packet_allowance_follows_budget_and_packet_cap() {
        let table = ObjectTable::new(Arc::new(ProtocolRegistry::default()), 0);
        let mut m = InterestManager::new(InterestConfig {
            max_extra_packets: 1,
            ..InterestConfig::default()
        });
        m.add_connection(0);
        m.set_budget(0, BandwidthBudget::BytesPerSecond(3000));
        m.begin_tick(&table, Duration::ZERO);
        // Burst: at least one packet (1200 bytes).
        assert_eq!(m.begin_packet(0), Some(1200 * 8));
        m.end_packet(0, 1000 * 8);
        assert_eq!(m.begin_packet(0), Some(200 * 8));
        m.end_packet(0, 200 * 8);
        // One packet plus one extra per tick.
        assert_eq!(m.begin_packet(0), Some(0));
        m.begin_tick(&table, Duration::from_millis(100));
        // 300 bytes earned in 100 ms.
        assert_eq!(m.begin_packet(0), Some(300 * 8));
        m.end_packet(0, 300 * 8);
        assert_eq!(m.begin_packet(0), Some(0), "spent");
        assert_eq!(m.bytes_sent(0), 1500);
        m.set_budget(0, BandwidthBudget::Unlimited);
        m.begin_tick(&table, Duration::from_millis(133));
        assert_eq!(m.begin_packet(0), None);
        assert_eq!(m.begin_packet(1), None, "unknown connection: no limit");
    }

    #[test]
    fn priorities_are_static_until_a_prioritizer_is_chosen() {
        let mut m = InterestManager::new(InterestConfig::default());
        assert!(m.all_static());
        let h = NetRefHandle::new(3, false, 0);
        m.set_prioritizer(3, h, None);
        assert!(m.all_static(), "the default again");
        m.set_prioritizer(3, h, Some(PrioritizerKind::Sphere));
        assert!(!m.all_static());
        let sphere = InterestManager::new(InterestConfig {
            default_prioritizer: PrioritizerKind::Sphere,
            ..InterestConfig::default()
        });
        assert!(!sphere.all_static());
    }
}
