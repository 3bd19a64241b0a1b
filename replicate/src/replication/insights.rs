//! The replication writer's attribution sink (network insights, see
//! [`crate::insights`]): the writer calls it where it already writes the parts of its
//! section (destroys, end markers, each batch once it is in the packet), and it splits
//! each batch into object index, form and size, long-form flags, tags, head, change
//! mask and members, per type and (at [`AttributionLevel::Members`]) per member.
//!
//! The writer measures every part where it writes it (its frame and encode stages
//! return the bits of each), so the parts always sum to the batch and nothing is
//! written twice at the `Framing` level. At the `Members` level each member is
//! serialized again, alone, into a scratch writer; the members' sum equals the members
//! part (the insights tests check it).

use crate::bits::BitWriter;
use crate::insights::{
    AttributionLevel, MemberRange, ReplicationBits, ReplicationPart as P, UNATTRIBUTED_MEMBER,
};
use crate::protocol::ErasedState;
use crate::state::{ChangeMask, StateDescriptor};

/// Where a batch's parts are, in bits (all measured by the writer as it wrote them).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BatchLayout {
    /// Continuation bit and object index.
    pub handle: usize,
    /// Form bit and size prefix.
    pub prefix: usize,
    /// The long form's flags (a creation's handle, protocol and owner included).
    pub flags: usize,
    /// Tags.
    pub tags: usize,
    /// The head (baseline slot, nomination, prediction code).
    pub head: usize,
    /// The change mask.
    pub mask: usize,
    /// The member values.
    pub members: usize,
    /// Exports after the body.
    pub exports: usize,
}

/// How a batch's members were encoded, to measure them again.
#[derive(Clone, Copy)]
pub(crate) struct Encoding<'a> {
    /// Delta against this state, or a plain serialization.
    pub reference: Option<&'a dyn ErasedState>,
}

/// The sink: the current packet's split and a scratch writer to measure in.
#[derive(Debug)]
pub(crate) struct WriterAttribution {
    level: AttributionLevel,
    /// The packet being written (cleared at the start of each).
    pub packet: ReplicationBits,
    scratch: BitWriter,
    origin: crate::bits::WriterMark,
    /// Observed value ranges per (protocol, member), since the last take.
    ranges: Vec<MemberRange>,
}

/// One member of a batch measured alone: its bits, and its raw value where it has a
/// range meaning (the quantization hint). The same for every connection that writes
/// the same segment in a tick, so measured once (see `encode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemberMeasure {
    pub index: u16,
    pub bits: u32,
    pub raw: Option<u64>,
}

/// How many equal axes a serializer's fixed-width encoding has, if its raw value is a
/// quantized position in a range (`None`: no such meaning, e.g. smallest-three).
fn axes_of(serializer: &str) -> Option<usize> {
    match serializer {
        "Vec2" => Some(2),
        "Vec3" => Some(3),
        "Quat" | "Transform" | "Vec3Axes" | "UnitVec3" | "NetRefHandle" | "bool" | "enum"
        | "String" | "Name" | "Guid" | "Bytes" | "Serde" => None,
        _ => Some(1),
    }
}

impl WriterAttribution {
    pub(crate) fn new(level: AttributionLevel) -> Self {
        let scratch = BitWriter::with_capacity_bits(super::wire::WIDE_BATCH_SIZE as usize + 1);
        Self {
            level,
            packet: ReplicationBits::default(),
            origin: scratch.mark(),
            scratch,
            ranges: Vec::new(),
        }
    }

    /// Takes the value ranges observed since the last call.
    pub(crate) fn take_ranges(&mut self) -> Vec<MemberRange> {
        std::mem::take(&mut self.ranges)
    }

    /// The raw value of a member whose plain encoding is in the scratch writer, `bits`
    /// long, when it has a fixed width with a range meaning.
    fn raw_value(&self, m: &crate::state::MemberDescriptor, bits: usize) -> Option<u64> {
        let (Some(width), Some(_)) = (m.max_bits, axes_of(m.serializer)) else {
            return None;
        };
        if width as usize != bits || !(2..=64).contains(&width) {
            return None;
        }
        self.scratch.peek_bits(0, width)
    }

    /// Records a member's raw value in its observed range.
    fn observe(
        &mut self,
        protocol: u16,
        member: u16,
        m: &crate::state::MemberDescriptor,
        raw: u64,
    ) {
        let (Some(width), Some(axes)) = (m.max_bits, axes_of(m.serializer)) else {
            return;
        };
        match self
            .ranges
            .iter_mut()
            .find(|r| r.protocol == protocol && r.member == member)
        {
            Some(r) => r.observe(raw),
            None => self
                .ranges
                .push(MemberRange::new(protocol, member, width, axes, raw)),
        }
    }

