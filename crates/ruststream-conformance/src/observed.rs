//! A broker connection whose subscriptions' capabilities are noted as they open.

use std::sync::{Arc, Mutex, PoisonError};

use ruststream_core::{
    BoxFuture, Broker, Capabilities, Publish, SubscribeError, SubscribeSpec, Subscription,
};

/// Passes everything to the broker under test, noting the capabilities of each
/// subscription it opens.
pub(crate) struct Observed {
    inner: Arc<dyn Broker>,
    seen: Arc<Mutex<Vec<Capabilities>>>,
}

impl Observed {
    /// Wraps `inner`; the capabilities go to `seen`.
    pub(crate) fn new(inner: Arc<dyn Broker>, seen: Arc<Mutex<Vec<Capabilities>>>) -> Self {
        Self { inner, seen }
    }
}

/// What `seen` holds now.
pub(crate) fn snapshot(seen: &Mutex<Vec<Capabilities>>) -> Vec<Capabilities> {
    seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

impl Broker for Observed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async move {
            let subscription = self.inner.subscribe(spec).await?;
            self.seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(subscription.capabilities);
            Ok(subscription)
        })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        self.inner.publisher()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }

    fn inspect(&self) -> Option<&dyn ruststream_core::Inspect> {
        self.inner.inspect()
    }
}
