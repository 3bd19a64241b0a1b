//! A measurement, not a wire format: how many bytes an adaptive binary range coder
//! spends on the quantized member residuals that the S1 entropy meter samples, and on
//! the "which objects, which members changed" information, with CPU time per symbol.
//!
//! Owns:
//! - [`Encoder`] / [`Decoder`]: an LZMA-style 32-bit binary range coder (11-bit
//!   probabilities, shift-5 adaptation, carry propagation through a cache byte),
//!   integer arithmetic only, so both ends of a connection compute identical models;
//! - [`Model`] and the packet coder ([`encode_packet`] / [`decode_packet`]): per object
//!   slot an adaptive "changed this tick" bit, per changed object an adaptive bit per
//!   member (the change mask), per changed member component a signed residual in an
//!   adaptive Exp-Golomb binarisation (bucket = number of magnitude bits in unary with
//!   one context per channel and position, sign bit per channel, the two mantissa bits
//!   below the leading one adaptive per channel and bucket, the rest raw); optionally
//!   ([`Contexts::Temporal`]) presence and bucket contexts conditioned on each object's
//!   previous packet;
//! - [`SymbolLog`]: the per-tick symbols of a scenario run, and [`measure`], which
//!   encodes every tick into one buffer, decodes it back, checks the decoded symbols
//!   equal the input, and reports bytes and ns per residual.

use super::entropy::histogram_bits;
use std::collections::HashMap;
use std::time::Instant;

/// Bits of a probability.
const PROB_BITS: u32 = 11;
/// Probability 1.0.
const PROB_ONE: u16 = 1 << PROB_BITS;
/// Adaptation speed: each coded bit moves the probability by 1/32 of the distance.
const MOVE_BITS: u32 = 5;
/// The range is renormalised when it falls below 2^24.
const TOP: u32 = 1 << 24;
/// Bytes the decoder may read past the end of a valid buffer (the trimmed flush).
const MAX_OVERRUN: usize = 4;

/// An adaptive binary context: the probability that the next bit is 0, in 1/2048.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bit(u16);

impl Default for Bit {
    fn default() -> Self {
        Bit(PROB_ONE / 2)
    }
}

impl Bit {
    fn update(&mut self, bit: bool) {
        if bit {
            self.0 -= self.0 >> MOVE_BITS;
        } else {
            self.0 += (PROB_ONE - self.0) >> MOVE_BITS;
        }
    }
}

/// The range encoder.
#[derive(Debug, Clone)]
pub struct Encoder {
    low: u64,
    range: u32,
    cache: u8,
    cache_size: u64,
    out: Vec<u8>,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Self {
            low: 0,
            range: u32::MAX,
            cache: 0,
            cache_size: 1,
            out: Vec::new(),
        }
    }

    fn shift_low(&mut self) {
        if (self.low as u32) < 0xFF00_0000 || (self.low >> 32) != 0 {
            let carry = (self.low >> 32) as u8;
            let mut byte = self.cache;
            loop {
                self.out.push(byte.wrapping_add(carry));
                byte = 0xFF;
                self.cache_size -= 1;
                if self.cache_size == 0 {
                    break;
                }
            }
            self.cache = (self.low >> 24) as u8;
        }
        self.cache_size += 1;
        self.low = (self.low & 0x00FF_FFFF) << 8;
    }

    fn normalize(&mut self) {
        while self.range < TOP {
            self.range <<= 8;
            self.shift_low();
        }
    }

    /// Codes `bit` with the adaptive context `ctx` and updates it.
    pub fn bit(&mut self, ctx: &mut Bit, bit: bool) {
        let bound = (self.range >> PROB_BITS) * u32::from(ctx.0);
        if bit {
            self.low += u64::from(bound);
            self.range -= bound;
        } else {
            self.range = bound;
        }
        ctx.update(bit);
        self.normalize();
    }

    /// Codes the low `n` bits of `value` (at most 64), most significant first, each
    /// with probability 1/2.
    pub fn raw(&mut self, value: u64, n: u32) {
        for i in (0..n).rev() {
            self.range >>= 1;
            if (value >> i) & 1 == 1 {
                self.low += u64::from(self.range);
            }
            self.normalize();
        }
    }

    /// Ends the stream and returns its bytes. The last value is chosen inside the
    /// final interval with as many trailing zero bits as possible, and trailing zero
    /// bytes of the flush are dropped (the decoder reads missing bytes as zero); the
    /// first byte, always zero, is not sent.
    pub fn finish(mut self) -> Vec<u8> {
        let end = self.low + u64::from(self.range);
        for k in (0..=32u32).rev() {
            let mask = (1u64 << k) - 1;
            let v = (self.low + mask) & !mask;
            if v < end {
                self.low = v;
                break;
            }
        }
        let before_flush = self.out.len();
        for _ in 0..5 {
            self.shift_low();
        }
        // At most MAX_OVERRUN bytes are trimmed, so a decoder that reads further
        // past the end knows the buffer was cut.
        let keep_at_least = before_flush.max(1);
        let mut trimmed = 0;
        while trimmed < MAX_OVERRUN && self.out.len() > keep_at_least && self.out.last() == Some(&0)
        {
            self.out.pop();
            trimmed += 1;
        }
        self.out.remove(0);
        self.out
    }
}

/// The range decoder. It never reads outside its buffer: missing bytes read as zero,
/// and [`Decoder::overrun`] says how many were missing.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    range: u32,
    code: u32,
}

