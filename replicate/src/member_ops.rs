//! The per-member bodies of `#[derive(Replicated)]` code, written once here instead of
//! once per member of every derived type.
//!
//! A generated operation (write, read, diff, poll, validate, ...) creates one of the
//! walkers below with the change mask and the type's offset in it, then makes one call
//! per member, in change-mask order: `walker.member::<Serializer>(&config, &field)`.
//! The walker carries the offset from member to member (so the layout is the
//! descriptor's in every operation) and, on the receiving side, the first error, after
//! which it reads nothing more. Each method is generic over the member's serializer only
//! and `#[inline(never)]`, so all members with one serializer share one instance in the
//! user's crate, whatever type they belong to, and the generated bodies stay a short
//! list of calls. That is where a derived type's release compile time went: the same
//! serializer calls, mask checks and error paths, expanded and optimized per member.
//!
//! This module owns no state and knows nothing of types, objects or connections: only
//! members, their serializers and configs, and their bits of a change mask.

use crate::bits::{BitReader, BitWriter};
use crate::serialize::{ChangeMask, NetSerializer, Result, SerializeError, StableHasher};
use crate::state::{Condition, MemberDescriptor};

/// A walk along a type's change-mask bits, shared by the walkers that read the mask:
/// the offset of the next member and, on the receiving side, the first error, after
/// which no member is selected any more.
struct MaskCursor<'a> {
    mask: &'a ChangeMask,
    offset: u32,
    error: Option<SerializeError>,
}

impl<'a> MaskCursor<'a> {
    #[inline]
    fn new(mask: &'a ChangeMask, offset: u32) -> Self {
        Self {
            mask,
            offset,
            error: None,
        }
    }

    /// Moves past a member of `n` bits; its offset when any of them is set and nothing
    /// failed before.
    #[inline]
    fn member(&mut self, n: u32) -> Option<u32> {
        let at = self.offset;
        self.offset += n;
        (self.error.is_none() && self.mask.any_in(at, n)).then_some(at)
    }

    /// Whether a `group`'s one bit is set (and nothing failed before); moves past it.
    #[inline]
    fn group(&mut self) -> bool {
        let set = self.error.is_none() && self.mask.get(self.offset);
        self.offset += 1;
        set
    }

    /// Whether nothing failed so far.
    #[inline]
    fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// Keeps the first error.
    #[inline]
    fn note(&mut self, result: Result<()>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }

    /// The first error, if any.
    #[inline]
    fn finish(self) -> Result<()> {
        match self.error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// Writes the members a change mask selects (`serialize` and `serialize_delta`).
pub struct WriteMembers<'a> {
    cursor: MaskCursor<'a>,
    writer: &'a mut BitWriter,
}

impl<'a> WriteMembers<'a> {
    /// Starts at the type's `offset` in `mask`.
    #[inline]
    pub fn new(mask: &'a ChangeMask, offset: u32, writer: &'a mut BitWriter) -> Self {
        Self {
            cursor: MaskCursor::new(mask, offset),
            writer,
        }
    }

    /// A member with its own change-mask bits, when any of them is set.
    #[inline(never)]
    pub fn member<S: NetSerializer>(&mut self, config: &S::Config, value: &S::Quantized) {
        if let Some(at) = self.cursor.member(S::change_mask_bits(config)) {
            S::serialize_masked(config, value, self.cursor.mask, at, self.writer);
        }
    }

    /// [`member`](Self::member) against its baseline.
    #[inline(never)]
    pub fn member_delta<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        value: &S::Quantized,
        baseline: &S::Quantized,
    ) {
        if let Some(at) = self.cursor.member(S::change_mask_bits(config)) {
            let mask = self.cursor.mask;
            S::serialize_masked_delta(config, value, baseline, mask, at, self.writer);
        }
    }

    /// Whether a `group`'s one bit is set; moves past it.
    #[inline]
    pub fn group(&mut self) -> bool {
        self.cursor.group()
    }

    /// A member of a set group, whole.
    #[inline(never)]
    pub fn whole<S: NetSerializer>(&mut self, config: &S::Config, value: &S::Quantized) {
        S::serialize(config, value, self.writer);
    }

