//! Scope filters: which objects a connection has in scope.
//!
//! An object is in a connection's scope when, in this order:
//! 1. the connection's deny list names it → out;
//! 2. the connection's allow list names it → in;
//! 3. the object belongs to groups and the connection is subscribed to none of them → out;
//! 4. otherwise its filter decides: [`FilterKind::AlwaysRelevant`], [`FilterKind::OwnerOnly`],
//!    [`FilterKind::Spatial`] (the [`GridFilter`]) or [`FilterKind::Custom`] (an
//!    [`ObjectFilter`] you implement).
//!
//! The grid filter buckets objects into square cells (default 5000 units) by their
//! world position; a connection sees every object in the cells overlapping the circle
//! of `max_cull_distance` (default 50 000) around its view position. Moving an object
//! costs a cell update, not a scan.

use super::index_hash::{IndexMap, IndexSet};
use glam::Vec3;

/// Per-connection view data filters and prioritizers use.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ViewInfo {
    /// The connection's id.
    pub connection: u32,
    /// Where the connection's viewer stands.
    pub position: Vec3,
}

/// Per-object data a filter sees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectFilterInfo {
    /// Dense object index.
    pub object: u32,
    /// Owning connection, if any.
    pub owner: Option<u32>,
    /// World position, if the object has one.
    pub position: Option<Vec3>,
}

/// A user-defined relevancy rule.
///
/// ```
/// use replicate::interest::{ObjectFilter, ObjectFilterInfo, ViewInfo};
/// /// Only even connections see these objects.
/// struct EvenOnly;
/// impl ObjectFilter for EvenOnly {
///     fn is_relevant(&self, _object: &ObjectFilterInfo, view: &ViewInfo) -> bool {
///         view.connection % 2 == 0
///     }
/// }
/// ```
pub trait ObjectFilter: Send + Sync {
    /// Whether `object` is in scope for `view`'s connection.
    fn is_relevant(&self, object: &ObjectFilterInfo, view: &ViewInfo) -> bool;
}

/// The filter an object uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FilterKind {
    /// In every connection's scope.
    #[default]
    AlwaysRelevant,
    /// Only in its owner's scope.
    OwnerOnly,
    /// In scope of connections whose view is near (the grid filter).
    Spatial,
    /// Decided by the user filter with this index.
    Custom(u16),
}

/// Configuration of the [`GridFilter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridFilterConfig {
    /// Edge of a square cell, in world units (default 5000).
    pub cell_size: f32,
    /// Views see the cells overlapping this radius (default 50 000).
    pub max_cull_distance: f32,
}

impl Default for GridFilterConfig {
    fn default() -> Self {
        Self {
            cell_size: 5000.0,
            max_cull_distance: 50_000.0,
        }
    }
}

type Cell = (i32, i32);

/// A uniform grid over the XY plane (Z is ignored, as in Iris's grid filter).
#[derive(Debug, Clone, Default)]
pub struct GridFilter {
    config: GridFilterConfig,
    cells: IndexMap<Cell, Vec<u32>>,
    object_cell: IndexMap<u32, Cell>,
}

impl GridFilter {
    /// An empty grid. Non-positive or non-finite sizes fall back to the defaults.
    pub fn new(config: GridFilterConfig) -> Self {
        let d = GridFilterConfig::default();
        let config = GridFilterConfig {
            cell_size: if config.cell_size.is_finite() && config.cell_size > 0.0 {
                config.cell_size
            } else {
                d.cell_size
            },
            max_cull_distance: if config.max_cull_distance.is_finite()
                && config.max_cull_distance >= 0.0
            {
                config.max_cull_distance
            } else {
                d.max_cull_distance
            },
        };
        Self {
            config,
            ..Self::default()
        }
    }

    /// The configuration.
    pub fn config(&self) -> GridFilterConfig {
        self.config
    }

