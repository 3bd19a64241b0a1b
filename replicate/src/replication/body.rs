//! The writer's frame and encode stages for one batch (see `wire` for the format): the
//! object index, the form (plain, sized long form, or a huge object's wide form) and
//! the exports after a long-form body; the long form's flags and tags, the head and
//! change mask (each possibly one bit in a plain update), and the segment of members,
//! encoded once per tick and copied for every other connection that needs the same one
//! (see `encode`).

use super::{BatchError, ReplicationWriter, SCRATCH_BITS};
use crate::bits::BitWriter;
use crate::connection::DeliveryStatus;
use crate::handle::NetRefHandle;
use crate::object::{InternalIndex, ObjectEntry, ObjectTable};
use crate::replication::baseline::{BaselineStorage, DeltaPlan, PlanStates, SegmentKind};
use crate::replication::encode::EncodedSegments;
use crate::replication::insights::Encoding;
use crate::replication::wire::{
    BATCH_SIZE_BITS, BatchHead, PlainRanks, SectionFrame, WIDE_BATCH_SIZE, write_batch_size,
    write_mask,
};
use crate::state::ChangeMask;
use crate::stream::tokens::{NetToken, SharedExports};

/// What one batch's members are and how they are coded, for the frame and encode
/// stages.
pub(super) struct BatchCoding<'a> {
    pub table: &'a ObjectTable,
    pub index: InternalIndex,
    pub entry: &'a ObjectEntry,
    pub creating: bool,
    /// The object's creation is in flight: an update goes in the long form, which a
    /// client that does not know the object skips.
    pub unconfirmed: bool,
    pub tear_off: bool,
    pub send_tags: bool,
    pub plan: Option<&'a DeltaPlan>,
    pub st: Option<&'a BaselineStorage>,
    pub mask: &'a ChangeMask,
}

impl BatchCoding<'_> {
    /// The batch's head.
    pub fn head(&self) -> BatchHead {
        self.plan.map_or(BatchHead::Full, DeltaPlan::head)
    }

    /// Whether the batch is a plain update (no creation, tear-off or tags, and an
    /// object the client knows: no size, see `wire`).
    pub fn is_plain(&self) -> bool {
        !self.creating && !self.unconfirmed && !self.tear_off && !self.send_tags
    }
}

/// The bits one batch's parts took, for statistics and network insights.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct BodyBits {
    /// The long form's flags (with a creation's handle, protocol and owner).
    pub flags: usize,
    /// The tags.
    pub tags: usize,
    /// The head.
    pub head: usize,
    /// The change mask.
    pub mask: usize,
    /// The member values.
    pub members: usize,
}

/// Writes a plain update after its object index and form bit: head and mask (one to
/// three bits when one of the section's latest), then the members. Returns the bits, and
/// the head and the ranks it was written at, which the caller records in the frame once
/// the batch is in.
pub(super) fn write_plain(
    w: &mut BitWriter,
    c: &BatchCoding<'_>,
    frame: &SectionFrame,
    encode: Encode<'_>,
    segment_id: &mut Option<u32>,
) -> (BodyBits, BatchHead, PlainRanks) {
    let mut bits = BodyBits::default();
    let head = c.head();
    let start = w.position();
    let head_rank = frame.write_head(w, &head);
    bits.head = w.position() - start;
    let start = w.position();
    let mask_rank = frame.write_mask(w, c.entry.protocol(), c.mask, head.mask_hint(false));
    bits.mask = w.position() - start;
    bits.members = write_members(w, c, encode, segment_id);
    let ranks = PlainRanks {
        head: head_rank,
        mask: mask_rank,
    };
    (bits, head, ranks)
}

/// Writes a long-form body after its size prefix, from the exports flag to the last
/// member, and returns the net tokens of the tags it carries. The exports flag, the
/// body's first bit, is written 0 and patched by the caller.
pub(super) fn write_long(
    w: &mut BitWriter,
    c: &BatchCoding<'_>,
    exports: &SharedExports,
    encode: Encode<'_>,
    segment_id: &mut Option<u32>,
    bits: &mut BodyBits,
) -> Vec<NetToken> {
    let start = w.position();
    write_long_flags(w, c.table, c.entry, c.creating, c.tear_off);
    bits.flags = w.position() - start;
    let head = c.head();
    let start = w.position();
    head.write(w);
    bits.head = w.position() - start;
    let start = w.position();
    let mut tokens: Vec<NetToken> = Vec::new();
    if w.write_bool(c.send_tags) {
        let mut exports = exports.lock();
        tokens = c
            .entry
            .tags()
            .iter()
            .filter_map(|t| exports.token_for(t))
            .collect();
        drop(exports);
        w.write_bits(tokens.len() as u64, 8);
        for t in &tokens {
            w.write_bits(t.0 as u64, 16);
        }
    }
    bits.tags = w.position() - start;
    let start = w.position();
    write_mask(w, c.mask, head.mask_hint(c.creating));
    bits.mask = w.position() - start;
    bits.members = write_members(w, c, encode, segment_id);
    tokens
}

