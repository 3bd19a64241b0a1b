//! The server side: [`ServerPlugin`], the [`NetServer`] resource driving a
//! [`replicate::Server`], the entity ↔ object map, the interest components and the
//! messages the plugin reads and writes.

use crate::NetClock;
use crate::registry::{Kind, NetRegistry};
use crate::transport::AnyServerTransport;
use bevy_app::{App, Plugin, PostUpdate, PreUpdate};
use bevy_ecs::message::Message;
use bevy_ecs::prelude::*;
use replicate::interest::FilterKind;
use replicate::transport::ClientId;
use replicate::{
    DeliveryMode, DisconnectReason, FacadeError, NetRefHandle, NetStats, ProtocolRegistry, Server,
    ServerConfig, ServerEvent,
};
use std::any::TypeId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

/// The server's system sets, in frame order. `Receive` runs in [`PreUpdate`], `Send`
/// in [`PostUpdate`]; game systems in `Update` need no ordering. Order your own
/// systems against them (`.after(ServerSet::Receive)`, `.before(ServerSet::Send)`) when
/// they run in those schedules.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerSet {
    /// [`PreUpdate`]: what the last tick received becomes Bevy messages
    /// ([`ClientConnected`], [`ClientDisconnected`], [`FromClient`]) and
    /// [`ServerStats`] is refreshed.
    Receive,
    /// [`PostUpdate`]: despawned entities and removed components are destroyed, new ones
    /// spawned, changed components polled, interest components applied, queued
    /// [`ToClients`] messages sent, then one [`Server::tick`] sends it all.
    Send,
}

/// The steps inside [`ServerSet::Send`], chained in this order.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ServerSteps {
    Despawn,
    Components,
    Rebuild,
    Interest,
    Messages,
    Tick,
}

/// Replicate this entity. Its components registered with
/// [`ReplicateAppExt::replicate`](crate::ReplicateAppExt::replicate) replicate to the
/// clients (see the [crate documentation](crate#the-entity--object-mapping) for the
/// mapping); removing the marker or despawning the entity destroys it on the clients.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replicate;

/// The client that owns this entity: its `OwnerOnly` / `AutonomousOnly` members go to
/// that client only, `SkipOwner` / `SimulatedOnly` ones to everyone else, and that
/// client's app marks the entity [`Owned`](crate::Owned) (the core tells only the
/// owner).
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NetOwner(pub ClientId);

/// Only these clients may see the entity (a visibility list, on top of its
/// [`NetFilter`] and [`NetGroups`]); without the component every client may. Leaving a
/// client's list destroys the entity on that client; entering it creates it again.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq)]
pub struct VisibleTo(pub Vec<ClientId>);

/// The entity's groups: only clients subscribed to one of them
/// ([`NetServer::set_group_subscription`]) see it. An empty list lifts the restriction.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq)]
pub struct NetGroups(pub Vec<u32>);

/// The core's scope filter for the entity (default: every client). With
/// [`FilterKind::Spatial`] the grid filter keeps it for clients whose view (see
/// [`ClientView`]) is near its [`NetPosition`].
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetFilter(pub FilterKind);

/// The entity's world position for interest: the grid filter and the sphere
/// prioritizer. Update it when the entity moves (only changes are sent to the core).
#[derive(Component, Debug, Clone, Copy, Default, PartialEq)]
pub struct NetPosition(pub glam::Vec3);

/// The entity's static priority (default 1): when a client's packets cannot carry
/// every change, objects accumulate their priority each tick and the highest go
/// first, so an entity with priority 4 is updated about four times as often as one
/// with priority 1 (subobjects go with their root).
#[derive(Component, Debug, Clone, Copy, PartialEq)]
pub struct NetPriority(pub f32);

/// This entity's [`NetPosition`] is the view position of that client (its camera or
/// its player), for the grid filter and the sphere prioritizer.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientView(pub ClientId);

/// A client passed the handshake (server side).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct ClientConnected {
    /// The client.
    pub client: ClientId,
    /// Its connect token's user data.
    pub user_data: Vec<u8>,
}

/// A client left, or was refused in the handshake (server side).
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientDisconnected {
    /// The client.
    pub client: ClientId,
    /// Why.
    pub reason: DisconnectReason,
}

/// Who a [`ToClients`] message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipients {
    /// One connected client.
    Client(ClientId),
    /// Every connected client.
    All,
}

