//! What the loop waits on besides its subscription: room among the delayed copies, and a
//! handler's time limit.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;

use ruststream_core::Delivery;
use tokio::sync::futures::OwnedNotified;

use super::super::worker::{Layers, Process, Worker};
use crate::handler::Handler;
use crate::outcome::Outcome;
use crate::settled::Cause;

/// What the loop does while the delayed copies are at their bound.
pub(super) enum Paused {
    /// There is room again: take the next delivery.
    Room,
    /// Still no room: wait (woken when there is, or when the service stops).
    Waiting,
    /// The service stops.
    Stopped,
}

/// Waits for room among the delayed copies, or for the service to stop.
#[cold]
#[inline(never)]
pub(super) fn paused<H: Handler<M>, M: 'static, L: Layers>(
    mut room: Pin<&mut Option<OwnedNotified>>,
    mut stop: Pin<&mut Option<OwnedNotified>>,
    worker: &Worker<H, M, L>,
    cx: &mut Context<'_>,
) -> Paused {
    let runtime = worker.runtime();
    let (deferred, shutdown) = (&runtime.deferred, &runtime.shutdown);
    if room.is_none() {
        room.set(Some(deferred.room_owned()));
    }
    if stop.is_none() {
        stop.set(Some(shutdown.notified_owned()));
    }
    if deferred.is_full() {
        let has_room = room
            .as_mut()
            .as_pin_mut()
            .is_some_and(|room| room.poll(cx).is_ready());
        if !has_room {
            let stopped = shutdown.is_triggered()
                || stop
                    .as_mut()
                    .as_pin_mut()
                    .is_some_and(|stop| stop.poll(cx).is_ready());
            return if stopped {
                Paused::Stopped
            } else {
                Paused::Waiting
            };
        }
    }
    room.set(None);
    Paused::Room
}

/// The handler is still running: if its time limit is over, it is cancelled (its future
/// dropped) and the timeout policy decides.
#[cold]
#[inline(never)]
pub(super) fn expired<H: Handler<M>, M: 'static, L: Layers>(
    mut deadline: Pin<&mut Option<tokio::time::Sleep>>,
    mut running: Pin<&mut Option<H::Future>>,
    worker: &Worker<H, M, L>,
    delivery: Option<&Delivery>,
    cx: &mut Context<'_>,
) -> Option<Option<(Outcome, Cause)>> {
    let over = deadline
        .as_mut()
        .as_pin_mut()
        .is_some_and(|deadline| deadline.poll(cx).is_ready());
    if !over {
        return None;
    }
    running.set(None);
    deadline.set(None);
    Some(worker.timed_out(worker.timeout().unwrap_or_default(), delivery))
}

/// Starts the handler's time limit; a limit already over wakes the loop at once.
#[cold]
pub(super) fn arm(
    mut deadline: Pin<&mut Option<tokio::time::Sleep>>,
    limit: std::time::Duration,
    cx: &mut Context<'_>,
) {
    deadline.set(Some(tokio::time::sleep(limit)));
    if let Some(sleep) = deadline.as_pin_mut()
        && sleep.poll(cx).is_ready()
    {
        cx.waker().wake_by_ref();
    }
}