    /// [`whole`](Self::whole) against its baseline.
    #[inline(never)]
    pub fn whole_delta<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        value: &S::Quantized,
        baseline: &S::Quantized,
    ) {
        S::serialize_delta(config, value, baseline, self.writer);
    }
}

/// Reads the members a change mask selects (`deserialize` and `deserialize_delta`).
/// After the first error it reads nothing more and leaves the remaining members as
/// they are; [`finish`](Self::finish) returns that error.
pub struct ReadMembers<'a, 'r> {
    cursor: MaskCursor<'a>,
    reader: &'a mut BitReader<'r>,
}

impl<'a, 'r> ReadMembers<'a, 'r> {
    /// Starts at the type's `offset` in `mask`.
    #[inline]
    pub fn new(mask: &'a ChangeMask, offset: u32, reader: &'a mut BitReader<'r>) -> Self {
        Self {
            cursor: MaskCursor::new(mask, offset),
            reader,
        }
    }

    /// A member with its own change-mask bits, when any of them is set.
    #[inline(never)]
    pub fn member<S: NetSerializer>(&mut self, config: &S::Config, target: &mut S::Quantized) {
        if let Some(at) = self.cursor.member(S::change_mask_bits(config)) {
            let read = S::deserialize_masked(config, target, self.cursor.mask, at, self.reader);
            self.cursor.note(read);
        }
    }

    /// [`member`](Self::member) against its baseline.
    #[inline(never)]
    pub fn member_delta<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        target: &mut S::Quantized,
        baseline: &S::Quantized,
    ) {
        if let Some(at) = self.cursor.member(S::change_mask_bits(config)) {
            let mask = self.cursor.mask;
            let read = S::deserialize_masked_delta(config, target, baseline, mask, at, self.reader);
            self.cursor.note(read);
        }
    }

    /// Whether a `group`'s one bit is set (and nothing failed before); moves past it.
    #[inline]
    pub fn group(&mut self) -> bool {
        self.cursor.group()
    }

    /// A member of a set group, whole.
    #[inline(never)]
    pub fn whole<S: NetSerializer>(&mut self, config: &S::Config, target: &mut S::Quantized) {
        if self.cursor.ok() {
            let read = S::deserialize(config, self.reader).map(|v| *target = v);
            self.cursor.note(read);
        }
    }

    /// [`whole`](Self::whole) against its baseline.
    #[inline(never)]
    pub fn whole_delta<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        target: &mut S::Quantized,
        baseline: &S::Quantized,
    ) {
        if self.cursor.ok() {
            let read = S::deserialize_delta(config, baseline, self.reader).map(|v| *target = v);
            self.cursor.note(read);
        }
    }

    /// The first error, if any.
    #[inline]
    pub fn finish(self) -> Result<()> {
        self.cursor.finish()
    }
}

/// Validates the received members a change mask selects; stops at the first error.
pub struct ValidateMembers<'a> {
    cursor: MaskCursor<'a>,
}

impl<'a> ValidateMembers<'a> {
    /// Starts at the type's `offset` in `mask`.
    #[inline]
    pub fn new(mask: &'a ChangeMask, offset: u32) -> Self {
        Self {
            cursor: MaskCursor::new(mask, offset),
        }
    }

    /// A member with its own change-mask bits, when any of them is set.
    #[inline(never)]
    pub fn member<S: NetSerializer>(&mut self, config: &S::Config, value: &S::Quantized) {
        if self.cursor.member(S::change_mask_bits(config)).is_some() {
            self.cursor.note(S::validate(config, value));
        }
    }

    /// Whether a `group`'s one bit is set (and nothing failed before); moves past it.
    #[inline]
    pub fn group(&mut self) -> bool {
        self.cursor.group()
    }

    /// A member of a set group.
    #[inline(never)]
    pub fn whole<S: NetSerializer>(&mut self, config: &S::Config, value: &S::Quantized) {
        if self.cursor.ok() {
            self.cursor.note(S::validate(config, value));
        }
    }

