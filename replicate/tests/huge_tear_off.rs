//! Tearing off a huge object: whether its creation or an update is still in transit, or
//! only its final state is too large for a packet, the client ends up keeping the object
//! with the server's final state (a `TornOff` event, never `Destroyed`), and the server
//! stops replicating it.

mod common;

use common::Link;
use replicate::NetRefHandle;
use replicate::Replicated;
use replicate::internals::replication::{
    ReplicatedObjectState, ReplicationConfig, ReplicationEvent,
};

/// An object whose state may exceed a packet by far.
#[derive(Replicated, Debug, Clone, Default, PartialEq)]
struct Archive {
    id: u32,
    #[net(max_len = 65535)]
    data: Vec<u64>,
}

/// `words` deterministic words (8 bytes each).
fn data(seed: u64, words: usize) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..words)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect()
}

/// 20 KB: about 17 packets of 1200 bytes.
const HUGE: usize = 2500;

fn set(link: &mut Link, h: NetRefHandle, value: &Archive) {
    *link.server.objects_mut().get_mut::<Archive>(h).unwrap() = value.clone();
}

/// Steps until `done`, collecting the client's events.
fn run(link: &mut Link, events: &mut Vec<ReplicationEvent>, done: impl Fn(&Link) -> bool) {
    for _ in 0..400 {
        link.step();
        events.extend(link.client.drain_events());
        if done(link) {
            return;
        }
    }
    panic!("not done after 400 ticks");
}

/// Tears `h` off (after setting `last`) and checks the client keeps it with that state.
fn tear_off_and_check(link: &mut Link, h: NetRefHandle, last: &Archive) {
    set(link, h, last);
    link.server.objects_mut().tear_off(h).unwrap();
    let mut events = Vec::new();
    run(link, &mut events, |l| {
        l.client.world().torn_off(h).is_some()
    });
    // A few more ticks: the server side settles, nothing else arrives.
    for _ in 0..30 {
        link.step();
        events.extend(link.client.drain_events());
    }
    let ours: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(e, ReplicationEvent::TornOff { handle }
                | ReplicationEvent::Destroyed { handle } if *handle == h)
        })
        .collect();
    assert_eq!(
        ours,
        vec![&ReplicationEvent::TornOff { handle: h }],
        "{events:?}"
    );
    assert!(!link.client.contains(h));
    let kept = link.client.take_torn_off(h).expect("torn off");
    let kept = kept.as_any().downcast_ref::<Archive>().expect("an Archive");
    assert_eq!(kept, last, "the final state, bit for bit");
    let writer = link.server.writer(link.conn).unwrap();
    if let Some(i) = link.server.objects().index_of(h) {
        assert_eq!(writer.object_state(i), ReplicatedObjectState::Invalid);
    }
}

fn spawn(link: &mut Link, value: &Archive) -> NetRefHandle {
    link.server.objects_mut().spawn(value.clone()).unwrap()
}

#[test]
fn torn_off_during_a_huge_update() {
    let mut link = Link::new(ReplicationConfig::default());
    let first = Archive {
        id: 1,
        data: data(1, HUGE),
    };
    let h = spawn(&mut link, &first);
    let mut events = Vec::new();
    run(&mut link, &mut events, |l| {
        l.client.get::<Archive>(h) == Some(&first)
    });
    link.step();
    // A huge update starts and is under way...
    let second = Archive {
        id: 2,
        data: data(2, HUGE),
    };
    set(&mut link, h, &second);
    link.step();
    link.step();
    assert_ne!(
        link.client.get::<Archive>(h),
        Some(&second),
        "still in transit"
    );
    // ...when the object is torn off with yet another state.
    let last = Archive {
        id: 3,
        data: data(3, HUGE),
    };
    tear_off_and_check(&mut link, h, &last);
}

#[test]
fn torn_off_while_its_huge_creation_is_in_transit() {
    let mut link = Link::new(ReplicationConfig::default());
    let first = Archive {
        id: 1,
        data: data(4, HUGE),
    };
    let h = spawn(&mut link, &first);
    link.step();
    link.step();
    assert!(!link.client.contains(h), "the creation is still in transit");
    tear_off_and_check(&mut link, h, &first);
}

#[test]
fn torn_off_with_a_final_state_too_large_for_a_packet() {
    let mut link = Link::new(ReplicationConfig::default());
    let small = Archive {
        id: 1,
        data: vec![7; 4],
    };
    let h = spawn(&mut link, &small);
    link.step();
    link.step();
    assert_eq!(link.client.get::<Archive>(h), Some(&small));
    let last = Archive {
        id: 9,
        data: data(5, HUGE),
    };
    tear_off_and_check(&mut link, h, &last);
}
