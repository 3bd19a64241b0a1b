//! # replicate-bevy
//!
//! A Bevy plugin for [`replicate`]: entities marked [`Replicate`] on a server app
//! appear, with their replicated components, as entities of every client app. The
//! core stays engine-agnostic; this crate maps the ECS onto its [`Server`] and
//! [`Client`] facade.
//!
//! - [`ServerPlugin`] + a [`NetServer`] resource; [`ClientPlugin`] + a [`NetClient`]
//!   resource. Any transport: netcode.io UDP ([`NetServer::bind`], [`NetClient::udp`])
//!   or the in-memory one ([`replicate::transport::memory`], for tests and
//!   single-process games), behind the link conditioner if wanted.
//! - Components: `app.replicate::<C>()` ([`ReplicateAppExt`]) for every component
//!   type deriving [`Replicated`], on both apps.
//! - Messages and RPCs: `app.add_net_message::<M>()`; write [`ToClients`] / read
//!   [`FromServer`], write [`ToServer`] / read [`FromClient`]; a server-side validator
//!   with [`ReplicateAppExt::validate_net_message`].
//! - Connection events: [`ClientConnected`], [`ClientDisconnected`] (server),
//!   [`ConnectedToServer`], [`DisconnectedFromServer`] (client). Statistics:
//!   [`ServerStats`], [`ClientStats`].
//! - Interest: [`NetOwner`], [`VisibleTo`], [`NetGroups`] (with
//!   [`NetServer::set_group_subscription`]), [`NetFilter`], [`NetPosition`],
//!   [`ClientView`], [`NetPriority`]. Clients see [`Owned`] on the entities they own.
//!
//! ## Frame order
//!
//! | schedule | server | client |
//! |---|---|---|
//! | `PreUpdate` | [`ServerSet::Receive`]: connection events, [`FromClient`] messages and stats from the last tick | [`ClientSet::Receive`]: one client tick, then entities are spawned / updated / despawned, [`FromServer`] and [`ServerObjectChanged`] written |
//! | `Update` | your game systems | your game systems |
//! | `PostUpdate` | [`ServerSet::Send`]: despawns, new entities and components, changed components, interest, [`ToClients`], then one server tick | [`ClientSet::Send`]: [`ToServer`] messages queued (they leave with the next tick) |
//!
//! Time comes from the [`NetClock`] resource: real time by default, or a fixed step
//! per frame ([`NetClock::fixed`]) for deterministic tests and simulations. Call
//! `app.update()` at the server's tick rate (the core's
//! [`TimeConfig::tick_rate`](replicate::time::TimeConfig)).
//!
//! ## The entity ↔ object mapping
//!
//! A server entity with [`Replicate`] is **one root object**, the first of its
//! replicated components to reach the core; **each further replicated component is a
//! subobject** of that root. The core writes subobjects with their root, destroys
//! them with it, and gives them the root's scope and owner. The root costs what the
//! same object replicated through the core directly costs: an entity with one
//! replicated component is exactly one object. So:
//!
//! - a component's changes cost only that component's changed members: components
//!   are polled with Bevy change detection (`Changed<C>`), so an untouched component
//!   never reaches the core, and one written with an equal value is compared by the
//!   core (quantized) and sends nothing;
//! - inserting a component spawns its object, removing it destroys it (the client
//!   removes the component); despawning the entity, removing [`Replicate`] or
//!   removing its last replicated component destroys the root and everything under
//!   it (the client despawns the entity);
//! - removing the *root's* component while others remain makes the entity again on
//!   a new root (the clients despawn their entity and spawn a new one with the
//!   remaining components); an entity whose replicated components come and go can
//!   keep a stable root by carrying a replicated component that stays;
//! - an entity with [`Replicate`] but no replicated component has no object and is
//!   not seen by clients;
//! - interest (scope, owner, groups, grid) is set on the root and the subobjects
//!   follow it; the core tells the owning client, which marks the entity [`Owned`];
//! - references: put [`ServerEntityMap::handle`] (the root's [`NetRefHandle`]) in a
//!   `NetRefHandle` member; the client resolves it with
//!   [`ClientEntityMap::entity`].
//!
//! ## Messages, state and latency
//!
//! On a client, the state and the messages of a tick become visible together in
//! `Update`: the core applies a packet's state and the plugin writes its
//! [`FromServer`] messages after it, in the order the messages executed. A message
//! targeting an entity destroyed by the same packet arrives with `target: None` (the
//! core's own `Client::on_message` handlers, which run before their packet's state,
//! remain available through [`NetClient::client_mut`]). A [`ToServer`] message written
//! in frame *n* leaves with the client tick of frame *n + 1*; the server reads it as a
//! [`FromClient`] in the frame after its tick received it.
//!
//! ## Example
//!
//! A server app and a client app in one process over the in-memory transport:
//!
//! ```
//! use bevy_app::{App, Update};
//! use bevy_ecs::prelude::*;
//! use replicate::transport::LinkConditioner;
//! use replicate::transport::memory::MemoryServerTransport;
//! use replicate::{DeliveryMode, Replicated};
//! use replicate_bevy::*;
//! use std::time::Duration;
//!
//! #[derive(Component, Replicated, Clone, Debug, Default, PartialEq)]
//! #[net(name = "docs::Health")]
//! struct Health { #[net(bits = 7)] points: u8 }
//!
//! #[derive(Replicated, Clone, Debug, Default)]
//! #[net(name = "docs::Heal")]
//! struct Heal { #[net(bits = 7)] amount: u8 }
//!
//! // Both apps register the same types.
//! fn shared(app: &mut App) {
//!     app.insert_resource(NetClock::fixed(Duration::from_millis(33)))
//!         .replicate::<Health>()
//!         .add_net_message::<Heal>();
//! }
//!
//! // Server: spawn a replicated entity; heal it when a client asks.
//! let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
//! let network = transport.network();
//! let mut server = App::new();
//! server.add_plugins(ServerPlugin);
//! shared(&mut server);
//! server.insert_resource(NetServer::new(transport, Default::default()).unwrap());
//! server.world_mut().spawn((Replicate, Health { points: 50 }));
//! server.add_systems(Update, |mut heals: MessageReader<FromClient<Heal>>, mut q: Query<&mut Health>| {
//!     for heal in heals.read() {
//!         for mut h in &mut q { h.points += heal.message.amount; }
//!     }
//! });
//!
//! // Client: connect, ask for a heal once connected.
//! let mut client = App::new();
//! client.add_plugins(ClientPlugin);
//! shared(&mut client);
//! client.insert_resource(NetClient::memory(network.connect(b""), Default::default()).unwrap());
//! client.add_systems(Update, |mut connected: MessageReader<ConnectedToServer>, mut out: MessageWriter<ToServer<Heal>>| {
//!     for _ in connected.read() {
//!         out.write(ToServer { message: Heal { amount: 10 }, mode: DeliveryMode::ReliableOrdered, target: None });
//!     }
//! });
//!
//! for _ in 0..30 {
//!     server.update();
//!     client.update();
//! }
//! let mut healths = client.world_mut().query::<&Health>();
//! let seen: Vec<u8> = healths.iter(client.world()).map(|h| h.points).collect();
//! assert_eq!(seen, [60]);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod client;
mod registry;
mod server;
mod transport;

