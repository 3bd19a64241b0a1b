//! Inputs stamped with the server tick they are for, sent redundantly, through the
//! facade over the seeded link simulator (simulated time).

mod time_sim;

use replicate::bits::{BitReader, BitWriter};
use replicate::time::{NetInput, TimeConfig};
use replicate::{ClientConfig, ServerConfig};
use time_sim::*;

/// An input that names its own tick, so the server can tell a repeat from the real one.
#[derive(Debug, Clone, PartialEq, Default)]
struct Cmd {
    tick: u32,
    buttons: u8,
}

impl NetInput for Cmd {
    fn write(&self, w: &mut BitWriter) {
        w.write_bits(u64::from(self.tick), 32);
        w.write_bits(u64::from(self.buttons), 8);
    }
    fn read(r: &mut BitReader) -> Option<Self> {
        let c = Cmd {
            tick: r.read_bits(32) as u32,
            buttons: r.read_bits(8) as u8,
        };
        r.check().ok().map(|_| c)
    }
}

struct Availability {
    on_time: u64,
    missing: u64,
    repeated_correctly: bool,
}

/// The client sends one input per tick for `seconds`; the server takes each tick's
/// input at its tick. `outage` cuts the link for a while.
fn run(
    redundancy: u8,
    loss: f32,
    seed: u64,
    seconds: f64,
    outage: Option<(f64, f64)>,
) -> Availability {
    let time = TimeConfig {
        input_redundancy: redundancy,
        ..TimeConfig::default()
    };
    let mut sim = TimeSim::with_configs(
        rtt_100_jitter_30(loss),
        seed,
        ServerConfig {
            time: time.clone(),
            ..ServerConfig::default()
        },
        ClientConfig {
            time,
            ..ClientConfig::default()
        },
    );
    let mut next: Option<u32> = None;
    let mut first: Option<u32> = None;
    let mut a = Availability {
        on_time: 0,
        missing: 0,
        repeated_correctly: true,
    };
    let mut last_real: Option<Cmd> = None;
    while sim.now.as_secs_f64() < seconds {
        let t = sim.now.as_secs_f64();
        if let Some((from, to)) = outage {
            let c = if (from..to).contains(&t) {
                rtt_100_jitter_30(1.0)
            } else {
                rtt_100_jitter_30(loss)
            };
            sim.network.set_conditioner(c);
        }
        match sim.advance() {
            Due::Server => {
                let tick = sim.server.current_tick();
                if let (Some(id), Some(first)) = (sim.client_id(), first)
                    && tick >= first + 30
                {
                    match sim.server.take_input::<Cmd>(id, tick) {
                        Some(c) if c.tick == tick => {
                            a.on_time += 1;
                            last_real = Some(c);
                        }
                        other => {
                            a.missing += 1;
                            // Policy: the last input taken is repeated.
                            if other != last_real {
                                a.repeated_correctly = false;
                            }
                        }
                    }
                }
                sim.tick_server();
            }
            Due::Client => {
                sim.tick_client();
                let _ = sim.client.events();
                if let Some(target) = sim.client.input_tick() {
                    let n = next.get_or_insert(target);
                    first.get_or_insert(*n);
                    while *n <= target {
                        assert!(sim.client.send_input(
                            *n,
                            &Cmd {
                                tick: *n,
                                buttons: (*n % 7) as u8
                            }
                        ));
                        *n += 1;
                    }
                }
            }
        }
    }
    if let Some(id) = sim.client_id() {
        let stats = sim.server.input_stats(id).unwrap();
        println!("input buffer: {stats:?}");
        assert!(
            stats.mean_lead_ticks >= 1.0,
            "inputs arrive ahead of their tick"
        );
    }
    a
}

#[test]
fn redundancy_3_at_10_percent_loss_delivers_999_per_mille_of_inputs_by_their_tick() {
    for seed in [21u64, 22, 23] {
        let a = run(3, 0.10, seed, 60.0, None);
        let total = a.on_time + a.missing;
        let ratio = a.on_time as f64 / total as f64;
        println!(
            "seed {seed}: {} of {total} inputs on time ({:.4} %)",
            a.on_time,
            ratio * 100.0
        );
        assert!(total > 1700);
        assert!(ratio >= 0.999, "seed {seed}: {ratio}");
    }
}

#[test]
fn without_redundancy_loss_shows_and_missing_inputs_repeat_the_last_one() {
    let a = run(1, 0.10, 24, 30.0, None);
    let total = a.on_time + a.missing;
    // One copy per packet, but a packet per client frame (two per tick): some are lost.
    assert!(a.missing > 0, "{} of {total}", a.on_time);
    assert!(a.repeated_correctly);
    // An outage of 400 ms: the server repeats the last input, then recovers.
    let a = run(3, 0.0, 25, 10.0, Some((5.0, 5.4)));
    assert!(a.missing >= 8, "{}", a.missing);
    assert!(a.repeated_correctly);
    assert!(a.on_time > 200);
}
