//! The stop signal shared by a service's loops.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use ruststream_core::{ConsumeError, Delivery, DeliveryStream};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;

#[derive(Default)]
pub(crate) struct Shutdown {
    flag: AtomicBool,
    notify: Notify,
    failure: Mutex<Option<String>>,
}

impl Shutdown {
    pub(crate) fn trigger(&self) {
        self.flag.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Stops the service because of `reason`; the first reason wins.
    pub(crate) fn fail(&self, reason: String) {
        self.failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert(reason);
        self.trigger();
    }

    pub(crate) fn is_triggered(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) async fn wait(&self) {
        let notified = self.notify.notified();
        if self.is_triggered() {
            return;
        }
        notified.await;
    }

    /// The next item of `stream`, or `None` once the service stops.
    ///
    /// Polls the stream first, so a ready delivery costs one atomic load here.
    pub(crate) async fn next(
        &self,
        stream: &mut DeliveryStream,
    ) -> Option<Result<Delivery, ConsumeError>> {
        // The stop notification is only armed once the stream has nothing ready.
        let mut notified = pin!(None::<Notified<'_>>);
        poll_fn(|cx| {
            if self.is_triggered() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(item) = stream.as_mut().poll_next(cx) {
                return Poll::Ready(item);
            }
            if notified.is_none() {
                notified.set(Some(self.notify.notified()));
                // A stop between the first look and arming is seen here.
                if self.is_triggered() {
                    return Poll::Ready(None);
                }
            }
            let stopped = notified
                .as_mut()
                .as_pin_mut()
                .is_some_and(|stop| stop.poll(cx).is_ready());
            if stopped {
                Poll::Ready(None)
            } else {
                Poll::Pending
            }
        })
        .await
    }
}