impl<'a> Decoder<'a> {
    /// A decoder over `buf` (the output of [`Encoder::finish`]).
    pub fn new(buf: &'a [u8]) -> Self {
        let mut d = Self {
            buf,
            pos: 0,
            range: u32::MAX,
            code: 0,
        };
        for _ in 0..4 {
            d.code = (d.code << 8) | u32::from(d.next_byte());
        }
        d
    }

    fn next_byte(&mut self) -> u8 {
        let b = self.buf.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    fn normalize(&mut self) {
        while self.range < TOP {
            self.range <<= 8;
            self.code = (self.code << 8) | u32::from(self.next_byte());
        }
    }

    /// Decodes one bit with the adaptive context `ctx` and updates it.
    pub fn bit(&mut self, ctx: &mut Bit) -> bool {
        let bound = (self.range >> PROB_BITS) * u32::from(ctx.0);
        let bit = self.code >= bound;
        if bit {
            self.code -= bound;
            self.range -= bound;
        } else {
            self.range = bound;
        }
        ctx.update(bit);
        self.normalize();
        bit
    }

    /// Decodes `n` raw bits (at most 64), most significant first.
    pub fn raw(&mut self, n: u32) -> u64 {
        let mut v = 0u64;
        for _ in 0..n {
            self.range >>= 1;
            let bit = self.code >= self.range;
            if bit {
                self.code -= self.range;
            }
            v = (v << 1) | u64::from(bit);
            self.normalize();
        }
        v
    }

    /// Bytes read past the end of the buffer.
    pub fn overrun(&self) -> usize {
        self.pos.saturating_sub(self.buf.len())
    }
}

/// Mantissa bits below the leading one coded with adaptive contexts (a bit tree per
/// channel and bucket); the lower ones are raw.
const MANTISSA_CONTEXT_BITS: u32 = 2;
/// Buckets: 0 (the value 0) to 64 (magnitudes of 64 bits).
const BUCKETS: usize = 65;
/// Bucket-code context classes under [`Contexts::Temporal`]: the bucket the same
/// component of the same object had when last coded, capped.
const CLASSES: usize = 12;
/// Channels per object slot the temporal history keeps (higher ones use class 0).
const HISTORY_CHANNELS: usize = 32;

/// Adaptive contexts of one channel (member component).
#[derive(Debug, Clone)]
struct Channel {
    /// Unary bucket code per class: position `i` codes "bucket > i".
    bucket: [[Bit; BUCKETS]; CLASSES],
    sign: Bit,
    /// Per bucket, a bit tree over the top mantissa bits (nodes 1..4).
    mantissa: [[Bit; 1 << MANTISSA_CONTEXT_BITS]; BUCKETS],
}

impl Default for Channel {
    fn default() -> Self {
        Self {
            bucket: [[Bit::default(); BUCKETS]; CLASSES],
            sign: Bit::default(),
            mantissa: [[Bit::default(); 1 << MANTISSA_CONTEXT_BITS]; BUCKETS],
        }
    }
}

/// What the contexts of the packet coder condition on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Contexts {
    /// Presence per object kind; bucket, sign and mantissa per channel.
    #[default]
    Channel,
    /// Also per object slot: presence on whether the slot changed in the previous
    /// packet, the bucket code on the bucket the same component had when last coded.
    /// The history is part of the model (it lives as long as the model does).
    Temporal,
}

/// Every adaptive context of the packet coder. Encoder and decoder each hold one and
/// evolve it identically; contexts are allocated on first use (by the layout, which
/// both ends know, never by decoded data).
#[derive(Debug, Clone, Default)]
pub struct Model {
    contexts: Contexts,
    /// "Changed this tick" per object kind (and, temporal, previous presence).
    presence: Vec<Bit>,
    /// Change-mask bit per member key.
    mask: Vec<Bit>,
    channels: Vec<Channel>,
    /// Temporal history: per slot, whether it changed in the previous packet.
    last_present: Vec<bool>,
    /// Temporal history: per slot and channel, the bucket last coded.
    last_bucket: Vec<u8>,
}

fn ctx(v: &mut Vec<Bit>, i: usize) -> &mut Bit {
    if v.len() <= i {
        v.resize(i + 1, Bit::default());
    }
    &mut v[i]
}

impl Model {
    /// A model conditioning on `contexts`.
    pub fn new(contexts: Contexts) -> Self {
        Self {
            contexts,
            ..Self::default()
        }
    }

    /// The presence context of `slot` of `kind`.
    fn presence_ctx(&mut self, slot: usize, kind: usize) -> &mut Bit {
        let last = self.contexts == Contexts::Temporal
            && self.last_present.get(slot).copied().unwrap_or(false);
        ctx(&mut self.presence, kind * 2 + usize::from(last))
    }

    /// Records `slot`'s presence in this packet (temporal history).
    fn set_present(&mut self, slot: usize, present: bool) {
        if self.contexts == Contexts::Temporal {
            if self.last_present.len() <= slot {
                self.last_present.resize(slot + 1, false);
            }
            self.last_present[slot] = present;
        }
    }

    /// Forgets `slot`'s history (a new object in the slot).
    fn reset_slot(&mut self, slot: usize) {
        self.set_present(slot, false);
        let range = slot * HISTORY_CHANNELS..(slot + 1) * HISTORY_CHANNELS;
        if let Some(h) = self.last_bucket.get_mut(range) {
            h.fill(0);
        }
    }

