//! Retries in place waiting for their delay: one timer per subscription (tokio-util's
//! `DelayQueue`), which hands each record back (to its group) when it is due.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::time::DelayQueue;

use crate::record::Record;

/// The longest wait the timer takes (a year); `DelayQueue` takes no more than about
/// two, and a longer `retry_after` is as good as for ever.
const LONGEST: Duration = Duration::from_secs(365 * 86_400);

/// Where a subscription's retries in place wait; the timer ends when this is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Waits {
    asks: mpsc::UnboundedSender<(Duration, Record)>,
}

impl Waits {
    /// Waits whose timer hands each record to `due` when it is due.
    pub(crate) fn start(due: impl Fn(Record) + Send + 'static) -> Self {
        let (asks, asked) = mpsc::unbounded_channel();
        tokio::spawn(timer(due, asked));
        Self { asks }
    }

    /// Hands `record` back after `delay`.
    pub(crate) fn after(&self, delay: Duration, record: Record) {
        // The timer ends only once every sender is gone.
        let _ = self.asks.send((delay.min(LONGEST), record));
    }
}

async fn timer(due: impl Fn(Record), mut asked: mpsc::UnboundedReceiver<(Duration, Record)>) {
    let mut waiting = DelayQueue::new();
    loop {
        tokio::select! {
            ask = asked.recv() => match ask {
                Some((delay, record)) => {
                    waiting.insert(record, delay);
                }
                None => return,
            },
            Some(expired) = waiting.next(), if !waiting.is_empty() => due(expired.into_inner()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::Waits;
    use crate::record::{Position, Record};

    fn record(offset: i64) -> Record {
        let at = Position {
            partition: 0,
            offset,
            epoch: 1,
        };
        Record::keyed(at, None)
    }

    #[tokio::test]
    async fn records_come_back_when_due_and_a_huge_delay_does_not_panic() {
        let back = Arc::new(Mutex::new(Vec::new()));
        let seen = back.clone();
        let waits = Waits::start(move |record| seen.lock().expect("lock").push(record.at.offset));
        waits.after(Duration::from_millis(900), record(1));
        waits.after(Duration::from_millis(100), record(2));
        waits.after(Duration::MAX, record(3));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(*back.lock().expect("lock"), [2]);
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(*back.lock().expect("lock"), [2, 1], "3 waits a year");
    }
}
