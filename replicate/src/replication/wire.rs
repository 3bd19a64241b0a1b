//! The object batch framing shared by the writer, the reader and delta compression,
//! and [`ObjectReadError`], why one batch could not be used.
//!
//! The objects section of a replication packet (and of a huge object's blob):
//!
//! ```text
//! section: [index width: 5] ([object index][batch])* [end]
//! index:   [0]                      the previous batch's index + 1 (0 first)
//!          [1][0][Exp-Golomb₀(gap)] previous + 2 + gap
//!          [1][1][index: width]     any other
//! end:     [1][1][2^width - 1]      no index takes the largest value
//! batch:   [0][head | recent][mask | recent][members]                   plain update
//!          [1][size][exports][creating (handle, protocol, owner)]
//!             [tear off][head][tags][mask][members]                     long form
//! head:    [0] members in full
//!          [1][0][newest: 1][slot: 3]?[nominate: 1][slot: 3]?[prediction code]?
//!                                                     against an acknowledged baseline
//!          [1][1][creates: 1][slot: 3]?[against default: 1]            no baseline yet
//! ```
//!
//! Objects are named by a **connection-local index**, dense and assigned by the writer
//! when the object starts replicating to the connection; a creation binds it to the
//! object's handle on the reader, and the writer reuses it only after the object's
//! destroy (or tear-off) is acknowledged. Batches come in priority order, ties in index
//! order, so runs of consecutive indices cost a bit each.
//!
//! A **plain update** (no creation, tear-off or tags, of an object whose creation is
//! acknowledged) carries no size: the reader knows the object's type from its index
//! and decodes the members in place. Its head (reference, nomination and prediction
//! code, which the objects of a packet share) is one to three bits when it is one of
//! the [`HEAD_HISTORY`] latest plain update heads of the section, and its change mask one
//! to three bits when it is one of the [`MASK_HISTORY`] latest masks of its type in
//! this section (`[1]`, `[01]`, `[001]`; `[000]` then the head or mask itself; a head
//! that differs from the latest only in its prediction code is `[000][1]` and the
//! code). A head whose reference has no prior carries no prediction code and repeats
//! any recent head naming the same baselines.
//!
//! Updates of an object whose creation is in flight take the long form: a client
//! whose creation packet was lost does not know the object and skips them by their
//! size (the server resends the creation).
//! A plain update that does not decode leaves the rest of the section unreadable: the
//! reader fails the packet and the client closes the connection (the ends disagree on
//! a type; see `ReplicationReader`). Creations and other long forms keep the size
//! prefix (`[0][size: 7]` or `[1][size: 16]`, with the huge-object escape), so one that
//! fails breaks only its object.

use crate::bits::{BitReader, BitWriter};
use crate::protocol::ProtocolIndex;
use crate::serialize::SerializeError;
use crate::serialize::delta::{exp_golomb_word, read_exp_golomb};
use crate::state::ChangeMask;
use thiserror::Error;

/// The name of the replication data stream (the writer's and the reader's).
pub const REPLICATION_STREAM_NAME: &str = "replication";

/// Bits of the long form of a batch's size prefix: a batch holds at most `2^16 - 2`
/// bits; a creation larger than that (or than an empty packet) is a huge object, whose
/// batch (inside its blob) has the escape `2^16 - 1` and a 32-bit size.
pub const BATCH_SIZE_BITS: u32 = 16;

/// Bits of the short form of a batch's size prefix (bodies of fewer than `2^7` bits:
/// nearly every update; S1 and S3 measured 95% and 100%). The prefix is
/// `[0][size: 7]` or `[1][size: 16]` (see the module docs): 8 bits instead of 16 for a
/// small batch, 17 for a large one.
pub const SHORT_BATCH_SIZE_BITS: u32 = 7;

/// The batch-size escape announcing a 32-bit size (see the module docs).
pub const WIDE_BATCH_SIZE: u64 = (1 << BATCH_SIZE_BITS) - 1;

