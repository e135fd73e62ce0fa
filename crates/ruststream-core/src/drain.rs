//! A graceful stop's request that a subscription take nothing more from its broker.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// The runtime's request, at a graceful stop, that a subscription stop taking messages
/// from its broker and end its stream after those it already received.
///
/// Why: a message the broker already handed over (prefetched, fetched in a batch) that a
/// stopping service gives back unhandled is counted by brokers that count deliveries
/// (RabbitMQ quorum queues, NATS JetStream), so every rolling deploy would spend an
/// attempt of healthy messages. A subscription that **accepts** the drain lets the
/// service handle and settle what it holds instead.
///
/// The runtime puts one in every [`SubscribeSpec`](crate::SubscribeSpec). An adapter
/// that can drain calls [`accept`](Drain::accept) when it subscribes and watches
/// [`requested`](Drain::requested): once it completes, the adapter stops fetching
/// (cancels its consumer, sends no further pull request) and ends the stream after the
/// deliveries it already has. The runtime then handles every delivery the stream still
/// yields, within the stop's grace period, and takes the end of the stream as the end of
/// the mount. A subscription that does not accept is stopped as before: the runtime
/// takes nothing more from its stream at once, and what the stream held is given back.
///
/// ```
/// use ruststream_core::Drain;
///
/// let drain = Drain::new();
/// let adapter = drain.clone();
/// adapter.accept();
/// assert!(drain.is_accepted());
/// assert!(!adapter.is_requested());
/// drain.request();
/// assert!(adapter.is_requested());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Drain(Arc<State>);

#[derive(Debug, Default)]
struct State {
    accepted: AtomicBool,
    requested: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Drain {
    /// A drain nobody accepted or requested yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The adapter's word that it ends the stream after what it received once a drain
    /// is requested.
    pub fn accept(&self) {
        self.0.accepted.store(true, Ordering::Release);
    }

    /// Whether the adapter accepted.
    pub fn is_accepted(&self) -> bool {
        self.0.accepted.load(Ordering::Acquire)
    }

    /// Asks the subscription to take nothing more from the broker (the runtime, at a
    /// graceful stop). Idempotent.
    pub fn request(&self) {
        if self.0.requested.swap(true, Ordering::AcqRel) {
            return;
        }
        let wakers =
            std::mem::take(&mut *self.0.wakers.lock().unwrap_or_else(PoisonError::into_inner));
        for waker in wakers {
            waker.wake();
        }
    }

    /// Whether a drain was requested.
    pub fn is_requested(&self) -> bool {
        self.0.requested.load(Ordering::Acquire)
    }

    /// Completes once a drain is requested (at once if it was).
    pub fn requested(&self) -> Requested {
        Requested(self.clone())
    }
}

/// The future of [`Drain::requested`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Requested(Drain);

impl Future for Requested {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let state = &(self.0).0;
        if state.requested.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let mut wakers = state.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked again under the lock: a request between the first look and here has
        // already taken the wakers.
        if state.requested.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_request_wakes_the_waiting_future_once() {
        let drain = Drain::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = drain.requested();
        assert!(Pin::new(&mut waiting).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut waiting).poll(&mut cx).is_pending());
        drain.request();
        drain.request();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(Pin::new(&mut waiting).poll(&mut cx).is_ready());
        assert!(Pin::new(&mut drain.requested()).poll(&mut cx).is_ready());
    }
}
