//! Whether a subscription is attached to its broker: what readiness reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether a subscription is attached to its broker, shared between the adapter (which
/// sets it) and the runtime (which reads it for readiness and metrics).
///
/// A new one is attached. An adapter that loses the subscription's connection calls
/// [`detach`](Attached::detach) (as it yields the [`ConsumeError`](crate::ConsumeError)
/// that reports it) and [`attach`](Attached::attach) once it reads again; each
/// detached-to-attached turn counts as a reconnect. An adapter that never calls them is
/// taken as always attached.
///
/// ```
/// use ruststream_core::Attached;
///
/// let attached = Attached::new();
/// let seen = attached.clone();
/// attached.detach();
/// assert!(!seen.is_attached());
/// attached.attach();
/// assert!(seen.is_attached());
/// assert_eq!(seen.reconnects(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Attached(Arc<State>);

#[derive(Debug)]
struct State {
    detached: AtomicBool,
    reconnects: AtomicU64,
}

impl Default for State {
    fn default() -> Self {
        Self {
            detached: AtomicBool::new(false),
            reconnects: AtomicU64::new(0),
        }
    }
}

impl Attached {
    /// An attached subscription.
    pub fn new() -> Self {
        Self::default()
    }

    /// The subscription lost its connection (or its read fails): not ready.
    pub fn detach(&self) {
        self.0.detached.store(true, Ordering::Release);
    }

    /// The subscription reads again; counts a reconnect if it was detached.
    pub fn attach(&self) {
        if self.0.detached.swap(false, Ordering::AcqRel) {
            self.0.reconnects.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the subscription is attached now.
    pub fn is_attached(&self) -> bool {
        !self.0.detached.load(Ordering::Acquire)
    }

    /// How many times it was attached again after being detached.
    pub fn reconnects(&self) -> u64 {
        self.0.reconnects.load(Ordering::Relaxed)
    }
}
