//! Following one delivery: what a middleware keeps from before its handler until the
//! delivery is settled, what it is told of the settlement, and what it is shown of the
//! messages the runtime publishes because of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ruststream_core::{Message, PublishError, Republish};

use crate::settled::Settled;

/// One delivery followed by a middleware, from before its handler until it is settled
/// (returned by [`Middleware::visit`](super::Middleware::visit)): how a middleware sees
/// the settlement, and the span of a tracing layer.
///
/// The runtime tells the visit of the settlement once it is over
/// ([`settled`](Visit::settled)): the one place a layer learns the verdict, its cause,
/// the plan, whether the broker took it and how long the handler ran. Where the visit
/// [`enters`](Visit::enters), it runs the delivery's handler, and the publish of its
/// reply, inside [`within`](Visit::within). It shows the visit every message it
/// publishes itself because of the delivery
/// ([`publishes`](Visit::publishes)): retry copies, delayed copies, dead letters. So a
/// trace context can go on from a delivery into everything that follows from it.
///
/// A visit need not be made per delivery: a middleware that keeps nothing per delivery
/// returns a clone of one shared `Arc` from each
/// [`visit`](super::Middleware::visit), which costs no allocation (the
/// [`Layer`](super::Layer) example does so). One that keeps something per delivery makes
/// a visit of its own:
///
/// ```
/// use std::sync::Arc;
/// use ruststream::layer::{Middleware, Visit};
/// use ruststream::{Delivery, Settled};
///
/// /// Logs each delivery's message id with its verdict and how long its handler ran.
/// struct Log;
///
/// impl Middleware for Log {
///     fn visit(&self, delivery: &Delivery) -> Option<Arc<dyn Visit>> {
///         let id = delivery.headers().get_str("message-id").unwrap_or("-");
///         Some(Arc::new(Logged(id.to_owned())))
///     }
/// }
///
/// struct Logged(String);
///
/// impl Visit for Logged {
///     fn settled(&self, settled: &Settled) {
///         println!("{}: {:?} in {:?}", self.0, settled.verdict(), settled.elapsed());
///     }
/// }
/// # let _ = Log;
/// ```
pub trait Visit: Send + Sync + 'static {
    /// Whether [`within`](Visit::within) is run around the handler's polls. A visit that
    /// says `false` (the default) costs the polls nothing.
    fn enters(&self) -> bool {
        false
    }

    /// Runs `f` inside the visit (called only where [`enters`](Visit::enters)): the
    /// runtime calls it around each poll of the handler's future and of the delivery's
    /// reply (for tracing: with the delivery's span as the current context, so what the
    /// handler publishes is its child).
    fn within(&self, f: &mut dyn FnMut()) {
        f();
    }

    /// Sees (and may change) a copy of the delivery the runtime publishes (`copy` says
    /// which and where to, as the plan has it), before it goes out; what it returns is
    /// told whether the broker took it (for a delayed copy: once its delay is over and it
    /// went out, or was given up).
    fn publishes(&self, copy: &Republish, message: &mut Message) -> Option<Sent> {
        let _ = (copy, message);
        None
    }

    /// Sees the delivery once settled: the verdict, its cause, the plan carried out,
    /// whether the broker took it, and how long the handler ran
    /// ([`Settled::elapsed`]). Told of every delivery the visit was made for, whoever
    /// settled it (the handler, a failure policy, a middleware's
    /// [`before`](super::Middleware::before), a spent attempt), innermost visit first,
    /// before the service's [`after_settle`](crate::App::after_settle) hooks. Not told
    /// where the delivery is left unsettled (a `fail_fast` policy, a stop that cut its
    /// handler off).
    fn settled(&self, settled: &Settled) {
        let _ = settled;
    }
}

/// Told whether a message the runtime published went out.
pub type Sent = Box<dyn FnOnce(Result<(), &PublishError>) + Send>;