    /// The first error, if any.
    #[inline]
    pub fn finish(self) -> Result<()> {
        self.cursor.finish()
    }
}

/// Moves members by a step of a baseline prediction: each member selected by the mask
/// becomes `x`'s moved by the step its delta code measures from `z` to `y`
/// ([`NetSerializer::shift_masked`]). After the first error it moves nothing more;
/// [`finish`](Self::finish) returns that error.
pub struct ShiftMembers<'a> {
    cursor: MaskCursor<'a>,
}

impl<'a> ShiftMembers<'a> {
    /// Starts at the type's `offset` in `mask`.
    #[inline]
    pub fn new(mask: &'a ChangeMask, offset: u32) -> Self {
        Self {
            cursor: MaskCursor::new(mask, offset),
        }
    }

    /// A member with its own change-mask bits, when any of them is set; `target`
    /// equals `x`.
    #[inline(never)]
    pub fn member<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        target: &mut S::Quantized,
        [x, y, z]: [&S::Quantized; 3],
    ) {
        if let Some(at) = self.cursor.member(S::change_mask_bits(config)) {
            let moved = S::shift_masked(config, target, x, y, z, self.cursor.mask, at);
            self.cursor.note(moved);
        }
    }

    /// Whether a `group`'s one bit is set (and nothing failed before); moves past it.
    #[inline]
    pub fn group(&mut self) -> bool {
        self.cursor.group()
    }

    /// A member of a set group, whole.
    #[inline(never)]
    pub fn whole<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        target: &mut S::Quantized,
        [x, y, z]: [&S::Quantized; 3],
    ) {
        if self.cursor.ok() {
            let moved = S::shift(config, x, y, z).map(|v| *target = v);
            self.cursor.note(moved);
        }
    }

    /// The first error, if any.
    #[inline]
    pub fn finish(self) -> Result<()> {
        self.cursor.finish()
    }
}

/// Compares members and sets the change-mask bits of those that differ: `diff` of two
/// quantized states, and `poll` of a game value into its stored quantized state.
pub struct DiffMembers<'a> {
    mask: &'a mut ChangeMask,
    offset: u32,
    any: bool,
}

impl<'a> DiffMembers<'a> {
    /// Starts at the type's `offset` in `mask`.
    #[inline]
    pub fn new(mask: &'a mut ChangeMask, offset: u32) -> Self {
        Self {
            mask,
            offset,
            any: false,
        }
    }

    /// Two quantized values of a member with its own change-mask bits.
    #[inline(never)]
    pub fn member<S: NetSerializer>(
        &mut self,
        config: &S::Config,
        current: &S::Quantized,
        previous: &S::Quantized,
    ) {
        self.any |= S::diff(config, current, previous, self.mask, self.offset);
        self.offset += S::change_mask_bits(config);
    }

    /// Quantizes the game value of a member with its own change-mask bits into its
    /// stored `state` when it changed (the sending side's poll).
    #[inline(never)]
    pub fn poll<S: NetSerializer<Source = F>, F>(
        &mut self,
        config: &S::Config,
        value: &F,
        state: &mut S::Quantized,
    ) {
        let q = S::quantize(config, value);
        if S::diff(config, &q, state, self.mask, self.offset) {
            *state = q;
            self.any = true;
        }
        self.offset += S::change_mask_bits(config);
    }

    /// Ends a `group`: sets its one bit when any of its members `changed`.
    #[inline]
    pub fn group(&mut self, changed: bool) {
        if changed {
            self.mask.set(self.offset);
            self.any = true;
        }
        self.offset += 1;
    }

    /// Whether anything changed.
    #[inline]
    pub fn finish(self) -> bool {
        self.any
    }
}

/// Quantizes one member of a `group` into its stored state when it changed; returns
/// whether it did (the group's bit is set by [`DiffMembers::group`]).
#[inline(never)]
pub fn poll_group_member<S: NetSerializer<Source = F>, F>(
    config: &S::Config,
    value: &F,
    state: &mut S::Quantized,
) -> bool {
    let q = S::quantize(config, value);
    if S::is_equal(config, &q, state) {
        false
    } else {
        *state = q;
        true
    }
}

