//! [`ReplicationReader`]: the receiving half of the replication stream (Iris's
//! `FReplicationReader`), and the client's object store ([`ClientWorld`]).
//!
//! Per packet: destroys are read first (and, by default, executed last), then the
//! objects section (see `wire`). A creation binds its connection-local object index to
//! the handle and creates the object through the registry's factory; any other batch
//! names its object by index and updates its quantized state. After all batches the
//! state is dispatched to the game objects (`apply`, which calls the notify hooks with
//! old values) and events are queued; then end of replication (destroy, tear-off) is
//! dispatched (Iris's `DeferEndReplication`); then parked object references are
//! retried.
//!
//! A long-form batch (creation, tear-off, tags) that fails to decode marks its handle
//! broken: its size prefix finds the next batch, the object is reported to the server
//! (which destroys and recreates it) and the rest of the packet, and the connection, go
//! on. A plain update carries no size: one that fails to decode, or names an object
//! this side does not have (its creation failed), stops reading the packet, and the
//! client closes the connection with a read error. Plain updates of a broken object
//! that exists are still decoded (so its baselines stay in step) but not applied. A
//! framing error stops reading the packet; the batches read so far are dispatched.
//!
//! Packets are read in send order (the connection drops one older than the newest
//! received). Every applied member still remembers the (extended) sequence of the
//! packet that set it, and a destroyed or torn-off handle leaves a tombstone, so an
//! older creation or update fed to the reader directly is ignored.
//!
//! References (`NetRefHandle` members) to objects this side does not have are parked:
//! each member holding such a reference is withheld from the game object (which keeps
//! its previous value, the invalid handle for a new object) until its targets exist,
//! then applied (event [`ReplicationEvent::ReferencesResolved`]); the other members are
//! applied as usual. The quantized state always holds what was received. Parked targets
//! sit in a hot cache retried on every packet for `hot_resolving_lifetime`, then in a
//! cold cache retried every `cold_resolving_retry`.

use super::baseline::{ReceiverBaselines, read_delta_body, store_baseline};
use super::wire::{
    BATCH_SIZE_BITS, BatchHead, ObjectReadError, SectionFrame, read_batch_size, read_mask,
};
use super::{ReplicationConfig, ReplicationEvent};
use crate::bits::{BitReader, BitWriter};
use crate::connection::{DeliveryStatus, PacketSequence};
use crate::handle::NetRefHandle;
use crate::protocol::{ErasedObject, ErasedState, ProtocolIndex, ProtocolRegistry};
use crate::serialize::SerializeError;
use crate::state::{ChangeMask, Replicated};
use crate::stream::tokens::{NetToken, SharedImports, TokenImports, lock};
use crate::stream::{DataStream, StreamError, WriteResult};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// A replicated object on the receiving side.
pub struct ClientObject {
    handle: NetRefHandle,
    protocol: ProtocolIndex,
    state: Box<dyn ErasedState>,
    instance: Option<Box<dyn ErasedObject>>,
    owner: Option<NetRefHandle>,
    pending_refs: Option<ChangeMask>,
    created_seq: u64,
    member_seq: Vec<u64>,
    tags: Vec<String>,
    tags_seq: u64,
    baselines: ReceiverBaselines,
}

impl std::fmt::Debug for ClientObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientObject")
            .field("handle", &self.handle)
            .field("protocol", &self.protocol)
            .field("state", &self.state)
            .finish()
    }
}

impl ClientObject {
    /// Its handle.
    pub fn handle(&self) -> NetRefHandle {
        self.handle
    }
    /// Its type's wire index.
    pub fn protocol(&self) -> ProtocolIndex {
        self.protocol
    }
    /// The last received quantized state.
    pub fn state(&self) -> &dyn ErasedState {
        self.state.as_ref()
    }
    /// The game object.
    pub fn instance(&self) -> Option<&dyn ErasedObject> {
        self.instance.as_deref()
    }
    /// The owner, for a subobject.
    pub fn owner(&self) -> Option<NetRefHandle> {
        self.owner
    }
    /// The object's tags (received as net tokens).
    pub fn tags(&self) -> &[String] {
        &self.tags
    }
    /// The stored delta-compression baselines.
    pub fn baselines(&self) -> &ReceiverBaselines {
        &self.baselines
    }
    /// Change-mask bits withheld until their references resolve.
    pub fn pending_reference_mask(&self) -> Option<&ChangeMask> {
        self.pending_refs.as_ref().filter(|m| m.any())
    }
}

/// Counters of the receiving side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Packets read.
    pub packets: u64,
    /// Batches read (including skipped ones).
    pub batches: u64,
    /// Batches skipped because their object is broken.
    pub skipped_broken: u64,
    /// Objects marked broken.
    pub broken_objects: u64,
    /// Destroys for objects this side did not have.
    pub unknown_destroys: u64,
    /// Resolve attempts on hot-cache entries.
    pub hot_resolve_attempts: u64,
    /// Resolve attempts on cold-cache entries.
    pub cold_resolve_attempts: u64,
    /// Framing errors (rest of the packet dropped).
    pub framing_errors: u64,
    /// Members of reordered (older) packets not applied because a newer packet had
    /// already set them.
    pub stale_members: u64,
    /// Batches of reordered packets for objects destroyed by a newer packet, and
    /// updates of objects whose creation packet was lost.
    pub stale_batches: u64,
    /// Packets older than one already read, dropped unread: plain updates decode
    /// against the newest baselines, so packets are read in send order (the
    /// connection drops such packets before they get here).
    pub stale_packets: u64,
    /// Bits of object batches received (framing included), per protocol index.
    pub bits_per_type: Vec<u64>,
}

