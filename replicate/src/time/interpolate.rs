//! Snapshot interpolation: the [`Interpolate`] trait and the per-object
//! [`SnapshotBuffer`].

use super::Tick;
use crate::serialize::Rotator;
use std::collections::VecDeque;

/// How a type blends between two received states.
///
/// `t` is 0 at `from`, 1 at `to`; above 1 the blend extrapolates (a little: the
/// buffer bounds it). Built in: linear for `f32`, `f64`, `glam::Vec2`, `glam::Vec3`;
/// spherical (slerp) for `glam::Quat`; wrap-aware per angle for
/// [`Rotator`](crate::serialize::Rotator) (see [`lerp_angle_degrees`]); a step (`from`
/// until `t` reaches 1) for `bool` and integers. A struct blends member by member:
///
/// ```
/// use replicate::time::Interpolate;
/// use glam::{Quat, Vec3};
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Body { position: Vec3, rotation: Quat, health: u8, teleports: u8 }
///
/// impl Interpolate for Body {
///     fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
///         Body {
///             position: Vec3::interpolate(&from.position, &to.position, t),
///             rotation: Quat::interpolate(&from.rotation, &to.rotation, t),
///             health: u8::interpolate(&from.health, &to.health, t),
///             teleports: to.teleports,
///         }
///     }
///     /// An explicit marker (a counter the server bumps) or a large jump snaps.
///     fn is_teleport(from: &Self, to: &Self) -> bool {
///         from.teleports != to.teleports || from.position.distance(to.position) > 10.0
///     }
/// }
/// ```
pub trait Interpolate: Clone {
    /// The blend of `from` and `to` at `t`.
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self;

    /// Whether going from `from` to `to` is a teleport, presented as a jump rather
    /// than a glide (default: never).
    fn is_teleport(_from: &Self, _to: &Self) -> bool {
        false
    }
}

impl Interpolate for f32 {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        from + (to - from) * t
    }
}

impl Interpolate for f64 {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        from + (to - from) * f64::from(t)
    }
}

impl Interpolate for glam::Vec2 {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        from.lerp(*to, t)
    }
}

impl Interpolate for glam::Vec3 {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        from.lerp(*to, t)
    }
}

impl Interpolate for glam::Quat {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        // Shortest arc; slerp extrapolates along the same great circle for t > 1.
        let to = if from.dot(*to) < 0.0 { -*to } else { *to };
        from.slerp(to, t).normalize()
    }
}

/// Blends two angles in degrees along the shorter way round (350° → 10° passes 0°).
pub fn lerp_angle_degrees(from: f32, to: f32, t: f32) -> f32 {
    let delta = (to - from + 180.0).rem_euclid(360.0) - 180.0;
    from + delta * t
}

impl Interpolate for Rotator {
    fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
        Rotator::new(
            lerp_angle_degrees(from.pitch, to.pitch, t),
            lerp_angle_degrees(from.yaw, to.yaw, t),
            lerp_angle_degrees(from.roll, to.roll, t),
        )
    }
}

macro_rules! step {
    ($($t:ty),*) => {$(
        impl Interpolate for $t {
            fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
                if t < 1.0 { from.clone() } else { to.clone() }
            }
        }
    )*};
}
step!(bool, u8, u16, u32, u64, i8, i16, i32, i64);

/// How a [`Sampled`] value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKind {
    /// Between two received states (or exactly on one).
    Interpolated,
    /// Past the newest state, within the extrapolation bound (data is late).
    Extrapolated,
    /// Past the newest state beyond the bound: the extrapolated value is held (a
    /// stall: the presented value is stale).
    Stalled,
    /// The newest state, held: the object is at rest (later packets came without an
    /// update for it), or the time is before the oldest state.
    Held,
    /// Across a teleport: the state before it until the teleport's tick, then the one
    /// after it.
    Snapped,
}

/// A value presented at an interpolation time.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled<T> {
    /// The value.
    pub value: T,
    /// How it was obtained.
    pub kind: SampleKind,
}

/// Counters of sampled values by [`SampleKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterpolationStats {
    /// [`SampleKind::Interpolated`] samples.
    pub interpolated: u64,
    /// [`SampleKind::Extrapolated`] samples.
    pub extrapolated: u64,
    /// [`SampleKind::Stalled`] samples.
    pub stalled: u64,
    /// [`SampleKind::Held`] samples.
    pub held: u64,
    /// [`SampleKind::Snapped`] samples.
    pub snapped: u64,
    /// Requests for an object without any state (no value to present).
    pub empty: u64,
}

