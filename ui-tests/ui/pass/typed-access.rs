//! Typed access compiles as documented: typed handles from `spawn` (the type is
//! inferred by `get`/`get_mut`), checked conversions from untyped handles, typed
//! change events tested with member keys, ownership queries.
use replicate::transport::memory::MemoryServerTransport;
use replicate::transport::{ClientTransport, LinkConditioner};
use replicate::{
    Changes, Client, ClientEvent, Handle, MemberKey, NetRefHandle, ProtocolRegistry, Replicated,
    Server,
};

#[derive(Replicated, Default)]
struct Player {
    health: u8,
    ammo: u16,
}

fn key_of_health() -> MemberKey<Player> {
    Player::HEALTH
}

fn on_frame<T: ClientTransport>(client: &mut Client<T>) -> Vec<Handle<Player>> {
    let events: Vec<ClientEvent> = client.events().collect();
    let mut hurt = Vec::new();
    for changes in client.changed::<Player>(&events) {
        let changes: Changes<Player> = changes;
        if changes.contains(key_of_health()) && client.is_owned(changes.handle()) {
            hurt.push(changes.handle());
        }
    }
    for player in client.spawned::<Player>(&events) {
        let _: Option<&Player> = client.get(player);
    }
    hurt
}

fn main() {
    let registry = std::sync::Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport = MemoryServerTransport::new(LinkConditioner::perfect(), 1);
    let mut server = Server::new(transport, registry, Default::default()).unwrap();
    let player: Handle<Player> = server.spawn(Player::default()).unwrap();
    server.get_mut(player).unwrap().ammo = 3;
    let raw: NetRefHandle = player.into();
    let again: Option<Handle<Player>> = server.handle(raw);
    assert_eq!(again, Some(player));
    server.set_owner(player, None, false).unwrap();
    server.destroy(player).unwrap();
    let _ = on_frame::<replicate::transport::memory::MemoryClientTransport>;
}