#[derive(Debug)]
struct Unresolved {
    waiters: Vec<NetRefHandle>,
    since: Duration,
    cold: bool,
}

/// The parked references: hot and cold caches keyed by the missing target.
#[derive(Debug, Default)]
pub struct ReferenceResolver {
    entries: HashMap<NetRefHandle, Unresolved>,
    last_cold_pass: Option<Duration>,
}

impl ReferenceResolver {
    /// (hot, cold) entry counts.
    pub fn counts(&self) -> (usize, usize) {
        let cold = self.entries.values().filter(|e| e.cold).count();
        (self.entries.len() - cold, cold)
    }

    fn add(&mut self, target: NetRefHandle, waiter: NetRefHandle, now: Duration) {
        let e = self.entries.entry(target).or_insert_with(|| Unresolved {
            waiters: Vec::new(),
            since: now,
            cold: false,
        });
        if !e.waiters.contains(&waiter) {
            e.waiters.push(waiter);
        }
    }
}

/// The receiving side's objects and everything the reader updates: the client's world.
pub struct ClientWorld {
    registry: Arc<ProtocolRegistry>,
    config: ReplicationConfig,
    /// Boxed: the map's slack (up to half its slots) then costs a pointer each.
    objects: HashMap<NetRefHandle, Box<ClientObject>>,
    children: HashMap<NetRefHandle, Vec<NetRefHandle>>,
    torn_off: HashMap<NetRefHandle, Box<ClientObject>>,
    broken: HashSet<NetRefHandle>,
    events: Vec<ReplicationEvent>,
    resolver: ReferenceResolver,
    imports: SharedImports,
    now: Duration,
    stats: ReaderStats,
    packet_seq: u64,
    latest_seq: Option<u64>,
    tombstones: HashMap<NetRefHandle, u64>,
    /// Connection-local object index → the handle its latest creation named.
    locals: Vec<Option<NetRefHandle>>,
    /// The index each handle was last bound to (an object created again comes under a
    /// new index: its old one must not name it any more).
    local_of: HashMap<NetRefHandle, u32>,
}

/// How far behind the newest packet a tombstone is kept (the connection rejects packets
/// more than 33 sequences old, so this is generous).
const TOMBSTONE_WINDOW: u64 = 1024;

impl std::fmt::Debug for ClientWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientWorld")
            .field("objects", &self.objects.len())
            .field("events", &self.events.len())
            .finish()
    }
}

impl ClientWorld {
    /// An empty world for the types in `registry`.
    pub fn new(registry: Arc<ProtocolRegistry>, config: ReplicationConfig) -> Self {
        Self {
            registry,
            config,
            objects: HashMap::new(),
            children: HashMap::new(),
            torn_off: HashMap::new(),
            broken: HashSet::new(),
            events: Vec::new(),
            resolver: ReferenceResolver::default(),
            imports: SharedImports::default(),
            now: Duration::ZERO,
            stats: ReaderStats::default(),
            packet_seq: 0,
            latest_seq: None,
            tombstones: HashMap::new(),
            locals: Vec::new(),
            local_of: HashMap::new(),
        }
    }

    /// Sets the sequence of the packet about to be read (from the connection header).
    /// Sequences are extended to 64 bits relative to the newest seen, so a reordered
    /// packet compares as older. Returns whether the packet is newer than every packet
    /// read before; only such a packet may be read (others are counted in
    /// [`ReaderStats::stale_packets`]).
    pub fn begin_packet(&mut self, sequence: PacketSequence) -> bool {
        let ext = match self.latest_seq {
            None => (1u64 << 32) + sequence.0 as u64,
            Some(latest) => {
                let d = sequence.0.wrapping_sub(latest as u16) as i16 as i64;
                (latest as i64 + d).max(1) as u64
            }
        };
        self.packet_seq = ext;
        let newest = self.latest_seq.is_none_or(|l| ext > l);
        if newest {
            self.latest_seq = Some(ext);
        } else {
            self.stats.stale_packets += 1;
        }
        if self.tombstones.len() > 256 {
            let horizon = self
                .latest_seq
                .unwrap_or(0)
                .saturating_sub(TOMBSTONE_WINDOW);
            self.tombstones.retain(|_, s| *s >= horizon);
        }
        newest
    }

    /// The current time (as passed to the last read or update).
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Sets the current time.
    pub fn set_now(&mut self, now: Duration) {
        self.now = now;
    }

    /// The replicated object with this handle.
    pub fn object(&self, handle: NetRefHandle) -> Option<&ClientObject> {
        self.objects.get(&handle).map(Box::as_ref)
    }

    /// All replicated objects.
    pub fn objects(&self) -> impl Iterator<Item = &ClientObject> {
        self.objects.values().map(Box::as_ref)
    }