    fn cell_of(&self, p: Vec3) -> Cell {
        let c = |v: f32| {
            (v / self.config.cell_size)
                .floor()
                .clamp(i32::MIN as f32, i32::MAX as f32) as i32
        };
        (c(p.x), c(p.y))
    }

    /// Inserts or moves an object. Returns whether its cell changed.
    pub fn update_object(&mut self, object: u32, position: Vec3) -> bool {
        let cell = self.cell_of(position);
        match self.object_cell.get(&object) {
            Some(&old) if old == cell => return false,
            Some(&old) => {
                if let Some(list) = self.cells.get_mut(&old) {
                    list.retain(|&o| o != object);
                    if list.is_empty() {
                        self.cells.remove(&old);
                    }
                }
            }
            None => {}
        }
        self.object_cell.insert(object, cell);
        self.cells.entry(cell).or_default().push(object);
        true
    }

    /// Removes an object.
    pub fn remove_object(&mut self, object: u32) {
        if let Some(cell) = self.object_cell.remove(&object) {
            if let Some(list) = self.cells.get_mut(&cell) {
                list.retain(|&o| o != object);
                if list.is_empty() {
                    self.cells.remove(&cell);
                }
            }
        }
    }

    /// Whether `object` lies in a cell visible from `view`.
    pub fn is_visible(&self, object: u32, view: Vec3) -> bool {
        let Some(&(cx, cy)) = self.object_cell.get(&object) else {
            return false;
        };
        self.cell_visible(cx, cy, view)
    }

    fn cell_visible(&self, cx: i32, cy: i32, view: Vec3) -> bool {
        // Distance from the view to the nearest point of the cell's square.
        let s = self.config.cell_size;
        let (x0, y0) = (cx as f32 * s, cy as f32 * s);
        let dx = (x0 - view.x).max(0.0).max(view.x - (x0 + s));
        let dy = (y0 - view.y).max(0.0).max(view.y - (y0 + s));
        dx * dx + dy * dy <= self.config.max_cull_distance * self.config.max_cull_distance
    }

    /// Appends the objects of every cell visible from exactly one of the views `from`
    /// and `to` (what a view moving from `from` to `to` may gain or lose) to `out`.
    /// Costs the cells around the two views, and a lookup per cell that changed.
    pub fn view_changes(&self, from: Vec3, to: Vec3, out: &mut Vec<u32>) {
        let ((a0, a1), (b0, b1)) = (self.reach_of(from), self.reach_of(to));
        let low = (a0.0.min(b0.0), a0.1.min(b0.1));
        let high = (a1.0.max(b1.0), a1.1.max(b1.1));
        self.objects_of_cells(low, high, out, |cx, cy| {
            self.cell_visible(cx, cy, from) != self.cell_visible(cx, cy, to)
        });
    }

    /// Appends every object visible from `view` to `out`.
    pub fn visible_objects(&self, view: Vec3, out: &mut Vec<u32>) {
        let (low, high) = self.reach_of(view);
        self.objects_of_cells(low, high, out, |cx, cy| self.cell_visible(cx, cy, view));
    }

    /// The lowest and highest cells a view at `view` may see.
    fn reach_of(&self, view: Vec3) -> (Cell, Cell) {
        let r = self.config.max_cull_distance;
        let reach = Vec3::new(r, r, 0.0);
        (self.cell_of(view - reach), self.cell_of(view + reach))
    }

    /// Appends the objects of the cells from `low` to `high` that `keep` accepts:
    /// looked up cell by cell, or, when the range holds more cells than the grid has
    /// occupied, by walking the occupied cells.
    fn objects_of_cells(
        &self,
        low: Cell,
        high: Cell,
        out: &mut Vec<u32>,
        keep: impl Fn(i32, i32) -> bool,
    ) {
        let span = (high.0 as i64 - low.0 as i64 + 1) * (high.1 as i64 - low.1 as i64 + 1);
        if span > self.cells.len() as i64 {
            for (&(cx, cy), objects) in &self.cells {
                if keep(cx, cy) {
                    out.extend_from_slice(objects);
                }
            }
            return;
        }
        for cx in low.0..=high.0 {
            for cy in low.1..=high.1 {
                if keep(cx, cy)
                    && let Some(objects) = self.cells.get(&(cx, cy))
                {
                    out.extend_from_slice(objects);
                }
            }
        }
    }
}