impl InterpolationStats {
    /// Counts one sample.
    pub fn count<T>(&mut self, sample: Option<&Sampled<T>>) {
        match sample.map(|s| s.kind) {
            None => self.empty += 1,
            Some(SampleKind::Interpolated) => self.interpolated += 1,
            Some(SampleKind::Extrapolated) => self.extrapolated += 1,
            Some(SampleKind::Stalled) => self.stalled += 1,
            Some(SampleKind::Held) => self.held += 1,
            Some(SampleKind::Snapped) => self.snapped += 1,
        }
    }
}

/// The last received states of one object, by server tick.
///
/// ```
/// use replicate::time::{SampleKind, SnapshotBuffer};
/// let mut b = SnapshotBuffer::new(16);
/// b.push(10, 1.0f32, None);
/// b.push(11, 2.0f32, Some(10));
/// let s = b.sample(10.25, Some(11), 2.0).unwrap();
/// assert_eq!((s.value, s.kind), (1.25, SampleKind::Interpolated));
/// let s = b.sample(12.0, Some(11), 2.0).unwrap();
/// assert_eq!((s.value, s.kind), (3.0, SampleKind::Extrapolated));
/// ```
#[derive(Debug, Clone)]
pub struct SnapshotBuffer<T> {
    samples: VecDeque<(Tick, T)>,
    capacity: usize,
}

impl<T: Interpolate> SnapshotBuffer<T> {
    /// A buffer of at most `capacity` states (at least 2).
    pub fn new(capacity: usize) -> Self {
        Self {
            samples: VecDeque::new(),
            capacity: capacity.max(2),
        }
    }

    /// Adds the state received for `tick`. `seen_before` is the newest tick the client
    /// had received before this state's packet: when a packet after this object's
    /// previous state came without an update for it, it was at rest until `tick - 1`,
    /// and the buffer says so (the glide starts at `tick - 1`, not at the old state).
    /// States not newer than the newest one are ignored (returns false).
    pub fn push(&mut self, tick: Tick, value: T, seen_before: Option<Tick>) -> bool {
        if let Some((last_tick, last)) = self.samples.back() {
            if tick <= *last_tick {
                return false;
            }
            let last_tick = *last_tick;
            if tick - last_tick > 1 && seen_before.is_some_and(|n| n > last_tick) {
                let rest = last.clone();
                self.samples.push_back((tick - 1, rest));
            }
        }
        self.samples.push_back((tick, value));
        while self.samples.len() > self.capacity {
            self.samples.pop_front();
        }
        true
    }

    /// The newest state's tick.
    pub fn newest_tick(&self) -> Option<Tick> {
        self.samples.back().map(|s| s.0)
    }

