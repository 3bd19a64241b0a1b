//! Objects: the handle manager ([`NetRefHandleManager`], handles to dense internal
//! indices) and the server's object table ([`ObjectTable`]): objects of any registered
//! type, their shared quantized state, owning connection, subobjects and dependent
//! objects, and the two change-tracking modes.
//!
//! - **Poll**: game code keeps its own storage (an ECS, say) and hands each object to
//!   [`ObjectTable::poll`] once per tick; the table quantizes it and compares quantized
//!   members with the stored state to derive the change mask.
//! - **Push**: the table owns the object ([`ObjectTable::spawn`]); a mutable accessor
//!   ([`ObjectTable::get_mut`]) marks it dirty, and [`ObjectTable::begin_tick`]
//!   quantizes each such object once, whatever the number of connections. The objects
//!   live in a column per type, each beside its handle, so that a typed handle
//!   ([`Handle`], which remembers its object's column and row) reaches its object in
//!   one read.
//!
//! Either way the result of a tick is a list of objects with a change mask
//! ([`ObjectTable::tick_changes`]) that each connection's writer ORs into its own
//! state: per-connection cost follows dirty data. The list is kept apart from the
//! entries (each entry knows only its slot in it), so sealing and ending a tick read
//! no entry.
//!
//! This module knows nothing about connections beyond an owner id, nor about packets.
//!
//! ```
//! # use replicate::internals::object::ObjectTable;
//! # use replicate::internals::protocol::ProtocolRegistry;
//! # use std::sync::Arc;
//! let mut table = ObjectTable::new(Arc::new(ProtocolRegistry::default()), 0);
//! assert_eq!(table.len(), 0);
//! ```

use crate::handle::{Handle, HandleOf, NetRefHandle};
use crate::protocol::{ErasedObject, ErasedState, ProtocolIndex, ProtocolRegistry};
use crate::read_ahead::READ_AHEAD;
use crate::serialize::BitArray;
use crate::state::{ChangeMask, Replicated, StateDescriptor};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use thiserror::Error;

/// Longest net token string (an object's exported names), in bytes.
pub const MAX_TOKEN_LEN: usize = 255;

/// Most tags per object.
pub const MAX_TAGS: usize = 255;

/// A dense index for fast per-object arrays (Iris's `FInternalNetRefIndex`).
pub type InternalIndex = u32;

/// Identifies a connection of the replication system.
pub type ConnectionId = u32;

/// Allocates handles and maps them to dense internal indices and back.
///
/// ```
/// use replicate::internals::object::NetRefHandleManager;
/// let mut m = NetRefHandleManager::new(0);
/// let h = m.allocate_handle(false);
/// assert_eq!(h.id(), 2); // first dynamic handle
/// let i = m.create_object(h).unwrap();
/// assert_eq!(m.internal_index(h), Some(i));
/// assert_eq!(m.handle_of(i), Some(h));
/// ```
#[derive(Debug, Clone)]
pub struct NetRefHandleManager {
    next_static: u64,
    next_dynamic: u64,
    replication_system_id: u32,
    map: HashMap<NetRefHandle, InternalIndex>,
    handles: Vec<NetRefHandle>,
    free: Vec<InternalIndex>,
}

