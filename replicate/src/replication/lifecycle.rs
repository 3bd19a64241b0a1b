//! The writer's side of the object lifecycle: what it takes from the object table each
//! tick (creations, tear-offs, destroys, owner changes, then the sealed changes of the
//! dirty objects), starting and stopping replication of an object, scope changes and
//! recovery of an object the client reported broken.

use super::{ReplicationWriter, mask_bits};
use crate::object::{InternalIndex, ObjectTable, TickChange};
use crate::read_ahead::{READ_AHEAD, prefetch};
use crate::replication::encode::TickCache;
use crate::replication::group::Event;
use crate::replication::record::ReplicatedObjectState as S;
use crate::state::ChangeMask;

/// How many of the tick's changes ahead a writer taking them asks for the send state
/// of the one in its scope (see `apply_tick_changes`): with a fifth of the world in
/// view, about a dozen in flight.
const CHANGES_AHEAD: usize = 4 * READ_AHEAD;

/// The priority a root gains for a tick with something to send: `p`, or none when it
/// is negative or not a number.
fn priority_gain(p: f32) -> f32 {
    if p.is_finite() { p.max(0.0) } else { 0.0 }
}

impl ReplicationWriter {
    /// Starts replicating every live object in scope (a new connection).
    pub fn start_all(&mut self, table: &mut ObjectTable) {
        let n = table.index_capacity() as InternalIndex;
        // Sized once for the objects there are (growing object by object would leave
        // the smaller copies behind; baselines grow by chunks).
        if let Some(last) = n.checked_sub(1) {
            self.ensure(last);
        }
        for i in 0..n {
            if table.entry_at(i).is_some_and(|e| e.is_alive()) && self.in_scope(table, i) {
                self.start_replication(table, i);
            }
        }
    }

    /// Takes the table's changes of this tick: creations, tear-offs, destroys, and the
    /// change masks of the objects that changed; then accumulates the priority of every
    /// object with something to send.
    pub fn update(&mut self, table: &mut ObjectTable) {
        self.update_lifecycle(table);
        table.seal_tick();
        self.update_dirty(table);
    }

    /// The first part of [`update`](Self::update), which changes the table: the
    /// tick's creations, tear-offs, destroys and owner changes.
    pub(crate) fn update_lifecycle(&mut self, table: &mut ObjectTable) {
        // Priorities accumulate below: the order of the last tick is void.
        self.schedule.invalidate();
        // The objects' states were quantized anew.
        self.cache.clear();
        self.release_huge_tear_offs(table);
        let created = table.tick_created().to_vec();
        for i in created {
            if self.in_scope(table, i) {
                self.start_replication(table, i);
            }
        }
        let torn = table.tick_torn_off().to_vec();
        for i in torn {
            self.excluded.clear(i);
            self.tear_off(table, i);
        }
        let destroyed = table.tick_destroyed().to_vec();
        for i in destroyed {
            // The index may be reused by a new object, which starts in scope.
            self.excluded.clear(i);
            let alone = table
                .entry_at(i)
                .and_then(|e| e.owner_handle())
                .is_some_and(|owner| table.contains(owner));
            self.stop_replication(table, i, alone);
        }
        let owner_changed = table.tick_owner_changed().to_vec();
        for i in owner_changed {
            // Baselines holding the old owner's view of conditional members go.
            if self.owner_change_affects_baselines(table, i)
                && let Some(merged) = self.take_baselines(i)
            {
                self.mark_members_dirty(table, i, &merged);
            }
            // Owner-dependent members are owed afresh to every connection.
            if let Some(entry) = table.entry_at(i) {
                let mut bits = ChangeMask::new(entry.descriptor().change_mask_bits);
                for (_, m) in &entry.descriptor().condition_masks {
                    bits.or_with(m);
                }
                self.on_conditions_changed(table, i, &bits);
            }
        }
    }

    /// The second part of [`update`](Self::update), which only reads the table: the
    /// objects whose tags changed, the change masks of the objects that changed, then
    /// the priority of every object with something to send.
    pub(crate) fn update_dirty(&mut self, table: &ObjectTable) {
        self.update_tags(table);
        self.apply_tick_changes(table);
    }

