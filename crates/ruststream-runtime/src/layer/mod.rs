//! Middleware: layers around the handling of a delivery, per app, router or mount.
//!
//! The shape is tower's: a [`Layer`] is given each subscription once, when the service
//! starts, and makes the [`Middleware`] that runs around that subscription's deliveries.
//! A middleware sees a delivery before its handler (and can settle it without calling
//! the handler), can wrap the handler's future (to wait for a permit, or to enter a
//! span around each poll), sees the handler's outcome, and sees the [`Settled`] with its
//! plan once the settlement is over. A middleware that needs something per delivery (a
//! span) follows it with a [`Visit`], which also sees the retry copies, delayed copies
//! and dead letters the runtime publishes because of the delivery.
//!
//! A mount without layers is handled by the handler as mounted: nothing of this module
//! is on its path. A mount with layers is handled by [`Layered`], which holds them.

mod layered;
mod limit;
mod publish;
mod stack;
mod visit;

use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{Address, Attached, BoxFuture, Capabilities, Delivery};

pub use layered::{Layered, LayeredFuture, Timed};
pub use limit::{ConcurrencyLimit, RateLimit};
pub(crate) use publish::Published;
pub use publish::{PublishLayer, PublishMiddleware};
#[doc(hidden)]
pub use stack::Stack;
pub use visit::{Republish, Sent, Visit};
pub(crate) use visit::{Sents, Visits};

use crate::outcome::Outcome;
use crate::settled::Settled;

/// A handler's future as a middleware wraps it.
pub type Handling = BoxFuture<'static, Outcome>;

/// Makes the middleware of each subscription it is added to (tower's `Layer`).
///
/// Added with [`App::layer`](crate::App::layer), [`Router::layer`](crate::Router::layer)
/// or [`Mount::layer`](crate::Mount::layer); the app's layers are outermost, then the
/// router's, then the mount's, each in the order added.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use ruststream::layer::{Layer, Middleware, Subscribed};
/// use ruststream::{Delivery, Outcome, Router, Settled};
///
/// /// Counts settlements per subscription and refuses empty payloads.
/// #[derive(Default)]
/// struct Count(Arc<AtomicU64>);
///
/// impl Layer for Count {
///     fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
///         Arc::new(Count(self.0.clone()))
///     }
/// }
///
/// impl Middleware for Count {
///     fn before(&self, delivery: &Delivery) -> Option<Outcome> {
///         delivery.payload().is_empty().then(ruststream::drop)
///     }
///     fn settled(&self, _: &Settled) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// async fn handle(_: String) {}
/// let router = Router::new().mount("orders", handle).layer(Count::default());
/// # let _ = router;
/// ```
pub trait Layer: Send + Sync + 'static {
    /// The middleware for one subscription, made when the service starts.
    fn layer(&self, subscribed: &Subscribed) -> Arc<dyn Middleware>;
}

/// What runs around the deliveries of one subscription. Every method has a default that
/// does nothing.
pub trait Middleware: Send + Sync + 'static {
    /// Starts following `delivery` until it is settled (called first, before
    /// [`before`](Middleware::before)); the default follows nothing. See [`Visit`]:
    /// what a middleware needs per delivery (a span), and how it sees the messages the
    /// runtime publishes because of the delivery (retry copies, dead letters).
    fn visit(&self, delivery: &Delivery) -> Option<Arc<dyn Visit>> {
        let _ = delivery;
        None
    }

    /// Sees a delivery before its handler (and before its payload is decoded); an
    /// outcome settles it at once, without calling the handler (its cause:
    /// [`Cause::Layer`](crate::settled::Cause::Layer)).
    fn before(&self, delivery: &Delivery) -> Option<Outcome> {
        let _ = delivery;
        None
    }

    /// Whether [`around`](Middleware::around) wraps the handler's future. A middleware
    /// that says `false` (the default) costs the handling no allocation.
    fn wraps(&self) -> bool {
        false
    }

    /// Wraps the handler's future (called only where [`wraps`](Middleware::wraps)):
    /// to wait before it, enter a span around each of its polls, or change its outcome.
    /// The mount's [`timeout`](crate::Mount::timeout) covers the wrapped future.
    fn around(&self, delivery: &Delivery, handling: Handling) -> Handling {
        let _ = delivery;
        handling
    }

    /// Sees the handler's outcome and how long its future ran (not called where the
    /// handler panicked, timed out, its payload did not decode or a middleware settled
    /// the delivery: [`settled`](Middleware::settled) tells those).
    fn after(&self, outcome: &Outcome, elapsed: Duration) {
        let _ = (outcome, elapsed);
    }

    /// Sees the delivery once settled: the verdict, its cause, the plan carried out, and
    /// whether the broker took it.
    fn settled(&self, settled: &Settled) {
        let _ = settled;
    }
}

/// How many retry copies and held deliveries wait for a subscription's deliveries (the
/// runtime's delayed copies answer it).
pub(crate) trait Waiting: Send + Sync {
    fn pending_for(&self, subscription: &Address) -> usize;
}

/// A subscription as its layers are given it when the service starts.
#[derive(Clone)]
pub struct Subscribed {
    pub(crate) address: Address,
    pub(crate) capabilities: Capabilities,
    /// The mount's cap and dead letter.
    #[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
    pub(crate) declared: ruststream_core::Declaration,
    pub(crate) attached: Attached,
    pub(crate) delayed: Arc<dyn Waiting>,
    pub(crate) system: &'static str,
}

impl std::fmt::Debug for Subscribed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribed")
            .field("address", &self.address)
            .field("capabilities", &self.capabilities)
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

impl Subscribed {
    /// The mount's address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The broker's name (`redis`, `amqp`, `memory`): OpenTelemetry's `messaging.system`.
    pub fn system(&self) -> &'static str {
        self.system
    }

    /// What its form can do.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// Whether it is attached to its broker, and how often it reattached.
    pub fn attached(&self) -> &Attached {
        &self.attached
    }

    /// Retry copies and held deliveries of this subscription waiting in the process
    /// for their delay.
    pub fn delayed(&self) -> usize {
        self.delayed.pending_for(&self.address)
    }
}

/// Layers, outermost first.
#[derive(Clone, Default)]
pub(crate) struct Layers(pub(crate) Vec<Arc<dyn Layer>>);

impl Layers {
    /// Adds `layer` around those already there.
    pub(crate) fn wrap(&mut self, layer: Arc<dyn Layer>) {
        self.0.insert(0, layer);
    }
}

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} layer(s)", self.0.len())
    }
}