impl NetRefHandleManager {
    /// A manager for replication system `replication_system_id` (`0..=14`).
    pub fn new(replication_system_id: u32) -> Self {
        Self {
            next_static: 1,
            next_dynamic: 1,
            replication_system_id,
            map: HashMap::new(),
            handles: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Allocates the next static or dynamic handle. Returns the invalid handle (and
    /// does not advance the counter) when that handle is already in use.
    pub fn allocate_handle(&mut self, is_static: bool) -> NetRefHandle {
        let counter = if is_static {
            self.next_static
        } else {
            self.next_dynamic
        };
        let h = NetRefHandle::new(counter, is_static, self.replication_system_id);
        if self.map.contains_key(&h) {
            tracing::error!("NetRefHandleManager: handle {h} already exists");
            return NetRefHandle::INVALID;
        }
        let next = NetRefHandle::next_counter(counter);
        if is_static {
            self.next_static = next;
        } else {
            self.next_dynamic = next;
        }
        h
    }

    /// The static handle for a stable counter both sides agree on (level objects):
    /// equal on server and client without a message.
    pub fn static_handle(&self, counter: u64) -> NetRefHandle {
        NetRefHandle::new(counter, true, self.replication_system_id)
    }

    /// Maps `handle` to a fresh internal index (the remote side uses the server's
    /// handle verbatim). `None` when the handle is invalid or already mapped.
    pub fn create_object(&mut self, handle: NetRefHandle) -> Option<InternalIndex> {
        if !handle.is_valid() || self.map.contains_key(&handle) {
            return None;
        }
        let index = match self.free.pop() {
            Some(i) => {
                self.handles[i as usize] = handle;
                i
            }
            None => {
                self.handles.push(handle);
                (self.handles.len() - 1) as InternalIndex
            }
        };
        self.map.insert(handle, index);
        Some(index)
    }

    /// Removes the handle's mapping but keeps its internal index reserved (until
    /// [`free_index`](Self::free_index)); returns the index.
    pub fn unmap(&mut self, handle: NetRefHandle) -> Option<InternalIndex> {
        self.map.remove(&handle)
    }

    /// Returns an unmapped internal index to the free list.
    pub fn free_index(&mut self, index: InternalIndex) {
        if let Some(h) = self.handles.get_mut(index as usize) {
            *h = NetRefHandle::INVALID;
            self.free.push(index);
        }
    }

    /// Unmaps and frees in one step.
    pub fn destroy_object(&mut self, handle: NetRefHandle) -> Option<InternalIndex> {
        let i = self.unmap(handle)?;
        self.free_index(i);
        Some(i)
    }

    /// Whether `handle` is mapped.
    pub fn is_valid_handle(&self, handle: NetRefHandle) -> bool {
        self.map.contains_key(&handle)
    }

    /// The internal index of a mapped handle.
    pub fn internal_index(&self, handle: NetRefHandle) -> Option<InternalIndex> {
        self.map.get(&handle).copied()
    }

    /// The handle at an internal index (also while unmapped but not yet freed).
    pub fn handle_of(&self, index: InternalIndex) -> Option<NetRefHandle> {
        self.handles
            .get(index as usize)
            .copied()
            .filter(|h| h.is_valid())
    }

    /// One past the largest internal index ever used.
    pub fn index_capacity(&self) -> usize {
        self.handles.len()
    }

    /// Number of mapped handles.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no handle is mapped.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// When a dependent object is written relative to its parent (Iris's
/// `EDependentObjectSchedulingHint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulingHint {
    /// No ordering constraint beyond being considered with the parent.
    #[default]
    Default,
    /// Always written before the parent when both are dirty.
    ScheduleBeforeParent,
    /// Written before the parent while the dependent's creation is pending.
    ScheduleBeforeParentIfInitialState,
}

/// A dependent of an object, with its hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DependentObjectInfo {
    /// The dependent's internal index.
    pub index: InternalIndex,
    /// The ordering hint.
    pub hint: SchedulingHint,
}

/// An object-table error (a misuse by game code, never caused by the network).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObjectError {
    /// The type is not in the protocol registry.
    #[error(
        "type `{0}` is not registered in the protocol registry; `#[derive(Replicated)]` registers \
         non-generic types unless `#[net(register = false)]`, and a generic type needs \
         `replicate::register!(Type<Args>)` for each instantiation"
    )]
    UnregisteredType(&'static str),
    /// The handle does not name a live object.
    #[error("no live object with handle {0}")]
    UnknownHandle(NetRefHandle),
    /// The handle is already in use.
    #[error("handle {0} is already in use")]
    HandleInUse(NetRefHandle),
    /// The object is not of the requested type.
    #[error("object {0} is not of the requested type")]
    WrongType(NetRefHandle),
    /// The operation needs a root object, not a subobject (or the reverse).
    #[error("object {0}: {1}")]
    Invalid(NetRefHandle, &'static str),
}

/// One object of the server's table: one cache line (the tick's quantize and the
/// writers read it for every changed object, and a large world's entries are cold), so
/// what few objects have (links to others, tags, a subobject's owner) lives apart, the
/// type's descriptor comes from the state's type, and the owning connection and root
/// are kept as plain indices with a sentinel for none.
///
/// ```
/// use replicate::internals::object::ObjectEntry;
/// assert_eq!(std::mem::size_of::<Option<ObjectEntry>>(), 64);
/// ```
#[repr(align(64))]
pub struct ObjectEntry {
    handle: NetRefHandle,
    protocol: ProtocolIndex,
    state: Box<dyn ErasedState>,
    /// The push-mode object's row in its type's column ([`NONE`]: none).
    row: u32,
    /// The owning connection ([`NONE`]: none).
    owner_connection: ConnectionId,
    autonomous: bool,
    /// The root owner, for a live subobject ([`NONE`]: none).
    root: InternalIndex,
    /// Subobjects, dependents, parents, tags and a subobject's owner: most objects
    /// have none, so they live apart, made on the first one.
    links: Option<Box<ObjectLinks>>,
    /// Where the object's change sits in the table's open tick changes, when it
    /// changed this tick (a slot holding another object's change, or [`NONE`], means
    /// it did not).
    tick_slot: u32,
    alive: bool,
    torn_off: bool,
    writer_refs: u32,
}

/// An entry's row, owning connection, root or tick slot when it has none.
const NONE: u32 = u32::MAX;

/// `Some(v)` unless `v` is [`NONE`].
#[inline(always)]
fn some(v: u32) -> Option<u32> {
    (v != NONE).then_some(v)
}

/// The push-mode objects of one type, by row: each beside its handle and its
/// changed-since-the-tick flag, so that a typed handle reaches its object in one read
/// (see [`Handle`]).
struct Column<T> {
    rows: Vec<Row<T>>,
    free: Vec<u32>,
}

/// A row of a [`Column`].
struct Row<T> {
    /// The object's handle (invalid for a free row).
    handle: NetRefHandle,
    /// Its internal index.
    index: InternalIndex,
    /// Changed since the last quantize (it is in the table's list of such objects).
    pushed: bool,
    object: Option<T>,
}

impl<T> Default for Column<T> {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            free: Vec::new(),
        }
    }
}

