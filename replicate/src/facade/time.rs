//! The client's side of the time model in the facade: ticks of packets and objects,
//! the cached clock estimate, the interpolation delay and the interpolated types.

use crate::handle::NetRefHandle;
use crate::replication::{ClientWorld, ReplicationEvent};
use crate::state::Replicated;
use crate::time::{
    ClockSync, Interpolate, InterpolationStats, Sampled, SnapshotBuffer, Tick, TimeConfig,
};
use std::any::{Any, TypeId};
use std::collections::HashMap;

/// States kept per interpolated object.
const SNAPSHOTS: usize = 32;

/// Largest rate at which the interpolation delay grows / shrinks (s per s).
const DELAY_GROW: f64 = 0.10;
const DELAY_SHRINK: f64 = 0.02;

/// One interpolated type's buffers, type-erased.
trait InterpolatedType: Send {
    fn capture(
        &mut self,
        world: &ClientWorld,
        handle: NetRefHandle,
        tick: Tick,
        seen: Option<Tick>,
    );
    fn remove(&mut self, handle: NetRefHandle);
    fn as_any(&self) -> &dyn Any;
}

struct Buffers<T> {
    objects: HashMap<NetRefHandle, SnapshotBuffer<T>>,
}

impl<T: Replicated + Interpolate + Send> InterpolatedType for Buffers<T> {
    fn capture(
        &mut self,
        world: &ClientWorld,
        handle: NetRefHandle,
        tick: Tick,
        seen: Option<Tick>,
    ) {
        if let Some(value) = world.get::<T>(handle) {
            self.objects
                .entry(handle)
                .or_insert_with(|| SnapshotBuffer::new(SNAPSHOTS))
                .push(tick, value.clone(), seen);
        }
    }

