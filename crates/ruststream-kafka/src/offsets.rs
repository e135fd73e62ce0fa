//! One partition's deliveries in hand, and how far its group may commit.
//!
//! Kafka keeps one position per partition and group: everything below the committed
//! offset counts as done. Deliveries settle in any order, so the position may only
//! move up to the lowest offset still in hand. A delivery given back unsettled
//! ([`Partition::abandon`]) is read again by seeking back to it; what the seek reads
//! again and is still in hand, or was settled already, is skipped.

use std::collections::BTreeMap;

/// The offsets of one partition delivered and not yet settled, and the commit position.
#[derive(Debug, Default)]
pub(crate) struct Partition {
    /// The offset after the highest one delivered; `None` before the first read.
    next: Option<i64>,
    /// Offsets delivered and not settled; `true` where abandoned (to be read again).
    unsettled: BTreeMap<i64, bool>,
    /// The position last handed out for committing.
    committed: Option<i64>,
}

impl Partition {
    /// Whether the message at `offset`, just read, is to be delivered: a new one, or an
    /// abandoned one read again. Anything else below the highest read is a re-read
    /// after a seek: still in hand, or settled already.
    pub(crate) fn read(&mut self, offset: i64) -> bool {
        match self.next {
            Some(next) if offset < next => match self.unsettled.get_mut(&offset) {
                Some(abandoned) if *abandoned => {
                    *abandoned = false;
                    true
                }
                _ => false,
            },
            _ => {
                // The consumer started here: the group's position already.
                self.committed.get_or_insert(offset);
                self.unsettled.insert(offset, false);
                self.next = Some(offset + 1);
                true
            }
        }
    }

    /// Where `offset`, about to be read, lies past the offset after the highest one read:
    /// that offset, the first of those the fetch passed over. On Kafka they are records
    /// compacted away or transaction markers; a broker may also skip records it stored
    /// (nisshi 0.8.1, docs/kafka.md).
    pub(crate) fn passes_over(&self, offset: i64) -> Option<i64> {
        self.next.filter(|&next| offset > next)
    }

    /// Settles the delivery at `offset`; the new commit position if it moved.
    pub(crate) fn settle(&mut self, offset: i64) -> Option<i64> {
        self.unsettled.remove(&offset)?;
        let position = self.position()?;
        if self.committed.is_some_and(|done| done >= position) {
            return None;
        }
        self.committed = Some(position);
        Some(position)
    }

    /// Gives the delivery at `offset` back: the offset to seek to, the lowest one
    /// abandoned, so that every abandoned delivery is read again.
    pub(crate) fn abandon(&mut self, offset: i64) -> Option<i64> {
        let abandoned = self.unsettled.get_mut(&offset)?;
        *abandoned = true;
        self.unsettled
            .iter()
            .find(|(_, abandoned)| **abandoned)
            .map(|(offset, _)| *offset)
    }

    /// How far the group may commit: the lowest offset in hand, else after the highest
    /// read; `None` before the first read.
    pub(crate) fn position(&self) -> Option<i64> {
        match self.unsettled.keys().next() {
            Some(lowest) => Some(*lowest),
            None => self.next,
        }
    }

    /// How many deliveries are in hand.
    #[cfg(test)]
    pub(crate) fn in_hand(&self) -> usize {
        self.unsettled.len()
    }

    /// How many deliveries are in hand and not given back: those a stopping service
    /// may still settle.
    pub(crate) fn handling(&self) -> usize {
        self.unsettled
            .values()
            .filter(|abandoned| !**abandoned)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::Partition;

    #[test]
    fn the_position_waits_for_the_lowest_delivery_in_hand() {
        let mut p = Partition::default();
        assert_eq!(p.position(), None);
        for offset in 10..14 {
            assert!(p.read(offset));
        }
        assert_eq!(p.settle(11), None, "10 is still in hand");
        assert_eq!(p.settle(13), None);
        assert_eq!(p.settle(10), Some(12), "up to 12, the lowest in hand");
        assert_eq!(p.settle(12), Some(14), "everything read is settled");
        assert_eq!(p.settle(12), None, "settled twice");
        assert_eq!((p.position(), p.in_hand()), (Some(14), 0));
    }

    #[test]
    fn an_abandoned_delivery_is_read_again_and_nothing_else() {
        let mut p = Partition::default();
        for offset in 0..5 {
            assert!(p.read(offset));
        }
        assert_eq!(p.settle(0), Some(1));
        assert_eq!(p.settle(2), None);
        assert_eq!(p.abandon(3), Some(3));
        assert_eq!(p.abandon(1), Some(1), "the lowest abandoned");
        assert_eq!(p.handling(), 1, "4 only");
        // The seek to 1 reads 1 to 4 again: 1 and 3 were abandoned, 2 is settled and
        // 4 still in hand.
        let again: Vec<i64> = (1..5).filter(|&offset| p.read(offset)).collect();
        assert_eq!(again, [1, 3]);
        assert!(p.read(5), "new");
        assert_eq!(p.abandon(9), None, "never read");
        for offset in [4, 3, 5] {
            assert_eq!(p.settle(offset), None);
        }
        assert_eq!(p.settle(1), Some(6));
    }

    #[test]
    fn a_gap_in_offsets_is_read_as_new() {
        let mut p = Partition::default();
        assert_eq!(p.passes_over(3), None, "the first read");
        assert!(p.read(3));
        assert_eq!(p.passes_over(4), None);
        assert_eq!(p.passes_over(7), Some(4));
        assert!(p.read(7), "offsets skip over compacted or control records");
        assert_eq!(p.passes_over(5), None, "read again after a seek");
        assert_eq!(p.settle(7), None);
        assert_eq!(p.settle(3), Some(8));
    }
}
