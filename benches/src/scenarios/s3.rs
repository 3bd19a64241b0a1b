//! S3 "cubes" — the Gaffer on Games anchor: 901 cubes at 60 Hz (Glenn Fiedler's
//! *Snapshot Compression* scene), position at 1/512 m in ±256 × ±256 × 0–32 m,
//! orientation as a smallest-three quaternion. Cubes rest; every second a seeded pusher
//! sets a random cluster of 50 cubes rolling for a second.
//!
//! Reports bits per changed cube and kbps next to his figures: 321 bits raw per cube,
//! 80 bits quantized, ~55 bits per changed cube with his delta encoding, 256 kbps target.
//! Also range-codes the delta run's quantized cube residuals per tick
//! ([`super::range_coding`]; a measurement, not the wire format).

use super::range_coding::{self, SymbolLog};
use super::{DeltaMode, Outcome, SanityError, ensure, mean_p95};
use crate::report::{Json, Table, f, svg, write_file};
use glam::{Quat, Vec3};
use replicate::Replicated;
use replicate::internals::link::SplitMix64;
use replicate::serialize::{
    AxesConfig, QuatConfig, QuatSerializer, Vec3AxesSerializer, VectorConfig,
};
use std::time::Duration;

/// 1/512 m over ±256 m horizontally (19 bits: 262 145 values) and 0–32 m vertically
/// (15 bits).
pub const CUBE_POSITION: AxesConfig = AxesConfig {
    x: VectorConfig::with_precision(-256.0, 256.0, 1.0 / 512.0),
    y: VectorConfig::with_precision(-256.0, 256.0, 1.0 / 512.0),
    z: VectorConfig::with_precision(0.0, 32.0, 1.0 / 512.0),
};

/// Smallest three at 9 bits per component (2 + 27 = 29 bits), Fiedler's choice.
pub const CUBE_ORIENTATION: QuatConfig = QuatConfig { bits: 9 };

/// One cube of the scene.
#[derive(Replicated, Debug, Clone, PartialEq, Default)]
#[net(name = "bench::Cube")]
pub struct Cube {
    /// Centre, 1/512 m.
    #[net(serializer = Vec3AxesSerializer, config = CUBE_POSITION)]
    pub position: Vec3,
    /// Smallest three, 9 bits per component.
    #[net(serializer = QuatSerializer, config = CUBE_ORIENTATION)]
    pub orientation: Quat,
    /// Whether the cube is being pushed (Fiedler's `interacting` bit).
    pub interacting: bool,
}

/// Parameters of a run.
#[derive(Debug, Clone, Copy)]
pub struct S3Params {
    /// Simulated seconds measured (after one second of warm-up).
    pub seconds: usize,
    /// Pusher seed.
    pub seed: u64,
}

impl S3Params {
    /// The full run: 30 s.
    pub const FULL: S3Params = S3Params {
        seconds: 30,
        seed: 0x5EED_0003,
    };
    /// The CI smoke run: 4 s.
    pub const QUICK: S3Params = S3Params {
        seconds: 4,
        seed: 0x5EED_0003,
    };
}

/// Number of cubes.
pub const CUBES: usize = 901;
/// Cubes pushed per cluster.
pub const CLUSTER: usize = 50;
const HZ: usize = 60;
const HALF: f32 = 0.5;

