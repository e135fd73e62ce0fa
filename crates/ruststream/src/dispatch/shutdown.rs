//! The stop signal shared by a service's loops.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use ruststream_core::{ConsumeError, Delivery, DeliveryStream};
use tokio::sync::Notify;
use tokio::sync::futures::{Notified, OwnedNotified};

#[derive(Default)]
pub(crate) struct Shutdown {
    flag: AtomicBool,
    notify: Arc<Notify>,
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

    /// A notification of the next stop, for a loop that keeps it armed.
    pub(crate) fn notified_owned(&self) -> OwnedNotified {
        self.notify.clone().notified_owned()
    }

    #[inline]
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
    /// Polls the stream first, so a ready delivery costs one atomic load here; the stop
    /// notification is only armed once the stream has nothing ready.
    #[inline]
    pub(crate) fn next<'a>(&'a self, stream: &'a mut DeliveryStream) -> Next<'a> {
        Next {
            shutdown: self,
            stream,
            stop: None,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Shutdown::next`].
    pub(crate) struct Next<'a> {
        shutdown: &'a Shutdown,
        stream: &'a mut DeliveryStream,
        #[pin]
        stop: Option<Notified<'a>>,
    }
}

impl Future for Next<'_> {
    type Output = Option<Result<Delivery, ConsumeError>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if this.shutdown.is_triggered() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = this.stream.as_mut().poll_next(cx) {
            return Poll::Ready(item);
        }
        if this.stop.is_none() {
            this.stop.set(Some(this.shutdown.notify.notified()));
            // A stop between the first look and arming is seen here.
            if this.shutdown.is_triggered() {
                return Poll::Ready(None);
            }
        }
        match this.stop.as_pin_mut() {
            Some(stop) => stop.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    }
}
