//! The facade's typed API over the in-memory transport: typed handles from `spawn`,
//! typed change events with member keys, and ownership told to each client
//! (`Client::is_owned`, `OwnershipGained` / `OwnershipLost`), including a notice that
//! arrives while its object is not on the client.

use replicate::transport::LinkConditioner;
use replicate::transport::memory::{MemoryClientTransport, MemoryServerTransport};
use replicate::{
    Client, ClientConfig, ClientEvent, Handle, NetRefHandle, ProtocolRegistry, Replicated, Server,
    ServerConfig,
};
use std::sync::Arc;
use std::time::Duration;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "facade_typed::Player")]
struct Player {
    health: u8,
    ammo: u16,
    #[net(max_len = 16)]
    name: String,
}

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "facade_typed::Crate")]
struct Crate {
    health: u8,
}

type MemServer = Server<MemoryServerTransport>;
type MemClient = Client<MemoryClientTransport>;

struct Sim {
    server: MemServer,
    clients: Vec<MemClient>,
    now: Duration,
}

impl Sim {
    fn new(clients: usize, conditioner: LinkConditioner) -> Self {
        let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
        let transport = MemoryServerTransport::new(conditioner, 7);
        let network = transport.network();
        let server = Server::new(transport, registry.clone(), ServerConfig::default()).unwrap();
        let clients = (0..clients)
            .map(|_| {
                Client::new(
                    network.connect(&[]),
                    registry.clone(),
                    ClientConfig::default(),
                )
                .unwrap()
            })
            .collect();
        let mut sim = Self {
            server,
            clients,
            now: Duration::ZERO,
        };
        for _ in 0..300 {
            sim.run(1);
            if sim.clients.iter().all(|c| c.is_connected())
                && sim.server.client_count() == sim.clients.len()
            {
                break;
            }
        }
        assert!(sim.clients.iter().all(|c| c.is_connected()));
        assert_eq!(sim.server.client_count(), sim.clients.len());
        sim
    }

    /// Runs `ticks` ticks; the events each client raised meanwhile.
    fn run(&mut self, ticks: u32) -> Vec<Vec<ClientEvent>> {
        let mut out = vec![Vec::new(); self.clients.len()];
        for _ in 0..ticks {
            self.now += Duration::from_millis(16);
            self.server.tick(self.now).unwrap();
            let _ = self.server.events();
            for (i, c) in self.clients.iter_mut().enumerate() {
                c.tick(self.now).unwrap();
                out[i].extend(c.events());
            }
        }
        out
    }

    /// The transport client id of client `i` (clients connect in order).
    fn id(&self, i: usize) -> u64 {
        let mut ids: Vec<u64> = self.server.clients().collect();
        ids.sort_unstable();
        ids[i]
    }
}

fn position(events: &[ClientEvent], wanted: &ClientEvent) -> Option<usize> {
    events.iter().position(|e| e == wanted)
}

#[test]
fn typed_handles_read_and_write_without_naming_the_type() {
    let mut sim = Sim::new(1, LinkConditioner::perfect());
    let player: Handle<Player> = sim.server.spawn(Player::default()).unwrap();
    let crate_ = sim.server.spawn(Crate { health: 9 }).unwrap();
    sim.server.get_mut(player).unwrap().health = 42;
    assert_eq!(sim.server.get(player).unwrap().health, 42);

    // Untyped and typed handles of one object are equal and convert both ways.
    let raw: NetRefHandle = player.into();
    assert_eq!(raw, player);
    assert_eq!(player.raw(), raw);
    assert_eq!(sim.server.handle::<Player>(raw), Some(player));
    assert_eq!(
        sim.server.handle::<Crate>(raw),
        None,
        "a Player is no Crate"
    );
    assert_eq!(sim.server.get::<Player>(raw).unwrap().health, 42);
    assert!(sim.server.get::<Crate>(raw).is_none());

    let events = sim.run(10).remove(0);
    let client = &sim.clients[0];
    // The server's typed handle reads the client's replica too.
    assert_eq!(client.get(player).unwrap().health, 42);
    assert_eq!(client.get(crate_).unwrap().health, 9);
    assert_eq!(client.handle::<Player>(raw), Some(player));
    assert_eq!(client.handle::<Crate>(raw), None);
    let spawned: Vec<Handle<Player>> = client.spawned::<Player>(&events).collect();
    assert_eq!(spawned, vec![player]);
    let crates: Vec<Handle<Crate>> = client.spawned::<Crate>(&events).collect();
    assert_eq!(crates, vec![crate_]);

    sim.server.destroy(player).unwrap();
    assert!(sim.server.handle::<Player>(raw).is_none(), "destroyed");
    sim.run(10);
    assert!(sim.clients[0].get(player).is_none());
    assert!(sim.clients[0].handle::<Player>(raw).is_none());
}

