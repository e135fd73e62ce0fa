//! Link credit: how much the broker may send, kept within the subscription's window.
//!
//! A subscription with credit `n` starts with `n`. Each time half the window (`n / 2`,
//! at least 1) has been settled — or, at-most-once, taken from the stream — it grants
//! credit again, counted from the transfers already received (the flow frame's
//! `delivery-count`): `n` minus what the service still holds. So the sender never runs
//! dry while the service keeps settling, is never more than one window ahead of the
//! last grant, and the service never holds more than `n` deliveries: a delivery it
//! still holds does not give its credit back. An abandoned delivery (`released`) counts
//! as settled: its credit comes back.

/// The credit bookkeeping of one attached link.
#[derive(Clone, Debug)]
pub(crate) struct Credit {
    window: u32,
    received: u64,
    settled: u64,
    since_grant: u32,
}

impl Credit {
    /// A fresh link with credit `window` (at least 1) granted.
    pub(crate) fn new(window: u32) -> Self {
        Self {
            window: window.max(1),
            received: 0,
            settled: 0,
            since_grant: 0,
        }
    }

    /// The credit granted at attach.
    #[cfg(test)]
    pub(crate) fn window(&self) -> u32 {
        self.window
    }

    /// A transfer arrived.
    pub(crate) fn on_received(&mut self) {
        self.received += 1;
    }

    /// Deliveries held by the service: received and not yet settled (or taken).
    pub(crate) fn held(&self) -> u64 {
        self.received.saturating_sub(self.settled)
    }

    /// `count` deliveries were settled (or taken). Returns the credit to grant now, if a
    /// flow is due.
    pub(crate) fn on_settled(&mut self, count: u32) -> Option<u32> {
        self.settled = (self.settled + u64::from(count)).min(self.received);
        self.since_grant = self.since_grant.saturating_add(count);
        if self.since_grant < (self.window / 2).max(1) {
            return None;
        }
        self.since_grant = 0;
        let held = u32::try_from(self.held()).unwrap_or(u32::MAX);
        let grant = self.window.saturating_sub(held);
        (grant > 0).then_some(grant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_after_half_the_window_is_settled() {
        let mut c = Credit::new(256);
        for _ in 0..256 {
            c.on_received();
        }
        assert_eq!(c.on_settled(127), None);
        // 128 settled, 128 still held: the window is topped up to 256 held at most.
        assert_eq!(c.on_settled(1), Some(128));
        assert_eq!(c.held(), 128);
    }

    #[test]
    fn never_more_than_the_window_held() {
        // Simulate a broker that always sends all the credit it has.
        let mut c = Credit::new(8);
        let mut credit = u64::from(c.window());
        let mut held_max = 0;
        for round in 0..1000u32 {
            while credit > 0 {
                c.on_received();
                credit -= 1;
            }
            held_max = held_max.max(c.held());
            // settle a varying number, never more than held
            let k = u32::try_from(c.held()).unwrap().min(1 + round % 5);
            if let Some(g) = c.on_settled(k) {
                credit = u64::from(g);
            }
        }
        assert!(held_max <= 8, "held {held_max}");
        assert!(c.received > 1000, "stalled at {}", c.received);
    }

    #[test]
    fn window_of_one_grants_each_settlement() {
        let mut c = Credit::new(0);
        assert_eq!(c.window(), 1);
        c.on_received();
        assert_eq!(c.on_settled(1), Some(1));
    }
}
