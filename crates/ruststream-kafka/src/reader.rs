//! A subscription's reader: takes records from the consumer and hands them on as
//! deliveries, until the runtime lets go of the stream or the broker closes.

use ruststream_adapter::Outage;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rdkafka::Message as _;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use ruststream_core::{ConsumeError, Drain};
use tokio::sync::{mpsc, watch};
use tokio::time::Sleep;

use crate::context::{KafkaConsumer, commit_sync};
use crate::group::Group;
use crate::headers::from_kafka;
use crate::record::Record;

/// How often a detached subscription asks whether the cluster answers again (and how
/// long it waits for the answer).
const PROBE: Duration = Duration::from_secs(1);

/// What the reader hands on to the subscription's deliveries.
pub(crate) type Item = Result<Record, ConsumeError>;

/// The reader's parts.
pub(crate) struct Reader {
    pub(crate) consumer: Arc<KafkaConsumer>,
    pub(crate) group: Arc<Group>,
    pub(crate) out: mpsc::Sender<Item>,
    pub(crate) closed: watch::Receiver<bool>,
    pub(crate) drain: Drain,
    /// Dropped when the reader ends: the subscription's delay mover stops with it.
    pub(crate) stopped: watch::Sender<bool>,
}

impl Reader {
    /// Reads until the stream is dropped, the broker closes or a graceful stop asks to
    /// drain, then commits what is settled and closes the consumer (it leaves its
    /// group). A drain ends the stream after what it holds, and waits for the
    /// deliveries being handled to be settled (or the broker to close) before that.
    pub(crate) async fn run(self) {
        let mut closed = self.closed.clone();
        self.drain.accept();
        let mut drained = false;
        // While detached: when to ask the cluster whether it answers again.
        let mut probe: Option<Pin<Box<Sleep>>> = None;
        // An outage is one error for the runtime to log, not one per failed try.
        let mut outage = Outage::default();
        loop {
            if probe.is_none() && !self.group.attached.is_attached() {
                probe = Some(Box::pin(tokio::time::sleep(PROBE)));
            }
            let mut due = false;
            let item = tokio::select! {
                _ = self.out.closed() => break,
                _ = closed.wait_for(|closed| *closed) => break,
                _ = self.drain.requested() => {
                    drained = true;
                    break;
                }
                received = self.consumer.recv() => self.item(received),
                () = async { probe.as_mut().expect("armed").await }, if probe.is_some() => {
                    due = true;
                    None
                }
            };
            if due {
                probe = None;
                self.probe().await;
                continue;
            }
            match item {
                Some(Ok(record)) => {
                    if outage.back() {
                        tracing::info!(topic = %self.group.topic, "kafka: reading again");
                    }
                    self.group.attached.attach();
                    if self.out.send(Ok(record)).await.is_err() {
                        break;
                    }
                }
                Some(Err((error, transport))) => {
                    self.group.attached.detach();
                    let say = !transport || outage.lost();
                    if say && self.out.send(Err(error)).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                None => {}
            }
        }
        let Reader {
            consumer,
            group,
            out,
            stopped,
            ..
        } = self;
        // The delay mover ends with its subscription.
        stopped.send_replace(true);
        drop(out);
        while drained && group.handling() > 0 {
            tokio::select! {
                _ = closed.wait_for(|closed| *closed) => break,
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        // The last reference (the acker keeps a weak one): its drop leaves the group.
        let topic = group.topic.clone();
        crate::close::close(&topic, move || {
            let positions = group.positions();
            if !positions.is_empty() {
                let _ = commit_sync(&*consumer, &group.topic, &positions);
            }
            drop(consumer);
        })
        .await;
    }

    /// Attaches a detached subscription if the cluster answers for its topic: an idle
    /// topic gets no record to attach it again once the cluster is back.
    async fn probe(&self) {
        if self.group.attached.is_attached() {
            return;
        }
        let (consumer, topic) = (self.consumer.clone(), self.group.topic.clone());
        let answers = tokio::task::spawn_blocking(move || {
            consumer
                .fetch_metadata(Some(&topic), PROBE)
                .is_ok_and(|metadata| {
                    metadata
                        .topics()
                        .iter()
                        .any(|t| *t.name() == *topic && t.error().is_none())
                })
        })
        .await
        .unwrap_or(false);
        if answers {
            self.group.attached.attach();
        }
    }

    /// A record read; an error with whether it says the cluster cannot be reached.
    fn item(
        &self,
        received: Result<BorrowedMessage<'_>, KafkaError>,
    ) -> Option<Result<Record, (ConsumeError, bool)>> {
        let record = match received {
            Ok(record) => record,
            Err(error) => {
                let transport = crate::said::is_transport(&error);
                return Some(Err((ConsumeError(format!("kafka: {error}")), transport)));
            }
        };
        let at = self.group.read(record.partition(), record.offset())?;
        let payload = Bytes::copy_from_slice(record.payload().unwrap_or_default());
        let (headers, defect) = match from_kafka(record.headers(), record.key()) {
            Ok(headers) => (headers, None),
            Err(reason) => (Default::default(), Some(reason)),
        };
        Some(Ok(Record {
            at,
            payload,
            headers,
            defect,
            attempt: 1,
        }))
    }
}
