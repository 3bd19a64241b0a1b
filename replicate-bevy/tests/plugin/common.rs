//! Headless server and client apps over the in-memory transport, in lock-step with a
//! simulated clock.

use bevy_app::App;
use bevy_ecs::prelude::*;
use replicate::transport::memory::{MemoryNetwork, MemoryServerTransport};
use replicate::transport::{ClientId, LinkConditioner};
use replicate::{DeliveryMode, NetRefHandle, Replicated, ServerConfig};
use replicate_bevy::*;
use std::time::Duration;

/// Frame length: the core's default tick rate is 30 Hz.
pub const STEP: Duration = Duration::from_millis(33);

#[derive(Component, Replicated, Clone, Debug, Default, PartialEq)]
#[net(name = "tests::Position")]
pub struct Position {
    pub x: f32,
    pub y: f32,
}

#[derive(Component, Replicated, Clone, Debug, Default, PartialEq)]
#[net(name = "tests::Health")]
pub struct Health {
    #[net(bits = 7)]
    pub hp: u8,
}

/// One member only the owner receives.
#[derive(Component, Replicated, Clone, Debug, Default, PartialEq)]
#[net(name = "tests::Secret")]
pub struct Secret {
    #[net(cond = OwnerOnly)]
    pub code: u32,
    #[net(bits = 7)]
    pub public: u8,
}

/// A reference to another replicated entity.
#[derive(Component, Replicated, Clone, Debug, Default, PartialEq)]
#[net(name = "tests::Follow")]
pub struct Follow {
    pub target: NetRefHandle,
}

/// A notify hook: the receiving side counts the changes of `open`.
#[derive(Component, Replicated, Clone, Debug, Default, PartialEq)]
#[net(name = "tests::Door")]
pub struct Door {
    #[net(notify = on_open)]
    pub open: bool,
    #[net(skip)]
    pub toggles: u32,
}

impl Door {
    fn on_open(&mut self, _old: &bool) {
        self.toggles += 1;
    }
}

/// A message both ways.
#[derive(Replicated, Clone, Debug, Default, PartialEq)]
#[net(name = "tests::Ping")]
pub struct Ping {
    pub seq: u32,
}

fn register(app: &mut App) {
    app.insert_resource(NetClock::fixed(STEP))
        .replicate::<Position>()
        .replicate::<Health>()
        .replicate::<Secret>()
        .replicate::<Follow>()
        .replicate::<Door>()
        .add_net_message::<Ping>();
}

/// A server app and client apps on one in-memory network.
pub struct Harness {
    pub server: App,
    pub clients: Vec<App>,
    pub network: MemoryNetwork,
}

impl Harness {
    /// `clients` client apps, not connected yet, on links conditioned by `link`.
    pub fn new(clients: usize, link: LinkConditioner) -> Self {
        Self::with_config(clients, link, Default::default())
    }

    /// Like [`new`](Self::new) with a server configuration.
    pub fn with_config(clients: usize, link: LinkConditioner, config: ServerConfig) -> Self {
        let transport = MemoryServerTransport::new(link, 0x5EED);
        let network = transport.network();
        let mut server = App::new();
        server.add_plugins(ServerPlugin);
        register(&mut server);
        server.insert_resource(NetServer::new(transport, config).unwrap());
        let mut h = Self {
            server,
            clients: Vec::new(),
            network,
        };
        for _ in 0..clients {
            h.add_client();
        }
        h
    }

    /// Adds a client app that starts connecting.
    pub fn add_client(&mut self) -> usize {
        let mut app = App::new();
        app.add_plugins(ClientPlugin);
        register(&mut app);
        let client = NetClient::memory(self.network.connect(b""), Default::default()).unwrap();
        app.insert_resource(client);
        self.clients.push(app);
        self.clients.len() - 1
    }

    /// Replaces client `i`'s connection with a new one.
    pub fn reconnect(&mut self, i: usize) {
        let client = NetClient::memory(self.network.connect(b""), Default::default()).unwrap();
        self.clients[i].insert_resource(client);
    }

    /// One frame of every app.
    pub fn step(&mut self) {
        self.server.update();
        for c in &mut self.clients {
            c.update();
        }
    }

    pub fn steps(&mut self, n: usize) {
        for _ in 0..n {
            self.step();
        }
    }

    /// Steps until every client is connected (panics after 100 frames).
    pub fn connect(&mut self) {
        for _ in 0..100 {
            self.step();
            if self
                .clients
                .iter()
                .all(|c| c.world().resource::<NetClient>().is_connected())
                && self.server.world().resource::<NetServer>().clients().len() == self.clients.len()
            {
                // One more frame so the server side applied the connection too.
                self.step();
                return;
            }
        }
        panic!("clients did not connect");
    }

    pub fn client_id(&self, i: usize) -> ClientId {
        self.clients[i]
            .world()
            .resource::<NetClient>()
            .local_id()
            .unwrap()
    }

    /// Spawns on the server.
    pub fn spawn(&mut self, bundle: impl Bundle) -> Entity {
        self.server.world_mut().spawn(bundle).id()
    }

