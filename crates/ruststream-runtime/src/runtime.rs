//! What every delivery loop of a running service shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream_core::Publish;

use crate::deferred::Deferred;
use crate::extract::AppContext;
use crate::settled::Settled;
use crate::shutdown::Shutdown;

/// A hook the service runs after each settlement ([`App::after_settle`](crate::App::after_settle)).
pub(crate) type AfterSettle = Arc<dyn Fn(&Settled) + Send + Sync>;

/// What every loop of a running service shares.
pub(crate) struct Runtime {
    pub(crate) app: AppContext,
    /// The service's name, on its dead letters.
    pub(crate) service: String,
    /// The broker's name (OpenTelemetry's `messaging.system`).
    pub(crate) system: &'static str,
    pub(crate) publish: Arc<dyn Publish>,
    pub(crate) after_settle: Vec<AfterSettle>,
    pub(crate) shutdown: Shutdown,
    pub(crate) deferred: Arc<Deferred>,
    /// The messages whose copy the broker refused for good, lately.
    pub(crate) refused: crate::refused::Refused,
    pub(crate) in_flight: AtomicUsize,
    /// How many bare settlements the broker lets trail behind a mount, if it declares a
    /// number ([`Concurrency::trailing`](crate::mount::Concurrency::trailing) shares it
    /// among a mount's loops).
    pub(crate) trailing: Option<usize>,
}

impl Runtime {
    /// Waits while the delayed copies are at their bound (see [`Deferred`]); `false`:
    /// the service stops first.
    pub(crate) async fn room(&self) -> bool {
        tokio::select! {
            biased;
            () = self.deferred.wait_room() => true,
            () = self.shutdown.wait() => false,
        }
    }
}

/// One delivery counted in flight ([`Runtime::in_flight`]) for as long as this lives,
/// also where its loop is dropped mid-delivery.
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    #[inline]
    pub(crate) fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
