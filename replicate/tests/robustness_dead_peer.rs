//! Dead-peer detection after connect: a client whose replication stops (its transport
//! stays connected, as netcode.io keep-alives keep a UDP connection open) is closed
//! with `DisconnectReason::AckTimedOut` within the configured ack timeout, both ends
//! report that reason, and the server's memory for it returns to its pre-connect
//! level (a counting global allocator measures the live heap of this test binary).
//! The pending-state cap closes a client that holds more unacknowledged state than
//! allowed, before the ack timeout.

mod common;

use common::robust_suite::*;
use replicate::internals::link::LinkConditioner;
use replicate::{ClientConfig, ClientEvent, DisconnectReason, ServerConfig, ServerEvent};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

/// Live heap bytes of the whole test binary.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The tests measure the heap of the whole binary: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const OBJECTS: usize = 200;
/// Objects destroyed and spawned again per tick (the world's size stays constant).
const CHURN: usize = 10;

/// The world: `OBJECTS` movers, `CHURN` of them replaced every tick.
struct World {
    movers: Vec<replicate::NetRefHandle>,
    tick: u64,
    churn: bool,
}

impl World {
    fn new(server: &mut MemServer) -> Self {
        let movers = (0..OBJECTS)
            .map(|i| {
                server
                    .spawn(Mover {
                        label: i as u32,
                        ..Mover::default()
                    })
                    .unwrap()
                    .raw()
            })
            .collect();
        Self {
            movers,
            tick: 0,
            churn: true,
        }
    }

    fn step(&mut self, server: &mut MemServer) {
        self.tick += 1;
        for k in 0..if self.churn { CHURN } else { 0 } {
            let i = (self.tick as usize * CHURN + k) % OBJECTS;
            server.destroy(self.movers[i]).unwrap();
            self.movers[i] = server
                .spawn(Mover {
                    label: i as u32,
                    ..Mover::default()
                })
                .unwrap()
                .raw();
        }
        if self.churn {
            animate(server, &self.movers, self.tick);
        }
    }
}

/// One connect → converge → stop acking → closed cycle. Returns (peak live bytes
/// while the client was stalled, live bytes once the client is gone, when the server
/// closed it, the client's reason).
fn stall_cycle(
    server: &mut MemServer,
    network: &replicate::transport::memory::MemoryNetwork,
    world: &mut World,
    now: &mut Duration,
) -> (isize, isize, Duration, Option<DisconnectReason>) {
    let (mut client, mute) = client(network, ClientConfig::default());
    // The world holds still until the client is in step, then churns again.
    world.churn = false;
    let mut server_reason = None;
    let mut stalled_at = None;
    let mut closed_at = Duration::ZERO;
    let mut peak = 0isize;
    for _ in 0..2000 {
        *now += TICK;
        world.step(server);
        server.tick(*now).unwrap();
        for e in server.events() {
            if let ServerEvent::ClientDisconnected { reason, .. } = e {
                server_reason = Some(reason);
                closed_at = *now;
            }
        }
        client.tick(*now).unwrap();
        let _ = client.events();
        if stalled_at.is_none() && converged(server, &client) {
            // Connected and in step: from now on the client acks nothing.
            mute.store(true, std::sync::atomic::Ordering::Relaxed);
            stalled_at = Some(*now);
            world.churn = true;
        }
        if stalled_at.is_some() {
            peak = peak.max(live());
        }
        if server_reason.is_some() && client.is_disconnected() {
            break;
        }
    }
    let stalled_at = stalled_at.expect("the client converged before it stalled");
    assert_eq!(server_reason, Some(DisconnectReason::AckTimedOut));
    let client_reason = client.disconnect_reason();
    drop(client);
    // Past the close linger, the transport connection is gone too.
    for _ in 0..40 {
        *now += TICK;
        world.step(server);
        server.tick(*now).unwrap();
        let _ = server.events();
    }
    assert_eq!(server.client_count(), 0);
    (peak, live(), closed_at - stalled_at, client_reason)
}