/// Write it on the server to send `message` to clients (an RPC when `target` names a
/// replicated entity: held until the client has it, dropped where it is out of scope).
/// Sent in [`ServerSet::Send`]; the client reads it as a
/// [`FromServer<M>`](crate::FromServer).
#[derive(Debug, Clone)]
pub struct ToClients<M> {
    /// The recipients.
    pub to: Recipients,
    /// The message.
    pub message: M,
    /// Reliability and ordering.
    pub mode: DeliveryMode,
    /// The replicated entity it targets, if any.
    pub target: Option<Entity>,
}

impl<M: Send + Sync + 'static> Message for ToClients<M> {}

/// A message from a client (server side), after the validator installed with
/// [`ReplicateAppExt::validate_net_message`](crate::ReplicateAppExt::validate_net_message)
/// accepted it.
#[derive(Debug, Clone)]
pub struct FromClient<M> {
    /// The sender.
    pub client: ClientId,
    /// The message.
    pub message: M,
    /// The server entity it targets, if any (and if it still exists).
    pub target: Option<Entity>,
}

impl<M: Send + Sync + 'static> Message for FromClient<M> {}

/// Statistics of the server (refreshed in [`ServerSet::Receive`]).
#[derive(Resource, Debug, Clone, Default)]
pub struct ServerStats {
    /// [`NetStats`] per connected client.
    pub clients: BTreeMap<ClientId, NetStats>,
    /// Client messages the validators rejected.
    pub messages_rejected: u64,
    /// Client messages of a type not registered with
    /// [`add_net_message`](crate::ReplicateAppExt::add_net_message).
    pub messages_unregistered: u64,
    /// [`ToClients`] messages the core refused (no such client, target not
    /// replicated, over a cap).
    pub messages_not_sent: u64,
}

/// The replication server as a resource: a [`replicate::Server`] over any transport.
/// Insert it to start serving (the [`ServerPlugin`]'s systems run while it exists);
/// remove it to stop.
#[derive(Resource)]
pub struct NetServer {
    server: Mutex<Server<AnyServerTransport>>,
    local_addr: Option<std::net::SocketAddr>,
    kinds: HashMap<u16, Kind>,
}

impl std::fmt::Debug for NetServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl NetServer {
    /// A server on `transport` (e.g. the in-memory
    /// [`MemoryServerTransport`](replicate::transport::memory::MemoryServerTransport))
    /// replicating every `#[derive(Replicated)]` type linked into the program.
    pub fn new(
        transport: impl replicate::transport::ServerTransport + Send + 'static,
        config: ServerConfig,
    ) -> Result<Self, FacadeError> {
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        Self::with_registry(transport, registry, config)
    }

    /// A server on `transport` replicating the types of `registry` (the clients' must
    /// be equal).
    pub fn with_registry(
        transport: impl replicate::transport::ServerTransport + Send + 'static,
        registry: Arc<ProtocolRegistry>,
        config: ServerConfig,
    ) -> Result<Self, FacadeError> {
        let server = Server::new(AnyServerTransport::new(transport), registry, config)?;
        Ok(Self::from_server(server, None))
    }

    /// A netcode.io UDP server bound to `addr`, accepting connect tokens of `issuer`.
    pub fn bind(
        addr: impl std::net::ToSocketAddrs,
        issuer: &replicate::transport::udp::ConnectTokenIssuer,
        config: ServerConfig,
    ) -> Result<Self, FacadeError> {
        use replicate::transport::udp::{UdpServerConfig, UdpServerTransport};
        let transport =
            UdpServerTransport::bind(addr, UdpServerConfig::secure(issuer, config.max_clients))?;
        let local = transport.local_addr();
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        let server = Server::new(AnyServerTransport::new(transport), registry, config)?;
        Ok(Self::from_server(server, Some(local)))
    }

    fn from_server(
        server: Server<AnyServerTransport>,
        local_addr: Option<std::net::SocketAddr>,
    ) -> Self {
        Self {
            server: Mutex::new(server),
            local_addr,
            kinds: HashMap::new(),
        }
    }

