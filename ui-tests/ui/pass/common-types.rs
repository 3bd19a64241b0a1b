use replicate::Replicated;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
struct Everything {
    count: usize,
    offset: isize,
    big: u128,
    signed_big: i128,
    initial: char,
    boxed: Box<u32>,
    cooldown: Duration,
    pair: (u8, String),
    triple: (bool, i16, f32),
    #[net(max_len = 16)]
    history: VecDeque<u16>,
    #[net(max_len = 8)]
    scores: HashMap<u32, i16>,
    tags: HashSet<String>,
    cell: glam::IVec2,
    chunk: glam::IVec3,
    size: glam::UVec2,
    extent: glam::UVec3,
    world: glam::DVec3,
    aligned: glam::Vec3A,
}

fn main() {
    let e = Everything {
        count: 7,
        initial: 'é',
        scores: [(1, -5), (2, 9)].into_iter().collect(),
        world: glam::DVec3::new(1e12, 0.1, -3.0),
        ..Default::default()
    };
    let state = e.to_state();
    assert_eq!(Everything::from_state(&state), e);
}
