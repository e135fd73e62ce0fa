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

mod queue;
mod stream;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ruststream_core::{
    Address, BoxFuture, Broker, Capabilities, Message, Publish, PublishError, PublishErrorKind,
    SubscribeError, SubscribeSpec, Subscription,
};

use queue::Queue;
pub use queue::Snapshot;

/// The in-memory broker. Cloning shares it.
#[derive(Clone)]
pub struct MemoryBroker {
    inner: Arc<Inner>,
}

struct Inner {
    capabilities: Capabilities,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queues: HashMap<Address, Arc<Queue>>,
    topics: HashMap<Address, Vec<Arc<Queue>>>,
    closed: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for MemoryBroker {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBroker {
    /// Everything the memory broker can do: it settles, requeues, counts and delays.
    /// It does not dead-letter itself unless asked ([`Self::with_capabilities`]).
    pub const FULL: Capabilities = Capabilities {
        settles: true,
        requeues: true,
        counts: true,
        delays: true,
        dead_letters: false,
    };

    /// A broker with [`Self::FULL`] capabilities.
    pub fn new() -> Self {
        Self::with_capabilities(Self::FULL)
    }

    /// A broker that declares (and honours) only `capabilities`.
    ///
    /// With `dead_letters`, a subscription's declared cap and dead letter are applied
    /// by the broker: a requeue at the cap moves the delivery to the dead letter.
    pub fn with_capabilities(capabilities: Capabilities) -> Self {
        Self {
            inner: Arc::new(Inner {
                capabilities,
                state: Mutex::new(State::default()),
            }),
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

    fn publish_now(&self, to: &Address, message: Message) -> Result<(), PublishError> {
        // Share the payload before it is stored, so that handing it to a consumer is a
        // reference-count increment rather than an allocation on the delivery path.
        let _shared = message.payload.clone();
        let mut state = lock(&self.inner.state);
        if state.closed {
            return Err(PublishError {
                address: to.to_string(),
                kind: PublishErrorKind::Closed,
                message,
            });
        }
        if let Some(subscribers) = state.topics.get(to) {
            for queue in subscribers {
                queue.push(message.clone(), 0);
            }
            return Ok(());
        }
        let queue = state
            .queues
            .entry(to.clone())
            .or_insert_with(|| Arc::new(Queue::new(to.clone())))
            .clone();
        drop(state);
        queue.push(message, 0);
        Ok(())
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
            let mut state = lock(&self.inner.state);
            if state.closed {
                return Err(SubscribeError::Closed);
            }
            let queue = if let Some(subscribers) = state.topics.get_mut(&spec.address) {
                let queue = Arc::new(Queue::new(spec.address.clone()));
                subscribers.push(queue.clone());
                queue
            } else {
                drop(state);
                self.queue(&spec.address)
            };
            let caps = self.inner.capabilities;
            Ok(Subscription {
                deliveries: Box::pin(stream::MemoryStream::new(
                    queue,
                    caps,
                    spec.declaration,
                    self.clone(),
                )),
                capabilities: caps,
            })
        })();
        Box::pin(async move { result })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(self.clone())
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        let queues: Vec<_> = {
            let mut state = lock(&self.inner.state);
            state.closed = true;
            let topic_queues = state.topics.values().flatten().cloned();
            state.queues.values().cloned().chain(topic_queues).collect()
        };
        for queue in queues {
            queue.close();
        }
        Box::pin(async {})
    }
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker")
            .field("capabilities", &self.inner.capabilities)
            .finish_non_exhaustive()
    }
}
