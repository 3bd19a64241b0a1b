//! The bit stream checked against a slow reference oracle.
//!
//! [`RefWriter`] and [`RefReader`] model the documented behaviour of
//! `replicate::bits::{BitWriter, BitReader}` over a `bitvec::BitVec<u8, Lsb0>`, one bit
//! at a time and with no word packing, masks or spare words: bit `i` of the stream is
//! bit `i % 8` of byte `i / 8`. The property tests drive both with the same random
//! operation sequences and compare them after every step, bit for bit: the bytes, the
//! position, the capacity, the overflow / error flag and the exact error value, and
//! every value read.
//!
//! The model, in one place:
//! - a write that does not fit the capacity sets a sticky overflow (the first one is
//!   kept), writes nothing, and every later write (including `patch_bits`) is ignored
//!   until a rollback to a mark taken before the overflow;
//! - `seek_back` / `rollback` discard everything after the target position;
//! - a substream narrows the capacity and, on commit, is either kept or rolled back
//!   as a whole;
//! - no mark (even a stale one from before a `reset`) restores a capacity above the
//!   one given at construction or the last reset;
//! - a read past the end sets a sticky error, returns zeroes and does not move;
//! - a reader substream (and `seek` inside it) is confined to its own range.

use bitvec::prelude::*;
use proptest::prelude::*;
use replicate::bits::{BitError, BitReader, BitWriter, WriterMark};

// ---------------------------------------------------------------------------------
// The oracle
// ---------------------------------------------------------------------------------

/// The reference writer: the stream is exactly the bits in `bits`.
#[derive(Debug, Clone)]
struct RefWriter {
    bits: BitVec<u8, Lsb0>,
    capacity: usize,
    /// The capacity at construction or the last reset; no mark widens past it.
    limit: usize,
    overflow: Option<BitError>,
}

/// The reference writer's mark.
#[derive(Debug, Clone, Copy)]
struct RefMark {
    pos: usize,
    capacity: usize,
    overflowed: bool,
}

impl RefWriter {
    fn new(capacity: usize) -> Self {
        Self {
            bits: BitVec::new(),
            capacity,
            limit: capacity,
            overflow: None,
        }
    }

    fn reset(&mut self, capacity: usize) {
        *self = Self::new(capacity);
    }

    fn position(&self) -> usize {
        self.bits.len()
    }

    fn bits_left(&self) -> usize {
        self.capacity.saturating_sub(self.position())
    }

    fn reserve(&mut self, bits: usize) -> bool {
        if self.overflow.is_some() {
            return false;
        }
        if bits > self.bits_left() {
            self.overflow = Some(BitError::WriteOverflow {
                position: self.position(),
                requested: bits,
                capacity: self.capacity,
            });
            return false;
        }
        true
    }

    fn write_bits(&mut self, value: u64, bits: u32) {
        if bits == 0 || !self.reserve(bits as usize) {
            return;
        }
        self.bits
            .extend_from_bitslice(&value.view_bits::<Lsb0>()[..bits as usize]);
    }

    fn write_bool(&mut self, value: bool) -> bool {
        if self.reserve(1) {
            self.bits.push(value);
        }
        value
    }

    fn write_bytes(&mut self, bytes: &[u8]) {
        if !self.reserve(bytes.len() * 8) {
            return;
        }
        self.bits.extend_from_bitslice(bytes.view_bits::<Lsb0>());
    }

    fn align_to_byte(&mut self) {
        let pad = (8 - self.position() % 8) % 8;
        if pad > 0 && self.reserve(pad) {
            self.bits.resize(self.position() + pad, false);
        }
    }

    fn patch_bits(&mut self, position: usize, value: u64, bits: u32) {
        if bits == 0 || self.overflow.is_some() {
            return;
        }
        if bits > 64 || position.saturating_add(bits as usize) > self.position() {
            self.overflow = Some(BitError::WriteOverflow {
                position,
                requested: bits as usize,
                capacity: self.position(),
            });
            return;
        }
        let n = bits as usize;
        self.bits[position..position + n].clone_from_bitslice(&value.view_bits::<Lsb0>()[..n]);
    }

