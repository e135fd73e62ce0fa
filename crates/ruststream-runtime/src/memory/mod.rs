//! The in-memory broker: queues with competing consumers and topics with fan-out.
//!
//! A product feature, not a stand-in: services run on it in tests and demos, and a
//! single-process service can use it for real work. It counts deliveries, delays
//! natively, and hands unsettled deliveries back when their consumer goes away. Each
//! capability can be switched off ([`MemoryBroker::with_capabilities`]) so that every
//! branch of the runtime's settlement can be exercised without an external broker.
//!
//! ```
//! use ruststream::memory::MemoryBroker;
//! use ruststream_core::{Broker, Message, Publish};
//!
//! # async fn demo() {
//! let broker = MemoryBroker::new();
//! broker.publisher().publish("orders".into(), Message::new("hi")).await.unwrap();
//! assert_eq!(broker.ready("orders"), 1);
//! # }
//! ```

mod connector;
mod inspect;
mod queue;
mod stream;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ruststream_core::{
    Address, BoxFuture, Broker, Capabilities, Message, Publish, PublishError, PublishErrorKind,
    SubscribeError, SubscribeSpec, Subscription,
};

pub use connector::MemoryConnector;
pub use queue::Snapshot;
use queue::{Place, Queue, Stored};

/// The in-memory broker.
///
/// Each clone is another connection to the same queues and topics: closing one (as a
/// stopping [`App`](crate::App) does) ends that connection's subscriptions and
/// publishing, and leaves the other connections running.
pub struct MemoryBroker {
    inner: Arc<Inner>,
    connection: Arc<Connection>,
}

struct Inner {
    capabilities: Capabilities,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queues: HashMap<Address, Arc<Queue>>,
    topics: HashMap<Address, Vec<Arc<Queue>>>,
}

/// One connection's state: closed or not, and the queues its subscriptions wait on.
#[derive(Default)]
pub(crate) struct Connection {
    closed: AtomicBool,
    queues: Mutex<Vec<Arc<Queue>>>,
}

impl Connection {
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for MemoryBroker {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for MemoryBroker {
    /// Another connection to the same broker.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            connection: Arc::default(),
        }
    }
}

impl MemoryBroker {
    /// Everything the memory broker can do: it settles, requeues, counts and delays.
    /// It does not dead-letter itself unless asked ([`Self::with_capabilities`]).
    pub const FULL: Capabilities = Capabilities {
        settles: true,
        requeues: true,
        counts: true,
        delays: Some(ruststream_core::Capabilities::ANY_DELAY),
        dead_letters: false,
        moves: false,
    };

    /// A broker with [`Self::FULL`] capabilities.
    pub fn new() -> Self {
        Self::with_capabilities(Self::FULL)
    }

    /// A broker that declares (and honours) only `capabilities`.
    ///
    /// With `dead_letters`, a subscription's declared cap and dead letter are applied
    /// by the broker: a requeue at the cap (or any requeue, with a dead letter and no
    /// cap) moves the delivery to the dead letter, and so does a rejection.
    pub fn with_capabilities(capabilities: Capabilities) -> Self {
        Self {
            inner: Arc::new(Inner {
                capabilities,
                state: Mutex::new(State::default()),
            }),
            connection: Arc::default(),
        }
    }

    /// Makes `address` a topic: every subscription to it gets its own copy of each
    /// message published after it subscribed. Other addresses are queues.
    pub fn topic(self, address: impl Into<Address>) -> Self {
        lock(&self.inner.state)
            .topics
            .entry(address.into())
            .or_default();
        self
    }

    fn queue(&self, address: &Address) -> Arc<Queue> {
        lock(&self.inner.state)
            .queues
            .entry(address.clone())
            .or_insert_with(|| Arc::new(Queue::new(address.clone())))
            .clone()
    }

    /// How many messages wait at `address` (ready or delayed, not delivered).
    pub fn ready(&self, address: &str) -> usize {
        let queue = lock(&self.inner.state).queues.get(address).cloned();
        queue.map_or(0, |q| {
            let s = q.snapshot();
            s.ready + s.delayed
        })
    }