    /// [`update_dirty`](Self::update_dirty) with its second part put off until the
    /// connection is next written or its state next read or changed through the server
    /// ([`catch_up`](Self::catch_up)): then the changes meet the
    /// send states the write reads right after, while they are still in cache. The
    /// table keeps the tick's sealed changes until the next tick seals its own; the
    /// server takes any left over before that.
    pub(crate) fn defer_tick_changes(&mut self, table: &ObjectTable) {
        self.update_tags(table);
        // With no change and nothing owed, taking them would do nothing.
        self.changes_pending = !table.tick_changes().is_empty() || !self.sends.dirty.none();
    }

    /// Takes what was put off until this connection is next reached: the tick changes
    /// [`defer_tick_changes`](Self::defer_tick_changes) left, then the fates of
    /// delivered packets whose baselines wait to be promoted (see
    /// [`process_delivery`](Self::process_delivery)).
    #[inline]
    pub(crate) fn catch_up(&mut self, table: &ObjectTable) {
        self.catch_up_in_pass(table, None);
    }

    /// [`catch_up`](Self::catch_up) in a write pass, with the tick cache of the thread
    /// writing it: a connection holding the same shared send states as one caught up
    /// before it, with the same scope, takes that one's result (see `group`).
    #[inline]
    pub(crate) fn catch_up_in_pass(
        &mut self,
        table: &ObjectTable,
        mut pass: Option<&mut TickCache>,
    ) {
        if self.changes_pending {
            match pass.as_deref_mut() {
                Some(pass) => self.take_tick_changes_in_pass(table, pass),
                None => self.apply_tick_changes(table),
            }
        }
        self.baselines
            .catch_up_in_pass(pass.map(|pass| &mut pass.fates));
    }

    /// [`apply_tick_changes`](Self::apply_tick_changes) in a write pass, taken from
    /// the pass's log of shared send states where it can be.
    fn take_tick_changes_in_pass(&mut self, table: &ObjectTable, pass: &mut TickCache) {
        if self.priorities_by_connection() {
            return self.apply_tick_changes(table);
        }
        let event = Event::CatchUp {
            excluded: &self.excluded,
            schedule_valid: self.schedule.is_valid(),
        };
        if let Some((after, schedule_valid)) = pass.transitions.find(&self.sends, event) {
            self.changes_pending = false;
            self.sends.adopt(after);
            if !schedule_valid {
                self.schedule.invalidate();
            }
            return;
        }
        let before = pass.transitions.loggable(&self.sends);
        let schedule_valid = self.schedule.is_valid();
        self.apply_tick_changes(table);
        if let Some(before) = before {
            let after = self.sends.publish_frozen();
            let event = Event::CatchUp {
                excluded: &self.excluded,
                schedule_valid,
            };
            pass.transitions
                .log(before, event, after, self.schedule.is_valid());
        }
    }

    /// The part of [`catch_up`](Self::catch_up) that must not outlive the tick: the
    /// tick changes, which the table keeps only until the next tick is sealed.
    #[inline]
    pub(crate) fn take_tick_changes(&mut self, table: &ObjectTable) {
        if self.changes_pending {
            self.apply_tick_changes(table);
        }
    }

    /// The objects whose tags changed this tick are owed their tags.
    fn update_tags(&mut self, table: &ObjectTable) {
        for &i in table.tick_tags_changed() {
            let Some(info) = self.sends.infos.get_mut(i as usize) else {
                continue;
            };
            if matches!(info.state(), S::WaitOnCreateConfirmation | S::Created) {
                info.set_tags_dirty(true);
                self.mark_dirty(table, i);
            }
        }
    }

    /// Whether the hooks give priorities that may differ by connection (then a
    /// connection's taking of the tick's changes is its own).
    fn priorities_by_connection(&self) -> bool {
        self.hooks
            .0
            .as_ref()
            .is_some_and(|h| !h.static_priorities())
    }