    fn seek_back(&mut self, position: usize) {
        self.bits.truncate(position);
    }

    fn mark(&self) -> RefMark {
        RefMark {
            pos: self.position(),
            capacity: self.capacity,
            overflowed: self.overflow.is_some(),
        }
    }

    fn rollback(&mut self, mark: RefMark) {
        self.bits.truncate(mark.pos);
        self.capacity = mark.capacity.min(self.limit);
        if !mark.overflowed {
            self.overflow = None;
        }
    }

    fn begin_substream(&mut self, max_bits: usize) -> RefMark {
        let mark = self.mark();
        self.capacity = self.capacity.min(self.position().saturating_add(max_bits));
        mark
    }

    fn commit_substream(&mut self, mark: RefMark) -> Result<(), BitError> {
        match self.overflow {
            Some(err) if !mark.overflowed => {
                self.rollback(mark);
                Err(err)
            }
            _ => {
                self.capacity = mark.capacity.min(self.limit);
                Ok(())
            }
        }
    }

    fn write_from(&mut self, other: &RefWriter) {
        if self.reserve(other.position()) {
            self.bits.extend_from_bitslice(&other.bits);
        }
    }

    /// The stream as bytes, the last one zero-padded.
    fn to_bytes(&self) -> Vec<u8> {
        self.bits
            .chunks(8)
            .map(|byte| byte.load_le::<u8>())
            .collect()
    }
}

/// The reference reader: reads `bits[start..end]`, positions absolute in `bits`.
#[derive(Debug, Clone)]
struct RefReader<'a> {
    bits: &'a BitSlice<u8, Lsb0>,
    pos: usize,
    start: usize,
    end: usize,
    error: Option<BitError>,
}

impl<'a> RefReader<'a> {
    fn new(data: &'a [u8], bit_len: usize) -> Self {
        let bits = data.view_bits::<Lsb0>();
        Self {
            bits,
            pos: 0,
            start: 0,
            end: bit_len.min(bits.len()),
            error: None,
        }
    }

    fn bits_left(&self) -> usize {
        self.end - self.pos
    }

    fn set_overflow(&mut self, requested: usize) {
        self.error.get_or_insert(BitError::ReadOverflow {
            position: self.pos,
            requested,
            available: self.bits_left(),
        });
    }

    fn reserve(&mut self, bits: usize) -> bool {
        if self.error.is_some() {
            return false;
        }
        if bits > self.bits_left() {
            self.set_overflow(bits);
            return false;
        }
        true
    }

    fn read_bits(&mut self, bits: u32) -> u64 {
        let n = bits as usize;
        if n == 0 || !self.reserve(n) {
            return 0;
        }
        let value = self.bits[self.pos..self.pos + n].load_le::<u64>();
        self.pos += n;
        value
    }

    fn read_bool(&mut self) -> bool {
        if !self.reserve(1) {
            return false;
        }
        self.pos += 1;
        self.bits[self.pos - 1]
    }

    fn read_bytes(&mut self, out: &mut [u8]) {
        if !self.reserve(out.len() * 8) {
            out.fill(0);
            return;
        }
        for (byte, chunk) in out.iter_mut().zip(self.bits[self.pos..].chunks(8)) {
            *byte = chunk.load_le::<u8>();
        }
        self.pos += out.len() * 8;
    }

    fn align_to_byte(&mut self) {
        let pad = (8 - self.pos % 8) % 8;
        if pad > 0 && self.reserve(pad) {
            self.pos += pad;
        }
    }

    fn skip(&mut self, bits: usize) {
        if self.reserve(bits) {
            self.pos += bits;
        }
    }

    fn seek(&mut self, position: usize) {
        if position < self.start || position > self.end {
            self.set_overflow(position.saturating_sub(self.pos));
        } else {
            self.pos = position;
        }
    }