    /// The root handle of a server entity.
    pub fn handle(&self, e: Entity) -> NetRefHandle {
        self.server
            .world()
            .resource::<ServerEntityMap>()
            .handle(e)
            .expect("entity not replicated yet")
    }

    /// Client `i`'s entity for server entity `e`.
    pub fn client_entity(&self, i: usize, e: Entity) -> Option<Entity> {
        let h = self
            .server
            .world()
            .resource::<ServerEntityMap>()
            .handle(e)?;
        self.clients[i]
            .world()
            .resource::<ClientEntityMap>()
            .entity(h)
    }

    /// Component `C` of server entity `e` on client `i`.
    pub fn client_get<C: Component + Clone>(&self, i: usize, e: Entity) -> Option<C> {
        let ce = self.client_entity(i, e)?;
        self.clients[i].world().get::<C>(ce).cloned()
    }

    pub fn server_get<C: Component + Clone>(&self, e: Entity) -> Option<C> {
        self.server.world().get::<C>(e).cloned()
    }

    /// Number of replicated entities client `i` has.
    pub fn client_entities(&mut self, i: usize) -> usize {
        let w = self.clients[i].world_mut();
        w.query_filtered::<(), With<ServerObject>>().iter(w).count()
    }

    /// Object batches client `i` has read so far.
    pub fn batches(&self, i: usize) -> u64 {
        self.clients[i]
            .world()
            .resource::<NetClient>()
            .with_client(|c| c.world().stats().batches)
    }

    /// Whether client `i` holds exactly the server's replicated entities with equal
    /// `Position` and `Health`; a description of the first difference otherwise.
    pub fn diverges(&mut self, i: usize) -> Option<String> {
        let server_entities: Vec<Entity> = {
            let w = self.server.world_mut();
            // An entity without a replicated component has no object.
            w.query_filtered::<Entity, (With<Replicate>, Or<(With<Health>, With<Position>)>)>()
                .iter(w)
                .collect()
        };
        for &e in &server_entities {
            let Some(ce) = self.client_entity(i, e) else {
                return Some(format!("client {i} lacks {e}"));
            };
            let cw = self.clients[i].world();
            if self.server_get::<Position>(e) != cw.get::<Position>(ce).cloned() {
                return Some(format!(
                    "client {i}: Position of {e} differs: {:?} on the server, {:?} here",
                    self.server_get::<Position>(e),
                    cw.get::<Position>(ce)
                ));
            }
            if self.server_get::<Health>(e) != cw.get::<Health>(ce).cloned() {
                return Some(format!(
                    "client {i}: Health of {e} differs: {:?} on the server, {:?} here",
                    self.server_get::<Health>(e),
                    cw.get::<Health>(ce)
                ));
            }
        }
        let n = self.client_entities(i);
        (n != server_entities.len()).then(|| {
            format!(
                "client {i} has {n} entities, the server {}",
                server_entities.len()
            )
        })
    }

    /// Writes a message on the server.
    pub fn server_send(&mut self, to: Recipients, seq: u32, target: Option<Entity>) {
        self.server.world_mut().write_message(ToClients {
            to,
            message: Ping { seq },
            mode: DeliveryMode::ReliableOrdered,
            target,
        });
    }

    /// Writes a message on client `i`.
    pub fn client_send(&mut self, i: usize, seq: u32) {
        self.clients[i].world_mut().write_message(ToServer {
            message: Ping { seq },
            mode: DeliveryMode::ReliableOrdered,
            target: None,
        });
    }
}

/// Collects every `M` message of an app into a resource, so tests can read them after
/// `update`.
#[derive(Resource)]
pub struct Collected<M: Clone + Send + Sync + 'static>(pub Vec<M>);

pub fn collect<M: bevy_ecs::message::Message + Clone>(app: &mut App) {
    app.insert_resource(Collected::<M>(Vec::new()));
    app.add_systems(
        bevy_app::Update,
        |mut reader: MessageReader<M>, mut out: ResMut<Collected<M>>| {
            out.0.extend(reader.read().cloned());
        },
    );
}

pub fn collected<M: bevy_ecs::message::Message + Clone>(app: &App) -> Vec<M> {
    app.world().resource::<Collected<M>>().0.clone()
}

impl Harness {
    /// Client `i`'s replicated entities the server does not have (debugging aid).
    pub fn extra_entities(&mut self, i: usize) -> Vec<String> {
        let server_handles: Vec<NetRefHandle> = {
            let w = self.server.world_mut();
            let es: Vec<Entity> = w
                .query_filtered::<Entity, With<Replicate>>()
                .iter(w)
                .collect();
            es.iter()
                .filter_map(|e| w.resource::<ServerEntityMap>().handle(*e))
                .collect()
        };
        let w = self.clients[i].world_mut();
        let mut q = w.query::<(Entity, &ServerObject, Option<&Health>, Option<&Position>)>();
        q.iter(w)
            .filter(|(_, so, _, _)| !server_handles.contains(&so.0))
            .map(|(e, so, h, p)| format!("{e} {:?} {h:?} {p:?}", so.0))
            .collect()
    }
}
