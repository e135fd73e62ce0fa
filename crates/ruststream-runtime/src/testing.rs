//! The test kit: a service's real router, in process, on the memory broker.
//!
//! Publish, wait until everything that publishing set off has settled, then look at
//! what the handlers decided and what was published. Nothing in the runtime knows it
//! is under test: the kit watches through the public `after_settle` hook and the
//! memory broker's counters. Use a paused clock (`#[tokio::test(start_paused = true)]`)
//! and `retry_after` delays pass at once.
//!
//! ```
//! use ruststream::testing::TestApp;
//! use ruststream::{App, Outcome, ack, drop};
//! use ruststream_core::Verdict;
//!
//! async fn check(n: i64) -> Outcome {
//!     if n >= 0 { ack() } else { drop() }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let app = TestApp::start(|broker| App::new(broker).mount("numbers", check)).await;
//! app.publish("numbers", &5).await;
//! app.publish("numbers", &-1).await;
//! app.settled().await;
//! let verdicts: Vec<_> = app.settlements().iter().map(|s| s.verdict).collect();
//! assert_eq!(verdicts, [Verdict::Ack, Verdict::Drop]);
//! app.stop().await.unwrap();
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::{Address, Capabilities, Message, Plan, Verdict};
use serde::Serialize;

use crate::app::{App, RunError, Running};
use crate::memory::MemoryBroker;
use crate::publisher::Publisher;
use crate::settled::{Cause, Settled};

/// One settlement seen by the test kit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The address the delivery arrived on.
    pub address: Address,
    /// Its attempt number.
    pub attempt: u32,
    /// What the handler or policy asked.
    pub verdict: Verdict,
    /// Who decided.
    pub cause: Cause,
    /// What the runtime did.
    pub plan: Plan,
    /// Whether the broker took the settlement.
    pub ok: bool,
}

/// A service running on a memory broker, for tests.
pub struct TestApp {
    broker: MemoryBroker,
    running: Running,
    records: Arc<Mutex<Vec<Record>>>,
    publisher: Publisher,
}

impl TestApp {
    /// Starts the app that `build` makes on a full-featured memory broker.
    ///
    /// # Panics
    /// If the app does not start (a missing state, a refused subscription).
    pub async fn start(build: impl FnOnce(MemoryBroker) -> App) -> Self {
        Self::start_with(MemoryBroker::FULL, build).await
    }

    /// Starts the app that `build` makes on a memory broker with `capabilities`.
    ///
    /// # Panics
    /// If the app does not start (a missing state, a refused subscription).
    pub async fn start_with(
        capabilities: Capabilities,
        build: impl FnOnce(MemoryBroker) -> App,
    ) -> Self {
        match Self::try_start(MemoryBroker::with_capabilities(capabilities), build).await {
            Ok(app) => app,
            Err(error) => panic!("test app did not start: {error}"),
        }
    }

    /// Starts the app that `build` makes on `broker`.
    pub async fn try_start(
        broker: MemoryBroker,
        build: impl FnOnce(MemoryBroker) -> App,
    ) -> Result<Self, RunError> {
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = records.clone();
        let app = build(broker.clone()).after_settle(move |settled: &Settled| {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Record {
                    address: settled.address().clone(),
                    attempt: settled.attempt(),
                    verdict: settled.verdict(),
                    cause: settled.cause().clone(),
                    plan: settled.plan().clone(),
                    ok: settled.is_ok(),
                });
        });
        let publisher = app.publisher();
        let running = app.start().await?;
        Ok(Self {
            broker,
            running,
            records,
            publisher,
        })
    }

    /// Retry copies and held deliveries waiting for their delay in the app.
    pub fn deferred(&self) -> usize {
        self.running.deferred()
    }

    /// The memory broker under the app.
    pub fn broker(&self) -> &MemoryBroker {
        &self.broker
    }

    /// The app's publisher.
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// Publishes `value` to `to` with the default codec.
    ///
    /// # Panics
    /// If it does not encode or the broker is closed.
    pub async fn publish<T: Serialize + ?Sized>(&self, to: &str, value: &T) {
        if let Err(error) = self.publisher.publish(to, value).await {
            panic!("publish to {to} failed: {error}");
        }
    }

    /// Publishes a message as it is (raw bytes, odd headers).
    ///
    /// # Panics
    /// If the broker is closed.
    pub async fn publish_message(&self, to: &str, message: Message) {
        if let Err(error) = self.publisher.publish_message(to, message).await {
            panic!("publish to {to} failed: {error}");
        }
    }

    /// Waits until nothing is ready on a consumed queue, out for delivery, delayed in
    /// the broker or in the process, or being handled.
    pub async fn settled(&self) {
        loop {
            tokio::task::yield_now().await;
            if self.is_settled() {
                // Let a handler that was just woken take its delivery, then look again.
                tokio::task::yield_now().await;
                if self.is_settled() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn is_settled(&self) -> bool {
        self.running.in_flight() == 0
            && self.running.deferred() == 0
            && self
                .broker
                .snapshot()
                .iter()
                .all(|q| q.unsettled == 0 && q.delayed == 0 && (q.ready == 0 || q.consumers == 0))
    }

    /// Every settlement so far, in order.
    pub fn settlements(&self) -> Vec<Record> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The messages waiting at `address` (a dead letter, a reply queue nobody consumes).
    pub fn messages(&self, address: &str) -> Vec<Message> {
        self.broker.messages(address)
    }

    /// Whether the app is stopping (a `fail_fast` happened, or a stop was asked).
    pub fn is_stopping(&self) -> bool {
        self.running.is_stopping()
    }

    /// Stops the app gracefully.
    pub async fn stop(self) -> Result<(), RunError> {
        self.running.stop().await
    }
}

/// A settlement made up for a test of a middleware's [`Visit`](crate::layer::Visit),
/// without a service: the handler's `verdict` at the first attempt, carried out as
/// `plan` and taken by the broker, its handler having run for `elapsed`.
///
/// ```
/// use std::time::Duration;
/// use ruststream::testing;
/// use ruststream_core::{Address, Original, Plan, Settlement, Verdict};
///
/// let plan = Plan { copy: None, original: Original::Settle(Settlement::Accept) };
/// let elapsed = Some(Duration::from_millis(3));
/// let settled = testing::settled(Address::new("orders"), Verdict::Ack, plan, elapsed);
/// assert_eq!((settled.verdict(), settled.elapsed()), (Verdict::Ack, elapsed));
/// assert!(settled.is_ok());
/// ```
pub fn settled(
    address: Address,
    verdict: Verdict,
    plan: Plan,
    elapsed: Option<Duration>,
) -> Settled {
    Settled {
        address,
        attempt: 1,
        verdict,
        cause: Cause::Handler,
        plan,
        result: Ok(()),
        elapsed,
    }
}