    fn substream(&mut self, bits: usize) -> RefReader<'a> {
        if !self.reserve(bits) {
            return RefReader {
                bits: self.bits,
                pos: 0,
                start: 0,
                end: 0,
                error: self.error,
            };
        }
        let sub = RefReader {
            bits: self.bits,
            pos: self.pos,
            start: self.pos,
            end: self.pos + bits,
            error: None,
        };
        self.pos += bits;
        sub
    }
}

// ---------------------------------------------------------------------------------
// Comparing the two
// ---------------------------------------------------------------------------------

fn assert_writers_agree(w: &BitWriter, r: &RefWriter, step: &str) {
    assert_writers_agree_inner(w, r, step, true);
}

/// `well_nested` is false when marks and substreams may have been used out of order
/// or after a reset (committing a substream whose begin was rolled back restores a
/// stale, narrower capacity, so the position can then exceed the capacity: a caller
/// bug, but it must still agree with the model and never panic).
fn assert_writers_agree_inner(w: &BitWriter, r: &RefWriter, step: &str, well_nested: bool) {
    assert_eq!(w.position(), r.position(), "position after {step}");
    assert_eq!(w.capacity(), r.capacity, "capacity after {step}");
    assert_eq!(w.bits_left(), r.bits_left(), "bits_left after {step}");
    assert_eq!(
        w.byte_len(),
        r.position().div_ceil(8),
        "byte_len after {step}"
    );
    assert_eq!(w.error(), r.overflow, "overflow after {step}");
    assert_eq!(w.is_overflown(), r.overflow.is_some(), "flag after {step}");
    if well_nested {
        assert!(
            w.position() <= w.capacity(),
            "wrote past capacity after {step}"
        );
    }
    assert_eq!(w.to_bytes(), r.to_bytes(), "bytes after {step}");
    match r.overflow {
        Some(err) => assert_eq!(w.finish(), Err(err), "finish after {step}"),
        None => assert_eq!(w.finish(), Ok(r.to_bytes()), "finish after {step}"),
    }
}

fn assert_readers_agree(a: &BitReader, b: &RefReader, step: &str) {
    assert_eq!(a.position(), b.pos, "position after {step}");
    assert_eq!(a.bits_left(), b.bits_left(), "bits_left after {step}");
    assert_eq!(a.is_overflown(), b.error.is_some(), "flag after {step}");
    assert_eq!(a.check(), b.error.map_or(Ok(()), Err), "error after {step}");
}

// ---------------------------------------------------------------------------------
// Writer operations
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum WriteOp {
    Bits(u64, u32),
    Bool(bool),
    Bytes(Vec<u8>),
    Align,
    Mark,
    /// Roll back to the n-th mark taken so far (modulo their number).
    Rollback(usize),
    BeginSubstream(usize),
    /// Commit the innermost open substream.
    CommitSubstream,
    /// Patch at `selector % (position + 8)`, so some patches fall outside what was written.
    Patch(usize, u64, u32),
    /// Seek back to `selector % (position + 4)` (positions at or past the end are no-ops).
    SeekBack(usize),
    /// Append a second writer built from these writes, with this capacity.
    WriteFrom(Vec<(u64, u32)>, usize),
    Reset(usize),
}

fn write_op() -> impl Strategy<Value = WriteOp> {
    prop_oneof![
        8 => (any::<u64>(), 0u32..=64).prop_map(|(v, n)| WriteOp::Bits(v, n)),
        3 => any::<bool>().prop_map(WriteOp::Bool),
        2 => prop::collection::vec(any::<u8>(), 0..20).prop_map(WriteOp::Bytes),
        2 => Just(WriteOp::Align),
        2 => Just(WriteOp::Mark),
        2 => any::<usize>().prop_map(WriteOp::Rollback),
        2 => (0usize..300).prop_map(WriteOp::BeginSubstream),
        2 => Just(WriteOp::CommitSubstream),
        2 => (any::<usize>(), any::<u64>(), 0u32..=66)
            .prop_map(|(at, v, n)| WriteOp::Patch(at, v, n)),
        1 => any::<usize>().prop_map(WriteOp::SeekBack),
        1 => (prop::collection::vec((any::<u64>(), 0u32..=64), 0..6), 0usize..400)
            .prop_map(|(w, c)| WriteOp::WriteFrom(w, c)),
        1 => (0usize..1500).prop_map(WriteOp::Reset),
    ]
}