    /// The bucket-code class of channel `ch` of `slot`.
    fn class(&self, slot: usize, ch: usize) -> usize {
        if self.contexts != Contexts::Temporal || ch >= HISTORY_CHANNELS {
            return 0;
        }
        let b = self
            .last_bucket
            .get(slot * HISTORY_CHANNELS + ch)
            .copied()
            .unwrap_or(0);
        usize::from(b).min(CLASSES - 1)
    }

    /// Records the bucket of `v` as channel `ch` of `slot`'s last (temporal history).
    fn set_bucket(&mut self, slot: usize, ch: usize, v: i64) {
        if self.contexts != Contexts::Temporal || ch >= HISTORY_CHANNELS {
            return;
        }
        let i = slot * HISTORY_CHANNELS + ch;
        if self.last_bucket.len() <= i {
            self.last_bucket.resize((slot + 1) * HISTORY_CHANNELS, 0);
        }
        self.last_bucket[i] = (64 - v.unsigned_abs().leading_zeros()) as u8;
    }

    /// Codes residual `v` of channel `ch` of object `slot`.
    fn put_at(&mut self, enc: &mut Encoder, slot: usize, ch: usize, v: i64) {
        let class = self.class(slot, ch);
        self.put(enc, ch, class, v);
        self.set_bucket(slot, ch, v);
    }

    /// Decodes a residual of channel `ch` of object `slot`.
    fn get_at(&mut self, dec: &mut Decoder<'_>, slot: usize, ch: usize) -> Option<i64> {
        let class = self.class(slot, ch);
        let v = self.get(dec, ch, class)?;
        self.set_bucket(slot, ch, v);
        Some(v)
    }

    fn channel(&mut self, ch: usize) -> &mut Channel {
        if self.channels.len() <= ch {
            self.channels.resize(ch + 1, Channel::default());
        }
        &mut self.channels[ch]
    }

    /// Codes the signed residual `v` of channel `ch` with the bucket contexts of
    /// `class` (below `CLASSES`).
    pub fn put(&mut self, enc: &mut Encoder, ch: usize, class: usize, v: i64) {
        let c = self.channel(ch);
        let bucket = &mut c.bucket[class];
        let mag = v.unsigned_abs();
        let b = (64 - mag.leading_zeros()) as usize;
        for ctx in &mut bucket[..b] {
            enc.bit(ctx, true);
        }
        if b < BUCKETS - 1 {
            enc.bit(&mut bucket[b], false);
        }
        if b == 0 {
            return;
        }
        enc.bit(&mut c.sign, v < 0);
        let n = (b - 1) as u32;
        let top = n.min(MANTISSA_CONTEXT_BITS);
        let mut node = 1usize;
        for i in 0..top {
            let bit = (mag >> (n - 1 - i)) & 1 == 1;
            enc.bit(&mut c.mantissa[b][node], bit);
            node = node * 2 + usize::from(bit);
        }
        let low = n - top;
        if low > 0 {
            enc.raw(mag & ((1u64 << low) - 1), low);
        }
    }

    /// Decodes a residual of channel `ch` with the bucket contexts of `class`; `None`
    /// when the bits do not form an `i64`.
    pub fn get(&mut self, dec: &mut Decoder<'_>, ch: usize, class: usize) -> Option<i64> {
        let c = self.channel(ch);
        let mut b = 0usize;
        while b < BUCKETS - 1 && dec.bit(&mut c.bucket[class][b]) {
            b += 1;
        }
        if b == 0 {
            return Some(0);
        }
        let negative = dec.bit(&mut c.sign);
        let n = (b - 1) as u32;
        let top = n.min(MANTISSA_CONTEXT_BITS);
        let mut node = 1usize;
        let mut mag = 1u64;
        for _ in 0..top {
            let bit = dec.bit(&mut c.mantissa[b][node]);
            node = node * 2 + usize::from(bit);
            mag = (mag << 1) | u64::from(bit);
        }
        let low = n - top;
        if low > 0 {
            mag = (mag << low) | dec.raw(low);
        }
        if negative {
            0i64.checked_sub_unsigned(mag)
        } else {
            i64::try_from(mag).ok()
        }
    }
}

/// Which residual a packet codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Diff {
    /// First differences (new quantized value − previous tick's).
    First,
    /// Second differences (first difference − previous tick's first difference).
    Second,
}

/// One member of one object in one tick.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSyms {
    /// Change-mask context (unique per type and member).
    pub key: usize,
    /// Channel of the first component; component `j` is channel `channel + j`.
    pub channel: usize,
    /// Components.
    pub len: usize,
    /// Whether the member changed (some first difference is not 0).
    pub changed: bool,
    /// First differences of the components (empty unless changed).
    pub first: Vec<i64>,
    /// Second differences of the components (empty unless changed).
    pub second: Vec<i64>,
}

impl MemberSyms {
    fn values(&self, diff: Diff) -> &[i64] {
        match diff {
            Diff::First => &self.first,
            Diff::Second => &self.second,
        }
    }
}

/// One object slot in one tick. An object with no members was created this tick: its
/// creation is outside the coder (counted by [`SymbolLog::created`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectSyms {
    /// Presence context (the object's type).
    pub kind: usize,
    /// Members in declaration order.
    pub members: Vec<MemberSyms>,
}