/// Writes a batch's size prefix (`[0][size: 7]` or `[1][size: 16]`, see the module
/// docs) for a body of `size` bits. Returns false (and writes nothing) when `size`
/// needs the huge-object form (at least `2^16 - 1` bits).
pub fn write_batch_size(w: &mut BitWriter, size: usize) -> bool {
    if size < 1 << SHORT_BATCH_SIZE_BITS {
        w.write_bool(false);
        w.write_bits(size as u64, SHORT_BATCH_SIZE_BITS);
        true
    } else if (size as u64) < WIDE_BATCH_SIZE {
        w.write_bool(true);
        w.write_bits(size as u64, BATCH_SIZE_BITS);
        true
    } else {
        false
    }
}

/// Reads a batch's size prefix, any of its three forms (a huge object's included).
/// Never panics; a truncated prefix leaves `r` in its error state (check it).
pub fn read_batch_size(r: &mut BitReader) -> usize {
    if !r.read_bool() {
        return r.read_bits(SHORT_BATCH_SIZE_BITS) as usize;
    }
    let size = r.read_bits(BATCH_SIZE_BITS);
    if size == WIDE_BATCH_SIZE {
        r.read_bits(32) as usize
    } else {
        size as usize
    }
}

/// Why one object's batch could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObjectReadError {
    /// The creation names a protocol index this side does not know.
    #[error("unknown protocol index {0}")]
    UnknownProtocol(u64),
    /// A state update for an object this side does not have.
    #[error("update for an unknown object")]
    UnknownHandle,
    /// A creation for a known object with another type.
    #[error("creation with protocol {got} for an object of protocol {expected}")]
    ProtocolMismatch {
        /// The local protocol.
        expected: ProtocolIndex,
        /// The received one.
        got: u64,
    },
    /// A static object the game did not register on this side.
    #[error("static object not registered on this side")]
    StaticNotRegistered,
    /// The batch uses delta compression, which this reader does not support (kept for
    /// compatibility; this reader decodes delta batches).
    #[error("delta-compressed batch not supported")]
    DeltaUnsupported,
    /// A delta batch names a baseline this side does not have.
    #[error("delta batch against baseline {0}, which this side does not have")]
    MissingBaseline(u8),
    /// The members did not decode or validate.
    #[error(transparent)]
    Decode(#[from] SerializeError),
    /// The batch had bits left over after its members (corrupt or mismatched types).
    #[error("{0} bits left over after the object's members")]
    TrailingBits(usize),
    /// Too many objects.
    #[error("object limit of {0} reached")]
    TooManyObjects(usize),
    /// A net token this side never received an export for.
    #[error("unknown net token {0}")]
    UnknownToken(u16),
}

impl ObjectReadError {
    pub(crate) fn breaks_object(&self) -> bool {
        !matches!(self, ObjectReadError::UnknownHandle)
    }
}

/// Bits of the objects section's index width field.
pub const INDEX_WIDTH_BITS: u32 = 5;

/// The largest connection-local object index (`2^24 - 2`).
pub const MAX_OBJECT_INDEX: u32 = (1 << 24) - 2;

/// The width a section announces for indices below `end`: one that also holds `end`,
/// so its largest value, the end marker, is no index.
pub fn index_width(end: u32) -> u32 {
    (u32::BITS - end.leading_zeros()).clamp(1, 24)
}

/// How a batch's members are coded (its head, see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchHead {
    /// The members in full.
    Full,
    /// Against acknowledged baseline slot `reference`, or, when `None`, against the
    /// newest baseline the reader stored (the writer's last nomination, acknowledged
    /// and not followed by another: baselines in step cost no slot bits). `nominate`:
    /// the slot whose new baseline this batch makes. `prediction`: `None` when the
    /// slot has no prior (no code written), `Some(None)` coded against the baseline
    /// itself, `Some(Some(p))` against its prediction `p`. The objects of one packet
    /// replicated in step share one head.
    Reference {
        /// The acknowledged slot, or none for the newest.
        reference: Option<u8>,
        /// The slot this batch nominates, if any.
        nominate: Option<u8>,
        /// The prediction code (see above).
        prediction: Option<Option<Prediction>>,
    },
    /// No baseline referenced: the batch creates baseline slot `created`, if any, and
    /// is coded against the type's default state when `vs_default`, else in full.
    Fresh {
        /// The slot this batch creates, if any.
        created: Option<u8>,
        /// Coded against the default state.
        vs_default: bool,
    },
}

