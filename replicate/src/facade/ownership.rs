//! Ownership seen from the client: the server facade tells each client which root
//! objects it owns, the client facade keeps the set ([`Client::is_owned`]).
//!
//! It travels as a small facade message ([`OwnershipNotice`], a registered replicated
//! type) on the connection's reliable ordered message channel, not in the
//! replication stream, so the replication wire format does not change. The server
//! announces a change of owner (and the object's end, so the client forgets it) at the
//! start of its tick, before the replication core takes the tick's changes, so a
//! notice about a new object travels in the packet that creates it (or an earlier
//! one).
//!
//! The client may learn that it owns an object before the object exists here (the
//! notice is read before the packet's state, or the creation was lost or deferred):
//! it keeps the server's set as announced and reports ownership of an object only
//! while the object exists, so [`ClientEvent::OwnershipGained`] follows the object's
//! [`ClientEvent::Spawned`]. An object that leaves the client's scope and comes back
//! is owned again without a new notice.
//!
//! This module owns the notice and the two ends' bookkeeping; it does not touch how
//! objects are owned on the server (the object table's owning connection).
//!
//! [`Client::is_owned`]: crate::Client::is_owned
//! [`ClientEvent::OwnershipGained`]: crate::ClientEvent::OwnershipGained
//! [`ClientEvent::Spawned`]: crate::ClientEvent::Spawned

use crate::blob::DeliveryMode;
use crate::handle::NetRefHandle;
use crate::object::ConnectionId;
use crate::replication::{ClientWorld, ReplicationServer};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What the server tells one client about one root object it owns or stopped owning.
#[derive(replicate_derive::Replicated, Debug, Default, Clone, PartialEq)]
#[net(crate = "crate", name = "replicate::OwnershipNotice")]
pub(crate) struct OwnershipNotice {
    /// The root object.
    pub(crate) object: NetRefHandle,
    /// Whether the receiving client owns it now.
    pub(crate) owned: bool,
    /// Whether the owner controls it (`AutonomousOnly` members), when owned.
    pub(crate) autonomous: bool,
}

/// The server's side: what each connection was told it owns.
#[derive(Debug, Default)]
pub(crate) struct OwnershipAnnouncer {
    /// Root object → (owning connection, autonomous), as announced.
    announced: HashMap<NetRefHandle, (ConnectionId, bool)>,
    /// Objects whose owner may have changed since the last announcement.
    touched: Vec<NetRefHandle>,
}

impl OwnershipAnnouncer {
    /// The owner of `handle` may have changed (or the object ended).
    pub(crate) fn touch(&mut self, handle: NetRefHandle) {
        self.touched.push(handle);
    }

    /// A connection was added: it learns the objects it already owns (a connection id
    /// can be reused, and objects keep their owning connection).
    pub(crate) fn connected(&mut self, replication: &ReplicationServer, conn: ConnectionId) {
        let objects = replication.objects();
        for handle in objects.handles_iter() {
            if let Some(e) = objects.index_of(handle).and_then(|i| objects.entry_at(i))
                && e.root().is_none()
                && e.owner_connection() == Some(conn)
            {
                self.touched.push(handle);
            }
        }
    }

    /// A connection was removed: forget what it was told, and make the objects it
    /// owned nobody's (a later client may get the same connection id; it must not
    /// inherit them, nor their owner-only members).
    pub(crate) fn disconnected(&mut self, replication: &mut ReplicationServer, conn: ConnectionId) {
        self.announced.retain(|_, (c, _)| *c != conn);
        let objects = replication.objects();
        let owned: Vec<NetRefHandle> = objects
            .handles_iter()
            .filter(|&h| {
                objects
                    .index_of(h)
                    .and_then(|i| objects.entry_at(i))
                    .is_some_and(|e| e.root().is_none() && e.owner_connection() == Some(conn))
            })
            .collect();
        for handle in owned {
            if let Err(e) = replication.set_owner(handle, None, false) {
                tracing::debug!("connection {conn}: owner of {handle} not cleared: {e}");
            }
        }
    }

