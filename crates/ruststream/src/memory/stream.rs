//! A memory-broker subscription: the stream of deliveries and its acker.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use ruststream_core::{
    AckError, Acker, Capabilities, ConsumeError, Declaration, Delivery, HeaderValue, Message,
    RETRY_COUNT, Settlement, Settling, Tag,
};

use super::MemoryBroker;
use super::queue::{self, Queue, Stored};

pub(super) struct MemoryStream {
    queue: Arc<Queue>,
    consumer: u64,
    acker: Arc<MemoryAcker>,
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
        capabilities: Capabilities,
        declaration: Declaration,
        broker: MemoryBroker,
    ) -> Self {
        let consumer = queue.new_consumer();
        Self {
            acker: Arc::new(MemoryAcker {
                queue: queue.clone(),
                capabilities,
                declaration,
                broker,
            }),
            queue,
            consumer,
        }
    }
}

impl Stream for MemoryStream {
    type Item = Result<Delivery, ConsumeError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let caps = self.acker.capabilities;
        match self.queue.take(self.consumer, caps.settles, cx.waker()) {
            queue::Poll::Closed => Poll::Ready(None),
            queue::Poll::Empty => Poll::Pending,
            queue::Poll::Taken(taken) => {
                let acker: Arc<dyn Acker> = self.acker.clone();
                let delivery = Delivery::new(
                    taken.message.payload,
                    taken.message.headers,
                    self.queue.address().clone(),
                    Tag::Pair(u64::from(taken.slot), u64::from(taken.generation)),
                    acker,
                );
                Poll::Ready(Some(Ok(if caps.counts {
                    delivery.with_broker_attempt(taken.deliveries)
                } else {
                    delivery
                })))
            }
        }
    }
}

impl Drop for MemoryStream {
    fn drop(&mut self) {
        self.queue.release(self.consumer);
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
            self.queue.push(stored.message, stored.deliveries);
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
            return Err(AckError::Refused(
                "no tokio runtime for a delayed requeue".into(),
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
            // Publishing to the memory broker is synchronous and fails only once closed.
            if let Err(error) = self.broker.publish_now(to, message) {
                tracing::warn!(%error, "memory broker: dead letter lost at shutdown");
            }
        }
    }
}

impl Acker for MemoryAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        let caps = self.capabilities;
        if !caps.settles {
            return Settling::done(Err(AckError::Unsupported));
        }
        let Tag::Pair(slot, generation) = tag else {
            return Settling::done(Err(AckError::Refused("not a memory-broker tag".into())));
        };
        let (Ok(slot), Ok(generation)) = (u32::try_from(slot), u32::try_from(generation)) else {
            return Settling::done(Err(AckError::Refused("not a memory-broker tag".into())));
        };
        let supported = match settlement {
            Settlement::Accept | Settlement::Reject | Settlement::Remove => true,
            Settlement::Requeue => caps.requeues,
            Settlement::RequeueAfter(_) => caps.delays,
        };
        if !supported {
            return Settling::done(Err(AckError::Unsupported));
        }
        let Some(stored) = self.queue.finish(slot, generation) else {
            return Settling::done(Err(AckError::Disconnected));
        };
        Settling::done(match settlement {
            Settlement::Accept | Settlement::Remove => Ok(()),
            Settlement::Reject => {
                if caps.dead_letters {
                    self.dead_letter(stored.message);
                }
                Ok(())
            }
            Settlement::Requeue => self.requeue(stored, None),
            Settlement::RequeueAfter(delay) => self.requeue(stored, Some(delay)),
        })
    }
}