/// Writes `[present: 1][slot: 3]?`.
fn write_slot(w: &mut BitWriter, slot: Option<u8>) {
    w.write_bool(slot.is_some());
    if let Some(k) = slot {
        w.write_bits(u64::from(k), BASELINE_SLOT_BITS);
    }
}

/// Reads what [`write_slot`] wrote.
fn read_slot(r: &mut BitReader) -> Option<u8> {
    r.read_bool().then(|| r.read_bits(BASELINE_SLOT_BITS) as u8)
}

/// Bits of a baseline slot on the wire (slots `0..8`, every value valid).
pub const BASELINE_SLOT_BITS: u32 = 3;

impl BatchHead {
    /// Writes the head.
    pub fn write(&self, w: &mut BitWriter) {
        self.write_baseline(w);
        if let BatchHead::Reference {
            prediction: Some(p),
            ..
        } = *self
        {
            write_prediction_code(w, p);
        }
    }

    /// The head packed in one integer, equal for equal heads: the section frame
    /// compares recent heads by it.
    #[inline]
    fn key(&self) -> u64 {
        let slot = |s: Option<u8>| s.map_or(0, |k| u64::from(k) + 1);
        match *self {
            BatchHead::Full => 0,
            BatchHead::Reference {
                reference,
                nominate,
                prediction,
            } => {
                let (code, steps) = match prediction {
                    None => (0, 0),
                    Some(None) => (1, 0),
                    Some(Some(Prediction::Quadratic)) => (2, 0),
                    Some(Some(Prediction::Linear(n))) => (3, u64::from(n)),
                };
                1 | slot(reference) << 2 | slot(nominate) << 11 | code << 20 | steps << 32
            }
            BatchHead::Fresh {
                created,
                vs_default,
            } => 2 | slot(created) << 2 | u64::from(vs_default) << 11,
        }
    }

    /// The head without its prediction code: what names the baselines, which the
    /// batches of a packet share.
    pub fn baseline_part(&self) -> Self {
        match *self {
            BatchHead::Reference {
                reference,
                nominate,
                ..
            } => BatchHead::Reference {
                reference,
                nominate,
                prediction: None,
            },
            head => head,
        }
    }

    /// Writes the head but for its prediction code.
    fn write_baseline(&self, w: &mut BitWriter) {
        match *self {
            BatchHead::Full => {
                w.write_bool(false);
            }
            BatchHead::Reference {
                reference,
                nominate,
                ..
            } => {
                w.write_bits(0b01, 2);
                w.write_bool(reference.is_none());
                if let Some(k) = reference {
                    w.write_bits(u64::from(k), BASELINE_SLOT_BITS);
                }
                write_slot(w, nominate);
            }
            BatchHead::Fresh {
                created,
                vs_default,
            } => {
                w.write_bits(0b11, 2);
                write_slot(w, created);
                w.write_bool(vs_default);
            }
        }
    }

    /// Reads a head; `has_prior(reference)` says whether the reader's baseline the
    /// reference names (`None`: its newest) has a prior (then a prediction code
    /// follows). Never panics; a truncated head leaves `r` in its error state (check
    /// it).
    pub fn read(
        r: &mut BitReader,
        has_prior: impl Fn(Option<u8>) -> bool,
    ) -> Result<Self, SerializeError> {
        let head =
            Self::read_baseline(r)?.with_prediction(has_prior, || Ok(read_prediction_code(r)))?;
        r.check()?;
        Ok(head)
    }

    /// Completes a head read by [`read_baseline`](Self::read_baseline) with its
    /// prediction code, when its reference has a prior.
    fn with_prediction(
        self,
        has_prior: impl Fn(Option<u8>) -> bool,
        code: impl FnOnce() -> Result<Option<Prediction>, SerializeError>,
    ) -> Result<Self, SerializeError> {
        match self {
            BatchHead::Reference {
                reference,
                nominate,
                ..
            } if has_prior(reference) => Ok(BatchHead::Reference {
                reference,
                nominate,
                prediction: Some(code()?),
            }),
            head => Ok(head),
        }
    }

