//! Readiness and liveness of a running service.

use std::sync::Arc;

use ruststream_core::{Address, Attached};

use crate::runtime::Runtime;

/// Whether a started service is live and ready: what `/health` and `/ready` answer.
///
/// Ready while every subscription is attached to its broker, every retry copy and dead
/// letter gets published, and no stop was asked for; not ready while a subscription
/// reconnects (its adapter detached it, see [`Attached`]), while a copy is being tried
/// again because its publish failed (a dead-letter queue that does not exist, a broker
/// away: [`Readiness::failing_copies`]), or once the service stops. Cheap to clone.
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
    /// Whether every subscription is attached, no copy is failing and no stop was
    /// asked for.
    pub fn is_ready(&self) -> bool {
        !self.runtime.shutdown.is_triggered()
            && self.detached().next().is_none()
            && !self.runtime.deferred.is_failing()
    }

    /// The copies whose publish failed and is being tried again, as (subscription,
    /// destination, how many): while there are any, the service is not ready.
    pub fn failing_copies(&self) -> Vec<(Address, Address, usize)> {
        self.runtime.deferred.failing()
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
