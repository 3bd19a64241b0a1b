//! The client side: [`ClientPlugin`], the [`NetClient`] resource driving a
//! [`replicate::Client`], the server-handle ↔ entity map, and the messages the plugin
//! reads and writes.

use crate::NetClock;
use crate::registry::{Kind, NetRegistry};
use crate::transport::AnyClientTransport;
use bevy_app::{App, Plugin, PostUpdate, PreUpdate};
use bevy_ecs::message::Message;
use bevy_ecs::prelude::*;
use replicate::internals::replication::ReplicationEvent;
use replicate::transport::ClientId;
use replicate::transport::memory::MemoryClientTransport;
use replicate::{
    ChangeMask, Client, ClientConfig, ClientEvent, DeliveryMode, DisconnectReason, FacadeError,
    NetRefHandle, NetStats, ProtocolRegistry,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The client's system sets, in frame order. `Receive` runs in [`PreUpdate`], `Send`
/// in [`PostUpdate`]; game systems in `Update` see this frame's replicated state.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientSet {
    /// [`PreUpdate`]: one [`Client::tick`] (receive, apply, acknowledge, send what was
    /// queued), then server objects are spawned, updated and despawned as entities,
    /// and connection events, [`ServerObjectChanged`] and [`FromServer`] messages are
    /// written; [`ClientStats`] is refreshed.
    Receive,
    /// [`PostUpdate`]: [`ToServer`] messages written this frame are queued (they leave
    /// with the next tick).
    Send,
}

/// Marks an entity that stands for a server entity: the handle of its root object.
/// Removed (the entity and its components stay) when the server tears the root off.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerObject(pub NetRefHandle);

/// On a client: the server made this client the entity's owner
/// ([`NetOwner`](crate::NetOwner)). Needs the client's id, which
/// [`NetClient::memory`] and [`NetClient::udp`] know (see [`NetClient::new`]).
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Owned;

/// The server accepted this client.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectedToServer;

/// The connection ended (or was refused). Every replicated entity was despawned.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisconnectedFromServer {
    /// Why.
    pub reason: DisconnectReason,
}

/// A replicated component of an entity was updated from the network (its notify hooks
/// already ran). Written once per update, after the component was replaced.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct ServerObjectChanged {
    /// The entity.
    pub entity: Entity,
    /// The component's object.
    pub handle: NetRefHandle,
    /// The component's type name.
    pub component: &'static str,
    /// The members applied.
    pub mask: ChangeMask,
}

/// Write it on the client to send `message` to the server (an RPC when `target` names
/// a replicated entity). Queued in [`ClientSet::Send`]; the server reads it as a
/// [`FromClient<M>`](crate::FromClient).
#[derive(Debug, Clone)]
pub struct ToServer<M> {
    /// The message.
    pub message: M,
    /// Reliability and ordering.
    pub mode: DeliveryMode,
    /// The replicated entity it targets, if any.
    pub target: Option<Entity>,
}

impl<M: Send + Sync + 'static> Message for ToServer<M> {}

/// A message from the server (client side), written in [`ClientSet::Receive`] in the
/// order the messages executed.
#[derive(Debug, Clone)]
pub struct FromServer<M> {
    /// The message.
    pub message: M,
    /// The entity it targets, if any (and if this client has it).
    pub target: Option<Entity>,
}

impl<M: Send + Sync + 'static> Message for FromServer<M> {}

/// The statistics of the connection to the server (refreshed in
/// [`ClientSet::Receive`]).
#[derive(Resource, Debug, Clone, Default)]
pub struct ClientStats(pub NetStats);

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The replication client as a resource: a [`replicate::Client`] over any transport.
/// Insert it to connect (the [`ClientPlugin`]'s systems run while it exists); insert
/// a new one to reconnect (the entities of the previous connection are despawned).
#[derive(Resource)]
pub struct NetClient {
    client: Mutex<Client<AnyClientTransport>>,
    local_id: Option<ClientId>,
    generation: u64,
    kinds: HashMap<u16, Kind>,
}

