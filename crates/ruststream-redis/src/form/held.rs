//! The entries a group subscription has handed out and not yet settled ("in hand"), and
//! whether its own pending list must be read again.
//!
//! Anything in this consumer's pending list that is not in hand is stranded: the first
//! answer of a read lost with its connection, a settlement that failed, an abandoned
//! delivery. The reader takes those back ([`Held::take_reread`]) without delivering twice
//! what is still being handled; the claiming form keeps what is in hand from going idle.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::reply::EntryId;

/// The in-hand set of one subscription, shared by its reader and its acker.
#[derive(Debug, Default)]
pub(crate) struct Held {
    sets: Mutex<Sets>,
    reread: AtomicBool,
}

#[derive(Debug, Default)]
struct Sets {
    /// Handed out, not settled.
    in_hand: HashSet<EntryId>,
    /// Requeued on a claiming subscription: pending until idle `min_idle`, on purpose.
    waiting: HashSet<EntryId>,
}

/// At most this many requeued ids are remembered (another consumer may claim them
/// without this one knowing); beyond, the set starts again.
const MAX_WAITING: usize = 10_000;

impl Held {
    fn sets(&self) -> MutexGuard<'_, Sets> {
        self.sets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records entries just read.
    pub(crate) fn hold(&self, ids: impl IntoIterator<Item = EntryId>) {
        let mut sets = self.sets();
        for id in ids {
            if !sets.waiting.is_empty() {
                sets.waiting.remove(&id);
            }
            sets.in_hand.insert(id);
        }
    }

    /// Forgets a settled entry.
    pub(crate) fn settled(&self, id: EntryId) {
        self.sets().in_hand.remove(&id);
    }

    /// An entry requeued on a claiming subscription: pending on purpose until it is
    /// claimed after `min_idle`, not taken back before.
    pub(crate) fn requeued(&self, id: EntryId) {
        let mut sets = self.sets();
        sets.in_hand.remove(&id);
        if sets.waiting.len() >= MAX_WAITING {
            sets.waiting.clear();
        }
        sets.waiting.insert(id);
    }

    /// Forgets an entry that stays in the pending list unsettled (abandoned, or its
    /// settlement failed): the next read takes it back.
    pub(crate) fn give_back(&self, id: EntryId) {
        self.sets().in_hand.remove(&id);
        self.reread.store(true, Ordering::Release);
    }

    /// Whether the own pending list must be read again (and clears the request).
    pub(crate) fn take_reread(&self) -> bool {
        self.reread.swap(false, Ordering::AcqRel)
    }

    /// Whether `id` is accounted for: in hand, or requeued on purpose.
    pub(crate) fn contains(&self, id: EntryId) -> bool {
        let sets = self.sets();
        sets.in_hand.contains(&id) || sets.waiting.contains(&id)
    }

    /// The ids in hand now.
    pub(crate) fn snapshot(&self) -> Vec<EntryId> {
        self.sets().in_hand.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn give_back_forgets_and_asks_for_a_reread() {
        let held = Held::default();
        held.hold([EntryId(1, 0), EntryId(2, 0)]);
        assert!(!held.take_reread());
        held.settled(EntryId(1, 0));
        assert!(!held.contains(EntryId(1, 0)));
        held.give_back(EntryId(2, 0));
        assert!(!held.contains(EntryId(2, 0)));
        assert!(held.take_reread());
        assert!(!held.take_reread(), "cleared");
    }

    #[test]
    fn requeued_entries_are_accounted_for_until_read_again() {
        let held = Held::default();
        held.hold([EntryId(1, 0)]);
        held.requeued(EntryId(1, 0));
        assert!(held.contains(EntryId(1, 0)), "not taken back early");
        assert!(held.snapshot().is_empty(), "not kept from going idle");
        assert!(!held.take_reread());
        held.hold([EntryId(1, 0)]);
        held.settled(EntryId(1, 0));
        assert!(!held.contains(EntryId(1, 0)));
    }
}