/// The symbols of one packet in a canonical flat form, for comparing what was encoded
/// with what was decoded: per object with members its presence bit, then per member
/// its mask bit and the residuals of changed members.
fn flatten(tick: &[ObjectSyms], diff: Diff) -> Vec<i64> {
    let mut out = Vec::new();
    for o in tick.iter().filter(|o| !o.members.is_empty()) {
        let present = o.members.iter().any(|m| m.changed);
        out.push(i64::from(present));
        if present {
            for m in &o.members {
                out.push(i64::from(m.changed));
                out.extend_from_slice(m.values(diff));
            }
        }
    }
    out
}

/// Encodes one tick's symbols into one buffer with `model`.
pub fn encode_packet(model: &mut Model, tick: &[ObjectSyms], diff: Diff) -> Vec<u8> {
    encode_parts(model, tick, diff, true)
}

/// [`encode_packet`], or with `values` false the presence and mask bits alone (their
/// contexts are separate from the residuals', so this is their share of the packet).
fn encode_parts(model: &mut Model, tick: &[ObjectSyms], diff: Diff, values: bool) -> Vec<u8> {
    let mut enc = Encoder::new();
    for (slot, o) in tick.iter().enumerate() {
        if o.members.is_empty() {
            model.reset_slot(slot);
            continue;
        }
        let present = o.members.iter().any(|m| m.changed);
        enc.bit(model.presence_ctx(slot, o.kind), present);
        model.set_present(slot, present);
        if !present {
            continue;
        }
        let last = o.members.len() - 1;
        let mut any = false;
        for (k, m) in o.members.iter().enumerate() {
            // The last member's bit is implied when no other member changed.
            if k < last || any {
                enc.bit(ctx(&mut model.mask, m.key), m.changed);
            }
            any |= m.changed;
            if m.changed && values {
                for (j, &v) in m.values(diff).iter().enumerate() {
                    model.put_at(&mut enc, slot, m.channel + j, v);
                }
            }
        }
    }
    enc.finish()
}

/// A packet that did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A residual's bits do not form an `i64`.
    Overflow,
    /// The decoder read more than the trimmed flush past the end of the buffer.
    Truncated,
}

/// Decodes a buffer of [`encode_packet`] against `layout` (the objects, their kinds
/// and members, which both ends know; its values are ignored) into the flat form of
/// `flatten`. Garbage decodes to garbage or an error, never a panic.
pub fn decode_packet(
    model: &mut Model,
    layout: &[ObjectSyms],
    buf: &[u8],
) -> Result<Vec<i64>, DecodeError> {
    let mut dec = Decoder::new(buf);
    let mut out = Vec::new();
    for (slot, o) in layout.iter().enumerate() {
        if o.members.is_empty() {
            model.reset_slot(slot);
            continue;
        }
        let present = dec.bit(model.presence_ctx(slot, o.kind));
        model.set_present(slot, present);
        out.push(i64::from(present));
        if !present {
            continue;
        }
        let last = o.members.len() - 1;
        let mut any = false;
        for (k, m) in o.members.iter().enumerate() {
            let changed = if k < last || any {
                dec.bit(ctx(&mut model.mask, m.key))
            } else {
                true
            };
            any |= changed;
            out.push(i64::from(changed));
            if changed {
                for j in 0..m.len {
                    out.push(
                        model
                            .get_at(&mut dec, slot, m.channel + j)
                            .ok_or(DecodeError::Overflow)?,
                    );
                }
            }
        }
        if dec.overrun() > MAX_OVERRUN {
            return Err(DecodeError::Truncated);
        }
    }
    if dec.overrun() > MAX_OVERRUN {
        return Err(DecodeError::Truncated);
    }
    Ok(out)
}

/// Per-slot history of [`SymbolLog::track`]: the previous tick's values and first
/// differences of each member.
#[derive(Debug, Clone, Default)]
struct SlotHistory {
    values: Vec<Vec<i64>>,
    first: Vec<Vec<i64>>,
}

/// The symbols of a scenario run, tick by tick, as the entropy meter samples them.
#[derive(Debug, Clone, Default)]
pub struct SymbolLog {
    ticks: Vec<Vec<ObjectSyms>>,
    creation_bits: Vec<f64>,
    current: Vec<ObjectSyms>,
    current_creation_bits: f64,
    history: Vec<SlotHistory>,
}

impl SymbolLog {
    /// Starts the next object slot of the current tick.
    pub fn begin_object(&mut self, kind: usize) {
        self.current.push(ObjectSyms {
            kind,
            members: Vec::new(),
        });
    }

    /// Adds a member to the current object.
    pub fn member(&mut self, key: usize, channel: usize, len: usize, changed: bool) {
        if let Some(o) = self.current.last_mut() {
            o.members.push(MemberSyms {
                key,
                channel,
                len,
                changed,
                first: Vec::new(),
                second: Vec::new(),
            });
        }
    }

    /// Adds the next component's first and second difference to the current member.
    pub fn component(&mut self, first: i64, second: i64) {
        if let Some(m) = self.current.last_mut().and_then(|o| o.members.last_mut()) {
            m.first.push(first);
            m.second.push(second);
        }
    }

    /// Counts `bits` of a creation sent outside the coder in the current tick.
    pub fn created(&mut self, bits: f64) {
        self.current_creation_bits += bits;
    }