    /// Number of replicated objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there is no replicated object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// A replicated game object as its concrete type.
    pub fn get<T: Replicated>(&self, handle: NetRefHandle) -> Option<&T> {
        self.objects
            .get(&handle)?
            .instance
            .as_ref()?
            .as_any()
            .downcast_ref::<T>()
    }

    /// A replicated game object as its concrete type, mutably (local changes are
    /// overwritten by the next update of the same members).
    pub fn get_mut<T: Replicated>(&mut self, handle: NetRefHandle) -> Option<&mut T> {
        self.objects
            .get_mut(&handle)?
            .instance
            .as_mut()?
            .as_any_mut()
            .downcast_mut::<T>()
    }

    /// Registers a static (level) object under the handle the server uses for it, so
    /// its replicated state applies to this instance without a spawn.
    pub fn register_static<T: Replicated>(&mut self, handle: NetRefHandle, object: T) -> bool {
        let Some(protocol) = self.registry.index_of::<T>() else {
            tracing::error!(
                "register_static: {} is not registered",
                std::any::type_name::<T>()
            );
            return false;
        };
        if !handle.is_static() || self.objects.contains_key(&handle) {
            return false;
        }
        let state = Box::new(object.to_state());
        self.objects.insert(
            handle,
            Box::new(ClientObject {
                handle,
                protocol,
                state,
                instance: Some(Box::new(object)),
                owner: None,
                pending_refs: None,
                created_seq: 0,
                member_seq: vec![0; T::descriptor().change_mask_bits as usize],
                tags: Vec::new(),
                tags_seq: 0,
                baselines: ReceiverBaselines::default(),
            }),
        );
        true
    }

    /// Takes a torn-off object (no longer replicated; the game keeps it).
    pub fn take_torn_off(&mut self, handle: NetRefHandle) -> Option<Box<dyn ErasedObject>> {
        self.torn_off.remove(&handle)?.instance
    }

    /// A torn-off object still held by the world.
    pub fn torn_off(&self, handle: NetRefHandle) -> Option<&ClientObject> {
        self.torn_off.get(&handle).map(Box::as_ref)
    }

    /// Whether the handle was marked broken.
    pub fn is_broken(&self, handle: NetRefHandle) -> bool {
        self.broken.contains(&handle)
    }

    /// Drains the queued events.
    pub fn drain_events(&mut self) -> Vec<ReplicationEvent> {
        std::mem::take(&mut self.events)
    }

    /// Counters.
    pub fn stats(&self) -> &ReaderStats {
        &self.stats
    }

    /// The registry of the types this world replicates.
    pub fn registry(&self) -> &Arc<ProtocolRegistry> {
        &self.registry
    }

    /// The parked references.
    pub fn resolver(&self) -> &ReferenceResolver {
        &self.resolver
    }

