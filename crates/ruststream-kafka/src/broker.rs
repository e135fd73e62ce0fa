//! The broker: one producer for every publish, one consumer per subscription.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::stream;
use rdkafka::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{FutureProducer, Producer};
use ruststream_core::{
    BoxFuture, Broker, Capabilities, Publish, Setting, SubscribeError, SubscribeSpec, Subscription,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::acker::KafkaAcker;
use crate::commit::commit;
use crate::context::{Context, KafkaConsumer};
use crate::error::ConnectError;
use crate::group::Group;
use crate::publisher::KafkaPublisher;
use crate::reader::Reader;
use crate::settings;

/// The largest record the producer sends (librdkafka's `message.max.bytes`, as Kafka's
/// default).
pub const MAX_MESSAGE: usize = 1_000_000;

/// How long librdkafka tries to deliver a record before the publish fails.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The broker under `RUSTSTREAM_KAFKA_URL`, else `kafka://127.0.0.1:9092`.
pub fn default_url() -> String {
    std::env::var("RUSTSTREAM_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".into())
}

/// A Kafka cluster: a mount is a consumer of its topic in a consumer group, publishing
/// goes through one idempotent producer.
#[derive(Clone)]
pub struct KafkaBroker {
    inner: Arc<Inner>,
}

struct Inner {
    servers: String,
    settings: Vec<Setting>,
    producer: FutureProducer,
    closed: watch::Sender<bool>,
    readers: Mutex<Vec<JoinHandle<()>>>,
}

impl KafkaBroker {
    /// Connects to the cluster `url` names (`kafka://host:9092[,host:9092…][?group=…]`)
    /// and checks that it answers.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let url = settings::parse(url)?;
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &url.servers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.max.bytes", MAX_MESSAGE.to_string())
            .set(
                "message.timeout.ms",
                DELIVERY_TIMEOUT.as_millis().to_string(),
            )
            .create()?;
        let probe = producer.clone();
        tokio::task::spawn_blocking(move || {
            probe
                .client()
                .fetch_metadata(None, Duration::from_secs(10))
                .map(drop)
        })
        .await
        .map_err(|_| ConnectError::Url("connecting was cut off".into()))??;
        Ok(Self {
            inner: Arc::new(Inner {
                servers: url.servers,
                settings: url.settings,
                producer,
                closed: watch::Sender::new(false),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    fn consumer(&self, group_id: &str, group: Arc<Group>) -> Result<KafkaConsumer, SubscribeError> {
        ClientConfig::new()
            .set("bootstrap.servers", &self.inner.servers)
            .set("group.id", group_id)
            .set("group.protocol", "classic")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .create_with_context(Context { group })
            .map_err(|error| SubscribeError::Refused(format!("kafka consumer: {error}")))
    }

    async fn open(&self, spec: SubscribeSpec) -> Result<Subscription, SubscribeError> {
        spec.options.check("kafka")?;
        let topic = spec.address.as_str().to_owned();
        let group_id = settings::group(&topic, &self.inner.settings, &spec.options)?;
        self.exists(&topic).await?;
        let group = Arc::new(Group::new(topic.clone()));
        let consumer = Arc::new(self.consumer(&group_id, group.clone())?);
        consumer
            .subscribe(&[&topic])
            .map_err(|error| SubscribeError::Refused(format!("subscribe to {topic}: {error}")))?;
        let (asks, asked) = mpsc::unbounded_channel();
        tokio::spawn(commit(Arc::downgrade(&consumer), topic.into(), asked));
        let acker = Arc::new(KafkaAcker {
            group: group.clone(),
            consumer: Arc::downgrade(&consumer),
            commits: asks,
        });
        let (out, received) = mpsc::channel(spec.in_flight.max(1));
        let attached = group.attached.clone();
        let reader = Reader {
            consumer,
            group,
            acker,
            address: spec.address,
            out,
            closed: self.inner.closed.subscribe(),
        };
        let handle = tokio::spawn(reader.run());
        self.inner
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
        let deliveries = stream::unfold(received, |mut received| async move {
            received.recv().await.map(|item| (item, received))
        });
        Ok(Subscription {
            deliveries: Box::pin(deliveries),
            capabilities: Capabilities::SETTLES,
            attached,
        })
    }

    /// Refuses a topic the cluster does not have: a consumer of it would wait for ever.
    async fn exists(&self, topic: &str) -> Result<(), SubscribeError> {
        let producer = self.inner.producer.clone();
        let name = topic.to_owned();
        let found = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(Some(&name), Duration::from_secs(10))
                .map(|metadata| {
                    metadata.topics().iter().any(|t| {
                        t.name() == name && t.error().is_none() && !t.partitions().is_empty()
                    })
                })
        })
        .await
        .map_err(|_| SubscribeError::Closed)?
        .map_err(|error| SubscribeError::Disconnected(error.to_string()))?;
        if found {
            Ok(())
        } else {
            Err(SubscribeError::BadAddress(format!(
                "no topic {topic} (create it first)"
            )))
        }
    }
}

impl Broker for KafkaBroker {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(self.open(spec))
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(KafkaPublisher {
            producer: self.inner.producer.clone(),
        })
    }

    /// Every subscription commits what is settled and leaves its group; then what the
    /// producer holds is sent.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.closed.send_replace(true);
            let readers = std::mem::take(
                &mut *self
                    .inner
                    .readers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            for reader in readers {
                let _ = reader.await;
            }
            let producer = self.inner.producer.clone();
            let _ =
                tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(10))).await;
        })
    }

    /// Kafka neither takes a record back nor counts deliveries: every form only settles,
    /// and retries are the runtime's copies.
    fn facts(&self, _: &SubscribeSpec) -> Option<Capabilities> {
        Some(Capabilities::SETTLES)
    }
}
