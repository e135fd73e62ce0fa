//! Seeing inside a running service: readiness, Prometheus metrics (feature
//! `prometheus`), an HTTP endpoint for both (feature `http`), log set-up (feature
//! `logs`) and OpenTelemetry tracing exported over OTLP (feature `otel`).
//!
//! Guide: `docs/observability.md` in the repository.

mod app;
#[cfg(feature = "logs")]
mod logs;
#[cfg(feature = "prometheus")]
mod metrics;
#[cfg(any(feature = "prometheus", feature = "otel"))]
mod names;
#[cfg(feature = "otel")]
mod otlp;
mod readiness;
#[cfg(feature = "http")]
mod server;
#[cfg(feature = "otel")]
mod trace;

#[cfg(feature = "logs")]
pub use logs::{LogFormat, LogsError, init_logs, init_logs_with};
#[cfg(feature = "prometheus")]
pub use metrics::{Metrics, MetricsLayer};
#[cfg(feature = "otel")]
pub use otlp::{TracingError, init_tracing};
pub use readiness::Readiness;
#[cfg(feature = "http")]
pub use server::serve;
#[cfg(feature = "otel")]
pub use trace::Tracing;

/// What a service was asked to expose: its layers, its metrics, its HTTP endpoint.
#[derive(Default)]
pub(crate) struct Observe {
    pub(crate) layers: crate::layer::Layers,
    #[cfg(feature = "prometheus")]
    pub(crate) metrics: Option<Metrics>,
    #[cfg(feature = "http")]
    pub(crate) http: Option<std::net::SocketAddr>,
}

impl Observe {
    /// Adds the app's layers around every mount's own (and its router's).
    pub(crate) fn apply(&self, mount: &mut crate::Mount) {
        for layer in self.layers.0.iter().rev() {
            mount.layers.wrap(layer.clone());
        }
        #[cfg(feature = "prometheus")]
        if let Some(metrics) = &self.metrics {
            mount.layers.wrap(std::sync::Arc::new(metrics.layer()));
        }
    }

    /// Starts the HTTP endpoint if one was asked for.
    #[cfg(feature = "http")]
    pub(crate) async fn start(&self, readiness: &Readiness) -> std::io::Result<Option<Server>> {
        let Some(addr) = self.http else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        tracing::info!(address = %addr, "serving /health, /ready, /metrics");
        let serving = serve(listener, readiness.clone(), self.metrics.clone());
        Ok(Some(Server {
            task: tokio::spawn(serving),
            addr,
        }))
    }

    #[cfg(not(feature = "http"))]
    pub(crate) async fn start(&self, _: &Readiness) -> std::io::Result<Option<Server>> {
        Ok(None)
    }
}

/// A running HTTP endpoint.
pub(crate) struct Server {
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) addr: std::net::SocketAddr,
}