    /// Reads what [`write_baseline`](Self::write_baseline) wrote.
    fn read_baseline(r: &mut BitReader) -> Result<Self, SerializeError> {
        if !r.read_bool() {
            return Ok(BatchHead::Full);
        }
        if !r.read_bool() {
            let reference = if r.read_bool() {
                None
            } else {
                Some(r.read_bits(BASELINE_SLOT_BITS) as u8)
            };
            let nominate = read_slot(r);
            r.check()?;
            return Ok(BatchHead::Reference {
                reference,
                nominate,
                prediction: None,
            });
        }
        let created = read_slot(r);
        let vs_default = r.read_bool();
        r.check()?;
        Ok(BatchHead::Fresh {
            created,
            vs_default,
        })
    }

    /// The mask's form under this head: the creation hint of masks coded against the
    /// default state (`ChangeMask::write_with_hint`), or none (`ChangeMask::write`).
    pub fn mask_hint(&self, creating: bool) -> Option<bool> {
        match self {
            BatchHead::Fresh {
                vs_default: true, ..
            } => Some(creating),
            _ => None,
        }
    }
}

/// What a batch's members are coded against when its reference has a prior (see
/// `baseline`'s module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prediction {
    /// Constant velocity from the prior to the reference, continued this many
    /// prior-to-reference intervals (1 to 3).
    Linear(u32),
    /// Constant acceleration from the prior's prior, the prior and the reference,
    /// continued one interval.
    Quadratic,
}

/// Writes a prediction code: `[1]` linear over one interval, `[00]` not predicted,
/// `[010]` and `[0110]` linear over two and three, `[0111]` quadratic.
pub fn write_prediction_code(w: &mut BitWriter, prediction: Option<Prediction>) {
    let (code, bits) = match prediction {
        Some(Prediction::Linear(1)) => (0b1, 1),
        None | Some(Prediction::Linear(0)) => (0b00, 2),
        Some(Prediction::Linear(2)) => (0b010, 3),
        Some(Prediction::Linear(_)) => (0b0110, 4),
        Some(Prediction::Quadratic) => (0b1110, 4),
    };
    w.write_bits(code, bits);
}

/// Reads what [`write_prediction_code`] wrote.
pub fn read_prediction_code(r: &mut BitReader) -> Option<Prediction> {
    if r.read_bool() {
        return Some(Prediction::Linear(1));
    }
    if !r.read_bool() {
        return None;
    }
    if !r.read_bool() {
        return Some(Prediction::Linear(2));
    }
    Some(if r.read_bool() {
        Prediction::Quadratic
    } else {
        Prediction::Linear(3)
    })
}

/// Writes a change mask in the form `hint` names (see [`BatchHead::mask_hint`]).
pub fn write_mask(w: &mut BitWriter, mask: &ChangeMask, hint: Option<bool>) {
    match hint {
        Some(hint) => mask.write_with_hint(w, hint),
        None => mask.write(w),
    }
}

/// Reads a change mask of `bits` bits written by [`write_mask`] with the same hint.
pub fn read_mask(
    r: &mut BitReader,
    bits: u32,
    hint: Option<bool>,
) -> Result<ChangeMask, SerializeError> {
    match hint {
        Some(hint) => ChangeMask::read_with_hint(bits, r, hint),
        None => ChangeMask::read(bits, r),
    }
}

/// What the objects section written so far implies for the next batch, the same on
/// both ends: the previous index, the index width, and the last plain updates' heads
/// and masks per type (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct SectionFrame {
    next: u32,
    width: u32,
    /// The heads of the last plain updates (with their keys), most recent first.
    heads: Vec<(u64, BatchHead)>,
    /// Per type, the masks of its last plain updates, most recent first.
    masks: Vec<(ProtocolIndex, Vec<ChangeMask>)>,
}

