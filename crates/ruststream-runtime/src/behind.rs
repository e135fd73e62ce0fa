//! The bare settlements under way behind a delivery loop, looked at only when one of
//! them woke it.
//!
//! Each is polled with a waker of their own, which notes that one of them woke the
//! loop and then wakes it. The loop looks through them when that note is set, not on
//! every wake: with many under way (a Kafka mount lets 1,024 trail behind it, each
//! waiting for a commit) looking through all of them for every delivery received was
//! the loop's largest cost, while one commit ends hundreds of them at once.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use ruststream_core::{AckError, Settling};

/// The settlements behind the loop, each with what is left to do once it is over
/// (`R`), at most `limit` of them.
pub(crate) struct Behind<R> {
    entries: Vec<(Settling, Option<R>)>,
    limit: usize,
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

pin_project_lite::pin_project! {
    /// The future of [`Behind::beside`].
    pub(crate) struct Beside<'a, R, F, O> {
        behind: &'a mut Behind<R>,
        over: &'a mut O,
        #[pin]
        future: F,
    }
}

impl<R, F: Future, O: FnMut(Result<(), AckError>, R)> Future for Beside<'_, R, F, O> {
    type Output = F::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        this.behind.poll_over(cx, *this.over);
        this.future.poll(cx)
    }
}

impl<R> Behind<R> {
    /// Room for `limit` settlements behind the loop.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            entries: Vec::new(),
            limit,
            wake: None,
        }
    }

    /// Whether one more may trail behind.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.entries.len() < self.limit
    }

    /// Polls `settling` once, so that it starts: over at once, it comes back with its
    /// result; else it stays behind the loop, `then` handed to `over` once it is.
    fn start(
        &mut self,
        mut settling: Settling,
        then: R,
        cx: &Context<'_>,
    ) -> Option<(Result<(), AckError>, R)> {
        let (note, waker) = self.wake.get_or_insert_with(|| {
            let note = Arc::new(Note::default());
            (note.clone(), Waker::from(note))
        });
        note.target.register(cx.waker());
        match Pin::new(&mut settling).poll(&mut Context::from_waker(waker)) {
            Poll::Ready(result) => Some((result, then)),
            Poll::Pending => {
                self.entries.push((settling, Some(then)));
                None
            }
        }
    }

    /// `future`'s output, the settlements behind the loop handed to `over` as they end
    /// meanwhile.
    #[inline]
    pub(crate) fn beside<'a, F: Future, O: FnMut(Result<(), AckError>, R)>(
        &'a mut self,
        future: F,
        over: &'a mut O,
    ) -> Beside<'a, R, F, O> {
        Beside {
            behind: self,
            over,
            future,
        }
    }

    /// Carries `settling` to its end: behind the loop where there is room (polled once
    /// now, so that it starts), else awaited here; `over` is given it once it is over.
    #[cold]
    pub(crate) async fn settle(
        &mut self,
        settling: Settling,
        then: R,
        over: &mut impl FnMut(Result<(), AckError>, R),
    ) {
        if !self.has_room() {
            let result = self.beside(settling, over).await;
            return over(result, then);
        }
        let mut started = Some((settling, then));
        poll_fn(|cx| {
            if let Some((settling, then)) = started.take()
                && let Some((result, then)) = self.start(settling, then, cx)
            {
                over(result, then);
            }
            Poll::Ready(())
        })
        .await;
    }

    /// Waits until every settlement behind the loop is over.
    pub(crate) async fn end(&mut self, over: &mut impl FnMut(Result<(), AckError>, R)) {
        poll_fn(|cx| {
            self.poll_over(cx, over);
            if self.entries.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    /// Hands `over` every settlement behind the loop that is over, if one of them woke
    /// it since the last look.
    #[inline]
    fn poll_over(&mut self, cx: &Context<'_>, over: &mut impl FnMut(Result<(), AckError>, R)) {
        let Some((note, waker)) = &self.wake else {
            return;
        };
        if self.entries.is_empty() {
            return;
        }
        note.target.register(cx.waker());
        if note.woke.swap(false, Ordering::AcqRel) {
            Self::look(&mut self.entries, waker, over);
        }
    }

    #[inline(never)]
    fn look(
        entries: &mut Vec<(Settling, Option<R>)>,
        waker: &Waker,
        over: &mut impl FnMut(Result<(), AckError>, R),
    ) {
        let mut behind = Context::from_waker(waker);
        entries.retain_mut(
            |(settling, then)| match Pin::new(settling).poll(&mut behind) {
                Poll::Ready(result) => {
                    if let Some(then) = then.take() {
                        over(result, then);
                    }
                    false
                }
                Poll::Pending => true,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

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
        let mut behind = Behind::new(2);
        let (first, settling) = pending();
        assert!(behind.start(settling, 1, &cx).is_none());
        let (second, settling) = pending();
        assert!(behind.start(settling, 2, &cx).is_none());
        assert!(!behind.has_room());
        let mut seen = Vec::new();
        behind.poll_over(&cx, &mut |r, n| seen.push((r, n)));
        assert!(seen.is_empty(), "none woke it");
        second.send(()).expect("sent");
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "the loop is woken");
        behind.poll_over(&cx, &mut |r, n| seen.push((r, n)));
        assert_eq!(seen.len(), 1);
        behind.poll_over(&cx, &mut |r, n| seen.push((r, n)));
        assert_eq!(seen.len(), 1, "looked at once");
        drop(first);
        behind.poll_over(&cx, &mut |r, n| seen.push((r, n)));
        assert_eq!(seen, [(Ok(()), 2), (Err(AckError::Disconnected), 1)]);
        assert!(behind.has_room());
    }
}
