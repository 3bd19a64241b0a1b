//! Ticks on the wire and clock synchronisation, through the facade over the seeded
//! link simulator (simulated time).

mod time_sim;

use replicate::Replicated;
use time_sim::*;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "time_clock::Lamp")]
struct Lamp {
    #[net(bits = 10)]
    level: u16,
}

/// Error of the client's server-time estimate at every client frame in `from..to`.
fn errors(sim: &mut TimeSim, from: f64, to: f64) -> Vec<f64> {
    let mut out = Vec::new();
    while sim.now.as_secs_f64() < to {
        match sim.advance() {
            Due::Server => sim.tick_server(),
            Due::Client => {
                sim.tick_client();
                let _ = sim.client.events();
                if sim.now.as_secs_f64() >= from {
                    let est = sim.client.estimated_server_time().expect("synchronised");
                    out.push((est.as_secs_f64() - sim.true_server_time()).abs());
                }
            }
        }
    }
    out
}

#[test]
fn clock_sync_p95_error_within_5_ms_at_100_ms_rtt_with_jitter_and_through_a_loss_burst() {
    for seed in [1u64, 2, 3] {
        let mut sim = TimeSim::new(rtt_100_jitter_30(0.0), seed);
        sim.run_until(ms(300));
        assert!(sim.client.is_connected());
        let connected = sim.now.as_secs_f64();
        let mut settled = errors(&mut sim, connected + 2.0, connected + 8.0);
        let p95 = quantile(&mut settled, 0.95) * 1e3;
        // A 10 % loss burst for 4 s.
        sim.network.set_conditioner(rtt_100_jitter_30(0.10));
        let t = sim.now.as_secs_f64();
        let mut burst = errors(&mut sim, t, t + 4.0);
        let burst_p95 = quantile(&mut burst, 0.95) * 1e3;
        let burst_max = quantile(&mut burst, 1.0) * 1e3;
        println!(
            "seed {seed}: p95 error {p95:.2} ms after 2 s (max {:.2}); \
             during 10 % loss: p95 {burst_p95:.2} ms, max {burst_max:.2} ms",
            quantile(&mut settled, 1.0) * 1e3
        );
        assert!(p95 <= 5.0, "seed {seed}: p95 {p95:.2} ms");
        assert!(
            burst_p95 <= 5.0,
            "seed {seed}: p95 in the loss burst {burst_p95:.2} ms"
        );
    }
}

#[test]
fn every_packet_carries_its_tick_in_under_two_bytes_and_objects_know_theirs() {
    let mut sim = TimeSim::new(rtt_100_jitter_30(0.05), 11);
    let lamp = sim.server.spawn(Lamp::default()).unwrap();
    let mut changed_at = Vec::new();
    let mut seen = Vec::new();
    while sim.now < ms(20_000) {
        match sim.advance() {
            Due::Server => {
                let tick = sim.server.current_tick();
                if tick % 45 == 0 && tick > 0 {
                    sim.server.get_mut::<Lamp>(lamp).unwrap().level = (tick / 45) as u16;
                    changed_at.push(tick);
                }
                sim.tick_server();
            }
            Due::Client => {
                sim.tick_client();
                for e in sim.client.events() {
                    if let replicate::ClientEvent::Changed { handle, .. } = e {
                        let level = sim.client.get::<Lamp>(handle).unwrap().level;
                        seen.push((level, sim.client.object_tick(handle).unwrap()));
                    }
                }
                if let (Some(last), Some(est)) =
                    (sim.client.last_received_tick(), sim.client.server_tick())
                {
                    // The newest packet is at most the one-way delay (up to 80 ms), a
                    // frame and a few lost packets old.
                    assert!(last <= est + 1 && est - last <= 8, "{last} vs {est}");
                }
            }
        }
    }
    // Each change is stamped with the tick the server made it at (state-based resend
    // of a lost packet carries a later tick).
    assert!(
        seen.len() >= changed_at.len() * 9 / 10,
        "{} of {}",
        seen.len(),
        changed_at.len()
    );
    for (level, tick) in &seen {
        let made = u32::from(*level) * 45;
        assert!(
            *tick >= made && *tick <= made + 12,
            "level {level} at tick {tick}"
        );
    }
    let exact = seen
        .iter()
        .filter(|(l, t)| u32::from(*l) * 45 == *t)
        .count();
    assert!(exact * 10 >= seen.len() * 8, "{exact} of {}", seen.len());
    let id = sim.client_id().unwrap();
    let (tick_bits, section_bits, packets) = sim.server.time_bits(id).unwrap();
    let per_packet = tick_bits as f64 / packets as f64;
    println!(
        "tick field: {per_packet:.2} bits per packet; time section with clock echoes: {:.2} bits ({packets} packets)",
        section_bits as f64 / packets as f64
    );
    assert!(per_packet <= 16.0, "{per_packet} bits");
    assert!(per_packet < 10.0, "the 9-bit form dominates: {per_packet}");
}
