//! Workers: `n` loops of a mount take turns at its one subscription.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use futures_core::Stream;
use ruststream_core::{ConsumeError, Delivery, DeliveryStream};
type Item = Result<Delivery, ConsumeError>;

/// One subscription's stream shared by several loops: each poll takes the next delivery.
/// When there is none the loop waits in line; the stream's wake-up wakes the first in
/// line, and each loop that takes a delivery wakes the next (the stream may hold more), so
/// a delivery wakes one loop, not all of them.
pub(super) struct Shared {
    // `None` once the subscription's stream has ended: every loop then ends too.
    stream: Arc<Mutex<Option<DeliveryStream>>>,
    waiting: Arc<Waiting>,
    waker: Waker,
}

/// The loops waiting for the shared stream, in line.
#[derive(Default)]
struct Waiting(Mutex<VecDeque<Waker>>);

impl Waiting {
    /// Wakes the first loop in line.
    fn wake_one(&self) {
        let first = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        if let Some(waker) = first {
            waker.wake();
        }
    }
}

impl Wake for Waiting {
    fn wake(self: Arc<Self>) {
        self.wake_one();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_one();
    }
}

impl Shared {
    /// `n` streams over `stream`.
    pub(super) fn split(stream: DeliveryStream, n: usize) -> Vec<DeliveryStream> {
        let stream = Arc::new(Mutex::new(Some(stream)));
        let waiting = Arc::new(Waiting::default());
        let waker = Waker::from(waiting.clone());
        (0..n)
            .map(|_| {
                Box::pin(Self {
                    stream: stream.clone(),
                    waiting: waiting.clone(),
                    waker: waker.clone(),
                }) as DeliveryStream
            })
            .collect()
    }
}

impl Stream for Shared {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let mut guard = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(stream) = guard.as_mut() else {
            return Poll::Ready(None);
        };
        // In line before looking: a delivery that arrives while this loop looks wakes it
        // (a wake-up that takes it out of line also schedules it to look again).
        {
            let mut waiting = self
                .waiting
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push_back(cx.waker().clone());
            }
        }
        let mut inner = Context::from_waker(&self.waker);
        let polled = stream.as_mut().poll_next(&mut inner);
        match &polled {
            Poll::Pending => {}
            Poll::Ready(Some(_)) => {
                // Out of line, and the next one looks: the stream may hold more.
                let next = {
                    let mut waiting = self
                        .waiting
                        .0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    waiting.retain(|w| !w.will_wake(cx.waker()));
                    waiting.pop_front()
                };
                if let Some(next) = next {
                    next.wake();
                }
            }
            Poll::Ready(None) => {
                *guard = None;
                // Every loop in line learns it when it looks again.
                let waiting = std::mem::take(
                    &mut *self
                        .waiting
                        .0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner),
                );
                waiting.into_iter().for_each(Waker::wake);
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures_util::StreamExt;
    use ruststream_core::{Acker, Address, Delivery, Headers, Message, Settlement, Settling, Tag};
    use tokio::sync::mpsc;

    use super::Shared;
    use crate::concurrency::lanes::Lane;

    struct Nothing;
    impl Acker for Nothing {
        fn settle(&self, _: Tag, _: Message, _: Settlement) -> Settling {
            Settling::done(Ok(()))
        }
    }

    fn delivery(n: u64) -> Delivery {
        let acker = Arc::new(Nothing);
        Delivery::new(
            n.to_string().into(),
            Headers::new(),
            Address::new("q"),
            Tag::Seq(n),
            acker,
        )
    }

    /// Three loops share one stream: every delivery goes to exactly one of them, each
    /// waiting loop is woken in turn, and the end of the stream ends them all.
    #[tokio::test(start_paused = true)]
    async fn each_delivery_reaches_one_loop_and_the_end_reaches_all() {
        let (tx, rx) = mpsc::channel(4);
        let streams = Shared::split(Box::pin(Lane(rx)), 3);
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let loops: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(i, mut stream)| {
                let seen_tx = seen_tx.clone();
                tokio::spawn(async move {
                    while let Some(Ok(delivery)) = stream.next().await {
                        let _ = seen_tx.send((i, delivery.payload().clone()));
                        // Busy for a while: the next delivery must reach another loop.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
            })
            .collect();
        drop(seen_tx);
        for n in 0..30 {
            tx.send(delivery(n)).await.expect("loops alive");
            tokio::task::yield_now().await;
        }
        drop(tx);
        for handle in loops {
            tokio::time::timeout(Duration::from_secs(60), handle)
                .await
                .expect("every loop ends with the stream")
                .expect("no panic");
        }
        let mut all = Vec::new();
        while let Some(item) = seen.recv().await {
            all.push(item);
        }
        let mut payloads: Vec<u64> = all
            .iter()
            .map(|(_, p)| {
                std::str::from_utf8(p)
                    .expect("utf-8")
                    .parse()
                    .expect("a number")
            })
            .collect();
        payloads.sort_unstable();
        assert_eq!(payloads, (0..30).collect::<Vec<_>>(), "each exactly once");
        let loops_used = all
            .iter()
            .map(|(i, _)| *i)
            .collect::<std::collections::HashSet<_>>();
        assert_eq!(loops_used.len(), 3, "all three loops took deliveries");
    }
}
