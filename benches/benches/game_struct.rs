//! Serialize throughput and encoded size of a 10-member game struct: replicate's
//! serializers (quantized, bit-packed; called by hand and through the code
//! `#[derive(Replicated)]` generates, which write the same bits) against postcard and
//! bitcode on a mirror struct with the same members (see `replicate_bench::game`), in
//! one run.
//!
//! Each iteration encodes (or decodes) a batch of [`STATES`] varied player states;
//! throughput is in structs, so criterion's time divided by [`STATES`] is ns per struct.
//! replicate packs the structs back to back in one packet-style writer sized for the
//! batch's worst case and reset once per batch; postcard writes each into the next free part of one buffer; bitcode, whose
//! API encodes whole values, encodes each into its reused `Buffer`.
//! The size table is printed first (also: `cargo run --release -p replicate-bench --bin sizes`).
//!
//! `cargo bench -p replicate-bench --bench game_struct -- --warm-up-time 1 --measurement-time 3`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use replicate::bits::{BitReader, BitWriter};
use replicate::{ChangeMask, Replicated, ReplicatedState};
use replicate_bench::game::*;
use std::hint::black_box;

/// Structs per iteration.
const STATES: usize = 256;
const SEED: u64 = 42;

fn encode(c: &mut Criterion) {
    let states = make_states(STATES, SEED);
    println!("\n{}", size_table(&states));
    let quantized: Vec<GameStateQ> = states.iter().map(quantize).collect();
    let mirrors: Vec<GameStateSerde> = states.iter().map(GameStateSerde::from).collect();
    // The batch's worst case: `reset` zeroes the whole capacity, so an oversized
    // writer would time memset instead of serialization. Per struct this is about
    // what a real 1200-byte packet writer pays (150 words per ~35 structs).
    let capacity = STATES * MAX_STRUCT_BITS;

    let mut g = c.benchmark_group("game_struct_encode");
    g.throughput(Throughput::Elements(STATES as u64));

    let mut w = BitWriter::with_capacity_bits(capacity);
    let mut scratch = GameStateQ::default();
    g.bench_function("replicate_quantize_serialize", |b| {
        b.iter(|| {
            w.reset(capacity);
            for s in black_box(&states) {
                quantize_into(s, &mut scratch);
                serialize(&scratch, &mut w);
            }
            black_box(w.position())
        })
    });
    g.bench_function("replicate_serialize", |b| {
        b.iter(|| {
            w.reset(capacity);
            for q in black_box(&quantized) {
                serialize(q, &mut w);
            }
            black_box(w.position())
        })
    });

    // The same through `#[derive(Replicated)]` code, every member dirty.
    let all = ChangeMask::all(GameState::descriptor().change_mask_bits);
    let mut state = <GameState as Replicated>::State::default();
    g.bench_function("replicate_derive_quantize_serialize", |b| {
        b.iter(|| {
            w.reset(capacity);
            for s in black_box(&states) {
                s.quantize(&mut state);
                state.serialize(&all, 0, &mut w);
            }
            black_box(w.position())
        })
    });
    let derived: Vec<_> = states.iter().map(|s| s.to_state()).collect();
    g.bench_function("replicate_derive_serialize", |b| {
        b.iter(|| {
            w.reset(capacity);
            for q in black_box(&derived) {
                q.serialize(&all, 0, &mut w);
            }
            black_box(w.position())
        })
    });

    let mut buf = vec![0u8; STATES * 256];
    g.bench_function("postcard", |b| {
        b.iter(|| {
            let mut at = 0;
            for m in black_box(&mirrors) {
                at += postcard::to_slice(m, &mut buf[at..]).map_or(0, |s| s.len());
            }
            black_box(at)
        })
    });

    let mut bc = bitcode::Buffer::new();
    g.bench_function("bitcode", |b| {
        b.iter(|| {
            let mut total = 0;
            for m in black_box(&mirrors) {
                total += bc.encode(m).len();
            }
            black_box(total)
        })
    });
    g.finish();
}

fn decode(c: &mut Criterion) {
    let states = make_states(STATES, SEED);
    let quantized: Vec<GameStateQ> = states.iter().map(quantize).collect();
    let mirrors: Vec<GameStateSerde> = states.iter().map(GameStateSerde::from).collect();

    let mut w = BitWriter::with_capacity_bits(STATES * MAX_STRUCT_BITS);
    for q in &quantized {
        serialize(q, &mut w);
    }
    let packed = w.finish().expect("sized to fit");
    let bits = w.position();
    let mut buf = [0u8; 256];
    let postcard_msgs: Vec<Vec<u8>> = mirrors
        .iter()
        .map(|m| postcard::to_slice(m, &mut buf).expect("fits").to_vec())
        .collect();
    let bitcode_msgs: Vec<Vec<u8>> = mirrors.iter().map(bitcode::encode).collect();

    let mut g = c.benchmark_group("game_struct_decode");
    g.throughput(Throughput::Elements(STATES as u64));
    g.bench_function("replicate_deserialize_dequantize", |b| {
        b.iter(|| {
            let mut r = BitReader::with_bit_len(black_box(&packed), bits);
            let mut n = 0u32;
            for _ in 0..STATES {
                if let Ok(q) = deserialize(&mut r) {
                    n = n.wrapping_add(black_box(dequantize(&q)).score);
                }
            }
            n
        })
    });
    g.bench_function("replicate_deserialize", |b| {
        b.iter(|| {
            let mut r = BitReader::with_bit_len(black_box(&packed), bits);
            let mut n = 0u32;
            for _ in 0..STATES {
                if let Ok(q) = deserialize(&mut r) {
                    n = n.wrapping_add(black_box(q).score);
                }
            }
            n
        })
    });
    let all = ChangeMask::all(GameState::descriptor().change_mask_bits);
    g.bench_function("replicate_derive_deserialize", |b| {
        b.iter(|| {
            let mut r = BitReader::with_bit_len(black_box(&packed), bits);
            let mut n = 0u32;
            for _ in 0..STATES {
                let mut q = <GameState as Replicated>::State::default();
                if q.deserialize(&all, 0, &mut r).is_ok() {
                    n = n.wrapping_add(black_box(q).ammo as u32);
                }
            }
            n
        })
    });
    g.bench_function("postcard", |b| {
        b.iter(|| {
            let mut n = 0u32;
            for m in black_box(&postcard_msgs) {
                if let Ok(s) = postcard::from_bytes::<GameStateSerde>(m) {
                    n = n.wrapping_add(black_box(s).score);
                }
            }
            n
        })
    });
    let mut bc = bitcode::Buffer::new();
    g.bench_function("bitcode", |b| {
        b.iter(|| {
            let mut n = 0u32;
            for m in black_box(&bitcode_msgs) {
                if let Ok(s) = bc.decode::<GameStateSerde>(m) {
                    n = n.wrapping_add(black_box(s).score);
                }
            }
            n
        })
    });
    g.finish();
}

criterion_group!(benches, encode, decode);
criterion_main!(benches);
