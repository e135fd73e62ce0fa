//! The bare settlements under way behind a sequential loop, polled only when one of them
//! woke the loop.
//!
//! Each is polled with a waker of their own, which notes that one of them woke the
//! loop and then wakes it. The loop looks through them when that note is set, not on
//! every wake: with many under way (a Kafka mount lets 1,024 trail behind it, each
//! waiting for a commit) looking through all of them for every delivery received was
//! the loop's largest cost, while one commit ends hundreds of them at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use ruststream_core::{AckError, Settling};

/// The settlements behind the loop, each with what the hooks learn once it is over
/// (`R`).
pub(super) struct Behind<R> {
    entries: Vec<(Settling, Option<R>)>,
    /// Made with the first settlement left behind (a loop whose settlements are all
    /// done at once never makes it).
    wake: Option<(Arc<Note>, Waker)>,
}

/// Set by a settlement behind the loop that woke it.
#[derive(Default)]
struct Note {
    woke: AtomicBool,
    target: AtomicWaker,
}

impl Wake for Note {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woke.store(true, Ordering::Release);
        self.target.wake();
    }
}

impl<R> Default for Behind<R> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            wake: None,
        }
    }
}

impl<R> Behind<R> {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The waker the settlements behind are polled with, waking the loop's `cx`.
    fn waker(&mut self, cx: &Context<'_>) -> Waker {
        let (note, waker) = self.wake.get_or_insert_with(|| {
            let note = Arc::new(Note::default());
            let waker = Waker::from(note.clone());
            (note, waker)
        });
        note.target.register(cx.waker());
        waker.clone()
    }

    /// Polls `settling` once, so that it starts: over at once, it comes back with its
    /// result; else it stays behind the loop.
    pub(super) fn start(
        &mut self,
        mut settling: Settling,
        report: Option<R>,
        cx: &Context<'_>,
    ) -> Option<(Result<(), AckError>, Option<R>)> {
        let waker = self.waker(cx);
        match Pin::new(&mut settling).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(result) => Some((result, report)),
            Poll::Pending => {
                self.entries.push((settling, report));
                None
            }
        }
    }

    /// Hands `over` every settlement behind the loop that is over, if one of them woke
    /// it since the last look; returns how many.
    pub(super) fn poll_over(
        &mut self,
        cx: &Context<'_>,
        mut over: impl FnMut(Result<(), AckError>, Option<R>),
    ) -> usize {
        let Some((note, waker)) = &self.wake else {
            return 0;
        };
        if self.entries.is_empty() {
            return 0;
        }
        note.target.register(cx.waker());
        if !note.woke.swap(false, Ordering::AcqRel) {
            return 0;
        }
        let mut behind = Context::from_waker(waker);
        let before = self.entries.len();
        self.entries.retain_mut(
            |(settling, report)| match Pin::new(settling).poll(&mut behind) {
                Poll::Ready(result) => {
                    over(result, report.take());
                    false
                }
                Poll::Pending => true,
            },
        );
        before - self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Waker;

    use ruststream_core::Settling;
    use tokio::sync::oneshot;

    use super::*;

    /// Counts how often the loop is woken.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn pending() -> (oneshot::Sender<()>, Settling) {
        let (tx, rx) = oneshot::channel::<()>();
        let settling =
            Settling::pending(async move { rx.await.map_err(|_| AckError::Disconnected) });
        (tx, settling)
    }

    #[test]
    fn settlements_are_looked_at_only_after_one_woke_the_loop() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let cx = Context::from_waker(&waker);
        let mut behind = Behind::<()>::default();
        let (first, settling) = pending();
        assert!(behind.start(settling, None, &cx).is_none());
        let (second, settling) = pending();
        assert!(behind.start(settling, None, &cx).is_none());
        let mut seen = Vec::new();
        assert_eq!(
            behind.poll_over(&cx, |r, _| seen.push(r)),
            0,
            "none woke it"
        );
        second.send(()).expect("sent");
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "the loop is woken");
        assert_eq!(behind.poll_over(&cx, |r, _| seen.push(r)), 1);
        assert_eq!(
            behind.poll_over(&cx, |r, _| seen.push(r)),
            0,
            "looked at once"
        );
        drop(first);
        assert_eq!(behind.poll_over(&cx, |r, _| seen.push(r)), 1);
        assert_eq!(seen, [Ok(()), Err(AckError::Disconnected)]);
        assert!(behind.is_empty());
    }
}