fn player_with(health: u8) -> Player {
    Player {
        health,
        ..Default::default()
    }
}

#[test]
fn a_typed_handle_never_finds_the_object_that_took_its_slot() {
    let mut sim = Sim::new(1, LinkConditioner::perfect());
    let old = sim.server.spawn(Player::default()).unwrap();
    sim.run(5);
    let objects = sim.server.replication().objects();
    let slot = objects.index_of(old.raw()).unwrap();
    sim.server.destroy(old).unwrap();
    // The client acknowledges the destroy; then the slot is free again.
    sim.run(10);
    let new = sim.server.spawn(player_with(7)).unwrap();
    assert_eq!(
        sim.server.replication().objects().index_of(new.raw()),
        Some(slot),
        "the new object took the old one's slot"
    );
    assert!(
        sim.server.get(old).is_none(),
        "the old handle names nothing"
    );
    assert!(sim.server.get_mut(old).is_none());
    assert_eq!(sim.server.get(new).unwrap().health, 7);

    // A handle that remembers no slot finds its object through the handle map, and
    // one whose object is gone finds nothing, whatever took its place.
    let unchecked = Handle::<Player>::from_raw_unchecked(new.raw());
    assert_eq!(sim.server.get(unchecked).unwrap().health, 7);
    let elsewhere = sim.server.spawn(player_with(9)).unwrap();
    sim.server.destroy(new).unwrap();
    assert!(sim.server.get(new).is_none());
    assert_eq!(sim.server.get(elsewhere).unwrap().health, 9);
    sim.run(10);
    assert_eq!(sim.clients[0].get(elsewhere).unwrap().health, 9);
    assert!(sim.clients[0].get(new).is_none());
}

#[test]
fn typed_changes_name_the_members_that_changed() {
    let mut sim = Sim::new(1, LinkConditioner::perfect());
    let player = sim.server.spawn(Player::default()).unwrap();
    let crate_ = sim.server.spawn(Crate::default()).unwrap();
    sim.run(10);

    sim.server.get_mut(player).unwrap().health = 7;
    sim.server.get_mut(crate_).unwrap().health = 3;
    let events = sim.run(5).remove(0);
    let client = &sim.clients[0];
    let changes: Vec<_> = client.changed::<Player>(&events).collect();
    assert_eq!(changes.len(), 1, "{events:?}");
    let c = &changes[0];
    assert_eq!(c.handle(), player);
    assert!(c.contains(Player::HEALTH));
    assert!(!c.contains(Player::AMMO) && !c.contains(Player::NAME));
    let names: Vec<&str> = c.members().map(|m| m.name()).collect();
    assert_eq!(names, ["health"]);
    // The crate's change is a Crate's, not a Player's.
    let crate_changes: Vec<_> = client.changed::<Crate>(&events).collect();
    assert_eq!(crate_changes.len(), 1);
    assert_eq!(crate_changes[0].handle(), crate_);
    assert!(crate_changes[0].contains(Crate::HEALTH));

    sim.server.get_mut(player).unwrap().ammo = 30;
    sim.server.get_mut(player).unwrap().name = "ada".into();
    let events = sim.run(5).remove(0);
    let client = &sim.clients[0];
    let c = client.changed::<Player>(&events).next().unwrap();
    let names: Vec<&str> = c.members().map(|m| m.name()).collect();
    assert_eq!(names, ["ammo", "name"]);
    assert!(!c.contains(Player::HEALTH));
    assert_eq!(client.get(c.handle()).unwrap().name, "ada");
    assert!(client.changed::<Crate>(&events).next().is_none());
}

