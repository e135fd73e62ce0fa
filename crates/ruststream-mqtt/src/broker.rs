//! The broker: one publishing connection, and one connection (a session of its own) per
//! subscription.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::stream;
use rumqttc::v5::{AsyncClient, Event, Incoming};
use ruststream_core::{
    Address, Attached, Bindings, BoxFuture, Broker, Capabilities, Publish, Replies, SubscribeError,
    SubscribeSpec, Subscription,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::acker::MqttAcker;
use crate::connection;
use crate::error::ConnectError;
use crate::keeper::Targets;
use crate::ledger::Ledger;
use crate::outbox::{self, Outbox};
use crate::publisher::MqttPublisher;
use crate::reader::Reader;
use crate::settings::{self, Mounted, Url};
use crate::topic;
use crate::writer::{self, Written};

/// How long a subscription may take to be acknowledged (SUBACK) before it fails.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(15);

/// The broker under `RUSTSTREAM_MQTT_URL`, else `mqtt://127.0.0.1:1883`.
pub fn default_url() -> String {
    std::env::var("RUSTSTREAM_MQTT_URL").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".into())
}

/// An MQTT 5 broker: each mount a QoS 1 subscription on a persistent session of its own
/// (shared in a group by default), publishing at QoS 1 on one connection.
#[derive(Clone)]
pub struct MqttBroker {
    inner: Arc<Inner>,
}

struct Inner {
    url: Arc<Url>,
    targets: Arc<Targets>,
    outbox: Arc<Outbox>,
    closed: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl MqttBroker {
    /// Connects to the broker `url` names (`mqtt://[user:password@]host[:port][?…]`) and
    /// checks that it answers.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let url = settings::parse(url)?;
        probe(&url).await?;
        let outbox = Arc::new(Outbox::default());
        let closed = watch::Sender::new(false);
        let publishing = tokio::spawn(outbox::run(outbox.clone(), url.clone(), closed.subscribe()));
        Ok(Self {
            inner: Arc::new(Inner {
                url: Arc::new(url),
                targets: Arc::default(),
                outbox,
                closed,
                tasks: Mutex::new(vec![publishing]),
            }),
        })
    }

    /// How many messages the broker reports having dropped after acknowledging them,
    /// since this broker connected: Mosquitto's `$SYS/broker/publish/messages/dropped`
    /// (sessions whose queue passed `max_queued_messages`, 1,000 by default), which it
    /// publishes every `sys_interval` (10 s by default) and which counts every client's
    /// drops, not only this service's. Each rise is also logged as an error. `None` while
    /// the broker has published no such count (not Mosquitto, or `$SYS` closed to this
    /// client).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), ruststream_mqtt::ConnectError> {
    /// let broker = ruststream_mqtt::MqttBroker::connect("mqtt://127.0.0.1:1883").await?;
    /// if let Some(dropped) = broker.dropped_by_broker() {
    ///     assert_eq!(dropped, 0, "the broker lost messages: raise max_queued_messages");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn dropped_by_broker(&self) -> Option<u64> {
        self.inner.outbox.dropped.since_connect()
    }

    fn keep(&self, task: JoinHandle<()>) {
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
    }

    async fn open(&self, spec: SubscribeSpec) -> Result<Subscription, SubscribeError> {
        spec.options.check("mqtt")?;
        let filter = spec.address.as_str();
        if let Some(why) = topic::filter_problem(filter) {
            return Err(SubscribeError::BadAddress(format!("{filter}: {why}")));
        }
        let mounted = settings::mounted(filter, &self.inner.url.settings, &spec.options)?;
        let declaration = &spec.declaration;
        for (what, target) in [
            ("dead letter", &declaration.dead_letter),
            ("retry_to", &declaration.retry_to),
        ] {
            let Some(target) = target else { continue };
            // Every copy to a name that is no topic would fail, and be owed for ever.
            if let Some(why) = topic::name_problem(target.as_str()) {
                return Err(SubscribeError::BadAddress(format!(
                    "{what} {target} of {filter} is not a topic name: {why}"
                )));
            }
            if target.as_str() != filter {
                self.inner.targets.declare(target.as_str());
            }
        }
        self.start(spec.address.clone(), &mounted, true, spec.in_flight)
            .await
    }

    /// Starts a subscription's connection and waits for its SUBACK.
    async fn start(
        &self,
        address: Address,
        mounted: &Mounted,
        persistent: bool,
        in_flight: usize,
    ) -> Result<Subscription, SubscribeError> {
        if *self.inner.closed.borrow() {
            return Err(SubscribeError::Closed);
        }
        let receive_maximum = u16::try_from(in_flight.max(1)).unwrap_or(u16::MAX);
        let expiry = persistent.then_some(mounted.session_expiry);
        let options =
            connection::options(&self.inner.url, &mounted.client_id, expiry, receive_maximum);
        let (releases, released) = mpsc::unbounded_channel();
        let ledger = Arc::new(Ledger::new(releases));
        let written = Arc::new(Written::default());
        let (link, linked) = watch::channel(None::<(u64, AsyncClient)>);
        let (out, received) = mpsc::unbounded_channel();
        let attached = Attached::new();
        let reader = Reader {
            options,
            filter: mounted.filter(address.as_str()),
            address,
            ledger: ledger.clone(),
            acker: Arc::new(MqttAcker { ledger }),
            written: written.clone(),
            link,
            out,
            attached: attached.clone(),
            closed: self.inner.closed.subscribe(),
        };
        let (ready, subscribed) = oneshot::channel();
        // The writer ends with the ledger (once no delivery of it is left).
        tokio::spawn(writer::write(released, linked, written));
        self.keep(tokio::spawn(reader.run(ready)));
        match tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribed).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => return Err(error),
            Ok(Err(_)) => return Err(SubscribeError::Closed),
            Err(_) => {
                return Err(SubscribeError::Disconnected(format!(
                    "no suback within {SUBSCRIBE_TIMEOUT:?}"
                )));
            }
        }
        let deliveries = stream::unfold(received, |mut received| async move {
            received.recv().await.map(|item| (item, received))
        });
        Ok(Subscription {
            deliveries: Box::pin(deliveries),
            capabilities: Capabilities::SETTLES,
            attached,
        })
    }
}