    /// Merges the tick's change masks into the send states and adds the priority of
    /// every root with something to send, once: the roots dirty already first, then
    /// each as a change makes it dirty.
    fn apply_tick_changes(&mut self, table: &ObjectTable) {
        self.changes_pending = false;
        if self.priorities_by_connection() {
            for change in table.tick_changes() {
                if !self.excluded.get(change.index) {
                    self.take_change(table, change, false);
                }
            }
            self.add_hook_priorities(table);
            return;
        }
        // The roots dirty already gain their static priority, read straight from the
        // table; those the changes make dirty gain it as they do.
        let sends = &mut *self.sends;
        for i in sends.dirty.iter_and_not(Some(table.subobject_set())) {
            if let Some(info) = sends.infos.get_mut(i as usize) {
                info.add_priority(priority_gain(table.priority(i)));
            }
        }
        // Out of scope (a root): not replicated here, and the small bit array answers
        // without touching the object's send state. The send states in scope are
        // asked for a stretch of changes ahead: with many objects they are cold, and
        // their misses then overlap the work on the changes before them.
        let changes = table.tick_changes();
        for change in changes.iter().take(CHANGES_AHEAD) {
            self.ask_for_send_state(change);
        }
        for (k, change) in changes.iter().enumerate() {
            if let Some(ahead) = changes.get(k + CHANGES_AHEAD) {
                self.ask_for_send_state(ahead);
            }
            if !self.excluded.get(change.index) {
                self.take_change(table, change, true);
            }
        }
    }

    /// Asks for the send state of a change's object in this connection's scope,
    /// without waiting for it.
    #[inline(always)]
    fn ask_for_send_state(&self, change: &TickChange) {
        if !self.excluded.get(change.index)
            && let Some(info) = self.sends.infos.get(change.index as usize)
        {
            prefetch(info);
        }
    }

    /// Merges one change's mask into its object's send state (one taking changes:
    /// created, or being created); with `static_gain`, a root it makes dirty gains its
    /// static priority.
    #[inline(always)]
    fn take_change(&mut self, table: &ObjectTable, change: &TickChange, static_gain: bool) {
        let i = change.index;
        let sends = &mut *self.sends;
        let Some(info) = sends.infos.get_mut(i as usize) else {
            return;
        };
        if !matches!(
            info.state(),
            S::PendingCreate | S::WaitOnCreateConfirmation | S::Created | S::HugeObject
        ) {
            return;
        }
        info.or_mask(&change.mask, &mut sends.pool);
        if !info.has_dirty_mask() {
            return;
        }
        match change.root {
            None => {
                if static_gain && !sends.dirty.get(i) && !table.subobject_set().get(i) {
                    info.add_priority(priority_gain(table.priority(i)));
                }
                self.mark_dirty_under(i, None);
            }
            Some(root) => self.mark_subobject_dirty(table, i, root, static_gain),
        }
    }

    /// [`take_change`](Self::take_change)'s marking of a subobject: its owner `root`
    /// gains its static priority if it was not dirty before.
    #[cold]
    fn mark_subobject_dirty(
        &mut self,
        table: &ObjectTable,
        i: InternalIndex,
        root: InternalIndex,
        static_gain: bool,
    ) {
        let gains = |w: &Self, j: InternalIndex| {
            static_gain && !w.sends.dirty.get(j) && !table.subobject_set().get(j)
        };
        let gained = [i, root].map(|j| gains(self, j));
        self.mark_dirty_under(i, Some(root));
        for (j, gained) in [i, root].into_iter().zip(gained) {
            if gained
                && self.sends.dirty.get(j)
                && let Some(info) = self.sends.infos.get_mut(j as usize)
            {
                info.add_priority(priority_gain(table.priority(j)));
            }
        }
    }

