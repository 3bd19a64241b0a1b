//! The writer's side of packet replay (see `replay`): recording the objects section a
//! connection writes as a trace, and taking another connection's trace instead of
//! writing when this connection is in step with it.

use super::ReplicationWriter;
use crate::bits::BitWriter;
use crate::object::{ConnectionId, InternalIndex, ObjectEntry, ObjectTable};
use crate::replication::baseline::MAX_BASELINE_COUNT;
use crate::replication::group::{Event, replay_move};
use crate::replication::replay::{Candidate, SectionInputs, TraceRef, TracedObject};
use crate::replication::wire::index_width;
use crate::state::Condition;
use crate::stream::WriteResult;

/// What the write stages note for a trace being recorded.
#[derive(Debug, Default)]
pub(super) struct TraceNotes {
    /// A trace is being recorded.
    pub on: bool,
    /// The section so far is one a trace can hold.
    pub ok: bool,
    /// Owners of the conditional objects written.
    pub owners: Vec<ConnectionId>,
    /// The dirty objects the write looked at, each with its state when first looked
    /// at (before the write changed it): the schedule's entries it reached and their
    /// dirty subobjects (a continued schedule reads no other object's state).
    pub visited: Vec<TracedObject>,
    /// The dirty set's words whose bits the write read, each with its value when
    /// first read.
    pub dirty_words: Vec<(u32, u64)>,
}

impl TraceNotes {
    /// The section holds something a trace cannot (a creation, a member filter that
    /// depends on the connection, an object that does not fit...).
    pub fn spoil(&mut self) {
        self.ok = false;
    }
}

impl ReplicationWriter {
    /// Notes for the trace a batch of `entry` about to be written: only plain updates
    /// (`long` false) go in a trace, and a conditional object's members depend on
    /// whether the connection owns it.
    pub(super) fn note_batch(&mut self, entry: &ObjectEntry, is_owner: bool, long: bool) {
        let desc = entry.descriptor();
        if long {
            self.trace.spoil();
        }
        if !desc.has_conditions() {
            return;
        }
        let custom = desc
            .condition_masks
            .iter()
            .any(|(c, _)| *c == Condition::Custom);
        match entry.owner_connection() {
            _ if custom || is_owner => self.trace.spoil(),
            Some(owner) => self.trace.owners.push(owner),
            None => {}
        }
    }

    /// Notes an object the write looks at, for the trace being recorded: the word of
    /// the dirty set holding its bit, and, for a dirty one, its state before the write
    /// changes it.
    #[inline]
    pub(super) fn note_visit(&mut self, index: InternalIndex) {
        if !self.trace.on {
            return;
        }
        let k = index / 64;
        self.trace
            .dirty_words
            .push((k, self.sends.dirty.word(k as usize)));
        if !self.sends.dirty.get(index) {
            return;
        }
        match self.sends.infos.get(index as usize) {
            Some(&info) => {
                let word = self.baselines.word(index);
                self.trace.visited.push(TracedObject {
                    index,
                    visited: true,
                    info: [info; 2],
                    baselines: [word; 2],
                });
            }
            None => self.trace.spoil(),
        }
    }

    /// The values a trace compares besides the objects' states; `None` when this
    /// section can be neither replayed nor recorded (see `replay`).
    fn section_inputs(&self, w: &BitWriter) -> Option<SectionInputs> {
        let hooks_neutral = self
            .hooks
            .0
            .as_ref()
            .is_none_or(|h| h.filters_only_custom());
        (self.cache.segments.is_shared()
            && self.attribution.is_none()
            && self.pending_destroys.is_empty()
            && self.huge.is_quiet()
            && hooks_neutral
            && !w.is_overflown())
        .then(|| SectionInputs {
            bits_left: w.bits_left(),
            index_width: index_width(self.locals.end()),
            slot_phase: (self.packet_ordinal() % u64::from(MAX_BASELINE_COUNT)) as u8,
            config: (
                self.config.scheduling_threshold.to_bits(),
                self.config.partial_sort_count,
                self.config.min_batch_bits,
                self.config.max_fit_failures,
            ),
            rebuilds: !self.schedule.is_valid() || !self.reuse_schedule,
        })
    }

