//! A memory-broker subscription: the stream of deliveries and its acker.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use ruststream_core::{
    AckError, Acker, Address, Capabilities, ConsumeError, Declaration, Delivery, HeaderValue,
    Message, RETRY_COUNT, Settlement, Settling, Tag,
};

use super::MemoryBroker;
use super::queue::{Place, Queue, Stored};

pub(super) struct MemoryStream {
    queue: Arc<Queue>,
    acker: Arc<MemoryAcker>,
    /// The topic, for a topic subscription's own queue.
    topic: Option<Address>,
}

struct MemoryAcker {
    queue: Arc<Queue>,
    capabilities: Capabilities,
    declaration: Declaration,
    broker: MemoryBroker,
}

impl MemoryStream {
    pub(super) fn new(
        queue: Arc<Queue>,
        topic: Option<Address>,
        capabilities: Capabilities,
        declaration: Declaration,
        broker: MemoryBroker,
    ) -> Self {
        queue.add_consumer();
        Self {
            acker: Arc::new(MemoryAcker {
                queue: queue.clone(),
                capabilities,
                declaration,
                broker,
            }),
            queue,
            topic,
        }
    }
}

impl Stream for MemoryStream {
    type Item = Result<Delivery, ConsumeError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.acker.broker.connection.is_closed() {
            return Poll::Ready(None);
        }
        let caps = self.acker.capabilities;
        let Some(stored) = self.queue.take(caps.settles, cx.waker()) else {
            return Poll::Pending;
        };
        let acker: Arc<dyn Acker> = self.acker.clone();
        // The tag carries the delivery count and the place in the queue, so a requeue
        // keeps the count and a delivery handed back keeps its place.
        let tag = Tag::Pair(u64::from(stored.deliveries), stored.seq);
        let delivery = Delivery::new(
            stored.message.payload,
            stored.message.headers,
            self.queue.address().clone(),
            tag,
            acker,
        );
        Poll::Ready(Some(Ok(if caps.counts {
            delivery.with_broker_attempt(stored.deliveries)
        } else {
            delivery
        })))
    }
}

impl Drop for MemoryStream {
    fn drop(&mut self) {
        self.queue.remove_consumer();
        if let Some(topic) = &self.topic {
            self.acker.broker.unsubscribe_topic(topic, &self.queue);
        }
    }
}

impl MemoryAcker {
    fn requeue(&self, mut stored: Stored, delay: Option<Duration>) -> Result<(), AckError> {
        let caps = self.capabilities;
        // A dead letter declared without a cap takes every retry.
        let spent = match self.declaration.max_attempts {
            Some(cap) => stored.deliveries >= cap.get(),
            None => self.declaration.dead_letter.is_some(),
        };
        if caps.dead_letters && spent {
            self.dead_letter(stored.message);
            return Ok(());
        }
        let Some(delay) = delay else {
            self.queue.push(stored, Place::Back);
            return Ok(());
        };
        if !caps.counts {
            // Without a count of its own, each lap of the delay counts in the retry-count
            // header (as a durable delay queue does), so the cap is reached.
            let laps = stored.message.headers.retry_count().saturating_add(1);
            stored
                .message
                .headers
                .insert(RETRY_COUNT, HeaderValue::from(laps));
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.queue.push(stored, Place::Back);
            return Err(AckError::Refused(
                "no tokio runtime for a delayed requeue; requeued now".into(),
            ));
        };
        let queue = self.queue.clone();
        queue.delay_started();
        runtime.spawn(async move {
            tokio::time::sleep(delay).await;
            queue.delay_ended(stored);
        });
        Ok(())
    }

    fn dead_letter(&self, message: Message) {
        if let Some(to) = &self.declaration.dead_letter {
            // Broker-side: not refused when the consumer's own connection is closing.
            self.broker.deliver(to, message);
        }
    }

    fn stored(tag: &Tag, message: Message) -> Stored {
        let (deliveries, seq) = match *tag {
            Tag::Pair(deliveries, seq) => (u32::try_from(deliveries).unwrap_or(u32::MAX), seq),
            _ => (1, 0),
        };
        Stored {
            message,
            deliveries,
            seq,
        }
    }
}

impl Acker for MemoryAcker {
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let caps = self.capabilities;
        if !caps.settles {
            return Settling::done(Err(AckError::Unsupported));
        }
        self.queue.settled();
        let supported = match settlement {
            Settlement::Accept | Settlement::Reject | Settlement::Remove => true,
            Settlement::Requeue => caps.requeues,
            Settlement::RequeueAfter(_) => caps.delays.is_some(),
        };
        if !supported {
            // Not settled after all: the message stays with the broker, in its place.
            self.queue.push(Self::stored(&tag, message), Place::Kept);
            return Settling::done(Err(AckError::Unsupported));
        }
        Settling::done(match settlement {
            Settlement::Accept | Settlement::Remove => Ok(()),
            Settlement::Reject => {
                if caps.dead_letters {
                    self.dead_letter(message);
                }
                Ok(())
            }
            Settlement::Requeue => self.requeue(Self::stored(&tag, message), None),
            Settlement::RequeueAfter(delay) => {
                self.requeue(Self::stored(&tag, message), Some(delay))
            }
        })
    }

    fn abandon(&self, tag: Tag, message: Message) {
        if !self.capabilities.settles {
            return;
        }
        self.queue.settled();
        self.queue.push(Self::stored(&tag, message), Place::Kept);
    }
}
