//! Entities and components through their whole life: spawn, change, insert, remove,
//! despawn, references, reconnect.

use crate::common::*;
use replicate::transport::LinkConditioner;
use replicate_bevy::*;

#[test]
fn spawn_change_despawn_round_trip() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let a = h.spawn((Replicate, Position { x: 1.0, y: 2.0 }, Health { hp: 90 }));
    let b = h.spawn((Replicate, Health { hp: 10 }));
    // Not marked: never replicated.
    let hidden = h.spawn(Position { x: 9.0, y: 9.0 });
    h.steps(3);
    for i in 0..2 {
        assert_eq!(
            h.client_get::<Position>(i, a),
            Some(Position { x: 1.0, y: 2.0 })
        );
        assert_eq!(h.client_get::<Health>(i, a), Some(Health { hp: 90 }));
        assert_eq!(h.client_get::<Health>(i, b), Some(Health { hp: 10 }));
        assert_eq!(h.client_get::<Position>(i, b), None);
        assert_eq!(h.client_entities(i), 2);
        assert!(h.client_entity(i, hidden).is_none());
    }
    let client_a = h.client_entity(0, a).unwrap();

    h.server.world_mut().get_mut::<Position>(a).unwrap().x = -5.5;
    h.steps(2);
    assert_eq!(
        h.client_get::<Position>(0, a),
        Some(Position { x: -5.5, y: 2.0 })
    );
    // The same client entity was updated, not a new one spawned.
    assert_eq!(h.client_entity(0, a), Some(client_a));

    h.server.world_mut().despawn(a);
    h.steps(2);
    for i in 0..2 {
        assert_eq!(h.client_entities(i), 1);
        assert!(h.clients[i].world().get_entity(client_a).is_err() || i == 1);
        assert!(h.diverges(i).is_none(), "{:?}", h.diverges(i));
    }
    assert!(h.clients[0].world().get_entity(client_a).is_err());

    // Removing the marker destroys it too, while the server entity lives on.
    h.server.world_mut().entity_mut(b).remove::<Replicate>();
    h.steps(2);
    assert_eq!(h.client_entities(0), 0);
    assert!(h.server.world().get::<Health>(b).is_some());
}

#[test]
fn component_insert_and_remove_follow_the_server() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    let e = h.spawn((Replicate, Health { hp: 1 }));
    h.steps(2);
    assert_eq!(h.client_get::<Position>(0, e), None);

    h.server
        .world_mut()
        .entity_mut(e)
        .insert(Position { x: 3.0, y: 4.0 });
    h.steps(2);
    assert_eq!(
        h.client_get::<Position>(0, e),
        Some(Position { x: 3.0, y: 4.0 })
    );

    h.server.world_mut().entity_mut(e).remove::<Position>();
    h.steps(2);
    assert_eq!(h.client_get::<Position>(0, e), None);
    assert_eq!(h.client_get::<Health>(0, e), Some(Health { hp: 1 }));

    // Inserted again, with a new value: a new subobject.
    h.server
        .world_mut()
        .entity_mut(e)
        .insert(Position { x: 7.0, y: 0.0 });
    h.steps(2);
    assert_eq!(
        h.client_get::<Position>(0, e),
        Some(Position { x: 7.0, y: 0.0 })
    );
    assert_eq!(h.client_entities(0), 1);
}

#[test]
fn marker_added_to_an_existing_entity_replicates_its_components() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    let e = h.spawn(Health { hp: 33 });
    h.steps(3);
    assert_eq!(h.client_entities(0), 0);
    h.server.world_mut().entity_mut(e).insert(Replicate);
    h.steps(2);
    assert_eq!(h.client_get::<Health>(0, e), Some(Health { hp: 33 }));
}

#[test]
fn references_map_to_client_entities() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    let leader = h.spawn((Replicate, Health { hp: 77 }));
    h.step();
    let leader_handle = h.handle(leader);
    let follower = h.spawn((
        Replicate,
        Follow {
            target: leader_handle,
        },
    ));
    h.steps(2);
    let follow = h.client_get::<Follow>(0, follower).unwrap();
    let map = h.clients[0].world().resource::<ClientEntityMap>();
    let target = map.entity(follow.target).expect("reference resolves");
    assert_eq!(Some(target), h.client_entity(0, leader));
    assert_eq!(
        h.clients[0].world().get::<Health>(target),
        Some(&Health { hp: 77 })
    );
    assert_eq!(map.handle(target), Some(leader_handle));
}

