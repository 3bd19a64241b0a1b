//! The writer's delivery stage: a packet's fate, from its record. Delivered creations
//! and destroys are confirmed and nominated baselines promoted; a lost packet's change
//! masks are owed again (the current values go out, not the lost ones); a discarded
//! record is dropped.

use super::{ReplicationWriter, mask_bits};
use crate::connection::DeliveryStatus;
use crate::object::{InternalIndex, ObjectTable};
use crate::replication::baseline::write_storage;
use crate::replication::record::{RecordKind, ReplicatedObjectState as S};

impl ReplicationWriter {
    /// The fate of the oldest packet this writer wrote into.
    ///
    /// A delivered packet of plain updates settles nothing but the baselines it
    /// nominated, and those wait: they are promoted when the connection is next caught
    /// up ([`catch_up`](Self::catch_up)), which the server does on the writer thread
    /// right before the connection's next write reads them. Any other fate catches up
    /// first and is settled at once.
    pub fn process_delivery(&mut self, table: &mut ObjectTable, status: DeliveryStatus) {
        self.release_huge_tear_offs(table);
        let later = status == DeliveryStatus::Delivered
            && self
                .records
                .front()
                .is_some_and(|r| r.is_plain() && r.exports.is_empty());
        if !later {
            self.catch_up(table);
        }
        let Some(record) = self.records.pop_front() else {
            return;
        };
        self.record_bytes = self.record_bytes.saturating_sub(record.size());
        let ordinal = self.records_popped;
        self.records_popped += 1;
        if later {
            self.baselines.defer_delivery(ordinal, status);
            return;
        }
        // The packet's nominations become acknowledged baselines or are released (the
        // members their batches carried are owed again through the record).
        if let Some(storage) = &self.storage {
            self.baselines
                .on_delivery(&mut write_storage(storage), ordinal, status);
        }
        if status == DeliveryStatus::Lost {
            self.stats.lost_records += 1;
        }
        if !record.exports.is_empty() {
            self.exports.lock().on_delivery(&record.exports, status);
        }
        if status == DeliveryStatus::Discard
            || (status == DeliveryStatus::Delivered && record.is_plain())
        {
            // A delivered update settles nothing per object (its baseline, if it
            // nominated one, was promoted above).
            return;
        }
        for ri in &record.infos {
            if status == DeliveryStatus::Delivered && ri.kind == RecordKind::State {
                // A delivered update settles nothing per object (its baseline, if it
                // nominated one, was promoted above).
                continue;
            }
            let i = ri.index;
            // A record about an object whose index was since reused is stale.
            if table.entry_at(i).map(|e| e.handle()) != Some(ri.handle) {
                continue;
            }
            let sends = &mut *self.sends;
            let Some(info) = sends.infos.get_mut(i as usize) else {
                continue;
            };
            let state = info.state();
            match (status, ri.kind) {
                (DeliveryStatus::Delivered, RecordKind::Creation) => match state {
                    S::WaitOnCreateConfirmation | S::PendingCreate => {
                        info.set_creation_confirmed(true);
                        info.set_state(S::Created);
                    }
                    S::PendingDestroy | S::PendingTearOff => info.set_creation_confirmed(true),
                    _ => {}
                },
                (DeliveryStatus::Delivered, RecordKind::State) => {}
                (DeliveryStatus::Delivered, RecordKind::Destroy | RecordKind::TearOff) => {
                    match state {
                        S::WaitOnDestroyConfirmation => {
                            info.set_state(S::Destroyed);
                            info.set_state(S::Invalid);
                            let recovering = self.recovering.get(i);
                            self.release(table, i);
                            if recovering {
                                // Reported broken: the client dropped it; create it anew.
                                self.restart_if_in_scope(table, i);
                            }
                        }
                        S::CancelPendingDestroy => self.recreate(table, i),
                        _ => {}
                    }
                }
                (DeliveryStatus::Lost, RecordKind::Creation | RecordKind::State) => {
                    match state {
                        S::WaitOnCreateConfirmation if ri.kind == RecordKind::Creation => {
                            info.set_state(S::PendingCreate);
                            info.set_all(mask_bits(table, i), &mut sends.pool);
                        }
                        S::PendingCreate | S::WaitOnCreateConfirmation => {
                            info.set_all(mask_bits(table, i), &mut sends.pool);
                        }
                        S::Created => {
                            info.or_mask(&ri.mask, &mut sends.pool);
                            if ri.tags {
                                info.set_tags_dirty(true);
                            }
                        }
                        _ => continue,
                    }
                    info.add_priority(self.config.lost_priority_bump);
                    self.mark_dirty(table, i);
                }
                (DeliveryStatus::Lost, RecordKind::Destroy) => match state {
                    S::WaitOnDestroyConfirmation => {
                        info.set_state(S::PendingDestroy);
                        self.push_destroy(i);
                    }
                    S::CancelPendingDestroy => self.recreate(table, i),
                    _ => {}
                },
                (DeliveryStatus::Lost, RecordKind::TearOff) => {
                    if state == S::WaitOnDestroyConfirmation {
                        info.set_state(S::PendingTearOff);
                        info.add_priority(self.config.lost_priority_bump);
                        self.mark_dirty(table, i);
                    }
                }
                (DeliveryStatus::Discard, _) => {}
            }
        }
    }

    /// Releases everything (the connection is going away): records are discarded and
    /// every tracked object is released in the table.
    pub fn release_all(&mut self, table: &mut ObjectTable) {
        if let Some(s) = &self.storage {
            self.baselines.release_all(&mut write_storage(s));
        }
        self.records.clear();
        self.record_bytes = 0;
        self.pending_destroys.clear();
        let sends = &mut *self.sends;
        for i in 0..sends.infos.len() {
            if sends.infos[i].state() != S::Invalid {
                sends.infos[i].release(&mut sends.pool);
                table.release_ref(i as InternalIndex);
            }
        }
        self.tracked = 0;
        self.sends.dirty.clear_all();
        self.schedule.invalidate();
    }
}
