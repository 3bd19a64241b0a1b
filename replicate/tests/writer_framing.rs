//! The batch size prefix of long forms: `[0][size: 7]` for a body of fewer than 128
//! bits, `[1][size: 16]` up to `2^16 - 2`, `[1][2^16 - 1][size: 32]` for a huge
//! object's batch. Bit-exact symmetry of the prefix, its boundaries, its cost, garbage
//! and truncation, and batches on both sides of the boundary (and plain updates, which
//! carry no size) going through the real writer and reader.

mod common;

use common::core_suite::*;
use common::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::DeliveryStatus;
use replicate::internals::replication::{BATCH_SIZE_BITS, ReplicationConfig};

fn prefix_bits(size: usize) -> Option<usize> {
    let mut w = BitWriter::with_capacity_bits(64);
    replicate::internals::replication::write_batch_size(&mut w, size).then_some(w.position())
}

#[test]
fn small_bodies_take_an_8_bit_prefix_large_ones_17() {
    for size in [0, 1, 64, 127] {
        assert_eq!(prefix_bits(size), Some(8), "{size}");
    }
    for size in [128, 129, 1000, 65_534] {
        assert_eq!(prefix_bits(size), Some(17), "{size}");
    }
    // The escape value and beyond are the huge-object form, never a plain batch.
    assert_eq!(prefix_bits(65_535), None);
    assert_eq!(prefix_bits(1 << 20), None);
    let mut w = BitWriter::with_capacity_bits(64);
    assert!(!replicate::internals::replication::write_batch_size(
        &mut w, 65_535
    ));
    assert_eq!(w.position(), 0, "nothing written for a size it refuses");
}

#[test]
fn prefixes_read_back_bit_exactly_in_sequence() {
    let mut rng = Rng(7);
    let mut sizes = Vec::new();
    let mut w = BitWriter::with_capacity_bits(200_000);
    for _ in 0..5000 {
        let size = match rng.below(4) {
            0 => rng.below(128) as usize,
            1 => 120 + rng.below(16) as usize,
            2 => rng.below(65_535) as usize,
            _ => 65_530 + rng.below(5) as usize,
        };
        assert!(replicate::internals::replication::write_batch_size(
            &mut w, size
        ));
        // A marker after each prefix: a reader that consumed a wrong width misreads it.
        w.write_bits(0b101, 3);
        sizes.push(size);
    }
    let bytes = w.finish().unwrap();
    let mut r = BitReader::with_bit_len(&bytes, w.position());
    for &size in &sizes {
        assert_eq!(
            replicate::internals::replication::read_batch_size(&mut r),
            size
        );
        assert_eq!(r.read_bits(3), 0b101);
    }
    assert_eq!(r.bits_left(), 0);
    r.check().unwrap();
}

#[test]
fn the_huge_object_form_is_read() {
    let mut w = BitWriter::with_capacity_bits(64);
    w.write_bool(true);
    w.write_bits((1 << BATCH_SIZE_BITS) - 1, BATCH_SIZE_BITS);
    w.write_bits(3_000_000, 32);
    let bytes = w.finish().unwrap();
    let mut r = BitReader::with_bit_len(&bytes, w.position());
    assert_eq!(
        replicate::internals::replication::read_batch_size(&mut r),
        3_000_000
    );
    r.check().unwrap();
}

#[test]
fn truncated_or_random_prefixes_never_panic() {
    // Every truncation of the three forms sets the reader's error.
    for (bits, value) in [
        (8usize, 0x55u64),
        (17, 1 | (300 << 1)),
        (49, u64::MAX >> 15),
    ] {
        for cut in 0..bits {
            let bytes = value.to_le_bytes();
            let mut r = BitReader::with_bit_len(&bytes, cut);
            let _ = replicate::internals::replication::read_batch_size(&mut r);
            assert!(r.check().is_err(), "{bits}-bit form cut at {cut}");
        }
    }
    let mut rng = Rng(99);
    for _ in 0..10_000 {
        let len = rng.below(8) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let mut r = BitReader::new(&bytes);
        let size = replicate::internals::replication::read_batch_size(&mut r);
        if r.check().is_ok() {
            assert!(size as u64 <= u32::MAX as u64);
        }
    }
}

