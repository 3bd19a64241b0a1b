//! Malformed huge-object parts: wrong index, wrong count, oversized, too many parts or
//! transfers are rejected without a panic and without exceeding the memory cap; a
//! valid transfer still completes afterwards.

use proptest::prelude::*;
use replicate::bits::BitWriter;
use replicate::internals::blob::{NetBlob, PartialBlob, SplitConfig, split_blob};
use replicate::internals::replication::HugeObjectReceiver;
use replicate::internals::replication::attachment::AttachmentConfig;

/// A part message as the huge-object stream sends it: `[kind 0: 2][id: 16][part]`.
fn part_msg(id: u16, part: &PartialBlob) -> NetBlob {
    let mut w = BitWriter::with_capacity_bits(64 + part.wire_bits());
    w.write_bits(0, 2);
    w.write_bits(id as u64, 16);
    part.write(&mut w);
    NetBlob::from_writer(&w)
}

/// A raw part header with arbitrary fields and `payload_bits` of payload.
fn raw_part(id: u16, index: u16, count_minus_one: u16, bits: u16, payload_bits: usize) -> NetBlob {
    let mut w = BitWriter::with_capacity_bits(128 + payload_bits);
    w.write_bits(0, 2);
    w.write_bits(id as u64, 16);
    w.write_bits(index as u64, 16);
    if index == 0 {
        w.write_bits(count_minus_one as u64, 16);
    }
    w.write_bits(bits as u64, 16);
    for i in 0..payload_bits {
        w.write_bool(i % 3 == 0);
    }
    NetBlob::from_writer(&w)
}

fn config() -> AttachmentConfig {
    AttachmentConfig {
        split: SplitConfig {
            max_part_bits: 256,
            max_part_count: 64,
        },
        max_huge_in_transit: 4,
        max_huge_receive_bits: 256 * 100,
        ..AttachmentConfig::default()
    }
}

fn blob(seed: u8, bytes: usize) -> NetBlob {
    NetBlob::from_bytes((0..bytes).map(|i| (i as u8).wrapping_mul(seed)).collect())
}

#[test]
fn specific_malformations_are_rejected_and_reset() {
    let cfg = config();
    let mut rx = HugeObjectReceiver::new(&cfg);
    let good = blob(7, 200); // 1600 bits: 7 parts of 256
    let parts = split_blob(&good, &cfg.split).unwrap();
    assert_eq!(parts.len(), 7);

    // Wrong index: part 2 after part 0.
    assert!(rx.accept_message(&part_msg(1, &parts[0])).is_none());
    assert!(rx.accept_message(&part_msg(1, &parts[2])).is_none());
    assert_eq!(rx.assembling(), 0, "reset on a bad part");
    assert_eq!(rx.stats().rejected, 1);

    // A part of a transfer that never started.
    assert!(rx.accept_message(&part_msg(2, &parts[3])).is_none());
    assert_eq!(rx.stats().rejected, 2);

    // Count above max_part_count.
    rx.accept_message(&raw_part(3, 0, 200, 256, 256));
    assert_eq!(rx.stats().rejected, 3);
    assert_eq!(rx.assembling(), 0);

    // Oversized part payload.
    rx.accept_message(&raw_part(4, 0, 3, 1000, 1000));
    assert_eq!(rx.stats().rejected, 4);

    // Announced size above the memory cap (64 parts * 256 > 100 * 256 is fine, but
    // two such transfers are not).
    rx.accept_message(&raw_part(5, 0, 63, 256, 256));
    assert_eq!(rx.assembling(), 1);
    rx.accept_message(&raw_part(6, 0, 63, 256, 256));
    assert_eq!(rx.assembling(), 1, "the second would exceed the cap");
    assert!(rx.reserved_bits() <= cfg.max_huge_receive_bits);
    assert_eq!(rx.stats().rejected, 5);

    // Too many parts: a first part announcing 2 parts followed by three.
    let small = split_blob(&blob(3, 40), &cfg.split).unwrap(); // 320 bits: 2 parts
    assert_eq!(small.len(), 2);
    rx.accept_message(&part_msg(8, &small[0]));
    assert!(rx.accept_message(&part_msg(8, &small[1])).is_some());
    rx.accept_message(&part_msg(8, &small[1]));
    assert_eq!(
        rx.stats().rejected,
        6,
        "a part after completion is rejected"
    );

    // Truncated message.
    rx.accept_message(&NetBlob::from_bits(vec![0], 5));
    assert_eq!(rx.stats().rejected, 7);

    // A valid transfer still completes.
    let mut done = None;
    for p in &parts {
        done = rx.accept_message(&part_msg(9, p)).or(done);
    }
    assert_eq!(done, Some(good));
}

proptest! {
    #[test]
    fn random_part_streams_never_panic_nor_exceed_the_cap(
        ops in proptest::collection::vec(
            (0u16..6, 0u16..80, 0u16..100, 0u16..400, 0usize..400),
            1..200,
        )
    ) {
        let cfg = config();
        let mut rx = HugeObjectReceiver::new(&cfg);
        for (id, index, count, bits, payload) in ops {
            let _ = rx.accept_message(&raw_part(id, index, count, bits, payload));
            prop_assert!(rx.reserved_bits() <= cfg.max_huge_receive_bits);
            prop_assert!(rx.assembling() <= cfg.max_huge_in_transit);
        }
    }

    #[test]
    fn any_blob_survives_split_and_interleaved_reassembly(
        a in proptest::collection::vec(any::<u8>(), 1..600),
        b in proptest::collection::vec(any::<u8>(), 1..600),
    ) {
        let cfg = config();
        let mut rx = HugeObjectReceiver::new(&cfg);
        let (ba, bb) = (NetBlob::from_bytes(a), NetBlob::from_bytes(b));
        let pa = split_blob(&ba, &cfg.split).unwrap();
        let pb = split_blob(&bb, &cfg.split).unwrap();
        let mut got = Vec::new();
        for i in 0..pa.len().max(pb.len()) {
            if let Some(p) = pa.get(i) {
                got.extend(rx.accept_message(&part_msg(1, p)).map(|x| (1, x)));
            }
            if let Some(p) = pb.get(i) {
                got.extend(rx.accept_message(&part_msg(2, p)).map(|x| (2, x)));
            }
        }
        got.sort_by_key(|(id, _)| *id);
        prop_assert_eq!(got, vec![(1, ba), (2, bb)]);
        prop_assert_eq!(rx.reserved_bits(), 0);
    }
}
