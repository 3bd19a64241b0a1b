//! Bit-stream throughput: one MTU-sized packet of mixed-width fields (1, 7, 13, 32 and
//! 64 bits, ~1170 bytes) written and read back with replicate's `BitWriter`/`BitReader`
//! and with the fastest idiomatic bitvec code (see `replicate_bench::fields`).
//! Throughput is in fields, so criterion's time divided by [`FIELDS`] is ns per field.
//!
//! `cargo bench -p replicate-bench --bench bitstream -- --warm-up-time 1 --measurement-time 3`

use bitvec::prelude::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use replicate::bits::BitWriter;
use replicate_bench::fields::*;
use std::hint::black_box;

/// Fields per iteration: 400 fields of 23.4 bits on average fill a 1200-byte packet.
const FIELDS: usize = 400;

fn write(c: &mut Criterion) {
    let fields = make_fields(FIELDS, 1);
    let total = total_bits(&fields);
    let mut g = c.benchmark_group("bitstream_write");
    g.throughput(Throughput::Elements(FIELDS as u64));

    let mut w = BitWriter::with_capacity_bits(total);
    g.bench_function("replicate_BitWriter", |b| {
        b.iter(|| {
            write_replicate(&mut w, total, black_box(&fields));
            black_box(w.position())
        })
    });

    let mut bv = BitVec::<u64, Lsb0>::with_capacity(total);
    g.bench_function("bitvec_extend_from_bitslice", |b| {
        b.iter(|| {
            write_bitvec_extend(&mut bv, black_box(&fields));
            black_box(bv.len())
        })
    });

    let mut bv = BitVec::<u64, Lsb0>::with_capacity(total);
    g.bench_function("bitvec_resize_store_le_u64", |b| {
        b.iter(|| {
            write_bitvec_store(&mut bv, black_box(&fields));
            black_box(bv.len())
        })
    });

    let mut bv = BitVec::<u8, Lsb0>::with_capacity(total);
    g.bench_function("bitvec_resize_store_le_u8", |b| {
        b.iter(|| {
            write_bitvec_store(&mut bv, black_box(&fields));
            black_box(bv.len())
        })
    });

    let mut bv = bitvec![u64, Lsb0; 0; total];
    g.bench_function("bitvec_presized_store_le", |b| {
        b.iter(|| {
            write_bitvec_presized(&mut bv, black_box(&fields));
            black_box(bv.len())
        })
    });
    g.finish();
}

fn read(c: &mut Criterion) {
    let fields = make_fields(FIELDS, 1);
    let total = total_bits(&fields);
    let sum = checksum(&fields);
    let mut w = BitWriter::with_capacity_bits(total);
    write_replicate(&mut w, total, &fields);
    let bytes = w.finish().expect("sized to fit");
    let mut words = BitVec::<u64, Lsb0>::new();
    write_bitvec_extend(&mut words, &fields);
    assert_eq!(read_replicate(&bytes, &fields), sum);
    assert_eq!(read_bitvec_bytes(bytes.view_bits(), &fields), sum);
    assert_eq!(read_bitvec_words(&words, &fields), sum);

    let mut g = c.benchmark_group("bitstream_read");
    g.throughput(Throughput::Elements(FIELDS as u64));
    g.bench_function("replicate_BitReader", |b| {
        b.iter(|| read_replicate(black_box(&bytes), black_box(&fields)))
    });
    g.bench_function("bitvec_load_le_bytes", |b| {
        b.iter(|| read_bitvec_bytes(black_box(bytes.view_bits()), black_box(&fields)))
    });
    g.bench_function("bitvec_load_le_words", |b| {
        b.iter(|| read_bitvec_words(black_box(&words), black_box(&fields)))
    });
    g.finish();
}

criterion_group!(benches, write, read);
criterion_main!(benches);