/// The ranks of the recent head and mask a plain update repeated (`None`: written in
/// full), as [`SectionFrame::write_head`] and [`SectionFrame::write_mask`] returned
/// them, for [`SectionFrame::note_written`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainRanks {
    /// The head's rank.
    pub head: Option<usize>,
    /// The change mask's rank.
    pub mask: Option<usize>,
}

/// How many recent masks per type a plain update's mask may repeat.
pub const MASK_HISTORY: usize = 3;

/// The bits of a [`BatchHead`]'s key that hold its prediction code.
const PREDICTION_KEY: u64 = 0b11 << 20 | 0xFFFF_FFFF << 32;

/// How many recent heads a plain update's head may repeat.
pub const HEAD_HISTORY: usize = 3;

/// Writes `[1]`, `[01]`, ... for rank 0, 1, ... of a recent value, or `history` zeros
/// for none.
#[inline]
fn write_rank(w: &mut BitWriter, rank: Option<usize>, history: usize) {
    match rank {
        Some(rank) => w.write_bits(1 << rank, rank as u32 + 1),
        None => w.write_bits(0, history as u32),
    }
}

/// Reads what [`write_rank`] wrote.
fn read_rank(r: &mut BitReader, history: usize) -> Result<Option<usize>, SerializeError> {
    for rank in 0..history {
        if r.read_bool() {
            r.check()?;
            return Ok(Some(rank));
        }
    }
    r.check()?;
    Ok(None)
}

impl SectionFrame {
    /// A frame for a section whose indices are below `2^width`.
    pub fn new(width: u32) -> Self {
        Self {
            next: 0,
            width,
            heads: Vec::new(),
            masks: Vec::new(),
        }
    }

    /// Writes the section's index width and returns its frame.
    pub fn begin_write(w: &mut BitWriter, index_end: u32) -> Self {
        let width = index_width(index_end);
        w.write_bits(u64::from(width), INDEX_WIDTH_BITS);
        Self::new(width)
    }

    /// Reads the section's index width and returns its frame.
    pub fn begin_read(r: &mut BitReader) -> Result<Self, SerializeError> {
        let width = r.read_bits(INDEX_WIDTH_BITS) as u32;
        r.check()?;
        if width == 0 || width > 24 {
            return Err(SerializeError::invalid(
                "object index width",
                "must be 1 to 24 bits",
            ));
        }
        Ok(Self::new(width))
    }

    /// The bits of the end marker.
    pub fn end_bits(&self) -> usize {
        2 + self.width as usize
    }

    /// Writes the end marker (no more batches in the section).
    pub fn write_end(&self, w: &mut BitWriter) {
        w.write_bits(0b11, 2);
        w.write_bits((1 << self.width) - 1, self.width);
    }

    /// Writes an object index (below `2^width - 1`), the shortest of its forms.
    #[inline]
    pub fn write_index(&mut self, w: &mut BitWriter, index: u32) {
        debug_assert!(u64::from(index) < (1 << self.width) - 1);
        if index == self.next {
            w.write_bool(false);
        } else {
            // `1`, then `0` and the gap's code, or `1` and the index: one write.
            let gap = (index > self.next).then(|| u64::from(index - self.next - 1));
            match gap
                .and_then(|g| exp_golomb_word(g, 0, 24))
                .filter(|&(_, len)| len <= self.width)
            {
                Some((code, len)) => w.write_bits(0b01 | code << 2, len + 2),
                None => w.write_bits(0b11 | u64::from(index) << 2, self.width + 2),
            }
        }
        self.next = index.wrapping_add(1);
    }

    /// Reads an object index, or `None` at the end marker.
    pub fn read_index(&mut self, r: &mut BitReader) -> Result<Option<u32>, SerializeError> {
        let index = if !r.read_bool() {
            self.next
        } else if !r.read_bool() {
            let gap = read_exp_golomb(r, 0, 24)?;
            u32::try_from(u64::from(self.next) + 1 + gap)
                .map_err(|_| SerializeError::invalid("object index", "index past the largest"))?
        } else {
            let index = r.read_bits(self.width) as u32;
            r.check()?;
            if index == (1 << self.width) - 1 {
                return Ok(None);
            }
            index
        };
        r.check()?;
        if index > MAX_OBJECT_INDEX {
            return Err(SerializeError::invalid(
                "object index",
                "index past the largest",
            ));
        }
        self.next = index + 1;
        Ok(Some(index))
    }

