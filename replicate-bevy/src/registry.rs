//! What the app registered: replicated component types and network message types, as
//! tables of monomorphized function pointers the type-erased systems dispatch through,
//! and the [`ReplicateAppExt`] methods that fill them.

use crate::client::{ClientEntityMap, ClientSet, FromServer, NetClient, ToServer};
use crate::server::{FromClient, NetServer, Recipients, ServerEntityMap, ServerStats, ToClients};
use bevy_app::{App, PostUpdate};
use bevy_ecs::prelude::*;
use bevy_ecs::world::EntityWorldMut;
use replicate::transport::ClientId;
use replicate::{
    Client, NetRefHandle, ObjectError, ObjectTable, ProtocolRegistry, ReceivedMessage, Replicated,
};
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

use crate::transport::AnyClientTransport;

/// A component type the plugins replicate: a Bevy [`Component`] that derives
/// [`Replicated`] and can be cloned (the client copies the state the core applied,
/// notify hooks included, into the entity's component).
pub trait NetComponent: Component + Replicated + Clone {}
impl<T: Component + Replicated + Clone> NetComponent for T {}

/// A message type the plugins carry both ways: any [`Replicated`] type that is `Sync`.
pub trait NetMessage: Replicated + Sync {}
impl<T: Replicated + Sync> NetMessage for T {}

/// Spawns an entity's component into the object table, as a root (`None`) or a
/// subobject of the given root; `None` when the entity lacks the component.
pub(crate) type SpawnFn = fn(
    &World,
    Entity,
    &mut ObjectTable,
    Option<NetRefHandle>,
) -> Option<Result<NetRefHandle, ObjectError>>;

/// Function table of one replicated component type.
#[derive(Clone, Copy)]
pub(crate) struct ComponentFns {
    pub(crate) name: &'static str,
    pub(crate) type_id: TypeId,
    pub(crate) protocol: fn(&ProtocolRegistry) -> Option<u16>,
    /// Copies the client's object `handle` into the entity; false if it is not there.
    pub(crate) insert: fn(&Client<AnyClientTransport>, NetRefHandle, &mut EntityWorldMut) -> bool,
    pub(crate) remove: fn(&mut EntityWorldMut),
    /// Server side: spawns the entity's component as a polled root (`None`) or
    /// subobject of the root; `None` if the entity lacks it.
    pub(crate) spawn: SpawnFn,
}

/// Function table of one message type.
#[derive(Clone, Copy)]
pub(crate) struct MessageFns {
    pub(crate) type_id: TypeId,
    pub(crate) protocol: fn(&ProtocolRegistry) -> Option<u16>,
    /// Server side: validates and writes a [`FromClient`]; returns false if rejected.
    pub(crate) server_receive: fn(&mut World, ClientId, ReceivedMessage, Option<Entity>) -> bool,
    /// Client side: writes a [`FromServer`].
    pub(crate) client_receive: fn(&mut World, ReceivedMessage, Option<Entity>),
}

/// The registered types (cheap to clone: the tables are shared).
#[derive(Resource, Clone, Default)]
pub(crate) struct NetRegistry {
    pub(crate) components: Arc<Vec<ComponentFns>>,
    pub(crate) messages: Arc<Vec<MessageFns>>,
}

/// Which registered type a protocol index stands for, on one side's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `components[i]`.
    Component(usize),
    /// `messages[i]`.
    Message(usize),
}

impl NetRegistry {
    /// Protocol index to kind, for `registry`.
    pub(crate) fn kinds(&self, registry: &ProtocolRegistry) -> HashMap<u16, Kind> {
        let mut out = HashMap::new();
        for (i, c) in self.components.iter().enumerate() {
            if let Some(p) = (c.protocol)(registry) {
                out.insert(p, Kind::Component(i));
            }
        }
        for (i, m) in self.messages.iter().enumerate() {
            if let Some(p) = (m.protocol)(registry) {
                out.insert(p, Kind::Message(i));
            }
        }
        out
    }
}

