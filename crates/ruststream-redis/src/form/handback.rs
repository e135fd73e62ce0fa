//! Giving list elements back: what a subscription read but did not settle goes back to
//! the right end of its list (where it is read next), in order, by background work the
//! broker waits for when it closes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::{ListInterface, LuaInterface};
use fred::types::{Key, Value};
use tokio::sync::Notify;

/// Background hand-backs still running; [`RedisBroker`](crate::RedisBroker)'s `close`
/// waits for them before it closes the pool.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    busy: AtomicUsize,
    idle: Notify,
}

impl Tracker {
    /// Marks one piece of work as running until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Completes once no work is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.busy.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One piece of running work; dropping it ends it.
pub(crate) struct Busy(Arc<Tracker>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Runs `work` in the background, tracked; without a runtime (a drop outside one) it is
/// not run and `false` is returned.
pub(crate) fn spawn_tracked(
    tracker: &Arc<Tracker>,
    work: impl Future<Output = ()> + Send + 'static,
) -> bool {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    let busy = tracker.enter();
    handle.spawn(async move {
        work.await;
        drop(busy);
    });
    true
}

/// Moves each processing-list element `ARGV[i]` of `KEYS[2]` that is still there back
/// to the right end of list `KEYS[1]`, unwrapped; in argument order, so give the newest
/// first. Atomic: an element is in one of the two lists at any time.
const GIVE_BACK: &str = concat!(
    lua_unwrap!(),
    r"
local moved = 0
for i = 1, #ARGV do
  local w = ARGV[i]
  if redis.call('LREM', KEYS[2], -1, w) > 0 then
    redis.call('RPUSH', KEYS[1], unwrap(w))
    moved = moved + 1
  end
end
return moved
"
);

/// Gives reliable-list elements back from a processing list, in the order given
/// (newest first), one batch at a time.
pub(crate) struct HandBack {
    pool: Pool,
    keys: [Key; 2],
    queue: Mutex<Queue>,
    tracker: Arc<Tracker>,
}

#[derive(Default)]
struct Queue {
    elements: Vec<Bytes>,
    flushing: bool,
}

impl HandBack {
    /// Hands elements of processing list `processing` back to list `main`.
    pub(crate) fn new(pool: Pool, main: &str, processing: &str, tracker: Arc<Tracker>) -> Self {
        Self {
            pool,
            keys: [Key::from(main), Key::from(processing)],
            queue: Mutex::default(),
            tracker,
        }
    }

    /// Queues the (wrapped) processing-list element `element` for handing back. Elements
    /// given one after the other land in that order at the right end of the list: give
    /// the newest first.
    pub(crate) fn give(self: &Arc<Self>, element: Bytes) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.elements.push(element);
        if queue.flushing {
            return;
        }
        queue.flushing = true;
        drop(queue);
        let this = self.clone();
        if !spawn_tracked(&self.tracker, this.flush()) {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.flushing = false;
            let n = std::mem::take(&mut queue.elements).len();
            tracing::warn!(
                n,
                "no runtime to hand list elements back: they stay in processing"
            );
        }
    }

    /// Hands queued elements back until none is left.
    async fn flush(self: Arc<Self>) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.elements.is_empty() {
                    queue.flushing = false;
                    return;
                }
                std::mem::take(&mut queue.elements)
            };
            let n = batch.len();
            let args: Vec<Value> = batch.into_iter().map(Value::Bytes).collect();
            let keys = self.keys.to_vec();
            let result: Result<Value, _> = self.pool.next().eval(GIVE_BACK, keys, args).await;
            if let Err(error) = result {
                // They stay in the processing list: handed back when this consumer
                // starts again or its heartbeat expires.
                tracing::warn!(%error, n, "redis hand-back failed");
            }
        }
    }
}

/// Pushes popped plain-list elements back to the right end of `key`, `newest_first`, so
/// that the oldest is read next.
pub(crate) async fn push_back(pool: &Pool, key: &str, newest_first: Vec<Bytes>) {
    if newest_first.is_empty() {
        return;
    }
    let n = newest_first.len();
    let values: Vec<Value> = newest_first.into_iter().map(Value::Bytes).collect();
    if let Err(error) = pool.rpush::<Value, _, _>(key, values).await {
        tracing::error!(%error, n, key, "popped list entries could not be pushed back: lost");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn idle_waits_for_running_work() {
        let tracker = Arc::new(Tracker::default());
        tracker.idle().await;
        let busy = tracker.enter();
        let waiting = tokio::time::timeout(Duration::from_millis(50), tracker.idle()).await;
        assert!(waiting.is_err(), "still busy");
        let idle = tokio::spawn({
            let tracker = tracker.clone();
            async move { tracker.idle().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(busy);
        tokio::time::timeout(Duration::from_secs(1), idle)
            .await
            .expect("idle once the work ended")
            .expect("task");
    }
}
