//! The broker a service's AsyncAPI document is made on when its real one does not
//! answer: it knows the URL's scheme and nothing else.

use std::sync::Arc;

use ruststream_core::{
    Address, BoxFuture, Broker, Message, Publish, PublishError, PublishErrorKind, SubscribeError,
    SubscribeSpec, Subscription,
};

/// A broker that is not there: named after the URL's scheme, it subscribes and
/// publishes nothing, and knows no subscription's facts.
pub(super) struct Offline {
    name: &'static str,
}

impl Offline {
    /// The stand-in for the broker of `url`: named after the adapter that answers its
    /// scheme (`unknown` if none in this build).
    pub(super) fn new(url: &str) -> Self {
        let name = crate::connect::connector_of(url).map_or("unknown", |c| c.name());
        Self { name }
    }
}

impl Broker for Offline {
    fn name(&self) -> &'static str {
        self.name
    }

    fn subscribe(&self, _: SubscribeSpec) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async { Err(SubscribeError::Disconnected("no broker".into())) })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(Nowhere)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

struct Nowhere;

impl Publish for Nowhere {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            Err(PublishError {
                address: to.to_string(),
                kind: PublishErrorKind::Disconnected,
                message,
            })
        })
    }
}
