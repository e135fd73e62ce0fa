//! Following one delivery: what a middleware keeps from before its handler until the
//! delivery is settled, and what it is shown of the messages the runtime publishes
//! because of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ruststream_core::{Address, Message, PublishError};

use crate::settled::Settled;

/// One delivery followed by a middleware, from before its handler until it is settled
/// (made by [`Middleware::visit`](super::Middleware::visit)): a span, for tracing.
///
/// The runtime runs the delivery's handler, and the publish of its reply, inside
/// [`within`](Visit::within), and shows the visit every message it publishes itself
/// because of the delivery ([`publishes`](Visit::publishes)): retry copies, delayed
/// copies, dead letters. So a trace context can go on from a delivery into everything
/// that follows from it.
pub trait Visit: Send + Sync + 'static {
    /// Runs `f` inside the visit: the runtime calls it around each poll of the handler's
    /// future and of the delivery's reply (for tracing: with the delivery's span as the
    /// current context, so what the handler publishes is its child).
    fn within(&self, f: &mut dyn FnMut()) {
        f();
    }

    /// Sees (and may change) a message the runtime publishes because of the delivery,
    /// before it goes out; what it returns is told whether the broker took it (for a
    /// delayed copy: once its delay is over and it went out, or was given up).
    fn publishes(&self, copy: Republish, to: &Address, message: &mut Message) -> Option<Sent> {
        let _ = (copy, to, message);
        None
    }

    /// Sees the delivery once settled (see [`Middleware::settled`](super::Middleware::settled)).
    fn settled(&self, settled: &Settled) {
        let _ = settled;
    }
}

/// Told whether a message the runtime published went out.
pub type Sent = Box<dyn FnOnce(Result<(), &PublishError>) + Send>;

/// What a message the runtime publishes because of a delivery is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Republish {
    /// A retry copy, published at once.
    Retry,
    /// A retry copy published from the process after its delay.
    DelayedRetry,
    /// A dead letter.
    DeadLetter,
}

impl Republish {
    /// Its name: `retry`, `delayed_retry`, `dead_letter`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::DelayedRetry => "delayed_retry",
            Self::DeadLetter => "dead_letter",
        }
    }
}

/// The visits of one delivery, outermost first (empty where no middleware follows it:
/// then nothing is allocated).
#[derive(Clone, Default)]
pub(crate) struct Visits(pub(crate) Vec<Arc<dyn Visit>>);

impl Visits {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Runs `f` inside every visit, the outermost outside.
    pub(crate) fn within(&self, f: &mut dyn FnMut()) {
        fn nest(visits: &[Arc<dyn Visit>], f: &mut dyn FnMut()) {
            match visits.split_first() {
                None => f(),
                Some((first, rest)) => first.within(&mut || nest(rest, f)),
            }
        }
        nest(&self.0, f);
    }

    /// Shows each visit a message the runtime publishes; what they want told of it.
    pub(crate) fn publishes(&self, copy: Republish, to: &Address, message: &mut Message) -> Sents {
        if self.is_empty() {
            return Sents::default();
        }
        Sents(
            self.0
                .iter()
                .filter_map(|visit| visit.publishes(copy, to, message))
                .collect(),
        )
    }

    pub(crate) fn settled(&self, settled: &Settled) {
        for visit in self.0.iter().rev() {
            visit.settled(settled);
        }
    }

    /// `future`, polled inside the visits.
    pub(crate) fn enter<F: Future>(self, future: F) -> Entered<F> {
        Entered {
            visits: self,
            inner: future,
        }
    }
}

/// What the visits want told of a message the runtime published.
#[derive(Default)]
pub(crate) struct Sents(Vec<Sent>);

impl Sents {
    pub(crate) fn tell(self, result: Result<(), &PublishError>) {
        for sent in self.0 {
            sent(result);
        }
    }
}

pin_project_lite::pin_project! {
    /// A future polled inside a delivery's visits.
    pub(crate) struct Entered<F> {
        visits: Visits,
        #[pin]
        inner: F,
    }
}

impl<F: Future> Future for Entered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut inner = this.inner;
        let mut polled = Poll::Pending;
        this.visits.within(&mut || polled = inner.as_mut().poll(cx));
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    struct Mark(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl Visit for Mark {
        fn within(&self, f: &mut dyn FnMut()) {
            self.1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(self.0);
            f();
        }

        fn publishes(&self, copy: Republish, _: &Address, message: &mut Message) -> Option<Sent> {
            message.headers.insert("seen", copy.as_str().to_owned());
            let log = self.1.clone();
            Some(Box::new(move |result| {
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(if result.is_ok() { "sent" } else { "failed" });
            }))
        }
    }

    #[tokio::test]
    async fn visits_nest_outermost_first_and_see_the_runtime_copies() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let visits = Visits(vec![
            Arc::new(Mark("outer", log.clone())),
            Arc::new(Mark("inner", log.clone())),
        ]);
        let out = visits.clone().enter(async { 7 }).await;
        assert_eq!(out, 7);
        let mut message = Message::new("x");
        let sents = visits.publishes(Republish::DeadLetter, &Address::new("dl"), &mut message);
        assert_eq!(message.headers.get_str("seen"), Some("dead_letter"));
        sents.tell(Ok(()));
        let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(log, ["outer", "inner", "sent", "sent"]);
    }
}
