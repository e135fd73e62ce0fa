//! A request client's replies: one subscription per publisher, shared by every request
//! waiting on it, each matched by its correlation id.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::StreamExt;
use ruststream_core::{
    Address, Broker, CORRELATION_ID, DeliveryStream, Message, Settlement, SubscribeError,
};
use tokio::sync::oneshot;

/// Where a publisher's requests get their replies. Opened on the first request; opened
/// again by the next request if its subscription ended.
pub(crate) struct Inbox {
    broker: Arc<dyn Broker>,
    /// The start of the reply address; the rest is unique to this inbox.
    prefix: String,
    /// Unique to this inbox: starts correlation ids and the reply address.
    token: String,
    next: AtomicU64,
    open: tokio::sync::Mutex<Option<Arc<Waiting>>>,
}

/// An open reply subscription and the requests waiting on it.
pub(crate) struct Waiting {
    pub(crate) address: Address,
    pending: Mutex<HashMap<String, oneshot::Sender<Message>>>,
    ended: AtomicBool,
}

impl Waiting {
    fn pending(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Message>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many requests wait for a reply.
    pub(crate) fn waiting(&self) -> usize {
        self.pending().len()
    }
}

/// A request waiting for its reply; dropping it (a timeout, a cancelled request)
/// forgets the correlation id, so a late reply finds nobody and is dropped.
pub(crate) struct Ticket {
    waiting: Arc<Waiting>,
    pub(crate) id: String,
    pub(crate) reply: oneshot::Receiver<Message>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.waiting.pending().remove(&self.id);
    }
}

impl Ticket {
    pub(crate) fn address(&self) -> &Address {
        &self.waiting.address
    }
}

/// The default start of a reply address.
pub(crate) const REPLY_PREFIX: &str = "ruststream.replies.";

impl Inbox {
    pub(crate) fn new(broker: Arc<dyn Broker>, prefix: String) -> Self {
        let random = RandomState::new().hash_one(std::process::id());
        Self {
            broker,
            prefix,
            token: format!("{}-{:012x}", std::process::id(), random & 0xffff_ffff_ffff),
            next: AtomicU64::new(0),
            open: tokio::sync::Mutex::new(None),
        }
    }

    /// An inbox on the same broker with another address prefix.
    pub(crate) fn with_prefix(&self, prefix: String) -> Self {
        Self::new(self.broker.clone(), prefix)
    }

    /// Requests waiting right now.
    pub(crate) async fn waiting_now(&self) -> usize {
        self.open.lock().await.as_ref().map_or(0, |w| w.waiting())
    }

    /// Registers a new request: its correlation id and where its reply will come.
    pub(crate) async fn ticket(&self) -> Result<Ticket, SubscribeError> {
        let waiting = self.waiting().await?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", self.token);
        let (tx, reply) = oneshot::channel();
        waiting.pending().insert(id.clone(), tx);
        let ticket = Ticket { waiting, id, reply };
        if ticket.waiting.ended.load(Ordering::Acquire) {
            // It ended between the look and the insert: the ticket would wait for ever.
            return Err(SubscribeError::Closed);
        }
        Ok(ticket)
    }

    /// The open reply subscription, opened now if there is none or it ended.
    pub(crate) async fn waiting(&self) -> Result<Arc<Waiting>, SubscribeError> {
        let mut open = self.open.lock().await;
        if let Some(waiting) = open.as_ref()
            && !waiting.ended.load(Ordering::Acquire)
        {
            return Ok(waiting.clone());
        }
        let address = Address::new(format!("{}{}", self.prefix, self.token));
        let replies = self.broker.replies(address).await?;
        tracing::debug!(address = %replies.address, broker = self.broker.name(), "reply subscription open");
        let waiting = Arc::new(Waiting {
            address: replies.address,
            pending: Mutex::new(HashMap::new()),
            ended: AtomicBool::new(false),
        });
        tokio::spawn(receive(waiting.clone(), replies.subscription.deliveries));
        *open = Some(waiting.clone());
        Ok(waiting)
    }
}

/// Hands each reply to the request with its correlation id until the subscription ends.
async fn receive(waiting: Arc<Waiting>, mut deliveries: DeliveryStream) {
    while let Some(next) = deliveries.next().await {
        let delivery = match next {
            Ok(delivery) => delivery,
            Err(error) => {
                tracing::warn!(address = %waiting.address, %error, "reply subscription");
                continue;
            }
        };
        let message = delivery.to_message();
        let id = delivery
            .headers()
            .get_str(CORRELATION_ID)
            .map(str::to_owned);
        // Replies are settled as they arrive: one nobody waits for is of no use later.
        tokio::spawn(async move {
            match delivery.settle(Settlement::Accept).await {
                Ok(()) | Err(ruststream_core::AckError::Unsupported) => {}
                Err(error) => tracing::debug!(%error, "reply not settled"),
            }
        });
        let sender = id.as_ref().and_then(|id| waiting.pending().remove(id));
        match sender {
            Some(sender) => {
                if sender.send(message).is_err() {
                    tracing::debug!(address = %waiting.address, correlation_id = id.as_deref(), "reply arrived as its request gave up: dropped");
                }
            }
            None => {
                tracing::debug!(address = %waiting.address, correlation_id = id.as_deref(), "reply to no waiting request (late, or not ours): dropped");
            }
        }
    }
    waiting.ended.store(true, Ordering::Release);
    // The senders go: every request still waiting learns the subscription ended.
    waiting.pending().clear();
    tracing::debug!(address = %waiting.address, "reply subscription ended");
}
