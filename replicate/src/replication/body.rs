//! The writer's frame and encode stages for one batch (see `wire` for the format): the
//! long form's flags and tags, the head and change mask (each possibly one bit in a
//! plain update), and the segment of members, encoded once per tick and copied for
//! every other connection that needs the same one (see `encode`).

use crate::bits::BitWriter;
use crate::handle::NetRefHandle;
use crate::object::{InternalIndex, ObjectEntry, ObjectTable};
use crate::replication::baseline::{BaselineStorage, DeltaPlan, SegmentKind};
use crate::replication::encode::EncodedSegments;
use crate::replication::insights::Encoding;
use crate::replication::wire::{BatchHead, SectionFrame, write_mask};
use crate::state::ChangeMask;
use crate::stream::tokens::{NetToken, SharedExports, lock};

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
/// three bits when one of the section's latest), then the members. Returns the bits and the head,
/// which the caller records in the frame once the batch is in.
pub(super) fn write_plain(
    w: &mut BitWriter,
    c: &BatchCoding<'_>,
    frame: &SectionFrame,
    segments: &mut EncodedSegments,
    segment_id: &mut Option<u32>,
) -> (BodyBits, BatchHead) {
    let mut bits = BodyBits::default();
    let head = c.head();
    let start = w.position();
    frame.write_head(w, &head);
    bits.head = w.position() - start;
    let start = w.position();
    frame.write_mask(w, c.entry.protocol(), c.mask, head.mask_hint(false));
    bits.mask = w.position() - start;
    bits.members = write_members(w, c, segments, segment_id);
    (bits, head)
}

/// Writes a long-form body after its size prefix, from the exports flag to the last
/// member, and returns the net tokens of the tags it carries. The exports flag, the
/// body's first bit, is written 0 and patched by the caller.
pub(super) fn write_long(
    w: &mut BitWriter,
    c: &BatchCoding<'_>,
    exports: &SharedExports,
    segments: &mut EncodedSegments,
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
        let mut exports = lock(exports);
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
    bits.members = write_members(w, c, segments, segment_id);
    tokens
}

/// Writes the members: copied from the tick's shared encoding of the same segment, or
/// encoded (and stored for the other connections). Returns their bits.
fn write_members(
    w: &mut BitWriter,
    c: &BatchCoding<'_>,
    segments: &mut EncodedSegments,
    segment_id: &mut Option<u32>,
) -> usize {
    let plan = c.plan.zip(c.st);
    let kind = plan.map_or(SegmentKind::Full, |(plan, st)| plan.segment(st));
    let handle = c.entry.handle();
    if let Some(segment) = segments.find(c.index, handle, c.mask, &kind) {
        w.write_words(segment.words, segment.bits);
        *segment_id = Some(segment.id);
        return segment.bits;
    }
    let start = w.position();
    let member_bits = match plan {
        Some((plan, st)) => plan.write_segment(st, c.entry.state(), c.mask, w),
        None => {
            c.entry.state().serialize(c.mask, w);
            w.position() - start
        }
    };
    if !w.is_overflown() {
        let against = plan.and_then(|(plan, st)| plan.against(st)).cloned();
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
) -> Encoding<'a> {
    Encoding {
        reference: plan
            .zip(st)
            .and_then(|(plan, st)| plan.against(st))
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
