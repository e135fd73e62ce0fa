//! The router: handlers mounted on subscriptions.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use ruststream_core::Subscription;
use tokio::task::JoinSet;

use crate::concurrency::loops;
use crate::dispatch::{NoLayers, Worker};
use crate::extract::{AppContext, ExtractError};
use crate::handler::Handler;
use crate::layer::{Layered, Stack, Subscribed};
use crate::mount::Mount;
use crate::runtime::Runtime;

/// Handlers mounted on subscriptions.
///
/// Generic where routes are added, stored type-erased: each route keeps its handler's
/// concrete type inside, so handling a delivery costs no dynamic allocation.
///
/// ```
/// use ruststream::{Mount, Router};
///
/// async fn audit(line: String) {
///     println!("{line}");
/// }
///
/// let router = Router::new()
///     .mount("audit", audit)
///     .mount(Mount::new("audit.eu").max_attempts(5), audit);
/// assert_eq!(router.len(), 2);
/// ```
#[derive(Default)]
pub struct Router {
    pub(crate) routes: Vec<(Mount, Box<dyn Endpoint>)>,
}

impl Router {
    /// An empty router.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mounts `handler` on a subscription (an address, or a [`Mount`] with its
    /// declaration).
    pub fn mount<H, M>(mut self, mount: impl Into<Mount>, handler: H) -> Self
    where
        H: Handler<M>,
        M: 'static,
    {
        self.routes.push((
            mount.into(),
            Box::new(Route {
                handler,
                marker: PhantomData,
            }),
        ));
        self
    }

    /// Adds a middleware layer around every route mounted so far (not those mounted
    /// after), around their own layers (see [`Layer`](crate::layer::Layer)).
    pub fn layer(mut self, layer: impl crate::layer::Layer) -> Self {
        let layer: Arc<dyn crate::layer::Layer> = Arc::new(layer);
        for (mount, _) in &mut self.routes {
            mount.layers.wrap(layer.clone());
        }
        self
    }

    /// Adds every route of `other`.
    pub fn merge(mut self, other: Router) -> Self {
        self.routes.extend(other.routes);
        self
    }

    /// How many routes there are.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The mounts, in the order they were added.
    pub fn mounts(&self) -> impl Iterator<Item = &Mount> {
        self.routes.iter().map(|(m, _)| m)
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.mounts()).finish()
    }
}

/// A stored route: runs its handler over a subscription.
pub(crate) trait Endpoint: Send + Sync {
    fn check(&self, app: &AppContext) -> Result<(), ExtractError>;

    /// The handler's payload type, if it takes one.
    #[cfg_attr(not(feature = "asyncapi"), allow(dead_code))]
    fn payload_type(&self) -> Option<(std::any::TypeId, &'static str)>;

    /// The handler's reply type, if it returns a `Reply<T>`.
    #[cfg_attr(not(feature = "asyncapi"), allow(dead_code))]
    fn reply_type(&self) -> Option<(std::any::TypeId, &'static str)>;

    /// Spawns on `tasks` the loops that handle the subscription's deliveries.
    fn serve(
        self: Box<Self>,
        mount: Mount,
        subscription: Subscription,
        runtime: Arc<Runtime>,
        tasks: &mut JoinSet<()>,
    );
}

struct Route<H, M> {
    handler: H,
    marker: PhantomData<fn() -> M>,
}

impl<H: Handler<M>, M: 'static> Endpoint for Route<H, M> {
    fn check(&self, app: &AppContext) -> Result<(), ExtractError> {
        H::check(app)
    }

    fn payload_type(&self) -> Option<(std::any::TypeId, &'static str)> {
        H::payload_type()
    }

    fn reply_type(&self) -> Option<(std::any::TypeId, &'static str)> {
        H::reply_type()
    }

    fn serve(
        self: Box<Self>,
        mount: Mount,
        subscription: Subscription,
        runtime: Arc<Runtime>,
        tasks: &mut JoinSet<()>,
    ) {
        let concurrency = mount.concurrency.clone();
        if mount.layers.0.is_empty() {
            let worker = Worker::new(
                self.handler,
                mount,
                subscription.capabilities,
                runtime,
                NoLayers,
            );
            return loops(worker, subscription.deliveries, concurrency, tasks);
        }
        let subscribed = Subscribed {
            address: mount.address.clone(),
            capabilities: subscription.capabilities,
            declared: mount.declaration.clone(),
            attached: subscription.attached.clone(),
            delayed: runtime.deferred.clone(),
            system: runtime.system,
        };
        let stack = Arc::new(Stack::new(
            mount
                .layers
                .0
                .iter()
                .map(|l| l.layer(&subscribed))
                .collect(),
        ));
        let handler = Layered::new(self.handler, stack.clone());
        let worker = Worker::new(handler, mount, subscription.capabilities, runtime, stack);
        loops(worker, subscription.deliveries, concurrency, tasks)
    }
}