    /// Ends the current tick; it is kept (measured) when `keep`.
    pub fn end_tick(&mut self, keep: bool) {
        let tick = std::mem::take(&mut self.current);
        let bits = std::mem::take(&mut self.current_creation_bits);
        if keep {
            self.ticks.push(tick);
            self.creation_bits.push(bits);
        }
    }

    /// Adds object `slot` of the current tick from its quantized members
    /// `(first channel, values)`, differencing against the slot's previous call as the
    /// S1 meter does (a member changed when a first difference is not 0; the first
    /// differences of unchanged members count as 0 for the next second difference).
    /// Slots must be tracked in index order every tick.
    pub fn track(&mut self, slot: usize, kind: usize, now: &[(usize, Vec<i64>)], measure: bool) {
        if self.history.len() <= slot {
            self.history.resize(slot + 1, SlotHistory::default());
        }
        let h = &mut self.history[slot];
        let fresh = h.values.len() != now.len();
        let mut object = ObjectSyms {
            kind,
            members: Vec::new(),
        };
        for (k, (ch, vals)) in now.iter().enumerate() {
            let d1: Vec<i64> = if fresh {
                vec![0; vals.len()]
            } else {
                vals.iter().zip(&h.values[k]).map(|(a, b)| a - b).collect()
            };
            let prev_d1 = if fresh {
                vec![0; vals.len()]
            } else {
                std::mem::take(&mut h.first[k])
            };
            let changed = d1.iter().any(|&d| d != 0);
            let mut m = MemberSyms {
                key: *ch,
                channel: *ch,
                len: vals.len(),
                changed,
                ..MemberSyms::default()
            };
            if changed {
                m.second = d1.iter().zip(&prev_d1).map(|(a, b)| a - b).collect();
                m.first.clone_from(&d1);
            }
            if measure {
                object.members.push(m);
            }
            if fresh {
                if k == 0 {
                    h.values.clear();
                    h.first.clear();
                }
                h.values.push(vals.clone());
                h.first.push(d1);
            } else {
                h.values[k].clone_from(vals);
                h.first[k] = d1;
            }
        }
        self.current.push(object);
    }

    /// Measured ticks.
    pub fn ticks(&self) -> usize {
        self.ticks.len()
    }

    /// Zeroth-order entropy of the logged residuals, per channel from the run's own
    /// histogram (the S1 bound's formula), in bits, creations excluded.
    pub fn entropy_bits(&self, diff: Diff) -> f64 {
        let mut h: Vec<HashMap<i64, u64>> = Vec::new();
        for m in self.ticks.iter().flatten().flat_map(|o| &o.members) {
            for (j, &v) in m.values(diff).iter().enumerate() {
                let ch = m.channel + j;
                if h.len() <= ch {
                    h.resize(ch + 1, HashMap::new());
                }
                *h[ch].entry(v).or_default() += 1;
            }
        }
        h.iter().map(histogram_bits).sum()
    }
}

/// Whether the models live across packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Models {
    /// One model per connection, carried from packet to packet: both ends must see
    /// every packet in order (a lossless link; with loss the models would have to be
    /// snapshotted per acked packet).
    Carried,
    /// A fresh model per packet: every packet decodes on its own.
    PerPacket,
}

/// What [`measure`] found for one residual kind and model lifetime.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Residuals coded.
    pub diff: Diff,
    /// Model lifetime.
    pub models: Models,
    /// What the contexts condition on.
    pub contexts: Contexts,
    /// Per measured tick: range-coded bytes plus the tick's creations at their raw
    /// quantized size (bytes, fractional).
    pub payload: Vec<f64>,
    /// Per measured tick: the payload in whole bytes split into packets of at most
    /// the MTU, each with the byte-aligned connection header and netcode.io's overhead
    /// ([`super::baseline_wire`]).
    pub wire: Vec<f64>,
    /// Range-coded bytes over the run (creations excluded).
    pub coded_bytes: u64,
    /// Of those, about how many the presence and mask bits take: the bytes of the same
    /// packets coded without their residuals.
    pub framing_bytes: u64,
    /// Residuals coded.
    pub residuals: u64,
    /// Presence and mask bits coded.
    pub framing_symbols: u64,
    /// Objects coded as changed, summed over the ticks.
    pub changed_objects: u64,
    /// Encode time over the run per residual (ns; framing bits included).
    pub encode_ns_per_residual: f64,
    /// Decode time over the run per residual (ns).
    pub decode_ns_per_residual: f64,
    /// Encode time per coded symbol: residual, presence bit or mask bit (ns).
    pub encode_ns_per_symbol: f64,
    /// Decode time per coded symbol (ns).
    pub decode_ns_per_symbol: f64,
    /// Zeroth-order entropy of the same residuals (bits, creations excluded).
    pub entropy_bits: f64,
}

