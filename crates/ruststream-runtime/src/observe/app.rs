//! What an [`App`] offers to observe it: layers, metrics, an HTTP endpoint.

use std::sync::Arc;

use crate::App;
use crate::layer::{Layer, PublishLayer, Published};

impl App {
    /// Adds a middleware layer around every mount of the service (around the layers of
    /// its routers and mounts, and around app layers added before it; see
    /// [`Layer`](crate::layer::Layer)).
    pub fn layer(mut self, layer: impl Layer) -> Self {
        self.observe.layers.wrap(Arc::new(layer));
        self
    }

    /// Adds a middleware around the service's publisher (the one handlers and
    /// [`App::publisher`] hand out), around those added before it.
    pub fn publish_layer(mut self, layer: impl PublishLayer) -> Self {
        let middleware = layer.layer();
        self.app
            .publisher_mut()
            .wrap(|inner| Arc::new(Published { inner, middleware }));
        self
    }

    /// Counts the service's deliveries, settlements and publishes in `metrics` (its
    /// layer around every mount, outside every other layer; its publish layer) and serves them on `/metrics` where
    /// the service has an HTTP endpoint ([`App::http`]).
    #[cfg(feature = "prometheus")]
    pub fn metrics(mut self, metrics: &crate::observe::Metrics) -> Self {
        self.observe.metrics = Some(metrics.clone());
        self.publish_layer(metrics.layer())
    }

    /// Traces the service with OpenTelemetry (feature `otel`): `tracing`'s layer around
    /// every mount (outside the other layers added so far) and its publish layer around
    /// the service's publisher. See [`Tracing`](crate::observe::Tracing).
    #[cfg(feature = "otel")]
    pub fn tracing(self, tracing: &crate::observe::Tracing) -> Self {
        let tracing = tracing.for_system(self.broker.name());
        self.layer(tracing.clone()).publish_layer(tracing)
    }

    /// Serves `/health`, `/ready` and (with [`App::metrics`]) `/metrics` on `addr` while
    /// the service runs. A port that cannot be bound stops the start
    /// ([`RunError::Http`](crate::RunError::Http)).
    #[cfg(feature = "http")]
    pub fn http(mut self, addr: std::net::SocketAddr) -> Self {
        self.observe.http = Some(addr);
        self
    }
}
