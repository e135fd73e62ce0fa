//! Middleware around publishing.

use std::sync::Arc;

use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

/// Makes the middleware of the service's publisher (the one handlers and
/// [`App::publisher`](crate::App::publisher) use, and replies; not the runtime's own
/// retry copies and dead letters: a [`Middleware`](super::Middleware) sees those, through
/// its [`Visit`](super::Visit) of the delivery they come from). Added with
/// [`App::publish_layer`](crate::App::publish_layer).
pub trait PublishLayer: Send + Sync + 'static {
    /// The middleware, made once when it is added.
    fn layer(&self) -> Arc<dyn PublishMiddleware>;
}

/// What runs around each publish of the service's publisher.
pub trait PublishMiddleware: Send + Sync + 'static {
    /// Sees (and may change) a message before it is published.
    fn before(&self, to: &Address, message: &mut Message) {
        let _ = (to, message);
    }

    /// Sees whether the broker took it.
    fn after(&self, to: &Address, result: &Result<(), PublishError>) {
        let _ = (to, result);
    }

    /// Publishes `message` to `to` through `next` (the publishers inside this one): by
    /// default [`before`](PublishMiddleware::before), the publish,
    /// [`after`](PublishMiddleware::after). A middleware that keeps something across the
    /// publish (a span) does it here, as a tower `Service` wraps the one inside it.
    fn publish<'a>(
        &'a self,
        to: Address,
        mut message: Message,
        next: &'a dyn Publish,
    ) -> BoxFuture<'a, Result<(), PublishError>> {
        Box::pin(async move {
            self.before(&to, &mut message);
            let result = next.publish(to.clone(), message).await;
            self.after(&to, &result);
            result
        })
    }
}

/// A [`Publish`] with a middleware around it.
pub(crate) struct Published {
    pub(crate) inner: Arc<dyn Publish>,
    pub(crate) middleware: Arc<dyn PublishMiddleware>,
}

impl Publish for Published {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        self.middleware.publish(to, message, &*self.inner)
    }

    fn check(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        self.inner.check(to, message)
    }
}
