//! A service under test: an `App` on a connection of its own, with its settlements
//! reported through the public `after_settle` hook.

use std::sync::Arc;

use ruststream::testing::Record;
use ruststream::{Address, App, Publisher, RunError, Running, Settled};
use ruststream_core::Broker;

use crate::Harness;
use crate::inbox::{Inbox, WAIT, inbox, within};
use crate::recorder::{Seen, acking};

/// A started [`App`] and what it settled.
pub(crate) struct Service {
    running: Option<Running>,
    /// Every settlement, in order.
    pub(crate) settled: Inbox<Record>,
}

impl Service {
    /// Starts the app `build` makes on a new connection of the harness's broker.
    pub(crate) async fn start(h: &impl Harness, build: impl FnOnce(App) -> App) -> Self {
        Self::start_on(h.broker().await, build).await
    }

    /// Starts the app `build` makes on `broker`.
    pub(crate) async fn start_on(broker: Arc<dyn Broker>, build: impl FnOnce(App) -> App) -> Self {
        let (outbox, settled) = inbox("settlement");
        let app = build(App::with_broker(broker))
            .shutdown_timeout(WAIT)
            .after_settle(move |s: &Settled| {
                let _ = outbox.send(Record {
                    address: s.address().clone(),
                    attempt: s.attempt(),
                    verdict: s.verdict(),
                    cause: s.cause().clone(),
                    plan: s.plan().clone(),
                    ok: s.is_ok(),
                });
            });
        let running = match within("starting the service", app.start()).await {
            Ok(running) => running,
            Err(error) => panic!("the service did not start: {error}"),
        };
        Self {
            running: Some(running),
            settled,
        }
    }

    /// A service that acknowledges everything on `address` and reports what it saw.
    pub(crate) async fn sink(h: &impl Harness, address: &Address) -> (Self, Inbox<Seen>) {
        let (outbox, seen) = inbox("delivery to the sink");
        let service =
            Self::start(h, |app| app.mount(h.mount(address.clone()), acking(outbox))).await;
        (service, seen)
    }

    fn running(&self) -> &Running {
        match &self.running {
            Some(running) => running,
            None => panic!("the service was stopped"),
        }
    }

    /// The service's readiness.
    pub(crate) fn readiness(&self) -> ruststream::observe::Readiness {
        self.running().readiness()
    }

    /// The service's publisher.
    pub(crate) fn publisher(&self) -> Publisher {
        self.running().publisher()
    }

    /// Completes when the service is stopping (a `fail_fast`); fails after [`WAIT`].
    pub(crate) async fn stopping(&self) {
        within("the service stopping by itself", self.running().stopping()).await;
    }

    /// Stops the service gracefully; fails the check if the stop hangs.
    pub(crate) async fn stop(&mut self) -> Result<(), RunError> {
        let running = self.running.take();
        let Some(running) = running else {
            panic!("the service was stopped twice")
        };
        // The grace period is WAIT; closing the broker gets as long again.
        match tokio::time::timeout(WAIT * 2, running.stop()).await {
            Ok(result) => result,
            Err(_) => panic!("stopping the service took over {:?}", WAIT * 2),
        }
    }

    /// Stops the service and fails the check unless it stopped cleanly.
    pub(crate) async fn stop_ok(&mut self) {
        if let Err(error) = self.stop().await {
            panic!("the service did not stop cleanly: {error}");
        }
    }
}
