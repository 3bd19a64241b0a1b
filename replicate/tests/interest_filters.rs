//! Scope filters through the replication server: the grid filter's enter / leave /
//! re-enter transitions (by the object moving, by the view moving, and with positions
//! from a location function), objects spawned out of scope, owner-only objects,
//! allow and deny lists, groups and a user filter. Leaving scope must destroy the
//! object on the client (a destroy on the wire); re-entering must create it again with
//! its current state.

mod common;

use common::interest_suite::*;
use glam::Vec3;
use replicate::NetRefHandle;
use replicate::Replicated;
use replicate::interest::{
    FilterKind, GridFilter, GridFilterConfig, InterestConfig, ObjectFilter, ObjectFilterInfo,
    ViewInfo,
};

fn destroyed(sent: &[WirePacket], h: NetRefHandle) -> bool {
    sent.iter().any(|p| p.destroys.contains(&h))
}

fn created(sent: &[WirePacket], h: NetRefHandle) -> bool {
    sent.iter()
        .flat_map(|p| p.batches.iter())
        .any(|b| b.handle == h && b.creation)
}

fn mentioned(sent: &[WirePacket], h: NetRefHandle) -> bool {
    sent.iter()
        .any(|p| p.destroys.contains(&h) || p.batches.iter().any(|b| b.handle == h))
}

#[test]
fn grid_filter_enter_leave_reenter_with_current_state() {
    let mut net = Net::new(1);
    let h = net
        .server
        .objects_mut()
        .spawn(Rock {
            hp: 1,
            ..Default::default()
        })
        .unwrap();
    net.server
        .set_object_filter(h, Some(FilterKind::Spatial))
        .unwrap();
    net.server.set_object_position(h, Vec3::ZERO).unwrap();
    net.server.set_view_position(0, Vec3::new(100.0, 0.0, 0.0));
    let sent = net.tick();
    assert!(created(&sent[0], h));
    assert_eq!(net.client(0).get::<Rock>(h).unwrap().hp, 1);

    // The object moves beyond the cull distance (50 000 by default): destroyed there.
    net.server.objects_mut().get_mut::<Rock>(h).unwrap().hp = 2;
    net.server
        .set_object_position(h, Vec3::new(120_000.0, 0.0, 0.0))
        .unwrap();
    let sent = net.tick();
    assert!(destroyed(&sent[0], h));
    assert!(!net.client(0).contains(h));
    // Out of scope it costs nothing on the wire, whatever changes.
    for v in 3..8 {
        net.server.objects_mut().get_mut::<Rock>(h).unwrap().hp = v;
        let sent = net.tick();
        assert!(!mentioned(&sent[0], h));
    }
    // Back in range: created again with the current state.
    net.server
        .set_object_position(h, Vec3::new(30_000.0, 0.0, 0.0))
        .unwrap();
    let sent = net.tick();
    assert!(created(&sent[0], h));
    assert_eq!(net.client(0).get::<Rock>(h).unwrap().hp, 7);

    // The view moves away, then back: the same transitions.
    net.server
        .set_view_position(0, Vec3::new(0.0, -200_000.0, 0.0));
    let sent = net.tick();
    assert!(destroyed(&sent[0], h));
    assert!(!net.client(0).contains(h));
    net.server.objects_mut().get_mut::<Rock>(h).unwrap().payload = 99;
    net.tick();
    net.server
        .set_view_position(0, Vec3::new(29_000.0, 4000.0, 0.0));
    let sent = net.tick();
    assert!(created(&sent[0], h));
    let rock = net.client(0).get::<Rock>(h).unwrap();
    assert_eq!((rock.hp, rock.payload), (7, 99));
}

#[test]
fn grid_filter_as_default_with_positions_from_a_location_function() {
    let mut net = Net::new(2);
    net.server.set_interest_config(InterestConfig {
        default_filter: FilterKind::Spatial,
        ..InterestConfig::default()
    });
    net.server
        .set_location_fn::<<Rock as Replicated>::State>(|s| {
            Vec3::new(s.x as i32 as f32, s.y as i32 as f32, 0.0)
        });
    net.server.set_view_position(0, Vec3::ZERO);
    net.server
        .set_view_position(1, Vec3::new(1_000_000.0, 0.0, 0.0));
    // Spawned out of client 1's range: never created there.
    let h = net
        .server
        .objects_mut()
        .spawn(Rock {
            x: 10,
            ..Default::default()
        })
        .unwrap();
    for _ in 0..3 {
        net.tick();
    }
    assert!(net.client(0).contains(h));
    assert!(!net.client(1).contains(h));
    assert!(
        net.clients[1]
            .wire
            .iter()
            .all(|p| !mentioned(std::slice::from_ref(p), h))
    );
    // The object walks (its replicated x) over to client 1.
    net.server.objects_mut().get_mut::<Rock>(h).unwrap().x = 990_000;
    let sent = net.tick();
    assert!(destroyed(&sent[0], h));
    assert!(created(&sent[1], h));
    assert_eq!(net.client(1).get::<Rock>(h).unwrap().x, 990_000);
    assert!(!net.client(0).contains(h));
    // A connection added later is evaluated in full at its first tick.
    let near = net.server.objects_mut().spawn(Rock::default()).unwrap();
    net.tick();
    let late = net.add_client();
    net.server
        .set_view_position(net.clients[late].conn, Vec3::new(0.0, 0.0, 0.0));
    let sent = net.tick();
    assert!(created(&sent[late], near));
    assert!(!mentioned(&sent[late], h));
    assert!(!net.client(late).contains(h));
}

struct EvenConnections;
impl ObjectFilter for EvenConnections {
    fn is_relevant(&self, _object: &ObjectFilterInfo, view: &ViewInfo) -> bool {
        view.connection % 2 == 0
    }
}