    /// The connection's received net tokens (batch exports and the token stream).
    pub fn imports(&self) -> std::sync::MutexGuard<'_, TokenImports> {
        lock(&self.imports)
    }

    /// The shared import table (to give the token stream).
    pub fn shared_imports(&self) -> SharedImports {
        self.imports.clone()
    }

    /// The members of `state` holding a reference to one of `unresolved` (each
    /// reference member's references are found by copying that member alone into a
    /// default state).
    fn withheld_members(
        &self,
        protocol: ProtocolIndex,
        state: &dyn ErasedState,
        unresolved: &[NetRefHandle],
    ) -> ChangeMask {
        let desc = state.type_descriptor();
        let mut out = ChangeMask::new(desc.change_mask_bits);
        if unresolved.is_empty() {
            return out;
        }
        let Some(reg) = self.registry.get(protocol) else {
            return out;
        };
        let mut refs = Vec::new();
        for m in desc.members.iter().filter(|m| m.has_object_references) {
            let mut bits = ChangeMask::new(desc.change_mask_bits);
            bits.set_range(m.change_mask_offset, m.change_mask_bits);
            let mut w = BitWriter::with_capacity_bits(1 << BATCH_SIZE_BITS);
            state.serialize(&bits, &mut w);
            let bytes = w.to_bytes();
            let mut single = (reg.new_state)();
            refs.clear();
            let ok = !w.is_overflown()
                && single
                    .deserialize(&bits, &mut BitReader::with_bit_len(&bytes, w.position()))
                    .is_ok();
            if ok {
                single.collect_references(&mut refs);
            }
            if !ok || refs.iter().any(|r| unresolved.contains(r)) {
                out.or_with(&bits);
            }
        }
        out
    }

    fn unresolved_targets(&self, state: &dyn ErasedState) -> Vec<NetRefHandle> {
        let mut refs = Vec::new();
        state.collect_references(&mut refs);
        refs.retain(|h| h.is_valid() && !self.objects.contains_key(h));
        refs.sort_unstable();
        refs.dedup();
        refs
    }

    /// Applies the received state of `handle` to its game object (creating it when
    /// `created`), withholding reference members whose targets are missing.
    fn dispatch_state(&mut self, handle: NetRefHandle, mask: &ChangeMask, created: bool) {
        let Some(obj) = self.objects.get(&handle) else {
            return;
        };
        let protocol = obj.protocol;
        let unresolved = self.unresolved_targets(obj.state.as_ref());
        let withheld = self.withheld_members(protocol, obj.state.as_ref(), &unresolved);
        let Some(reg) = self.registry.get(protocol).copied() else {
            return;
        };
        let now = self.now;
        let Some(obj) = self.objects.get_mut(&handle) else {
            return;
        };
        if created && obj.instance.is_none() {
            if withheld.any() {
                let default = (reg.new_state)();
                let mut inst = (reg.create)(default.as_ref());
                let mut m = ChangeMask::all(withheld.len());
                m.and_not(&withheld);
                if let Some(i) = inst.as_mut() {
                    i.apply(obj.state.as_ref(), &m);
                }
                obj.instance = inst;
                obj.pending_refs = Some(withheld);
            } else {
                obj.instance = (reg.create)(obj.state.as_ref());
            }
            if obj.instance.is_none() {
                tracing::error!("replication reader: factory failed for {handle}");
            }
            self.events
                .push(ReplicationEvent::Spawned { handle, protocol });
        } else {
            // Apply what arrived and what was waiting, except members still waiting
            // for a reference.
            let mut applied = mask.clone();
            if let Some(p) = obj.pending_refs.take() {
                applied.or_with(&p);
            }
            let mut waiting = applied.clone();
            waiting.and_with(&withheld);
            applied.and_not(&withheld);
            if waiting.any() {
                obj.pending_refs = Some(waiting);
            }
            if applied.any() {
                if let Some(inst) = obj.instance.as_mut() {
                    inst.apply(obj.state.as_ref(), &applied);
                }
                self.events.push(ReplicationEvent::MembersChanged {
                    handle,
                    mask: applied,
                });
            }
        }
        for t in unresolved {
            self.resolver.add(t, handle, now);
        }
    }

    /// The most object indices a packet may name: `max_client_objects` plus room for
    /// indices freed and not yet reused.
    fn local_cap(&self) -> usize {
        self.config
            .max_client_objects
            .saturating_add(1 << 16)
            .min(super::wire::MAX_OBJECT_INDEX as usize + 1)
    }

    /// Binds object index `index` (below [`local_cap`](Self::local_cap)) to `handle`,
    /// unbinding the index `handle` had before: the writer may give that one to
    /// another object, whose updates (sent while its creation is in flight) must not
    /// reach this one.
    fn bind(&mut self, index: u32, handle: NetRefHandle) {
        let i = index as usize;
        if self.locals.len() <= i {
            self.locals.resize(i + 1, None);
        }
        if let Some(old) = self.local_of.insert(handle, index)
            && old != index
            && let Some(slot) = self.locals.get_mut(old as usize)
            && *slot == Some(handle)
        {
            *slot = None;
        }
        if let Some(previous) = self.locals[i].replace(handle)
            && previous != handle
            && self.local_of.get(&previous) == Some(&index)
        {
            self.local_of.remove(&previous);
        }
    }

    /// The handle object index `index` is bound to.
    fn bound(&self, index: u32) -> Option<NetRefHandle> {
        self.locals.get(index as usize).copied().flatten()
    }

    /// Adds a batch's bits to its type's received total.
    fn count_bits(&mut self, handle: NetRefHandle, bits: usize) {
        if let Some(protocol) = self.objects.get(&handle).map(|o| usize::from(o.protocol)) {
            let per_type = &mut self.stats.bits_per_type;
            if per_type.len() <= protocol {
                per_type.resize(protocol + 1, 0);
            }
            per_type[protocol] += bits as u64;
        }
    }

    fn end_replication(&mut self, handle: NetRefHandle, tear_off: bool) {
        let seq = self.packet_seq;
        if self
            .objects
            .get(&handle)
            .is_some_and(|o| o.created_seq > seq)
        {
            // A destroy older than the object's creation (reordered): ignore it.
            return;
        }
        let t = self.tombstones.entry(handle).or_insert(seq);
        *t = (*t).max(seq);
        if !tear_off
            && let Some(index) = self.local_of.remove(&handle)
            && let Some(slot) = self.locals.get_mut(index as usize)
            && *slot == Some(handle)
        {
            // Nothing names a destroyed object: the writer reuses its index once the
            // destroy is acknowledged.
            *slot = None;
        }
        // A broken handle is whole again once destroyed: the server destroys an object
        // reported broken and creates it anew (even one whose creation failed here).
        self.broken.remove(&handle);
        let Some(obj) = self.objects.remove(&handle) else {
            if !tear_off {
                self.stats.unknown_destroys += 1;
            }
            return;
        };
        self.broken.remove(&handle);
        if let Some(owner) = obj.owner
            && let Some(list) = self.children.get_mut(&owner)
        {
            list.retain(|h| *h != handle);
        }
        let children = self.children.remove(&handle).unwrap_or_default();
        if tear_off {
            self.torn_off.insert(handle, obj);
            self.events.push(ReplicationEvent::TornOff { handle });
        } else {
            self.events.push(ReplicationEvent::Destroyed { handle });
        }
        for c in children {
            self.end_replication(c, tear_off);
        }
    }

    /// Retries parked references: hot entries every call, cold entries every
    /// `cold_resolving_retry`; hot entries older than `hot_resolving_lifetime` turn cold.
    pub fn resolve_references(&mut self) {
        if self.resolver.entries.is_empty() {
            return;
        }
        let now = self.now;
        let use_cache = self.config.use_resolving_cache;
        let cold_due = !use_cache
            || self
                .resolver
                .last_cold_pass
                .is_none_or(|t| now.saturating_sub(t) >= self.config.cold_resolving_retry);
        if cold_due {
            self.resolver.last_cold_pass = Some(now);
        }
        let mut ready = Vec::new();
        let objects = &self.objects;
        let stats = &mut self.stats;
        let hot_lifetime = self.config.hot_resolving_lifetime;
        self.resolver.entries.retain(|target, e| {
            if e.cold && !cold_due {
                return true;
            }
            // Waiters that are gone or no longer wait for anything are forgotten, so
            // references to objects that never come do not pile up.
            e.waiters.retain(|w| {
                objects
                    .get(w)
                    .is_some_and(|o| o.pending_refs.as_ref().is_some_and(|m| m.any()))
            });
            if e.waiters.is_empty() {
                return false;
            }
            if e.cold {
                stats.cold_resolve_attempts += 1;
            } else {
                stats.hot_resolve_attempts += 1;
            }
            if objects.contains_key(target) {
                ready.append(&mut e.waiters);
                return false;
            }
            if use_cache && !e.cold && now.saturating_sub(e.since) >= hot_lifetime {
                e.cold = true;
            }
            true
        });
        ready.sort_unstable();
        ready.dedup();
        for waiter in ready {
            let Some(obj) = self.objects.get(&waiter) else {
                continue;
            };
            let Some(pending) = obj.pending_refs.clone().filter(|m| m.any()) else {
                continue;
            };
            let unresolved = self.unresolved_targets(obj.state.as_ref());
            let withheld = self.withheld_members(obj.protocol, obj.state.as_ref(), &unresolved);
            let mut apply = pending.clone();
            apply.and_not(&withheld);
            if !apply.any() {
                continue;
            }
            let mut still = pending;
            still.and_with(&withheld);
            let Some(obj) = self.objects.get_mut(&waiter) else {
                continue;
            };
            obj.pending_refs = still.any().then_some(still);
            if let Some(inst) = obj.instance.as_mut() {
                inst.apply(obj.state.as_ref(), &apply);
            }
            self.events.push(ReplicationEvent::ReferencesResolved {
                handle: waiter,
                mask: apply,
            });
        }
    }
}