#[test]
fn the_owner_learns_it_owns_an_object_and_loses_it_on_a_transfer() {
    let mut sim = Sim::new(2, LinkConditioner::perfect());
    let (a, b) = (sim.id(0), sim.id(1));
    // Owned from the tick it is spawned: the notice travels with the creation.
    let pawn = sim.server.spawn(Player::default()).unwrap();
    sim.server.set_owner(pawn, Some(a), true).unwrap();
    assert_eq!(sim.server.owner(pawn), Some(a));
    let events = sim.run(10);
    let raw = pawn.raw();
    let spawned = position(
        &events[0],
        &ClientEvent::Spawned {
            handle: raw,
            protocol: sim.clients[0].world().object(raw).unwrap().protocol(),
        },
    )
    .expect("spawned on the owner");
    let gained = position(
        &events[0],
        &ClientEvent::OwnershipGained {
            handle: raw,
            autonomous: true,
        },
    )
    .expect("the owner is told");
    assert!(
        spawned < gained,
        "ownership follows the spawn: {:?}",
        events[0]
    );
    assert!(sim.clients[0].is_owned(pawn));
    assert!(sim.clients[0].is_autonomous(pawn));
    assert_eq!(sim.clients[0].owned_objects(), vec![raw]);
    assert!(!sim.clients[1].is_owned(pawn));
    assert!(
        !events[1]
            .iter()
            .any(|e| matches!(e, ClientEvent::OwnershipGained { .. })),
        "the other client owns nothing"
    );

    // A transfer: the old owner loses it, the new one gains it (simulated only).
    sim.server.set_owner(pawn, Some(b), false).unwrap();
    let events = sim.run(10);
    assert_eq!(
        events[0]
            .iter()
            .filter(|e| e.handle() == Some(raw) && !matches!(e, ClientEvent::Changed { .. }))
            .collect::<Vec<_>>(),
        vec![&ClientEvent::OwnershipLost { handle: raw }]
    );
    assert!(events[1].contains(&ClientEvent::OwnershipGained {
        handle: raw,
        autonomous: false
    }));
    assert!(!sim.clients[0].is_owned(pawn));
    assert!(sim.clients[1].is_owned(pawn) && !sim.clients[1].is_autonomous(pawn));

    // A role change alone is reported again to the owner.
    sim.server.set_owner(pawn, Some(b), true).unwrap();
    let events = sim.run(10);
    assert!(events[1].contains(&ClientEvent::OwnershipGained {
        handle: raw,
        autonomous: true
    }));
    assert!(sim.clients[1].is_autonomous(pawn));

    // Destroyed: no longer owned, no OwnershipLost (the destroy is the event).
    sim.server.destroy(pawn).unwrap();
    let events = sim.run(10);
    assert!(events[1].contains(&ClientEvent::Destroyed { handle: raw }));
    assert!(
        !events[1]
            .iter()
            .any(|e| matches!(e, ClientEvent::OwnershipLost { .. }))
    );
    assert!(!sim.clients[1].is_owned(raw));
    assert!(sim.clients[1].owned_objects().is_empty());
}