struct Sim {
    cubes: Vec<Cube>,
    velocity: Vec<Vec3>,
    rolling_until: Vec<usize>,
    rng: SplitMix64,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        // A 31 x 30 grid with 4 m spacing, random resting yaw.
        let cubes = (0..CUBES)
            .map(|i| {
                let (gx, gy) = ((i % 31) as f32, (i / 31) as f32);
                let yaw = rng.next_f64() as f32 * std::f32::consts::TAU;
                Cube {
                    position: Vec3::new((gx - 15.0) * 4.0, (gy - 15.0) * 4.0, HALF),
                    orientation: Quat::from_rotation_z(yaw),
                    interacting: false,
                }
            })
            .collect();
        Self {
            cubes,
            velocity: vec![Vec3::ZERO; CUBES],
            rolling_until: vec![0; CUBES],
            rng,
        }
    }

    fn push_cluster(&mut self, tick: usize) {
        let centre = self.cubes[self.rng.below(CUBES as u64) as usize].position;
        let mut order: Vec<usize> = (0..CUBES).collect();
        order.sort_by(|&a, &b| {
            let da = self.cubes[a].position.distance_squared(centre);
            let db = self.cubes[b].position.distance_squared(centre);
            da.total_cmp(&db).then(a.cmp(&b))
        });
        let angle = self.rng.next_f64() as f32 * std::f32::consts::TAU;
        for &i in &order[..CLUSTER] {
            let speed = 2.0 + self.rng.next_f64() as f32 * 2.0;
            let jitter = (self.rng.next_f64() as f32 - 0.5) * 0.6;
            let a = angle + jitter;
            self.velocity[i] = Vec3::new(a.cos(), a.sin(), 0.0) * speed;
            self.rolling_until[i] = tick + HZ;
            self.cubes[i].interacting = true;
        }
    }

    fn step(&mut self, tick: usize) {
        let dt = 1.0 / HZ as f32;
        for i in 0..CUBES {
            if self.rolling_until[i] <= tick {
                if self.cubes[i].interacting {
                    // Settle: back on the ground, at rest.
                    self.cubes[i].interacting = false;
                    self.cubes[i].position.z = HALF;
                    self.velocity[i] = Vec3::ZERO;
                }
                continue;
            }
            let v = self.velocity[i];
            let c = &mut self.cubes[i];
            let mut p = c.position + v * dt;
            p.x = p.x.clamp(-255.0, 255.0);
            p.y = p.y.clamp(-255.0, 255.0);
            // Rolling about the horizontal axis perpendicular to the motion.
            let axis = Vec3::Z.cross(v).normalize_or_zero();
            let omega = v.length() / HALF;
            c.orientation = (Quat::from_axis_angle(axis, omega * dt) * c.orientation).normalize();
            // The centre rises and falls as the cube tips over its edges.
            let tip = (tick as f32 * omega * dt * 2.0).sin().abs();
            p.z = HALF + 0.2 * tip;
            c.position = p;
        }
    }
}

/// What one replicate run of the scene measured.
#[derive(Debug, Clone)]
pub struct CubeStats {
    /// Measured ticks.
    pub ticks: usize,
    /// Changed cubes summed over the measured ticks.
    pub changed: usize,
    /// Replication payload bits summed over the measured ticks.
    pub payload_bits: usize,
    /// Wire bytes summed over the measured ticks.
    pub wire_bytes: usize,
    /// Wire kbps of each measured tick.
    pub kbps_per_tick: Vec<f64>,
}

impl CubeStats {
    /// Payload bits per changed cube.
    pub fn bits_per_changed(&self) -> f64 {
        self.payload_bits as f64 / self.changed.max(1) as f64
    }
    /// Wire bits per changed cube.
    pub fn wire_bits_per_changed(&self) -> f64 {
        self.wire_bytes as f64 * 8.0 / self.changed.max(1) as f64
    }
    /// Mean wire kbps.
    pub fn kbps(&self) -> f64 {
        self.wire_bytes as f64 * 8.0 / (self.ticks as f64 / HZ as f64) / 1000.0
    }
    /// Mean payload kbps.
    pub fn payload_kbps(&self) -> f64 {
        self.payload_bits as f64 / (self.ticks as f64 / HZ as f64) / 1000.0
    }
}

/// Replicates the scene once.
pub fn cubes_run(p: S3Params, delta: DeltaMode) -> Result<CubeStats, SanityError> {
    cubes_run_with(p, delta, None)
}