/// Fails when a batch names another protocol than the object's.
fn check_protocol(obj: &ClientObject, protocol: Option<u64>) -> Result<(), ObjectReadError> {
    match protocol {
        Some(p) if p != obj.protocol as u64 => Err(ObjectReadError::ProtocolMismatch {
            expected: obj.protocol,
            got: p,
        }),
        _ => Ok(()),
    }
}

/// Takes `received` (decoded from packet `seq`, members `mask`) as the object's state,
/// except members a newer packet already set, which keep their value. Returns the
/// members taken.
fn take_fresh_members(
    obj: &mut ClientObject,
    mut received: Box<dyn ErasedState>,
    mask: &ChangeMask,
    seq: u64,
    stats: &mut ReaderStats,
) -> Result<ChangeMask, ObjectReadError> {
    let mut fresh = mask.clone();
    let mut stale = ChangeMask::new(mask.len());
    for bit in mask.iter_ones() {
        if obj.member_seq.get(bit as usize).is_some_and(|s| *s > seq) {
            fresh.clear_bit(bit);
            stale.set(bit);
        }
    }
    if stale.any() {
        let mut w = BitWriter::with_capacity_bits(1 << 20);
        obj.state.serialize(&stale, &mut w);
        let bytes = w.finish().map_err(SerializeError::from)?;
        received.deserialize(&stale, &mut BitReader::with_bit_len(&bytes, w.position()))?;
        stats.stale_members += stale.count_ones() as u64;
    }
    obj.state = received;
    for bit in fresh.iter_ones() {
        if let Some(s) = obj.member_seq.get_mut(bit as usize) {
            *s = seq;
        }
    }
    Ok(fresh)
}

/// Reads a state batch for an object this side has into its quantized state; members
/// set by a newer packet keep their value. Returns the members taken.
fn update_existing(
    obj: &mut ClientObject,
    mask: ChangeMask,
    seq: u64,
    b: &mut BitReader,
    stats: &mut ReaderStats,
) -> Result<ChangeMask, ObjectReadError> {
    let mut scratch = obj.state.clone_box();
    scratch.deserialize(&mask, b)?;
    scratch.validate(&mask)?;
    take_fresh_members(obj, scratch, &mask, seq, stats)
}

/// Like [`update_existing`] for a delta-compressed batch: decodes against the stored
/// baseline (or the default state), stores a nominated baseline. `None`: the batch is
/// older than the baseline it names and was skipped.
fn update_existing_delta(
    obj: &mut ClientObject,
    head: BatchHead,
    mask: ChangeMask,
    new_state: fn() -> Box<dyn ErasedState>,
    seq: u64,
    b: &mut BitReader,
    stats: &mut ReaderStats,
) -> Result<Option<ChangeMask>, ObjectReadError> {
    let Some(body) = read_delta_body(
        Some(obj.state.as_ref()),
        Some(&obj.baselines),
        new_state,
        head,
        mask,
        seq,
        b,
    )?
    else {
        stats.stale_batches += 1;
        return Ok(None);
    };
    store_baseline(&mut obj.baselines, body.store, body.reference_seq, seq);
    take_fresh_members(obj, body.state, &body.mask, seq, stats).map(Some)
}

