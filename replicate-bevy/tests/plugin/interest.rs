//! Interest through components: owner (owner-only members, the `Owned` marker),
//! visibility lists, groups and the grid.

use crate::common::*;
use replicate::interest::FilterKind;
use replicate::transport::LinkConditioner;
use replicate_bevy::*;

#[test]
fn owner_only_member_reaches_the_owner_only() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let owner = h.client_id(0);
    let e = h.spawn((
        Replicate,
        NetOwner(owner),
        Secret {
            code: 1234,
            public: 5,
        },
    ));
    h.steps(3);
    assert_eq!(
        h.client_get::<Secret>(0, e),
        Some(Secret {
            code: 1234,
            public: 5
        })
    );
    // The other client has the component, without the owner-only member.
    assert_eq!(
        h.client_get::<Secret>(1, e),
        Some(Secret { code: 0, public: 5 })
    );

    // Ownership moves: the new owner receives the member's current value.
    h.server.world_mut().get_mut::<NetOwner>(e).unwrap().0 = h.client_id(1);
    h.steps(3);
    assert_eq!(h.client_get::<Secret>(1, e).unwrap().code, 1234);
}

#[test]
fn owned_marker_follows_the_owner() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let e = h.spawn((Replicate, NetOwner(h.client_id(0)), Health { hp: 1 }));
    let free = h.spawn((Replicate, Health { hp: 2 }));
    h.steps(3);
    let owned = |h: &Harness, i: usize, e| {
        let ce = h.client_entity(i, e).unwrap();
        h.clients[i].world().get::<Owned>(ce).is_some()
    };
    assert!(owned(&h, 0, e));
    assert!(!owned(&h, 1, e));
    assert!(!owned(&h, 0, free) && !owned(&h, 1, free));

    h.server.world_mut().get_mut::<NetOwner>(e).unwrap().0 = h.client_id(1);
    h.steps(3);
    assert!(!owned(&h, 0, e));
    assert!(owned(&h, 1, e));

    h.server.world_mut().entity_mut(e).remove::<NetOwner>();
    h.steps(3);
    assert!(!owned(&h, 0, e) && !owned(&h, 1, e));
}

#[test]
fn ownership_set_before_the_client_connects_applies_on_connect() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    // Memory client ids start at 1.
    let e = h.spawn((
        Replicate,
        NetOwner(1),
        Secret {
            code: 99,
            public: 1,
        },
    ));
    h.step();
    h.connect();
    h.steps(3);
    assert_eq!(h.client_id(0), 1);
    assert_eq!(h.client_get::<Secret>(0, e).unwrap().code, 99);
    let ce = h.client_entity(0, e).unwrap();
    assert!(h.clients[0].world().get::<Owned>(ce).is_some());
}

#[test]
fn visibility_list_on_and_off() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let only_first = VisibleTo(vec![h.client_id(0)]);
    let e = h.spawn((Replicate, only_first, Health { hp: 3 }));
    h.steps(3);
    assert!(h.client_entity(0, e).is_some());
    assert!(h.client_entity(1, e).is_none());

    let both = VisibleTo(vec![h.client_id(0), h.client_id(1)]);
    h.server.world_mut().entity_mut(e).insert(both);
    h.steps(3);
    assert_eq!(h.client_get::<Health>(1, e), Some(Health { hp: 3 }));

    h.server.world_mut().get_mut::<VisibleTo>(e).unwrap().0 = vec![h.client_id(1)];
    h.steps(3);
    assert!(
        h.client_entity(0, e).is_none(),
        "left the first client's list"
    );
    assert!(h.client_entity(1, e).is_some());
    assert_eq!(h.client_entities(0), 0);

    h.server.world_mut().entity_mut(e).remove::<VisibleTo>();
    h.steps(3);
    assert!(h.client_entity(0, e).is_some(), "no list: everyone");
}

#[test]
fn groups_need_a_subscription() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let e = h.spawn((Replicate, NetGroups(vec![7]), Health { hp: 4 }));
    h.steps(3);
    assert!(h.client_entity(0, e).is_none());
    assert!(h.client_entity(1, e).is_none());

    let first = h.client_id(0);
    assert!(
        h.server
            .world_mut()
            .resource_mut::<NetServer>()
            .set_group_subscription(first, 7, true)
    );
    h.steps(3);
    assert_eq!(h.client_get::<Health>(0, e), Some(Health { hp: 4 }));
    assert!(h.client_entity(1, e).is_none());

    h.server.world_mut().entity_mut(e).remove::<NetGroups>();
    h.steps(3);
    assert!(h.client_entity(1, e).is_some(), "no groups: everyone");
}