fn protocol_of<T: 'static>(registry: &ProtocolRegistry) -> Option<u16> {
    registry.index_of::<T>()
}

fn insert_component<C: NetComponent>(
    client: &Client<AnyClientTransport>,
    handle: NetRefHandle,
    entity: &mut EntityWorldMut,
) -> bool {
    match client.get::<C>(handle) {
        Some(c) => {
            entity.insert(c.clone());
            true
        }
        None => false,
    }
}

fn remove_component<C: NetComponent>(entity: &mut EntityWorldMut) {
    entity.remove::<C>();
}

fn spawn_component<C: NetComponent>(
    world: &World,
    entity: Entity,
    table: &mut ObjectTable,
    root: Option<NetRefHandle>,
) -> Option<Result<NetRefHandle, ObjectError>> {
    let c = world.get::<C>(entity)?;
    Some(match root {
        None => table.spawn_polled(c),
        Some(root) => table.spawn_subobject_polled(root, c),
    })
}

/// A server-side check of one message type, installed with
/// [`ReplicateAppExt::validate_net_message`].
#[derive(Resource)]
pub(crate) struct MessageValidator<M: 'static> {
    #[allow(clippy::type_complexity)]
    check: Box<dyn Fn(ClientId, &M, Option<Entity>) -> bool + Send + Sync>,
}

fn server_receive<M: NetMessage>(
    world: &mut World,
    client: ClientId,
    message: ReceivedMessage,
    target: Option<Entity>,
) -> bool {
    let Some(message) = message.take::<M>() else {
        return false;
    };
    if let Some(v) = world.get_resource::<MessageValidator<M>>()
        && !(v.check)(client, &message, target)
    {
        return false;
    }
    world.write_message(FromClient {
        client,
        message,
        target,
    });
    true
}

fn client_receive<M: NetMessage>(
    world: &mut World,
    message: ReceivedMessage,
    target: Option<Entity>,
) {
    if let Some(message) = message.take::<M>() {
        world.write_message(FromServer { message, target });
    }
}

/// Server side: sends every [`ToClients<M>`] written this frame (before the tick).
fn server_send_messages<M: NetMessage>(
    mut net: ResMut<NetServer>,
    map: Res<ServerEntityMap>,
    mut stats: ResMut<ServerStats>,
    mut outgoing: MessageReader<ToClients<M>>,
) {
    let server = net.server_mut();
    for m in outgoing.read() {
        let target = m.target.and_then(|e| map.handle(e));
        if m.target.is_some() && target.is_none() {
            stats.messages_not_sent += 1;
            continue;
        }
        let result = match (m.to, target) {
            (Recipients::Client(c), None) => server.send_message(c, &m.message, m.mode),
            (Recipients::Client(c), Some(h)) => {
                server.send_object_message(c, h, &m.message, m.mode)
            }
            (Recipients::All, None) => server.broadcast_message(&m.message, m.mode),
            (Recipients::All, Some(h)) => {
                let clients: Vec<ClientId> = server.clients().collect();
                clients
                    .into_iter()
                    .try_for_each(|c| server.send_object_message(c, h, &m.message, m.mode))
            }
        };
        if let Err(e) = result {
            stats.messages_not_sent += 1;
            tracing::debug!("replicate-bevy: message not sent: {e}");
        }
    }
}

/// Client side: queues every [`ToServer<M>`] written this frame (sent at the next
/// client tick).
fn client_send_messages<M: NetMessage>(
    mut net: ResMut<NetClient>,
    map: Res<ClientEntityMap>,
    mut outgoing: MessageReader<ToServer<M>>,
) {
    let client = net.client_mut();
    for m in outgoing.read() {
        let result = match m.target {
            None => client.send_message(&m.message, m.mode),
            Some(e) => match map.handle(e) {
                Some(h) => client.send_object_message(h, &m.message, m.mode),
                None => {
                    tracing::debug!("replicate-bevy: message target {e} is not replicated");
                    continue;
                }
            },
        };
        if let Err(e) = result {
            tracing::debug!("replicate-bevy: message not sent: {e}");
        }
    }
}

