//! PUBACKs in arrival order: MQTT requires a client to acknowledge QoS 1 messages in the
//! order they arrived, whatever order the runtime settles them in. A settlement of a later
//! message is held until every earlier one is settled, then all are released in order.

use std::collections::BTreeMap;

/// Why a settlement was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// The sequence number was never handed out.
    #[error("no such delivery")]
    Unknown,
    /// The delivery was settled (or abandoned) already.
    #[error("settled twice")]
    Twice,
}

/// The arrival order of one connection's deliveries and the settlements held back.
///
/// `T` is what a release carries (the PUBACK to write); a delivery settled with `None`
/// (abandoned) is passed over without one, so that later deliveries are not held for ever.
#[derive(Debug)]
pub(crate) struct Sequencer<T> {
    /// The number the next arrival gets.
    next: u64,
    /// The lowest number not released yet.
    released: u64,
    /// Settled, not yet released: everything from `released` up to the first gap.
    held: BTreeMap<u64, Option<T>>,
}

impl<T> Default for Sequencer<T> {
    fn default() -> Self {
        Self {
            next: 0,
            released: 0,
            held: BTreeMap::new(),
        }
    }
}

impl<T> Sequencer<T> {
    /// Numbers a new arrival.
    pub(crate) fn arrive(&mut self) -> u64 {
        let seq = self.next;
        self.next += 1;
        seq
    }

    /// Settles `seq` (with `None`: passes it over) and returns what may now be written,
    /// in arrival order.
    pub(crate) fn settle(&mut self, seq: u64, item: Option<T>) -> Result<Vec<T>, Refused> {
        if seq >= self.next {
            return Err(Refused::Unknown);
        }
        if seq < self.released || self.held.contains_key(&seq) {
            return Err(Refused::Twice);
        }
        self.held.insert(seq, item);
        let mut out = Vec::new();
        while let Some(item) = self.held.remove(&self.released) {
            self.released += 1;
            out.extend(item);
        }
        Ok(out)
    }

    /// How many arrivals are not released yet (settled and held, or still unsettled).
    pub(crate) fn outstanding(&self) -> u64 {
        self.next - self.released
    }

    /// Takes every held settlement out (the connection is gone: none can be written).
    pub(crate) fn take_held(&mut self) -> Vec<T> {
        std::mem::take(&mut self.held)
            .into_values()
            .flatten()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Refused, Sequencer};

    #[test]
    fn in_order_settlements_are_released_at_once() {
        let mut s = Sequencer::default();
        let (a, b) = (s.arrive(), s.arrive());
        assert_eq!(s.settle(a, Some("a")), Ok(vec!["a"]));
        assert_eq!(s.settle(b, Some("b")), Ok(vec!["b"]));
        assert_eq!(s.outstanding(), 0);
    }

    #[test]
    fn a_later_settlement_waits_for_the_earlier_ones() {
        let mut s = Sequencer::default();
        let seqs: Vec<u64> = (0..4).map(|_| s.arrive()).collect();
        assert_eq!(s.settle(seqs[2], Some(2)), Ok(vec![]));
        assert_eq!(s.settle(seqs[3], Some(3)), Ok(vec![]));
        assert_eq!(s.outstanding(), 4);
        assert_eq!(s.settle(seqs[1], Some(1)), Ok(vec![]));
        assert_eq!(s.settle(seqs[0], Some(0)), Ok(vec![0, 1, 2, 3]));
        assert_eq!(s.outstanding(), 0);
    }

    #[test]
    fn releases_stop_at_the_first_gap() {
        let mut s = Sequencer::default();
        let seqs: Vec<u64> = (0..5).map(|_| s.arrive()).collect();
        assert_eq!(s.settle(seqs[1], Some(1)), Ok(vec![]));
        assert_eq!(s.settle(seqs[3], Some(3)), Ok(vec![]));
        assert_eq!(s.settle(seqs[0], Some(0)), Ok(vec![0, 1]));
        assert_eq!(s.settle(seqs[4], Some(4)), Ok(vec![]));
        assert_eq!(s.settle(seqs[2], Some(2)), Ok(vec![2, 3, 4]));
    }

    #[test]
    fn an_abandoned_delivery_is_passed_over_without_a_release() {
        let mut s = Sequencer::default();
        let (a, b) = (s.arrive(), s.arrive());
        assert_eq!(s.settle(b, Some("b")), Ok(vec![]));
        assert_eq!(s.settle(a, None), Ok(vec!["b"]));
    }

    #[test]
    fn every_order_of_settling_releases_in_arrival_order() {
        // All 120 orders of five settlements.
        let mut orders = vec![vec![]];
        for n in 0..5u64 {
            orders = orders
                .into_iter()
                .flat_map(|order: Vec<u64>| {
                    (0..=order.len()).map(move |at| {
                        let mut next = order.clone();
                        next.insert(at, n);
                        next
                    })
                })
                .collect();
        }
        assert_eq!(orders.len(), 120);
        for order in orders {
            let mut s = Sequencer::default();
            (0..5).for_each(|_| {
                s.arrive();
            });
            let released: Vec<u64> = order
                .iter()
                .flat_map(|&seq| s.settle(seq, Some(seq)).expect("taken"))
                .collect();
            assert_eq!(released, [0, 1, 2, 3, 4], "settled in order {order:?}");
        }
    }

    #[test]
    fn twice_and_unknown_are_refused() {
        let mut s = Sequencer::default();
        let (a, b) = (s.arrive(), s.arrive());
        assert_eq!(s.settle(7, Some(7)), Err(Refused::Unknown));
        assert_eq!(s.settle(b, Some(b)), Ok(vec![]));
        assert_eq!(s.settle(b, Some(b)), Err(Refused::Twice));
        assert_eq!(s.settle(a, Some(a)), Ok(vec![a, b]));
        assert_eq!(s.settle(a, Some(a)), Err(Refused::Twice));
    }

    #[test]
    fn held_settlements_are_taken_out_when_the_connection_goes() {
        let mut s = Sequencer::default();
        let (_a, b) = (s.arrive(), s.arrive());
        assert_eq!(s.settle(b, Some("b")), Ok(vec![]));
        assert_eq!(s.take_held(), vec!["b"]);
    }
}