#[test]
fn grid_filter_follows_positions_and_views() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let far = glam::Vec3::new(200_000.0, 0.0, 0.0);
    let e = h.spawn((
        Replicate,
        NetFilter(FilterKind::Spatial),
        NetPosition(far),
        Health { hp: 8 },
    ));
    // Client 0's view is its camera entity (not replicated itself).
    let camera = h.spawn((ClientView(h.client_id(0)), NetPosition(glam::Vec3::ZERO)));
    let camera1 = h.spawn((ClientView(h.client_id(1)), NetPosition(glam::Vec3::ZERO)));
    h.steps(3);
    assert!(h.client_entity(0, e).is_none(), "beyond the cull distance");

    h.server
        .world_mut()
        .get_mut::<NetPosition>(camera)
        .unwrap()
        .0 = far;
    h.steps(3);
    assert_eq!(h.client_get::<Health>(0, e), Some(Health { hp: 8 }));
    assert!(h.client_entity(1, e).is_none());

    // The object moves to client 1's view: client 1 gains it, client 0 loses it.
    h.server.world_mut().get_mut::<NetPosition>(e).unwrap().0 = glam::Vec3::ZERO;
    h.steps(3);
    assert!(h.client_entity(1, e).is_some());
    assert!(h.client_entity(0, e).is_none());
    let _ = camera1;
}

#[test]
fn owner_only_filter_keeps_the_entity_to_its_owner() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let e = h.spawn((
        Replicate,
        NetOwner(h.client_id(1)),
        NetFilter(FilterKind::OwnerOnly),
        Health { hp: 12 },
    ));
    h.steps(3);
    assert!(h.client_entity(0, e).is_none());
    assert_eq!(h.client_get::<Health>(1, e), Some(Health { hp: 12 }));

    // The filter goes: everyone.
    h.server.world_mut().entity_mut(e).remove::<NetFilter>();
    h.steps(3);
    assert_eq!(h.client_get::<Health>(0, e), Some(Health { hp: 12 }));
}

#[test]
fn visibility_list_composes_with_groups() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let (c0, c1) = (h.client_id(0), h.client_id(1));
    let e = h.spawn((
        Replicate,
        VisibleTo(vec![c0, c1]),
        NetGroups(vec![5]),
        Health { hp: 6 },
    ));
    let mut net = h.server.world_mut().resource_mut::<NetServer>();
    net.set_group_subscription(c1, 5, true);
    h.steps(3);
    // Listed but not subscribed: not visible. Listed and subscribed: visible.
    assert!(h.client_entity(0, e).is_none());
    assert!(h.client_entity(1, e).is_some());

    // Subscribed but no longer listed: not visible either.
    let mut net = h.server.world_mut().resource_mut::<NetServer>();
    net.set_group_subscription(c0, 5, true);
    h.server.world_mut().get_mut::<VisibleTo>(e).unwrap().0 = vec![c0];
    h.steps(3);
    assert!(h.client_entity(0, e).is_some());
    assert!(h.client_entity(1, e).is_none());

    // The groups go: the list alone decides.
    h.server.world_mut().entity_mut(e).remove::<NetGroups>();
    h.steps(3);
    assert!(h.client_entity(0, e).is_some());
    assert!(h.client_entity(1, e).is_none());
}

#[test]
fn visibility_list_composes_with_the_grid() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.connect();
    let far = glam::Vec3::new(200_000.0, 0.0, 0.0);
    let e = h.spawn((
        Replicate,
        VisibleTo(vec![h.client_id(0)]),
        NetFilter(FilterKind::Spatial),
        NetPosition(far),
        Health { hp: 2 },
    ));
    let views = [
        h.spawn((ClientView(h.client_id(0)), NetPosition(glam::Vec3::ZERO))),
        h.spawn((ClientView(h.client_id(1)), NetPosition(glam::Vec3::ZERO))),
    ];
    h.steps(3);
    assert!(h.client_entity(0, e).is_none() && h.client_entity(1, e).is_none());
    // Both views come near: only the listed client gets it.
    for v in views {
        h.server.world_mut().get_mut::<NetPosition>(v).unwrap().0 = far;
    }
    h.steps(3);
    assert!(h.client_entity(0, e).is_some());
    assert!(h.client_entity(1, e).is_none(), "not on the list");
}