    /// The bound UDP address (servers made with [`bind`](Self::bind)).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.local_addr
    }

    /// The server, for everything the plugin does not wrap (statistics, insights,
    /// bandwidth budgets, direct object access). Objects of replicated entities belong
    /// to the plugin: change them through their components.
    pub fn server_mut(&mut self) -> &mut Server<AnyServerTransport> {
        self.server
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the server, read-only.
    pub fn with_server<R>(&self, f: impl FnOnce(&Server<AnyServerTransport>) -> R) -> R {
        f(&self.server.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The connected clients.
    pub fn clients(&self) -> Vec<ClientId> {
        self.with_server(|s| s.clients().collect())
    }

    /// Subscribes a connected client to a group of entities ([`NetGroups`]) or
    /// unsubscribes it. Returns false when the client is not connected.
    pub fn set_group_subscription(
        &mut self,
        client: ClientId,
        group: u32,
        subscribed: bool,
    ) -> bool {
        let server = self.server_mut();
        match server.connection_id(client) {
            Some(conn) => {
                server
                    .replication_mut()
                    .set_group_subscription(conn, group, subscribed);
                true
            }
            None => false,
        }
    }
}

/// The objects of one entity: the root (its first replicated component) and every
/// component's object, the root's included.
#[derive(Debug, Clone)]
struct EntityObjects {
    root: NetRefHandle,
    parts: Vec<(TypeId, NetRefHandle)>,
}

/// Server side: which replicated objects stand for which entity (see the
/// [mapping](crate#the-entity--object-mapping)): the first replicated component of an
/// entity with [`Replicate`] is its root object, the others are subobjects of it.
#[derive(Resource, Debug, Default)]
pub struct ServerEntityMap {
    entities: HashMap<Entity, EntityObjects>,
    handles: HashMap<NetRefHandle, Entity>,
    /// Entities whose root component was removed while others remain: rebuilt on a
    /// new root in this frame's `Rebuild` step.
    rebuild: HashSet<Entity>,
}

impl ServerEntityMap {
    /// The root object of a replicated entity: put it in a `NetRefHandle` member to
    /// reference the entity; the client maps it back with
    /// [`ClientEntityMap::entity`](crate::ClientEntityMap::entity). `None` until the
    /// entity's first replicated component was sent to the core (in
    /// [`ServerSet::Send`]), or when it has none.
    pub fn handle(&self, entity: Entity) -> Option<NetRefHandle> {
        self.entities.get(&entity).map(|o| o.root)
    }

    /// The object replicating component `C` of `entity`.
    pub fn component_handle<C: 'static>(&self, entity: Entity) -> Option<NetRefHandle> {
        let tid = TypeId::of::<C>();
        self.entities
            .get(&entity)?
            .parts
            .iter()
            .find(|(t, _)| *t == tid)
            .map(|(_, h)| *h)
    }

    /// The entity of a root object or of a component's object.
    pub fn entity(&self, handle: NetRefHandle) -> Option<Entity> {
        self.handles.get(&handle).copied()
    }

    /// Number of replicated entities (with at least one replicated component).
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether no entity is replicated.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Forgets every object of `entity`; returns its root.
    fn forget(&mut self, entity: Entity) -> Option<NetRefHandle> {
        let objects = self.entities.remove(&entity)?;
        self.handles.remove(&objects.root);
        for (_, h) in &objects.parts {
            self.handles.remove(h);
        }
        Some(objects.root)
    }
}

/// Which entities the interest systems apply their components to whatever changed:
/// all of them when a client connected (scope and owners are per connection), and
/// entities with a new root object.
#[derive(Resource, Debug, Default)]
pub(crate) struct InterestReapply {
    all: bool,
    entities: HashSet<Entity>,
}

impl InterestReapply {
    fn wants(&self, entity: Entity) -> bool {
        self.all || self.entities.contains(&entity)
    }
}

/// Query filter: a replicated entity whose `T` changed, or that just got
/// [`Replicate`].
type ChangedOrNew<T> = (With<Replicate>, Or<(Changed<T>, Added<Replicate>)>);

/// The server plugin. Insert a [`NetServer`] resource to serve; register replicated
/// components and messages with [`ReplicateAppExt`](crate::ReplicateAppExt).
#[derive(Debug, Default)]
pub struct ServerPlugin;

impl Plugin for ServerPlugin {
    fn build(&self, app: &mut App) {
        crate::init_shared(app);
        app.init_resource::<ServerEntityMap>()
            .init_resource::<ServerStats>()
            .init_resource::<InterestReapply>()
            .add_message::<ClientConnected>()
            .add_message::<ClientDisconnected>()
            .configure_sets(PreUpdate, ServerSet::Receive)
            .configure_sets(
                PostUpdate,
                (
                    ServerSteps::Despawn,
                    ServerSteps::Components,
                    ServerSteps::Rebuild,
                    ServerSteps::Interest,
                    ServerSteps::Messages,
                    ServerSteps::Tick,
                )
                    .chain()
                    .in_set(ServerSet::Send),
            )
            .add_systems(
                PreUpdate,
                receive
                    .in_set(ServerSet::Receive)
                    .run_if(resource_exists::<NetServer>),
            )
            .add_systems(
                PostUpdate,
                (
                    despawn.in_set(ServerSteps::Despawn),
                    rebuild.in_set(ServerSteps::Rebuild),
                    (owners, visibility, groups, filters, positions, priorities)
                        .chain()
                        .in_set(ServerSteps::Interest),
                    tick.in_set(ServerSteps::Tick),
                )
                    .run_if(resource_exists::<NetServer>),
            );
    }
}

/// Turns what the last tick queued into Bevy messages.
fn receive(world: &mut World) {
    let registry = world.resource::<NetRegistry>().clone();
    world.resource_scope(|world, mut net: Mut<NetServer>| {
        let net = &mut *net;
        if net.kinds.is_empty() {
            net.kinds = net.with_server(|s| registry.kinds(s.objects().registry()));
        }
        let server = net.server.get_mut().unwrap_or_else(PoisonError::into_inner);
        for event in server.events() {
            match event {
                ServerEvent::ClientConnected { client, user_data } => {
                    world.resource_mut::<InterestReapply>().all = true;
                    world.write_message(ClientConnected { client, user_data });
                }
                ServerEvent::ClientDisconnected { client, reason }
                | ServerEvent::ClientRefused { client, reason } => {
                    world.write_message(ClientDisconnected { client, reason });
                }
                ServerEvent::ObjectRecovered { .. } => {}
            }
        }
        let (mut rejected, mut unregistered) = (0, 0);
        for (client, message) in server.receive_messages() {
            let target = message
                .target
                .and_then(|h| world.resource::<ServerEntityMap>().entity(h));
            match net.kinds.get(&message.protocol) {
                Some(Kind::Message(i)) => {
                    let f = registry.messages[*i].server_receive;
                    if !f(world, client, message, target) {
                        rejected += 1;
                    }
                }
                _ => unregistered += 1,
            }
        }
        let clients: BTreeMap<ClientId, NetStats> = server
            .clients()
            .filter_map(|c| server.stats(c).map(|s| (c, s.clone())))
            .collect();
        let mut stats = world.resource_mut::<ServerStats>();
        stats.clients = clients;
        stats.messages_rejected += rejected;
        stats.messages_unregistered += unregistered;
    });
}

/// Destroys the objects of entities that lost [`Replicate`] or were despawned.
fn despawn(
    mut net: ResMut<NetServer>,
    mut map: ResMut<ServerEntityMap>,
    mut removed: RemovedComponents<Replicate>,
    alive: Query<(), With<Replicate>>,
) {
    let server = net.server_mut();
    for entity in removed.read() {
        if alive.contains(entity) {
            continue;
        }
        map.rebuild.remove(&entity);
        // Subobjects go with their root.
        if let Some(root) = map.forget(entity)
            && let Err(e) = server.destroy(root)
        {
            tracing::warn!("replicate-bevy: destroying the objects of {entity}: {e}");
        }
    }
}

/// Per replicated component type: removed components are destroyed, new ones spawned
/// (as the entity's root if it has none yet, else as a subobject), changed ones
/// polled (the core compares quantized members, so a component written with an equal
/// value sends nothing; an untouched one is not even visited by the query).
pub(crate) fn sync_component<C: crate::NetComponent>(
    mut net: ResMut<NetServer>,
    mut map: ResMut<ServerEntityMap>,
    mut reapply: ResMut<InterestReapply>,
    changed: Query<(Entity, &C), ChangedOrNew<C>>,
    present: Query<(), (With<C>, With<Replicate>)>,
    mut removed: RemovedComponents<C>,
) {
    let server = net.server_mut();
    let tid = TypeId::of::<C>();
    let map = &mut *map;
    for entity in removed.read() {
        if present.contains(entity) {
            continue;
        }
        let Some(objects) = map.entities.get_mut(&entity) else {
            continue;
        };
        let Some(at) = objects.parts.iter().position(|(t, _)| *t == tid) else {
            continue;
        };
        let (_, handle) = objects.parts.swap_remove(at);
        if handle != objects.root {
            map.handles.remove(&handle);
            if let Err(e) = server.destroy(handle) {
                tracing::warn!(
                    "replicate-bevy: removing {} of {entity}: {e}",
                    std::any::type_name::<C>()
                );
            }
        } else if objects.parts.is_empty() {
            // The last replicated component: the entity goes from the clients.
            map.forget(entity);
            let _ = server.destroy(handle);
        } else {
            // The root's component went but others stay: a new root is made in the
            // `Rebuild` step.
            map.rebuild.insert(entity);
        }
    }
    let table = server.objects_mut();
    for (entity, component) in &changed {
        match map.entities.get_mut(&entity) {
            None => match table.spawn_polled(component) {
                Ok(root) => {
                    map.entities.insert(
                        entity,
                        EntityObjects {
                            root,
                            parts: vec![(tid, root)],
                        },
                    );
                    map.handles.insert(root, entity);
                    reapply.entities.insert(entity);
                }
                Err(e) => tracing::error!(
                    "replicate-bevy: cannot replicate {} of {entity}: {e}",
                    std::any::type_name::<C>()
                ),
            },
            Some(objects) => match objects.parts.iter().find(|(t, _)| *t == tid) {
                Some(&(_, handle)) => {
                    table.poll(handle, component);
                }
                None => match table.spawn_subobject_polled(objects.root, component) {
                    Ok(handle) => {
                        objects.parts.push((tid, handle));
                        map.handles.insert(handle, entity);
                    }
                    Err(e) => tracing::error!(
                        "replicate-bevy: cannot replicate {} of {entity}: {e}",
                        std::any::type_name::<C>()
                    ),
                },
            },
        }
    }
}

/// Entities whose root component was removed while others remain: every object is
/// destroyed and made again on a new root (the first remaining component). Clients
/// see the old entity despawn and a new one spawn with the remaining components.
fn rebuild(world: &mut World) {
    if world.resource::<ServerEntityMap>().rebuild.is_empty() {
        return;
    }
    let registry = world.resource::<NetRegistry>().clone();
    world.resource_scope(|world, mut net: Mut<NetServer>| {
        world.resource_scope(|world, mut map: Mut<ServerEntityMap>| {
            let server = net.server_mut();
            let entities: Vec<Entity> = map.rebuild.drain().collect();
            for entity in entities {
                let Some(objects) = map.entities.get(&entity).cloned() else {
                    continue;
                };
                map.forget(entity);
                let _ = server.destroy(objects.root);
                let mut rebuilt: Option<EntityObjects> = None;
                for (tid, _) in objects.parts {
                    let Some(fns) = registry.components.iter().find(|c| c.type_id == tid) else {
                        continue;
                    };
                    let root = rebuilt.as_ref().map(|r| r.root);
                    match (fns.spawn)(world, entity, server.objects_mut(), root) {
                        Some(Ok(handle)) => {
                            map.handles.insert(handle, entity);
                            rebuilt
                                .get_or_insert(EntityObjects {
                                    root: handle,
                                    parts: Vec::new(),
                                })
                                .parts
                                .push((tid, handle));
                        }
                        Some(Err(e)) => {
                            tracing::error!("replicate-bevy: rebuilding {entity}: {e}");
                        }
                        None => {}
                    }
                }
                if let Some(objects) = rebuilt {
                    map.entities.insert(entity, objects);
                    world
                        .resource_mut::<InterestReapply>()
                        .entities
                        .insert(entity);
                }
            }
        });
    });
}

/// Applies [`NetOwner`]: the core's owner of the root (the core tells the owning
/// client, which marks the entity [`Owned`](crate::Owned)).
fn owners(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    reapply: Res<InterestReapply>,
    all: Query<(Entity, Ref<NetOwner>), With<Replicate>>,
    mut removed: RemovedComponents<NetOwner>,
    present: Query<(), With<NetOwner>>,
) {
    let server = net.server_mut();
    let mut apply = |entity: Entity, owner: Option<ClientId>| {
        let Some(root) = map.handle(entity) else {
            return;
        };
        // Fails only for a client not connected yet: reapplied when it connects.
        let _ = server.set_owner(root, owner, true);
    };
    for entity in removed.read() {
        if !present.contains(entity) {
            apply(entity, None);
        }
    }
    for (entity, owner) in &all {
        if owner.is_changed() || reapply.wants(entity) {
            apply(entity, Some(owner.0));
        }
    }
}

/// Applies [`VisibleTo`] to every connected client, through the core's deny lists:
/// a client not on the list never has the entity in scope, one on it has it when the
/// entity's filter and groups say so.
fn visibility(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    reapply: Res<InterestReapply>,
    all: Query<(Entity, Ref<VisibleTo>), With<Replicate>>,
    mut removed: RemovedComponents<VisibleTo>,
    present: Query<(), With<VisibleTo>>,
) {
    let server = net.server_mut();
    let clients: Vec<(ClientId, _)> = server
        .clients()
        .filter_map(|c| Some((c, server.connection_id(c)?)))
        .collect();
    let replication = server.replication_mut();
    for entity in removed.read() {
        if present.contains(entity) {
            continue;
        }
        if let Some(root) = map.handle(entity) {
            for &(_, conn) in &clients {
                let _ = replication.set_object_denied(conn, root, false);
            }
        }
    }
    for (entity, visible) in &all {
        if !(visible.is_changed() || reapply.wants(entity)) {
            continue;
        }
        if let Some(root) = map.handle(entity) {
            for &(client, conn) in &clients {
                let denied = !visible.0.contains(&client);
                let _ = replication.set_object_denied(conn, root, denied);
            }
        }
    }
}

/// Applies [`NetGroups`].
fn groups(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    reapply: Res<InterestReapply>,
    all: Query<(Entity, Ref<NetGroups>), With<Replicate>>,
    mut removed: RemovedComponents<NetGroups>,
    present: Query<(), With<NetGroups>>,
) {
    let replication = net.server_mut().replication_mut();
    for entity in removed.read() {
        if let (false, Some(root)) = (present.contains(entity), map.handle(entity)) {
            let _ = replication.set_object_groups(root, Vec::new());
        }
    }
    for (entity, g) in &all {
        if (g.is_changed() || reapply.entities.contains(&entity))
            && let Some(root) = map.handle(entity)
        {
            let _ = replication.set_object_groups(root, g.0.clone());
        }
    }
}

/// Applies [`NetFilter`].
fn filters(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    reapply: Res<InterestReapply>,
    all: Query<(Entity, Ref<NetFilter>), With<Replicate>>,
    mut removed: RemovedComponents<NetFilter>,
    present: Query<(), With<NetFilter>>,
) {
    let replication = net.server_mut().replication_mut();
    for entity in removed.read() {
        if let (false, Some(root)) = (present.contains(entity), map.handle(entity)) {
            let _ = replication.set_object_filter(root, None);
        }
    }
    for (entity, f) in &all {
        if (f.is_changed() || reapply.entities.contains(&entity))
            && let Some(root) = map.handle(entity)
        {
            let _ = replication.set_object_filter(root, Some(f.0));
        }
    }
}

/// Applies [`NetPosition`] to replicated entities and [`ClientView`]s.
fn positions(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    reapply: Res<InterestReapply>,
    objects: Query<(Entity, Ref<NetPosition>), With<Replicate>>,
    views: Query<(Ref<NetPosition>, &ClientView)>,
) {
    let server = net.server_mut();
    for (entity, p) in &objects {
        if (p.is_changed() || reapply.entities.contains(&entity))
            && let Some(root) = map.handle(entity)
        {
            let _ = server.replication_mut().set_object_position(root, p.0);
        }
    }
    for (p, view) in &views {
        if p.is_changed() || reapply.all {
            server.set_view_position(view.0, p.0);
        }
    }
}

/// Applies [`NetPriority`] to the entity's objects.
fn priorities(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    reapply: Res<InterestReapply>,
    all: Query<(Entity, Ref<NetPriority>), With<Replicate>>,
    mut removed: RemovedComponents<NetPriority>,
    present: Query<(), With<NetPriority>>,
) {
    let table = net.server_mut().objects_mut();
    let mut apply = |entity: Entity, priority: f32| {
        if let Some(objects) = map.entities.get(&entity) {
            for &(_, h) in &objects.parts {
                let _ = table.set_priority(h, priority);
            }
        }
    };
    for entity in removed.read() {
        if !present.contains(entity) {
            apply(entity, 1.0);
        }
    }
    for (entity, p) in &all {
        if p.is_changed() || reapply.entities.contains(&entity) {
            apply(entity, p.0);
        }
    }
}

/// One server tick: receive, replicate what changed, send.
fn tick(mut net: ResMut<NetServer>, clock: Res<NetClock>, mut reapply: ResMut<InterestReapply>) {
    reapply.all = false;
    reapply.entities.clear();
    if let Err(e) = net.server_mut().tick(clock.now()) {
        tracing::error!("replicate-bevy: server tick: {e}");
    }
}