    /// Writes the packet's replication sections: replayed from a trace of a
    /// connection in step, or written and recorded as a trace for others.
    pub(super) fn write_shared(&mut self, table: &ObjectTable, w: &mut BitWriter) -> WriteResult {
        let Some(inputs) = self.section_inputs(w) else {
            return self.write_sections(table, w);
        };
        let candidate = Candidate {
            connection: self.connection,
            inputs,
            synced: self.baselines.synced_table(),
            dirty: &self.sends.dirty,
            schedule: &self.schedule,
            sends: self.sends.shared(),
            baseline_words: self.baselines.words().shared(),
            moves: Some((&self.cache.transitions, &self.cache.word_moves)),
        };
        let info = |index: InternalIndex| self.sends.infos.get(index as usize).copied();
        let baselines = |index| self.baselines.word(index);
        let found = self.cache.replays.find(&candidate, info, baselines);
        if let Some(result) = found.and_then(|i| self.replay(i, w, inputs.rebuilds)) {
            return result;
        }
        match self.cache.replays.begin() {
            Some(i) => self.write_traced(table, w, inputs, i),
            None => self.write_sections(table, w),
        }
    }

    /// Takes the trace `found` names: its bits go into `w`, its states become this
    /// connection's. `None` (nothing taken) when there is no such trace.
    fn replay(
        &mut self,
        found: TraceRef,
        w: &mut BitWriter,
        rebuilds: bool,
    ) -> Option<WriteResult> {
        // The packet's nominations are made under this connection's own ordinal.
        let ordinal = self.packet_ordinal();
        let mut replays = std::mem::take(&mut self.cache.replays);
        let Some(t) = replays.replay(found) else {
            self.cache.replays = replays;
            return None;
        };
        let changed = || t.changed.iter().filter_map(|&k| t.objects.get(k as usize));
        let event = Event::Replay { serial: t.serial };
        let [send_joins, word_joins] = &mut self.joins;
        replay_move(
            &mut self.sends,
            &mut self.cache.transitions,
            send_joins,
            event,
            [t.states[0].as_ref(), t.states[1].as_ref()],
            |sends| {
                for o in changed() {
                    sends.infos[o.index as usize] = o.info[1];
                }
                t.take_dirty(&mut sends.dirty, rebuilds);
            },
        );
        replay_move(
            self.baselines.words_mut(),
            &mut self.cache.word_moves,
            word_joins,
            event,
            [t.baseline_words[0].as_ref(), t.baseline_words[1].as_ref()],
            |words| {
                for o in changed().filter(|o| o.visited) {
                    words.set_word(o.index, o.baselines[1]);
                }
            },
        );
        w.write_words(&t.words, t.bits);
        self.schedule.copy_remaining(&t.schedule[1]);
        if let Some(record) = &t.record {
            self.record_bytes += record.size();
            self.records.push_back(std::sync::Arc::clone(record));
        }
        self.stats.add(&t.stats);
        self.baselines.append_tail(&t.baselines, ordinal, t.leader);
        self.cache.add_batch_counts(t.batch_counts);
        let result = t.result.unwrap_or(WriteResult::NoData);
        self.cache.replays = replays;
        Some(result)
    }

