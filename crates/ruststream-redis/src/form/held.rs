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
    ids: Mutex<HashSet<EntryId>>,
    reread: AtomicBool,
}

impl Held {
    fn ids(&self) -> MutexGuard<'_, HashSet<EntryId>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records entries just read.
    pub(crate) fn hold(&self, ids: impl IntoIterator<Item = EntryId>) {
        self.ids().extend(ids);
    }

    /// Forgets a settled entry.
    pub(crate) fn settled(&self, id: EntryId) {
        self.ids().remove(&id);
    }

    /// Forgets an entry that stays in the pending list unsettled (abandoned, or its
    /// settlement failed): the next read takes it back.
    pub(crate) fn give_back(&self, id: EntryId) {
        self.ids().remove(&id);
        self.reread.store(true, Ordering::Release);
    }

    /// Whether the own pending list must be read again (and clears the request).
    pub(crate) fn take_reread(&self) -> bool {
        self.reread.swap(false, Ordering::AcqRel)
    }

    /// Whether `id` is in hand.
    pub(crate) fn contains(&self, id: EntryId) -> bool {
        self.ids().contains(&id)
    }

    /// The ids in hand now.
    pub(crate) fn snapshot(&self) -> Vec<EntryId> {
        self.ids().iter().copied().collect()
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
}
