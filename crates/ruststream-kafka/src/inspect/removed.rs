//! The dead letters removed ahead of the tools' committed offset on one partition,
//! kept as the metadata of that commit.
//!
//! Kafka cannot take a record out of a log. The dead-letter tools keep a consumer group
//! of their own: a partition's dead letters are the records at and after its committed
//! offset. Removing the record at that offset moves the offset on; removing one further
//! on is noted in the commit's metadata (a string Kafka stores with each committed
//! offset, up to `offset.metadata.max.bytes`, 4,096 by default), until the offset
//! reaches it.

use std::collections::BTreeSet;

/// What starts metadata this module wrote (other metadata is read as nothing removed).
const PREFIX: &str = "ruststream-removed:";

/// A partition's committed offset and the offsets removed after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Removed {
    /// The first offset not yet passed.
    pub(crate) from: i64,
    /// Offsets after `from` already removed.
    after: BTreeSet<i64>,
}

impl Removed {
    /// The state of a partition whose first waiting offset is `from`, with the commit's
    /// `metadata` (offsets before `from` in it are passed already).
    pub(crate) fn read(from: i64, metadata: &str) -> Self {
        let mut after = BTreeSet::new();
        if let Some(ranges) = metadata.strip_prefix(PREFIX) {
            for range in ranges.split(',').filter(|r| !r.is_empty()) {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                let (Ok(low), Ok(high)) = (low.parse::<i64>(), high.parse::<i64>()) else {
                    continue;
                };
                // A forged range must not make the walk long: at most 100,000 offsets.
                after.extend((low.max(from)..=high).take(100_000));
            }
        }
        let mut removed = Self { from, after };
        removed.settle();
        removed
    }

    /// Whether the record at `offset` is removed (or passed).
    pub(crate) fn contains(&self, offset: i64) -> bool {
        offset < self.from || self.after.contains(&offset)
    }

    /// Removes the record at `offset`; false if it was removed already.
    pub(crate) fn remove(&mut self, offset: i64) -> bool {
        if self.contains(offset) {
            return false;
        }
        self.after.insert(offset);
        self.settle();
        true
    }

    /// Whether nothing is removed after `from` (the metadata notes nothing).
    pub(crate) fn is_settled(&self) -> bool {
        self.after.is_empty()
    }

    /// The commit's metadata: the offsets after `from`, as ranges.
    pub(crate) fn metadata(&self) -> String {
        let mut text = String::from(PREFIX);
        let mut offsets = self.after.iter().copied().peekable();
        while let Some(low) = offsets.next() {
            let mut high = low;
            while offsets.next_if_eq(&(high + 1)).is_some() {
                high += 1;
            }
            if text.len() > PREFIX.len() {
                text.push(',');
            }
            if low == high {
                text.push_str(&low.to_string());
            } else {
                text.push_str(&format!("{low}-{high}"));
            }
        }
        text
    }

    /// Moves `from` past the removed offsets that follow it.
    fn settle(&mut self) {
        while self.after.remove(&self.from) {
            self.from += 1;
        }
        self.after = self.after.split_off(&self.from);
    }
}

#[cfg(test)]
mod tests {
    use super::Removed;

    #[test]
    fn the_offset_moves_on_over_what_is_removed_at_its_head() {
        let mut removed = Removed::read(10, "");
        assert!(removed.remove(12));
        assert!(removed.remove(13));
        assert!(!removed.remove(12), "removed already");
        assert!(!removed.remove(9), "passed already");
        assert_eq!(
            (removed.from, removed.metadata().as_str()),
            (10, "ruststream-removed:12-13")
        );
        assert!(removed.remove(15));
        assert!(removed.remove(10));
        assert_eq!(
            (removed.from, removed.metadata().as_str()),
            (11, "ruststream-removed:12-13,15")
        );
        assert!(removed.remove(11));
        assert_eq!(
            (removed.from, removed.metadata().as_str()),
            (14, "ruststream-removed:15")
        );
        assert!(removed.contains(13) && removed.contains(15) && !removed.contains(14));
    }

    #[test]
    fn metadata_reads_back_and_foreign_metadata_is_nothing() {
        let written = Removed::read(3, "ruststream-removed:5-7,9,11-12");
        assert_eq!(Removed::read(3, &written.metadata()), written);
        assert_eq!(Removed::read(3, "someone else's"), Removed::read(3, ""));
        // Ranges the offset has passed, garbage and a range written backwards are
        // ignored; one that starts at the offset moves it.
        let read = Removed::read(6, "ruststream-removed:1-4,x,9-8,6-7,10");
        assert_eq!(
            (read.from, read.metadata().as_str()),
            (8, "ruststream-removed:10")
        );
        let forged = Removed::read(0, "ruststream-removed:5-9223372036854775807");
        assert!(forged.metadata().len() < 64);
    }
}