    /// Adds the priority the hooks give every root with something to send.
    fn add_hook_priorities(&mut self, table: &ObjectTable) {
        let Some(hooks) = self.hooks.0.as_mut() else {
            return;
        };
        // In chunks, so the scratch stays small after a tick that dirtied everything.
        const CHUNK: usize = 256;
        let mut roots = std::mem::take(&mut self.roots);
        let mut added = std::mem::take(&mut self.added);
        let sends = &mut *self.sends;
        let mut dirty = sends.dirty.iter_and_not(Some(table.subobject_set()));
        loop {
            roots.clear();
            added.clear();
            roots.reserve(CHUNK);
            for i in dirty.by_ref() {
                roots.push(i);
                if roots.len() == CHUNK {
                    break;
                }
            }
            if roots.is_empty() {
                break;
            }
            hooks.priorities(table, &roots, &mut added);
            for (&i, &p) in roots.iter().zip(&added) {
                if let Some(info) = sends.infos.get_mut(i as usize) {
                    info.add_priority(priority_gain(p));
                }
            }
        }
        self.roots = roots;
        self.added = added;
    }

    /// The members this connection may receive of an object changed: its owner or
    /// autonomous flag changed (called from [`update`](Self::update)), or a `Custom`
    /// condition was switched (called by the interest layer,
    /// [`ReplicationServer::set_custom_condition`](super::ReplicationServer::set_custom_condition)).
    /// `affected` holds the members whose condition may have changed; their current
    /// values are owed afresh (a connection that newly qualifies receives them, one that
    /// no longer qualifies has them filtered out when the batch is written).
    ///
    /// Delta baselines: a baseline taken under the old conditions does not hold the
    /// values the connection newly qualifies for. Owner changes release the affected
    /// baselines in [`update`](Self::update) before calling this; a `Custom` switch
    /// calls [`invalidate_baselines`](Self::invalidate_baselines) first.
    pub fn on_conditions_changed(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        affected: &ChangeMask,
    ) {
        // A creation sent under the old conditions may be acked without a later batch:
        // the members are owed until confirmed too.
        self.owe_members(table, index, affected, |s| {
            matches!(s, S::Created | S::WaitOnCreateConfirmation)
        });
    }

    /// Marks members of an object as owed to this connection (for example when a hook
    /// starts allowing members it filtered out before). Only for a created object.
    pub fn mark_members_dirty(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        mask: &ChangeMask,
    ) {
        self.owe_members(table, index, mask, |s| s == S::Created);
    }

    /// ORs `mask` into an object's owed members and marks it dirty, when its state is
    /// one `owed_in` accepts and the mask is not empty.
    fn owe_members(
        &mut self,
        table: &ObjectTable,
        index: InternalIndex,
        mask: &ChangeMask,
        owed_in: impl Fn(S) -> bool,
    ) {
        let sends = &mut *self.sends;
        let Some(info) = sends.infos.get_mut(index as usize) else {
            return;
        };
        if owed_in(info.state()) && mask.any() {
            info.or_mask(mask, &mut sends.pool);
            self.mark_dirty(table, index);
        }
    }

    pub(super) fn mark_dirty(&mut self, table: &ObjectTable, index: InternalIndex) {
        self.mark_dirty_under(index, table.entry_at(index).and_then(|e| e.root()));
    }

    /// [`mark_dirty`](Self::mark_dirty) for an object whose owner, if it is a
    /// subobject, is `root`.
    #[inline(always)]
    pub(super) fn mark_dirty_under(&mut self, index: InternalIndex, root: Option<InternalIndex>) {
        // A root that was not scheduled may be owed now (every priority increase
        // outside `update` goes with a `mark_dirty` too).
        self.schedule.invalidate();
        self.sends.dirty.set(index);
        if let Some(root) = root {
            self.mark_owner_dirty(root);
        }
    }

    /// A dirty subobject's owner `root` has something to send (most dirty objects are
    /// roots: out of line).
    #[cold]
    fn mark_owner_dirty(&mut self, root: InternalIndex) {
        self.ensure(root);
        if self.sends.infos[root as usize].state() != S::Invalid {
            self.sends.dirty.set(root);
            self.sends.infos[root as usize].set_dirty_subobjects(true);
        }
    }