/// Runs `ops` on both writers, comparing them after every step.
///
/// With `well_nested`, marks and substreams are used as a caller should: rolling back
/// to a mark forgets the substreams begun after it, committing a substream forgets the
/// marks taken inside it, and a reset forgets them all. Without it, any mark or
/// substream ever taken may be used at any time.
fn run_writers(capacity: usize, ops: &[WriteOp], well_nested: bool) -> (BitWriter, RefWriter) {
    let mut w = BitWriter::with_capacity_bits(capacity);
    let mut r = RefWriter::new(capacity);
    // (taken at op index, the real mark, the oracle's mark)
    let mut marks: Vec<(usize, WriterMark, RefMark)> = Vec::new();
    let mut substreams: Vec<(usize, WriterMark, RefMark)> = Vec::new();
    assert_writers_agree(&w, &r, "new");
    for (i, op) in ops.iter().enumerate() {
        match op {
            WriteOp::Bits(v, n) => {
                w.write_bits(*v, *n);
                r.write_bits(*v, *n);
            }
            WriteOp::Bool(b) => {
                assert_eq!(w.write_bool(*b), *b);
                assert_eq!(r.write_bool(*b), *b);
            }
            WriteOp::Bytes(bytes) => {
                w.write_bytes(bytes);
                r.write_bytes(bytes);
            }
            WriteOp::Align => {
                w.align_to_byte();
                r.align_to_byte();
            }
            WriteOp::Mark => {
                let (a, b) = (w.mark(), r.mark());
                assert_eq!(a.position(), b.pos);
                marks.push((i, a, b));
            }
            WriteOp::Rollback(n) => {
                if !marks.is_empty() {
                    let (at, a, b) = marks[n % marks.len()];
                    w.rollback(a);
                    r.rollback(b);
                    if well_nested {
                        substreams.retain(|s| s.0 < at);
                    }
                }
            }
            WriteOp::BeginSubstream(max) => {
                substreams.push((i, w.begin_substream(*max), r.begin_substream(*max)));
            }
            WriteOp::CommitSubstream => {
                if let Some((at, a, b)) = substreams.pop() {
                    assert_eq!(w.commit_substream(a), r.commit_substream(b), "commit #{i}");
                    if well_nested {
                        marks.retain(|m| m.0 < at);
                    }
                }
            }
            WriteOp::Patch(at, v, n) => {
                let at = at % (r.position() + 8);
                w.patch_bits(at, *v, *n);
                r.patch_bits(at, *v, *n);
            }
            WriteOp::SeekBack(at) => {
                let at = at % (r.position() + 4);
                w.seek_back(at);
                r.seek_back(at);
            }
            WriteOp::WriteFrom(writes, cap) => {
                let mut w2 = BitWriter::with_capacity_bits(*cap);
                let mut r2 = RefWriter::new(*cap);
                for &(v, n) in writes {
                    w2.write_bits(v, n);
                    r2.write_bits(v, n);
                }
                assert_writers_agree(&w2, &r2, "building the source of write_from");
                w.write_from(&w2);
                r.write_from(&r2);
            }
            WriteOp::Reset(cap) => {
                // Marks do not survive a reset (unless the caller is buggy).
                if well_nested {
                    marks.clear();
                    substreams.clear();
                }
                w.reset(*cap);
                r.reset(*cap);
            }
        }
        assert_writers_agree_inner(&w, &r, &format!("op #{i} {op:?}"), well_nested);
    }
    (w, r)
}