/// The quantized members of a cube as `(first channel, values)`: position (channels
/// 0–2), orientation (largest index 3, smallest three 4–6), interacting (7).
fn cube_members(s: &<Cube as Replicated>::State) -> [(usize, Vec<i64>); 3] {
    let o = &s.orientation;
    [
        (0, s.position.iter().map(|&x| i64::from(x)).collect()),
        (
            3,
            std::iter::once(i64::from(o.largest))
                .chain(o.components.iter().map(|&x| i64::from(x)))
                .collect(),
        ),
        (7, vec![i64::from(s.interacting)]),
    ]
}

/// Replicates the scene once; `log`, when given, receives every cube's quantized
/// members each tick (the range-coding measurement).
pub fn cubes_run_with(
    p: S3Params,
    delta: DeltaMode,
    mut log: Option<&mut SymbolLog>,
) -> Result<CubeStats, SanityError> {
    let (mut server, mut link) = super::one_client_session(delta)?;
    let mut sim = Sim::new(p.seed);
    let mut handles = Vec::with_capacity(CUBES);
    for c in &sim.cubes {
        handles.push(
            server
                .objects_mut()
                .spawn(c.clone())
                .map_err(|e| SanityError(format!("spawn: {e:?}")))?,
        );
    }
    let quant = |c: &Cube| {
        let mut s = <Cube as Replicated>::State::default();
        c.quantize(&mut s);
        s
    };
    let mut prev: Vec<_> = sim.cubes.iter().map(quant).collect();
    let tick_len = Duration::from_nanos(1_000_000_000 / HZ as u64);
    let mut now = Duration::ZERO;
    let warmup = HZ;
    let total = warmup + p.seconds * HZ;
    let (mut changed_total, mut payload_bits, mut wire) = (0usize, 0usize, 0usize);
    let mut kbps_per_tick = Vec::new();
    for tick in 0..total {
        if tick >= warmup && (tick - warmup).is_multiple_of(HZ) {
            sim.push_cluster(tick);
        }
        sim.step(tick);
        let mut changed = 0;
        for (i, c) in sim.cubes.iter().enumerate() {
            let q = quant(c);
            if let Some(log) = log.as_deref_mut() {
                log.track(i, 0, &cube_members(&q), tick >= warmup);
            }
            if q != prev[i] {
                changed += 1;
                if let Some(o) = server.objects_mut().get_mut::<Cube>(handles[i]) {
                    o.clone_from(c);
                }
                prev[i] = q;
            }
        }
        if let Some(log) = log.as_deref_mut() {
            log.end_tick(tick >= warmup);
        }
        now += tick_len;
        server.tick(now);
        let t = link.send(&mut server, now, 64);
        if tick >= warmup {
            changed_total += changed;
            payload_bits += t.payload_bits;
            wire += t.wire_bytes;
            kbps_per_tick.push(t.wire_bytes as f64 * 8.0 * HZ as f64 / 1000.0);
        }
    }
    // Convergence: the client holds every cube with the server's quantized state.
    let client = link
        .client
        .as_ref()
        .ok_or(SanityError("no client".into()))?;
    ensure(client.len() == CUBES, || {
        format!("client holds {} cubes, expected {CUBES}", client.len())
    })?;
    for (i, &h) in handles.iter().enumerate() {
        let c = client
            .get::<Cube>(h)
            .ok_or_else(|| SanityError(format!("cube {i} missing")))?;
        ensure(quant(c) == prev[i], || {
            format!("cube {i} differs on the client")
        })?;
    }
    ensure(changed_total > 0 && payload_bits > 0, || {
        "no traffic".into()
    })?;
    Ok(CubeStats {
        ticks: total - warmup,
        changed: changed_total,
        payload_bits,
        wire_bytes: wire,
        kbps_per_tick,
    })
}

