//! The writer's encode and frame stages for one batch body: the form flags, the tags,
//! the per-connection delta head, and the segment (change mask and members), encoded
//! once per tick and copied for every other connection that needs the same one (see
//! `encode`).

use crate::bits::BitWriter;
use crate::handle::NetRefHandle;
use crate::object::{InternalIndex, ObjectTable};
use crate::replication::baseline::{
    BaselineStorage, DeltaPlan, SegmentKind, write_delta_head, write_full_segment,
};
use crate::replication::encode::EncodedSegments;
use crate::replication::insights::Encoding;
use crate::state::ChangeMask;
use crate::stream::tokens::{NetToken, SharedExports, lock};

/// Writes a batch body, from the form flag to the last member, and returns the net
/// tokens of the tags it carries. A plain update (no creation, tear-off or tags, hence
/// no exports) is `[0][is_delta]`; the long form `[1][has_exports]...` has its exports
/// flag, one bit into the body, written 0 and patched by the caller.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_body(
    w: &mut BitWriter,
    table: &ObjectTable,
    index: InternalIndex,
    entry: &crate::object::ObjectEntry,
    creating: bool,
    tear_off: bool,
    plan: Option<&DeltaPlan>,
    send_tags: bool,
    mask: &ChangeMask,
    exports: &SharedExports,
    segments: &mut EncodedSegments,
    st: Option<&BaselineStorage>,
    member_bits: &mut usize,
    segment_id: &mut Option<u32>,
) -> (Vec<NetToken>, (usize, usize)) {
    let body = w.position();
    let plain = !creating && !tear_off && !send_tags;
    w.write_bool(!plain);
    if plain {
        w.write_bool(plan.is_some());
    } else {
        write_long_flags(w, table, entry, creating, tear_off, plan.is_some());
    }
    let mut tokens: Vec<NetToken> = Vec::new();
    let flags_end = w.position() - body;
    if !plain && w.write_bool(send_tags) {
        let mut exports = lock(exports);
        tokens = entry
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
    let tags_end = w.position() - body;
    // The per-connection head, then the segment: encoded once per tick for each
    // (mask, what it is coded against), copied for every other connection.
    // A plan exists only with the baseline storage.
    let plan = plan.zip(st);
    let kind = match plan {
        Some((plan, st)) => {
            write_delta_head(plan, w);
            plan.segment(creating, st)
        }
        None => SegmentKind::Full,
    };
    let handle = entry.handle();
    if let Some(segment) = segments.find(index, handle, mask, &kind) {
        w.write_words(segment.words, segment.bits);
        *member_bits = segment.member_bits;
        *segment_id = Some(segment.id);
    } else {
        let start = w.position();
        *member_bits = match plan {
            Some((plan, st)) => plan.write_segment(st, entry.state(), mask, creating, w),
            None => write_full_segment(entry.state(), mask, w),
        };
        if !w.is_overflown() {
            let bits = w.position() - start;
            let against = plan.and_then(|(plan, st)| plan.against(st)).cloned();
            *segment_id = segments.insert(
                index,
                handle,
                mask,
                kind,
                against,
                bits,
                *member_bits,
                |out| w.copy_bits(start, bits, out),
            );
        }
    }
    (tokens, (flags_end, tags_end))
}

/// For network insights: how a batch's change mask and members were encoded (as
/// `write_delta_body` does): the mask's form and what the members were coded against
/// (the prediction, the acknowledged baseline or the default state), to serialize
/// each again at the `Members` level. The delta framing's size is set
/// by the caller from the bits the body measured (`payload − mask − members`).
pub(super) fn encoding_of<'a>(
    plan: Option<&'a DeltaPlan>,
    st: Option<&'a BaselineStorage>,
    creating: bool,
) -> Encoding<'a> {
    let Some((plan, st)) = plan.zip(st) else {
        return Encoding {
            framing: 0,
            reference: None,
            mask_hint: None,
        };
    };
    // Coded against the prediction when the batch predicted, else the baseline, or
    // the default state on the full path.
    let reference = plan.against(st).map(|s| s.as_ref());
    let mask_hint = (plan.reference.is_none() && plan.vs_default).then_some(creating);
    Encoding {
        framing: 0,
        reference,
        mask_hint,
    }
}

/// The long form's flags, from the exports flag (written 0; patched by the caller) to
/// `is_delta`.
fn write_long_flags(
    w: &mut BitWriter,
    table: &ObjectTable,
    entry: &crate::object::ObjectEntry,
    creating: bool,
    tear_off: bool,
    is_delta: bool,
) {
    w.write_bool(false); // has_exports, patched by the caller
    w.write_bool(creating);
    if creating {
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
    w.write_bool(is_delta);
}