// ---------------------------------------------------------------------------------
// Reader operations
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum ReadOp {
    Bits(u32),
    Bool,
    Bytes(usize),
    Align,
    Skip(usize),
    /// Seek to `selector % (end + 16)`.
    Seek(usize),
    /// Push a substream of this many bits.
    Substream(usize),
    /// Pop back to the parent reader (if inside a substream).
    Pop,
    SetOverflow(usize),
}

fn read_op() -> impl Strategy<Value = ReadOp> {
    prop_oneof![
        8 => (0u32..=64).prop_map(ReadOp::Bits),
        3 => Just(ReadOp::Bool),
        2 => (0usize..12).prop_map(ReadOp::Bytes),
        2 => Just(ReadOp::Align),
        2 => (0usize..80).prop_map(ReadOp::Skip),
        2 => any::<usize>().prop_map(ReadOp::Seek),
        2 => (0usize..200).prop_map(ReadOp::Substream),
        2 => Just(ReadOp::Pop),
        1 => (0usize..100).prop_map(ReadOp::SetOverflow),
    ]
}

/// Runs `ops` on both readers over `data` (first `bit_len` bits), comparing every
/// value read and the state after every step.
fn run_readers(data: &[u8], bit_len: usize, ops: &[ReadOp]) {
    let mut stack = vec![(
        BitReader::with_bit_len(data, bit_len),
        RefReader::new(data, bit_len),
    )];
    for (i, op) in ops.iter().enumerate() {
        let step = format!("op #{i} {op:?} at depth {}", stack.len() - 1);
        let Some((a, b)) = stack.last_mut() else {
            unreachable!("the stack always holds the root reader")
        };
        match op {
            ReadOp::Bits(n) => assert_eq!(a.read_bits(*n), b.read_bits(*n), "{step}"),
            ReadOp::Bool => assert_eq!(a.read_bool(), b.read_bool(), "{step}"),
            ReadOp::Bytes(len) => {
                let mut x = vec![0xA5; *len];
                let mut y = vec![0x5A; *len];
                a.read_bytes(&mut x);
                b.read_bytes(&mut y);
                assert_eq!(x, y, "{step}");
            }
            ReadOp::Align => {
                a.align_to_byte();
                b.align_to_byte();
            }
            ReadOp::Skip(n) => {
                a.skip(*n);
                b.skip(*n);
            }
            ReadOp::Seek(at) => {
                let at = at % (b.end + 16);
                a.seek(at);
                b.seek(at);
            }
            ReadOp::Substream(n) => {
                let (sa, sb) = (a.substream(*n), b.substream(*n));
                assert_readers_agree(a, b, &step);
                assert_readers_agree(&sa, &sb, &format!("{step} (the substream)"));
                stack.push((sa, sb));
                continue;
            }
            ReadOp::Pop => {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            ReadOp::SetOverflow(n) => {
                a.set_overflow(*n);
                b.set_overflow(*n);
            }
        }
        assert_readers_agree(a, b, &step);
    }
}

// ---------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Random operation sequences, with capacities small enough that overflows,
    /// overflowing substreams and rollbacks past them are common.
    #[test]
    fn writer_matches_oracle(
        capacity in 0usize..1200,
        ops in prop::collection::vec(write_op(), 0..60),
        well_nested in prop::bool::weighted(0.8),
    ) {
        run_writers(capacity, &ops, well_nested);
    }

    /// Reads of random data, including past the end, through substreams and seeks.
    #[test]
    fn reader_matches_oracle(
        data in prop::collection::vec(any::<u8>(), 0..40),
        extra in 0usize..24,
        cut in any::<usize>(),
        ops in prop::collection::vec(read_op(), 0..60),
    ) {
        // Sometimes all the data, sometimes a prefix, sometimes a bit length past it.
        let bit_len = match cut % 3 {
            0 => data.len() * 8,
            1 => cut % (data.len() * 8 + 1),
            _ => data.len() * 8 + extra,
        };
        run_readers(&data, bit_len, &ops);
    }

    /// What the writer wrote (after any operation sequence) reads back identically
    /// through the real reader and the oracle reader.
    #[test]
    fn written_streams_read_back_through_both_readers(
        capacity in 0usize..1200,
        ops in prop::collection::vec(write_op(), 0..40),
        reads in prop::collection::vec(read_op(), 0..40),
    ) {
        let (w, r) = run_writers(capacity, &ops, true);
        let bytes = w.to_bytes();
        prop_assert_eq!(&bytes, &r.to_bytes());
        run_readers(&bytes, w.position(), &reads);
    }

    /// Field sequences round-trip: every value written is read back (masked to its
    /// width) by both readers, which then agree on reading past the end.
    #[test]
    fn fields_round_trip(fields in prop::collection::vec(field(), 0..80)) {
        let mut w = BitWriter::with_capacity_bits(100_000);
        let mut r = RefWriter::new(100_000);
        for f in &fields {
            match f {
                Field::Bits(v, n) => { w.write_bits(*v, *n); r.write_bits(*v, *n); }
                Field::Bool(b) => { w.write_bool(*b); r.write_bool(*b); }
                Field::Bytes(b) => { w.write_bytes(b); r.write_bytes(b); }
                Field::Align => { w.align_to_byte(); r.align_to_byte(); }
            }
        }
        assert_writers_agree(&w, &r, "the fields");
        let bytes = w.finish().expect("100_000 bits hold every field");
        let mut a = BitReader::with_bit_len(&bytes, w.position());
        let mut b = RefReader::new(&bytes, w.position());
        for f in &fields {
            match f {
                Field::Bits(v, n) => {
                    let want = if *n == 64 { *v } else { *v & ((1u64 << n) - 1) };
                    prop_assert_eq!(a.read_bits(*n), want);
                    prop_assert_eq!(b.read_bits(*n), want);
                }
                Field::Bool(v) => {
                    prop_assert_eq!(a.read_bool(), *v);
                    prop_assert_eq!(b.read_bool(), *v);
                }
                Field::Bytes(v) => {
                    let mut x = vec![0; v.len()];
                    let mut y = vec![0; v.len()];
                    a.read_bytes(&mut x);
                    b.read_bytes(&mut y);
                    prop_assert_eq!(&x, v);
                    prop_assert_eq!(&y, v);
                }
                Field::Align => { a.align_to_byte(); b.align_to_byte(); }
            }
            assert_readers_agree(&a, &b, "a field");
        }
        prop_assert_eq!(a.bits_left(), 0);
        prop_assert!(a.check().is_ok());
        prop_assert_eq!(a.read_bits(1), 0);
        prop_assert_eq!(b.read_bits(1), 0);
        prop_assert!(a.is_overflown());
        assert_readers_agree(&a, &b, "the read past the end");
    }
}

