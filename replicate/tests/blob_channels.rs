//! Property tests for the blob layer: message channels under loss, duplication and
//! reordering deliver reliable messages exactly once (in order where ordered) and
//! unreliable ones at most once; split blobs reassemble bit-identical; malformed parts
//! and random bytes never panic.

use proptest::prelude::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::blob::{
    BlobAssembler, ChannelConfig, ChannelReceiver, ChannelSender, DeliveryMode, NetBlob,
    PartAccepted, PartialBlob, SplitConfig, split_blob,
};
use replicate::internals::connection::DeliveryStatus;

fn msg(i: u32, len: usize) -> NetBlob {
    let mut bytes = i.to_le_bytes().to_vec();
    bytes.resize(4 + len, (i % 251) as u8);
    NetBlob::from_bytes(bytes)
}

fn id(blob: &NetBlob) -> u32 {
    u32::from_le_bytes(blob.bytes()[..4].try_into().unwrap())
}

/// Runs `count` messages through a lossy, duplicating, reordering link; returns the
/// ids the receiver delivered.
fn run(mode: DeliveryMode, count: u32, seed: u64, loss: u32, dup: u32) -> Vec<u32> {
    let config = ChannelConfig::new(mode);
    let mut tx = ChannelSender::new(config);
    let mut rx = ChannelReceiver::new(config);
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut pushed = 0;
    let mut in_flight: Vec<(Vec<u8>, Vec<u64>, bool)> = Vec::new();
    let mut delivered = Vec::new();
    for _tick in 0..4000 {
        while pushed < count && tx.pending() < 64 {
            tx.push(msg(pushed, (next() % 40) as usize)).unwrap();
            pushed += 1;
        }
        let mut w = BitWriter::with_capacity_bytes(200);
        let mut rec = Vec::new();
        if tx.write(&mut w, &mut rec) > 0 {
            let arrives = next() % 100 >= loss as u64;
            in_flight.push((w.finish().unwrap(), rec, arrives));
        }
        // Deliver a random in-flight packet (reordering), sometimes twice.
        if !in_flight.is_empty() && next() % 3 != 0 {
            let i = (next() % in_flight.len() as u64) as usize;
            let (bytes, rec, arrives) = in_flight.swap_remove(i);
            if arrives {
                rx.read(&mut BitReader::new(&bytes)).unwrap();
                if next() % 100 < dup as u64 {
                    rx.read(&mut BitReader::new(&bytes)).unwrap();
                }
            }
            let status = if arrives {
                DeliveryStatus::Delivered
            } else {
                DeliveryStatus::Lost
            };
            tx.on_delivery(&rec, status);
        }
        while let Some(m) = rx.receive() {
            delivered.push(id(&m));
        }
        if pushed == count && tx.is_idle() && in_flight.is_empty() {
            break;
        }
    }
    delivered
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn reliable_ordered_exactly_once_in_order(seed in any::<u64>(), loss in 0u32..40, dup in 0u32..30) {
        let got = run(DeliveryMode::ReliableOrdered, 300, seed, loss, dup);
        prop_assert_eq!(got, (0..300).collect::<Vec<_>>());
    }

    #[test]
    fn reliable_unordered_exactly_once(seed in any::<u64>(), loss in 0u32..40, dup in 0u32..30) {
        let mut got = run(DeliveryMode::ReliableUnordered, 300, seed, loss, dup);
        got.sort_unstable();
        prop_assert_eq!(got, (0..300).collect::<Vec<_>>());
    }

    #[test]
    fn unreliable_at_most_once(seed in any::<u64>(), loss in 0u32..40) {
        let got = run(DeliveryMode::Unreliable, 300, seed, loss, 0);
        let mut sorted = got.clone();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), got.len());
        prop_assert!(got.iter().all(|&i| i < 300));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        for mode in [DeliveryMode::ReliableOrdered, DeliveryMode::ReliableUnordered, DeliveryMode::Unreliable] {
            let mut rx = ChannelReceiver::new(ChannelConfig::new(mode));
            let _ = rx.read(&mut BitReader::new(&bytes));
            prop_assert!(rx.buffered_bits() <= ChannelConfig::new(mode).max_buffered_bits);
        }
        let config = SplitConfig { max_part_bits: 1024, max_part_count: 64 };
        let mut asm = BlobAssembler::new(config);
        let mut r = BitReader::new(&bytes);
        while let Ok(part) = PartialBlob::read(&mut r, &config) {
            let _ = asm.add_part(part);
            prop_assert!(asm.buffered_bits() as u64 <= config.max_blob_bits());
        }
    }

    #[test]
    fn split_reassemble_identity(len in 1usize..20_000, part_bits in 1u32..2048) {
        let bytes: Vec<u8> = (0..len.div_ceil(8)).map(|i| (i * 131 + 17) as u8).collect();
        let blob = NetBlob::from_bits(bytes, len);
        let config = SplitConfig { max_part_bits: part_bits, max_part_count: 65536 };
        let parts = split_blob(&blob, &config).unwrap();
        let mut w = BitWriter::with_capacity_bits(len * 2 + parts.len() * 64);
        for p in &parts {
            p.write(&mut w);
        }
        let wire = w.finish().unwrap();
        let mut r = BitReader::new(&wire);
        let mut asm = BlobAssembler::new(config);
        let mut out = None;
        for _ in 0..parts.len() {
            if let PartAccepted::Complete(b) = asm.add_part(PartialBlob::read(&mut r, &config).unwrap()).unwrap() {
                out = Some(b);
            }
        }
        prop_assert_eq!(out, Some(blob));
    }

    #[test]
    fn mutated_parts_never_panic(flips in proptest::collection::vec((0usize..4000, 0u8..8), 1..8)) {
        let blob = NetBlob::from_bytes((0..400).map(|i| i as u8).collect());
        let config = SplitConfig { max_part_bits: 512, max_part_count: 16 };
        let parts = split_blob(&blob, &config).unwrap();
        let mut w = BitWriter::with_capacity_bits(10_000);
        for p in &parts {
            p.write(&mut w);
        }
        let mut wire = w.finish().unwrap();
        for (at, bit) in flips {
            let i = at % wire.len();
            wire[i] ^= 1 << bit;
        }
        let mut r = BitReader::new(&wire);
        let mut asm = BlobAssembler::new(config);
        while let Ok(part) = PartialBlob::read(&mut r, &config) {
            if let Ok(PartAccepted::Complete(b)) = asm.add_part(part) {
                prop_assert!(b.bit_len() as u64 <= config.max_blob_bits());
            }
        }
    }
}