/// Runs S3 (delta on when available, and off), writes `s3.{md,json,svg}`.
pub fn run(p: S3Params) -> Result<Outcome, SanityError> {
    let mut log = SymbolLog::default();
    let with_delta = cubes_run_with(p, DeltaMode::On, Some(&mut log))?;
    let coded = range_coding::measure_all(&log).map_err(SanityError)?;
    for m in &coded {
        ensure(m.changed_objects as usize == with_delta.changed, || {
            format!(
                "range coding saw {} changed cubes, the run {}",
                m.changed_objects, with_delta.changed
            )
        })?;
    }
    let without = cubes_run(p, DeltaMode::Off)?;
    let full_bits = 19 * 2 + 15 + 29 + 1;
    let mut table = Table::new(&["", "bits per changed cube", "kbps"]);
    let mut bars = Vec::new();
    let mut json_rows = Vec::new();
    for (name, st) in [
        ("replicate (delta)", &with_delta),
        ("replicate (no delta)", &without),
    ] {
        let (_, p95) = mean_p95(&st.kbps_per_tick);
        table.row(vec![
            format!("{name}, payload (object framing, masks, values)"),
            f(st.bits_per_changed(), 1),
            f(st.payload_kbps(), 0),
        ]);
        table.row(vec![
            format!("{name}, on the wire (+ connection header + netcode.io)"),
            f(st.wire_bits_per_changed(), 1),
            format!("{} (p95 tick {})", f(st.kbps(), 0), f(p95, 0)),
        ]);
        bars.push((format!("{name} payload"), Some(st.bits_per_changed())));
        bars.push((
            format!("{name} on the wire"),
            Some(st.wire_bits_per_changed()),
        ));
        json_rows.push(Json::obj(vec![
            ("variant", Json::str(name)),
            (
                "changed_cubes_per_tick",
                Json::Num(st.changed as f64 / st.ticks as f64),
            ),
            (
                "payload_bits_per_changed_cube",
                Json::Num(st.bits_per_changed()),
            ),
            (
                "wire_bits_per_changed_cube",
                Json::Num(st.wire_bits_per_changed()),
            ),
            ("wire_kbps", Json::Num(st.kbps())),
            ("payload_kbps", Json::Num(st.payload_kbps())),
            ("p95_tick_wire_kbps", Json::Num(p95)),
        ]));
    }
    table.row(vec![
        "replicate, one cube's full quantized state".into(),
        full_bits.to_string(),
        "—".into(),
    ]);
    table.row(vec!["Fiedler: raw".into(), "321".into(), "—".into()]);
    table.row(vec!["Fiedler: quantized".into(), "80".into(), "—".into()]);
    table.row(vec![
        "Fiedler: delta (5.5 index + 26.1 position + 23.3 orientation)".into(),
        "~55".into(),
        "256 (target)".into(),
    ]);
    let seconds = log.ticks() as f64 / HZ as f64;
    for m in &coded {
        let bits = m.bits_per_changed_object();
        table.row(vec![
            format!("{}, payload (presence bits, masks, residuals)", m.name()),
            format!("{} ({:.2} × Fiedler's 55)", f(bits, 1), bits / 55.0),
            f(m.coded_bytes as f64 * 8.0 / seconds.max(1e-9) / 1000.0, 0),
        ]);
    }
    bars.push((
        "replicate full state".to_string(),
        Some(f64::from(full_bits)),
    ));
    bars.push(("Fiedler raw".to_string(), Some(321.0)));
    bars.push(("Fiedler quantized".to_string(), Some(80.0)));
    bars.push(("Fiedler delta".to_string(), Some(55.0)));
    let mut md = format!(
        "### S3 cubes — {CUBES} cubes at {HZ} Hz, {} s measured, a cluster of {CLUSTER} pushed every second\n\n",
        p.seconds
    );
    md.push_str(&table.markdown());
    md.push_str(&format!(
        "\n{:.1} changed cubes per tick on average; every cube on the client equals the server's quantized state at the end.\n",
        without.changed as f64 / without.ticks as f64
    ));
    md.push_str(&range_coding_note(&coded, with_delta.changed));
    let json = Json::obj(vec![
        ("scenario", Json::str("s3")),
        (
            "range_coding",
            Json::Arr(coded.iter().map(|m| m.json()).collect()),
        ),
        ("seconds", Json::Num(p.seconds as f64)),
        ("variants", Json::Arr(json_rows)),
        ("full_state_bits", Json::Num(f64::from(full_bits))),
        ("fiedler_raw_bits", Json::Num(321.0)),
        ("fiedler_quantized_bits", Json::Num(80.0)),
        ("fiedler_delta_bits", Json::Num(55.0)),
        ("fiedler_target_kbps", Json::Num(256.0)),
    ]);
    let _ = write_file(
        "s3.svg",
        &svg::bar_chart("S3 cubes: bits per changed cube", "bits", &bars),
    );
    let _ = write_file("s3.md", &md);
    let _ = write_file("s3.json", &json.render());
    Ok(Outcome { markdown: md, json })
}