    pub(super) fn start_replication(&mut self, table: &mut ObjectTable, index: InternalIndex) {
        let Some(entry) = table.entry_at(index) else {
            return;
        };
        if !entry.is_alive() {
            return;
        }
        self.ensure(index);
        let bits = entry.descriptor().change_mask_bits;
        let is_sub = entry.root().is_some();
        // Subobjects started before their owner (index order) already flagged it.
        let dirty_subs = entry.subobjects().iter().any(|&s| self.sends.dirty.get(s));
        let sends = &mut *self.sends;
        let info = &mut sends.infos[index as usize];
        if info.state() != S::Invalid {
            return;
        }
        if !info.init(bits, &mut sends.pool) {
            tracing::error!(
                "replication writer: connection {} holds too many wide change masks; {} is not replicated to it",
                self.connection,
                entry.handle()
            );
            return;
        }
        info.set_local_index(self.locals.assign());
        info.set_subobject(is_sub);
        info.set_dirty_subobjects(dirty_subs);
        info.set_state(S::PendingCreate);
        info.set_all(bits, &mut sends.pool);
        info.set_priority(0.0);
        table.add_ref(index);
        self.tracked += 1;
        self.mark_dirty(table, index);
    }

    pub(super) fn release(&mut self, table: &mut ObjectTable, index: InternalIndex) {
        self.recovering.clear(index);
        if !self.recoveries.is_empty()
            && let Some(entry) = table.entry_at(index)
            && !entry.is_alive()
        {
            self.recoveries.remove(&entry.handle());
        }
        self.drop_baselines(index);
        let sends = &mut *self.sends;
        let Some(info) = sends.infos.get_mut(index as usize) else {
            return;
        };
        // The remote has let go of the object (destroy or tear-off acknowledged, or no
        // creation ever sent): its index may name another object.
        if let Some(local) = info.local_index() {
            self.locals.free(local);
        }
        info.release(&mut sends.pool);
        sends.dirty.clear(index);
        self.tracked = self.tracked.saturating_sub(1);
        table.release_ref(index);
    }

    pub(super) fn push_destroy(&mut self, index: InternalIndex) {
        self.sends.dirty.clear(index);
        if !self.pending_destroys.contains(&index) {
            self.pending_destroys.push(index);
        }
    }

    /// Stops replicating an object to this connection (destroyed on the server, or out
    /// of scope); `subobject_alone` when a subobject goes while its owner stays.
    pub(super) fn stop_replication(
        &mut self,
        table: &mut ObjectTable,
        index: InternalIndex,
        subobject_alone: bool,
    ) {
        // The remote loses the object (and its stored baselines) or keeps a final state.
        self.drop_baselines(index);
        let sends = &mut *self.sends;
        let Some(info) = sends.infos.get_mut(index as usize) else {
            return;
        };
        match info.state() {
            S::PendingCreate | S::HugeObject => {
                if info.is_creation_sent() {
                    info.set_state(S::PendingDestroy);
                    info.clear_mask(&mut sends.pool);
                    self.push_destroy(index);
                } else {
                    info.set_state(S::Invalid);
                    self.release(table, index);
                }
            }
            S::WaitOnCreateConfirmation | S::PendingTearOff => {
                info.set_state(S::PendingDestroy);
                info.clear_mask(&mut sends.pool);
                self.push_destroy(index);
            }
            S::Created => {
                if subobject_alone {
                    info.set_state(S::SubObjectPendingDestroy);
                } else {
                    info.set_state(S::WaitOnFlush);
                }
                info.set_state(S::PendingDestroy);
                info.clear_mask(&mut sends.pool);
                self.push_destroy(index);
            }
            S::WaitOnFlush | S::SubObjectPendingDestroy => {
                info.set_state(S::PendingDestroy);
                self.push_destroy(index);
            }
            S::CancelPendingDestroy => {
                // The destroy in flight stands.
                info.set_state(S::WaitOnDestroyConfirmation);
                info.clear_mask(&mut sends.pool);
                sends.dirty.clear(index);
            }
            S::AttachmentToObjectNotInScope => {
                info.force_invalid();
                self.release(table, index);
            }
            S::Invalid
            | S::PendingDestroy
            | S::WaitOnDestroyConfirmation
            | S::Destroyed
            | S::PermanentlyDestroyed => {}
        }
    }