    /// Where the index code stands, to [`rewind`](Self::rewind) to when a batch is
    /// rolled back.
    pub fn mark(&self) -> u32 {
        self.next
    }

    /// Undoes the index codes written since [`mark`](Self::mark).
    pub fn rewind(&mut self, mark: u32) {
        self.next = mark;
    }

    /// The rank of the recent head `head` repeats: an equal one, or, for a head
    /// whose reference has no prior (no prediction code), one naming the same
    /// baselines (the reader knows there is nothing to predict from).
    #[inline]
    fn rank_of(&self, head: &BatchHead) -> Option<usize> {
        let no_prior = matches!(
            head,
            BatchHead::Reference {
                prediction: None,
                ..
            }
        );
        let key = head.key();
        let same = self.heads.iter().position(|(k, _)| *k == key);
        if same.is_some() || !no_prior {
            return same;
        }
        // The head without a prediction code: its key with the code cleared.
        self.heads
            .iter()
            .position(|(k, _)| k & !PREDICTION_KEY == key)
    }

    /// Writes a plain update's head: `[1]`, `[01]`, `[001]` for the latest, second and
    /// third latest plain update head in this section; else `[000]`, then `[1]` and the
    /// prediction code for the latest head's baselines with another prediction, or
    /// `[0]` and the head.
    /// Returns the rank of the recent head it repeats, for
    /// [`note_written`](Self::note_written).
    #[inline]
    pub fn write_head(&self, w: &mut BitWriter, head: &BatchHead) -> Option<usize> {
        let rank = self.rank_of(head);
        write_rank(w, rank, HEAD_HISTORY);
        if rank.is_some() {
            return rank;
        }
        match (*head, self.heads.first().map(|(_, h)| h)) {
            (
                BatchHead::Reference {
                    prediction: Some(p),
                    ..
                },
                Some(latest),
            ) if latest.baseline_part() == head.baseline_part() => {
                w.write_bool(true);
                write_prediction_code(w, p);
            }
            _ => {
                w.write_bool(false);
                head.write(w);
            }
        }
        None
    }

    /// Reads what [`write_head`](Self::write_head) wrote; `has_prior` as for
    /// [`BatchHead::read`].
    pub fn read_head(
        &self,
        r: &mut BitReader,
        has_prior: impl Fn(Option<u8>) -> bool,
    ) -> Result<BatchHead, SerializeError> {
        let unknown =
            || SerializeError::invalid("batch head", "repeats a head the section has not carried");
        let head = match read_rank(r, HEAD_HISTORY)? {
            Some(rank) => {
                let (_, head) = *self.heads.get(rank).ok_or_else(unknown)?;
                match head {
                    BatchHead::Reference { reference, .. } if !has_prior(reference) => {
                        head.baseline_part()
                    }
                    BatchHead::Reference {
                        prediction: None, ..
                    } => {
                        return Err(SerializeError::invalid(
                            "batch head",
                            "repeats a head without the prediction code its reference needs",
                        ));
                    }
                    head => head,
                }
            }
            None if r.read_bool() => {
                let latest = self.heads.first().ok_or_else(unknown)?.1.baseline_part();
                let BatchHead::Reference { reference, .. } = latest else {
                    return Err(SerializeError::invalid(
                        "batch head",
                        "a prediction code for a head without a reference",
                    ));
                };
                if !has_prior(reference) {
                    return Err(SerializeError::invalid(
                        "batch head",
                        "a prediction code for a reference without a prior",
                    ));
                }
                latest.with_prediction(|_| true, || Ok(read_prediction_code(r)))?
            }
            None => BatchHead::read(r, has_prior)?,
        };
        r.check()?;
        Ok(head)
    }

    #[inline]
    fn recent_masks(&self, protocol: ProtocolIndex) -> &[ChangeMask] {
        self.masks
            .iter()
            .find(|(p, _)| *p == protocol)
            .map_or(&[], |(_, m)| m.as_slice())
    }