/// A writer thread's tick cache as the encode stage uses it: the shared segments it
/// copies or adds, and the states plans code against.
pub(super) struct Encode<'a> {
    pub segments: &'a mut EncodedSegments,
    pub states: &'a PlanStates,
}

/// Writes the members: copied from the tick's shared encoding of the same segment, or
/// encoded (and stored for the other connections). Returns their bits.
fn write_members(
    w: &mut BitWriter,
    c: &BatchCoding<'_>,
    encode: Encode<'_>,
    segment_id: &mut Option<u32>,
) -> usize {
    let Encode { segments, states } = encode;
    let plan = c.plan.zip(c.st);
    let kind = plan.map_or(SegmentKind::Full, |(plan, st)| plan.segment(st, states));
    let handle = c.entry.handle();
    if let Some(segment) = segments.find(c.index, handle, c.mask, &kind) {
        w.write_words(segment.words, segment.bits);
        *segment_id = Some(segment.id);
        return segment.bits;
    }
    let start = w.position();
    let member_bits = match plan {
        Some((plan, st)) => plan.write_segment(st, states, c.entry.state(), c.mask, w),
        None => {
            c.entry.state().serialize(c.mask, w);
            w.position() - start
        }
    };
    if !w.is_overflown() {
        // The state it was coded against stays alive while the segment is kept (only
        // cloned if it is).
        let against = || {
            plan.and_then(|(plan, st)| plan.against(st, states))
                .cloned()
        };
        *segment_id = segments.insert(c.index, handle, c.mask, kind, against, member_bits, |out| {
            w.copy_bits(start, member_bits, out)
        });
    }
    member_bits
}

/// For network insights: what a batch's members were coded against (the prediction,
/// the acknowledged baseline or the default state), to serialize each again at the
/// `Members` level.
pub(super) fn encoding_of<'a>(
    plan: Option<&'a DeltaPlan>,
    st: Option<&'a BaselineStorage>,
    states: &'a PlanStates,
) -> Encoding<'a> {
    Encoding {
        reference: plan
            .zip(st)
            .and_then(|(plan, st)| plan.against(st, states))
            .map(|s| s.as_ref()),
    }
}

/// The long form's flags, from the exports flag (written 0; patched by the caller) to
/// the tear-off flag; a creation carries the object's handle, protocol and owner.
fn write_long_flags(
    w: &mut BitWriter,
    table: &ObjectTable,
    entry: &ObjectEntry,
    creating: bool,
    tear_off: bool,
) {
    w.write_bool(false); // has_exports, patched by the caller
    w.write_bool(creating);
    if creating {
        entry.handle().write(w);
        w.write_bits(entry.protocol() as u64, table.registry().index_bits());
        let owner = entry
            .root()
            .and_then(|r| table.entry_at(r))
            .map(|r| r.handle());
        if w.write_bool(owner.is_some()) {
            owner.unwrap_or(NetRefHandle::INVALID).write(w);
        }
    }
    w.write_bool(tear_off);
}

/// What the frame stage wrote for one batch, in bits by part, for the record stage.
pub(super) struct FramedBatch {
    /// The object index.
    pub handle_bits: usize,
    /// The form bit and, in the long forms, the size.
    pub prefix_bits: usize,
    /// The body, from the first bit after the prefix to the last member.
    pub body_bits: usize,
    /// The exports after the body.
    pub exports_bits: usize,
    /// The body's parts.
    pub bits: BodyBits,
    /// The shared segment the members came from or went into.
    pub segment: Option<u32>,
    /// The net tokens exported with the batch.
    pub exported: Vec<NetToken>,
}

impl FramedBatch {
    /// All the batch's bits.
    pub fn total_bits(&self) -> usize {
        self.handle_bits + self.prefix_bits + self.body_bits + self.exports_bits
    }
}

/// One form's body as written: its parts, the tokens its tags carry and where it
/// starts (the exports flag, in a long form).
struct FormBody {
    bits: BodyBits,
    tokens: Vec<NetToken>,
    start: usize,
}

impl ReplicationWriter {
    /// Frames one batch: its object index, form and body, then the exports its tags
    /// need. On an error the caller rolls back the writer and the section frame.
    pub(super) fn frame_batch(
        &mut self,
        w: &mut BitWriter,
        c: &BatchCoding<'_>,
        local: u32,
    ) -> Result<FramedBatch, BatchError> {
        let start = w.position();
        self.frame.write_index(w, local);
        let handle_bits = w.position() - start;
        let mut segment = None;
        let plain = c.is_plain();
        let body = if plain {
            self.write_plain_form(w, c, &mut segment)?
        } else if self.huge.wide {
            self.write_wide_form(w, c, &mut segment)?
        } else {
            self.write_sized_form(w, c, &mut segment)?
        };
        let prefix_bits = body.start - start - handle_bits;
        let body_end = w.position();
        // Exports follow the state: the tokens the peer may not know yet (only a long
        // form carries tags, hence tokens).
        let exported = if plain {
            Vec::new()
        } else {
            self.write_batch_exports(w, &body.tokens, body.start)?
        };
        Ok(FramedBatch {
            handle_bits,
            prefix_bits,
            body_bits: body_end - body.start,
            exports_bits: w.position() - body_end,
            bits: body.bits,
            segment,
            exported,
        })
    }

