//! Snapshot interpolation through the facade over the seeded link simulator
//! (simulated time): no frame without a value, error within quantization plus
//! interpolation error, rest without overshoot, teleports snap.

mod time_sim;

use glam::Vec3;
use replicate::time::{Interpolate, SampleKind};
use replicate::{NetRefHandle, Replicated};
use time_sim::*;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "time_interpolation::Mover")]
struct Mover {
    #[net(min = -64.0, max = 64.0, precision = 0.01)]
    position: Vec3,
    /// Bumped by the server on a teleport.
    #[net(bits = 8)]
    teleports: u8,
}

impl Interpolate for Mover {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        Mover {
            position: Vec3::interpolate(&from.position, &to.position, t),
            teleports: to.teleports,
        }
    }
    fn is_teleport(from: &Self, to: &Self) -> bool {
        from.teleports != to.teleports
    }
}

/// The quantization step of `position` (14 bits over 128 units).
const STEP: f32 = 128.0 / 16383.0;
const RADIUS: f32 = 8.0;
const OMEGA: f32 = 0.5;

/// The server's trajectory at server time `t` (s): a circle, 4 units per second.
fn circle(t: f64) -> Vec3 {
    let a = t as f32 * OMEGA;
    Vec3::new(a.cos() * RADIUS, a.sin() * RADIUS, 0.0)
}

struct Run {
    frames: u64,
    without_value: u64,
    kinds: replicate::time::InterpolationStats,
    /// Mean error against the trajectory at the client's interpolation time.
    mean_error: f64,
    /// Mean error against the trajectory at the true server time minus the delay
    /// (the clock-synchronisation error included).
    mean_error_true_time: f64,
    max_error: f64,
    delay_ms: f64,
}

/// The server moves a `Mover` with `path(server time)`; the client presents it every
/// frame for `seconds` (measured after a 2 s warm-up).
fn run(loss: f32, seed: u64, seconds: f64, path: impl Fn(f64) -> (Vec3, u8)) -> (Run, Vec<Vec3>) {
    let mut sim = TimeSim::new(rtt_100_jitter_30(loss), seed);
    sim.client.interpolate::<Mover>();
    let dt = sim.server_dt.as_secs_f64();
    let handle: NetRefHandle = sim.server.spawn(Mover::default()).unwrap().raw();
    let mut r = Run {
        frames: 0,
        without_value: 0,
        kinds: Default::default(),
        mean_error: 0.0,
        mean_error_true_time: 0.0,
        max_error: 0.0,
        delay_ms: 0.0,
    };
    let mut shown = Vec::new();
    let start = 2.0;
    let stats_before = std::cell::Cell::new(None);
    while sim.now.as_secs_f64() < start + seconds {
        match sim.advance() {
            Due::Server => {
                let t = f64::from(sim.server.current_tick()) * dt;
                let (p, teleports) = path(t);
                let m = sim.server.get_mut::<Mover>(handle).unwrap();
                m.position = p;
                m.teleports = teleports;
                sim.tick_server();
            }
            Due::Client => {
                sim.tick_client();
                let _ = sim.client.events();
                if sim.now.as_secs_f64() < start {
                    continue;
                }
                if stats_before.get().is_none() {
                    stats_before.set(Some(sim.client.interpolation_stats()));
                }
                r.frames += 1;
                let sample = sim.client.interpolated::<Mover>(handle);
                let Some(sample) = sample.filter(|s| s.kind != SampleKind::Stalled) else {
                    r.without_value += 1;
                    continue;
                };
                let at = sim.client.interpolation_time().unwrap().as_secs_f64();
                let delay = sim.client.interpolation_delay().unwrap().as_secs_f64();
                r.delay_ms = delay * 1e3;
                let truth = path(at).0;
                let err = f64::from(sample.value.position.distance(truth));
                r.mean_error += err;
                r.max_error = r.max_error.max(err);
                let truth_true = path(sim.true_server_time() - delay).0;
                r.mean_error_true_time += f64::from(sample.value.position.distance(truth_true));
                shown.push(sample.value.position);
            }
        }
    }
    let measured = r.frames - r.without_value;
    r.mean_error /= measured as f64;
    r.mean_error_true_time /= measured as f64;
    let all = sim.client.interpolation_stats();
    let before = stats_before.get().unwrap_or_default();
    r.kinds = replicate::time::InterpolationStats {
        interpolated: all.interpolated - before.interpolated,
        extrapolated: all.extrapolated - before.extrapolated,
        stalled: all.stalled - before.stalled,
        held: all.held - before.held,
        snapped: all.snapped - before.snapped,
        empty: all.empty - before.empty,
    };
    (r, shown)
}

