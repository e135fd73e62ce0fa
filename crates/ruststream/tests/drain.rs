//! A graceful stop of a subscription that drains: what the broker already handed over is
//! handled and settled, not given back, so a stop spends no attempt.
//!
//! The broker here is the memory broker (which counts deliveries: a delivery given back
//! comes again with attempt + 1) behind a prefetch of `DEPTH` deliveries taken ahead of
//! the handler, as RabbitMQ and NATS adapters take them; the prefetch accepts the stop's
//! [`Drain`] or not.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use ruststream::memory::MemoryBroker;
use ruststream::{App, Attempt, Mount, ack};
use ruststream_core::{
    BoxFuture, Broker, Drain, Publish, SubscribeError, SubscribeSpec, Subscription,
};
use support::{queue, wait_until, within};
use tokio::sync::mpsc;

const DEPTH: usize = 8;
const MESSAGES: u32 = 40;

/// The memory broker behind a prefetch: a task takes up to `DEPTH` deliveries ahead of
/// the service; where it accepts the drain, it stops taking once the drain is
/// requested, and the stream ends after what it took.
struct Prefetching {
    inner: MemoryBroker,
    accepts: bool,
}

impl Broker for Prefetching {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async move {
            let drain: Drain = spec.drain.clone();
            if self.accepts {
                drain.accept();
            }
            let mut inner = self.inner.subscribe(spec).await?;
            let (tx, mut rx) = mpsc::channel(DEPTH);
            let accepts = self.accepts;
            tokio::spawn(async move {
                loop {
                    let Ok(room) = tx.reserve().await else { return };
                    let next = tokio::select! {
                        () = drain.requested(), if accepts => return,
                        next = inner.deliveries.next() => next,
                    };
                    match next {
                        Some(item) => room.send(item),
                        None => return,
                    }
                }
            });
            Ok(Subscription {
                deliveries: Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))),
                capabilities: inner.capabilities,
                attached: inner.attached,
            })
        })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        self.inner.publisher()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

/// Runs a service on "q" until `handled` deliveries, then stops it; returns the
/// attempts the handler saw.
async fn run_and_stop(
    memory: &MemoryBroker,
    accepts: bool,
    handled: usize,
    concurrency: fn(Mount) -> Mount,
) -> Vec<u32> {
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let sink = seen.clone();
    let broker = Prefetching {
        inner: memory.clone(),
        accepts,
    };
    let app = App::new(broker)
        .shutdown_timeout(Duration::from_secs(10))
        .mount(
            concurrency(Mount::new("q")),
            move |Attempt(attempt): Attempt, _: u32| {
                let sink = sink.clone();
                async move {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(attempt);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    ack()
                }
            },
        );
    let running = within("start", app.start()).await.expect("start");
    wait_until("the handler runs", || {
        seen.lock().unwrap_or_else(PoisonError::into_inner).len() >= handled
    })
    .await;
    within("stop", running.stop()).await.expect("clean stop");
    seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

async fn publish_all(memory: &MemoryBroker) {
    let publisher = ruststream::Publisher::new(memory.publisher());
    for n in 0..MESSAGES {
        publisher.publish("q", &n).await.expect("publish");
    }
}

/// Three graceful stops, then a run to the end: every message handled once, at attempt 1.
async fn three_stops(concurrency: fn(Mount) -> Mount) {
    let memory = MemoryBroker::new();
    publish_all(&memory).await;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        attempts.extend(run_and_stop(&memory, true, 2, concurrency).await);
        // What the prefetch held was handled, not given back: nothing is unsettled.
        assert_eq!(queue(&memory, "q").unsettled, 0);
    }
    let left = queue(&memory, "q").ready;
    attempts.extend(run_and_stop(&memory, true, left, concurrency).await);
    assert_eq!(
        attempts.len(),
        MESSAGES as usize,
        "each message handled once"
    );
    assert!(attempts.iter().all(|&a| a == 1), "{attempts:?}");
}

#[tokio::test]
async fn three_graceful_stops_of_a_draining_subscription_spend_no_attempt() {
    three_stops(|mount| mount).await;
}

#[tokio::test]
async fn three_graceful_stops_spend_no_attempt_with_workers() {
    three_stops(|mount| mount.workers(4)).await;
}

#[tokio::test]
async fn three_graceful_stops_spend_no_attempt_with_lanes() {
    three_stops(|mount| mount.lanes(3, |d| d.payload().len() as u64 + d.payload()[0] as u64)).await;
}

/// Without the drain the stop gives the prefetched deliveries back, and the broker
/// counts them: what the fix is for (and proof that the test above can fail).
#[tokio::test]
async fn a_stop_without_the_drain_gives_back_what_was_prefetched_and_it_counts() {
    let memory = MemoryBroker::new();
    publish_all(&memory).await;
    let mut attempts = run_and_stop(&memory, false, 2, |mount| mount).await;
    let left = queue(&memory, "q").ready;
    attempts.extend(run_and_stop(&memory, false, left, |mount| mount).await);
    assert!(attempts.iter().any(|&a| a > 1), "{attempts:?}");
}

/// A `fail_fast` stops at once even where the subscription drains: nothing more runs
/// after the panic.
#[tokio::test]
async fn after_a_fail_fast_nothing_drains() {
    let memory = MemoryBroker::new();
    publish_all(&memory).await;
    let calls: Arc<Mutex<Vec<u32>>> = Arc::default();
    let sink = calls.clone();
    let panicked = Arc::new(AtomicBool::new(false));
    let flag = panicked.clone();
    let app = App::new(Prefetching {
        inner: memory.clone(),
        accepts: true,
    })
    .mount("q", move |n: u32| {
        let (sink, flag) = (sink.clone(), flag.clone());
        async move {
            sink.lock().unwrap_or_else(PoisonError::into_inner).push(n);
            if n == 3 {
                flag.store(true, Ordering::SeqCst);
                panic!("poison");
            }
            ack()
        }
    });
    let result = within("run", app.run_until(std::future::pending())).await;
    assert!(result.is_err(), "fail_fast ends the run with an error");
    assert!(panicked.load(Ordering::SeqCst));
    let calls = calls.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(calls, [0, 1, 2, 3], "nothing handled after the panic");
}
