//! The broker: one producer for every publish, one consumer per subscription.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer as _;
use ruststream_core::{
    Address, Bindings, BoxFuture, Broker, Capabilities, Inspect, Publish, Replies, Setting,
    SubscribeError, SubscribeSpec, Subscription,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::acker::KafkaAcker;
use crate::admin;
use crate::cluster::Cluster;
use crate::commit::commit;
use crate::context::{Context, KafkaConsumer};
use crate::delay::{self, Delays};
use crate::deliveries::Deliveries;
use crate::error::ConnectError;
use crate::fetch;
use crate::group::Group;
use crate::order::Waits;
use crate::probe::reach;
use crate::producer::Producer;
use crate::publisher::KafkaPublisher;
use crate::reader::Reader;
use crate::said::Said;
use crate::settings;

/// How many settlements a sequential mount lets trail behind its loop
/// ([`Broker::trailing`]): with 64 (the runtime's default) a mount settled about 78,000
/// records a second on nisshi, bound by 64 per commit round trip; with 1,024 it follows
/// the raw batched loop (`examples/bench.rs`, BENCHMARKS.md).
pub const TRAILING: usize = 1024;

/// How many records a subscription's reader hands ahead of the runtime at most (fewer
/// where the mount holds fewer): the settlements trailing behind a loop hold no record,
/// so this, not [`TRAILING`], bounds the memory of records read and not yet handled
/// (besides librdkafka's own fetch queue).
const BUFFERED: usize = 64;

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
    cluster: Cluster,
    settings: Vec<Setting>,
    producer: Arc<Producer>,
    closed: watch::Sender<bool>,
    readers: Mutex<Vec<JoinHandle<()>>>,
    /// The reply topics this broker made, removed at close.
    replies: Mutex<Vec<String>>,
    /// Every subscription's delay topics, whose movers end at close.
    delays: Mutex<Vec<Arc<Delays>>>,
}

