//! The stream of deliveries a subscription hands the runtime: the records its reader
//! read, and under key order those held back or retried, when their turn comes.

use std::pin::Pin;
use std::sync::{Arc, Weak};

use futures_core::Stream;
use futures_util::stream;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;
use ruststream_core::{Acker, Address, Delivery};
use tokio::sync::mpsc::{self, error::TryRecvError};

use crate::context::KafkaConsumer;
use crate::group::{Group, Position};
use crate::order::{Flow, Waits, decode};
use crate::reader::Item;
use crate::record::Record;

/// What turns records into deliveries.
pub(crate) struct Deliveries {
    pub(crate) received: mpsc::Receiver<Item>,
    pub(crate) group: Arc<Group>,
    pub(crate) acker: Arc<dyn Acker>,
    pub(crate) address: Address,
    pub(crate) consumer: Weak<KafkaConsumer>,
    /// Under key order: where a record waits for the due time its note says.
    pub(crate) waits: Option<Waits>,
}

type Out = Result<Delivery, ruststream_core::ConsumeError>;

impl Deliveries {
    /// The stream: ends when the reader does.
    pub(crate) fn stream(self) -> Pin<Box<dyn Stream<Item = Out> + Send>> {
        if self.group.ordered() {
            return Box::pin(stream::unfold(
                (self, false),
                |(mut this, ready_first)| async move {
                    let out = this.ordered(ready_first).await?;
                    Some((out, (this, !ready_first)))
                },
            ));
        }
        Box::pin(stream::unfold(self, |mut this| async move {
            let item = this.received.recv().await?;
            let out = item.map(|record| record.delivery(&this.address, &this.acker, false));
            Some((out, this))
        }))
    }

    /// The next delivery under key order: a record ready (held back, or a retry due) or
    /// one just read whose key is free, taking turns so that neither waits on the other.
    async fn ordered(&mut self, ready_first: bool) -> Option<Out> {
        loop {
            if ready_first && let Some(record) = self.ready() {
                if let Some(delivery) = self.hand(record) {
                    return Some(Ok(delivery));
                }
                continue;
            }
            let item = match self.received.try_recv() {
                Ok(item) => item,
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {
                    if let Some(record) = self.ready() {
                        if let Some(delivery) = self.hand(record) {
                            return Some(Ok(delivery));
                        }
                        continue;
                    }
                    tokio::select! {
                        item = self.received.recv() => item?,
                        () = self.group.woken.notified() => continue,
                    }
                }
            };
            let record = match item {
                Ok(record) => record,
                Err(error) => return Some(Err(error)),
            };
            if self.group.needs_notes(record.at) {
                self.load_notes(record.at).await;
            }
            let (admitted, flow) = self.group.admit(record);
            self.flow(flow);
            if let Some(delivery) = admitted.and_then(|record| self.hand(record)) {
                return Some(Ok(delivery));
            }
        }
    }

    fn ready(&self) -> Option<Record> {
        let (record, flow) = self.group.next_ready();
        self.flow(flow);
        record
    }

    /// The delivery of `record`, unless its note says it is not due yet: it then waits.
    fn hand(&self, mut record: Record) -> Option<Delivery> {
        let wait = self.group.noted(&mut record);
        match &self.waits {
            Some(waits) if !wait.is_zero() => {
                waits.after(wait, record);
                None
            }
            _ => Some(record.delivery(&self.address, &self.acker, true)),
        }
    }

    /// Reads the retry notes the group committed with `at`'s partition before this
    /// assignment (the attempts and due times of the records a stopped, killed or
    /// rebalanced consumer was retrying). One that cannot be read is logged: those
    /// records start again at attempt 1.
    async fn load_notes(&self, at: Position) {
        let Some(consumer) = self.consumer.upgrade() else {
            return;
        };
        let topic = self.group.topic.clone();
        let read = tokio::task::spawn_blocking(move || {
            let mut list = TopicPartitionList::new();
            list.add_partition(&topic, at.partition);
            consumer
                .committed_offsets(list, crate::positions::TIMEOUT)
                .map(|list| {
                    list.find_partition(&topic, at.partition)
                        .map(|element| crate::positions::metadata(&element))
                        .unwrap_or_default()
                })
        })
        .await;
        let notes = match read {
            Ok(Ok(metadata)) => decode(&metadata),
            Ok(Err(error)) => {
                tracing::warn!(topic = %self.group.topic, partition = at.partition, %error,
                    "kafka: cannot read the retries committed; they start again at attempt 1");
                Default::default()
            }
            Err(_) => Default::default(),
        };
        self.group.load_notes(at, notes);
    }

    /// Pauses or resumes a partition whose held-back records crossed their bound: a
    /// paused partition's consumer still polls (it stays in its group) but reads none.
    fn flow(&self, flow: Option<(i32, Flow)>) {
        let (Some((partition, flow)), Some(consumer)) = (flow, self.consumer.upgrade()) else {
            return;
        };
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.group.topic, partition);
        let done = match flow {
            Flow::Pause => consumer.pause(&list),
            Flow::Resume => consumer.resume(&list),
        };
        match (done, flow) {
            (Ok(()), Flow::Pause) => tracing::info!(topic = %self.group.topic, partition,
                "kafka: partition paused: the records held back behind their keys reached the bound"),
            (Ok(()), Flow::Resume) => tracing::info!(topic = %self.group.topic, partition,
                "kafka: partition resumed"),
            (Err(error), _) => tracing::warn!(topic = %self.group.topic, partition, ?flow, %error,
                "kafka: cannot pause or resume a partition"),
        }
    }
}