    /// Number of states held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no state is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The state at `at` (in ticks, fractional). `newest_packet` is the newest tick the
    /// client received (for rest detection); past the newest state the buffer
    /// extrapolates for at most `max_extrapolation` ticks, then holds.
    pub fn sample(
        &self,
        at: f64,
        newest_packet: Option<Tick>,
        max_extrapolation: f64,
    ) -> Option<Sampled<T>> {
        let (first_tick, first) = self.samples.front()?;
        if !at.is_finite() || at < f64::from(*first_tick) {
            return Some(Sampled {
                value: first.clone(),
                kind: SampleKind::Held,
            });
        }
        let next = self.samples.partition_point(|(t, _)| f64::from(*t) <= at);
        if next < self.samples.len() {
            let (ta, a) = &self.samples[next - 1];
            let (tb, b) = &self.samples[next];
            let t = ((at - f64::from(*ta)) / f64::from(tb - ta)) as f32;
            return Some(if T::is_teleport(a, b) {
                Sampled {
                    value: a.clone(),
                    kind: SampleKind::Snapped,
                }
            } else {
                Sampled {
                    value: T::interpolate(a, b, t),
                    kind: SampleKind::Interpolated,
                }
            });
        }
        let (tb, b) = self.samples.back()?;
        let past = at - f64::from(*tb);
        let at_rest = newest_packet.is_some_and(|n| n > *tb);
        if past == 0.0 || at_rest || self.samples.len() < 2 {
            return Some(Sampled {
                value: b.clone(),
                kind: if past == 0.0 {
                    SampleKind::Interpolated
                } else {
                    SampleKind::Held
                },
            });
        }
        let (ta, a) = &self.samples[self.samples.len() - 2];
        if T::is_teleport(a, b) {
            return Some(Sampled {
                value: b.clone(),
                kind: SampleKind::Snapped,
            });
        }
        let bound = max_extrapolation.max(0.0);
        let t = 1.0 + (past.min(bound) / f64::from(tb - ta)) as f32;
        Some(Sampled {
            value: T::interpolate(a, b, t),
            kind: if past > bound {
                SampleKind::Stalled
            } else {
                SampleKind::Extrapolated
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::{Quat, Vec3};

    #[test]
    fn angles_wrap_the_short_way_and_quats_slerp() {
        assert!((lerp_angle_degrees(350.0, 10.0, 0.5) - 360.0).abs() < 1e-4);
        assert!((lerp_angle_degrees(10.0, 350.0, 0.5) - 0.0).abs() < 1e-4);
        let r = Rotator::interpolate(
            &Rotator::new(0.0, 170.0, 0.0),
            &Rotator::new(0.0, -170.0, 0.0),
            0.5,
        );
        assert!((r.yaw - 180.0).abs() < 1e-3, "{r:?}");
        let a = Quat::from_rotation_z(0.0);
        let b = Quat::from_rotation_z(1.0);
        let m = Quat::interpolate(&a, &b, 0.5);
        assert!(m.angle_between(Quat::from_rotation_z(0.5)) < 1e-4);
        // The opposite sign of the same rotation still takes the short arc.
        let m = Quat::interpolate(&a, &-b, 0.5);
        assert!(m.angle_between(Quat::from_rotation_z(0.5)) < 1e-4);
        assert_eq!(u8::interpolate(&1, &2, 0.99), 1);
        assert_eq!(u8::interpolate(&1, &2, 1.0), 2);
    }

    #[derive(Clone, Debug, PartialEq)]
    struct Pos(Vec3);
    impl Interpolate for Pos {
        fn interpolate(from: &Self, to: &Self, t: f32) -> Self {
            Pos(from.0.lerp(to.0, t))
        }
        fn is_teleport(from: &Self, to: &Self) -> bool {
            from.0.distance(to.0) > 5.0
        }
    }

    #[test]
    fn extrapolation_is_bounded_rest_holds_and_teleports_snap() {
        let mut b = SnapshotBuffer::new(8);
        b.push(1, Pos(Vec3::ZERO), None);
        b.push(2, Pos(Vec3::X), Some(1));
        let s = b.sample(5.0, Some(2), 1.0).unwrap();
        assert_eq!(
            s,
            Sampled {
                value: Pos(Vec3::X * 2.0),
                kind: SampleKind::Stalled
            }
        );
        // A later packet without an update: at rest.
        let s = b.sample(3.0, Some(3), 1.0).unwrap();
        assert_eq!(s.kind, SampleKind::Held);
        assert_eq!(s.value, Pos(Vec3::X));
        // It moves again at 6: it rested until 5.
        assert!(b.push(6, Pos(Vec3::X * 2.0), Some(5)));
        assert!(!b.push(6, Pos(Vec3::ZERO), Some(6)));
        assert_eq!(b.sample(4.0, Some(6), 1.0).unwrap().value, Pos(Vec3::X));
        assert_eq!(
            b.sample(5.5, Some(6), 1.0).unwrap().value,
            Pos(Vec3::X * 1.5)
        );
        // A teleport snaps.
        b.push(7, Pos(Vec3::X * 100.0), Some(6));
        let s = b.sample(6.5, Some(7), 1.0).unwrap();
        assert_eq!((s.value, s.kind), (Pos(Vec3::X * 2.0), SampleKind::Snapped));
        let s = b.sample(7.5, Some(7), 1.0).unwrap();
        assert_eq!(
            (s.value, s.kind),
            (Pos(Vec3::X * 100.0), SampleKind::Snapped)
        );
        assert_eq!(b.sample(0.0, None, 1.0).unwrap().kind, SampleKind::Held);
        assert!(
            SnapshotBuffer::<Pos>::new(2)
                .sample(1.0, None, 1.0)
                .is_none()
        );
    }
}