/// Range-codes every tick of `log` into one buffer per tick, decodes each back and
/// checks the symbols are equal. Errors on any mismatch (a coder bug).
pub fn measure(
    log: &SymbolLog,
    diff: Diff,
    models: Models,
    contexts: Contexts,
) -> Result<Measured, String> {
    let mut model = Model::new(contexts);
    let start = Instant::now();
    let mut buffers = Vec::with_capacity(log.ticks.len());
    for tick in &log.ticks {
        if models == Models::PerPacket {
            model = Model::new(contexts);
        }
        buffers.push(encode_packet(&mut model, tick, diff));
    }
    let encode_ns = start.elapsed().as_nanos() as f64;
    let mut model = Model::new(contexts);
    let start = Instant::now();
    let mut decoded = Vec::with_capacity(log.ticks.len());
    for (tick, buf) in log.ticks.iter().zip(&buffers) {
        if models == Models::PerPacket {
            model = Model::new(contexts);
        }
        decoded.push(decode_packet(&mut model, tick, buf));
    }
    let decode_ns = start.elapsed().as_nanos() as f64;
    let mut out = Measured {
        diff,
        models,
        contexts,
        payload: Vec::new(),
        wire: Vec::new(),
        coded_bytes: 0,
        framing_bytes: 0,
        residuals: 0,
        framing_symbols: 0,
        changed_objects: 0,
        encode_ns_per_residual: 0.0,
        decode_ns_per_residual: 0.0,
        encode_ns_per_symbol: 0.0,
        decode_ns_per_symbol: 0.0,
        entropy_bits: log.entropy_bits(diff),
    };
    let mut sequence = 0u64;
    for (i, (tick, got)) in log.ticks.iter().zip(decoded).enumerate() {
        let want = flatten(tick, diff);
        let got = got.map_err(|e| format!("range coding: tick {i} failed to decode: {e:?}"))?;
        if got != want {
            return Err(format!(
                "range coding: tick {i} decoded {} symbols unequal to the {} encoded",
                got.len(),
                want.len()
            ));
        }
        for o in tick.iter().filter(|o| !o.members.is_empty()) {
            out.framing_symbols += 1;
            if o.members.iter().any(|m| m.changed) {
                out.changed_objects += 1;
                out.framing_symbols += o.members.len() as u64;
                out.residuals += o
                    .members
                    .iter()
                    .map(|m| m.values(diff).len() as u64)
                    .sum::<u64>();
            }
        }
        let coded = buffers[i].len();
        out.coded_bytes += coded as u64;
        let creation = log.creation_bits[i] / 8.0;
        out.payload.push(coded as f64 + creation);
        let whole = coded + (log.creation_bits[i] / 8.0).ceil() as usize;
        out.wire
            .push(super::baseline_wire(whole, &mut sequence).1 as f64);
    }
    let n = out.residuals.max(1) as f64;
    out.encode_ns_per_residual = encode_ns / n;
    out.decode_ns_per_residual = decode_ns / n;
    let symbols = (out.residuals + out.framing_symbols).max(1) as f64;
    out.encode_ns_per_symbol = encode_ns / symbols;
    out.decode_ns_per_symbol = decode_ns / symbols;
    let mut model = Model::new(contexts);
    for tick in &log.ticks {
        if models == Models::PerPacket {
            model = Model::new(contexts);
        }
        out.framing_bytes += encode_parts(&mut model, tick, diff, false).len() as u64;
    }
    Ok(out)
}

/// The six measurements of a run: 2nd and 1st differences with channel contexts,
/// models carried and fresh per packet, and with temporal contexts, models carried.
pub fn measure_all(log: &SymbolLog) -> Result<Vec<Measured>, String> {
    let mut out = Vec::new();
    for (models, contexts) in [
        (Models::Carried, Contexts::Channel),
        (Models::PerPacket, Contexts::Channel),
        (Models::Carried, Contexts::Temporal),
    ] {
        for diff in [Diff::Second, Diff::First] {
            out.push(measure(log, diff, models, contexts)?);
        }
    }
    Ok(out)
}

impl Measured {
    /// The row's name in the reports.
    pub fn name(&self) -> String {
        let what = match self.diff {
            Diff::First => "1st",
            Diff::Second => "2nd",
        };
        let models = match (self.models, self.contexts) {
            (Models::Carried, Contexts::Channel) => "",
            (Models::PerPacket, Contexts::Channel) => ", fresh models per packet",
            (Models::Carried, Contexts::Temporal) => ", + per-object temporal contexts",
            (Models::PerPacket, Contexts::Temporal) => {
                ", fresh models per packet, + per-object temporal contexts"
            }
        };
        format!(
            "adaptive range coding of {what} differences{models} (moonshot, measured, not the wire format)"
        )
    }

    /// Mean range-coded bits per changed object (creations excluded).
    pub fn bits_per_changed_object(&self) -> f64 {
        self.coded_bytes as f64 * 8.0 / self.changed_objects.max(1) as f64
    }

