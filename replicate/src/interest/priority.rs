//! Prioritizers: how urgent an object is for a connection this tick.
//!
//! The writer adds each dirty object's priority to its accumulated priority every
//! tick until the object is sent (then it resets), so low-priority objects are
//! delayed, never starved. Objects whose accumulated priority is below the scheduling
//! threshold are not sent this tick.

use super::filter::{ObjectFilterInfo, ViewInfo};

/// Computes an object's priority for a connection.
pub trait Prioritizer: Send + Sync {
    /// The priority of `object` for `view` (≥ 0; 1.0 is "normal").
    fn priority(&self, object: &ObjectFilterInfo, view: &ViewInfo) -> f32;
}

/// The same priority for every connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StaticPrioritizer(pub f32);

impl Prioritizer for StaticPrioritizer {
    fn priority(&self, _: &ObjectFilterInfo, _: &ViewInfo) -> f32 {
        self.0
    }
}

/// Configuration of the [`SpherePrioritizer`] (Iris's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpherePrioritizerConfig {
    /// Inside this distance: `inner_priority` (default 1000).
    pub inner_radius: f32,
    /// Beyond this distance: `outside_priority` (default 10 000).
    pub outer_radius: f32,
    /// Default 1.0.
    pub inner_priority: f32,
    /// Priority at the outer radius, interpolated linearly from the inner (default 0.1).
    pub outer_priority: f32,
    /// Default 0.01.
    pub outside_priority: f32,
}

impl Default for SpherePrioritizerConfig {
    fn default() -> Self {
        Self {
            inner_radius: 1000.0,
            outer_radius: 10_000.0,
            inner_priority: 1.0,
            outer_priority: 0.1,
            outside_priority: 0.01,
        }
    }
}

/// Priority by distance from the connection's view position.
///
/// ```
/// use glam::Vec3;
/// use replicate::interest::{Prioritizer, SpherePrioritizer, ObjectFilterInfo, ViewInfo};
/// let p = SpherePrioritizer::default();
/// let view = ViewInfo { connection: 0, position: Vec3::ZERO };
/// let at = |x: f32| ObjectFilterInfo { object: 0, owner: None, position: Some(Vec3::new(x, 0.0, 0.0)) };
/// assert_eq!(p.priority(&at(500.0), &view), 1.0);
/// assert!((p.priority(&at(5500.0), &view) - 0.55).abs() < 1e-6);
/// assert_eq!(p.priority(&at(20_000.0), &view), 0.01);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpherePrioritizer {
    /// The configuration.
    pub config: SpherePrioritizerConfig,
}

impl SpherePrioritizer {
    /// A prioritizer with `config`.
    pub fn new(config: SpherePrioritizerConfig) -> Self {
        Self { config }
    }

    /// The priority at `distance`.
    pub fn priority_at(&self, distance: f32) -> f32 {
        let c = &self.config;
        if !distance.is_finite() || distance > c.outer_radius {
            c.outside_priority
        } else if distance <= c.inner_radius {
            c.inner_priority
        } else {
            let span = (c.outer_radius - c.inner_radius).max(f32::EPSILON);
            let t = (distance - c.inner_radius) / span;
            c.inner_priority + (c.outer_priority - c.inner_priority) * t
        }
    }
}

impl Prioritizer for SpherePrioritizer {
    fn priority(&self, object: &ObjectFilterInfo, view: &ViewInfo) -> f32 {
        match object.position {
            Some(p) => self.priority_at(p.distance(view.position)),
            None => self.config.inner_priority,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sphere_is_monotonic_and_bounded() {
        let p = SpherePrioritizer::default();
        let mut last = f32::INFINITY;
        for d in (0..12_000).step_by(250) {
            let v = p.priority_at(d as f32);
            assert!(v <= last, "priority must not grow with distance");
            assert!((0.01..=1.0).contains(&v));
            last = v;
        }
        assert!((p.priority_at(10_000.0) - 0.1).abs() < 1e-6);
        assert_eq!(p.priority_at(f32::NAN), 0.01);
    }
}
