//! Lag compensation: the server's [`StateHistory`].

use super::{Interpolate, Tick};
use crate::handle::NetRefHandle;
use std::collections::{HashMap, VecDeque};

/// Chosen state of objects for the last N ticks, on the server, to answer "where was X
/// at tick T" (lag compensation: judge a client's shot against what it saw, its
/// interpolation time, not against the present).
///
/// ```
/// use replicate::NetRefHandle;
/// use replicate::time::StateHistory;
/// let mut h = StateHistory::new(64);
/// let x = NetRefHandle::new(1, false, 0);
/// for tick in 0..100u32 {
///     h.record(tick, x, tick as f32 * 0.5);
/// }
/// assert_eq!(h.at(x, 90), Some(&45.0));
/// assert_eq!(h.at(x, 10), None); // older than 64 ticks
/// assert_eq!(h.at_time(x, 90.5), Some(45.25));
/// ```
#[derive(Debug, Clone)]
pub struct StateHistory<T> {
    ticks: usize,
    objects: HashMap<NetRefHandle, VecDeque<(Tick, T)>>,
}

impl<T: Clone> StateHistory<T> {
    /// A history of the last `ticks` ticks (at least 1).
    pub fn new(ticks: usize) -> Self {
        Self {
            ticks: ticks.max(1),
            objects: HashMap::new(),
        }
    }

    /// Records `value` as the state of `handle` at `tick` (ticks must increase per
    /// object; an older one is ignored).
    pub fn record(&mut self, tick: Tick, handle: NetRefHandle, value: T) {
        let ring = self.objects.entry(handle).or_default();
        if ring.back().is_some_and(|b| b.0 >= tick) {
            return;
        }
        ring.push_back((tick, value));
        while ring
            .front()
            .is_some_and(|f| tick - f.0 >= self.ticks as Tick)
        {
            ring.pop_front();
        }
    }

    /// The state of `handle` at `tick`: the newest recorded at or before it, if that
    /// is still in the history.
    pub fn at(&self, handle: NetRefHandle, tick: Tick) -> Option<&T> {
        let ring = self.objects.get(&handle)?;
        let i = ring.partition_point(|(t, _)| *t <= tick);
        if i == 0 {
            return None;
        }
        Some(&ring[i - 1].1)
    }

    /// The state of `handle` at a fractional tick, blended between the two recorded
    /// states around it.
    pub fn at_time(&self, handle: NetRefHandle, tick: f64) -> Option<T>
    where
        T: Interpolate,
    {
        let ring = self.objects.get(&handle)?;
        let i = ring.partition_point(|(t, _)| f64::from(*t) <= tick);
        if i == 0 {
            return None;
        }
        let (ta, a) = &ring[i - 1];
        match ring.get(i) {
            Some((tb, b)) => Some(T::interpolate(
                a,
                b,
                ((tick - f64::from(*ta)) / f64::from(tb - ta)) as f32,
            )),
            None => Some(a.clone()),
        }
    }

    /// Forgets an object (destroyed).
    pub fn remove(&mut self, handle: NetRefHandle) {
        self.objects.remove(&handle);
    }
}
