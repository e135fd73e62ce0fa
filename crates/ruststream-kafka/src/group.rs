//! What one subscription holds of its group: the partitions assigned to it, each with
//! the deliveries in hand, under an epoch that a rebalance renews.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ruststream_core::Attached;
use tokio::sync::Notify;

use crate::offsets::Partition;
use crate::order::{Keys, Note};
pub(crate) use crate::record::Position;
use crate::record::Record;

#[cfg(test)]
mod model;
mod ordered;

#[derive(Debug, Default)]
struct Held {
    next_epoch: u64,
    partitions: HashMap<i32, Slot>,
    /// Key order: records to hand out before any new one (released behind their key, or
    /// retried in place and due).
    ready: VecDeque<Record>,
}

/// One partition held: its epoch, its offsets in hand, and under key order its keys and
/// the notes of its retries.
#[derive(Debug)]
struct Slot {
    epoch: u64,
    offsets: Partition,
    keys: Keys,
    /// Key order: the retries of records in hand, committed in the metadata.
    notes: BTreeMap<i64, Note>,
    /// Key order: whether the notes committed before this assignment are read.
    loaded: bool,
}

/// A partition's position to commit, with the metadata to commit with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Commit {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) metadata: Option<String>,
}

/// A subscription's share of its consumer group.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) topic: String,
    pub(crate) attached: Attached,
    held: Mutex<Held>,
    /// Key order ([`KeyOrder`](crate::KeyOrder)): how many records a partition holds
    /// back before it is paused. `None`: no key order.
    order: Option<usize>,
    /// Key order: a record became ready to hand out.
    pub(crate) woken: Notify,
    /// Key order: the cluster refused a commit's notes as too large (its
    /// `offset.metadata.max.bytes`); from then on every commit goes without them.
    notes_refused: AtomicBool,
}