    fn remove(&mut self, handle: NetRefHandle) {
        self.objects.remove(&handle);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The client's time state (see [`crate::time`]).
pub(super) struct ClientTime {
    pub(super) config: TimeConfig,
    offset: Option<f64>,
    max_down: Option<f64>,
    max_up: Option<f64>,
    settled: bool,
    tick_seconds: f64,
    pub(super) newest_tick: Option<Tick>,
    object_ticks: HashMap<NetRefHandle, Tick>,
    delay: Option<f64>,
    last_update: Option<f64>,
    types: Vec<(TypeId, Box<dyn InterpolatedType>)>,
    pub(super) stats: InterpolationStats,
}

impl ClientTime {
    pub(super) fn new(config: TimeConfig) -> Self {
        let tick_seconds = config.tick_seconds();
        Self {
            config,
            offset: None,
            max_down: None,
            max_up: None,
            settled: false,
            tick_seconds,
            newest_tick: None,
            object_ticks: HashMap::new(),
            delay: None,
            last_update: None,
            types: Vec::new(),
            stats: InterpolationStats::default(),
        }
    }

    /// After a packet of tick `tick` was read: stamps its objects' updates and captures
    /// the interpolated ones. `seen` is the newest tick before this packet.
    pub(super) fn on_packet(
        &mut self,
        world: &ClientWorld,
        tick: Option<Tick>,
        seen: Option<Tick>,
        events: &[ReplicationEvent],
    ) {
        if let Some(tick) = tick {
            self.newest_tick = Some(self.newest_tick.map_or(tick, |n| n.max(tick)));
        }
        for event in events {
            match event {
                // A packet without a tick still ends objects: their ticks and
                // snapshot buffers go with them.
                ReplicationEvent::Spawned { handle, .. }
                | ReplicationEvent::MembersChanged { handle, .. }
                | ReplicationEvent::ReferencesResolved { handle, .. } => {
                    let Some(tick) = tick else {
                        continue;
                    };
                    let entry = self.object_ticks.entry(*handle).or_insert(tick);
                    if *entry > tick {
                        // An older packet's late members: the state is not tick's.
                        continue;
                    }
                    *entry = tick;
                    for (_, t) in &mut self.types {
                        t.capture(world, *handle, tick, seen);
                    }
                }
                ReplicationEvent::Destroyed { handle } | ReplicationEvent::TornOff { handle } => {
                    self.object_ticks.remove(handle);
                    for (_, t) in &mut self.types {
                        t.remove(*handle);
                    }
                }
                _ => {}
            }
        }
    }

    /// Once per frame: takes the clock's estimate and adapts the interpolation delay.
    pub(super) fn update(&mut self, clock: &mut ClockSync, tick_seconds: f64, now: f64) {
        self.tick_seconds = tick_seconds;
        clock.update(now);
        self.offset = clock.offset();
        self.max_down = clock.max_down_delay();
        self.max_up = clock.max_up_delay();
        self.settled = clock.is_settled();
        let elapsed = self.last_update.map_or(0.0, |t| (now - t).max(0.0));
        self.last_update = Some(now);
        let Some(down) = self.max_down else {
            return;
        };
        // One tick between states, the worst one-way delay, one lost packet.
        let tick = self.tick_seconds;
        let target = 2.0 * tick + down + self.config.interpolation_margin.as_secs_f64();
        self.delay = Some(match self.delay {
            None => target,
            Some(d) if target > d => d + (target - d).min(DELAY_GROW * elapsed),
            Some(d) => d - (d - target).min(DELAY_SHRINK * elapsed),
        });
    }

    pub(super) fn server_time(&self, now: f64) -> Option<f64> {
        self.offset.map(|o| now + o)
    }

    pub(super) fn interpolation_time(&self, now: f64) -> Option<f64> {
        Some(self.server_time(now)? - self.delay?)
    }

    /// Seconds per server tick (the server's rate once it said it).
    pub(super) fn tick_seconds(&self) -> f64 {
        self.tick_seconds
    }

    pub(super) fn delay(&self) -> Option<f64> {
        self.delay
    }

    pub(super) fn input_tick(&self, now: f64) -> Option<Tick> {
        if !self.settled {
            return None;
        }
        let ahead = self.server_time(now)?
            + self.max_up.unwrap_or(0.0)
            + self.config.input_margin.as_secs_f64();
        let tick = (ahead / self.tick_seconds).ceil() + 1.0;
        (tick >= 0.0 && tick < f64::from(Tick::MAX)).then_some(tick as Tick)
    }

    pub(super) fn object_tick(&self, handle: NetRefHandle) -> Option<Tick> {
        self.object_ticks.get(&handle).copied()
    }

    pub(super) fn interpolate<T: Replicated + Interpolate + Send>(&mut self) {
        let id = TypeId::of::<T>();
        if !self.types.iter().any(|(t, _)| *t == id) {
            self.types.push((
                id,
                Box::new(Buffers::<T> {
                    objects: HashMap::new(),
                }),
            ));
        }
    }

    pub(super) fn sample<T: Replicated + Interpolate + Send>(
        &mut self,
        handle: NetRefHandle,
        now: f64,
    ) -> Option<Sampled<T>> {
        let id = TypeId::of::<T>();
        let buffers = self
            .types
            .iter()
            .find(|(t, _)| *t == id)?
            .1
            .as_any()
            .downcast_ref::<Buffers<T>>()?;
        let buffer = buffers.objects.get(&handle);
        let at = self.interpolation_time(now).map(|t| t / self.tick_seconds);
        let max = self.config.max_extrapolation.as_secs_f64() / self.tick_seconds;
        let sample = match (buffer, at) {
            (Some(b), Some(at)) => b.sample(at, self.newest_tick, max),
            _ => None,
        };
        self.stats.count(sample.as_ref());
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtocolRegistry;
    use crate::replication::ReplicationConfig;
    use std::sync::Arc;

    /// An object ended by a packet that carries no tick (its time section did not fit)
    /// must still leave the per-object tables, or every destroyed object stays there.
    #[test]
    fn objects_ended_without_a_tick_leave_the_tables() {
        let world = ClientWorld::new(
            Arc::new(ProtocolRegistry::default()),
            ReplicationConfig::default(),
        );
        let mut time = ClientTime::new(TimeConfig::default());
        let a = NetRefHandle::new(1, false, 0);
        let b = NetRefHandle::new(2, false, 0);
        let spawned = |handle| ReplicationEvent::Spawned {
            handle,
            protocol: 0,
        };
        time.on_packet(&world, Some(7), None, &[spawned(a), spawned(b)]);
        assert_eq!(time.object_tick(a), Some(7));
        assert_eq!(time.object_tick(b), Some(7));
        time.on_packet(
            &world,
            None,
            Some(7),
            &[
                ReplicationEvent::Destroyed { handle: a },
                ReplicationEvent::TornOff { handle: b },
            ],
        );
        assert_eq!(time.object_tick(a), None);
        assert_eq!(time.object_tick(b), None);
        assert!(time.object_ticks.is_empty());
    }
}
