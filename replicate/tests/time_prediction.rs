//! Client-side prediction and reconciliation of an owned object, and the server's
//! state history, through the facade over the seeded link simulator (simulated time).

mod time_sim;

use replicate::bits::{BitReader, BitWriter};
use replicate::time::{Interpolate, NetInput, Predictor, StateHistory};
use replicate::{ClientEvent, NetRefHandle, Replicated};
use time_sim::*;

/// The player's pawn, stepped by the same deterministic code on both ends. Both
/// coordinates share a change bit, so every update carries the whole position.
#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "time_prediction::Pawn")]
struct Pawn {
    #[net(group = "pos")]
    x: i32,
    #[net(group = "pos")]
    y: i32,
}

impl Interpolate for Pawn {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        let lerp = |a: i32, b: i32| (a as f32 + (b - a) as f32 * t).round() as i32;
        Pawn {
            x: lerp(from.x, to.x),
            y: lerp(from.y, to.y),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Move {
    dx: i8,
    dy: i8,
}

impl NetInput for Move {
    fn write(&self, w: &mut BitWriter) {
        w.write_bits(u64::from(self.dx as u8), 8);
        w.write_bits(u64::from(self.dy as u8), 8);
    }
    fn read(r: &mut BitReader) -> Option<Self> {
        let m = Move {
            dx: r.read_bits(8) as u8 as i8,
            dy: r.read_bits(8) as u8 as i8,
        };
        r.check().ok().map(|_| m)
    }
}

fn step(p: &mut Pawn, m: &Move) {
    p.x += i32::from(m.dx);
    p.y += i32::from(m.dy);
}

/// The player's stick: changes direction every 7 ticks, so a repeated (missing) input
/// would diverge.
fn stick(tick: u32) -> Move {
    let phase = (tick / 7) % 5;
    Move {
        dx: [3, 0, -2, 1, 0][phase as usize],
        dy: [0, 2, 1, -3, 0][phase as usize],
    }
}

struct Outcome {
    corrections: u64,
    reconciled: u64,
    /// Largest change of the visual x from one frame to the next.
    largest_visual_step: i32,
    smoothing_frames: u64,
    history_checked: u64,
}

/// 150 ms RTT (one-way 45..=105 ms) with 10 % loss; the server may push the pawn by
/// 100 units at `override_at` (server seconds).
fn run(seed: u64, seconds: f64, override_at: Option<f64>) -> Outcome {
    let mut sim = TimeSim::new(link(45, 60, 0.10), seed);
    let pawn: NetRefHandle = sim.server.spawn(Pawn::default()).unwrap().raw();
    let dt = sim.server_dt.as_secs_f64();
    let mut predictor: Option<Predictor<Pawn, Move>> = None;
    let mut next: Option<u32> = None;
    let mut reconciled = 0;
    let mut last_visual: Option<i32> = None;
    let mut largest_visual_step = 0;
    let mut smoothing_frames = 0;
    let mut overridden = false;
    // Lag compensation: the server's pawn positions of the last second.
    let mut history = StateHistory::new(30);
    let mut truth = Vec::new();
    let mut history_checked = 0;
    while sim.now.as_secs_f64() < seconds {
        match sim.advance() {
            Due::Server => {
                let tick = sim.server.current_tick();
                if let Some(id) = sim.client_id() {
                    if let Some(m) = sim.server.take_input::<Move>(id, tick) {
                        step(sim.server.get_mut::<Pawn>(pawn).unwrap(), &m);
                    }
                    if let Some(at) = override_at
                        && !overridden
                        && f64::from(tick) * dt >= at
                    {
                        sim.server.get_mut::<Pawn>(pawn).unwrap().x += 100;
                        overridden = true;
                    }
                }
                let now = sim.server.get::<Pawn>(pawn).unwrap().clone();
                history.record(tick, pawn, now.clone());
                truth.push((tick, now));
                if tick >= 40 {
                    let (t, p) = &truth[truth.len() - 20];
                    assert_eq!(history.at(pawn, *t), Some(p));
                    assert_eq!(history.at(pawn, tick - 40), None);
                    history_checked += 1;
                }
                sim.tick_server();
            }
            Due::Client => {
                sim.tick_client();
                for e in sim.client.events() {
                    match e {
                        ClientEvent::Spawned { handle, .. } if handle == pawn => {
                            let p = sim.client.get::<Pawn>(pawn).unwrap().clone();
                            predictor = Some(Predictor::new(p, step));
                        }
                        ClientEvent::Changed { handle, .. } if handle == pawn => {
                            if let Some(pred) = predictor.as_mut() {
                                let tick = sim.client.object_tick(pawn).unwrap();
                                if pred.reconcile(tick, sim.client.get::<Pawn>(pawn).unwrap()) {
                                    println!(
                                        "correction at tick {tick}, t={:.3}",
                                        sim.now.as_secs_f64()
                                    );
                                }
                                reconciled += 1;
                            }
                        }
                        _ => {}
                    }
                }
                let (Some(pred), Some(target)) = (predictor.as_mut(), sim.client.input_tick())
                else {
                    continue;
                };
                let n = next.get_or_insert(target);
                while *n <= target {
                    let m = stick(*n);
                    assert!(sim.client.send_input(*n, &m));
                    pred.predict(*n, m);
                    *n += 1;
                }
                let x = pred.visual().x;
                if let Some(last) = last_visual {
                    largest_visual_step = largest_visual_step.max((x - last).abs());
                }
                last_visual = Some(x);
                if pred.is_smoothing() {
                    smoothing_frames += 1;
                }
            }
        }
    }
    let pred = predictor.expect("the pawn was spawned");
    Outcome {
        corrections: pred.corrections(),
        reconciled,
        largest_visual_step,
        smoothing_frames,
        history_checked,
    }
}

#[test]
fn a_deterministic_step_at_150_ms_rtt_and_10_percent_loss_needs_no_correction_in_60_s() {
    for seed in [31u64, 32] {
        let o = run(seed, 60.0, None);
        println!(
            "seed {seed}: {} authoritative states compared, {} corrections, largest visual step {}",
            o.reconciled, o.corrections, o.largest_visual_step
        );
        assert!(o.reconciled > 1000, "{}", o.reconciled);
        assert_eq!(o.corrections, 0, "seed {seed}");
        // Moves of at most 3 per tick, two frames per tick: never a jump.
        assert!(o.largest_visual_step <= 3);
        assert!(o.history_checked > 1700);
    }
}

#[test]
fn a_server_override_is_exactly_one_smoothed_correction() {
    let o = run(33, 40.0, Some(30.0));
    println!(
        "override: {} corrections, visual smoothing over {} frames, largest visual step {}",
        o.corrections, o.smoothing_frames, o.largest_visual_step
    );
    assert_eq!(o.corrections, 1);
    // The 100-unit push is blended in over several frames, not popped.
    assert!(o.smoothing_frames >= 5, "{}", o.smoothing_frames);
    assert!(o.largest_visual_step < 50, "{}", o.largest_visual_step);
}