    /// Writes a plain update's change mask: `[1]`, `[01]`, `[001]` for the type's
    /// latest, second and third latest plain update mask in this section, else
    /// `[000]` and the mask in the form `hint` names.
    /// Returns the rank of the recent mask it repeats, for
    /// [`note_written`](Self::note_written).
    #[inline]
    pub fn write_mask(
        &self,
        w: &mut BitWriter,
        protocol: ProtocolIndex,
        mask: &ChangeMask,
        hint: Option<bool>,
    ) -> Option<usize> {
        let rank = self.recent_masks(protocol).iter().position(|m| m == mask);
        write_rank(w, rank, MASK_HISTORY);
        if rank.is_none() {
            write_mask(w, mask, hint);
        }
        rank
    }

    /// Reads what [`write_mask`](Self::write_mask) wrote, for a type with `bits`
    /// change-mask bits.
    pub fn read_mask(
        &self,
        r: &mut BitReader,
        protocol: ProtocolIndex,
        bits: u32,
        hint: Option<bool>,
    ) -> Result<ChangeMask, SerializeError> {
        match read_rank(r, MASK_HISTORY)? {
            Some(rank) => self
                .recent_masks(protocol)
                .get(rank)
                .filter(|m| m.len() == bits)
                .cloned()
                .ok_or(SerializeError::invalid(
                    "change mask",
                    "repeats a mask the section has not carried",
                )),
            None => read_mask(r, bits, hint),
        }
    }

    /// Records a plain update's head and mask (long forms do not change the frame, so a
    /// long form that fails to decode leaves both ends in step). A head that repeats a
    /// recent one moves it to the front unchanged.
    pub fn note_plain(&mut self, head: BatchHead, protocol: ProtocolIndex, mask: &ChangeMask) {
        let ranks = PlainRanks {
            head: self.rank_of(&head),
            mask: self.recent_masks(protocol).iter().position(|m| m == mask),
        };
        self.note_written(head, protocol, mask, ranks);
    }