#[derive(Debug, Clone)]
enum Field {
    Bits(u64, u32),
    Bool(bool),
    Bytes(Vec<u8>),
    Align,
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        6 => (any::<u64>(), 0u32..=64).prop_map(|(v, n)| Field::Bits(v, n)),
        2 => any::<bool>().prop_map(Field::Bool),
        1 => prop::collection::vec(any::<u8>(), 0..20).prop_map(Field::Bytes),
        1 => Just(Field::Align),
    ]
}

// ---------------------------------------------------------------------------------
// Fixed cases (readable documentation of the model, and regression tests)
// ---------------------------------------------------------------------------------

/// The oracle itself must get the layout right, or agreeing with it proves nothing.
#[test]
fn oracle_layout_is_lsb_first() {
    let mut r = RefWriter::new(64);
    r.write_bits(1, 1);
    r.write_bits(0, 7);
    r.write_bits(0x0302, 16);
    r.write_bits(0b101, 3);
    assert_eq!(r.to_bytes(), vec![0x01, 0x02, 0x03, 0b101]);
    let bytes = r.to_bytes();
    let mut rd = RefReader::new(&bytes, 27);
    assert_eq!(rd.read_bits(1), 1);
    assert_eq!(rd.read_bits(7), 0);
    assert_eq!(rd.read_bits(16), 0x0302);
    assert_eq!(rd.read_bits(3), 0b101);
    assert_eq!(rd.read_bits(1), 0);
    assert!(rd.error.is_some());
}

