//! Readiness and liveness of a running service.

use std::sync::Arc;

use ruststream_core::{Address, Attached};

use crate::dispatch::Runtime;

/// Whether a started service is live and ready: what `/health` and `/ready` answer.
///
/// Ready while every subscription is attached to its broker and no stop was asked for;
/// not ready while a subscription reconnects (its adapter detached it, see
/// [`Attached`]) or once the service stops. Cheap to clone.
///
/// ```
/// # async fn demo() -> Result<(), ruststream::RunError> {
/// use ruststream::{App, memory::MemoryBroker};
///
/// async fn handle(_: String) {}
/// let running = App::new(MemoryBroker::new()).mount("orders", handle).start().await?;
/// let readiness = running.readiness();
/// assert!(readiness.is_ready());
/// running.stop().await?;
/// assert!(!readiness.is_ready());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Readiness {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) subscriptions: Arc<[(Address, Attached)]>,
}

impl Readiness {
    /// Whether every subscription is attached and no stop was asked for.
    pub fn is_ready(&self) -> bool {
        !self.runtime.shutdown.is_triggered() && self.detached().next().is_none()
    }

    /// The subscriptions that are not attached now.
    pub fn detached(&self) -> impl Iterator<Item = &Address> {
        self.subscriptions
            .iter()
            .filter(|(_, attached)| !attached.is_attached())
            .map(|(address, _)| address)
    }

    /// Whether a stop was asked for (or a `fail_fast` happened).
    pub fn is_stopping(&self) -> bool {
        self.runtime.shutdown.is_triggered()
    }
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("ready", &self.is_ready())
            .finish()
    }
}