    /// A plain update: the form bit, then head, mask and members, noted in the section
    /// frame once in.
    fn write_plain_form(
        &mut self,
        w: &mut BitWriter,
        c: &BatchCoding<'_>,
        segment: &mut Option<u32>,
    ) -> Result<FormBody, BatchError> {
        // No size: the reader knows the type from the index (see `wire`).
        w.write_bool(false);
        let start = w.position();
        let encode = Encode {
            segments: &mut self.cache.segments,
            states: &self.cache.states,
        };
        let (bits, head, ranks) = write_plain(w, c, &self.frame, encode, segment);
        if w.is_overflown() {
            return Err(BatchError::DidNotFit);
        }
        self.frame
            .note_written(head, c.entry.protocol(), c.mask, ranks);
        Ok(FormBody {
            bits,
            tokens: Vec::new(),
            start,
        })
    }

    /// A huge object's batch, inside its blob: the escape and a 32-bit size patched
    /// after the long-form body.
    fn write_wide_form(
        &mut self,
        w: &mut BitWriter,
        c: &BatchCoding<'_>,
        segment: &mut Option<u32>,
    ) -> Result<FormBody, BatchError> {
        w.write_bool(true);
        w.write_bool(true);
        w.write_bits(WIDE_BATCH_SIZE, BATCH_SIZE_BITS);
        let size_pos = w.position();
        w.write_bits(0, 32);
        let start = w.position();
        let mut bits = BodyBits::default();
        let encode = Encode {
            segments: &mut self.cache.segments,
            states: &self.cache.states,
        };
        let tokens = write_long(w, c, &self.exports, encode, segment, &mut bits);
        if w.is_overflown() {
            return Err(BatchError::DidNotFit);
        }
        w.patch_bits(size_pos, (w.position() - start) as u64, 32);
        Ok(FormBody {
            bits,
            tokens,
            start,
        })
    }

    /// A long-form batch with its size: the prefix's width depends on the body's size,
    /// so the body goes first into the scratch writer, then prefix and body into the
    /// packet.
    fn write_sized_form(
        &mut self,
        w: &mut BitWriter,
        c: &BatchCoding<'_>,
        segment: &mut Option<u32>,
    ) -> Result<FormBody, BatchError> {
        let (scratch, origin) = self.cache.scratch.get_or_insert_with(|| {
            let s = BitWriter::with_capacity_bits(SCRATCH_BITS);
            let origin = s.mark();
            (s, origin)
        });
        // Empty (clearing only the words the last body used), at most what the
        // packet has left.
        scratch.rollback(*origin);
        let limit = w.bits_left();
        scratch.begin_substream(limit);
        let mut bits = BodyBits::default();
        let encode = Encode {
            segments: &mut self.cache.segments,
            states: &self.cache.states,
        };
        let tokens = write_long(scratch, c, &self.exports, encode, segment, &mut bits);
        let size = scratch.position();
        if scratch.is_overflown() || size as u64 >= WIDE_BATCH_SIZE {
            return Err(if limit >= SCRATCH_BITS || !scratch.is_overflown() {
                BatchError::TooLarge
            } else {
                BatchError::DidNotFit
            });
        }
        w.write_bool(true);
        write_batch_size(w, size);
        let start = w.position();
        w.write_from(scratch);
        if w.is_overflown() {
            return Err(BatchError::DidNotFit);
        }
        Ok(FormBody {
            bits,
            tokens,
            start,
        })
    }

    /// Writes the exports of the tokens the peer has not acknowledged after a long-form
    /// body starting at `flag_pos` (its exports flag), and returns them.
    fn write_batch_exports(
        &mut self,
        w: &mut BitWriter,
        tokens: &[NetToken],
        flag_pos: usize,
    ) -> Result<Vec<NetToken>, BatchError> {
        let mut exports = self.exports.lock();
        let unacked: Vec<NetToken> = tokens
            .iter()
            .copied()
            .filter(|t| !exports.is_acked(*t))
            .collect();
        if unacked.is_empty() {
            return Ok(Vec::new());
        }
        w.patch_bits(flag_pos, 1, 1);
        let exported = exports.write_exports(&unacked, w);
        if w.is_overflown() {
            exports.on_delivery(&exported, DeliveryStatus::Lost);
            return Err(BatchError::DidNotFit);
        }
        Ok(exported)
    }
}
