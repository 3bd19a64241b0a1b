//! Scheduling for one connection: which dirty root objects go into the next packet and
//! in which order (Iris's `ScheduleObjects`, `ScheduleDependentObjects`,
//! `SortScheduledObjects`).
//!
//! Priorities accumulate each tick an object is dirty and reset when it is sent; only
//! objects at or above the threshold are scheduled; dependents that must precede their
//! parent get a priority just above it; a partial sort orders the top N, chunk by chunk.
//!
//! Pure functions over the writer's arrays; no I/O, no object access beyond the
//! table's dependent lists.

use super::record::{BitArray, ReplicationInfo};
use crate::object::{InternalIndex, ObjectTable, SchedulingHint};

/// One scheduled object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduledObject {
    /// Internal index of the root object.
    pub index: InternalIndex,
    /// Its priority when scheduled (the sort key).
    pub sort_key: f32,
}

/// The next representable `f32` above `x` (`f32::next_up`, stable only since 1.86).
pub fn next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let b = x.to_bits();
    if x > 0.0 {
        f32::from_bits(b + 1)
    } else {
        f32::from_bits(b - 1)
    }
}

/// Raises the priority of `parent`'s dirty dependents that must be written before it
/// to just above `parent_priority` (recursing into their own dependents).
fn bump_dependents(
    table: &ObjectTable,
    infos: &[ReplicationInfo],
    dirty: &BitArray,
    priorities: &mut [f32],
    parent: InternalIndex,
    parent_priority: f32,
    depth: u32,
) {
    // Dependency chains are game-made; a cycle must not recurse forever.
    if depth > 16 {
        return;
    }
    let Some(entry) = table.entry_at(parent) else {
        return;
    };
    for dep in entry.dependents() {
        let d = dep.index;
        let mut updated = parent_priority;
        if dirty.get(d) {
            let initial = infos
                .get(d as usize)
                .is_some_and(|i| i.state().is_initial());
            let before = match dep.hint {
                SchedulingHint::ScheduleBeforeParent => true,
                SchedulingHint::ScheduleBeforeParentIfInitialState => initial,
                SchedulingHint::Default => false,
            };
            if before && let Some(p) = priorities.get_mut(d as usize) {
                updated = next_up(parent_priority).max(*p);
                *p = updated;
            }
        }
        bump_dependents(table, infos, dirty, priorities, d, updated, depth + 1);
    }
}

/// Collects the dirty root objects (dirty and not subobjects) whose priority is at
/// least `threshold`, after raising dependents that must precede their parents.
pub fn schedule_objects(
    table: &ObjectTable,
    infos: &[ReplicationInfo],
    dirty: &BitArray,
    priorities: &mut [f32],
    threshold: f32,
    out: &mut Vec<ScheduledObject>,
) {
    out.clear();
    let subobjects = table.subobject_set();
    for index in dirty.iter_and_not(Some(subobjects)) {
        let p = priorities.get(index as usize).copied().unwrap_or(0.0);
        if p >= threshold
            && table
                .entry_at(index)
                .is_some_and(|e| !e.dependents().is_empty())
        {
            bump_dependents(table, infos, dirty, priorities, index, p, 0);
        }
    }
    for index in dirty.iter_and_not(Some(subobjects)) {
        let p = priorities.get(index as usize).copied().unwrap_or(0.0);
        if p >= threshold {
            out.push(ScheduledObject { index, sort_key: p });
        }
    }
}

/// Sorts the next chunk: orders (descending by priority, ties by index) the highest
/// `chunk` entries of `scheduled[start..]` into `scheduled[start..start + n]` and returns
/// `n = min(len - start, chunk)`. O(len · log chunk)-ish via selection then sort.
pub fn sort_scheduled_objects(
    scheduled: &mut [ScheduledObject],
    start: usize,
    chunk: usize,
) -> usize {
    if start >= scheduled.len() || chunk == 0 {
        return 0;
    }
    let rest = &mut scheduled[start..];
    let n = rest.len().min(chunk);
    let cmp = |a: &ScheduledObject, b: &ScheduledObject| {
        b.sort_key
            .total_cmp(&a.sort_key)
            .then(a.index.cmp(&b.index))
    };
    if n < rest.len() {
        rest.select_nth_unstable_by(n - 1, cmp);
    }
    rest[..n].sort_unstable_by(cmp);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_sort_orders_top_chunk_then_next() {
        let mut v: Vec<ScheduledObject> = [3.0, 9.0, 1.0, 7.0, 5.0, 8.0]
            .iter()
            .enumerate()
            .map(|(i, &p)| ScheduledObject {
                index: i as u32,
                sort_key: p,
            })
            .collect();
        assert_eq!(sort_scheduled_objects(&mut v, 0, 2), 2);
        assert_eq!((v[0].sort_key, v[1].sort_key), (9.0, 8.0));
        assert_eq!(sort_scheduled_objects(&mut v, 2, 2), 2);
        assert_eq!((v[2].sort_key, v[3].sort_key), (7.0, 5.0));
        assert_eq!(sort_scheduled_objects(&mut v, 4, 10), 2);
        assert_eq!((v[4].sort_key, v[5].sort_key), (3.0, 1.0));
        assert_eq!(sort_scheduled_objects(&mut v, 6, 10), 0);
    }

    #[test]
    fn next_up_is_strictly_greater() {
        for p in [0.0f32, 1.0, 3.5, -2.0, 1e30] {
            assert!(next_up(p) > p, "{p}");
        }
        assert!(next_up(1.0) - 1.0 < 1e-6);
    }
}
