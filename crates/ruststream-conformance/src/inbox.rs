//! Bounded waits: what handlers and hooks report, received with a deadline.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;

/// How long a check waits for anything that must happen (a delivery, a settlement, a
/// stop) before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// How long a whole check may run before it fails.
pub const CHECK_LIMIT: Duration = Duration::from_secs(120);

/// The sending side of an [`Inbox`], cloned into handlers and hooks.
pub(crate) type Outbox<T> = mpsc::UnboundedSender<T>;

/// Reports from handlers or hooks, each awaited with a deadline.
pub(crate) struct Inbox<T> {
    rx: mpsc::UnboundedReceiver<T>,
    what: &'static str,
}

/// A channel for reports of `what` (for failure messages).
pub(crate) fn inbox<T>(what: &'static str) -> (Outbox<T>, Inbox<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (tx, Inbox { rx, what })
}

impl<T: Debug> Inbox<T> {
    /// The next report; fails the check after [`WAIT`].
    pub(crate) async fn next(&mut self) -> T {
        match tokio::time::timeout(WAIT, self.rx.recv()).await {
            Ok(Some(item)) => item,
            Ok(None) => panic!("no more {}: every sender is gone", self.what),
            Err(_) => panic!("no {} within {WAIT:?}", self.what),
        }
    }

    /// The next report within `limit`, or `None`.
    pub(crate) async fn try_next(&mut self, limit: Duration) -> Option<T> {
        tokio::time::timeout(limit, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// The next report; fails the check after `limit`.
    pub(crate) async fn next_within(&mut self, limit: Duration) -> T {
        match self.try_next(limit).await {
            Some(item) => item,
            None => panic!("no {} within {limit:?}", self.what),
        }
    }

    /// Fails the check if a report arrives within `period`.
    pub(crate) async fn nothing_for(&mut self, period: Duration) {
        if let Ok(Some(item)) = tokio::time::timeout(period, self.rx.recv()).await {
            panic!("unexpected {} within {period:?}: {item:?}", self.what);
        }
    }
}

/// Awaits `future`, failing the check after [`WAIT`].
pub(crate) async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, future).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: not done within {WAIT:?}"),
    }
}
