//! Lag compensation: the client says, in its input, the server time it was looking at
//! (its interpolation time); the server rewinds its state history to it and finds what
//! the client saw. Through the facade over the seeded link simulator (simulated time).

mod time_sim;

use glam::Vec3;
use replicate::bits::{BitReader, BitWriter};
use replicate::time::{Interpolate, NetInput, StateHistory};
use replicate::{NetRefHandle, Replicated};
use std::collections::HashMap;
use time_sim::*;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "time_lag::Target")]
struct Target {
    #[net(min = -64.0, max = 64.0, precision = 0.01)]
    position: Vec3,
}

impl Interpolate for Target {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        Target {
            position: from.position.lerp(to.position, t),
        }
    }
}

/// A shot, with the server time (in 1/256 ticks) the shooter was looking at.
#[derive(Debug, Clone, PartialEq)]
struct Shot {
    fire: bool,
    view: u32,
}

impl NetInput for Shot {
    fn write(&self, w: &mut BitWriter) {
        w.write_bool(self.fire);
        w.write_bits(u64::from(self.view), 32);
    }
    fn read(r: &mut BitReader) -> Option<Self> {
        let s = Shot {
            fire: r.read_bool(),
            view: r.read_bits(32) as u32,
        };
        r.check().ok().map(|_| s)
    }
}

fn circle(t: f64) -> Vec3 {
    let a = t as f32 * 0.5;
    Vec3::new(a.cos() * 8.0, a.sin() * 8.0, 0.0)
}

#[test]
fn the_server_rewinds_to_what_the_shooter_saw() {
    let mut sim = TimeSim::new(rtt_100_jitter_30(0.05), 41);
    sim.client.interpolate::<Target>();
    let dt = sim.server_dt.as_secs_f64();
    let target: NetRefHandle = sim.server.spawn(Target::default()).unwrap().raw();
    let mut history: StateHistory<Target> = StateHistory::new(64);
    let mut seen: HashMap<u32, Vec3> = HashMap::new();
    let mut next: Option<u32> = None;
    let mut errors = Vec::new();
    let mut rewind_ticks = Vec::new();
    while sim.now.as_secs_f64() < 30.0 {
        match sim.advance() {
            Due::Server => {
                let tick = sim.server.current_tick();
                if let Some(id) = sim.client_id()
                    && let Some(shot) = sim.server.take_input::<Shot>(id, tick)
                    && shot.fire
                    && let Some(saw) = seen.remove(&tick)
                {
                    let view = f64::from(shot.view) / 256.0;
                    rewind_ticks.push(f64::from(tick) - view);
                    let rewound = history.at_time(target, view).expect("within the history");
                    errors.push(f64::from(rewound.position.distance(saw)));
                }
                sim.server.get_mut::<Target>(target).unwrap().position =
                    circle(f64::from(tick) * dt);
                let now = sim.server.get::<Target>(target).unwrap().clone();
                history.record(tick, target, now);
                sim.tick_server();
            }
            Due::Client => {
                sim.tick_client();
                let _ = sim.client.events();
                let (Some(input_tick), Some(view)) =
                    (sim.client.input_tick(), sim.client.interpolation_time())
                else {
                    continue;
                };
                let Some(shown) = sim.client.interpolated::<Target>(target) else {
                    continue;
                };
                let n = next.get_or_insert(input_tick);
                while *n <= input_tick {
                    let fire = n.is_multiple_of(10);
                    let view = (view.as_secs_f64() / dt * 256.0) as u32;
                    sim.client.send_input(*n, &Shot { fire, view });
                    if fire {
                        seen.insert(*n, shown.value.position);
                    }
                    *n += 1;
                }
            }
        }
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let max = errors.iter().copied().fold(0.0, f64::max);
    let rewind = rewind_ticks.iter().sum::<f64>() / rewind_ticks.len() as f64;
    println!(
        "{} shots: rewound {rewind:.1} ticks on average; error mean {mean:.4}, max {max:.4}",
        errors.len()
    );
    assert!(errors.len() > 70, "{}", errors.len());
    // What the shooter saw was the state at its interpolation time: the rewound state
    // equals it within quantization (0.0078) and interpolation error.
    assert!(mean < 0.0081, "{mean}");
    assert!(max < 0.05, "{max}");
    assert!(rewind > 5.0, "the shooter looks into the past: {rewind}");
}