/// A [`Column`] of any type.
trait ErasedColumn: Any + Send + Sync {
    /// Quantizes the object at `row` into `state` (see [`Replicated::poll`]) and
    /// clears its changed flag.
    fn quantize(&mut self, row: u32, state: &mut dyn ErasedState, mask: &mut ChangeMask) -> bool;
    /// Marks `row` changed; returns whether it was not already.
    fn push(&mut self, row: u32) -> bool;
    /// Drops the object at `row` and frees the row.
    fn remove(&mut self, row: u32);
    /// Upcast for downcasting to the column's type.
    fn as_any(&self) -> &dyn Any;
    /// Upcast for downcasting to the column's type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Replicated> ErasedColumn for Column<T> {
    fn quantize(&mut self, row: u32, state: &mut dyn ErasedState, mask: &mut ChangeMask) -> bool {
        let Some(r) = self.rows.get_mut(row as usize) else {
            return false;
        };
        r.pushed = false;
        match (&r.object, state.as_any_mut().downcast_mut::<T::State>()) {
            (Some(o), Some(state)) => o.poll(state, mask),
            _ => false,
        }
    }
    fn push(&mut self, row: u32) -> bool {
        self.rows.get_mut(row as usize).is_some_and(Row::mark)
    }
    fn remove(&mut self, row: u32) {
        if let Some(r) = self.rows.get_mut(row as usize) {
            if r.object.take().is_some() {
                r.handle = NetRefHandle::INVALID;
                self.free.push(row);
            }
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl<T> Row<T> {
    /// Marks the object changed; whether it was not already (nor empty): then it goes
    /// into the table's list of changed objects.
    #[inline]
    fn mark(&mut self) -> bool {
        self.object.is_some() && !std::mem::replace(&mut self.pushed, true)
    }
}

impl<T> Column<T> {
    /// Stores `object` in a free row (or a new one); returns the row.
    fn insert(&mut self, handle: NetRefHandle, index: InternalIndex, object: T) -> u32 {
        let row = Row {
            handle,
            index,
            pushed: false,
            object: Some(object),
        };
        match self.free.pop() {
            Some(r) => {
                self.rows[r as usize] = row;
                r
            }
            None => {
                self.rows.push(row);
                (self.rows.len() - 1) as u32
            }
        }
    }
}

/// An object's links to others and its tags (see [`ObjectEntry`]).
#[derive(Debug, Default)]
struct ObjectLinks {
    /// A subobject's owner (kept after the subobject ended, see
    /// [`ObjectEntry::owner_handle`]).
    owner_handle: Option<NetRefHandle>,
    subobjects: Vec<InternalIndex>,
    dependents: Vec<DependentObjectInfo>,
    parents: Vec<InternalIndex>,
    tags: Vec<String>,
}

impl ObjectEntry {
    /// A value of the words working on the entry reads (its handle, type, owner,
    /// root, flags, and where its object and state live), for a read-ahead (see
    /// [`READ_AHEAD`]); the state itself is prefetched. The entry spans several cache
    /// lines, and the compiler orders its fields: reading most of them loads every
    /// line.
    pub(crate) fn read_ahead(&self) -> usize {
        self.state.prefetch();
        let state = (&*self.state as *const dyn ErasedState).addr();
        self.row as usize
            ^ state
            ^ self.handle.id() as usize
            ^ self.owner_connection as usize
            ^ self.root as usize
            ^ self.writer_refs as usize
    }
}

impl std::fmt::Debug for ObjectEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectEntry")
            .field("handle", &self.handle)
            .field("type", &self.descriptor().name)
            .field("alive", &self.alive)
            .finish()
    }
}

impl ObjectEntry {
    /// The object's handle.
    pub fn handle(&self) -> NetRefHandle {
        self.handle
    }
    /// The wire index of its type.
    pub fn protocol(&self) -> ProtocolIndex {
        self.protocol
    }
    /// Its type's descriptor.
    pub fn descriptor(&self) -> &'static StateDescriptor {
        self.state.type_descriptor()
    }
    /// The shared quantized state (the last quantized values).
    pub fn state(&self) -> &dyn ErasedState {
        self.state.as_ref()
    }
    /// The owning connection, if any.
    pub fn owner_connection(&self) -> Option<ConnectionId> {
        some(self.owner_connection)
    }
    /// Whether the owning connection controls the object (its role is *autonomous*
    /// there, `AutonomousOnly` members go to it); otherwise the owner sees it
    /// *simulated* like everyone else. Default true.
    pub fn is_autonomous(&self) -> bool {
        self.autonomous
    }
    /// The root owner, for a live subobject (a subobject that ended is detached).
    pub fn root(&self) -> Option<InternalIndex> {
        some(self.root)
    }
    /// The owner's handle, for a subobject (kept after it ended: a creation that is
    /// still owed names it).
    pub fn owner_handle(&self) -> Option<NetRefHandle> {
        self.links.as_deref().and_then(|l| l.owner_handle)
    }
    /// The subobjects, for a root.
    pub fn subobjects(&self) -> &[InternalIndex] {
        self.links.as_deref().map_or(&[], |l| &l.subobjects)
    }
    /// The dependent objects.
    pub fn dependents(&self) -> &[DependentObjectInfo] {
        self.links.as_deref().map_or(&[], |l| &l.dependents)
    }
    /// Whether the object is replicated (not destroyed nor torn off).
    pub fn is_alive(&self) -> bool {
        self.alive
    }
    /// Whether it was torn off.
    pub fn is_torn_off(&self) -> bool {
        self.torn_off
    }
    /// The object's tags (replicated as net tokens).
    pub fn tags(&self) -> &[String] {
        self.links.as_deref().map_or(&[], |l| &l.tags)
    }

    fn links_mut(&mut self) -> &mut ObjectLinks {
        self.links.get_or_insert_default()
    }

    /// Changes the links if there are any (a removal makes nothing).
    fn edit_links(&mut self, edit: impl FnOnce(&mut ObjectLinks)) {
        if let Some(links) = self.links.as_deref_mut() {
            edit(links);
        }
    }
}

/// The server's table of replicated objects.
///
/// ```
/// # use replicate::internals::object::ObjectTable;
/// # use replicate::internals::protocol::ProtocolRegistry;
/// # use std::sync::Arc;
/// // With a registry holding a `Door` type:
/// // let h = table.spawn(Door::default())?;            // push mode: the table owns it
/// // table.get_mut::<Door>(h).unwrap().open = true;    // marks it dirty
/// // let h2 = table.spawn_polled(&door)?;              // poll mode: game keeps it
/// // table.poll(h2, &door);                            // once per tick
/// let table = ObjectTable::new(Arc::new(ProtocolRegistry::default()), 0);
/// assert!(table.is_empty());
/// ```
pub struct ObjectTable {
    registry: Arc<ProtocolRegistry>,
    handles: NetRefHandleManager,
    entries: Vec<Option<ObjectEntry>>,
    /// Each object's static priority, by index: read for every dirty object and
    /// connection each tick, so kept dense rather than in the entries.
    priorities: Vec<f32>,
    subobject_set: BitArray,
    /// The objects with dependents (see [`add_dependent`](Self::add_dependent)).
    parent_set: BitArray,
    created: Vec<InternalIndex>,
    destroyed: Vec<InternalIndex>,
    torn_off: Vec<InternalIndex>,
    tags_changed: Vec<InternalIndex>,
    owner_changed: Vec<InternalIndex>,
    /// The objects changed so far this tick, each with the members that changed: the
    /// entries hold only their slot here, so sealing and ending a tick read no entry.
    open: Vec<TickChange>,
    /// The tick's changes as the writers take them, once sealed
    /// ([`seal_tick`](Self::seal_tick)); kept past the tick's end until the next tick
    /// seals its own, for writers that take them late.
    changes: Vec<TickChange>,
    /// `changes` holds every change so far this tick (`open` as it stands).
    sealed: bool,
    /// The push-mode objects, a column per type (by protocol index).
    columns: Vec<Option<Box<dyn ErasedColumn>>>,
    push_dirty: Vec<InternalIndex>,
    pending_free: Vec<InternalIndex>,
    alive_count: usize,
}

