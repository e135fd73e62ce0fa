//! What one subscription holds of its group: the partitions assigned to it, each with
//! the deliveries in hand, under an epoch that a rebalance renews.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ruststream_core::Attached;

use crate::offsets::Partition;

/// One delivery's identity: its partition and offset, and the epoch of the assignment
/// it was read under (a settlement of an earlier assignment is too late).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) epoch: u64,
}

#[derive(Debug, Default)]
struct Held {
    next_epoch: u64,
    partitions: HashMap<i32, (u64, Partition)>,
}

/// A subscription's share of its consumer group.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) topic: String,
    pub(crate) attached: Attached,
    held: Mutex<Held>,
}

impl Group {
    /// A subscription to `topic` that holds no partition yet, detached until its first
    /// assignment.
    pub(crate) fn new(topic: String) -> Self {
        let attached = Attached::new();
        attached.detach();
        Self {
            topic,
            attached,
            held: Mutex::new(Held::default()),
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Partitions given to this subscription: each starts anew, under a new epoch.
    pub(crate) fn assign(&self, partitions: impl IntoIterator<Item = i32>) {
        let mut held = self.held();
        for partition in partitions {
            held.next_epoch += 1;
            let epoch = held.next_epoch;
            held.partitions
                .insert(partition, (epoch, Partition::default()));
        }
    }

    /// Partitions taken away: their commit positions, for a last commit.
    pub(crate) fn revoke(&self, partitions: impl IntoIterator<Item = i32>) -> Vec<(i32, i64)> {
        let mut held = self.held();
        partitions
            .into_iter()
            .filter_map(|p| {
                held.partitions
                    .remove(&p)
                    .and_then(|(_, part)| Some((p, part.position()?)))
            })
            .collect()
    }

    /// The commit position of every partition held (a last commit at a stop).
    pub(crate) fn positions(&self) -> Vec<(i32, i64)> {
        self.held()
            .partitions
            .iter()
            .filter_map(|(p, (_, part))| Some((*p, part.position()?)))
            .collect()
    }

    /// How many deliveries of every partition held are being handled (in hand, not
    /// given back).
    pub(crate) fn handling(&self) -> usize {
        self.held()
            .partitions
            .values()
            .map(|(_, part)| part.handling())
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
        let (epoch, part) = held.partitions.get_mut(&partition)?;
        part.read(offset).then_some(Position {
            partition,
            offset,
            epoch: *epoch,
        })
    }

    /// Settles the delivery at `at`: `Err(())` if its partition was taken away since,
    /// else the partition's new commit position if it moved.
    pub(crate) fn settle(&self, at: Position) -> Result<Option<i64>, ()> {
        match self.held().partitions.get_mut(&at.partition) {
            Some((epoch, part)) if *epoch == at.epoch => Ok(part.settle(at.offset)),
            _ => Err(()),
        }
    }

    /// Gives the delivery at `at` back: the offset to seek its partition to.
    pub(crate) fn abandon(&self, at: Position) -> Option<i64> {
        match self.held().partitions.get_mut(&at.partition) {
            Some((epoch, part)) if *epoch == at.epoch => part.abandon(at.offset),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Group;

    #[test]
    fn a_settlement_after_a_rebalance_is_too_late() {
        let group = Group::new("t".into());
        group.assign([0, 1]);
        let first = group.read(0, 5).expect("new");
        let other = group.read(1, 0).expect("new");
        assert_eq!(group.revoke([0]), [(0, 5)]);
        group.assign([0]);
        assert_eq!(
            group.settle(first),
            Err(()),
            "read under the earlier assignment"
        );
        assert!(group.abandon(first).is_none());
        assert!(
            group.read(0, 5).is_some(),
            "read anew from the committed offset"
        );
        assert_eq!(group.settle(other), Ok(Some(1)));
        assert_eq!(group.positions().len(), 2);
    }
}
