//! Property tests for the objects section's codes (`replication::wire`): object
//! indices, batch heads and plain-update masks written through one `SectionFrame` and
//! read back through another, bit-exactly and with the frame state in step; the bits
//! each code announces; and hostile input (random bytes) that must yield an error or a
//! value, never a panic.

use proptest::prelude::*;
use replicate::ChangeMask;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::replication::wire::{
    BatchHead, HEAD_HISTORY, INDEX_WIDTH_BITS, MASK_HISTORY, Prediction, SectionFrame, index_width,
};

/// One batch's codes: its object index, head and (type, mask).
#[derive(Debug, Clone)]
struct Batch {
    index: u32,
    head: BatchHead,
    protocol: u16,
    mask: u64,
}

const MASK_BITS: [u32; 3] = [2, 8, 20];

fn prediction() -> impl Strategy<Value = Option<Prediction>> {
    prop::option::of(prop_oneof![
        (1u32..=3).prop_map(Prediction::Linear),
        Just(Prediction::Quadratic),
    ])
}

fn head() -> impl Strategy<Value = BatchHead> {
    prop_oneof![
        Just(BatchHead::Full),
        (
            prop::option::of(0u8..8),
            prop::option::of(0u8..8),
            prop::option::of(prediction()),
        )
            .prop_map(|(reference, nominate, prediction)| BatchHead::Reference {
                reference,
                nominate,
                prediction,
            }),
        (prop::option::of(0u8..8), any::<bool>()).prop_map(|(created, vs_default)| {
            BatchHead::Fresh {
                created,
                vs_default,
            }
        }),
    ]
}

fn batches(end: u32) -> impl Strategy<Value = Vec<Batch>> {
    // Runs of consecutive indices, jumps forward and back; a few heads and masks that
    // repeat, as in a real section.
    let batch = (
        prop_oneof![3 => Just(None), 1 => (0..end).prop_map(Some)],
        prop_oneof![3 => Just(None), 1 => head().prop_map(Some)],
        0u16..3,
        prop_oneof![3 => 0u64..4, 1 => any::<u64>()],
    );
    prop::collection::vec(batch, 1..120).prop_map(move |v| {
        let mut next = 0u32;
        let mut last_head = BatchHead::Full;
        v.into_iter()
            .map(|(jump, head, protocol, mask)| {
                let index = jump.unwrap_or(next) % end;
                next = index + 1;
                if let Some(h) = head {
                    last_head = h;
                }
                let bits = MASK_BITS[protocol as usize];
                Batch {
                    index,
                    head: last_head,
                    protocol,
                    mask: mask & ((1u64 << bits) - 1),
                }
            })
            .collect()
    })
}

fn mask_of(b: &Batch) -> ChangeMask {
    ChangeMask::from_u64(MASK_BITS[b.protocol as usize], b.mask)
}

/// Whether the reader's baseline named by a head's reference has a prior: the
/// writer's heads carry a prediction code exactly then.
fn has_prior(head: &BatchHead) -> bool {
    matches!(
        head,
        BatchHead::Reference {
            prediction: Some(_),
            ..
        }
    )
}