struct Dispatch {
    handle: NetRefHandle,
    mask: ChangeMask,
    created: bool,
    tear_off: bool,
}

/// The receiving half of the replication stream. Its only upstream data is the list of
/// objects it marked broken, so the server stops replicating them to this side.
///
/// Upstream wire format: `([1][handle])* [0]`.
#[derive(Default)]
pub struct ReplicationReader {
    to_dispatch: Vec<Dispatch>,
    ends: Vec<(NetRefHandle, bool)>,
    /// Objects found broken, to report to the server.
    to_report: Vec<NetRefHandle>,
    reports_in_flight: std::collections::VecDeque<Vec<NetRefHandle>>,
}

impl std::fmt::Debug for ReplicationReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationReader").finish()
    }
}

fn framing(reason: impl std::fmt::Display) -> StreamError {
    StreamError::malformed(ReplicationReader::NAME, reason)
}

impl ReplicationReader {
    /// The stream's name (same as the writer's).
    pub const NAME: &'static str = super::wire::REPLICATION_STREAM_NAME;

    /// Reads one packet's replication section into `world` and applies it to the game
    /// objects ([`read_section`](Self::read_section) then
    /// [`dispatch`](Self::dispatch)).
    pub fn read(&mut self, world: &mut ClientWorld, r: &mut BitReader) -> Result<(), StreamError> {
        let result = self.read_section(world, r);
        self.dispatch(world);
        result
    }

    /// Reads one packet's replication section into the objects' quantized states,
    /// without touching the game objects yet: creations, state and end of replication
    /// wait for [`dispatch`](Self::dispatch) (as a stream, the reader dispatches in
    /// [`DataStream::end_packet`], once every section of the packet was read).
    pub fn read_section(
        &mut self,
        world: &mut ClientWorld,
        r: &mut BitReader,
    ) -> Result<(), StreamError> {
        world.stats.packets += 1;
        let result = self.read_sections(world, r);
        if result.is_err() {
            world.stats.framing_errors += 1;
        }
        result
    }

    /// Applies what [`read_section`](Self::read_section) read: state to the game
    /// objects (notify hooks, events), then end of replication, then parked references.
    pub fn dispatch(&mut self, world: &mut ClientWorld) {
        // Whatever was read completely is dispatched, even after a framing error.
        for d in std::mem::take(&mut self.to_dispatch) {
            world.dispatch_state(d.handle, &d.mask, d.created);
            if d.tear_off {
                self.ends.push((d.handle, true));
            }
        }
        for (h, tear_off) in std::mem::take(&mut self.ends) {
            world.end_replication(h, tear_off);
        }
        world.resolve_references();
    }

    fn read_sections(
        &mut self,
        world: &mut ClientWorld,
        r: &mut BitReader,
    ) -> Result<(), StreamError> {
        while r.read_bool() {
            let h = NetRefHandle::read(r).map_err(framing)?;
            if world.config.defer_end_replication {
                self.ends.push((h, false));
            } else {
                world.end_replication(h, false);
            }
        }
        r.check().map_err(framing)?;
        let mut frame = SectionFrame::begin_read(r).map_err(framing)?;
        loop {
            let start = r.position();
            let Some(index) = frame.read_index(r).map_err(framing)? else {
                break;
            };
            self.read_batch(world, r, &mut frame, index, start)?;
        }
        r.check().map_err(framing)
    }

    fn read_batch(
        &mut self,
        world: &mut ClientWorld,
        r: &mut BitReader,
        frame: &mut SectionFrame,
        index: u32,
        start: usize,
    ) -> Result<(), StreamError> {
        if index as usize >= world.local_cap() {
            return Err(framing(format!(
                "object index {index} is past the cap of {} (max_client_objects)",
                world.local_cap()
            )));
        }
        let long_form = r.read_bool();
        r.check().map_err(framing)?;
        if !long_form {
            return self.read_plain(world, r, frame, index, start);
        }
        // `[0][size: 7]`, `[1][size: 16]`, or, for a huge object's batch (only inside a
        // blob), `[1][escape: 16][size: 32]`.
        let size = read_batch_size(r);
        r.check().map_err(framing)?;
        if size > r.bits_left() {
            return Err(framing(format!(
                "batch of object index {index} claims {size} bits, {} left",
                r.bits_left()
            )));
        }
        world.stats.batches += 1;
        let mut body = r.substream(size);
        let has_exports = body.read_bool();
        if has_exports {
            lock(&world.imports).read_exports(r)?;
        }
        let creating = body.read_bool();
        let handle = if creating {
            let handle = NetRefHandle::read(&mut body).map_err(framing)?;
            world.bind(index, handle);
            handle
        } else {
            match world.bound(index) {
                Some(h) => h,
                None => {
                    // An update written while the object's creation was in flight,
                    // whose packet was lost: the server resends the creation.
                    world.stats.stale_batches += 1;
                    return Ok(());
                }
            }
        };
        if world.broken.contains(&handle) {
            world.stats.skipped_broken += 1;
            return Ok(());
        }
        let decoded = self.decode_long(world, handle, creating, &mut body);
        world.count_bits(handle, r.position().saturating_sub(start));
        if let Err(e) = decoded {
            tracing::warn!("replication reader: object {handle}: {e}");
            if e.breaks_object() {
                world.broken.insert(handle);
                world.stats.broken_objects += 1;
                // Tell the server to stop replicating it here (Iris's ReplicationDisabled).
                self.to_report.push(handle);
            }
            world
                .events
                .push(ReplicationEvent::ObjectError { handle, error: e });
        }
        Ok(())
    }

