//! Middleware around publishing.

use std::sync::Arc;

use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError};

/// Makes the middleware of the service's publisher (the one handlers and
/// [`App::publisher`](crate::App::publisher) use; not the runtime's own retry copies and
/// dead letters). Added with [`App::publish_layer`](crate::App::publish_layer).
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
}

/// A [`Publish`] with a middleware around it.
pub(crate) struct Published {
    pub(crate) inner: Arc<dyn Publish>,
    pub(crate) middleware: Arc<dyn PublishMiddleware>,
}

impl Publish for Published {
    fn publish(
        &self,
        to: Address,
        mut message: Message,
    ) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            self.middleware.before(&to, &mut message);
            let result = self.inner.publish(to.clone(), message).await;
            self.middleware.after(&to, &result);
            result
        })
    }
}