#[test]
fn a_client_that_stops_acking_is_closed_and_its_memory_released() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ack_timeout = Duration::from_secs(2);
    let (mut server, network) = server(
        LinkConditioner::lan(),
        7,
        ServerConfig {
            ack_timeout,
            // Only the ack timeout may close this client.
            max_pending_bytes: usize::MAX,
            ..ServerConfig::default()
        },
    );
    let mut world = World::new(&mut server);
    let mut now = Duration::ZERO;
    // Warm up without clients: the object table and the churn reach their steady state.
    for _ in 0..100 {
        now += TICK;
        world.step(&mut server);
        server.tick(now).unwrap();
    }
    let start = live();

    // A first client that stalls grows the tables to their high-water mark (the object
    // table and per-object arrays keep the capacity the retained objects needed).
    let (_, high_water, took, client_reason) =
        stall_cycle(&mut server, &network, &mut world, &mut now);
    assert!(
        took >= ack_timeout && took <= ack_timeout + Duration::from_millis(300),
        "closed after {took:?}"
    );
    assert_eq!(client_reason, Some(DisconnectReason::AckTimedOut));

    for cycle in 2..=3 {
        let before = live();
        let (peak, after, took, client_reason) =
            stall_cycle(&mut server, &network, &mut world, &mut now);
        // Closed within the timeout (plus a tick and the last ack's round trip).
        assert!(took >= ack_timeout, "closed after {took:?}");
        assert!(
            took <= ack_timeout + Duration::from_millis(300),
            "closed after {took:?}"
        );
        // The client learnt the same reason from the server's close frame (or found it
        // out itself: its own packets went unacknowledged too).
        assert_eq!(client_reason, Some(DisconnectReason::AckTimedOut));
        // While stalled, the server kept state for it (objects destroyed meanwhile wait
        // for its destroy confirmation): the peak is well above the baseline...
        let grew = peak - before;
        assert!(
            grew > 256 * 1024,
            "peak only {grew} bytes above the baseline"
        );
        // ...and all of it is released: back to the pre-connect level.
        let left = after - before;
        eprintln!(
            "cycle {cycle}: live heap before connect {before} B, stalled peak +{grew} B, after close {left:+} B \
             (first cycle's high-water capacity: {} B); closed {took:?} after the stall",
            high_water - start
        );
        assert!(left.abs() < 8 * 1024, "{left} bytes not released");
    }
}

#[test]
fn a_client_over_the_pending_state_cap_is_closed_before_the_ack_timeout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cap = 256 * 1024;
    let (mut server, network) = server(
        LinkConditioner::lan(),
        8,
        ServerConfig {
            ack_timeout: Duration::from_secs(60),
            max_pending_bytes: cap,
            ..ServerConfig::default()
        },
    );
    let mut world = World::new(&mut server);
    world.churn = false;
    let (mut client, mute) = client(
        &network,
        ClientConfig {
            ack_timeout: Duration::from_secs(60),
            ..ClientConfig::default()
        },
    );
    let mut now = Duration::ZERO;
    let mut stalled_at = None;
    let mut closed = None;
    let mut max_pending = 0;
    for _ in 0..3000 {
        now += TICK;
        world.step(&mut server);
        server.tick(now).unwrap();
        if let Some(conn) = server
            .clients()
            .next()
            .and_then(|c| server.connection_id(c))
        {
            max_pending = max_pending.max(server.replication().pending_bytes(conn));
        }
        for e in server.events() {
            if let ServerEvent::ClientDisconnected { reason, .. } = e {
                closed = Some((reason, now));
            }
        }
        client.tick(now).unwrap();
        let _ = client.events();
        if stalled_at.is_none() && converged(&server, &client) {
            mute.store(true, std::sync::atomic::Ordering::Relaxed);
            stalled_at = Some(now);
            world.churn = true;
        }
        if closed.is_some() && client.is_disconnected() {
            break;
        }
    }
    let (reason, at) = closed.expect("the client was closed");
    assert_eq!(reason, DisconnectReason::PendingStateOverflow);
    assert!(at - stalled_at.unwrap() < Duration::from_secs(30));
    assert!(
        max_pending <= cap + 64 * 1024,
        "pending reached {max_pending}"
    );
    assert_eq!(
        client.disconnect_reason(),
        Some(DisconnectReason::PendingStateOverflow)
    );
    assert!(
        client
            .events()
            .all(|e| !matches!(e, ClientEvent::Connected))
    );
}

#[test]
fn a_client_whose_server_stops_replicating_closes_itself() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut server, network) = server(LinkConditioner::lan(), 9, ServerConfig::default());
    let mut world = World::new(&mut server);
    world.churn = false;
    let ack_timeout = Duration::from_millis(1500);
    let (mut client, _) = client(
        &network,
        ClientConfig {
            ack_timeout,
            ..ClientConfig::default()
        },
    );
    let mut now = Duration::ZERO;
    while !converged(&server, &client) {
        now += TICK;
        server.tick(now).unwrap();
        client.tick(now).unwrap();
        assert!(now < Duration::from_secs(10));
    }
    // The server process hangs (no more ticks); the transport stays up.
    let hung_at = now;
    let mut closed_at = None;
    for _ in 0..200 {
        now += TICK;
        client.tick(now).unwrap();
        for e in client.events() {
            if let ClientEvent::Disconnected { reason } = e {
                assert_eq!(reason, DisconnectReason::AckTimedOut);
                closed_at = Some(now);
            }
        }
        if closed_at.is_some() {
            break;
        }
    }
    let took = closed_at.expect("the client closed") - hung_at;
    assert!(
        took >= ack_timeout && took <= ack_timeout + Duration::from_millis(400),
        "{took:?}"
    );
    // An idle but live server keeps the client connected (keep-alives): no false alarm.
    let (mut server, network) =
        common::robust_suite::server(LinkConditioner::lan(), 10, ServerConfig::default());
    let (mut client, _) = common::robust_suite::client(
        &network,
        ClientConfig {
            ack_timeout,
            ..ClientConfig::default()
        },
    );
    for _ in 0..600 {
        now += TICK;
        server.tick(now).unwrap();
        client.tick(now).unwrap();
    }
    assert!(client.is_connected());
    assert_eq!(server.client_count(), 1);
}
