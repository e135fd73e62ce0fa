//! Key order's part of a subscription's group: records held back behind their key,
//! retries held in place and their notes, and the records ready to hand out again.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Group, Position};
use crate::order::{Flow, Note};
use crate::record::Record;

impl Group {
    /// Key order: `record`, just read, to hand out now, or `None` where it is held back
    /// behind its key (or its partition was taken away); and whether its partition is to
    /// be paused.
    pub(crate) fn admit(&self, record: Record) -> (Option<Record>, Option<(i32, Flow)>) {
        let Some(bound) = self.order else {
            return (Some(record), None);
        };
        let at = record.at;
        let mut held = self.held();
        let Some(slot) = self.slot(&mut held, at) else {
            return (None, None);
        };
        let admitted = slot.keys.admit(record);
        let flow = slot.keys.flow(bound).map(|flow| (at.partition, flow));
        (admitted, flow)
    }

    /// Key order: the delivery at `at`, of `key`, is settled for good; the next record
    /// of its key is ready.
    pub(crate) fn release(&self, at: Position, key: Option<&[u8]>) {
        let Some(key) = key.filter(|_| self.ordered()) else {
            return;
        };
        let mut held = self.held();
        let Some(next) = self
            .slot(&mut held, at)
            .and_then(|slot| slot.keys.release(key))
        else {
            return;
        };
        held.ready.push_back(next);
        drop(held);
        self.woken.notify_one();
    }

    /// Key order: the delivery at `at` is retried in place as `note` says: it stays in
    /// hand (nothing passes it in a commit) and is held here until it is
    /// [`ready`](Self::ready). `Err(())` if its partition was taken away since, else the
    /// position to commit, so that the note is in Kafka.
    pub(crate) fn settle_later(&self, at: Position, note: Note) -> Result<Option<i64>, ()> {
        let mut held = self.held();
        let slot = self.slot(&mut held, at).ok_or(())?;
        slot.keys.park();
        slot.notes.insert(at.offset, note);
        Ok(slot.offsets.position())
    }

    /// Key order: whether the notes committed for `at`'s partition before this
    /// assignment are still to be read (before any of its records is handed out).
    pub(crate) fn needs_notes(&self, at: Position) -> bool {
        self.ordered()
            && self
                .slot(&mut self.held(), at)
                .is_some_and(|slot| !slot.loaded)
    }

    /// Key order: the notes committed for `at`'s partition, read.
    pub(crate) fn load_notes(&self, at: Position, notes: BTreeMap<i64, Note>) {
        if let Some(slot) = self.slot(&mut self.held(), at) {
            slot.notes.extend(notes);
            slot.loaded = true;
        }
    }

    /// Key order: `record`, about to be handed out, takes the attempt its note says; how
    /// long it must still wait (it is then held here until then).
    pub(crate) fn noted(&self, record: &mut Record) -> Duration {
        let mut held = self.held();
        let Some(slot) = self.slot(&mut held, record.at) else {
            return Duration::ZERO;
        };
        let Some(note) = slot.notes.get(&record.at.offset) else {
            return Duration::ZERO;
        };
        record.attempt = note.attempt;
        let wait = note.wait();
        if !wait.is_zero() {
            slot.keys.park();
        }
        wait
    }

    /// Key order: `record`, retried in place, is due: handed out before any new record,
    /// unless its partition was taken away meanwhile.
    pub(crate) fn ready(&self, record: Record) {
        let mut held = self.held();
        if self.slot(&mut held, record.at).is_none() {
            return;
        }
        held.ready.push_back(record);
        drop(held);
        self.woken.notify_one();
    }

