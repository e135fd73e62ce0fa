//! Retries in place waiting for their delay: one timer per subscription, which hands
//! each record back (to its group) when it is due.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::record::Record;

/// Where a subscription's retries in place wait; the timer ends when this is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Waits {
    asks: mpsc::UnboundedSender<(Instant, Record)>,
}

impl Waits {
    /// Waits whose timer hands each record to `due` when it is due.
    pub(crate) fn start(due: impl Fn(Record) + Send + 'static) -> Self {
        let (asks, asked) = mpsc::unbounded_channel();
        tokio::spawn(timer(due, asked));
        Self { asks }
    }

    /// Hands `record` back to its group after `delay`.
    pub(crate) fn after(&self, delay: Duration, record: Record) {
        let due = Instant::now().checked_add(delay).unwrap_or_else(far);
        // The timer ends only once every sender is gone.
        let _ = self.asks.send((due, record));
    }
}

/// A time no delay reaches (a year from now).
fn far() -> Instant {
    Instant::now() + Duration::from_secs(365 * 86_400)
}

/// One record waiting, ordered by when it is due, then by when it was asked.
struct Due(Instant, u64, Record);

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

async fn timer(due: impl Fn(Record), mut asked: mpsc::UnboundedReceiver<(Instant, Record)>) {
    let mut waiting = BinaryHeap::new();
    let mut asks = 0u64;
    loop {
        let next = waiting.peek().map(|Reverse(Due(at, ..))| *at);
        tokio::select! {
            ask = asked.recv() => match ask {
                Some((at, record)) => {
                    asks += 1;
                    waiting.push(Reverse(Due(at, asks, record)));
                }
                None => return,
            },
            () = tokio::time::sleep_until(next.unwrap_or_else(far)), if next.is_some() => {
                let now = Instant::now();
                while waiting.peek().is_some_and(|Reverse(Due(at, ..))| *at <= now) {
                    if let Some(Reverse(Due(_, _, record))) = waiting.pop() {
                        due(record);
                    }
                }
            }
        }
    }
}