/// One object that changed this tick, as every connection's writer takes it: the
/// object, its owner (for a subobject) and the members that changed. Dense, so that
/// each connection goes through the tick's changes without reading the objects'
/// entries.
#[derive(Debug, Clone)]
pub struct TickChange {
    /// The object.
    pub index: InternalIndex,
    /// Its owner, for a subobject.
    pub root: Option<InternalIndex>,
    /// The members that changed this tick.
    pub mask: ChangeMask,
}

impl std::fmt::Debug for ObjectTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectTable")
            .field("objects", &self.alive_count)
            .finish()
    }
}

impl ObjectTable {
    /// An empty table for objects of the types in `registry`.
    pub fn new(registry: Arc<ProtocolRegistry>, replication_system_id: u32) -> Self {
        Self {
            registry,
            handles: NetRefHandleManager::new(replication_system_id),
            entries: Vec::new(),
            priorities: Vec::new(),
            subobject_set: BitArray::default(),
            parent_set: BitArray::default(),
            created: Vec::new(),
            destroyed: Vec::new(),
            torn_off: Vec::new(),
            tags_changed: Vec::new(),
            owner_changed: Vec::new(),
            open: Vec::new(),
            changes: Vec::new(),
            sealed: true,
            columns: Vec::new(),
            push_dirty: Vec::new(),
            pending_free: Vec::new(),
            alive_count: 0,
        }
    }

    /// The protocol registry.
    pub fn registry(&self) -> &Arc<ProtocolRegistry> {
        &self.registry
    }

    /// The handle manager.
    pub fn handles(&self) -> &NetRefHandleManager {
        &self.handles
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.alive_count
    }

    /// Whether there is no live object.
    pub fn is_empty(&self) -> bool {
        self.alive_count == 0
    }

    /// One past the largest internal index in use (size of per-object arrays).
    pub fn index_capacity(&self) -> usize {
        self.entries.len()
    }

    fn insert<T: Replicated>(
        &mut self,
        handle: NetRefHandle,
        state: Box<dyn ErasedState>,
        storage: Option<T>,
        root: Option<InternalIndex>,
    ) -> Result<NetRefHandle, ObjectError> {
        let protocol = self
            .registry
            .index_of::<T>()
            .ok_or(ObjectError::UnregisteredType(std::any::type_name::<T>()))?;
        if !handle.is_valid() {
            return Err(ObjectError::HandleInUse(handle));
        }
        let index = self
            .handles
            .create_object(handle)
            .ok_or(ObjectError::HandleInUse(handle))?;
        let entry = ObjectEntry {
            handle,
            protocol,
            state,
            row: NONE,
            owner_connection: NONE,
            autonomous: true,
            root: root.unwrap_or(NONE),
            links: root.and_then(|r| self.entry_at(r)).map(|owner| {
                Box::new(ObjectLinks {
                    owner_handle: Some(owner.handle),
                    ..ObjectLinks::default()
                })
            }),
            tick_slot: NONE,
            alive: true,
            torn_off: false,
            writer_refs: 0,
        };
        let i = index as usize;
        if self.entries.len() <= i {
            self.entries.resize_with(i + 1, || None);
        }
        self.entries[i] = Some(entry);
        if let Some(object) = storage {
            let p = protocol as usize;
            if self.columns.len() <= p {
                self.columns.resize_with(p + 1, || None);
            }
            // (Each type has its own protocol index, so the column there is `T`'s.)
            self.columns[p].get_or_insert_with(|| Box::new(Column::<T>::default()));
            let column = self.column_mut::<T>(p);
            debug_assert!(
                column.is_some(),
                "protocol {p} has a column of another type"
            );
            let row = column.map(|c| c.insert(handle, index, object));
            if let (Some(row), Some(Some(e))) = (row, self.entries.get_mut(i)) {
                e.row = row;
            }
        }
        if self.priorities.len() <= i {
            self.priorities.resize(i + 1, 0.0);
        }
        self.priorities[i] = 1.0;
        if let Some(r) = root {
            self.subobject_set.set(index);
            if let Some(Some(owner)) = self.entries.get_mut(r as usize) {
                owner.links_mut().subobjects.push(index);
            }
            let oc = self.entry_at(r).map_or(NONE, |e| e.owner_connection);
            let auto = self.entry_at(r).is_none_or(|e| e.autonomous);
            if let Some(Some(e)) = self.entries.get_mut(i) {
                e.owner_connection = oc;
                e.autonomous = auto;
            }
        }
        self.created.push(index);
        self.alive_count += 1;
        Ok(handle)
    }

    /// Spawns an object in push mode: the table owns it; change it through
    /// [`get_mut`](Self::get_mut).
    pub fn spawn<T: Replicated>(&mut self, object: T) -> Result<NetRefHandle, ObjectError> {
        let h = self.handles.allocate_handle(false);
        let state = Box::new(object.to_state());
        self.insert::<T>(h, state, Some(object), None)
    }

    /// Spawns an object in poll mode: game code keeps `object` and calls
    /// [`poll`](Self::poll) with it each tick.
    pub fn spawn_polled<T: Replicated>(&mut self, object: &T) -> Result<NetRefHandle, ObjectError> {
        let h = self.handles.allocate_handle(false);
        self.insert::<T>(h, Box::new(object.to_state()), None, None)
    }

    /// Spawns a static (level) object in push mode under the static handle of
    /// `counter`, which the client registers under the same handle without a message.
    pub fn spawn_static<T: Replicated>(
        &mut self,
        counter: u64,
        object: T,
    ) -> Result<NetRefHandle, ObjectError> {
        let h = self.handles.static_handle(counter);
        let state = Box::new(object.to_state());
        self.insert::<T>(h, state, Some(object), None)
    }

