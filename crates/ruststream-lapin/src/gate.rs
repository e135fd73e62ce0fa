//! The gate a channel's settlements pass: counted, and held while a drain closes the
//! prefetch window.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

/// Counts the settlements (`basic.ack`, `basic.nack`, `basic.reject`) a channel lets out,
/// and holds new ones back while it is held.
///
/// A graceful stop needs it: RabbitMQ may send deliveries after `basic.cancel-ok` (a
/// quorum queue does, on 3.x and 4), lapin drops a delivery for a consumer it no longer
/// has, and the channel's close gives it back counted (an attempt spent on a message no
/// handler saw). A drain therefore holds the settlements first: once as many deliveries
/// were received as settlements were let out plus the prefetch, the window is full and
/// RabbitMQ can have nothing in flight, so the cancel races no delivery.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// Settlements let out (counted before their frame is written, so that the count is
    /// never below what RabbitMQ has applied).
    passed: AtomicU64,
    held: AtomicBool,
    released: Notify,
}

impl Gate {
    /// Waits while the gate is held, then counts one settlement out.
    pub(crate) async fn pass(&self) {
        self.pass_many(1).await;
    }

    /// Waits while the gate is held, then counts `n` settlements out (one frame that
    /// settles `n` deliveries).
    pub(crate) async fn pass_many(&self, n: u64) {
        while self.held.load(Ordering::Acquire) {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if !self.held.load(Ordering::Acquire) {
                break;
            }
            released.await;
        }
        self.passed.fetch_add(n, Ordering::AcqRel);
    }

    /// Settlements wait from now on.
    pub(crate) fn hold(&self) {
        self.held.store(true, Ordering::Release);
    }

    /// The settlements held go out, and new ones pass.
    pub(crate) fn release(&self) {
        self.held.store(false, Ordering::Release);
        self.released.notify_waiters();
    }

    /// How many settlements were let out.
    pub(crate) fn passed(&self) -> u64 {
        self.passed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Gate;

    #[tokio::test]
    async fn a_held_gate_counts_nothing_until_released() {
        let gate = Arc::new(Gate::default());
        gate.pass().await;
        assert_eq!(gate.passed(), 1);
        gate.hold();
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.pass().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a held gate lets nothing out");
        assert_eq!(gate.passed(), 1);
        gate.release();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released")
            .expect("no panic");
        assert_eq!(gate.passed(), 2);
    }
}