    /// The messages waiting at `address`, oldest first (not delivered, not delayed).
    pub fn messages(&self, address: &str) -> Vec<Message> {
        let queue = lock(&self.inner.state).queues.get(address).cloned();
        queue.map_or_else(Vec::new, |q| q.ready_messages())
    }

    /// Counts of every queue, for tests and health pages.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        let state = lock(&self.inner.state);
        let topic_queues = state.topics.values().flatten();
        state
            .queues
            .values()
            .chain(topic_queues)
            .map(|q| q.snapshot())
            .collect()
    }

    /// Whether nothing is waiting, delayed or out for delivery anywhere.
    pub fn is_idle(&self) -> bool {
        self.snapshot().iter().all(Snapshot::is_empty)
    }

    fn closed_error(to: &Address, message: Message) -> PublishError {
        PublishError {
            address: to.to_string(),
            kind: PublishErrorKind::Closed,
            message,
        }
    }

    fn publish_now(&self, to: &Address, message: Message) -> Result<(), PublishError> {
        if self.connection.is_closed() {
            return Err(Self::closed_error(to, message));
        }
        self.deliver(to, message);
        Ok(())
    }

    /// Puts `message` on `to` (every subscription's queue, for a topic).
    fn deliver(&self, to: &Address, message: Message) {
        // Share the payload before it is stored, so that a topic's copies and a
        // consumer's delivery are reference-count increments, not allocations.
        let _shared = message.payload.clone();
        let state = lock(&self.inner.state);
        if let Some(subscribers) = state.topics.get(to) {
            for queue in subscribers {
                queue.push(Stored::new(message.clone()), Place::Back);
            }
            return;
        }
        drop(state);
        self.queue(to).push(Stored::new(message), Place::Back);
    }

    /// Forgets a topic subscription's queue once its subscription ends.
    fn unsubscribe_topic(&self, topic: &Address, queue: &Arc<Queue>) {
        if let Some(subscribers) = lock(&self.inner.state).topics.get_mut(topic) {
            subscribers.retain(|q| !Arc::ptr_eq(q, queue));
        }
    }
}

impl Publish for MemoryBroker {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        let result = self.publish_now(&to, message);
        Box::pin(async move { result })
    }
}

impl Broker for MemoryBroker {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        let result = (|| {
            if self.connection.is_closed() {
                return Err(SubscribeError::Closed);
            }
            // It has no options to configure: a setting meant for another broker.
            if let Some(setting) = spec.options.settings().first() {
                return Err(setting.unknown("memory", &[]));
            }
            let mut state = lock(&self.inner.state);
            let (queue, topic) = if let Some(subscribers) = state.topics.get_mut(&spec.address) {
                let queue = Arc::new(Queue::new(spec.address.clone()));
                subscribers.push(queue.clone());
                (queue, Some(spec.address.clone()))
            } else {
                drop(state);
                (self.queue(&spec.address), None)
            };
            lock(&self.connection.queues).push(queue.clone());
            let caps = self.inner.capabilities;
            Ok(Subscription {
                deliveries: Box::pin(stream::MemoryStream::new(
                    queue,
                    topic,
                    caps,
                    spec.declaration,
                    self.clone_connection(),
                )),
                capabilities: caps,
                attached: ruststream_core::Attached::new(),
            })
        })();
        Box::pin(async move { result })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(self.clone_connection())
    }

    fn facts(&self, _: &SubscribeSpec) -> Option<Capabilities> {
        Some(self.inner.capabilities)
    }

    fn inspect(&self) -> Option<&dyn ruststream_core::Inspect> {
        Some(self)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.connection.closed.store(true, Ordering::Release);
        let queues = std::mem::take(&mut *lock(&self.connection.queues));
        for queue in queues {
            queue.wake_all();
        }
        Box::pin(async {})
    }
}

impl MemoryBroker {
    /// This same connection (not a new one, as `clone` makes).
    fn clone_connection(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            connection: self.connection.clone(),
        }
    }
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker")
            .field("capabilities", &self.inner.capabilities)
            .finish_non_exhaustive()
    }
}