/// Connects once and waits for the CONNACK, so that a broker that is not there, or
/// refuses, fails `connect` instead of every later call.
async fn probe(url: &Url) -> Result<(), ConnectError> {
    let options = connection::options(url, &connection::throwaway_id("probe"), None, 1);
    let (client, mut events) = AsyncClient::new(options, 4);
    let unreachable = |why: String| ConnectError::Unreachable {
        at: format!("{}:{}", url.host, url.port),
        why,
    };
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Incoming::ConnAck(_))) => return Ok(()),
                Ok(_) => {}
                Err(error) => return Err(error.to_string()),
            }
        }
    })
    .await
    .map_err(|_| unreachable("no connack within 10s".into()))?;
    answered.map_err(unreachable)?;
    let _ = client.try_disconnect();
    let _ = tokio::time::timeout(Duration::from_millis(500), events.poll()).await;
    Ok(())
}

impl Broker for MqttBroker {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(self.open(spec))
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(MqttPublisher {
            outbox: self.inner.outbox.clone(),
            url: self.inner.url.clone(),
            targets: self.inner.targets.clone(),
        })
    }

    /// Every subscription writes the PUBACKs released and disconnects, leaving its session
    /// (and what it still holds) to the broker; then the publishing connection waits for
    /// its PUBACKs and disconnects.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.closed.send_replace(true);
            let tasks = std::mem::take(
                &mut *self
                    .inner
                    .tasks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            for task in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
            }
        })
    }

    /// A subscription of the reply topic itself on a clean session of its own: replies are
    /// for this process only.
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            let mounted = Mounted {
                client_id: connection::throwaway_id("replies"),
                group: None,
                session_expiry: Duration::ZERO,
            };
            let subscription = self.start(address.clone(), &mounted, false, 256).await?;
            Ok(Replies {
                address,
                subscription,
            })
        })
    }

    /// MQTT has no negative acknowledgement and counts no deliveries: every form only
    /// settles, and retries and dead letters are the runtime's copies.
    fn facts(&self, _: &SubscribeSpec) -> Option<Capabilities> {
        Some(Capabilities::SETTLES)
    }

    /// Subscriptions are QoS 1.
    fn bindings(&self, _: &SubscribeSpec) -> Bindings {
        crate::bindings::subscription()
    }

    /// Publishes are QoS 1, not retained.
    fn publish_bindings(&self, _: &Address) -> Bindings {
        crate::bindings::publish()
    }
}
