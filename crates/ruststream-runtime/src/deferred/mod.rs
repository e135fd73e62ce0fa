//! Work deferred by a delay: retry copies published from the process, deliveries held
//! before a requeue.
//!
//! A delayed copy is owed: once its original is settled, the copy is the message. So a
//! copy whose publish fails is tried again with back-off for as long as the process
//! lives, and published early on a graceful stop (tried until the stop's grace period is
//! over). Only a crash, or a broker that stays away past the grace period of a stop,
//! loses it, and the second is logged with the subscription and the message id.
//!
//! The copies waiting in the process are bounded, by count and by bytes
//! ([`DelayedLimit`]): when either bound is reached, the loops take no more deliveries
//! until there is room again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::{Address, MESSAGE_ID, Message, Publish};
use tokio::sync::Notify;

use crate::layer::Sents;
use crate::mount::DelayedLimit;

mod retrying;

/// The first wait after a failed publish of a delayed copy; it doubles up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A retry copy owed to `to`, published from the process after its delay.
pub(crate) struct DelayedCopy {
    pub(crate) subscription: Address,
    pub(crate) to: Address,
    pub(crate) message: Message,
    /// What the delivery's visits want told once it is out (or given up).
    pub(crate) sents: Sents,
}

/// Tasks that run after a delay. On a graceful stop they run at once (a retry copy
/// goes out early rather than being lost); a crash loses them, as documented.
pub(crate) struct Deferred {
    limit: DelayedLimit,
    pending: AtomicUsize,
    /// What waits, per subscription (a handful: scanned, not hashed).
    by_subscription: Mutex<Vec<(Address, usize)>>,
    copies: AtomicUsize,
    bytes: AtomicUsize,
    full: AtomicBool,
    room: Arc<Notify>,
    flushing: AtomicBool,
    flush: Notify,
    done: Notify,
    gave_up: Notify,
    giving_up: AtomicBool,
    /// Copies whose publish failed and is being tried again: (subscription, destination,
    /// how many), what readiness reports.
    failing: Mutex<Vec<(Address, Address, usize)>>,
}

impl Default for Deferred {
    fn default() -> Self {
        Self::new(DelayedLimit::default())
    }
}

impl Deferred {
    pub(crate) fn new(limit: DelayedLimit) -> Self {
        Self {
            limit,
            pending: AtomicUsize::new(0),
            by_subscription: Mutex::new(Vec::new()),
            copies: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            full: AtomicBool::new(false),
            room: Arc::new(Notify::new()),
            flushing: AtomicBool::new(false),
            flush: Notify::new(),
            done: Notify::new(),
            gave_up: Notify::new(),
            giving_up: AtomicBool::new(false),
            failing: Mutex::new(Vec::new()),
        }
    }

    /// Runs `then` after `delay`, counted as waiting for `subscription`.
    pub(crate) fn schedule<F, Fut>(
        self: &Arc<Self>,
        subscription: &Address,
        delay: Duration,
        then: F,
    ) where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.started(subscription);
        let this = self.clone();
        let subscription = subscription.clone();
        tokio::spawn(async move {
            this.sleep(delay).await;
            then().await;
            this.finished(&subscription);
        });
    }

    /// Publishes `copy` through `publish` after `delay`, trying again with back-off
    /// until it is out (or a stop's grace period is over).
    pub(crate) fn schedule_copy(
        self: &Arc<Self>,
        delay: Duration,
        copy: DelayedCopy,
        publish: Arc<dyn Publish>,
    ) {
        let size = size_of(&copy.message);
        self.started(&copy.subscription);
        self.reserve(size);
        let this = self.clone();
        tokio::spawn(async move {
            this.sleep(delay).await;
            let subscription = copy.subscription.clone();
            this.publish_copy(copy, publish).await;
            this.release(size);
            this.finished(&subscription);
        });
    }

    /// Counts a copy of `size` bytes against the bound.
    fn reserve(&self, size: usize) {
        let copies = self.copies.fetch_add(1, Ordering::AcqRel) + 1;
        let bytes = self.bytes.fetch_add(size, Ordering::AcqRel) + size;
        if copies >= self.limit.max_copies() || bytes >= self.limit.max_bytes() {
            self.full.store(true, Ordering::Release);
            tracing::warn!(
                copies,
                bytes,
                "retry copies waiting in the process at their bound: taking no more deliveries until one is out"
            );
        }
    }

    /// A copy of `size` bytes is out (or given up).
    fn release(&self, size: usize) {
        let copies = self.copies.fetch_sub(1, Ordering::AcqRel) - 1;
        let bytes = self.bytes.fetch_sub(size, Ordering::AcqRel) - size;
        if self.full.load(Ordering::Acquire)
            && copies < self.limit.max_copies()
            && bytes < self.limit.max_bytes()
        {
            self.full.store(false, Ordering::Release);
            self.room.notify_waiters();
        }
    }

    async fn sleep(&self, delay: Duration) {
        let flushed = self.flush.notified();
        if !self.flushing.load(Ordering::Acquire) {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = flushed => {}
            }
        }
    }

    fn started(&self, subscription: &Address) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        let mut by = self
            .by_subscription
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match by.iter_mut().find(|(a, _)| a == subscription) {
            Some((_, n)) => *n += 1,
            None => by.push((subscription.clone(), 1)),
        }
    }

    fn finished(&self, subscription: &Address) {
        if let Some((_, n)) = self
            .by_subscription
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter_mut()
            .find(|(a, _)| a == subscription)
        {
            *n = n.saturating_sub(1);
        }
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.done.notify_waiters();
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Whether the delayed copies are at their bound: take no more deliveries.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Waits until the copies are below their bound.
    pub(crate) async fn wait_room(&self) {
        while self.is_full() {
            let room = self.room.notified();
            if !self.is_full() {
                return;
            }
            room.await;
        }
    }

    /// Runs every waiting task now and waits until they are done; copies that still
    /// cannot be published after `grace` are given up (and logged).
    pub(crate) async fn flush(&self, grace: Duration) {
        self.flushing.store(true, Ordering::Release);
        self.flush.notify_waiters();
        let all_done = async {
            loop {
                let done = self.done.notified();
                if self.pending() == 0 {
                    return;
                }
                done.await;
            }
        };
        tokio::pin!(all_done);
        if tokio::time::timeout(grace, &mut all_done).await.is_err() {
            self.giving_up.store(true, Ordering::Release);
            self.gave_up.notify_waiters();
            all_done.await;
        }
    }
}

/// What a waiting copy weighs against the bound: its payload and headers.
fn size_of(message: &Message) -> usize {
    message.payload.len()
        + message
            .headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.as_bytes().len())
            .sum::<usize>()
}

pub(crate) fn message_id(message: &Message) -> String {
    message
        .headers
        .get_str(MESSAGE_ID)
        .unwrap_or("-")
        .to_owned()
}

impl crate::layer::Waiting for Deferred {
    /// What waits for `subscription`'s deliveries: retry copies and held deliveries.
    fn pending_for(&self, subscription: &Address) -> usize {
        self.by_subscription
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(a, _)| a == subscription)
            .map_or(0, |(_, n)| *n)
    }
}
