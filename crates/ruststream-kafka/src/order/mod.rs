//! Key order: a key's records handed out one at a time, a retry in place before the
//! next record of its key.
//!
//! Under the [`KeyOrder`](crate::KeyOrder) option a record whose key has a record in
//! hand (being handled, or waiting for its retry) is held back behind it, in the order
//! read, and handed out when that one is settled for good (accepted, rejected, or
//! dead-lettered). A retry is not a copy: the record itself is handed out again (after
//! its delay) and its offset stays in hand meanwhile, so the group never commits past
//! it and a crash reads it again first. Records without a key are in no order.

mod note;
mod wait;

pub(crate) use note::{Note, decode, encode};
pub(crate) use wait::Waits;

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;

use crate::record::Record;

/// One partition's keys in hand, and the records held here.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    /// Each key with a record in hand (by its hash: no copy of the key per record; two
    /// keys whose 64-bit hashes meet share one order, which only costs concurrency),
    /// and the records of it read since, in order.
    busy: HashMap<u64, VecDeque<Record>>,
    /// Hashes the keys (seeded per partition).
    hasher: RandomState,
    /// Records held here and not in the runtime: behind their key, waiting for their
    /// retry, or ready to be handed out.
    parked: usize,
    /// Whether the partition is paused because too many are held.
    paused: bool,
}

/// Whether a partition is to be paused or resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Pause,
    Resume,
}

impl Keys {
    /// `record`, just read: handed back to be handed out if its key is free (or it has
    /// none), else held behind the record of its key in hand.
    pub(crate) fn admit(&mut self, record: Record) -> Option<Record> {
        let Some(key) = record.key().map(|key| self.hasher.hash_one(key)) else {
            return Some(record);
        };
        if let Some(behind) = self.busy.get_mut(&key) {
            behind.push_back(record);
            self.parked += 1;
            return None;
        }
        self.busy.insert(key, VecDeque::new());
        Some(record)
    }

    /// The record of `key` in hand is settled for good: the next record of its key,
    /// now the one in hand (still held here until it is handed out).
    pub(crate) fn release(&mut self, key: &[u8]) -> Option<Record> {
        let key = self.hasher.hash_one(key);
        let behind = self.busy.get_mut(&key)?;
        let next = behind.pop_front();
        if next.is_none() {
            self.busy.remove(&key);
        }
        next
    }

    /// The record of `key` in hand is given back unsettled: its key is free, and the
    /// offsets of the records held behind it, to be read again after it.
    pub(crate) fn give_back(&mut self, key: &[u8]) -> Vec<i64> {
        let behind = self
            .busy
            .remove(&self.hasher.hash_one(key))
            .unwrap_or_default();
        self.parked = self.parked.saturating_sub(behind.len());
        behind.iter().map(|record| record.at.offset).collect()
    }

    /// A record of the partition is held here to be handed out again (a retry).
    pub(crate) fn park(&mut self) {
        self.parked += 1;
    }

    /// A held record is handed out.
    pub(crate) fn unpark(&mut self) {
        self.parked = self.parked.saturating_sub(1);
    }

    /// How many records are held here.
    pub(crate) fn parked(&self) -> usize {
        self.parked
    }

    /// Pause the partition once `bound` records are held here; resume it once half as
    /// many are.
    pub(crate) fn flow(&mut self, bound: usize) -> Option<Flow> {
        if !self.paused && self.parked >= bound {
            self.paused = true;
            Some(Flow::Pause)
        } else if self.paused && self.parked <= bound / 2 {
            self.paused = false;
            Some(Flow::Resume)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Flow, Keys};
    use crate::record::{Position, Record};

    fn record(offset: i64, key: Option<&str>) -> Record {
        let at = Position {
            partition: 0,
            offset,
            epoch: 1,
        };
        Record::keyed(at, key)
    }

    fn offset(record: Option<Record>) -> Option<i64> {
        record.map(|r| r.at.offset)
    }

    #[test]
    fn a_key_s_records_are_handed_out_one_at_a_time_in_order() {
        let mut keys = Keys::default();
        assert_eq!(offset(keys.admit(record(0, Some("a")))), Some(0));
        assert_eq!(
            offset(keys.admit(record(1, Some("b")))),
            Some(1),
            "another key"
        );
        assert_eq!(offset(keys.admit(record(2, Some("a")))), None, "behind 0");
        assert_eq!(
            offset(keys.admit(record(3, None))),
            Some(3),
            "no key, no order"
        );
        assert_eq!(offset(keys.admit(record(4, Some("a")))), None, "behind 2");
        assert_eq!(keys.parked(), 2);
        assert_eq!(offset(keys.release(b"a")), Some(2), "0 settled: 2 is next");
        assert_eq!(offset(keys.admit(record(5, Some("a")))), None, "behind 4");
        assert_eq!(offset(keys.release(b"a")), Some(4));
        assert_eq!(offset(keys.release(b"a")), Some(5));
        assert_eq!(offset(keys.release(b"a")), None, "a is free");
        assert_eq!(offset(keys.admit(record(6, Some("a")))), Some(6));
        assert_eq!(offset(keys.release(b"b")), None);
        assert_eq!(offset(keys.release(b"c")), None, "never seen");
    }

    #[test]
    fn a_record_given_back_frees_its_key_and_gives_back_those_behind_it() {
        let mut keys = Keys::default();
        assert!(keys.admit(record(0, Some("a"))).is_some());
        assert!(keys.admit(record(1, Some("a"))).is_none());
        assert!(keys.admit(record(2, Some("b"))).is_some());
        assert!(keys.admit(record(3, Some("a"))).is_none());
        assert_eq!(keys.give_back(b"a"), [1, 3]);
        assert_eq!(keys.parked(), 0);
        assert_eq!(
            offset(keys.admit(record(0, Some("a")))),
            Some(0),
            "read again"
        );
    }

    #[test]
    fn a_partition_pauses_at_its_bound_and_resumes_at_half() {
        let mut keys = Keys::default();
        assert!(keys.admit(record(0, Some("a"))).is_some());
        let mut flows = Vec::new();
        for offset in 1..=4 {
            assert!(keys.admit(record(offset, Some("a"))).is_none());
            flows.push(keys.flow(4));
        }
        assert_eq!(flows, [None, None, None, Some(Flow::Pause)]);
        keys.park();
        assert_eq!(keys.flow(4), None, "paused already");
        let mut flows = Vec::new();
        for _ in 0..3 {
            keys.unpark();
            flows.push(keys.flow(4));
        }
        assert_eq!(flows, [None, None, Some(Flow::Resume)]);
    }
}