#[test]
fn reconnect_despawns_then_rebuilds_the_world() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    collect::<ConnectedToServer>(&mut h.clients[0]);
    collect::<DisconnectedFromServer>(&mut h.clients[0]);
    collect::<ClientConnected>(&mut h.server);
    collect::<ClientDisconnected>(&mut h.server);
    h.connect();
    for i in 0..3u8 {
        h.spawn((Replicate, Health { hp: i }));
    }
    h.steps(2);
    assert_eq!(h.client_entities(0), 3);
    let first_id = h.client_id(0);

    h.clients[0]
        .world_mut()
        .resource_mut::<NetClient>()
        .client_mut()
        .disconnect();
    h.steps(3);
    assert_eq!(h.client_entities(0), 0, "entities despawned on disconnect");
    assert_eq!(collected::<DisconnectedFromServer>(&h.clients[0]).len(), 1);
    let gone = collected::<ClientDisconnected>(&h.server);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].client, first_id);

    h.reconnect(0);
    h.connect();
    h.steps(2);
    assert_ne!(h.client_id(0), first_id);
    assert_eq!(h.client_entities(0), 3);
    assert!(h.diverges(0).is_none(), "{:?}", h.diverges(0));
    assert_eq!(collected::<ConnectedToServer>(&h.clients[0]).len(), 2);
    assert_eq!(collected::<ClientConnected>(&h.server).len(), 2);
}

#[test]
fn changed_components_are_announced() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    collect::<ServerObjectChanged>(&mut h.clients[0]);
    h.connect();
    let e = h.spawn((Replicate, Health { hp: 5 }, Position::default()));
    h.steps(2);
    assert!(collected::<ServerObjectChanged>(&h.clients[0]).is_empty());
    h.server.world_mut().get_mut::<Health>(e).unwrap().hp = 6;
    h.steps(2);
    let changes = collected::<ServerObjectChanged>(&h.clients[0]);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(Some(changes[0].entity), h.client_entity(0, e));
    assert!(changes[0].component.ends_with("Health"));
}

#[test]
fn removing_the_root_component_keeps_the_others() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    let owner = h.client_id(0);
    // Health reaches the core first: it is the root.
    let e = h.spawn((Replicate, NetOwner(owner), Health { hp: 9 }));
    h.step();
    h.server
        .world_mut()
        .entity_mut(e)
        .insert(Position { x: 1.0, y: 1.0 });
    h.steps(2);
    let first_root = h.handle(e);
    assert_eq!(
        h.server
            .world()
            .resource::<ServerEntityMap>()
            .component_handle::<Health>(e),
        Some(first_root)
    );

    h.server.world_mut().entity_mut(e).remove::<Health>();
    h.steps(3);
    assert_ne!(h.handle(e), first_root, "a new root");
    assert_eq!(h.client_get::<Health>(0, e), None);
    assert_eq!(
        h.client_get::<Position>(0, e),
        Some(Position { x: 1.0, y: 1.0 })
    );
    assert_eq!(h.client_entities(0), 1);
    let ce = h.client_entity(0, e).unwrap();
    assert!(
        h.clients[0].world().get::<Owned>(ce).is_some(),
        "the owner follows the new root"
    );
    // Later changes still arrive.
    h.server.world_mut().get_mut::<Position>(e).unwrap().y = 5.0;
    h.steps(2);
    assert_eq!(h.client_get::<Position>(0, e).unwrap().y, 5.0);

    // The last replicated component goes: so does the entity; it comes back with one.
    h.server.world_mut().entity_mut(e).remove::<Position>();
    h.steps(2);
    assert_eq!(h.client_entities(0), 0);
    assert!(h.server.world().resource::<ServerEntityMap>().is_empty());
    h.server.world_mut().entity_mut(e).insert(Health { hp: 3 });
    h.steps(2);
    assert_eq!(h.client_get::<Health>(0, e), Some(Health { hp: 3 }));
    assert_eq!(h.client_entities(0), 1);
}

#[test]
fn notify_hooks_run_on_the_client_component() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.connect();
    let e = h.spawn((Replicate, Door::default()));
    h.steps(2);
    for _ in 0..3 {
        let mut door = h.server.world_mut().get_mut::<Door>(e).unwrap();
        door.open = !door.open;
        h.steps(2);
    }
    let door = h.client_get::<Door>(0, e).unwrap();
    assert!(door.open);
    // Three applied changes, three hook calls; the server never counts (skip).
    assert_eq!(door.toggles, 3);
    assert_eq!(h.server_get::<Door>(e).unwrap().toggles, 0);
}
