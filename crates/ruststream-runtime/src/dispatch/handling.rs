//! Running a handler's future: polled under `catch_unwind` (and inside the delivery's
//! visits, where middleware follow it), within the mount's time limit, until it decides.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ruststream_core::Delivery;
use tokio::time::Sleep;

use super::worker::{Layers, Worker};
use crate::handler::Handler;
use crate::layer::Visits;
use crate::outcome::Outcome;
use crate::policy::panic_message;
use crate::settled::Cause;

/// The handler's future (in the loop's place for it) until it decides, within the
/// mount's time limit.
pub(super) struct Handling<'a, H: Handler<M>, M: 'static, L: Layers> {
    pub(super) worker: &'a Worker<H, M, L>,
    pub(super) delivery: &'a Delivery,
    pub(super) visits: &'a Visits,
    pub(super) running: Pin<&'a mut Option<H::Future>>,
    pub(super) deadline: Pin<&'a mut Option<Sleep>>,
}

impl<H: Handler<M>, M: 'static, L: Layers> Future for Handling<'_, H, M, L> {
    type Output = Option<(Outcome, Cause)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (worker, delivery) = (this.worker, this.delivery);
        match poll(this.running.as_mut(), worker, delivery, this.visits, cx) {
            Poll::Pending => match worker.mount.timeout {
                Some(limit) => {
                    let (running, deadline) = (this.running.as_mut(), this.deadline.as_mut());
                    expired(running, deadline, limit, worker, delivery, cx)
                }
                None => Poll::Pending,
            },
            decided => decided,
        }
    }
}

/// Polls the handler's future, under `catch_unwind` (and inside the delivery's visits,
/// where middleware follow it); once it is over (and dropped), what to do: its outcome,
/// or the panic policy's decision (`None`: stop).
#[inline(always)]
pub(super) fn poll<H: Handler<M>, M: 'static, L: Layers>(
    mut running: Pin<&mut Option<H::Future>>,
    worker: &Worker<H, M, L>,
    delivery: &Delivery,
    visits: &Visits,
    cx: &mut Context<'_>,
) -> Poll<Option<(Outcome, Cause)>> {
    let Some(mut future) = running.as_mut().as_pin_mut() else {
        return Poll::Ready(None);
    };
    let mut poll = || std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
    let polled = if worker.followed(visits) {
        within(visits, &mut poll)
    } else {
        poll()
    };
    let decided = match polled {
        Ok(Poll::Pending) => return Poll::Pending,
        Ok(Poll::Ready(outcome)) => Some((outcome, Cause::Handler)),
        Err(panic) => worker.panicked(panic_message(&*panic), Some(delivery)),
    };
    running.set(None);
    Poll::Ready(decided)
}

/// `poll` run inside `visits` (once, even where a visit forgot to call it).
#[inline(never)]
fn within<T>(visits: &Visits, poll: &mut dyn FnMut() -> T) -> T {
    let mut polled = None;
    visits.within(&mut || polled = Some(poll()));
    match polled {
        Some(polled) => polled,
        None => poll(),
    }
}

/// The handler waits on something: once its time `limit` is over (its `deadline` armed
/// at the first look), it is cancelled (its future dropped) and the timeout policy
/// decides. A limit over at once wakes the loop, which polls the handler once more.
#[cold]
#[inline(never)]
fn expired<H: Handler<M>, M: 'static, L: Layers>(
    mut running: Pin<&mut Option<H::Future>>,
    mut deadline: Pin<&mut Option<Sleep>>,
    limit: Duration,
    worker: &Worker<H, M, L>,
    delivery: &Delivery,
    cx: &mut Context<'_>,
) -> Poll<Option<(Outcome, Cause)>> {
    if deadline.is_none() {
        deadline.set(Some(tokio::time::sleep(limit)));
        if deadline
            .as_mut()
            .as_pin_mut()
            .is_some_and(|sleep| sleep.poll(cx).is_ready())
        {
            cx.waker().wake_by_ref();
        }
        return Poll::Pending;
    }
    if !deadline
        .as_pin_mut()
        .is_some_and(|sleep| sleep.poll(cx).is_ready())
    {
        return Poll::Pending;
    }
    running.set(None);
    Poll::Ready(worker.timed_out(limit, Some(delivery)))
}
