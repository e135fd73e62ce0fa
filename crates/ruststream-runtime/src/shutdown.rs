//! The stop signal shared by a service's loops.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use ruststream_core::{ConsumeError, Delivery, DeliveryStream};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;

#[derive(Default)]
pub(crate) struct Shutdown {
    flag: AtomicBool,
    // A graceful stop: loops of subscriptions that drain go on until their streams end.
    draining: AtomicBool,
    notify: Arc<Notify>,
    failure: Mutex<Option<String>>,
}

impl Shutdown {
    pub(crate) fn trigger(&self) {
        self.flag.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Stops the service gracefully: loops whose subscription drains (`drains`) handle
    /// what their streams still yield; the others take nothing more.
    pub(crate) fn stop_gracefully(&self) {
        if self.failure().is_none() {
            self.draining.store(true, Ordering::Release);
        }
        self.trigger();
    }

    /// Stops the service because of `reason`; the first reason wins. Nothing drains: a
    /// `fail_fast` stops every loop at once.
    pub(crate) fn fail(&self, reason: String) {
        self.draining.store(false, Ordering::Release);
        self.failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert(reason);
        self.trigger();
    }

    #[inline]
    pub(crate) fn is_triggered(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Whether a loop takes nothing more from its stream: the service stops, and the
    /// loop's subscription does not drain (`drains`) or the stop is not graceful.
    #[inline]
    pub(crate) fn ends(&self, drains: bool) -> bool {
        self.is_triggered() && !(drains && self.draining.load(Ordering::Acquire))
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

    /// The next item of `stream`, or `None` once the service stops (for a stream that
    /// `drains`, once a graceful stop's stream ends).
    ///
    /// Polls the stream first, so a ready delivery costs one atomic load here; the stop
    /// notification is only armed once the stream has nothing ready.
    #[inline]
    pub(crate) fn next<'a>(&'a self, stream: &'a mut DeliveryStream, drains: bool) -> Next<'a> {
        Next {
            shutdown: self,
            stream,
            drains,
            stop: None,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Shutdown::next`].
    pub(crate) struct Next<'a> {
        shutdown: &'a Shutdown,
        stream: &'a mut DeliveryStream,
        drains: bool,
        #[pin]
        stop: Option<Notified<'a>>,
    }
}

impl Future for Next<'_> {
    type Output = Option<Result<Delivery, ConsumeError>>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let shutdown = *this.shutdown;
        shutdown.poll_next(this.stream, *this.drains, this.stop, cx)
    }
}

impl Shutdown {
    /// [`Shutdown::next`] for a loop that keeps its `stop` notification armed (it is
    /// armed once the stream has nothing ready).
    #[inline(always)]
    pub(crate) fn poll_next<'a>(
        &'a self,
        stream: &mut DeliveryStream,
        drains: bool,
        mut stop: Pin<&mut Option<Notified<'a>>>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Delivery, ConsumeError>>> {
        if self.ends(drains) {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = stream.as_mut().poll_next(cx) {
            return Poll::Ready(item);
        }
        if stop.is_none() {
            stop.set(Some(self.notify.notified()));
            // A stop between the first look and arming is seen here.
            if self.ends(drains) {
                return Poll::Ready(None);
            }
        }
        let notified = stop
            .as_pin_mut()
            .is_some_and(|stop| stop.poll(cx).is_ready());
        // A draining stream is waited on until it ends (its poll above is armed).
        if notified && self.ends(drains) {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }
}
