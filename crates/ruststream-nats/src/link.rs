//! The state of the connection, as the client's events tell it, shared with every
//! subscription (readiness, the gap a reconnect leaves) and the progress signals.

use std::sync::Arc;
use std::time::Instant;

use ruststream_core::Attached;
use tokio::sync::watch;

/// Where the connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Link {
    /// Connected.
    Up,
    /// Lost, since then; the client reconnects.
    Down(Instant),
    /// The broker was closed: subscriptions end.
    Closed,
}

/// The sending side, set from the client's event callback and by `close`.
pub(crate) type LinkState = Arc<watch::Sender<Link>>;

/// A new state, connected.
pub(crate) fn new() -> LinkState {
    Arc::new(watch::channel(Link::Up).0)
}

/// Records a client event.
pub(crate) fn event(state: &LinkState, event: &async_nats::Event) {
    match event {
        async_nats::Event::Connected => {
            state.send_if_modified(|link| match link {
                Link::Down(since) => {
                    tracing::info!(
                        gap_ms = since.elapsed().as_millis() as u64,
                        "nats: reconnected"
                    );
                    *link = Link::Up;
                    true
                }
                _ => false,
            });
        }
        async_nats::Event::Disconnected => {
            state.send_if_modified(|link| match link {
                Link::Up => {
                    tracing::warn!("nats: connection lost; the client reconnects");
                    *link = Link::Down(Instant::now());
                    true
                }
                _ => false,
            });
        }
        async_nats::Event::Closed => {
            state.send_replace(Link::Closed);
        }
        // The broker's own close drains the client: nothing to warn of.
        async_nats::Event::Draining => tracing::debug!("nats: the client drains"),
        other => tracing::warn!(event = %other, "nats: client event"),
    }
}

/// What a subscription does when the link changes: `Some(text)` to report (it lost the
/// connection), `None` otherwise. Flips `attached`.
pub(crate) fn follow(link: Link, attached: &Attached, subject: &str) -> Option<String> {
    match link {
        Link::Up => {
            if !attached.is_attached() {
                tracing::info!(subject, "nats: subscription resumed");
            }
            attached.attach();
            None
        }
        Link::Down(_) => {
            attached.detach();
            Some(format!(
                "nats: connection lost; subscription to {subject} resumes when the client reconnects"
            ))
        }
        Link::Closed => None,
    }
}
