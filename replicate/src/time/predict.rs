//! Client-side prediction and reconciliation: the [`Predictor`].

use super::{Interpolate, Tick};
use std::collections::VecDeque;

/// The game's deterministic step.
type Step<S, I> = Box<dyn FnMut(&mut S, &I) + Send>;

/// Most predicted ticks kept for reconciliation.
const HISTORY: usize = 256;

/// Predicts an object the client controls, and reconciles it with the server.
///
/// The game supplies a deterministic step, the same code the server runs for the
/// object each tick. [`predict`](Self::predict) applies the client's input for a
/// tick at once and keeps the input and the predicted state. When the authoritative
/// state for tick `T` arrives, [`reconcile`](Self::reconcile) compares it with the
/// prediction for `T` (with [`PartialEq`] unless [`with_tolerance`](Self::with_tolerance)
/// says otherwise): if they differ, the prediction rolls back to the server's state
/// and re-simulates the stored inputs after `T` (a *correction*). The
/// [`visual`](Self::visual) state blends from what was shown before the correction to
/// the corrected prediction over a few ticks, so a correction never pops.
///
/// ```
/// use replicate::time::Predictor;
/// let mut p = Predictor::new(0i32, |s: &mut i32, i: &i32| *s += *i);
/// p.predict(1, 2);
/// p.predict(2, 3);
/// assert!(!p.reconcile(1, &2)); // the server agrees
/// assert!(p.reconcile(2, &4)); // it does not: roll back to 4, nothing to replay
/// assert_eq!(*p.state(), 4);
/// assert_eq!(p.corrections(), 1);
/// ```
pub struct Predictor<S, I> {
    step: Step<S, I>,
    matches: fn(&S, &S) -> bool,
    state: S,
    tick: Option<Tick>,
    history: VecDeque<(Tick, I, S)>,
    visual: S,
    blend_from: Option<S>,
    blend: f32,
    /// Fraction of a correction still shown after each predicted tick (default 0.8).
    pub smoothing: f32,
    corrections: u64,
}

impl<S: std::fmt::Debug, I> std::fmt::Debug for Predictor<S, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predictor")
            .field("tick", &self.tick)
            .field("state", &self.state)
            .field("history", &self.history.len())
            .field("corrections", &self.corrections)
            .finish()
    }
}

impl<S: Clone + PartialEq + Interpolate, I> Predictor<S, I> {
    /// A predictor starting from `initial`, stepping with `step`.
    pub fn new(initial: S, step: impl FnMut(&mut S, &I) + Send + 'static) -> Self {
        Self {
            step: Box::new(step),
            matches: |a, b| a == b,
            visual: initial.clone(),
            state: initial,
            tick: None,
            history: VecDeque::new(),
            blend_from: None,
            blend: 0.0,
            smoothing: 0.8,
            corrections: 0,
        }
    }

    /// Compares predictions with `matches` instead of `==` (e.g. within the
    /// quantization step of a member the step computes in full precision).
    pub fn with_tolerance(mut self, matches: fn(&S, &S) -> bool) -> Self {
        self.matches = matches;
        self
    }

    /// Steps the prediction to `tick` with `input` (ticks must increase; an older one
    /// is ignored) and returns the predicted state.
    pub fn predict(&mut self, tick: Tick, input: I) -> &S {
        if self.tick.is_some_and(|t| tick <= t) {
            return &self.state;
        }
        (self.step)(&mut self.state, &input);
        self.tick = Some(tick);
        self.history.push_back((tick, input, self.state.clone()));
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
        self.blend *= self.smoothing.clamp(0.0, 1.0);
        if self.blend < 0.01 {
            self.blend_from = None;
        }
        self.visual = match &self.blend_from {
            Some(from) => S::interpolate(&self.state, from, self.blend),
            None => self.state.clone(),
        };
        &self.state
    }

    /// Takes the server's state for `tick`. Returns whether it corrected the
    /// prediction (rolled back and re-simulated). A state for a tick beyond the
    /// prediction replaces it (nothing to replay; not a correction); one older than the
    /// kept history is ignored.
    pub fn reconcile(&mut self, tick: Tick, authoritative: &S) -> bool {
        while self.history.front().is_some_and(|h| h.0 < tick) {
            self.history.pop_front();
        }
        if self.tick.is_none_or(|t| tick > t) {
            self.state = authoritative.clone();
            self.visual = self.state.clone();
            self.blend_from = None;
            self.tick = Some(tick);
            self.history.clear();
            return false;
        }
        let Some(front) = self.history.front() else {
            return false;
        };
        if front.0 != tick {
            return false;
        }
        if (self.matches)(&front.2, authoritative) {
            self.history.pop_front();
            return false;
        }
        self.history.pop_front();
        let mut state = authoritative.clone();
        for (_, input, predicted) in self.history.iter_mut() {
            (self.step)(&mut state, input);
            *predicted = state.clone();
        }
        self.state = state;
        self.corrections += 1;
        self.blend_from = Some(self.visual.clone());
        self.blend = 1.0;
        true
    }

    /// The newest predicted state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state to show: the prediction, blending out of the last correction.
    pub fn visual(&self) -> &S {
        &self.visual
    }

    /// Whether the visual state is still blending out of a correction.
    pub fn is_smoothing(&self) -> bool {
        self.blend_from.is_some()
    }

    /// The newest predicted tick.
    pub fn tick(&self) -> Option<Tick> {
        self.tick
    }

    /// Corrections so far.
    pub fn corrections(&self) -> u64 {
        self.corrections
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correction_replays_later_inputs_and_blends_the_visual() {
        let mut p = Predictor::new(0.0f32, |s: &mut f32, i: &f32| *s += *i);
        for t in 1..=5 {
            p.predict(t, 1.0);
        }
        assert_eq!(*p.state(), 5.0);
        // The server says 12 at tick 2 (someone pushed us): replay 3..=5.
        assert!(p.reconcile(2, &12.0));
        assert_eq!(*p.state(), 15.0);
        // The visual starts where it was and blends towards the prediction.
        assert_eq!(*p.visual(), 5.0);
        p.predict(6, 1.0);
        let v = *p.visual();
        assert!(v > 5.0 && v < 16.0, "{v}");
        for t in 7..40 {
            p.predict(t, 1.0);
        }
        assert_eq!(*p.visual(), *p.state());
        assert!(!p.is_smoothing());
        // Agreement and stale states are no corrections.
        assert!(!p.reconcile(10, &(15.0 + 5.0)));
        assert!(!p.reconcile(3, &0.0));
        assert_eq!(p.corrections(), 1);
    }
}