pub use client::{
    ClientEntityMap, ClientPlugin, ClientSet, ClientStats, ConnectedToServer,
    DisconnectedFromServer, FromServer, NetClient, Owned, ServerObject, ServerObjectChanged,
    ToServer,
};
pub use registry::{NetComponent, NetMessage, ReplicateAppExt};
pub use server::{
    ClientConnected, ClientDisconnected, ClientView, FromClient, NetFilter, NetGroups, NetOwner,
    NetPosition, NetPriority, NetServer, Recipients, Replicate, ServerEntityMap, ServerPlugin,
    ServerSet, ServerStats, ToClients, VisibleTo,
};
pub use transport::{AnyClientTransport, AnyServerTransport};

#[cfg(doc)]
use replicate::{Client, NetRefHandle, Replicated, Server};

use bevy_app::{App, First};
use bevy_ecs::prelude::*;
use std::time::{Duration, Instant};

/// The time the plugins give the core (`now` of [`Server::tick`] / [`Client::tick`]),
/// advanced once per frame in [`First`].
#[derive(Resource, Debug, Clone)]
pub struct NetClock {
    now: Duration,
    mode: ClockMode,
}

#[derive(Debug, Clone, Copy)]
enum ClockMode {
    Real(Instant),
    Fixed(Duration),
}

impl Default for NetClock {
    fn default() -> Self {
        Self::real()
    }
}

impl NetClock {
    /// Real time since the clock was made.
    pub fn real() -> Self {
        Self {
            now: Duration::ZERO,
            mode: ClockMode::Real(Instant::now()),
        }
    }

    /// Simulated time: `step` more each frame (deterministic with the in-memory
    /// transport).
    pub fn fixed(step: Duration) -> Self {
        Self {
            now: Duration::ZERO,
            mode: ClockMode::Fixed(step),
        }
    }

    /// The time of this frame.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Moves to the next frame's time (the plugins do it in [`First`]; call it
    /// yourself only in an app without them).
    pub fn advance(&mut self) {
        match self.mode {
            ClockMode::Real(start) => self.now = start.elapsed(),
            ClockMode::Fixed(step) => self.now += step,
        }
    }
}

fn advance_clock(mut clock: ResMut<NetClock>) {
    clock.advance();
}

/// What both plugins need, added once.
fn init_shared(app: &mut App) {
    app.init_resource::<registry::NetRegistry>();
    if !app.world().contains_resource::<NetClock>() {
        app.init_resource::<NetClock>();
    }
    if !app.world().contains_resource::<SharedAdded>() {
        app.insert_resource(SharedAdded);
        app.add_systems(First, advance_clock);
    }
}

/// Marks an app where [`init_shared`] ran.
#[derive(Resource)]
struct SharedAdded;

/// The crate README's Rust snippets compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
