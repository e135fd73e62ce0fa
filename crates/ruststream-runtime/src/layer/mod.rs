//! Middleware: layers around the handling of a delivery, per app, router or mount.
//!
//! The shape is tower's: a [`Layer`] is given each subscription once, when the service
//! starts, and makes the [`Middleware`] that runs around that subscription's deliveries.
//! A middleware sees a delivery before its handler (and can settle it without calling
//! the handler), and can wrap the handler's future (to wait for a permit, or to change
//! its outcome). Everything after the handler it sees through a [`Visit`] of the
//! delivery: the one way a layer sees a settlement ([`Visit::settled`]: the verdict, its
//! cause, the plan carried out, whether the broker took it and how long the handler
//! ran), and also what a visit is for besides: a span around each poll of the handler,
//! and the retry copies, delayed copies and dead letters the runtime publishes because
//! of the delivery.
//!
//! A mount without layers is handled by the handler as mounted: nothing of this module
//! is on its path. A mount with layers is handled by [`Layered`], which holds them.

mod layered;
mod limit;
mod publish;
mod stack;
mod visit;

use std::sync::Arc;

use ruststream_core::{Address, Attached, BoxFuture, Capabilities, Delivery};

pub use layered::{Layered, LayeredFuture};
pub use limit::{ConcurrencyLimit, RateLimit};
pub(crate) use publish::Published;
pub use publish::{PublishLayer, PublishMiddleware};
pub use ruststream_core::Republish;
#[doc(hidden)]
pub use stack::Stack;
pub use visit::{Sent, Visit};
pub(crate) use visit::{Sents, Visits};

use crate::outcome::Outcome;

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
/// use ruststream::layer::{Layer, Middleware, Subscribed, Visit};
/// use ruststream::{Delivery, Outcome, Router, Settled};
///
/// /// Counts settlements per subscription and refuses empty payloads.
/// #[derive(Default)]
/// struct Count(Arc<Counter>);
///
/// #[derive(Default)]
/// struct Counter(AtomicU64);
///
/// impl Layer for Count {
///     fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
///         Arc::new(Count(self.0.clone()))
///     }
/// }
///
/// impl Middleware for Count {
///     fn visit(&self, _: &Delivery) -> Option<Arc<dyn Visit>> {
///         // Nothing kept per delivery: the shared counter sees every settlement, and
///         // its `Arc` clone costs no allocation.
///         Some(self.0.clone())
///     }
///     fn before(&self, delivery: &Delivery) -> Option<Outcome> {
///         delivery.payload().is_empty().then(ruststream::drop)
///     }
/// }
///
/// impl Visit for Counter {
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
///
/// A middleware sees each delivery before its handler ([`before`](Middleware::before),
/// which may settle it at once) and may wrap the handler's future
/// ([`around`](Middleware::around)). What happens after the handler it sees through the
/// [`Visit`] it returns from [`visit`](Middleware::visit): [`Visit::settled`] is told of
/// the settlement (the verdict, its cause, the plan, whether the broker took it, and
/// [`elapsed`](crate::Settled::elapsed), how long the handler ran), whether the handler
/// returned, panicked, timed out or never ran. A middleware that keeps nothing per
/// delivery (a metric) returns a clone of one shared `Arc` (itself, or a value inside
/// it): no allocation per delivery (the [`Layer`] example). One that keeps something (a
/// span) returns a visit of its own per delivery (the [`Visit`] example).
pub trait Middleware: Send + Sync + 'static {
    /// Starts following `delivery` until it is settled (called first, before
    /// [`before`](Middleware::before)); the default follows nothing. The visit is told
    /// of the settlement ([`Visit::settled`]), is around each poll of the handler's
    /// future ([`Visit::within`]) and sees the messages the runtime publishes because of
    /// the delivery ([`Visit::publishes`]: retry copies, dead letters).
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
