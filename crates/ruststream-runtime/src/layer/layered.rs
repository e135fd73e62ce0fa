//! A handler with middleware: what a mount with layers is handled by.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use super::Stack;
use crate::extract::{AppContext, Context, ExtractError};
use crate::handler::Handler;
use crate::outcome::Outcome;

/// A handler and its subscription's middleware (made when the service starts).
pub struct Layered<H> {
    inner: H,
    stack: Arc<Stack>,
}

impl<H: Clone> Clone for Layered<H> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            stack: self.stack.clone(),
        }
    }
}

impl<H> Layered<H> {
    pub(crate) fn new(inner: H, stack: Arc<Stack>) -> Self {
        Self { inner, stack }
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`Layered`] handler: the handler's own, or that future boxed and
    /// wrapped by the middleware that wrap.
    pub struct LayeredFuture<F> {
        #[pin]
        inner: Inner<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = Projected]
    enum Inner<F> {
        // No middleware wraps: the handler's future, in place.
        Plain { #[pin] inner: F },
        // Wrapped.
        Wrapped { inner: super::Handling },
    }
}

impl<F: Future<Output = Outcome>> Future for LayeredFuture<F> {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Outcome> {
        match self.project().inner.project() {
            Projected::Plain { inner } => inner.poll(cx),
            Projected::Wrapped { inner } => inner.as_mut().poll(cx),
        }
    }
}

// Not offered as a fix in the error of a function that is no handler.
#[diagnostic::do_not_recommend]
impl<H: Handler<M>, M: 'static> Handler<M> for Layered<H> {
    type Future = LayeredFuture<H::Future>;

    #[inline]
    fn call(&self, cx: &Context<'_>) -> Result<Self::Future, ExtractError> {
        let inner = self.inner.call(cx)?;
        if !self.stack.wraps() {
            return Ok(LayeredFuture {
                inner: Inner::Plain { inner },
            });
        }
        Ok(LayeredFuture {
            inner: Inner::Wrapped {
                inner: self.stack.around(cx.delivery, Box::pin(inner)),
            },
        })
    }

    fn check(app: &AppContext) -> Result<(), ExtractError> {
        H::check(app)
    }

    fn payload_type() -> Option<(std::any::TypeId, &'static str)> {
        H::payload_type()
    }

    fn reply_type() -> Option<(std::any::TypeId, &'static str)> {
        H::reply_type()
    }
}