    /// [`note_plain`](Self::note_plain) with the ranks [`write_head`](Self::write_head)
    /// and [`write_mask`](Self::write_mask) returned.
    pub fn note_written(
        &mut self,
        head: BatchHead,
        protocol: ProtocolIndex,
        mask: &ChangeMask,
        ranks: PlainRanks,
    ) {
        match ranks.head {
            Some(rank) => self.heads[..=rank].rotate_right(1),
            None => {
                self.heads.truncate(HEAD_HISTORY - 1);
                self.heads.insert(0, (head.key(), head));
            }
        }
        let i = match self.masks.iter().position(|(p, _)| *p == protocol) {
            Some(i) => i,
            None => {
                self.masks
                    .push((protocol, Vec::with_capacity(MASK_HISTORY)));
                self.masks.len() - 1
            }
        };
        let recent = &mut self.masks[i].1;
        match ranks.mask {
            Some(rank) => recent[..=rank].rotate_right(1),
            None => {
                if recent.len() == MASK_HISTORY {
                    recent.pop();
                }
                recent.insert(0, mask.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T>(
        write: impl FnOnce(&mut BitWriter),
        read: impl FnOnce(&mut BitReader) -> T,
    ) -> (T, usize, usize) {
        let mut w = BitWriter::with_capacity_bits(256);
        write(&mut w);
        let len = w.position();
        let bytes = w.finish().unwrap();
        let mut r = BitReader::with_bit_len(&bytes, len);
        let v = read(&mut r);
        (v, len, r.bits_left())
    }

    #[test]
    fn prediction_code_round_trips() {
        let codes = [
            None,
            Some(Prediction::Linear(1)),
            Some(Prediction::Linear(2)),
            Some(Prediction::Linear(3)),
            Some(Prediction::Quadratic),
        ];
        for (code, bits) in codes.into_iter().zip([2, 1, 3, 4, 4]) {
            let (got, len, left) =
                round_trip(|w| write_prediction_code(w, code), read_prediction_code);
            assert_eq!(got, code);
            assert_eq!((len, left), (bits, 0));
        }
    }

    #[test]
    fn heads_round_trip_in_the_bits_they_announce() {
        let heads = [
            BatchHead::Full,
            BatchHead::Reference {
                reference: None,
                nominate: Some(7),
                prediction: None,
            },
            BatchHead::Reference {
                reference: Some(1),
                nominate: None,
                prediction: Some(None),
            },
            BatchHead::Reference {
                reference: Some(5),
                nominate: Some(6),
                prediction: Some(Some(Prediction::Linear(1))),
            },
            BatchHead::Reference {
                reference: Some(0),
                nominate: None,
                prediction: Some(Some(Prediction::Quadratic)),
            },
            BatchHead::Fresh {
                created: None,
                vs_default: true,
            },
            BatchHead::Fresh {
                created: Some(4),
                vs_default: false,
            },
        ];
        for head in heads {
            let has_prior = matches!(
                head,
                BatchHead::Reference {
                    prediction: Some(_),
                    ..
                }
            );
            let (got, len, left) =
                round_trip(|w| head.write(w), |r| BatchHead::read(r, |_| has_prior));
            assert_eq!(got.unwrap(), head);
            assert!(len <= 12, "{head:?}: {len} bits");
            assert_eq!(left, 0, "{head:?}");
        }
    }

    #[test]
    fn head_keys_are_equal_exactly_for_equal_heads() {
        let slots = [None, Some(0), Some(7), Some(255)];
        let predictions = [
            None,
            Some(None),
            Some(Some(Prediction::Quadratic)),
            Some(Some(Prediction::Linear(1))),
            Some(Some(Prediction::Linear(3))),
            Some(Some(Prediction::Linear(u32::MAX))),
        ];
        let mut heads = vec![BatchHead::Full];
        for created in slots {
            for vs_default in [false, true] {
                heads.push(BatchHead::Fresh {
                    created,
                    vs_default,
                });
            }
        }
        for reference in slots {
            for nominate in slots {
                for prediction in predictions {
                    heads.push(BatchHead::Reference {
                        reference,
                        nominate,
                        prediction,
                    });
                }
            }
        }
        for a in &heads {
            assert_eq!(a.key() & !PREDICTION_KEY, a.baseline_part().key(), "{a:?}");
            for b in &heads {
                assert_eq!(a.key() == b.key(), a == b, "{a:?} / {b:?}");
            }
        }
    }

    #[test]
    fn indices_cost_a_bit_in_runs_and_never_more_than_their_width_plus_two() {
        let indices = [0u32, 1, 2, 3, 7, 8, 100, 5, 6, 1000, 1001, 0, 4094];
        let mut frame = SectionFrame::new(12);
        let mut expected = Vec::new();
        let (got, len, left) = round_trip(
            |w| {
                for &i in &indices {
                    let before = w.position();
                    frame.write_index(w, i);
                    let bits = w.position() - before;
                    assert!(bits <= 14, "index {i}: {bits} bits");
                    expected.push(bits);
                }
            },
            |r| {
                let mut frame = SectionFrame::new(12);
                indices
                    .iter()
                    .map(|_| frame.read_index(r).unwrap().unwrap())
                    .collect::<Vec<_>>()
            },
        );
        assert_eq!(got, indices);
        assert_eq!(left, 0);
        assert_eq!(expected[..4], [1, 1, 1, 1]);
        assert_eq!(len, expected.iter().sum::<usize>());
    }

    #[test]
    fn a_bad_index_width_or_truncated_index_is_an_error() {
        let (got, _, _) = round_trip(
            |w| w.write_bits(0, INDEX_WIDTH_BITS),
            |r| SectionFrame::begin_read(r).is_err(),
        );
        assert!(got);
        let (got, _, _) = round_trip(
            |w| w.write_bits(25, INDEX_WIDTH_BITS),
            |r| SectionFrame::begin_read(r).is_err(),
        );
        assert!(got);
        let (got, _, _) = round_trip(
            |w| w.write_bits(0b11, 2),
            |r| SectionFrame::new(12).read_index(r).is_err(),
        );
        assert!(got);
    }
}