#[test]
fn overflow_is_sticky_and_writes_nothing_past_capacity() {
    let ops = [
        WriteOp::Bits(u64::MAX, 60),
        WriteOp::Bits(u64::MAX, 5), // 65 > 64: overflow, nothing written
        WriteOp::Bits(1, 1),        // would fit, but ignored after the overflow
        WriteOp::Bool(true),
        WriteOp::Bytes(vec![0xFF]),
    ];
    let (w, _) = run_writers(64, &ops, true);
    assert_eq!(w.position(), 60);
    assert_eq!(
        w.error(),
        Some(BitError::WriteOverflow {
            position: 60,
            requested: 5,
            capacity: 64
        })
    );
}

#[test]
fn overflowing_substream_rolls_back_whole() {
    let ops = [
        WriteOp::Bits(0b11, 2),
        WriteOp::BeginSubstream(10),
        WriteOp::Bits(0x1FF, 9),
        WriteOp::Bits(0x3, 2), // 11 > 10
        WriteOp::CommitSubstream,
        WriteOp::Bits(0, 6),
    ];
    let (w, _) = run_writers(128, &ops, true);
    assert!(!w.is_overflown());
    assert_eq!(w.to_bytes(), vec![0b0000_0011]);
}

/// Regression: `patch_bits` on an overflown writer used to patch anyway, so a patch
/// issued after an overflow survived a later rollback to a mark taken before it.
#[test]
fn patch_is_ignored_after_overflow() {
    let mut w = BitWriter::with_capacity_bits(16);
    w.write_bits(0, 8); // a size prefix
    let m = w.mark();
    w.write_bits(0xFF, 8);
    w.write_bits(1, 1); // overflow
    w.patch_bits(0, 0xAA, 8);
    w.rollback(m);
    assert!(!w.is_overflown());
    assert_eq!(w.to_bytes(), vec![0]);
}

/// Regression: `seek` on a reader substream could move before the substream's start
/// and read the parent's bits.
#[test]
fn substream_seek_stays_inside_the_substream() {
    let data = [0xFFu8, 0x00];
    let mut r = BitReader::new(&data);
    r.skip(8);
    let mut sub = r.substream(8);
    sub.seek(0);
    assert!(sub.is_overflown());
    assert_eq!(sub.read_bits(8), 0);
    let mut sub = BitReader::new(&data).substream(16);
    sub.seek(8);
    assert!(sub.check().is_ok());
    assert_eq!(sub.read_bits(8), 0);
    assert!(sub.check().is_ok());
}

/// Regression: a mark taken before a `reset` to a smaller capacity restored the old,
/// larger capacity on rollback, and the next writes indexed past the word buffer
/// (a panic). Capacity is now capped at the last reset's.
#[test]
fn stale_mark_after_reset_cannot_widen_the_writer() {
    let mut w = BitWriter::with_capacity_bits(1000);
    let mark = w.mark();
    let sub = w.begin_substream(500);
    w.reset(10);
    w.rollback(mark);
    assert_eq!(w.capacity(), 10);
    for _ in 0..20 {
        w.write_bits(u64::MAX, 64);
    }
    assert!(w.is_overflown());
    assert_eq!(w.position(), 0);
    w.reset(10);
    assert_eq!(w.commit_substream(sub), Ok(()));
    assert_eq!(w.capacity(), 10);
    w.write_bits(0x3FF, 10);
    assert_eq!(w.finish(), Ok(vec![0xFF, 0x03]));
}
