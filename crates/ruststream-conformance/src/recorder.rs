//! Handlers that report what they saw of each delivery.

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use ruststream::{
    Attempt, Headers, Outcome, Raw, ack,
    handler::{Extractors, Handler},
};

use crate::inbox::Outbox;

/// What a handler saw of one delivery.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The payload bytes as received.
    pub(crate) payload: Bytes,
    /// The headers as received.
    pub(crate) headers: Headers,
    /// The attempt number (the `Attempt` extractor).
    pub(crate) attempt: u32,
    /// When the handler started.
    pub(crate) at: Instant,
}

impl Seen {
    /// Whether the payload is `bytes`.
    pub(crate) fn is(&self, bytes: &[u8]) -> bool {
        self.payload.as_ref() == bytes
    }
}

/// The handler every check mounts: reports each delivery to `outbox` as soon as it
/// starts, then settles it with what `then` returns (which may wait, or panic).
pub(crate) fn recorder<F, Fut>(
    outbox: Outbox<Seen>,
    then: F,
) -> impl Handler<(Extractors, Attempt, Headers, Raw)>
where
    F: Fn(Seen) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    move |Attempt(attempt): Attempt, headers: Headers, Raw(payload): Raw| {
        let (outbox, then) = (outbox.clone(), then.clone());
        async move {
            let seen = Seen {
                payload,
                headers,
                attempt,
                at: Instant::now(),
            };
            let _ = outbox.send(seen.clone());
            then(seen).await
        }
    }
}

/// A recorder that acknowledges everything: a sink watching an address.
pub(crate) fn acking(outbox: Outbox<Seen>) -> impl Handler<(Extractors, Attempt, Headers, Raw)> {
    recorder(outbox, |_| async { ack() })
}