/// The visits of one delivery, outermost first (none where no middleware follows it:
/// then nothing is allocated; one, the common case, is kept in place, so a middleware
/// that returns a shared `Arc` costs no allocation either).
#[derive(Clone, Default)]
pub(crate) struct Visits {
    // The outermost; `None` only where there is none.
    first: Option<Arc<dyn Visit>>,
    rest: Vec<Arc<dyn Visit>>,
    // Whether one of them enters (`Visit::enters`): only then are the polls run inside
    // them.
    enters: bool,
}

impl Visits {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Whether the handler's polls are run inside them.
    #[inline]
    pub(crate) fn enters(&self) -> bool {
        self.enters
    }

    /// Adds `visit` inside those already there.
    #[inline]
    pub(crate) fn push(&mut self, visit: Arc<dyn Visit>) {
        self.enters |= visit.enters();
        if self.first.is_none() {
            self.first = Some(visit);
        } else {
            self.rest.push(visit);
        }
    }

    /// Lets go of them all.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
        self.enters = false;
    }

    /// Each visit, outermost first.
    fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<dyn Visit>> {
        self.first.iter().chain(&self.rest)
    }

    /// Runs `f` inside every visit that enters, the outermost outside.
    pub(crate) fn within(&self, f: &mut dyn FnMut()) {
        fn nest(visits: &[Arc<dyn Visit>], f: &mut dyn FnMut()) {
            match visits.split_first() {
                None => f(),
                Some((first, rest)) if first.enters() => first.within(&mut || nest(rest, f)),
                Some((_, rest)) => nest(rest, f),
            }
        }
        match &self.first {
            Some(first) if self.enters && first.enters() => {
                first.within(&mut || nest(&self.rest, f));
            }
            Some(_) if self.enters => nest(&self.rest, f),
            _ => f(),
        }
    }

    /// Shows each visit a message the runtime publishes; what they want told of it.
    pub(crate) fn publishes(&self, copy: &Republish, message: &mut Message) -> Sents {
        if self.is_empty() {
            return Sents::default();
        }
        Sents(
            self.iter()
                .filter_map(|visit| visit.publishes(copy, message))
                .collect(),
        )
    }

    /// Tells each visit of the settlement, the innermost first.
    pub(crate) fn settled(&self, settled: &Settled) {
        for visit in self.iter().rev() {
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

    use ruststream_core::Address;

    use super::*;

    struct Mark(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl Visit for Mark {
        fn enters(&self) -> bool {
            self.0 != "middle"
        }

        fn within(&self, f: &mut dyn FnMut()) {
            self.1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(self.0);
            f();
        }

        fn publishes(&self, copy: &Republish, message: &mut Message) -> Option<Sent> {
            message.headers.insert("seen", copy.as_str().to_owned());
            let log = self.1.clone();
            Some(Box::new(move |result| {
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(if result.is_ok() { "sent" } else { "failed" });
            }))
        }

        fn settled(&self, _: &Settled) {
            self.1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(self.0);
        }
    }

    #[tokio::test]
    async fn visits_nest_outermost_first_and_see_the_runtime_copies() {
        // "middle" does not enter: the polls run inside the other two only.
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut visits = Visits::default();
        visits.push(Arc::new(Mark("outer", log.clone())));
        visits.push(Arc::new(Mark("middle", log.clone())));
        visits.push(Arc::new(Mark("inner", log.clone())));
        let out = visits.clone().enter(async { 7 }).await;
        assert_eq!(out, 7);
        let mut message = Message::new("x");
        let dead_letter = Republish {
            to: Address::new("dl"),
            retry_count: None,
            delay: None,
        };
        let sents = visits.publishes(&dead_letter, &mut message);
        assert_eq!(message.headers.get_str("seen"), Some("dead_letter"));
        sents.tell(Ok(()));
        visits.settled(&Settled {
            address: Address::new("q"),
            attempt: 1,
            verdict: ruststream_core::Verdict::Ack,
            cause: crate::settled::Cause::Handler,
            plan: ruststream_core::Plan {
                copy: None,
                original: ruststream_core::Original::Untouched,
            },
            result: Ok(()),
            elapsed: None,
        });
        let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            log,
            [
                "outer", "inner", "sent", "sent", "sent", "inner", "middle", "outer"
            ]
        );
        visits.clear();
        assert!(visits.is_empty());
    }
}