impl std::fmt::Debug for NetClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetClient")
            .field("local_id", &self.local_id)
            .finish_non_exhaustive()
    }
}

impl NetClient {
    /// A client on any transport, with every `#[derive(Replicated)]` type linked into
    /// the program. `local_id` is the id the server knows this client by, if the
    /// transport tells ([`NetClient::local_id`]; [`Owned`] comes from the server
    /// either way).
    pub fn new(
        transport: impl replicate::transport::ClientTransport + Send + 'static,
        local_id: Option<ClientId>,
        config: ClientConfig,
    ) -> Result<Self, FacadeError> {
        let registry = Arc::new(ProtocolRegistry::from_inventory()?);
        Self::with_registry(transport, local_id, registry, config)
    }

    /// Like [`new`](Self::new) with an explicit registry (equal to the server's).
    pub fn with_registry(
        transport: impl replicate::transport::ClientTransport + Send + 'static,
        local_id: Option<ClientId>,
        registry: Arc<ProtocolRegistry>,
        config: ClientConfig,
    ) -> Result<Self, FacadeError> {
        let client = Client::new(AnyClientTransport::new(transport), registry, config)?;
        Ok(Self {
            client: Mutex::new(client),
            local_id,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            kinds: HashMap::new(),
        })
    }

    /// A client of the in-memory transport (its id is known).
    pub fn memory(
        transport: MemoryClientTransport,
        config: ClientConfig,
    ) -> Result<Self, FacadeError> {
        let id = transport.id();
        Self::new(transport, Some(id), config)
    }

    /// A netcode.io UDP client (its id is the connect token's), e.g.
    /// `UdpClientTransport::connect("127.0.0.1:0", token)`.
    pub fn udp(
        transport: replicate::transport::udp::UdpClientTransport,
        config: ClientConfig,
    ) -> Result<Self, FacadeError> {
        let id = transport.client_id();
        Self::new(transport, Some(id), config)
    }

    /// The id the server knows this client by, if known.
    pub fn local_id(&self) -> Option<ClientId> {
        self.local_id
    }