    /// Key order: the next record ready to hand out, if any; and whether its partition
    /// is to be resumed.
    pub(crate) fn next_ready(&self) -> (Option<Record>, Option<(i32, Flow)>) {
        let mut held = self.held();
        while let Some(record) = held.ready.pop_front() {
            let bound = self.order.unwrap_or(usize::MAX);
            if let Some(slot) = self.slot(&mut held, record.at) {
                slot.keys.unpark();
                let flow = slot
                    .keys
                    .flow(bound)
                    .map(|flow| (record.at.partition, flow));
                return (Some(record), flow);
            }
        }
        (None, None)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::{Group, Position};
    use crate::order::{Flow, Note};
    use crate::record::Record;

    fn record(group: &Group, offset: i64, key: &str) -> Record {
        Record::keyed(group.read(0, offset).expect("new"), Some(key))
    }

    fn offset(record: Option<Record>) -> Option<i64> {
        record.map(|r| r.at.offset)
    }

    #[test]
    fn key_order_holds_a_key_back_until_its_record_is_settled_for_good() {
        let group = Group::new("t".into(), Some(2));
        group.assign([0]);
        let first = record(&group, 0, "a");
        let at = first.at;
        assert_eq!(offset(group.admit(first).0), Some(0));
        let (behind, flow) = group.admit(record(&group, 1, "a"));
        assert_eq!((offset(behind), flow), (None, None));
        assert_eq!(offset(group.admit(record(&group, 2, "b")).0), Some(2));
        // 0 is retried in place: still in hand, nothing committed past it, and its note
        // goes into the next commit.
        let note = Note {
            attempt: 2,
            due_ms: 0,
        };
        assert_eq!(group.settle_later(at, note), Ok(Some(0)), "commit the note");
        assert_eq!(group.handling(), 1, "2 only: 0 and 1 are held back");
        assert_eq!(group.settle(Position { offset: 2, ..at }), Ok(None));
        let last = group.positions().remove(0);
        assert_eq!((last.partition, last.offset), (0, 0));
        assert_eq!(last.metadata.as_deref(), Some("ruststream-retries:0:2:0"));
        let (again, flow) = group.admit(record(&group, 3, "a"));
        assert_eq!((offset(again), flow), (None, Some((0, Flow::Pause))));
        group.ready(Record {
            attempt: 2,
            ..record_at(at)
        });
        let (ready, flow) = group.next_ready();
        assert_eq!(
            (ready.map(|r| (r.at.offset, r.attempt)), flow),
            (Some((0, 2)), None)
        );
        assert_eq!(offset(group.next_ready().0), None, "1 waits for 0");
        group.release(at, Some(b"a"));
        assert_eq!(group.settle(at), Ok(Some(1)));
        assert_eq!(group.positions()[0].metadata, None, "the note is gone");
        let (next, flow) = group.next_ready();
        assert_eq!((offset(next), flow), (Some(1), Some((0, Flow::Resume))));
    }

    #[test]
    fn a_retry_noted_by_an_earlier_consumer_keeps_its_attempt_and_due_time() {
        let group = Group::new("t".into(), Some(8));
        group.assign([0]);
        let first = record(&group, 3, "a");
        assert!(group.needs_notes(first.at));
        let later = Note::after(4, Duration::from_secs(60));
        let due = Note {
            attempt: 2,
            due_ms: 0,
        };
        group.load_notes(first.at, BTreeMap::from([(3, later), (5, due)]));
        assert!(!group.needs_notes(first.at), "read once per assignment");
        let mut first = group.admit(first).0.expect("a is free");
        let wait = group.noted(&mut first);
        assert!(wait > Duration::from_secs(58), "{wait:?}");
        assert_eq!(first.attempt, 4);
        assert_eq!(group.handling(), 0, "it waits here");
        let mut other = group.admit(record(&group, 5, "b")).0.expect("b is free");
        assert_eq!(group.noted(&mut other), Duration::ZERO, "due already");
        assert_eq!(other.attempt, 2);
        // Settled while a lower record is in hand: the position stays, but the note's
        // end is committed.
        assert_eq!(group.settle(other.at), Ok(Some(3)));
        assert_eq!(
            group.commits(&[(0, 3)])[0].metadata.as_deref(),
            Some(&*crate::order::encode(&BTreeMap::from([(3, later)])))
        );
        group.assign([0]);
        assert!(
            group.needs_notes(group.read(0, 3).expect("read anew")),
            "a new assignment reads them again"
        );
    }

    #[test]
    fn notes_the_cluster_refused_are_left_out_of_every_later_commit() {
        let group = Group::new("t".into(), Some(2));
        group.assign([0]);
        let first = record(&group, 0, "a");
        let at = first.at;
        assert!(group.admit(first).0.is_some());
        let note = Note {
            attempt: 2,
            due_ms: 0,
        };
        assert_eq!(group.settle_later(at, note), Ok(Some(0)));
        assert!(group.positions()[0].metadata.is_some(), "noted");
        assert!(group.refuse_notes(), "news the first time");
        assert!(!group.refuse_notes(), "said once");
        assert_eq!(group.positions()[0].metadata, None, "a stop's commit");
        assert_eq!(
            group.commits(&[(0, 0)])[0].metadata,
            None,
            "the committer's"
        );
        assert_eq!(group.revoke([0])[0].metadata, None, "a rebalance's");
    }

    fn record_at(at: Position) -> Record {
        Record::keyed(at, Some("a"))
    }

    #[test]
    fn key_order_gives_back_a_key_s_held_records_with_it_and_drops_a_revoked_one() {
        let group = Group::new("t".into(), Some(8));
        group.assign([0]);
        let first = record(&group, 4, "a");
        let at = first.at;
        assert!(group.admit(first).0.is_some());
        assert!(group.admit(record(&group, 5, "b")).0.is_some());
        assert!(group.admit(record(&group, 6, "a")).0.is_none());
        assert_eq!(group.abandon(at, Some(b"a")), Some(4), "4 and 6 read again");
        // The seek reads 4 to 6 again: 4 and 6 were given back, 5 is in hand.
        let again: Vec<i64> = (4..7).filter(|&o| group.read(0, o).is_some()).collect();
        assert_eq!(again, [4, 6]);
        let held = record(&group, 7, "c");
        let held_at = held.at;
        assert!(group.admit(held).0.is_some());
        let note = Note {
            attempt: 2,
            due_ms: 0,
        };
        group.settle_later(held_at, note).expect("held");
        let revoked = group.revoke([0]).remove(0);
        assert_eq!(
            (revoked.offset, revoked.metadata.is_some()),
            (4, true),
            "its note goes with it"
        );
        group.ready(record_at(held_at));
        assert!(group.next_ready().0.is_none(), "its partition went away");
        assert!(group.settle_later(held_at, note).is_err());
    }

    #[test]
    fn without_key_order_nothing_is_held_back() {
        let group = Group::new("t".into(), None);
        group.assign([0]);
        assert!(group.admit(record(&group, 0, "a")).0.is_some());
        assert!(group.admit(record(&group, 1, "a")).0.is_some());
    }
}