    /// A plain update: no size, so it must decode for the rest of the section to be
    /// found; when it does not, the packet fails (and the client closes the connection).
    fn read_plain(
        &mut self,
        world: &mut ClientWorld,
        r: &mut BitReader,
        frame: &mut SectionFrame,
        index: u32,
        start: usize,
    ) -> Result<(), StreamError> {
        world.stats.batches += 1;
        let handle = world.bound(index).ok_or_else(|| {
            framing(format!(
                "update for object index {index}, which no creation named: the ends disagree on the object indices"
            ))
        })?;
        let seq = world.packet_seq;
        let Some(obj) = world.objects.get_mut(&handle) else {
            return Err(framing(format!(
                "update for object {handle}, which this side does not have (its creation failed): \
                 the rest of the packet cannot be read"
            )));
        };
        let protocol = obj.protocol;
        let bits = obj.state.type_descriptor().change_mask_bits;
        let head = frame
            .read_head(r, |slot| obj.baselines.has_prior(slot))
            .map_err(framing)?;
        let mask = frame
            .read_mask(r, protocol, bits, head.mask_hint(false))
            .map_err(framing)?;
        frame.note_plain(head, protocol, &mask);
        let fresh = match head {
            BatchHead::Full => update_existing(obj, mask, seq, r, &mut world.stats),
            head => {
                let new_state = world
                    .registry
                    .get(protocol)
                    .ok_or(ObjectReadError::UnknownProtocol(protocol as u64))
                    .map_err(|e| framing(format!("object {handle}: {e}")))?
                    .new_state;
                update_existing_delta(obj, head, mask, new_state, seq, r, &mut world.stats)
                    .and_then(|f| {
                        f.ok_or(ObjectReadError::Decode(SerializeError::invalid(
                            "baseline",
                            "a plain update names a baseline newer than its packet",
                        )))
                    })
            }
        };
        world.count_bits(handle, r.position().saturating_sub(start));
        let fresh = match fresh {
            Ok(fresh) => fresh,
            Err(e) => {
                // Its end is unknown: so is where the next batch starts.
                world.broken.insert(handle);
                world.stats.broken_objects += 1;
                world.events.push(ReplicationEvent::ObjectError {
                    handle,
                    error: e.clone(),
                });
                return Err(framing(format!(
                    "object {handle}: {e}; a plain update carries no size, so the rest of the packet cannot be read"
                )));
            }
        };
        if world.broken.contains(&handle) {
            // Decoded to keep the baselines in step; a broken object is not applied.
            world.stats.skipped_broken += 1;
            return Ok(());
        }
        if fresh.any() {
            self.to_dispatch.push(Dispatch {
                handle,
                mask: fresh,
                created: false,
                tear_off: false,
            });
        }
        Ok(())
    }