    /// The client, for everything the plugin does not wrap (interpolation, inputs,
    /// time). Replicated state is on the entities.
    pub fn client_mut(&mut self) -> &mut Client<AnyClientTransport> {
        self.client
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the client, read-only.
    pub fn with_client<R>(&self, f: impl FnOnce(&Client<AnyClientTransport>) -> R) -> R {
        f(&self.client.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the server accepted this client and the connection is open.
    pub fn is_connected(&self) -> bool {
        self.with_client(|c| c.is_connected())
    }
}

/// Client side: which entity stands for which server object. A server entity's root
/// object and its component subobjects all map to one client entity.
#[derive(Resource, Debug, Default)]
pub struct ClientEntityMap {
    /// Root handle → entity.
    roots: HashMap<NetRefHandle, Entity>,
    /// Component object → (entity, index of its type in the registry).
    parts: HashMap<NetRefHandle, (Entity, usize)>,
    /// Entity → root handle.
    entities: HashMap<Entity, NetRefHandle>,
    /// Entity → its component objects.
    entity_parts: HashMap<Entity, Vec<NetRefHandle>>,
    generation: u64,
}

impl ClientEntityMap {
    /// The entity of a server object (a root, i.e. a server entity's handle from
    /// [`ServerEntityMap::handle`](crate::ServerEntityMap::handle), or a component's
    /// object): how `NetRefHandle` members referencing entities map to entities.
    pub fn entity(&self, handle: NetRefHandle) -> Option<Entity> {
        self.roots
            .get(&handle)
            .or_else(|| self.parts.get(&handle).map(|(e, _)| e))
            .copied()
    }

    /// The root handle of a replicated entity.
    pub fn handle(&self, entity: Entity) -> Option<NetRefHandle> {
        self.entities.get(&entity).copied()
    }

    /// Number of replicated entities.
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The newest live subobject of component type `i` on `entity`: the one whose
    /// value the entity shows.
    fn current_part(&self, entity: Entity, i: usize) -> Option<NetRefHandle> {
        self.entity_parts
            .get(&entity)?
            .iter()
            .rev()
            .find(|h| self.parts.get(h).is_some_and(|&(_, j)| j == i))
            .copied()
    }

    /// The entity of root `handle`, spawned if needed.
    fn root_entity(&mut self, world: &mut World, handle: NetRefHandle) -> Entity {
        if let Some(&e) = self.roots.get(&handle) {
            return e;
        }
        let e = world.spawn(ServerObject(handle)).id();
        self.roots.insert(handle, e);
        self.entities.insert(e, handle);
        e
    }

    /// Despawns every replicated entity and forgets them.
    fn clear(&mut self, world: &mut World) {
        for (_, e) in self.roots.drain() {
            if let Ok(entity) = world.get_entity_mut(e) {
                entity.despawn();
            }
        }
        self.parts.clear();
        self.entities.clear();
        self.entity_parts.clear();
    }
}

/// The client plugin. Insert a [`NetClient`] resource to connect; register replicated
/// components and messages with [`ReplicateAppExt`](crate::ReplicateAppExt), as on the
/// server.
#[derive(Debug, Default)]
pub struct ClientPlugin;

impl Plugin for ClientPlugin {
    fn build(&self, app: &mut App) {
        crate::init_shared(app);
        app.init_resource::<ClientEntityMap>()
            .init_resource::<ClientStats>()
            .add_message::<ConnectedToServer>()
            .add_message::<DisconnectedFromServer>()
            .add_message::<ServerObjectChanged>()
            .configure_sets(PreUpdate, ClientSet::Receive)
            .configure_sets(PostUpdate, ClientSet::Send)
            .add_systems(
                PreUpdate,
                receive
                    .in_set(ClientSet::Receive)
                    .run_if(resource_exists::<NetClient>),
            );
    }
}

/// One client tick, then the world follows what it applied.
fn receive(world: &mut World) {
    let registry = world.resource::<NetRegistry>().clone();
    let now = world.resource::<NetClock>().now();
    world.resource_scope(|world, mut net: Mut<NetClient>| {
        world.resource_scope(|world, mut map: Mut<ClientEntityMap>| {
            let net = &mut *net;
            let map = &mut *map;
            if map.generation != net.generation {
                map.clear(world);
                map.generation = net.generation;
            }
            let client = net.client.get_mut().unwrap_or_else(PoisonError::into_inner);
            if net.kinds.is_empty() {
                net.kinds = registry.kinds(client.world().registry());
            }
            if let Err(e) = client.tick(now) {
                tracing::error!("replicate-bevy: client tick: {e}");
            }
            for event in client.events() {
                match event {
                    ClientEvent::Connected => {
                        world.write_message(ConnectedToServer);
                    }
                    ClientEvent::Disconnected { reason } => {
                        map.clear(world);
                        world.write_message(DisconnectedFromServer { reason });
                    }
                    ClientEvent::Spawned { handle, protocol } => {
                        // Created and destroyed within this tick (its destroy follows):
                        // no entity for it.
                        let Some(object) = client.world().object(handle) else {
                            continue;
                        };
                        if let Some(&Kind::Component(i)) = net.kinds.get(&protocol) {
                            // A subobject can arrive before its root (the root's packet
                            // was lost): the entity is made now, the root finds it when
                            // it arrives.
                            let root = object.owner().unwrap_or(handle);
                            let e = map.root_entity(world, root);
                            if root == handle {
                                set_owned(world, e, client.is_owned(handle));
                            }
                            let fns = registry.components[i];
                            (fns.insert)(client, handle, &mut world.entity_mut(e));
                            map.parts.insert(handle, (e, i));
                            map.entity_parts.entry(e).or_default().push(handle);
                        }
                    }
                    ClientEvent::Changed { handle, mask } => {
                        if let Some(&(e, i)) = map.parts.get(&handle) {
                            if map.current_part(e, i) != Some(handle) {
                                // A late update of a replaced subobject.
                                continue;
                            }
                            let fns = registry.components[i];
                            if let Ok(mut entity) = world.get_entity_mut(e) {
                                (fns.insert)(client, handle, &mut entity);
                                world.write_message(ServerObjectChanged {
                                    entity: e,
                                    handle,
                                    component: fns.name,
                                    mask,
                                });
                            }
                        }
                    }
                    ClientEvent::OwnershipGained { handle, .. } => {
                        if let Some(&e) = map.roots.get(&handle) {
                            set_owned(world, e, true);
                        }
                    }
                    ClientEvent::OwnershipLost { handle } => {
                        if let Some(&e) = map.roots.get(&handle) {
                            set_owned(world, e, false);
                        }
                    }
                    ClientEvent::Destroyed { handle } => {
                        destroyed(world, map, &registry, client, handle);
                    }
                    ClientEvent::Replication(ReplicationEvent::TornOff { handle }) => {
                        torn_off(world, map, handle);
                    }
                    ClientEvent::Replication(_) => {}
                }
            }
            for message in client.receive_messages() {
                let target = message.target.and_then(|h| map.entity(h));
                if let Some(&Kind::Message(i)) = net.kinds.get(&message.protocol) {
                    (registry.messages[i].client_receive)(world, message, target);
                }
            }
            world.resource_mut::<ClientStats>().0 = client.stats().clone();
        });
    });
}

fn set_owned(world: &mut World, entity: Entity, owned: bool) {
    let Ok(mut e) = world.get_entity_mut(entity) else {
        return;
    };
    match (owned, e.contains::<Owned>()) {
        (true, false) => {
            e.insert(Owned);
        }
        (false, true) => {
            e.remove::<Owned>();
        }
        _ => {}
    }
}

/// The server stopped replicating a root: the entity stays with its last state, no
/// longer a [`ServerObject`] (Iris's tear-off).
fn torn_off(world: &mut World, map: &mut ClientEntityMap, handle: NetRefHandle) {
    let Some(e) = map.roots.remove(&handle) else {
        return;
    };
    map.entities.remove(&e);
    for part in map.entity_parts.remove(&e).unwrap_or_default() {
        map.parts.remove(&part);
    }
    map.parts.remove(&handle);
    if let Ok(mut entity) = world.get_entity_mut(e) {
        entity.remove::<ServerObject>();
    }
}

/// An object was destroyed: a root despawns its entity, a component subobject removes
/// its component.
fn destroyed(
    world: &mut World,
    map: &mut ClientEntityMap,
    registry: &NetRegistry,
    client: &Client<AnyClientTransport>,
    handle: NetRefHandle,
) {
    if let Some(e) = map.roots.remove(&handle) {
        map.entities.remove(&e);
        for part in map.entity_parts.remove(&e).unwrap_or_default() {
            map.parts.remove(&part);
        }
        map.parts.remove(&handle);
        if let Ok(entity) = world.get_entity_mut(e) {
            entity.despawn();
        }
    } else if let Some((e, i)) = map.parts.remove(&handle) {
        if let Some(parts) = map.entity_parts.get_mut(&e) {
            parts.retain(|h| *h != handle);
        }
        // The component was removed and inserted again on the server: the new
        // subobject can be created here before the old one's destroy arrives
        // (reordered packets). The entity keeps the new one's value.
        if let Some(current) = map.current_part(e, i) {
            if let Ok(mut entity) = world.get_entity_mut(e) {
                (registry.components[i].insert)(client, current, &mut entity);
            }
            return;
        }
        if let Ok(mut entity) = world.get_entity_mut(e) {
            (registry.components[i].remove)(&mut entity);
        }
        // The last part of an entity whose root never arrived (destroyed on the server
        // before its creation got through): no destroy will come for the root.
        if let Some(&root) = map.entities.get(&e)
            && client.world().object(root).is_none()
            && map.entity_parts.get(&e).is_none_or(Vec::is_empty)
        {
            destroyed(world, map, registry, client, root);
        }
    }
}