    fn live_root(&self, owner: NetRefHandle) -> Result<InternalIndex, ObjectError> {
        let oi = self
            .live_index(owner)
            .ok_or(ObjectError::UnknownHandle(owner))?;
        if self.subobject_set.get(oi) {
            return Err(ObjectError::Invalid(
                owner,
                "a subobject cannot own subobjects",
            ));
        }
        Ok(oi)
    }

    /// Spawns a push-mode subobject of `owner`: written with its owner, destroyed with it.
    pub fn spawn_subobject<T: Replicated>(
        &mut self,
        owner: NetRefHandle,
        object: T,
    ) -> Result<NetRefHandle, ObjectError> {
        let root = self.live_root(owner)?;
        let h = self.handles.allocate_handle(false);
        let state = Box::new(object.to_state());
        self.insert::<T>(h, state, Some(object), Some(root))
    }

    /// Spawns a poll-mode subobject of `owner`.
    pub fn spawn_subobject_polled<T: Replicated>(
        &mut self,
        owner: NetRefHandle,
        object: &T,
    ) -> Result<NetRefHandle, ObjectError> {
        let root = self.live_root(owner)?;
        let h = self.handles.allocate_handle(false);
        self.insert::<T>(h, Box::new(object.to_state()), None, Some(root))
    }

    fn live_index(&self, handle: NetRefHandle) -> Option<InternalIndex> {
        let i = self.handles.internal_index(handle)?;
        self.entry_at(i).filter(|e| e.alive).map(|_| i)
    }

    /// The entry at an internal index (live, or destroyed but still referenced by a
    /// connection).
    pub fn entry_at(&self, index: InternalIndex) -> Option<&ObjectEntry> {
        self.entries.get(index as usize).and_then(|e| e.as_ref())
    }

    /// The internal index of a live object.
    pub fn index_of(&self, handle: NetRefHandle) -> Option<InternalIndex> {
        self.live_index(handle)
    }

    /// Whether `index` is a subobject.
    pub fn is_subobject(&self, index: InternalIndex) -> bool {
        self.subobject_set.get(index)
    }

    /// Whether the object at `index` has dependents.
    pub fn has_dependents(&self, index: InternalIndex) -> bool {
        let has = self.parent_set.get(index);
        debug_assert_eq!(
            has,
            self.entry_at(index)
                .is_some_and(|e| !e.dependents().is_empty()),
            "the parent set disagrees with object {index}'s dependents"
        );
        has
    }

    /// The set of subobject indices.
    pub fn subobject_set(&self) -> &BitArray {
        &self.subobject_set
    }

    /// Whether `handle` names a live object.
    pub fn contains(&self, handle: NetRefHandle) -> bool {
        self.live_index(handle).is_some()
    }