#[test]
fn sixty_seconds_at_5_percent_loss_every_frame_has_a_value_within_quantization_plus_lerp_error() {
    // Chord error of linear interpolation between ticks on the circle (the sagitta).
    let lerp_error = RADIUS * (1.0 - (OMEGA / 30.0 / 2.0).cos());
    for seed in [5u64, 6] {
        let (r, _) = run(0.05, seed, 60.0, |t| (circle(t), 0));
        println!(
            "seed {seed}: {} frames, {} without a value; {:?}; delay {:.1} ms; mean error {:.5} \
             (at the true server time {:.5}), max {:.4}; bound: step {STEP:.5} + lerp {lerp_error:.5}",
            r.frames,
            r.without_value,
            r.kinds,
            r.delay_ms,
            r.mean_error,
            r.mean_error_true_time,
            r.max_error
        );
        assert_eq!(r.without_value, 0, "seed {seed}");
        assert_eq!(r.kinds.stalled + r.kinds.empty, 0, "seed {seed}");
        assert!(r.frames > 3500);
        assert!(
            r.mean_error <= f64::from(STEP + lerp_error),
            "seed {seed}: mean error {}",
            r.mean_error
        );
        // With the clock error (a few ms at 4 units/s) on top.
        assert!(r.mean_error_true_time <= f64::from(STEP + lerp_error) + 4.0 * 0.003);
        // Late data is bridged by bounded extrapolation, and only rarely.
        assert!(r.kinds.extrapolated * 50 < r.frames, "{:?}", r.kinds);
    }
}

#[test]
fn an_object_at_rest_is_held_without_overshoot() {
    // Straight line at 6 units/s, stopping at t = 5 s.
    let path = |t: f64| {
        let t = t.min(5.0) as f32;
        (Vec3::new(-30.0 + 6.0 * t, 0.0, 0.0), 0)
    };
    let (r, shown) = run(0.05, 7, 8.0, path);
    assert_eq!(r.without_value, 0);
    // Never beyond the stop point (no extrapolation past the rest position).
    let stop = path(5.0).0.x;
    let beyond = shown.iter().map(|p| p.x - stop).fold(f32::MIN, f32::max);
    assert!(beyond <= STEP, "overshoot {beyond}");
    assert!(r.max_error < 0.1, "max error {}", r.max_error);
}

#[test]
fn a_teleport_snaps_instead_of_gliding() {
    // Circle around the origin, then at t = 5 s a jump of 20 units along x.
    let path = |t: f64| {
        if t < 5.0 {
            (circle(t), 0)
        } else {
            (circle(t) + Vec3::X * 20.0, 1)
        }
    };
    let (r, shown) = run(0.05, 8, 6.0, path);
    assert_eq!(r.without_value, 0);
    assert!(r.kinds.snapped > 0, "{:?}", r.kinds);
    // Nothing shown in between the two places.
    let between = shown
        .iter()
        .filter(|p| p.x > RADIUS + 0.5 && p.x < 20.0 - RADIUS - 0.5)
        .count();
    assert_eq!(between, 0);
    assert!(shown.iter().any(|p| p.x > 20.0 - RADIUS - 0.5));
}

#[test]
fn the_interpolation_delay_follows_the_measured_jitter() {
    // The same mean one-way delay (50 ms), with 10 ms and then 60 ms of jitter.
    let delay_with = |conditioner| {
        let mut sim = TimeSim::new(conditioner, 9);
        sim.client.interpolate::<Mover>();
        sim.run_until(ms(10_000));
        sim.client.interpolation_delay().unwrap().as_secs_f64() * 1e3
    };
    let calm = delay_with(link(45, 10, 0.0));
    let jittery = delay_with(rtt_100_jitter_30(0.0));
    println!("interpolation delay: {calm:.1} ms with 10 ms of jitter, {jittery:.1} ms with 60 ms");
    // Two ticks (66.7 ms), the largest one-way delay (frame wait included), 10 ms.
    assert!(
        calm > 66.7 + 55.0 && calm < 66.7 + 55.0 + 16.4 + 10.0 + 5.0,
        "{calm}"
    );
    assert!(jittery > calm + 20.0, "{jittery} vs {calm}");
}