#[test]
fn a_notice_for_an_object_out_of_scope_waits_until_it_arrives() {
    let mut sim = Sim::new(1, LinkConditioner::perfect());
    let a = sim.id(0);
    let pawn = sim.server.spawn(Player::default()).unwrap();
    // Not in the client's scope yet, but already its own.
    assert!(sim.server.set_in_scope(a, pawn, false));
    sim.server.set_owner(pawn, Some(a), false).unwrap();
    let events = sim.run(10).remove(0);
    assert!(sim.clients[0].world().object(pawn.raw()).is_none());
    assert!(!sim.clients[0].is_owned(pawn));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ClientEvent::OwnershipGained { .. })),
        "nothing to own yet: {events:?}"
    );

    // It comes into scope: spawned, then owned, without a new notice.
    assert!(sim.server.set_in_scope(a, pawn, true));
    let events = sim.run(10).remove(0);
    let raw = pawn.raw();
    let spawned = events
        .iter()
        .position(|e| matches!(e, ClientEvent::Spawned { handle, .. } if *handle == raw))
        .expect("spawned");
    let gained = position(
        &events,
        &ClientEvent::OwnershipGained {
            handle: raw,
            autonomous: false,
        },
    )
    .expect("owned once here");
    assert!(spawned < gained);
    assert!(sim.clients[0].is_owned(pawn));

    // Out of scope again: gone, not owned; back: owned again.
    assert!(sim.server.set_in_scope(a, pawn, false));
    sim.run(10);
    assert!(!sim.clients[0].is_owned(pawn));
    assert!(sim.server.set_in_scope(a, pawn, true));
    let events = sim.run(10).remove(0);
    assert!(events.contains(&ClientEvent::OwnershipGained {
        handle: raw,
        autonomous: false
    }));
    assert!(sim.clients[0].is_owned(pawn));
}

#[test]
fn ownership_converges_over_a_lossy_link() {
    let mut sim = Sim::new(2, LinkConditioner::bad());
    let (a, b) = (sim.id(0), sim.id(1));
    let pawns: Vec<Handle<Player>> = (0..20)
        .map(|_| sim.server.spawn(Player::default()).unwrap())
        .collect();
    // Owners change every few ticks while packets are lost.
    for round in 0..30usize {
        let pawn = pawns[round % pawns.len()];
        let owner = match round % 3 {
            0 => Some(a),
            1 => Some(b),
            _ => None,
        };
        sim.server.set_owner(pawn, owner, round % 2 == 0).unwrap();
        sim.run(3);
    }
    sim.run(600);
    for (i, &id) in [a, b].iter().enumerate() {
        let want: Vec<NetRefHandle> = pawns
            .iter()
            .filter(|&&p| sim.server.owner(p) == Some(id))
            .map(|p| p.raw())
            .collect();
        let mut got = sim.clients[i].owned_objects();
        got.sort_unstable();
        let mut want_sorted = want.clone();
        want_sorted.sort_unstable();
        assert_eq!(got, want_sorted, "client {i}");
        assert!(!want.is_empty());
    }
}

#[test]
fn a_client_that_leaves_gives_its_objects_up() {
    let mut sim = Sim::new(1, LinkConditioner::perfect());
    let a = sim.id(0);
    let pawn = sim.server.spawn(Player::default()).unwrap();
    sim.server.set_owner(pawn, Some(a), true).unwrap();
    sim.run(10);
    assert!(sim.clients[0].is_owned(pawn));
    let conn = sim.server.connection_id(a).unwrap();

    sim.clients[0].disconnect();
    sim.run(20);
    assert_eq!(sim.server.client_count(), 0);
    assert_eq!(sim.server.owner(pawn), None);
    let objects = sim.server.objects();
    let entry = objects
        .entry_at(objects.index_of(pawn.raw()).unwrap())
        .unwrap();
    assert_eq!(entry.owner_connection(), None, "nobody owns it now");

    // A new client gets the freed connection id, but not the pawn.
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport = sim.server.transport().network().connect(&[]);
    sim.clients
        .push(Client::new(transport, registry, ClientConfig::default()).unwrap());
    let events = sim.run(20);
    let newcomer = sim.clients.len() - 1;
    assert!(sim.clients[newcomer].is_connected());
    let id = sim.server.clients().next().unwrap();
    assert_eq!(sim.server.connection_id(id), Some(conn), "the id is reused");
    assert!(sim.clients[newcomer].get(pawn).is_some());
    assert!(!sim.clients[newcomer].is_owned(pawn));
    assert!(
        !events[newcomer]
            .iter()
            .any(|e| matches!(e, ClientEvent::OwnershipGained { .. }))
    );
}