impl Group {
    /// A subscription to `topic` that holds no partition yet, detached until its first
    /// assignment; `order`: under key order, holding at most about this many records
    /// back per partition.
    pub(crate) fn new(topic: String, order: Option<usize>) -> Self {
        let attached = Attached::new();
        attached.detach();
        Self {
            topic,
            attached,
            held: Mutex::new(Held::default()),
            order,
            woken: Notify::new(),
            notes_refused: AtomicBool::new(false),
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the subscription keeps key order.
    pub(crate) fn ordered(&self) -> bool {
        self.order.is_some()
    }

    /// Partitions given to this subscription: each starts anew, under a new epoch.
    pub(crate) fn assign(&self, partitions: impl IntoIterator<Item = i32>) {
        let mut held = self.held();
        for partition in partitions {
            held.next_epoch += 1;
            let slot = Slot {
                epoch: held.next_epoch,
                offsets: Partition::default(),
                keys: Keys::default(),
                notes: BTreeMap::new(),
                loaded: false,
            };
            held.partitions.insert(partition, slot);
        }
    }

    /// Partitions taken away: their commits, for a last one. What they held back goes
    /// with them (the next owner reads it again).
    pub(crate) fn revoke(&self, partitions: impl IntoIterator<Item = i32>) -> Vec<Commit> {
        let mut held = self.held();
        partitions
            .into_iter()
            .filter_map(|p| {
                let slot = held.partitions.remove(&p)?;
                self.commit(p, &slot)
            })
            .collect()
    }

    /// The commit of every partition held (a last one at a stop).
    pub(crate) fn positions(&self) -> Vec<Commit> {
        self.held()
            .partitions
            .iter()
            .filter_map(|(p, slot)| self.commit(*p, slot))
            .collect()
    }

    /// The commits of `positions`, each with the metadata of its partition now.
    pub(crate) fn commits(&self, positions: &[(i32, i64)]) -> Vec<Commit> {
        let held = self.held();
        positions
            .iter()
            .map(|&(partition, offset)| Commit {
                partition,
                offset,
                metadata: held
                    .partitions
                    .get(&partition)
                    .and_then(|slot| self.metadata(slot)),
            })
            .collect()
    }

    /// `slot`'s commit: its position, if it has one, with its metadata.
    fn commit(&self, partition: i32, slot: &Slot) -> Option<Commit> {
        Some(Commit {
            partition,
            offset: slot.offsets.position()?,
            metadata: self.metadata(slot),
        })
    }

    /// The metadata to commit with `slot`'s position: under key order, the notes of its
    /// retries (where it has any, and the cluster has not refused them); else none.
    fn metadata(&self, slot: &Slot) -> Option<String> {
        let refused = self.notes_refused.load(Ordering::Relaxed);
        (self.ordered() && !refused && !slot.notes.is_empty())
            .then(|| crate::order::encode(&slot.notes))
    }

    /// The cluster refused a commit's notes as too large: later commits go without them
    /// (those records start again at attempt 1 for the partition's next consumer), so
    /// that no commit, the rebalance's included, fails for them again. Whether this is
    /// news.
    pub(crate) fn refuse_notes(&self) -> bool {
        !self.notes_refused.swap(true, Ordering::Relaxed)
    }

    /// How many deliveries of every partition held are being handled (in hand, not
    /// given back, not held back under key order).
    pub(crate) fn handling(&self) -> usize {
        self.held()
            .partitions
            .values()
            .map(|slot| slot.offsets.handling().saturating_sub(slot.keys.parked()))
            .sum()
    }

    /// A message read at `offset` of `partition`: its position if it is to be delivered.
    pub(crate) fn read(&self, partition: i32, offset: i64) -> Option<Position> {
        let mut held = self.held();
        if !held.partitions.contains_key(&partition) {
            // Read before its assignment was seen: assigned now.
            drop(held);
            self.assign([partition]);
            held = self.held();
        }
        let slot = held.partitions.get_mut(&partition)?;
        if let Some(from) = slot.offsets.passes_over(offset) {
            crate::gap::passed_over(&self.topic, partition, from, offset);
        }
        slot.offsets.read(offset).then_some(Position {
            partition,
            offset,
            epoch: slot.epoch,
        })
    }

    /// Settles the delivery at `at`: `Err(())` if its partition was taken away since,
    /// else the partition's commit position if it is to be committed: it moved, or (key
    /// order) the delivery's retry note is gone from what the next commit says.
    pub(crate) fn settle(&self, at: Position) -> Result<Option<i64>, ()> {
        let mut held = self.held();
        let slot = self.slot(&mut held, at).ok_or(())?;
        let noted = slot.notes.remove(&at.offset).is_some();
        let moved = slot.offsets.settle(at.offset);
        Ok(if noted {
            moved.or_else(|| slot.offsets.position())
        } else {
            moved
        })
    }

    /// Gives the delivery at `at` back, with `key` (under key order, the records held
    /// behind it too): the offset to seek its partition to.
    pub(crate) fn abandon(&self, at: Position, key: Option<&[u8]>) -> Option<i64> {
        let mut held = self.held();
        let slot = self.slot(&mut held, at)?;
        let behind = match key {
            Some(key) if self.ordered() => slot.keys.give_back(key),
            _ => Vec::new(),
        };
        let mut seek = slot.offsets.abandon(at.offset);
        for offset in behind {
            seek = slot.offsets.abandon(offset).or(seek);
        }
        seek
    }

    /// The slot `at` was read under, if its partition is still held under that epoch.
    fn slot<'a>(&self, held: &'a mut Held, at: Position) -> Option<&'a mut Slot> {
        held.partitions
            .get_mut(&at.partition)
            .filter(|slot| slot.epoch == at.epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::Group;

    #[test]
    fn a_settlement_after_a_rebalance_is_too_late() {
        let group = Group::new("t".into(), None);
        group.assign([0, 1]);
        let first = group.read(0, 5).expect("new");
        let other = group.read(1, 0).expect("new");
        let revoked = group.revoke([0]);
        assert_eq!((revoked[0].partition, revoked[0].offset), (0, 5));
        group.assign([0]);
        assert_eq!(
            group.settle(first),
            Err(()),
            "read under the earlier assignment"
        );
        assert!(group.abandon(first, None).is_none());
        assert!(
            group.read(0, 5).is_some(),
            "read anew from the committed offset"
        );
        assert_eq!(group.settle(other), Ok(Some(1)));
        assert_eq!(group.positions().len(), 2);
    }
}