impl KafkaBroker {
    /// Connects to the cluster `url` names
    /// (`kafka[s]://[user:password@]host:9092[,host:9092…][?group=…]`) and checks that
    /// it answers and takes the client. A user in the URL without `sasl_mechanism`
    /// speaks the strongest SASL mechanism the broker offers.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let url = settings::parse(url)?;
        let cluster = reach(url.cluster).await?;
        let producer = Arc::new(Producer::new(&cluster)?);
        Ok(Self {
            inner: Arc::new(Inner {
                cluster,
                settings: url.settings,
                producer,
                closed: watch::Sender::new(false),
                readers: Mutex::new(Vec::new()),
                replies: Mutex::new(Vec::new()),
                delays: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The cluster: its servers, TLS and SASL.
    pub(crate) fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    /// The URL's settings (`?group=…`).
    pub(crate) fn settings(&self) -> &[Setting] {
        &self.inner.settings
    }

    fn consumer(
        &self,
        group_id: &str,
        group: Arc<Group>,
        timeouts: settings::Timeouts,
        in_flight: usize,
    ) -> Result<KafkaConsumer, SubscribeError> {
        let mut config = self.inner.cluster.config();
        config
            .set("group.id", group_id)
            .set("group.protocol", "classic")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        timeouts.apply(&mut config);
        fetch::read_ahead(&mut config, in_flight);
        config
            .create_with_context(Context {
                group,
                said: Said::new("consumer"),
            })
            .map_err(|error| SubscribeError::Refused(format!("kafka consumer: {error}")))
    }

    /// A mount's subscription: its consumer, and its delay topics where its group can
    /// name them (not for a request client's replies, `delaying` false).
    async fn open(
        &self,
        spec: SubscribeSpec,
        delaying: bool,
    ) -> Result<Subscription, SubscribeError> {
        spec.options.check("kafka")?;
        let topic = spec.address.as_str().to_owned();
        let group_id = settings::group(&topic, &self.inner.settings, &spec.options)?;
        let timeouts = settings::timeouts(&self.inner.settings, &spec.options)?;
        let partitions = match (
            self.exists(&topic).await,
            settings::partitions(&self.inner.settings, &spec.options)?,
        ) {
            (Err(SubscribeError::BadAddress(_)), Some(partitions)) => {
                admin::create_partitioned(&self.inner.cluster, &topic, partitions)
                    .await
                    .map_err(|why| {
                        SubscribeError::Refused(format!(
                            "no topic {topic}, and it cannot be made ({why}): create it, or \
                             allow this client to"
                        ))
                    })?;
                tracing::info!(%topic, partitions, "kafka: topic made");
                self.exists(&topic).await?
            }
            (found, _) => found?,
        };
        self.declare_targets(&topic, &spec.declaration).await?;
        let ordered = settings::key_order(&self.inner.settings, &spec.options)?;
        let order = ordered.then_some(spec.in_flight.max(BUFFERED));
        let group = Arc::new(Group::new(topic.clone(), order));
        let consumer =
            Arc::new(self.consumer(&group_id, group.clone(), timeouts, spec.in_flight)?);
        consumer
            .subscribe(&[&topic])
            .map_err(|error| SubscribeError::Refused(format!("subscribe to {topic}: {error}")))?;
        let (asks, asked) = mpsc::unbounded_channel();
        tokio::spawn(commit(
            Arc::downgrade(&consumer),
            topic.as_str().into(),
            asked,
        ));
        let (stopped, stop) = watch::channel(false);
        let delays = if delaying && !ordered && delay::fits(&group_id) {
            let back_to = spec
                .declaration
                .retry_to
                .as_ref()
                .map_or_else(|| topic.clone(), |to| to.as_str().to_owned());
            let mut delays = Delays::new(
                self.inner.cluster.clone(),
                self.inner.producer.clone(),
                group_id.clone(),
                back_to,
                partitions,
                &spec.declaration,
                stop,
                self.inner.closed.subscribe(),
            );
            delays.session_timeout = timeouts.session;
            let delays = Arc::new(delays);
            self.move_parked(&delays).await;
            self.inner
                .delays
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(delays.clone());
            Some(delays)
        } else {
            if delaying && !ordered {
                tracing::warn!(group = %group_id, %topic,
                    "kafka: no delay topics for a group Kafka cannot name topics after; a retry_after is the runtime's copy");
            }
            None
        };
        let capabilities = capabilities(ordered, delays.is_some());
        let waits = ordered.then(|| {
            let group = Arc::downgrade(&group);
            Waits::start(move |record| {
                if let Some(group) = group.upgrade() {
                    group.ready(record);
                }
            })
        });
        let acker: Arc<dyn ruststream_core::Acker> = Arc::new(KafkaAcker {
            group: group.clone(),
            consumer: Arc::downgrade(&consumer),
            commits: asks,
            delays,
            waits: waits.clone(),
        });
        let (out, received) = mpsc::channel(spec.in_flight.clamp(1, BUFFERED));
        let attached = group.attached.clone();
        let deliveries = Deliveries {
            received,
            group: group.clone(),
            acker,
            address: spec.address,
            consumer: Arc::downgrade(&consumer),
            waits,
        };
        let reader = Reader {
            consumer,
            group,
            out,
            closed: self.inner.closed.subscribe(),
            drain: spec.drain,
            stopped,
        };
        let handle = tokio::spawn(reader.run());
        self.inner
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
        Ok(Subscription {
            deliveries: deliveries.stream(),
            capabilities,
            attached,
        })
    }

    /// Starts the mover of `delays` now if the group has delay topics already (copies
    /// a stopped or killed process parked); else it starts with the first copy parked.
    async fn move_parked(&self, delays: &Arc<Delays>) {
        let cluster = self.inner.cluster.clone();
        let listed = tokio::task::spawn_blocking(move || admin::topics(&cluster)).await;
        match listed {
            Ok(Ok(topics)) => {
                if topics
                    .iter()
                    .any(|name| delay::delay_of(&delays.group, name).is_some())
                {
                    delays.start_mover();
                }
            }
            // Not known: start it, it finds what there is.
            _ => delays.start_mover(),
        }
    }

    /// Makes the mount's dead-letter and retry topics where the cluster lacks them, so that
    /// a spent or retried delivery has somewhere to go on a cluster that does not make
    /// topics on first publish (`auto.create.topics.enable=false`, common in
    /// production); one that cannot be made stops the subscription, saying why.
    async fn declare_targets(
        &self,
        topic: &str,
        declaration: &ruststream_core::Declaration,
    ) -> Result<(), SubscribeError> {
        let targets = [&declaration.dead_letter, &declaration.retry_to];
        for target in targets.into_iter().flatten() {
            let name = target.as_str().to_owned();
            if name == topic {
                continue;
            }
            let cluster = self.inner.cluster.clone();
            let asked = name.clone();
            let found = tokio::task::spawn_blocking(move || admin::exists(&cluster, &asked))
                .await
                .map_err(|_| SubscribeError::Closed)?
                .map_err(|error| SubscribeError::Disconnected(error.to_string()))?;
            if found {
                continue;
            }
            let made = if declaration.dead_letter.as_ref() == Some(target) {
                admin::create_dead_letter(&self.inner.cluster, &name, topic).await
            } else {
                admin::create(&self.inner.cluster, &name).await
            };
            match made {
                Ok(()) => tracing::info!(topic = %name, subscription = %topic,
                    "kafka: made the mount's topic (one partition)"),
                // Made meanwhile by another service starting.
                Err(why) if why.contains("TopicAlreadyExists") => {}
                Err(why) => {
                    return Err(SubscribeError::Refused(format!(
                        "the topic {name} that {topic}'s mount sends to does not exist and \
                         cannot be made ({why}): create it, or allow this client to"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Refuses a topic the cluster does not have (a consumer of it would wait for ever);
    /// else how many partitions it has.
    async fn exists(&self, topic: &str) -> Result<i32, SubscribeError> {
        let (cluster, name) = (self.inner.cluster.clone(), topic.to_owned());
        let found = tokio::task::spawn_blocking(move || admin::partitions(&cluster, &name))
            .await
            .map_err(|_| SubscribeError::Closed)?
            .map_err(|error| SubscribeError::Disconnected(error.to_string()))?;
        found.ok_or_else(|| {
            SubscribeError::BadAddress(format!(
                "no topic {topic} (create it first, or let the mount make it: partitions=N)"
            ))
        })
    }
}

/// What a subscription declares: without key order, Kafka neither takes a record back
/// nor counts, so retries are the runtime's copies and a delayed one waits in a delay
/// topic where the group has them (`delays`). Under key order the subscription takes a
/// record back in place (after any delay) and counts its attempts, so the decision
/// retries in place and dead-letters at the cap.
fn capabilities(ordered: bool, delays: bool) -> Capabilities {
    if ordered {
        return Capabilities {
            requeues: true,
            counts: true,
            delays: Some(Capabilities::ANY_DELAY),
            ..Capabilities::SETTLES
        };
    }
    Capabilities {
        delays: delays.then_some(Capabilities::ANY_DELAY),
        ..Capabilities::SETTLES
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
        Box::pin(self.open(spec, true))
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
            let delays = std::mem::take(
                &mut *self
                    .inner
                    .delays
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            for delays in delays {
                delays.finished().await;
            }
            let producer = self.inner.producer.current();
            let _ =
                tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(10))).await;
            let replies = std::mem::take(
                &mut *self
                    .inner
                    .replies
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            admin::delete(&self.inner.cluster, &replies).await;
        })
    }

    /// A topic of its own (one partition), made now and removed when the broker closes.
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            let topic = admin::topic_name(address.as_str());
            admin::create(&self.inner.cluster, &topic)
                .await
                .map_err(|error| {
                    SubscribeError::Refused(format!("reply topic {topic}: {error}"))
                })?;
            self.inner
                .replies
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(topic.clone());
            let mut spec = SubscribeSpec::new(topic.as_str());
            spec.in_flight = 256;
            let subscription = self.open(spec, false).await?;
            Ok(Replies {
                address: Address::new(topic),
                subscription,
            })
        })
    }

    /// A mount delays in topics where Kafka can name them after its group.
    fn durable_delays(&self) -> Option<&'static str> {
        Some(
            "a group whose name has only ASCII letters, digits, '.', '_' and '-' \
             (the Group option): its delay topics are <group>.delay.<ms>",
        )
    }

    /// The dead-letter tools on a topic, through a consumer group of their own
    /// ([`TOOLS_GROUP`](crate::TOOLS_GROUP)).
    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(self)
    }

    /// Every settlement waits for a commit of offsets, one round trip shared by all the
    /// settlements asked meanwhile: a sequential mount lets [`TRAILING`] trail behind
    /// its loop, so that it does not wait on the commit's latency every 64 deliveries.
    fn trailing(&self) -> Option<usize> {
        Some(TRAILING)
    }

    /// Kafka neither takes a record back nor counts deliveries: retries are the
    /// runtime's copies. A delayed retry waits in a delay topic where the mount's group
    /// can name one. Under key order the subscription retries in place and counts.
    fn facts(&self, spec: &SubscribeSpec) -> Option<Capabilities> {
        let group =
            settings::group(spec.address.as_str(), &self.inner.settings, &spec.options).ok()?;
        let ordered = settings::key_order(&self.inner.settings, &spec.options).ok()?;
        Some(capabilities(ordered, delay::fits(&group)))
    }

    /// The topic, and the consumer group the mount reads it in (`ruststream.<topic>`
    /// unless the mount or the URL names one).
    fn bindings(&self, spec: &SubscribeSpec) -> Bindings {
        let topic = spec.address.as_str();
        match settings::group(topic, &self.inner.settings, &spec.options) {
            Ok(group) => crate::bindings::subscription(topic, &group),
            Err(_) => crate::bindings::publish(topic),
        }
    }

    /// The topic.
    fn publish_bindings(&self, to: &Address) -> Bindings {
        crate::bindings::publish(to.as_str())
    }
}