/// Registration of replicated components and network messages on an [`App`]. Call the
/// same registrations, in any order, on the server app and on the client app (both
/// sides must link the same `#[derive(Replicated)]` types; the core checks it in the
/// handshake).
pub trait ReplicateAppExt {
    /// Replicates component `C`: on the server, every entity carrying
    /// [`Replicate`](crate::Replicate) and `C` replicates `C` as its root object or
    /// a subobject of it (see the [mapping](crate#the-entity--object-mapping)); on
    /// the client, the entity of that root receives `C`.
    fn replicate<C: NetComponent>(&mut self) -> &mut Self;

    /// Carries messages of type `M` both ways: write [`ToClients<M>`] on the server
    /// and read [`FromServer<M>`] on the client; write [`ToServer<M>`] on the client
    /// and read [`FromClient<M>`] on the server.
    fn add_net_message<M: NetMessage>(&mut self) -> &mut Self;

    /// Server side: `check(client, message, target)` runs on every `M` a client sends
    /// before it becomes a [`FromClient<M>`]; `false` drops it (counted in
    /// [`ServerStats::messages_rejected`]). Registers `M` if needed.
    fn validate_net_message<M: NetMessage>(
        &mut self,
        check: impl Fn(ClientId, &M, Option<Entity>) -> bool + Send + Sync + 'static,
    ) -> &mut Self;
}

impl ReplicateAppExt for App {
    fn replicate<C: NetComponent>(&mut self) -> &mut Self {
        self.init_resource::<NetRegistry>();
        let mut registry = self.world_mut().resource_mut::<NetRegistry>();
        if registry
            .components
            .iter()
            .any(|c| c.type_id == TypeId::of::<C>())
        {
            return self;
        }
        Arc::make_mut(&mut registry.components).push(ComponentFns {
            name: std::any::type_name::<C>(),
            type_id: TypeId::of::<C>(),
            protocol: protocol_of::<C>,
            insert: insert_component::<C>,
            remove: remove_component::<C>,
            spawn: spawn_component::<C>,
        });
        self.add_systems(
            PostUpdate,
            crate::server::sync_component::<C>
                .in_set(crate::server::ServerSteps::Components)
                .run_if(resource_exists::<NetServer>),
        )
    }

    fn add_net_message<M: NetMessage>(&mut self) -> &mut Self {
        self.init_resource::<NetRegistry>();
        let mut registry = self.world_mut().resource_mut::<NetRegistry>();
        if registry
            .messages
            .iter()
            .any(|m| m.type_id == TypeId::of::<M>())
        {
            return self;
        }
        Arc::make_mut(&mut registry.messages).push(MessageFns {
            type_id: TypeId::of::<M>(),
            protocol: protocol_of::<M>,
            server_receive: server_receive::<M>,
            client_receive: client_receive::<M>,
        });
        self.add_message::<ToClients<M>>()
            .add_message::<FromClient<M>>()
            .add_message::<ToServer<M>>()
            .add_message::<FromServer<M>>()
            .add_systems(
                PostUpdate,
                (
                    server_send_messages::<M>
                        .in_set(crate::server::ServerSteps::Messages)
                        .run_if(resource_exists::<NetServer>),
                    client_send_messages::<M>
                        .in_set(ClientSet::Send)
                        .run_if(resource_exists::<NetClient>),
                ),
            )
    }

    fn validate_net_message<M: NetMessage>(
        &mut self,
        check: impl Fn(ClientId, &M, Option<Entity>) -> bool + Send + Sync + 'static,
    ) -> &mut Self {
        self.add_net_message::<M>();
        self.insert_resource(MessageValidator::<M> {
            check: Box::new(check),
        })
    }
}