    pub(super) fn tear_off(&mut self, table: &mut ObjectTable, index: InternalIndex) {
        let sends = &mut *self.sends;
        let Some(info) = sends.infos.get_mut(index as usize) else {
            return;
        };
        match info.state() {
            S::PendingCreate | S::WaitOnCreateConfirmation | S::Created => {
                info.set_state(S::PendingTearOff);
                info.set_tear_off(true);
                self.mark_dirty(table, index);
            }
            S::HugeObject if self.huge.enabled() => {
                // The transfer in flight (creation or update) is cancelled and the final
                // state follows on the same ordered channel as a huge tear-off.
                info.set_tear_off(true);
                self.huge.park(index);
            }
            S::HugeObject => self.stop_replication(table, index, false),
            S::CancelPendingDestroy => {
                // Re-created once the destroy in flight resolves, then torn off.
                info.set_tear_off(true);
            }
            _ => {}
        }
    }

    /// Puts a root object (and its subobjects) in or out of this connection's scope.
    /// Leaving scope destroys it on the remote; coming back before the destroy is
    /// confirmed cancels it (Iris's `CancelPendingDestroy`).
    pub fn set_in_scope(&mut self, table: &mut ObjectTable, index: InternalIndex, in_scope: bool) {
        let Some(entry) = table.entry_at(index) else {
            return;
        };
        if entry.root().is_some() {
            tracing::warn!(
                "scope is set on root objects; {} is a subobject",
                entry.handle()
            );
            return;
        }
        if !entry.is_alive() {
            return;
        }
        self.excluded.assign(index, !in_scope);
        let subs = entry.subobjects().to_vec();
        for j in std::iter::once(index).chain(subs) {
            if in_scope {
                self.enter_scope(table, j);
            } else {
                self.stop_replication(table, j, false);
            }
        }
    }

    pub(super) fn enter_scope(&mut self, table: &mut ObjectTable, index: InternalIndex) {
        self.ensure(index);
        let sends = &mut *self.sends;
        let info = &mut sends.infos[index as usize];
        match info.state() {
            S::Invalid => self.start_replication(table, index),
            S::PendingDestroy => {
                info.set_state(S::CancelPendingDestroy);
                if info.is_creation_confirmed() {
                    info.set_state(S::Created);
                } else {
                    info.set_state(S::PendingCreate);
                }
                info.set_all(mask_bits(table, index), &mut sends.pool);
                self.pending_destroys.retain(|&i| i != index);
                self.mark_dirty(table, index);
            }
            S::WaitOnDestroyConfirmation if !info.is_tear_off() => {
                info.set_state(S::CancelPendingDestroy);
            }
            _ => {}
        }
    }

    /// Destroys a root (and its subobjects) on the client, then creates it again once
    /// each destroy is acknowledged (a client reported it broken: Iris's
    /// `ReplicationDisabled`, here followed by a fresh creation).
    pub(super) fn recover(&mut self, table: &mut ObjectTable, root: InternalIndex) {
        let subs = table
            .entry_at(root)
            .map(|e| e.subobjects().to_vec())
            .unwrap_or_default();
        for j in std::iter::once(root).chain(subs) {
            self.stop_replication(table, j, false);
            match self.object_state(j) {
                S::Invalid => self.restart_if_in_scope(table, j),
                S::PendingDestroy | S::WaitOnDestroyConfirmation => self.recovering.set(j),
                _ => {}
            }
        }
    }

    /// Starts replicating `index` again if it is alive and its root is in scope.
    pub(super) fn restart_if_in_scope(&mut self, table: &mut ObjectTable, index: InternalIndex) {
        let Some(entry) = table.entry_at(index) else {
            return;
        };
        let root = entry.root().unwrap_or(index);
        if entry.is_alive() && !self.excluded.get(root) {
            self.start_replication(table, index);
        }
    }

    pub(super) fn recreate(&mut self, table: &ObjectTable, index: InternalIndex) {
        let sends = &mut *self.sends;
        let info = &mut sends.infos[index as usize];
        info.set_state(S::PendingCreate);
        info.set_creation_confirmed(false);
        info.set_all(mask_bits(table, index), &mut sends.pool);
        if info.is_tear_off() {
            info.set_state(S::PendingTearOff);
        }
        self.mark_dirty(table, index);
    }
}
