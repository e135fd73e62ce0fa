//! The suite itself: each check fails on a broker that gets its part wrong. A memory
//! broker whose settlements are subverted one way at a time must fail the check aimed
//! at that part, for the reason expected.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use ruststream::memory::MemoryBroker;
use ruststream_conformance::{__private::run, Harness, checks};
use ruststream_core::{
    Acker, Address, BoxFuture, Broker, Capabilities, ConsumeError, Delivery, DeliveryStream,
    Message, Publish, Settlement, Settling, SubscribeError, SubscribeSpec, Subscription, Tag,
};

/// What the broker gets wrong.
#[derive(Clone, Copy, PartialEq)]
enum Bug {
    /// An accepted delivery comes back.
    AckIgnored,
    /// A rejected delivery is requeued.
    RejectRequeues,
    /// A requeued delivery is accepted (lost).
    RequeueLoses,
    /// A delayed requeue is immediate.
    DelayIgnored,
    /// A delivery abandoned unsettled is accepted (lost).
    AbandonLoses,
    /// Header values that are not UTF-8 are lost.
    BinaryLost,
}

/// The memory broker, with each delivery re-issued under an acker that gets `bug` wrong.
struct Broken {
    inner: MemoryBroker,
    bug: Bug,
}

struct BrokenAcker {
    held: Mutex<HashMap<u64, Delivery>>,
    bug: Bug,
}

impl BrokenAcker {
    fn take(&self, tag: &Tag) -> Option<Delivery> {
        let Tag::Seq(n) = tag else { return None };
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.remove(n)
    }
}

impl Acker for BrokenAcker {
    fn settle(&self, tag: Tag, _: Message, settlement: Settlement) -> Settling {
        let Some(delivery) = self.take(&tag) else {
            return Settling::done(Ok(()));
        };
        let settlement = match (self.bug, settlement) {
            (Bug::AckIgnored, Settlement::Accept) => Settlement::Requeue,
            (Bug::RejectRequeues, Settlement::Reject) => Settlement::Requeue,
            (Bug::RequeueLoses, Settlement::Requeue) => Settlement::Accept,
            (Bug::DelayIgnored, Settlement::RequeueAfter(_)) => Settlement::Requeue,
            (_, settlement) => settlement,
        };
        // Later, so that a delivery coming straight back does not keep a worker busy.
        Settling::pending(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            delivery.settle(settlement).await
        })
    }

    fn abandon(&self, tag: Tag, _: Message) {
        if let Some(delivery) = self.take(&tag)
            && self.bug == Bug::AbandonLoses
        {
            std::mem::drop(delivery.settle(Settlement::Accept));
        }
    }
}

struct Reissued {
    inner: DeliveryStream,
    acker: Arc<BrokenAcker>,
}

static TAGS: AtomicU64 = AtomicU64::new(0);

impl Stream for Reissued {
    type Item = Result<Delivery, ConsumeError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(delivery))) => delivery,
            other => return other,
        };
        let n = TAGS.fetch_add(1, Ordering::Relaxed);
        let mut headers = item.headers().clone();
        if self.acker.bug == Bug::BinaryLost {
            let binary: Vec<String> = headers
                .iter()
                .filter(|(_, v)| v.to_str().is_none())
                .map(|(name, _)| name.to_string())
                .collect();
            binary.iter().for_each(|name| headers.remove(name));
        }
        let acker: Arc<dyn Acker> = self.acker.clone();
        let mut out = Delivery::new(
            item.payload().clone(),
            headers,
            item.address().clone(),
            Tag::Seq(n),
            acker,
        );
        if let Some(attempt) = item.broker_attempt() {
            out = out.with_broker_attempt(attempt);
        }
        let mut held = self
            .acker
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        held.insert(n, item);
        Poll::Ready(Some(Ok(out)))
    }
}

impl Broker for Broken {
    fn name(&self) -> &'static str {
        "broken memory"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async move {
            let subscription = self.inner.subscribe(spec).await?;
            let acker = Arc::new(BrokenAcker {
                held: Mutex::new(HashMap::new()),
                bug: self.bug,
            });
            let deliveries = Reissued {
                inner: subscription.deliveries,
                acker,
            };
            Ok(Subscription {
                deliveries: Box::pin(deliveries),
                capabilities: subscription.capabilities,
                attached: subscription.attached,
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

struct BrokenHarness {
    broker: MemoryBroker,
    bug: Bug,
    taken: AtomicUsize,
}

impl Harness for BrokenHarness {
    fn name(&self) -> &str {
        "broken memory"
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        Arc::new(Broken {
            inner: self.broker.clone(),
            bug: self.bug,
        })
    }

    fn fresh_address(&self) -> Address {
        Address::new(format!("a-{}", self.taken.fetch_add(1, Ordering::Relaxed)))
    }

    fn capabilities(&self) -> Capabilities {
        MemoryBroker::FULL
    }
}

fn broken(bug: Bug) -> BrokenHarness {
    BrokenHarness {
        broker: MemoryBroker::new(),
        bug,
        taken: AtomicUsize::new(0),
    }
}

macro_rules! fails {
    ($test:ident: $bug:ident fails $check:ident with $expected:literal) => {
        #[test]
        #[should_panic(expected = $expected)]
        fn $test() {
            let harness = broken(Bug::$bug);
            run(stringify!($test), "broken memory", async move {
                checks::$check(&harness).await
            });
        }
    };
}

fails!(ack_ignored: AckIgnored fails ack_removes with "unexpected delivery to the sink");
fails!(reject_requeued: RejectRequeues fails drop_not_redelivered with "unexpected delivery");
fails!(requeue_lost: RequeueLoses fails retry_attempts_then_dead_letter with "no attempt");
fails!(delay_ignored: DelayIgnored fails retry_after_delays with "before the");
fails!(abandoned_lost: AbandonLoses fails fail_fast_redelivers with "no delivery to the sink");
fails!(binary_lost: BinaryLost fails roundtrip with "binary header");