    /// Writes the sections and records them as trace `i`.
    fn write_traced(
        &mut self,
        table: &ObjectTable,
        w: &mut BitWriter,
        inputs: SectionInputs,
        i: usize,
    ) -> WriteResult {
        // The counters start from zero for the write: what it adds is the trace's.
        let stats = std::mem::take(&mut self.stats);
        let counts = self.cache.batch_counts();
        let mark = self.baselines.mark();
        let start = w.position();
        let mut ok = true;
        {
            let (infos, baselines) = (&self.sends.infos, &self.baselines);
            let t = self.cache.replays.trace_mut(i);
            t.leader = self.connection;
            // Shared with others: a connection holding the same copy takes the result.
            t.states[0] = self.sends.shared_with_others().cloned();
            t.baseline_words[0] = baselines.words().shared_with_others().cloned();
            t.synced.clear();
            t.synced.extend_from_slice(baselines.synced_table());
            t.dirty[0].clone_from(&self.sends.dirty);
            if !inputs.rebuilds {
                t.schedule[0].copy_remaining(&self.schedule);
            }
            t.objects.clear();
            // Every dirty object's priority goes into a fresh schedule: all are
            // compared. A continued schedule reads only the objects the write looks
            // at, noted as it goes (`note_visit`).
            if inputs.rebuilds {
                for index in self.sends.dirty.iter() {
                    let Some(&info) = infos.get(index as usize) else {
                        ok = false;
                        break;
                    };
                    let word = baselines.word(index);
                    t.objects.push(TracedObject {
                        index,
                        visited: true,
                        info: [info; 2],
                        baselines: [word; 2],
                    });
                }
            }
        }
        self.trace.on = true;
        self.trace.ok = ok;
        self.trace.owners.clear();
        self.trace.visited.clear();
        self.trace.dirty_words.clear();
        let result = self.write_sections(table, w);
        self.trace.on = false;
        let mut ok = self.trace.ok;
        let gain = std::mem::replace(&mut self.stats, stats);
        self.stats.add(&gain);
        let now = self.cache.batch_counts();
        let t = self.cache.replays.trace_mut(i);
        let visited = &mut self.trace.visited;
        // In index order, each object once with its state when first looked at.
        visited.sort_by_key(|o| o.index);
        visited.dedup_by_key(|o| o.index);
        if inputs.rebuilds {
            // All send states are compared and taken, the baselines only of the
            // objects the write looked at (it read no other, and changed none).
            for o in &mut t.objects {
                o.visited = visited.binary_search_by_key(&o.index, |v| v.index).is_ok();
            }
        } else {
            t.objects.extend_from_slice(visited);
        }
        t.changed.clear();
        for (k, o) in t.objects.iter_mut().enumerate() {
            let index = o.index as usize;
            let info = self.sends.infos[index];
            ok &= !info.is_mask_pooled() && !o.info[0].is_mask_pooled();
            o.info[1] = info;
            o.baselines[1] = self.baselines.word(o.index);
            // (Were an object's baselines changed without the write looking at it, a
            // replay would miss the change: such a section is not replayed.)
            ok &= o.visited || o.baselines[1] == o.baselines[0];
            if o.info[1] != o.info[0] || o.baselines[1] != o.baselines[0] {
                t.changed.push(k as u32);
            }
        }
        t.dirty_words.clear();
        if inputs.rebuilds {
            t.dirty[1].clone_from(&self.sends.dirty);
        } else {
            // The words read, each once with its first value, and after. (Were a bit
            // elsewhere changed, a replay would miss it: such a section is not
            // replayed.)
            let words = &mut self.trace.dirty_words;
            words.sort_by_key(|&(k, _)| k);
            words.dedup_by_key(|&mut (k, _)| k);
            let [before, after] = &mut t.dirty;
            after.clone_from(before);
            for &(k, first) in words.iter() {
                let now = self.sends.dirty.word(k as usize);
                after.set_word(k as usize, now);
                t.dirty_words.push((k, [first, now]));
            }
            ok &= after.same_bits(&self.sends.dirty);
        }
        t.bits = w.position() - start;
        t.words.clear();
        w.copy_bits(start, t.bits, &mut t.words);
        t.result = Some(result);
        t.schedule[1].copy_remaining(&self.schedule);
        t.record = (gain.packets > 0)
            .then(|| self.records.back().cloned())
            .flatten();
        t.stats = gain;
        self.baselines.tail_since(mark, &mut t.baselines);
        t.batch_counts = (now.0 - counts.0, now.1 - counts.1);
        t.owners.clone_from(&self.trace.owners);
        t.owners.sort_unstable();
        t.owners.dedup();
        if ok {
            t.inputs = Some(inputs);
            // Frozen when connections in step held the states before: they will take
            // these.
            t.states[1] = Some(if t.states[0].is_some() {
                self.sends.publish_frozen()
            } else {
                self.sends.publish()
            });
            let words = self.baselines.words_mut();
            t.baseline_words[1] = Some(if t.baseline_words[0].is_some() {
                words.publish_frozen()
            } else {
                words.publish()
            });
        }
        self.cache.replays.end(ok);
        result
    }
}
