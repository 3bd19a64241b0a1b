//! Reading ahead over scattered per-object data.
//!
//! At 100 000 objects an object's table entry, state, send state, baselines and
//! snapshots are far apart and cold: worked on one after another, each waits for its
//! cache misses in turn. The hot loops (the writer's objects, the tick's quantize,
//! releases) first read a run of [`READ_AHEAD`] objects level by level, where each
//! level's addresses come from the level before, so that a level's misses overlap;
//! what nothing in the run depends on (the states themselves) is [`prefetch`]ed, so
//! that the run does not wait for it either.

/// Objects read ahead at a time: a run's entries (and, in the writer, their send
/// states, baselines and snapshots) are read level by level before any of them is
/// worked on, so their cache misses overlap. Enough misses in flight to keep the
/// memory system busy, few enough that what is read stays cached until it is used.
pub(crate) const READ_AHEAD: usize = 16;

/// Hints the CPU to bring `value`'s first cache line in, without waiting for it (a
/// no-op on targets without such a hint).
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(value);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