/// Writes the section's codes as the writer frames a plain update: index, head and mask
/// (or their recent ranks). Returns the bits and what each batch took.
fn write_section(end: u32, batches: &[Batch]) -> (Vec<u8>, usize, Vec<usize>) {
    let mut w = BitWriter::with_capacity_bits(1 << 16);
    let mut frame = SectionFrame::begin_write(&mut w, end);
    let mut sizes = Vec::new();
    for b in batches {
        let start = w.position();
        frame.write_index(&mut w, b.index);
        frame.write_head(&mut w, &b.head);
        let mask = mask_of(b);
        frame.write_mask(&mut w, b.protocol, &mask, b.head.mask_hint(false));
        frame.note_plain(b.head, b.protocol, &mask);
        sizes.push(w.position() - start);
    }
    frame.write_end(&mut w);
    let len = w.position();
    (w.finish().unwrap(), len, sizes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sections_round_trip_bit_exactly(end in 1u32..5000, batches in batches(5000)) {
        let batches: Vec<Batch> = batches
            .into_iter()
            .map(|b| Batch { index: b.index % end, ..b })
            .collect();
        let (bytes, len, _) = write_section(end, &batches);
        let mut r = BitReader::with_bit_len(&bytes, len);
        let mut frame = SectionFrame::begin_read(&mut r).unwrap();
        for b in &batches {
            prop_assert_eq!(frame.read_index(&mut r).unwrap(), Some(b.index));
            let head = frame.read_head(&mut r, |_| has_prior(&b.head)).unwrap();
            prop_assert_eq!(head, b.head);
            let bits = MASK_BITS[b.protocol as usize];
            let mask = frame
                .read_mask(&mut r, b.protocol, bits, head.mask_hint(false))
                .unwrap();
            prop_assert_eq!(&mask, &mask_of(b));
            frame.note_plain(head, b.protocol, &mask);
        }
        prop_assert_eq!(frame.read_index(&mut r).unwrap(), None, "the end marker");
        prop_assert_eq!(r.bits_left(), 0);
    }

    #[test]
    fn no_code_costs_more_than_its_explicit_form_plus_its_selector(
        batches in batches(4096),
    ) {
        let (_, _, sizes) = write_section(4096, &batches);
        let width = index_width(4096) as usize;
        for (b, size) in batches.iter().zip(sizes) {
            let explicit_mask = mask_of(b).written_bits(b.head.mask_hint(false));
            let mut head = BitWriter::with_capacity_bits(64);
            b.head.write(&mut head);
            let worst =
                (2 + width) + (HEAD_HISTORY + 1 + head.position()) + (MASK_HISTORY + explicit_mask);
            prop_assert!(size <= worst, "{b:?}: {size} > {worst}");
        }
    }

    #[test]
    fn random_bytes_read_as_codes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut r = BitReader::new(&bytes);
        let Ok(mut frame) = SectionFrame::begin_read(&mut r) else {
            return Ok(());
        };
        for protocol in (0u16..3).cycle().take(40) {
            let Ok(Some(index)) = frame.read_index(&mut r) else { break };
            prop_assert!(index < 1 << 24);
            let Ok(head) = frame.read_head(&mut r, |k| k == Some(1)) else { break };
            let bits = MASK_BITS[protocol as usize];
            match frame.read_mask(&mut r, protocol, bits, head.mask_hint(false)) {
                Ok(mask) => {
                    prop_assert_eq!(mask.len(), bits);
                    frame.note_plain(head, protocol, &mask);
                }
                Err(_) => break,
            }
        }
    }
}

#[test]
fn the_width_field_holds_every_width() {
    for end in [1u32, 2, 255, 256, 1 << 20, (1 << 24) - 1] {
        let w = index_width(end);
        assert!((1..1 << INDEX_WIDTH_BITS).contains(&w));
        // Every index below `end` is below the end marker, `2^w - 1`.
        assert!(u64::from(end) < 1u64 << w, "{end}");
    }
}

#[test]
fn a_repeated_mask_names_a_rank_the_reader_has() {
    // A mask repeat with nothing before it, and a rank past the recent masks, are
    // errors, not panics or stale masks.
    let mut w = BitWriter::with_capacity_bits(64);
    w.write_bits(0b10, 2); // [0][1]: rank 1
    let len = w.position();
    let bytes = w.finish().unwrap();
    let frame = SectionFrame::new(8);
    let mut r = BitReader::with_bit_len(&bytes, len);
    assert!(frame.read_mask(&mut r, 0, 8, None).is_err());
    let mut frame = SectionFrame::new(8);
    frame.note_plain(BatchHead::Full, 0, &ChangeMask::from_u64(8, 3));
    let mut r = BitReader::with_bit_len(&bytes, len);
    assert!(
        frame.read_mask(&mut r, 0, 8, None).is_err(),
        "only rank 0 is known"
    );
    // Rank 0 is known, but not as a mask of another width.
    let rank0 = [1u8];
    assert!(
        frame
            .read_mask(&mut BitReader::with_bit_len(&rank0, 1), 0, 8, None)
            .is_ok()
    );
    assert!(
        frame
            .read_mask(&mut BitReader::with_bit_len(&rank0, 1), 0, 9, None)
            .is_err()
    );
}