/// Per-connection scope overrides: allow and deny lists, group subscriptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionScope {
    /// Objects always in scope for this connection.
    pub allow: IndexSet,
    /// Objects never in scope for this connection (wins over everything).
    pub deny: IndexSet,
    /// Groups this connection is subscribed to.
    pub groups: IndexSet,
}

/// Decides scope for one (object, connection) pair from the rules above.
///
/// `groups` are the object's groups; `filters` the user filters by index.
pub fn in_scope(
    object: &ObjectFilterInfo,
    kind: FilterKind,
    groups: &[u32],
    view: &ViewInfo,
    scope: &ConnectionScope,
    grid: &GridFilter,
    filters: &[Box<dyn ObjectFilter>],
) -> bool {
    if scope.deny.contains(&object.object) {
        return false;
    }
    if scope.allow.contains(&object.object) {
        return true;
    }
    if !groups.is_empty() && !groups.iter().any(|g| scope.groups.contains(g)) {
        return false;
    }
    match kind {
        FilterKind::AlwaysRelevant => true,
        FilterKind::OwnerOnly => object.owner == Some(view.connection),
        FilterKind::Spatial => grid.is_visible(object.object, view.position),
        FilterKind::Custom(i) => filters
            .get(i as usize)
            .is_some_and(|f| f.is_relevant(object, view)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_visibility_and_moves() {
        let mut g = GridFilter::new(GridFilterConfig::default());
        g.update_object(1, Vec3::new(0.0, 0.0, 0.0));
        g.update_object(2, Vec3::new(60_000.0, 0.0, 0.0));
        g.update_object(3, Vec3::new(-49_000.0, 0.0, 0.0));
        let mut seen = Vec::new();
        g.visible_objects(Vec3::ZERO, &mut seen);
        seen.sort();
        assert_eq!(seen, vec![1, 3]);
        assert!(!g.is_visible(2, Vec3::ZERO));
        assert!(g.update_object(2, Vec3::new(20_000.0, 100.0, 0.0)));
        assert!(!g.update_object(2, Vec3::new(20_001.0, 100.0, 0.0)));
        assert!(g.is_visible(2, Vec3::ZERO));
        g.remove_object(2);
        assert!(!g.is_visible(2, Vec3::ZERO));
        let mut seen = Vec::new();
        g.visible_objects(Vec3::ZERO, &mut seen);
        assert_eq!(seen.len(), 2);
    }

    /// A seeded generator of integers below `m`.
    fn draws(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut rng = seed;
        move |m| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % m
        }
    }

    /// A grid of 100-unit cells seen 450 units around a view, holding `count` objects
    /// scattered over a square of side `span` centred on the origin.
    fn scattered_grid(count: u32, span: u64, next: &mut impl FnMut(u64) -> u64) -> GridFilter {
        let mut g = GridFilter::new(GridFilterConfig {
            cell_size: 100.0,
            max_cull_distance: 450.0,
        });
        let half = (span / 2) as f32;
        for i in 0..count {
            let (x, y) = (next(span) as f32 - half, next(span) as f32 - half);
            g.update_object(i, Vec3::new(x, y, 0.0));
        }
        g
    }

    #[test]
    fn visible_objects_matches_is_visible() {
        let g = scattered_grid(500, 4000, &mut draws(12345));
        for view in [
            Vec3::ZERO,
            Vec3::new(1234.0, -800.0, 5.0),
            Vec3::new(-5000.0, 0.0, 0.0),
        ] {
            let mut seen = Vec::new();
            g.visible_objects(view, &mut seen);
            seen.sort();
            let expected: Vec<u32> = (0..500).filter(|&i| g.is_visible(i, view)).collect();
            assert_eq!(seen, expected);
        }
    }

    #[test]
    fn view_changes_are_the_objects_one_view_sees_and_the_other_does_not() {
        let mut next = draws(777);
        let g = scattered_grid(800, 6000, &mut next);
        let mut views = vec![
            (Vec3::ZERO, Vec3::ZERO),
            (Vec3::ZERO, Vec3::new(1.0, 0.0, 0.0)),
            (Vec3::new(-2500.0, 0.0, 0.0), Vec3::new(2500.0, 0.0, 0.0)),
            // Far apart: every cell of the grid is looked at instead.
            (Vec3::new(-1e6, 0.0, 0.0), Vec3::new(1e6, 0.0, 0.0)),
        ];
        for _ in 0..40 {
            let from = Vec3::new(next(6000) as f32 - 3000.0, next(6000) as f32 - 3000.0, 0.0);
            let step = Vec3::new(next(300) as f32 - 150.0, next(300) as f32 - 150.0, 0.0);
            views.push((from, from + step));
        }
        for (from, to) in views {
            let mut changed = Vec::new();
            g.view_changes(from, to, &mut changed);
            changed.sort_unstable();
            let expected: Vec<u32> = (0..800)
                .filter(|&i| g.is_visible(i, from) != g.is_visible(i, to))
                .collect();
            assert_eq!(changed, expected, "{from} -> {to}");
        }
    }

    #[test]
    fn scope_rules_precedence() {
        let grid = GridFilter::default();
        let obj = ObjectFilterInfo {
            object: 5,
            owner: Some(2),
            position: None,
        };
        let view = ViewInfo {
            connection: 1,
            position: Vec3::ZERO,
        };
        let mut scope = ConnectionScope::default();
        assert!(in_scope(
            &obj,
            FilterKind::AlwaysRelevant,
            &[],
            &view,
            &scope,
            &grid,
            &[]
        ));
        assert!(!in_scope(
            &obj,
            FilterKind::OwnerOnly,
            &[],
            &view,
            &scope,
            &grid,
            &[]
        ));
        let owner_view = ViewInfo {
            connection: 2,
            ..view
        };
        assert!(in_scope(
            &obj,
            FilterKind::OwnerOnly,
            &[],
            &owner_view,
            &scope,
            &grid,
            &[]
        ));
        assert!(!in_scope(
            &obj,
            FilterKind::AlwaysRelevant,
            &[7],
            &view,
            &scope,
            &grid,
            &[]
        ));
        scope.groups.insert(7);
        assert!(in_scope(
            &obj,
            FilterKind::AlwaysRelevant,
            &[7],
            &view,
            &scope,
            &grid,
            &[]
        ));
        scope.allow.insert(5);
        assert!(in_scope(
            &obj,
            FilterKind::OwnerOnly,
            &[9],
            &view,
            &scope,
            &grid,
            &[]
        ));
        scope.deny.insert(5);
        assert!(!in_scope(
            &obj,
            FilterKind::AlwaysRelevant,
            &[],
            &view,
            &scope,
            &grid,
            &[]
        ));
        struct Never;
        impl ObjectFilter for Never {
            fn is_relevant(&self, _: &ObjectFilterInfo, _: &ViewInfo) -> bool {
                false
            }
        }
        let filters: Vec<Box<dyn ObjectFilter>> = vec![Box::new(Never)];
        let scope = ConnectionScope::default();
        assert!(!in_scope(
            &obj,
            FilterKind::Custom(0),
            &[],
            &view,
            &scope,
            &grid,
            &filters
        ));
        assert!(!in_scope(
            &obj,
            FilterKind::Custom(1),
            &[],
            &view,
            &scope,
            &grid,
            &filters
        ));
    }
}