/// How a batch is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// A plain update: no size.
    Plain,
    /// A long form with the short size prefix.
    Short,
    /// A long form with the long size prefix.
    Long,
}

/// The batches of a `Manual` packet (16-bit sequence, four streams): each one's object
/// index and form. A plain update carries no size, so the listing stops after one.
fn batch_forms(bytes: &[u8]) -> Vec<(u32, Form)> {
    use replicate::internals::replication::wire::SectionFrame;
    let mut r = BitReader::new(bytes);
    r.read_bits(16);
    assert_eq!(r.read_bits(5), 3, "four streams");
    assert_eq!(r.read_bits(4) & 1, 1, "replication data");
    assert!(!r.read_bool(), "no destroys");
    let mut frame = SectionFrame::begin_read(&mut r).unwrap();
    let mut out = Vec::new();
    while let Some(index) = frame.read_index(&mut r).unwrap() {
        if !r.read_bool() {
            out.push((index, Form::Plain));
            break;
        }
        let long = r.read_bool();
        let size = if long {
            r.read_bits(BATCH_SIZE_BITS)
        } else {
            r.read_bits(7)
        };
        assert!(
            long == (size >= 128),
            "{index}: {size} bits, long form {long}"
        );
        assert!(!r.read_bool(), "no exports in these batches");
        r.skip(size as usize - 1);
        out.push((index, if long { Form::Long } else { Form::Short }));
    }
    r.check().unwrap();
    out
}

#[test]
fn batches_on_both_sides_of_the_short_form_reach_the_client() {
    // No delta: bodies are the full masked state. A `Counted` update is a few dozen
    // bits (short form); a `Big` creation, six u64 members, is several hundred (long).
    let config = ReplicationConfig {
        delta: replicate::internals::replication::DeltaSettings {
            enabled: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut m = Manual::with_config(config);
    let small = m
        .server
        .objects_mut()
        .spawn(Counted {
            n: 1,
            ..Default::default()
        })
        .unwrap();
    let big = m
        .server
        .objects_mut()
        .spawn(Big {
            a: u64::MAX,
            b: 2,
            c: 3,
            d: 4,
            e: 5,
            f: u64::MAX - 6,
            ..Default::default()
        })
        .unwrap();
    let (seq, bytes) = m.tick_and_write();
    // Creations, in index order (equal priority): `Counted` then `Big`.
    let (i_small, i_big) = (
        local_index(&m.server, m.conn, small),
        local_index(&m.server, m.conn, big),
    );
    assert_eq!((i_small, i_big), (0, 1), "dense indices in spawn order");
    assert_eq!(
        batch_forms(&bytes),
        vec![(i_small, Form::Short), (i_big, Form::Long)]
    );
    m.deliver_to_client(&bytes);
    m.ack(seq, DeliveryStatus::Delivered);
    assert_eq!(m.client.get::<Counted>(small).unwrap().n, 1);
    assert_eq!(m.client.get::<Big>(big).unwrap().f, u64::MAX - 6);
    let bits_before = m.server.writer(m.conn).unwrap().stats().bits;
    m.server.objects_mut().get_mut::<Counted>(small).unwrap().n = 77;
    let (seq, bytes) = m.tick_and_write();
    assert_eq!(batch_forms(&bytes), vec![(i_small, Form::Plain)]);
    m.deliver_to_client(&bytes);
    m.ack(seq, DeliveryStatus::Delivered);
    assert_eq!(m.client.get::<Counted>(small).unwrap().n, 77);
    m.server.objects_mut().get_mut::<Big>(big).unwrap().c = u64::MAX - 3;
    m.round_trip();
    assert_eq!(m.client.get::<Big>(big).unwrap().c, u64::MAX - 3);
    assert!(m.server.writer(m.conn).unwrap().stats().bits > bits_before);
    // Nothing was reported broken on either form.
    assert_eq!(m.client.world().stats().broken_objects, 0);
    assert_eq!(m.client.world().stats().framing_errors, 0);
}