    /// Sends a notice to each connection whose ownership of a touched object, or an
    /// object the object table created, destroyed, tore off or re-owned this tick,
    /// differs from what it was told. Call before the replication tick (which clears
    /// the table's per-tick lists). `active` are the connections that may be told.
    pub(crate) fn announce(
        &mut self,
        replication: &mut ReplicationServer,
        active: &[ConnectionId],
    ) {
        let objects = replication.objects();
        let mut candidates = std::mem::take(&mut self.touched);
        for &i in objects
            .tick_created()
            .iter()
            .chain(objects.tick_destroyed())
            .chain(objects.tick_torn_off())
            .chain(objects.tick_owner_changed())
        {
            if let Some(e) = objects.entry_at(i) {
                candidates.push(e.handle());
            }
        }
        if candidates.is_empty() {
            return;
        }
        candidates.sort_unstable();
        candidates.dedup();
        // Per connection, in handle order: (handle, owned, autonomous).
        let mut out: BTreeMap<ConnectionId, Vec<OwnershipNotice>> = BTreeMap::new();
        for handle in candidates {
            let current = objects
                .index_of(handle)
                .and_then(|i| objects.entry_at(i))
                .filter(|e| e.is_alive() && e.root().is_none())
                .and_then(|e| Some((e.owner_connection()?, e.is_autonomous())))
                .filter(|(c, _)| active.contains(c));
            let previous = self.announced.get(&handle).copied();
            if current == previous {
                continue;
            }
            if let Some((old, _)) = previous
                && current.map(|(c, _)| c) != Some(old)
                && active.contains(&old)
            {
                out.entry(old).or_default().push(OwnershipNotice {
                    object: handle,
                    owned: false,
                    autonomous: false,
                });
            }
            match current {
                Some((conn, autonomous)) => {
                    out.entry(conn).or_default().push(OwnershipNotice {
                        object: handle,
                        owned: true,
                        autonomous,
                    });
                    self.announced.insert(handle, (conn, autonomous));
                }
                None => {
                    self.announced.remove(&handle);
                }
            }
        }
        for (conn, notices) in out {
            for notice in notices {
                if let Err(e) =
                    replication.send_message(conn, &notice, DeliveryMode::ReliableOrdered)
                {
                    tracing::warn!(
                        "connection {conn}: ownership of {} not sent: {e}",
                        notice.object
                    );
                }
            }
        }
    }
}

/// A change of what the client owns, reported as a [`ClientEvent`](crate::ClientEvent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnershipChange {
    Gained(NetRefHandle, bool),
    Lost(NetRefHandle),
}

/// The client's side: the server's announcements and what was reported to game code.
#[derive(Debug, Default)]
pub(crate) struct OwnershipTracker {
    /// Root objects the server says this client owns (whether they exist here or
    /// not), with their autonomous flag.
    owned: HashMap<NetRefHandle, bool>,
    /// Owned objects reported with `OwnershipGained` that still exist here, with the
    /// autonomous flag reported.
    reported: HashMap<NetRefHandle, bool>,
    /// Objects to look at in [`settle`](Self::settle).
    pending: HashSet<NetRefHandle>,
}

impl OwnershipTracker {
    /// Takes a notice from the server.
    pub(crate) fn on_notice(&mut self, notice: OwnershipNotice) {
        if notice.owned {
            self.owned.insert(notice.object, notice.autonomous);
        } else {
            self.owned.remove(&notice.object);
        }
        self.pending.insert(notice.object);
    }

    /// An object appeared here.
    pub(crate) fn on_spawned(&mut self, handle: NetRefHandle) {
        self.pending.insert(handle);
    }

    /// An object is gone here (destroyed, torn off): no longer reported as owned, and
    /// no `OwnershipLost` for it (its end is the event). What the server announced is
    /// kept, so the object is owned again if it comes back into scope.
    pub(crate) fn on_gone(&mut self, handle: NetRefHandle) {
        self.reported.remove(&handle);
        self.pending.remove(&handle);
    }

    /// The changes to report after a packet (or a tick), in handle order.
    pub(crate) fn settle(&mut self, world: &ClientWorld) -> Vec<OwnershipChange> {
        let mut pending: Vec<NetRefHandle> = self.pending.drain().collect();
        pending.sort_unstable();
        let mut out = Vec::new();
        for handle in pending {
            let exists = world.object(handle).is_some();
            let now = self.owned.get(&handle).copied().filter(|_| exists);
            let before = self.reported.get(&handle).copied();
            match (before, now) {
                (None, Some(a)) => {
                    self.reported.insert(handle, a);
                    out.push(OwnershipChange::Gained(handle, a));
                }
                (Some(b), Some(a)) if a != b => {
                    self.reported.insert(handle, a);
                    out.push(OwnershipChange::Gained(handle, a));
                }
                (Some(_), None) => {
                    self.reported.remove(&handle);
                    out.push(OwnershipChange::Lost(handle));
                }
                _ => {}
            }
        }
        out
    }

    /// Whether this client owns the root object `root` and it was reported.
    pub(crate) fn owns(&self, root: NetRefHandle) -> Option<bool> {
        self.reported.get(&root).copied()
    }

    /// The owned objects that exist here, in handle order.
    pub(crate) fn owned(&self) -> Vec<NetRefHandle> {
        let mut v: Vec<NetRefHandle> = self.reported.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u64) -> NetRefHandle {
        NetRefHandle::new(n, false, 0)
    }

    #[test]
    fn a_notice_for_an_object_not_here_yet_waits_for_it() {
        let world = ClientWorld::new(
            std::sync::Arc::new(crate::protocol::ProtocolRegistry::default()),
            Default::default(),
        );
        let mut t = OwnershipTracker::default();
        t.on_notice(OwnershipNotice {
            object: h(1),
            owned: true,
            autonomous: true,
        });
        // The object does not exist in this world: nothing is reported yet.
        assert!(t.settle(&world).is_empty());
        assert_eq!(t.owns(h(1)), None);
        assert!(t.owned.contains_key(&h(1)), "the announcement is kept");
        // Losing it before it ever arrived reports nothing either.
        t.on_notice(OwnershipNotice {
            object: h(1),
            owned: false,
            autonomous: false,
        });
        assert!(t.settle(&world).is_empty());
        assert!(t.owned.is_empty());
    }
}