    /// Handles of all live objects.
    pub fn handles_iter(&self) -> impl Iterator<Item = NetRefHandle> + '_ {
        self.entries
            .iter()
            .flatten()
            .filter(|e| e.alive)
            .map(|e| e.handle)
    }

    /// The shared quantized state of a live object.
    pub fn state(&self, handle: NetRefHandle) -> Option<&dyn ErasedState> {
        let i = self.live_index(handle)?;
        self.entry_at(i).map(|e| e.state.as_ref())
    }

    /// The typed handle of a live object of type `T`, remembering where the object
    /// sits in this table (see [`Handle`]); `None` when `handle` names no live object
    /// or one of another type.
    pub fn handle<T: Replicated>(&self, handle: NetRefHandle) -> Option<Handle<T>> {
        let protocol = self.registry.index_of::<T>()?;
        let e = self.entry_at(self.live_index(handle)?)?;
        (e.protocol == protocol).then(|| match e.row {
            // A poll-mode object has no row to remember.
            NONE => Handle::from_raw_unchecked(handle),
            row => Handle::with_slot(handle, (u32::from(protocol), row)),
        })
    }

    /// The column of type `T` at `column`.
    #[inline]
    fn column<T: Replicated>(&self, column: usize) -> Option<&Column<T>> {
        self.columns
            .get(column)?
            .as_ref()?
            .as_any()
            .downcast_ref::<Column<T>>()
    }

    /// The column of type `T` at `column`, mutable.
    #[inline]
    fn column_mut<T: Replicated>(&mut self, column: usize) -> Option<&mut Column<T>> {
        self.columns
            .get_mut(column)?
            .as_mut()?
            .as_any_mut()
            .downcast_mut::<Column<T>>()
    }

    /// The column and row of the push-mode object `handle` names: those a typed
    /// handle remembers when they still hold the object (checked by the row's
    /// handle), those of its entry otherwise.
    #[inline]
    fn locate<T: Replicated>(&self, handle: impl HandleOf<T>) -> Option<(usize, usize)> {
        let raw = handle.to_raw();
        if let Some((column, row)) = handle.slot() {
            let (column, row) = (column as usize, row as usize);
            let holds = self
                .column::<T>(column)
                .and_then(|c| c.rows.get(row))
                .is_some_and(|r| raw.is_valid() && r.handle == raw);
            if holds {
                return Some((column, row));
            }
        }
        let e = self.entry_at(self.live_index(raw)?)?;
        (e.row != NONE).then_some((usize::from(e.protocol), e.row as usize))
    }

    /// A push-mode object, read-only (does not mark it dirty). Takes a typed or an
    /// untyped handle ([`HandleOf`]).
    pub fn get<T: Replicated>(&self, handle: impl HandleOf<T>) -> Option<&T> {
        let (column, row) = self.locate(handle)?;
        self.column::<T>(column)?.rows.get(row)?.object.as_ref()
    }

    /// A push-mode object, mutable: marks it dirty, so it is quantized (once) at the
    /// next [`begin_tick`](Self::begin_tick). Takes a typed or an untyped handle.
    pub fn get_mut<T: Replicated>(&mut self, handle: impl HandleOf<T>) -> Option<&mut T> {
        let (column, row) = self.locate(handle)?;
        // (The column borrowed by hand: the entries and the dirty list stay free.)
        let r = self
            .columns
            .get_mut(column)?
            .as_mut()?
            .as_any_mut()
            .downcast_mut::<Column<T>>()?
            .rows
            .get_mut(row)?;
        if r.mark() {
            self.push_dirty.push(r.index);
            // The tick's quantize reads the object's entry: it comes in meanwhile.
            if let Some(e) = self.entries.get(r.index as usize) {
                crate::read_ahead::prefetch(e);
            }
        }
        r.object.as_mut()
    }

    /// Marks a push-mode object dirty without touching it.
    pub fn mark_dirty(&mut self, handle: NetRefHandle) -> bool {
        let Some(i) = self.live_index(handle) else {
            return false;
        };
        let (column, row) = match self.entry_at(i) {
            Some(e) if e.row != NONE => (usize::from(e.protocol), e.row),
            _ => return false,
        };
        let Some(Some(c)) = self.columns.get_mut(column) else {
            return false;
        };
        if c.push(row) {
            self.push_dirty.push(i);
        }
        true
    }

    /// Object `i`'s change in the tick's open changes, when it changed this tick (`e`
    /// is its entry).
    #[inline]
    fn open_change<'a>(
        open: &'a mut [TickChange],
        i: InternalIndex,
        e: &ObjectEntry,
    ) -> Option<&'a mut TickChange> {
        open.get_mut(e.tick_slot as usize).filter(|c| c.index == i)
    }

    /// Polls object `i`, whose entry is `e`, with `poll` (which quantizes the object
    /// into the entry's state and sets the bits of the members that changed in the
    /// mask it is given), and records what changed in the tick's open changes: into
    /// the object's change when it already changed this tick, as a new change
    /// otherwise. Returns whether anything changed.
    fn poll_entry(
        open: &mut Vec<TickChange>,
        sealed: &mut bool,
        i: InternalIndex,
        e: &mut ObjectEntry,
        poll: impl FnOnce(&mut dyn ErasedState, &mut ChangeMask) -> bool,
    ) -> bool {
        let changed = match Self::open_change(open, i, e) {
            Some(change) => poll(e.state.as_mut(), &mut change.mask),
            None => {
                let state = e.state.as_mut();
                let mut mask = ChangeMask::new(state.type_descriptor().change_mask_bits);
                let changed = poll(state, &mut mask);
                if changed {
                    // (At most one change per object: the slot fits.)
                    e.tick_slot = open.len() as u32;
                    open.push(TickChange {
                        index: i,
                        root: e.root(),
                        mask,
                    });
                }
                changed
            }
        };
        *sealed &= !changed;
        changed
    }

    /// [`poll_entry`](Self::poll_entry) on the entry of object `i`.
    fn record_changes(
        &mut self,
        i: InternalIndex,
        poll: impl FnOnce(&mut dyn ErasedState, &mut ChangeMask) -> bool,
    ) -> bool {
        let Some(Some(e)) = self.entries.get_mut(i as usize) else {
            return false;
        };
        Self::poll_entry(&mut self.open, &mut self.sealed, i, e, poll)
    }

    /// Poll mode: quantizes `object` and compares it with the stored state; changed
    /// members are recorded for this tick. Returns whether anything changed.
    pub fn poll<T: Replicated>(&mut self, handle: NetRefHandle, object: &T) -> bool {
        let Some(i) = self.live_index(handle) else {
            return false;
        };
        self.record_changes(i, |state, mask| {
            let Some(stored) = state.as_any_mut().downcast_mut::<T::State>() else {
                tracing::error!(
                    "poll: object {handle} is not a {}",
                    std::any::type_name::<T>()
                );
                return false;
            };
            object.poll(stored, mask)
        })
    }

    /// Poll mode for a type-erased object.
    pub fn poll_erased(&mut self, handle: NetRefHandle, object: &dyn ErasedObject) -> bool {
        let Some(i) = self.live_index(handle) else {
            return false;
        };
        self.record_changes(i, |state, mask| object.poll_into(state, mask) == Some(true))
    }

    /// Sets the owning connection (conditions such as `OwnerOnly` evaluate against
    /// it); subobjects follow their owner.
    pub fn set_owner_connection(
        &mut self,
        handle: NetRefHandle,
        owner: Option<ConnectionId>,
    ) -> Result<(), ObjectError> {
        self.update_role(handle, |e| {
            let owner = owner.unwrap_or(NONE);
            std::mem::replace(&mut e.owner_connection, owner) != owner
        })
    }

    /// Sets whether the owning connection controls the object (see
    /// [`ObjectEntry::is_autonomous`]); subobjects follow their owner. A change counts
    /// as an owner change for conditions (members are re-evaluated per connection).
    pub fn set_autonomous(
        &mut self,
        handle: NetRefHandle,
        autonomous: bool,
    ) -> Result<(), ObjectError> {
        self.update_role(handle, |e| {
            std::mem::replace(&mut e.autonomous, autonomous) != autonomous
        })
    }

    /// Applies `change` (which returns whether it changed anything) to an object and
    /// its subobjects, and queues each changed object with conditions for the
    /// per-connection re-evaluation of its members.
    fn update_role(
        &mut self,
        handle: NetRefHandle,
        change: impl Fn(&mut ObjectEntry) -> bool,
    ) -> Result<(), ObjectError> {
        let i = self
            .live_index(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        let subs = self
            .entry_at(i)
            .map(|e| e.subobjects().to_vec())
            .unwrap_or_default();
        for j in std::iter::once(i).chain(subs) {
            if let Some(Some(e)) = self.entries.get_mut(j as usize)
                && change(e)
                && e.descriptor().has_conditions()
                && !self.owner_changed.contains(&j)
            {
                self.owner_changed.push(j);
            }
        }
        Ok(())
    }

    /// Replaces an object's tags: short strings that recur across objects (a team, a
    /// player name, a category). Each connection exports a string once as a net token
    /// and then sends only its 16-bit id. At most [`MAX_TAGS`] tags of at most
    /// [`MAX_TOKEN_LEN`](MAX_TOKEN_LEN) bytes.
    pub fn set_tags(&mut self, handle: NetRefHandle, tags: Vec<String>) -> Result<(), ObjectError> {
        let i = self
            .live_index(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        if tags.len() > MAX_TAGS || tags.iter().any(|t| t.len() > MAX_TOKEN_LEN) {
            return Err(ObjectError::Invalid(
                handle,
                "too many tags or a tag too long",
            ));
        }
        if let Some(Some(e)) = self.entries.get_mut(i as usize)
            && e.tags() != tags.as_slice()
        {
            e.links_mut().tags = tags;
            if !self.tags_changed.contains(&i) {
                self.tags_changed.push(i);
            }
        }
        Ok(())
    }

    /// Objects with conditional members whose owning connection changed since the last
    /// `end_tick` (connections re-send their conditional members).
    pub fn tick_owner_changed(&self) -> &[InternalIndex] {
        &self.owner_changed
    }

    /// Objects whose tags changed since the last `end_tick`.
    pub fn tick_tags_changed(&self) -> &[InternalIndex] {
        &self.tags_changed
    }

    /// The static priority the object at `index` adds each tick it is dirty (0 for
    /// no object).
    #[inline]
    pub fn priority(&self, index: InternalIndex) -> f32 {
        self.priorities.get(index as usize).copied().unwrap_or(0.0)
    }

    /// Sets the static priority added each tick the object is dirty (default 1.0).
    pub fn set_priority(&mut self, handle: NetRefHandle, priority: f32) -> Result<(), ObjectError> {
        let i = self
            .live_index(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        if let Some(p) = self.priorities.get_mut(i as usize) {
            *p = if priority.is_finite() {
                priority.max(0.0)
            } else {
                0.0
            };
        }
        Ok(())
    }

    /// Makes `dependent` a dependent of `parent`: it is considered whenever the parent
    /// is scheduled, and written before it according to `hint`.
    pub fn add_dependent(
        &mut self,
        parent: NetRefHandle,
        dependent: NetRefHandle,
        hint: SchedulingHint,
    ) -> Result<(), ObjectError> {
        let p = self
            .live_index(parent)
            .ok_or(ObjectError::UnknownHandle(parent))?;
        let d = self
            .live_index(dependent)
            .ok_or(ObjectError::UnknownHandle(dependent))?;
        if p == d || self.subobject_set.get(d) || self.subobject_set.get(p) {
            return Err(ObjectError::Invalid(
                dependent,
                "dependents link two different root objects",
            ));
        }
        if let Some(Some(e)) = self.entries.get_mut(p as usize) {
            let links = e.links_mut();
            match links.dependents.iter_mut().find(|x| x.index == d) {
                Some(x) => x.hint = hint,
                None => links
                    .dependents
                    .push(DependentObjectInfo { index: d, hint }),
            }
            self.parent_set.set(p);
        }
        if let Some(Some(e)) = self.entries.get_mut(d as usize)
            && !e.links.as_ref().is_some_and(|l| l.parents.contains(&p))
        {
            e.links_mut().parents.push(p);
        }
        Ok(())
    }

    /// Removes a dependent link.
    pub fn remove_dependent(&mut self, parent: NetRefHandle, dependent: NetRefHandle) {
        let (Some(p), Some(d)) = (self.live_index(parent), self.live_index(dependent)) else {
            return;
        };
        if let Some(Some(e)) = self.entries.get_mut(p as usize) {
            e.edit_links(|l| l.dependents.retain(|x| x.index != d));
            self.parent_set.assign(p, !e.dependents().is_empty());
        }
        if let Some(Some(e)) = self.entries.get_mut(d as usize) {
            e.edit_links(|l| l.parents.retain(|x| *x != p));
        }
    }

    fn end_object(&mut self, i: InternalIndex, tear_off: bool) {
        let Some(Some(e)) = self.entries.get_mut(i as usize) else {
            return;
        };
        if !e.alive {
            return;
        }
        e.alive = false;
        e.torn_off = tear_off;
        if let Some(Some(column)) = self.columns.get_mut(usize::from(e.protocol)) {
            column.remove(e.row);
        }
        e.row = NONE;
        let handle = e.handle;
        let (parents, dependents) = match e.links.as_deref_mut() {
            Some(l) => (
                std::mem::take(&mut l.parents),
                std::mem::take(&mut l.dependents),
            ),
            None => Default::default(),
        };
        let root = e.root();
        self.handles.unmap(handle);
        self.alive_count = self.alive_count.saturating_sub(1);
        self.parent_set.clear(i);
        for p in parents {
            if let Some(Some(pe)) = self.entries.get_mut(p as usize) {
                pe.edit_links(|l| l.dependents.retain(|x| x.index != i));
                self.parent_set.assign(p, !pe.dependents().is_empty());
            }
        }
        for d in dependents {
            if let Some(Some(de)) = self.entries.get_mut(d.index as usize) {
                de.edit_links(|l| l.parents.retain(|x| *x != i));
            }
        }
        if let Some(r) = root {
            if let Some(Some(re)) = self.entries.get_mut(r as usize) {
                re.edit_links(|l| l.subobjects.retain(|x| *x != i));
            }
            // Detached: what it still owes connections (a destroy, a tear-off) goes on
            // its own, whatever becomes of the owner and its index.
            if let Some(Some(e)) = self.entries.get_mut(i as usize) {
                e.root = NONE;
                if let Some(change) = Self::open_change(&mut self.open, i, e) {
                    change.root = None;
                }
            }
            self.subobject_set.clear(i);
        }
        if tear_off {
            self.torn_off.push(i);
        } else {
            self.destroyed.push(i);
        }
        self.pending_free.push(i);
    }

    /// Destroys an object (and its subobjects). Connections send the destroy.
    pub fn destroy(&mut self, handle: NetRefHandle) -> Result<(), ObjectError> {
        let i = self
            .live_index(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        let subs = self
            .entry_at(i)
            .map(|e| e.subobjects().to_vec())
            .unwrap_or_default();
        for s in subs {
            self.end_object(s, false);
        }
        self.end_object(i, false);
        Ok(())
    }

    /// Tears an object off: the server stops replicating it; clients keep it with its
    /// last state. Its subobjects are torn off with it. An object torn off in the tick
    /// it was spawned is never replicated (like one destroyed in that tick).
    pub fn tear_off(&mut self, handle: NetRefHandle) -> Result<(), ObjectError> {
        let i = self
            .live_index(handle)
            .ok_or(ObjectError::UnknownHandle(handle))?;
        if self.subobject_set.get(i) {
            return Err(ObjectError::Invalid(
                handle,
                "tear off the owner, not a subobject",
            ));
        }
        // Final state first: push objects are quantized now so the tear-off carries it.
        self.quantize_one(i);
        let subs = self
            .entry_at(i)
            .map(|e| e.subobjects().to_vec())
            .unwrap_or_default();
        for s in subs {
            self.quantize_one(s);
            self.end_object(s, true);
        }
        self.end_object(i, true);
        Ok(())
    }

    fn quantize_one(&mut self, i: InternalIndex) {
        let Some(Some(e)) = self.entries.get_mut(i as usize) else {
            return;
        };
        let Some(Some(column)) = self.columns.get_mut(usize::from(e.protocol)) else {
            return;
        };
        let row = e.row;
        Self::poll_entry(&mut self.open, &mut self.sealed, i, e, |state, mask| {
            column.quantize(row, state, mask)
        });
    }

    /// Start of a server tick: quantizes every push-mode object marked dirty since the
    /// last tick, once each, into the shared state.
    pub fn begin_tick(&mut self) {
        let list = std::mem::take(&mut self.push_dirty);
        for run in list.chunks(READ_AHEAD) {
            // The run's entries first, level by level, so their cache misses overlap
            // (a large world's entries are far apart).
            let seen = run.iter().fold(0, |seen, &i| {
                seen ^ self.entry_at(i).map_or(0, ObjectEntry::read_ahead)
            });
            std::hint::black_box(seen);
            for &i in run {
                self.quantize_one(i);
            }
        }
        self.push_dirty = list;
        self.push_dirty.clear();
    }

    /// Objects created since the last [`end_tick`](Self::end_tick).
    pub fn tick_created(&self) -> &[InternalIndex] {
        &self.created
    }

    /// Objects destroyed since the last `end_tick`.
    pub fn tick_destroyed(&self) -> &[InternalIndex] {
        &self.destroyed
    }

    /// Objects torn off since the last `end_tick`.
    pub fn tick_torn_off(&self) -> &[InternalIndex] {
        &self.torn_off
    }

    /// Objects changed so far this tick.
    pub fn tick_dirty(&self) -> impl Iterator<Item = InternalIndex> + '_ {
        self.open.iter().map(|c| c.index)
    }

    /// Takes down the tick's changes so far as [`tick_changes`](Self::tick_changes)
    /// gives them (once per tick, before the writers take them; again only if
    /// something changed since).
    pub fn seal_tick(&mut self) {
        if self.sealed {
            return;
        }
        self.changes.clone_from(&self.open);
        self.sealed = true;
    }

    /// The changes of the latest tick, as of its last [`seal_tick`](Self::seal_tick):
    /// kept after [`end_tick`](Self::end_tick) until the next tick is sealed.
    pub fn tick_changes(&self) -> &[TickChange] {
        &self.changes
    }

    /// End of a server tick (after every connection took the tick's changes): clears
    /// the per-tick masks and frees destroyed objects no connection references.
    pub fn end_tick(&mut self) {
        // The sealed changes stay (see `tick_changes`); the next tick seals its own.
        self.sealed = false;
        // (Cleared, not taken: the list keeps its capacity for the next tick. The
        // entries' slots now name no change of theirs.)
        self.open.clear();
        self.created.clear();
        self.destroyed.clear();
        self.torn_off.clear();
        self.tags_changed.clear();
        self.owner_changed.clear();
        let pending = std::mem::take(&mut self.pending_free);
        for i in pending {
            self.try_free(i);
        }
    }

    /// A connection started tracking the object (it must stay addressable).
    pub fn add_ref(&mut self, index: InternalIndex) {
        if let Some(Some(e)) = self.entries.get_mut(index as usize) {
            e.writer_refs += 1;
        }
    }

    /// A connection stopped tracking the object; a destroyed object nobody tracks
    /// any more is freed (its internal index may be reused).
    pub fn release_ref(&mut self, index: InternalIndex) {
        if let Some(Some(e)) = self.entries.get_mut(index as usize) {
            e.writer_refs = e.writer_refs.saturating_sub(1);
            if !e.alive && e.writer_refs == 0 && !self.pending_free.contains(&index) {
                self.try_free(index);
            }
        }
    }

    fn try_free(&mut self, i: InternalIndex) {
        let free =
            matches!(self.entries.get(i as usize), Some(Some(e)) if !e.alive && e.writer_refs == 0);
        if free {
            self.entries[i as usize] = None;
            if let Some(p) = self.priorities.get_mut(i as usize) {
                *p = 0.0;
            }
            self.subobject_set.clear(i);
            self.handles.free_index(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_manager_allocation_and_reuse() {
        let mut m = NetRefHandleManager::new(0);
        let a = m.allocate_handle(false);
        let s = m.allocate_handle(true);
        assert_eq!((a.id(), s.id()), (2, 3));
        let ia = m.create_object(a).unwrap();
        let is = m.create_object(s).unwrap();
        assert_ne!(ia, is);
        assert!(m.create_object(a).is_none(), "double mapping refused");
        assert_eq!(m.destroy_object(a), Some(ia));
        assert!(!m.is_valid_handle(a));
        let b = m.allocate_handle(false);
        assert_eq!(b.id(), 4);
        assert_eq!(m.create_object(b), Some(ia), "dense index reused");
        assert_eq!(m.handle_of(ia), Some(b));
        assert_eq!(m.static_handle(1), s);
    }

    #[test]
    fn allocate_refuses_existing_handle_without_advancing() {
        let mut m = NetRefHandleManager::new(0);
        let taken = NetRefHandle::new(1, false, 0);
        m.create_object(taken).unwrap();
        assert!(!m.allocate_handle(false).is_valid());
        assert!(!m.allocate_handle(false).is_valid(), "counter not advanced");
    }
}