    /// The row as JSON.
    pub fn json(&self) -> crate::report::Json {
        use crate::report::Json;
        let (pm, p95) = super::mean_p95(&self.payload);
        let (wm, wp95) = super::mean_p95(&self.wire);
        Json::obj(vec![
            ("variant", Json::str(self.name())),
            (
                "residuals",
                Json::str(match self.diff {
                    Diff::First => "first differences",
                    Diff::Second => "second differences",
                }),
            ),
            (
                "models",
                Json::str(match self.models {
                    Models::Carried => "carried across packets",
                    Models::PerPacket => "fresh per packet",
                }),
            ),
            (
                "contexts",
                Json::str(match self.contexts {
                    Contexts::Channel => "per channel",
                    Contexts::Temporal => "per channel + per-object temporal",
                }),
            ),
            ("mean_wire_bytes_per_tick", Json::Num(wm)),
            ("p95_wire_bytes_per_tick", Json::Num(wp95)),
            ("mean_payload_bytes_per_tick", Json::Num(pm)),
            ("p95_payload_bytes_per_tick", Json::Num(p95)),
            ("coded_bytes", Json::Num(self.coded_bytes as f64)),
            (
                "presence_and_mask_bytes",
                Json::Num(self.framing_bytes as f64),
            ),
            ("residuals", Json::Num(self.residuals as f64)),
            ("framing_symbols", Json::Num(self.framing_symbols as f64)),
            ("changed_objects", Json::Num(self.changed_objects as f64)),
            (
                "coded_bits_per_changed_object",
                Json::Num(self.bits_per_changed_object()),
            ),
            ("entropy_bits_same_residuals", Json::Num(self.entropy_bits)),
            (
                "encode_ns_per_residual",
                Json::Num(self.encode_ns_per_residual),
            ),
            (
                "decode_ns_per_residual",
                Json::Num(self.decode_ns_per_residual),
            ),
            ("encode_ns_per_symbol", Json::Num(self.encode_ns_per_symbol)),
            ("decode_ns_per_symbol", Json::Num(self.decode_ns_per_symbol)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use replicate::internals::link::SplitMix64;

    /// A residual drawn from a mix of small, large and extreme values.
    fn draw(rng: &mut SplitMix64, style: u64) -> i64 {
        match style {
            0 => 0,
            1 => rng.below(7) as i64 - 3,
            2 => {
                let bits = rng.below(41) as u32;
                let m = (rng.next_u64() >> (64 - bits.max(1))) as i64;
                if rng.below(2) == 0 { m } else { -m }
            }
            3 => [i64::MIN, i64::MAX, 0, -1, 1, 1 << 40, -(1 << 40)][rng.below(7) as usize],
            _ => rng.next_u64() as i64,
        }
    }

    fn random_tick(rng: &mut SplitMix64, style: u64) -> Vec<ObjectSyms> {
        let objects = rng.below(12) as usize;
        (0..objects)
            .map(|slot| {
                let kind = slot % 3;
                let members = if rng.below(10) == 0 {
                    0
                } else {
                    1 + rng.below(4) as usize
                };
                ObjectSyms {
                    kind,
                    members: (0..members)
                        .map(|k| {
                            let len = 1 + rng.below(4) as usize;
                            let changed = rng.below(3) != 0;
                            let vals = |rng: &mut SplitMix64| {
                                if changed {
                                    (0..len).map(|_| draw(rng, style)).collect()
                                } else {
                                    Vec::new()
                                }
                            };
                            MemberSyms {
                                key: kind * 4 + k,
                                channel: kind * 16 + k * 4,
                                len,
                                changed,
                                first: vals(rng),
                                second: vals(rng),
                            }
                        })
                        .collect(),
                }
            })
            .collect()
    }

    fn round_trip(ticks: &[Vec<ObjectSyms>]) {
        for (diff, contexts) in [
            (Diff::First, Contexts::Channel),
            (Diff::Second, Contexts::Channel),
            (Diff::Second, Contexts::Temporal),
        ] {
            let (mut enc_model, mut dec_model) = (Model::new(contexts), Model::new(contexts));
            for (i, tick) in ticks.iter().enumerate() {
                let buf = encode_packet(&mut enc_model, tick, diff);
                let got = decode_packet(&mut dec_model, tick, &buf);
                assert_eq!(got, Ok(flatten(tick, diff)), "tick {i}");
            }
        }
    }

    #[test]
    fn random_streams_round_trip() {
        let mut rng = SplitMix64::new(11);
        for style in 0..6 {
            let ticks: Vec<_> = (0..200)
                .map(|_| {
                    let s = if style == 5 { rng.below(5) } else { style };
                    random_tick(&mut rng, s)
                })
                .collect();
            round_trip(&ticks);
        }
    }

    /// One object per value, each one changed member of one component (one channel).
    fn one_channel(values: Vec<i64>) -> Vec<ObjectSyms> {
        values
            .into_iter()
            .map(|v| ObjectSyms {
                kind: 0,
                members: vec![MemberSyms {
                    key: 0,
                    channel: 0,
                    len: 1,
                    changed: true,
                    first: vec![v],
                    second: vec![v],
                }],
            })
            .collect()
    }

    #[test]
    fn extremes_round_trip() {
        let alternating: Vec<i64> = (0..2000)
            .map(|i| if i % 2 == 0 { i64::MIN } else { i64::MAX })
            .collect();
        let huge: Vec<i64> = (0..2000)
            .map(|i| if i % 3 == 0 { 1 << 40 } else { -(1 << 40) - i })
            .collect();
        let mut zeros = vec![0i64; 50_000];
        zeros.push(i64::MIN);
        zeros.extend(std::iter::repeat_n(0, 50_000));
        let ramp: Vec<i64> = (0..64).map(|b| (1u64 << b) as i64).collect();
        round_trip(&[
            one_channel(alternating),
            one_channel(huge),
            one_channel(zeros),
            one_channel(ramp),
            one_channel(vec![]),
        ]);
        // Raw bits at every width, including 64.
        let mut enc = Encoder::new();
        for n in 0..=64u32 {
            enc.raw(u64::MAX >> (64 - n.max(1)) >> u32::from(n == 0), n);
        }
        let buf = enc.finish();
        let mut dec = Decoder::new(&buf);
        for n in 0..=64u32 {
            assert_eq!(dec.raw(n), u64::MAX >> (64 - n.max(1)) >> u32::from(n == 0));
        }
        assert!(dec.overrun() <= MAX_OVERRUN);
    }

    #[test]
    fn raw_adaptive_bits_round_trip_with_carries() {
        // Long runs of very probable bits drive the range and low through carries.
        let mut rng = SplitMix64::new(5);
        let bits: Vec<(usize, bool)> = (0..200_000)
            .map(|i| {
                let ctx = (i / 5000) % 4;
                let bit = match ctx {
                    0 => rng.below(1000) == 0,
                    1 => rng.below(1000) != 0,
                    2 => rng.below(2) == 0,
                    _ => i % 2 == 0,
                };
                (ctx, bit)
            })
            .collect();
        let mut ctxs = [Bit::default(); 4];
        let mut enc = Encoder::new();
        for &(c, b) in &bits {
            enc.bit(&mut ctxs[c], b);
        }
        let buf = enc.finish();
        let mut ctxs = [Bit::default(); 4];
        let mut dec = Decoder::new(&buf);
        for (i, &(c, b)) in bits.iter().enumerate() {
            assert_eq!(dec.bit(&mut ctxs[c]), b, "bit {i}");
        }
        assert!(dec.overrun() <= MAX_OVERRUN);
    }

    #[test]
    fn a_skewed_stream_compresses_below_its_raw_size() {
        // Residuals of a few values around 0, as 16-bit raw values: 2 bytes each.
        let mut rng = SplitMix64::new(3);
        let values: Vec<i64> = (0..20_000)
            .map(|_| match rng.below(100) {
                0..=79 => 0,
                80..=89 => 1,
                90..=97 => -1,
                _ => rng.below(200) as i64 - 100,
            })
            .collect();
        let raw = values.len() * 2;
        let mut model = Model::default();
        let buf = encode_packet(&mut model, &one_channel(values.clone()), Diff::First);
        assert!(buf.len() * 8 < raw, "{} bytes of {raw} raw", buf.len());
        // Within 15 % of the stream's zeroth-order entropy.
        let mut h = HashMap::new();
        for &v in &values {
            *h.entry(v).or_insert(0u64) += 1;
        }
        let bound = histogram_bits(&h) / 8.0;
        assert!(
            (buf.len() as f64) < bound * 1.15,
            "{} vs {bound}",
            buf.len()
        );
    }

    #[test]
    fn truncated_or_garbage_buffers_never_panic() {
        let mut rng = SplitMix64::new(9);
        let ticks: Vec<_> = (0..40).map(|i| random_tick(&mut rng, i % 5)).collect();
        for tick in &ticks {
            let buf = encode_packet(&mut Model::default(), tick, Diff::Second);
            for cut in 0..buf.len() {
                let _ = decode_packet(&mut Model::default(), tick, &buf[..cut]);
            }
            let mut flipped = buf.clone();
            for i in 0..flipped.len() {
                if let Some(b) = flipped.get_mut(i) {
                    *b ^= 1 << (rng.below(8) as u32);
                }
                let _ = decode_packet(&mut Model::default(), tick, &flipped);
            }
            for len in [0usize, 1, 3, 17, 200] {
                let garbage: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let _ = decode_packet(&mut Model::default(), tick, &garbage);
                let ff = vec![0xFFu8; len];
                let _ = decode_packet(&mut Model::default(), tick, &ff);
            }
        }
        // Models carried through garbage packets, temporal history included, go on
        // decoding without panicking.
        for contexts in [Contexts::Channel, Contexts::Temporal] {
            let mut model = Model::new(contexts);
            for tick in &ticks {
                let garbage: Vec<u8> = (0..64).map(|_| rng.next_u64() as u8).collect();
                let _ = decode_packet(&mut model, tick, &garbage);
            }
        }
        // A cut packet decodes to an error or to other symbols, never to the input.
        let long = one_channel(vec![123_456_789; 64]);
        let buf = encode_packet(&mut Model::default(), &long, Diff::First);
        assert!(buf.len() > 2 * MAX_OVERRUN);
        let want = Ok(flatten(&long, Diff::First));
        for cut in [0, buf.len() / 2, buf.len() - MAX_OVERRUN - 1] {
            assert_ne!(
                decode_packet(&mut Model::default(), &long, &buf[..cut]),
                want
            );
        }
        // Bytes of all ones decode to residuals beyond i64: an error.
        assert_eq!(
            decode_packet(&mut Model::default(), &long, &[0xFF; 64]),
            Err(DecodeError::Overflow)
        );
    }

    #[test]
    fn tracking_differences_like_the_meter() {
        let mut log = SymbolLog::default();
        for (t, x) in [10i64, 12, 15, 15, 16].into_iter().enumerate() {
            log.track(0, 0, &[(0, vec![x, 7])], t > 0);
            log.end_tick(t > 0);
        }
        let m: Vec<_> = log.ticks.iter().map(|t| t[0].members[0].clone()).collect();
        assert_eq!(m[0].first, vec![2, 0]);
        assert_eq!(m[0].second, vec![2, 0]);
        assert_eq!(m[1].first, vec![3, 0]);
        assert_eq!(m[1].second, vec![1, 0]);
        assert!(!m[2].changed && m[2].first.is_empty());
        // After an idle tick the previous first difference counts as 0.
        assert_eq!((m[3].first[0], m[3].second[0]), (1, 1));
        let r = measure(&log, Diff::Second, Models::Carried, Contexts::Temporal).unwrap();
        assert_eq!(r.residuals, 6);
        assert_eq!(r.changed_objects, 3);
    }
}
