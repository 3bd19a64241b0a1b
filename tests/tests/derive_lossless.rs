//! Unannotated float members are lossless: `f32`, `f64`, `glam::Vec2/Vec3/Vec4` and
//! `glam::Quat` arrive bit-exact, through the state serialize/deserialize path and
//! through a real server and client over the in-memory transport. Quantization happens
//! only when a member asks for it (`min`/`max`/`precision`/`bits`).

use glam::{Quat, Vec2, Vec3, Vec4};
use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::Transform;
use replicate::transport::LinkConditioner;
use replicate::transport::memory::MemoryServerTransport;
use replicate::{
    ChangeMask, Client, ClientConfig, ProtocolRegistry, Replicated, ReplicatedState, Server,
    ServerConfig,
};
use std::sync::Arc;
use std::time::Duration;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "derive_lossless::Body")]
struct Body {
    position: Vec3,
    rotation: Quat,
    speed: f32,
    mass: f64,
    uv: Vec2,
    colour: Vec4,
    pose: Transform,
    /// Asks for quantization: a 1 cm grid over ±100.
    #[net(min = -100.0, max = 100.0, precision = 0.01)]
    coarse: Vec3,
    /// Smallest three at 12 bits.
    #[net(bits = 12)]
    coarse_rotation: Quat,
}

fn sample() -> Body {
    Body {
        position: Vec3::new(1.3, 2.7, -0.4),
        rotation: Quat::from_xyzw(0.1, 0.2, 0.3, 0.9).normalize(),
        speed: 0.1 + 0.2,
        mass: std::f64::consts::PI * 1e-7,
        uv: Vec2::new(1e-40, -1e30),
        colour: Vec4::new(0.333_333_34, f32::INFINITY, -7.25, 1.0 / 3.0),
        pose: Transform {
            translation: Vec3::new(0.1, -1e-8, 123_456.79),
            rotation: Quat::from_rotation_z(0.7),
            scale: Vec3::new(1.0, 0.3, 2.5),
        },
        coarse: Vec3::new(1.234_56, -50.0, 99.999),
        coarse_rotation: Quat::from_rotation_y(1.0),
    }
}

fn bits_of(x: Vec3) -> [u32; 3] {
    x.to_array().map(f32::to_bits)
}

fn assert_lossless(sent: &Body, got: &Body) {
    assert_eq!(bits_of(got.position), bits_of(sent.position));
    assert_eq!(
        got.rotation.to_array().map(f32::to_bits),
        sent.rotation.to_array().map(f32::to_bits)
    );
    assert_eq!(got.speed.to_bits(), sent.speed.to_bits());
    assert_eq!(got.mass.to_bits(), sent.mass.to_bits());
    assert_eq!(
        got.uv.to_array().map(f32::to_bits),
        sent.uv.to_array().map(f32::to_bits)
    );
    assert_eq!(
        got.colour.to_array().map(f32::to_bits),
        sent.colour.to_array().map(f32::to_bits)
    );
    assert_eq!(got.pose, sent.pose);
    assert_eq!(
        bits_of(got.pose.translation),
        bits_of(sent.pose.translation)
    );
    // The annotated members are quantized: within their precision, not exact.
    assert_ne!(got.coarse, sent.coarse);
    assert!((got.coarse - sent.coarse).abs().max_element() <= 0.01);
    assert!(got.coarse_rotation.angle_between(sent.coarse_rotation) < 1e-3);
}

#[test]
fn state_round_trip_is_bit_exact() {
    let sent = sample();
    let state = sent.to_state();
    let bits = Body::descriptor().change_mask_bits;
    let mut mask = ChangeMask::new(bits);
    mask.set_all();
    let mut w = BitWriter::with_capacity_bytes(256);
    state.serialize(&mask, 0, &mut w);
    let len = w.position();
    let bytes = w.finish().unwrap();
    let mut received = <Body as Replicated>::State::default();
    let mut r = BitReader::with_bit_len(&bytes, len);
    received.deserialize(&mask, 0, &mut r).unwrap();
    assert_eq!(r.position(), len);
    assert_lossless(&sent, &Body::from_state(&received));
}

#[test]
fn descriptor_names_the_lossless_and_the_quantizing_serializers() {
    let d = Body::descriptor();
    let ser: Vec<(&str, &str)> = d.members.iter().map(|m| (m.name, m.serializer)).collect();
    assert_eq!(
        ser,
        vec![
            ("position", "Vec3F32"),
            ("rotation", "QuatF32"),
            ("speed", "f32"),
            ("mass", "f64"),
            ("uv", "Vec2F32"),
            ("colour", "Vec4F32"),
            ("pose", "TransformF32"),
            ("coarse", "Vec3"),
            ("coarse_rotation", "Quat"),
        ]
    );
    // Quantized members keep their sizes: 15 bits per axis, 2 + 3 * 12 bits.
    assert_eq!(d.members[7].max_bits, Some(45));
    assert_eq!(d.members[8].max_bits, Some(38));
}

#[test]
fn server_to_client_is_bit_exact() {
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport = MemoryServerTransport::with_limits(LinkConditioner::perfect(), 7, 1200, 4);
    let network = transport.network();
    let mut server = Server::new(transport, registry.clone(), ServerConfig::default()).unwrap();
    let mut client = Client::new(network.connect(&[]), registry, ClientConfig::default()).unwrap();
    let sent = sample();
    let handle = server.spawn(sent.clone()).unwrap();

    let dt = Duration::from_millis(16);
    let mut now = Duration::ZERO;
    let mut moved = false;
    for tick in 0..400 {
        now += dt;
        if tick == 100 {
            // A change after creation goes through the update (delta) path.
            let b = server.get_mut::<Body>(handle).unwrap();
            b.position.y = 2.700_000_3;
            b.mass = -b.mass;
            moved = true;
        }
        server.tick(now).unwrap();
        client.tick(now).unwrap();
        let _ = client.events();
        if moved && tick > 150 {
            break;
        }
    }
    let expected = server.get::<Body>(handle).unwrap().clone();
    let got = client.get::<Body>(handle).expect("spawned on the client");
    assert_lossless(&expected, got);
    assert_eq!(got.position.y.to_bits(), 2.700_000_3f32.to_bits());
}