    /// Decodes a long-form body after its exports and creation flags (see `wire`).
    fn decode_long(
        &mut self,
        world: &mut ClientWorld,
        handle: NetRefHandle,
        creating: bool,
        b: &mut BitReader,
    ) -> Result<(), ObjectReadError> {
        let mut protocol = None;
        let mut owner = None;
        if creating {
            protocol = Some(b.read_bits(world.registry.index_bits()));
            if b.read_bool() {
                owner = Some(NetRefHandle::read(b)?);
            }
        }
        let tear_off = b.read_bool();
        b.check().map_err(SerializeError::from)?;
        let head = {
            let obj = match world.objects.get(&handle) {
                Some(obj) => Some(obj),
                None if tear_off => world.torn_off.get(&handle),
                None => None,
            };
            BatchHead::read(b, |slot| obj.is_some_and(|o| o.baselines.has_prior(slot)))?
        };
        let tags = if b.read_bool() {
            let n = b.read_bits(8) as usize;
            let mut tags = Vec::with_capacity(n);
            let imports = lock(&world.imports);
            for _ in 0..n {
                let t = NetToken(b.read_bits(16) as u16);
                b.check().map_err(SerializeError::from)?;
                let s = imports
                    .resolve(t)
                    .ok_or(ObjectReadError::UnknownToken(t.0))?;
                tags.push(s.to_string());
            }
            Some(tags)
        } else {
            None
        };
        b.check().map_err(SerializeError::from)?;
        let seq = world.packet_seq;
        let existing = match world.objects.get_mut(&handle) {
            Some(obj) => Some((obj, false)),
            None if tear_off => world.torn_off.get_mut(&handle).map(|o| (o, true)),
            None => None,
        };
        if let Some((obj, torn_off)) = existing {
            check_protocol(obj, protocol)?;
            let bits = obj.state.type_descriptor().change_mask_bits;
            let mask = read_mask(b, bits, head.mask_hint(creating))?;
            let fresh = match head {
                BatchHead::Full => update_existing(obj, mask, seq, b, &mut world.stats)?,
                head => {
                    let new_state = world
                        .registry
                        .get(obj.protocol)
                        .ok_or(ObjectReadError::UnknownProtocol(obj.protocol as u64))?
                        .new_state;
                    match update_existing_delta(
                        obj,
                        head,
                        mask,
                        new_state,
                        seq,
                        b,
                        &mut world.stats,
                    )? {
                        Some(f) => f,
                        None => return Ok(()),
                    }
                }
            };
            if b.bits_left() != 0 {
                return Err(ObjectReadError::TrailingBits(b.bits_left()));
            }
            if torn_off {
                // A subobject torn off with its owner, whose final state came separately.
                if fresh.any() {
                    if let Some(inst) = obj.instance.as_mut() {
                        inst.apply(obj.state.as_ref(), &fresh);
                    }
                    world.events.push(ReplicationEvent::MembersChanged {
                        handle,
                        mask: fresh,
                    });
                }
                return Ok(());
            }
            if let Some(tags) = tags
                && seq > obj.tags_seq
            {
                obj.tags_seq = seq;
                if obj.tags != tags {
                    obj.tags = tags;
                    world.events.push(ReplicationEvent::TagsChanged { handle });
                }
            }
            if fresh.any() || tear_off {
                self.to_dispatch.push(Dispatch {
                    handle,
                    mask: fresh,
                    created: false,
                    tear_off,
                });
            }
            return Ok(());
        }
        if let Some(&t) = world.tombstones.get(&handle)
            && (t >= world.packet_seq || protocol.is_none())
        {
            // A creation or update older than the object's destroy (reordered), or an
            // update resent for an object this side already ended (its destroy or
            // tear-off arrived though the server was told it was lost).
            world.stats.stale_batches += 1;
            return Ok(());
        }
        let Some(p) = protocol else {
            return Err(ObjectReadError::UnknownHandle);
        };
        if handle.is_static() {
            return Err(ObjectReadError::StaticNotRegistered);
        }
        let reg = *world
            .registry
            .get(p as ProtocolIndex)
            .filter(|_| p <= ProtocolIndex::MAX as u64)
            .ok_or(ObjectReadError::UnknownProtocol(p))?;
        if world.objects.len() >= world.config.max_client_objects {
            return Err(ObjectReadError::TooManyObjects(
                world.config.max_client_objects,
            ));
        }
        let bits = (reg.descriptor)().change_mask_bits;
        let mut baselines = ReceiverBaselines::default();
        let mask = read_mask(b, bits, head.mask_hint(creating))?;
        let state = match head {
            BatchHead::Full => {
                let mut state = (reg.new_state)();
                state.deserialize(&mask, b)?;
                state.validate(&mask)?;
                state
            }
            head => {
                let body = read_delta_body(None, None, reg.new_state, head, mask.clone(), seq, b)?
                    .ok_or(ObjectReadError::MissingBaseline(0))?;
                store_baseline(&mut baselines, body.store, body.reference_seq, seq);
                body.state
            }
        };
        if b.bits_left() != 0 {
            return Err(ObjectReadError::TrailingBits(b.bits_left()));
        }
        world.objects.insert(
            handle,
            Box::new(ClientObject {
                handle,
                protocol: p as ProtocolIndex,
                state,
                instance: None,
                owner,
                pending_refs: None,
                created_seq: world.packet_seq,
                member_seq: vec![world.packet_seq; bits as usize],
                tags: tags.unwrap_or_default(),
                tags_seq: world.packet_seq,
                baselines,
            }),
        );
        if let Some(o) = owner {
            world.children.entry(o).or_default().push(handle);
        }
        self.to_dispatch.push(Dispatch {
            handle,
            mask,
            created: true,
            tear_off,
        });
        Ok(())
    }
}

impl DataStream<ClientWorld> for ReplicationReader {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn write_data(&mut self, _ctx: &ClientWorld, w: &mut BitWriter) -> WriteResult {
        if self.to_report.is_empty() {
            return WriteResult::NoData;
        }
        let mut sent = Vec::new();
        while let Some(&h) = self.to_report.last() {
            let m = w.mark();
            w.write_bool(true);
            h.write(w);
            if w.is_overflown() || w.bits_left() < 1 {
                w.rollback(m);
                break;
            }
            self.to_report.pop();
            sent.push(h);
        }
        if sent.is_empty() {
            return WriteResult::NoData;
        }
        w.write_bool(false);
        self.reports_in_flight.push_back(sent);
        if self.to_report.is_empty() {
            WriteResult::Ok
        } else {
            WriteResult::HasMoreData
        }
    }

    fn read_data(
        &mut self,
        ctx: &mut ClientWorld,
        reader: &mut BitReader,
    ) -> Result<(), StreamError> {
        self.read_section(ctx, reader)
    }

    fn end_packet(&mut self, ctx: &mut ClientWorld) {
        self.dispatch(ctx);
    }

    fn process_delivery(&mut self, ctx: &mut ClientWorld, status: DeliveryStatus) {
        if let Some(sent) = self.reports_in_flight.pop_front()
            && status == DeliveryStatus::Lost
        {
            // Still broken (not destroyed since): report again.
            self.to_report
                .extend(sent.into_iter().filter(|h| ctx.broken.contains(h)));
        }
    }

    fn has_acknowledged_all_reliable_data(&self) -> bool {
        self.reports_in_flight.is_empty()
    }
}