/// Applies one received member to the game value when any of its change-mask bits is
/// set, by dequantizing it whole (nested replicated members apply in place instead,
/// see `nested::support::MemberProbe`); returns the offset of the next member.
#[inline(never)]
pub fn apply_member<S: NetSerializer>(
    config: &S::Config,
    target: &mut S::Source,
    quantized: &S::Quantized,
    mask: &ChangeMask,
    offset: u32,
) -> u32 {
    let n = S::change_mask_bits(config);
    if mask.any_in(offset, n) {
        *target = S::dequantize(config, quantized);
    }
    offset + n
}

/// Checks every member's serializer config (`ValidateConfigs`); keeps the first error,
/// prefixed with the member's name.
#[derive(Default)]
pub struct CheckConfigs {
    error: Option<String>,
}

impl CheckConfigs {
    /// No error yet.
    #[inline]
    pub fn new() -> Self {
        Self { error: None }
    }

    /// `S::validate_config` of the member named `member`.
    #[inline(never)]
    pub fn member<S: NetSerializer>(&mut self, config: &S::Config, member: &str) {
        if self.error.is_none() {
            let checked = S::validate_config(config);
            self.record(member, checked);
        }
    }

    fn record(&mut self, member: &str, checked: std::result::Result<(), String>) {
        if let Err(e) = checked {
            self.error = Some(prefixed(member, e));
        }
    }

    /// The first error, if any.
    #[inline]
    pub fn finish(self) -> std::result::Result<(), String> {
        match self.error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

#[cold]
#[inline(never)]
fn prefixed(member: &str, error: String) -> String {
    format!("member `{member}`: {error}")
}

/// What a descriptor records of one member besides its serializer (see
/// [`member_descriptor`]).
#[derive(Debug, Clone, Copy)]
pub struct MemberFacts {
    /// The member's name.
    pub name: &'static str,
    /// Its condition.
    pub condition: Condition,
    /// `#[net(init)]`.
    pub init_only: bool,
    /// `#[net(notify = ...)]`.
    pub has_notify: bool,
    /// `#[net(group = "...")]`.
    pub group: Option<&'static str>,
}

/// Appends one member's [`MemberDescriptor`] at change-mask `offset`; returns the
/// offset of the next member. The members of a `group` share one bit: each is
/// appended at the group's offset and the caller advances past the bit once.
#[inline(never)]
pub fn member_descriptor<S: NetSerializer>(
    config: &S::Config,
    facts: MemberFacts,
    offset: u32,
    members: &mut Vec<MemberDescriptor>,
) -> u32 {
    let mut h = StableHasher::new();
    S::fingerprint(config, &mut h);
    let bits = match facts.group {
        Some(_) => 1,
        None => S::change_mask_bits(config),
    };
    push_member(
        members,
        facts,
        SerializerFacts {
            name: S::NAME,
            has_object_references: S::HAS_OBJECT_REFERENCES,
            has_dynamic_state: S::HAS_DYNAMIC_STATE,
            max_bits: S::max_bits(config),
            fingerprint: h.finish(),
        },
        offset,
        bits,
    );
    offset + bits
}

/// The serializer's part of a [`MemberDescriptor`].
struct SerializerFacts {
    name: &'static str,
    has_object_references: bool,
    has_dynamic_state: bool,
    max_bits: Option<u32>,
    fingerprint: u64,
}

fn push_member(
    members: &mut Vec<MemberDescriptor>,
    facts: MemberFacts,
    serializer: SerializerFacts,
    offset: u32,
    bits: u32,
) {
    members.push(MemberDescriptor {
        name: facts.name,
        serializer: serializer.name,
        change_mask_offset: offset,
        change_mask_bits: bits,
        condition: facts.condition,
        init_only: facts.init_only,
        has_notify: facts.has_notify,
        group: facts.group,
        has_object_references: serializer.has_object_references,
        has_dynamic_state: serializer.has_dynamic_state,
        max_bits: serializer.max_bits,
        fingerprint: serializer.fingerprint,
    });
}