/// What the range-coded rows model and leave out, with their CPU cost, as markdown.
fn range_coding_note(coded: &[range_coding::Measured], changed: usize) -> String {
    let mut rows = String::new();
    for m in coded {
        let (wire, _) = mean_p95(&m.wire);
        rows.push_str(&format!(
            "\n- {}: {:.1} bits per changed cube ({:.1} on the wire with the byte-aligned \
             connection header and netcode.io's overhead per packet), order-0 entropy of \
             the same residuals {:.1} bits per changed cube; about {:.1} bits per changed \
             cube are presence and mask; encode {:.1} ns and decode {:.1} ns per residual \
             ({:.1} and {:.1} per coded symbol; {} residuals, {} presence/mask bits)",
            m.name(),
            m.bits_per_changed_object(),
            wire * 8.0 * m.payload.len() as f64 / changed.max(1) as f64,
            m.entropy_bits / changed.max(1) as f64,
            m.framing_bytes as f64 * 8.0 / changed.max(1) as f64,
            m.encode_ns_per_residual,
            m.decode_ns_per_residual,
            m.encode_ns_per_symbol,
            m.decode_ns_per_symbol,
            m.residuals,
            m.framing_symbols
        ));
    }
    format!(
        "\nThe adaptive range coding rows (`scenarios::range_coding`, a measurement, not the \
         wire format) code each tick's cubes, from the delta run's own quantized values, \
         with an LZMA-style binary range coder, one buffer per tick, decoded back and \
         checked equal: per cube in index order one adaptive \"changed\" bit (this is the \
         index: {CUBES} bits' worth of decisions per tick, Fiedler's 5.5 bits); per changed \
         cube one adaptive bit per member (position, orientation, interacting; the last \
         implied when no other changed); per changed member component the residual \
         (first or second difference against the previous ticks, the largest-component \
         index included as a component) in an adaptive Exp-Golomb binarisation with \
         contexts per component. \"Carried\" models live across packets (a lossless, \
         in-order link), \"fresh\" ones restart every packet; the \"temporal contexts\" rows \
         add per-cube history to the carried model (presence conditioned on whether the \
         cube changed in the previous packet, the bucket code on the bucket the same \
         component had when last coded). Not modelled: the packet \
         header and stream framing (the payload rows are the coded bytes alone). CPU is \
         wall time over the whole run (`Instant`).{rows}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use replicate::serialize::{NetSerializer, QuatSerializer};

    #[test]
    fn position_config_is_exactly_one_512th_metre() {
        assert_eq!(CUBE_POSITION.x.component_bits(), 19);
        assert_eq!(CUBE_POSITION.z.component_bits(), 15);
        let q = Vec3AxesSerializer::quantize(&CUBE_POSITION, &Vec3::new(1.0 / 512.0, -256.0, 0.0));
        let r = Vec3AxesSerializer::quantize(&CUBE_POSITION, &Vec3::new(0.0, -256.0, 0.0));
        assert_eq!(q[0] - r[0], 1);
        assert_eq!(q[1], 0);
        assert!(QuatSerializer::validate_config(&CUBE_ORIENTATION).is_ok());
    }
}