#[test]
fn owner_only_allow_deny_groups_and_user_filters() {
    let mut net = Net::new(2);
    let (a, b) = (net.clients[0].conn, net.clients[1].conn);
    let spawn = |net: &mut Net| net.server.objects_mut().spawn(Rock::default()).unwrap();
    let owned = spawn(&mut net);
    net.server
        .set_object_filter(owned, Some(FilterKind::OwnerOnly))
        .unwrap();
    net.server.set_owner(owned, Some(a), true).unwrap();
    let denied = spawn(&mut net);
    net.server.set_object_denied(a, denied, true).unwrap();
    let far = spawn(&mut net);
    net.server
        .set_object_filter(far, Some(FilterKind::Spatial))
        .unwrap();
    net.server
        .set_object_position(far, Vec3::new(1e6, 0.0, 0.0))
        .unwrap();
    net.server.set_object_allowed(b, far, true).unwrap();
    let grouped = spawn(&mut net);
    net.server.set_object_groups(grouped, vec![7]).unwrap();
    net.server.set_group_subscription(a, 7, true);
    let kind = net.server.add_object_filter(Box::new(EvenConnections));
    let even = spawn(&mut net);
    net.server.set_object_filter(even, Some(kind)).unwrap();
    net.tick();
    let has = |net: &Net, c: usize, h| net.client(c).contains(h);
    assert!(has(&net, 0, owned) && !has(&net, 1, owned));
    assert!(!has(&net, 0, denied) && has(&net, 1, denied));
    assert!(!has(&net, 0, far) && has(&net, 1, far));
    assert!(has(&net, 0, grouped) && !has(&net, 1, grouped));
    assert_eq!(
        (has(&net, 0, even), has(&net, 1, even)),
        (a % 2 == 0, b % 2 == 0)
    );

    // Every rule changes at once; the next tick follows.
    net.server.set_owner(owned, Some(b), true).unwrap();
    net.server.set_object_denied(a, denied, false).unwrap();
    net.server.set_object_denied(b, denied, true).unwrap();
    net.server.set_object_allowed(b, far, false).unwrap();
    net.server.set_group_subscription(a, 7, false);
    net.server.set_group_subscription(b, 7, true);
    net.server
        .objects_mut()
        .get_mut::<Rock>(grouped)
        .unwrap()
        .hp = 42;
    net.tick();
    assert!(!has(&net, 0, owned) && has(&net, 1, owned));
    assert!(has(&net, 0, denied) && !has(&net, 1, denied));
    assert!(!has(&net, 1, far));
    assert!(!has(&net, 0, grouped) && has(&net, 1, grouped));
    assert_eq!(net.client(1).get::<Rock>(grouped).unwrap().hp, 42);
    // A deny wins over an allow.
    net.server.set_object_allowed(a, denied, true).unwrap();
    net.server.set_object_denied(a, denied, true).unwrap();
    net.tick();
    assert!(!has(&net, 0, denied));
    // Destroyed objects leave no trace in the interest state: the index is reused by
    // a new object that starts always relevant.
    net.server.objects_mut().destroy(denied).unwrap();
    net.tick();
    net.tick();
    let fresh = spawn(&mut net);
    net.tick();
    assert!(has(&net, 0, fresh) && has(&net, 1, fresh));
}

#[test]
fn grid_scope_follows_moving_objects_and_views_as_a_full_evaluation_would() {
    // Scope is evaluated incrementally (objects that changed cell, cells that entered
    // or left a moving view's range); every tick, each client must hold exactly the
    // objects a grid of its own says are visible from its view.
    let grid_config = GridFilterConfig {
        cell_size: 1000.0,
        max_cull_distance: 4000.0,
    };
    let mut net = Net::new(3);
    net.server.set_interest_config(InterestConfig {
        default_filter: FilterKind::Spatial,
        grid: grid_config,
        ..InterestConfig::default()
    });
    let mut rng = 0x5EED_u64;
    let mut next = |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    };
    let mut model = GridFilter::new(grid_config);
    let mut objects = Vec::new();
    for i in 0..120u32 {
        let h = net.server.objects_mut().spawn(Rock::default()).unwrap();
        let p = Vec3::new(next(20_000) as f32, next(20_000) as f32, 0.0);
        net.server.set_object_position(h, p).unwrap();
        model.update_object(i, p);
        objects.push((h, p));
    }
    let mut views: Vec<Vec3> = (0..3)
        .map(|_| Vec3::new(next(20_000) as f32, next(20_000) as f32, 0.0))
        .collect();
    for tick in 0..80 {
        // Some objects walk (often across a cell), some views move (or jump).
        for (i, (h, p)) in objects.iter_mut().enumerate() {
            if next(4) == 0 {
                *p += Vec3::new(next(1500) as f32 - 750.0, next(1500) as f32 - 750.0, 0.0);
                net.server.set_object_position(*h, *p).unwrap();
                model.update_object(i as u32, *p);
            }
        }
        for (c, v) in views.iter_mut().enumerate() {
            match next(6) {
                0 => *v = Vec3::new(next(20_000) as f32, next(20_000) as f32, 0.0),
                1 | 2 => *v += Vec3::new(next(900) as f32 - 450.0, next(900) as f32 - 450.0, 0.0),
                _ => {}
            }
            net.server.set_view_position(net.clients[c].conn, *v);
        }
        net.tick();
        for (c, &v) in views.iter().enumerate() {
            for (i, &(h, _)) in objects.iter().enumerate() {
                assert_eq!(
                    net.client(c).contains(h),
                    model.is_visible(i as u32, v),
                    "tick {tick}, client {c}, object {i}"
                );
            }
        }
    }
}
