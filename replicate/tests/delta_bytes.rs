//! Delta compression pays off on a slowly changing world: the same world replicated
//! with delta compression on and off; fewer bytes with it on, and the client equals
//! the server either way.

mod common;

use common::core_suite::*;
use common::*;
use replicate::NetRefHandle;
use replicate::internals::replication::{DeltaSettings, ReplicationConfig};

fn run(delta: bool) -> usize {
    let mut m = Manual::with_config(ReplicationConfig {
        delta: DeltaSettings {
            enabled: delta,
            ..DeltaSettings::default()
        },
        ..ReplicationConfig::default()
    });
    let mut rng = Rng(11);
    let handles: Vec<NetRefHandle> = (0..40)
        .map(|i| {
            m.server
                .objects_mut()
                .spawn(Big {
                    a: 1_000_000 + i,
                    b: rng.next_u64() >> 8,
                    c: rng.next_u64() >> 8,
                    d: 77,
                    e: 0,
                    f: rng.next_u64(),
                    ..Default::default()
                })
                .unwrap()
        })
        .collect();
    let mut bytes = 0;
    for t in 0..200 {
        for (k, &h) in handles.iter().enumerate() {
            if (k + t) % 3 == 0 {
                let b = m.server.objects_mut().get_mut::<Big>(h).unwrap();
                b.a += 1;
                b.b = b.b.wrapping_add(rng.below(16));
                if rng.chance(0.05) {
                    b.e += 1;
                }
            }
        }
        let (seq, packet) = m.tick_and_write();
        bytes += packet.len();
        m.deliver_to_client(&packet);
        m.ack(
            seq,
            replicate::internals::connection::DeliveryStatus::Delivered,
        );
    }
    for &h in &handles {
        let s = m.server.objects().state(h).unwrap();
        assert!(m.client.state(h).unwrap().eq_dyn(s), "delta {delta}");
    }
    bytes
}

#[test]
fn delta_on_sends_fewer_bytes_for_a_slowly_changing_world() {
    let off = run(false);
    let on = run(true);
    eprintln!("bytes over 200 ticks: delta off {off}, on {on}");
    assert!(on < off, "delta on {on} >= off {off}");
}