    pub(crate) fn begin_packet(&mut self) {
        self.packet.clear();
    }

    #[inline]
    pub(crate) fn add(&mut self, part: P, bits: usize) {
        self.packet.add(part, bits as u64);
    }

    fn measure(&mut self, f: impl FnOnce(&mut BitWriter)) -> usize {
        // Empty again, clearing only the words the last measurement used.
        self.scratch.rollback(self.origin);
        f(&mut self.scratch);
        self.scratch.position()
    }

    /// One batch, written and kept in the packet. At the `Members` level each member
    /// is measured alone, unless `measured` holds the measures of the same segment
    /// (the same members coded against the same state this tick); the measures taken
    /// are returned for the next connection that writes it.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn on_batch(
        &mut self,
        desc: &StateDescriptor,
        protocol: u16,
        state: &dyn ErasedState,
        mask: &ChangeMask,
        encoding: Encoding<'_>,
        creating: bool,
        l: BatchLayout,
        measured: Option<&[MemberMeasure]>,
    ) -> Option<Vec<MemberMeasure>> {
        let total =
            l.handle + l.prefix + l.flags + l.tags + l.head + l.mask + l.members + l.exports;
        self.packet.add_type(protocol, total as u64, creating);
        self.add(P::ObjectIndex, l.handle);
        self.add(P::FormAndSize, l.prefix);
        self.add(P::LongFormFlags, l.flags);
        self.add(P::Tags, l.tags);
        self.add(P::Exports, l.exports);
        let members = l.members;
        self.add(P::Head, l.head);
        self.add(P::ChangeMask, l.mask);
        self.add(P::Members, members);
        if self.level != AttributionLevel::Members || members == 0 {
            return None;
        }
        match measured {
            Some(measures) => {
                self.apply_members(desc, protocol, measures, members);
                None
            }
            None => {
                let measures = self.measure_members(desc, state, mask, encoding);
                self.apply_members(desc, protocol, &measures, members);
                Some(measures)
            }
        }
    }

    /// Adds measured members to the packet and their raw values to the ranges.
    fn apply_members(
        &mut self,
        desc: &StateDescriptor,
        protocol: u16,
        measures: &[MemberMeasure],
        members: usize,
    ) {
        let mut attributed = 0usize;
        for m in measures {
            attributed += m.bits as usize;
            self.packet
                .add_member(protocol, m.index, u64::from(m.bits), 1);
            if let (Some(raw), Some(d)) = (m.raw, desc.members.get(m.index as usize)) {
                self.observe(protocol, m.index, d, raw);
            }
        }
        if attributed < members {
            self.packet.add_member(
                protocol,
                UNATTRIBUTED_MEMBER,
                (members - attributed) as u64,
                1,
            );
        }
    }

    /// The `Members` level: each member of a batch measured alone.
    #[inline(never)]
    fn measure_members(
        &mut self,
        desc: &StateDescriptor,
        state: &dyn ErasedState,
        mask: &ChangeMask,
        encoding: Encoding<'_>,
    ) -> Vec<MemberMeasure> {
        let serialize = |w: &mut BitWriter, m: &ChangeMask| match encoding.reference {
            Some(r) => state.serialize_delta(r, m, w),
            None => state.serialize(m, w),
        };
        // Per member: each change-mask range alone (grouped members share one range,
        // named by the group's first member).
        let mut measures = Vec::new();
        let mut last_offset = None;
        let mut sub = ChangeMask::new(mask.len());
        for (i, m) in desc.members.iter().enumerate() {
            if last_offset == Some(m.change_mask_offset) || m.change_mask_bits == 0 {
                continue;
            }
            last_offset = Some(m.change_mask_offset);
            if !mask.any_in(m.change_mask_offset, m.change_mask_bits) {
                continue;
            }
            sub.clear();
            sub.set_range(m.change_mask_offset, m.change_mask_bits);
            sub.and_with(mask);
            let bits = self.measure(|w| serialize(w, &sub));
            let index = i.min(UNATTRIBUTED_MEMBER as usize - 1) as u16;
            // The quantization hint: the member's plain value, when it has a range.
            let mut raw = None;
            if m.max_bits.is_some_and(|w| w <= 64) && axes_of(m.serializer).is_some() {
                let plain = if encoding.reference.is_none() {
                    bits
                } else {
                    self.measure(|w| state.serialize(&sub, w))
                };
                raw = self.raw_value(m, plain);
            }
            measures.push(MemberMeasure {
                index,
                bits: u32::try_from(bits).unwrap_or(u32::MAX),
                raw,
            });
        }
        measures
    }
}
