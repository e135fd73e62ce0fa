//! RabbitMQ adapter for ruststream over AMQP 0-9-1, with the `lapin` client.
//!
//! [`LapinBroker::connect`] opens a connection (`amqp://user:pass@host:port/vhost`, the
//! vhost percent-encoded: `%2f` is `/`; `amqps://` with the `tls` feature, trusting the
//! webpki roots and any `ConnectOptions::tls_ca_file`) and implements [`ruststream_core::Broker`]: a
//! channel per subscription (manual acks, a prefetch), confirm channels for publishing.
//! When the connection drops, it is opened again with back-off and every subscription
//! consumes again by itself. RabbitMQ 3.x and 4.x both work.
//!
//! # Addresses
//!
//! A bare name is a queue: consumed from, and published to through the default
//! exchange with the name as routing key. `/queues/NAME` is the same queue;
//! `/exchanges/NAME/KEY` publishes to an exchange with a routing key.
//!
//! # Settlement
//!
//! Deliveries are consumed with manual acks; at most the prefetch (`basic.qos`:
//! [`DEFAULT_PREFETCH`], [`DEFAULT_COUNTED_PREFETCH`] on a queue that counts deliveries,
//! the mount's `in_flight` where that is more, or [`SubscribeOptions::prefetch`]) are
//! unsettled at a time.
//!
//! Acks are coalesced: the acks of a channel waiting at the same moment go out as one
//! `basic.ack multiple=true` over the run of delivery tags they complete (RabbitMQ's
//! cost is mostly per frame, and a quorum queue applies each ack frame through its log).
//! A run never covers a delivery still in hand, nor one whose `basic.nack` or
//! `basic.reject` is not written yet; an ack above such a gap goes out alone. A flush
//! waits up to 1 ms for a run of 64 acks, or of as many as the mount's handlers can
//! leave waiting where that is fewer (`workers(8)`: 7). Each settlement resolves once
//! the frame covering it is written.
//!
//! | settlement | command | the broker |
//! |---|---|---|
//! | `Accept` | `basic.ack` | the message leaves the queue |
//! | `Reject` | `basic.reject(requeue=false)` | the queue's dead-letter exchange decides |
//! | `Requeue` | `basic.reject(requeue=true)` | back to the queue; a quorum queue counts it (a failed delivery) |
//! | `Remove` | `basic.ack` | a copy replaced it: an ack does not also dead-letter it |
//! | abandoned | `basic.nack(requeue=true)` | back now, its prefetch slot free; a quorum queue counts it before RabbitMQ 4.3, not from 4.3 (a return, not a failure) |
//! | `RequeueAfter(d)` | a confirmed copy to the delay queue, then `basic.ack` | the delay queue dead-letters the copy back after `d` |
//!
//! # Delayed retries
//!
//! `retry_after(d)` is durable on classic and quorum queues: the subscription declares
//! native delays (`Capabilities::delays`, up to [`MAX_DELAY`]), so the runtime's decision
//! asks `RequeueAfter(d)`. The adapter publishes a copy of the delivery, with publisher
//! confirms, to the delay queue `QUEUE.delay.MS.quorum`, and acks the original only once
//! the copy is confirmed (a crash in between leaves a duplicate, never a loss). The delay
//! queue is a quorum queue with `x-message-ttl` = `MS`, dead-lettering at least once
//! (`x-dead-letter-strategy`, with `x-overflow: reject-publish`) to the default exchange
//! keyed to `QUEUE`, and `x-expires` (its TTL + 10 minutes; declared
//! again when used after a minute): RabbitMQ moves the copy back after the delay even if
//! the consumer process died. One queue per delay, since RabbitMQ expires messages only
//! at a queue's head; delays are rounded **up** to two significant digits of milliseconds
//! (exact under 100 ms, 1234 ms waits 1300 ms: at most 10 % late, never early).
//!
//! The copy carries `x-ruststream-retry-count` = the attempt it replaces (on a quorum
//! queue, the broker's count + 1; its `x-delivery-count` is not carried over), so it
//! comes back as the next attempt and is counted by that header alone: `max_attempts`
//! and the dead letter cut in at the same attempt as without a delay.
//!
//! Not durable, and why:
//! * a quorum queue that dead-letters itself: a copy would restart the broker's count,
//!   which enforces the cap; the runtime holds the original unsettled for the delay and
//!   then requeues it (a crash returns it at once: early, never lost);
//! * a stream, a mount with another retry address, a queue the adapter could not read
//!   (no configure permission), a queue name too long for its delay queues, and a delay
//!   over [`MAX_DELAY`]: the runtime publishes the copy after the delay, from the process
//!   (lost if the process stops first);
//! * a delay queue that cannot be declared or published to at settlement: the original
//!   is held unsettled for the delay, then requeued (logged; the settlement is an error).
//!
//! A copy due while RabbitMQ stops or crashes stays in its delay queue until `QUEUE`
//! confirmed it (at-least-once dead-lettering), so a restart loses none.
//!
//! AMQP 0-9-1 does not answer acks: a settlement is done (its `Settling` completes)
//! once its frame is written to the connection. A settlement of a delivery whose channel
//! is gone is `AckError::Disconnected`: the broker has already put the delivery back.
//! RabbitMQ applies a quorum queue's acks after the fact: acks written just before the
//! connection closes can still be overtaken by the close, and those messages are
//! delivered again (seen in the bench: up to a few hundred of 10,000 when closing right
//! after the last ack, under load). `close` cancels the consumers, closes their channels
//! and waits 250 ms before closing the connection, which makes that rarer, not
//! impossible: a duplicate, never a loss.
//!
//! A graceful stop drains: the subscription accepts `SubscribeSpec::drain`; once it is
//! requested, settlements are held back until the prefetch window is full or the queue
//! is quiet (200 ms), so that no delivery is in flight to be dropped after cancel-ok and
//! returned counted; then the consumer is cancelled (`basic.cancel`), the held
//! settlements go out, the deliveries already received are yielded and the stream ends,
//! and the channel stays open for their settlements until the broker closes. A subscription dropped without a drain cancels
//! its consumer first and then closes its channel, which returns the unsettled.
//!
//! A delivery's broker attempt comes from `x-delivery-count` where the queue counts
//! (quorum queues: none on the first delivery, attempt 1; `n` is attempt `n + 1`); a copy
//! the runtime published (it carries `x-ruststream-retry-count`) is counted by that
//! header alone, never by both. `x-delivery-count` is read only on a redelivery
//! (`redelivered` set: RabbitMQ writes its count then); on a first delivery it is a
//! producer's and is removed, and the publisher never sends one.
//!
//! # Queues
//!
//! AMQP 0-9-1 cannot read a queue's arguments, but RabbitMQ refuses a `queue.declare`
//! whose arguments differ from the queue's and names the argument and its current value.
//! At subscribe the adapter asks that way (the declaration the mount implies first, then
//! declarations on throw-away channels, each taking one refusal's value, until one is
//! accepted, which changes nothing) and
//! learns the queue's type, `x-delivery-limit` and dead-letter exchange and key:
//!
//! | queue | counts | requeues | dead-letters itself |
//! |---|---|---|---|
//! | classic | no: retries under a cap are copies | yes | no |
//! | quorum | yes (`x-delivery-count`) | yes | with `x-delivery-limit` and `x-dead-letter-exchange` |
//! | stream | no | no | no |
//!
//! A stream is read from its next message on (`x-stream-offset` is not set and no offset
//! is kept: what arrives while nobody reads is not seen); acks only move the prefetch.
//!
//! A quorum queue with a delivery limit and a dead-letter exchange enforces the cap
//! itself: the mount's `max_attempts(n)` must be a limit of `n − 1` (RabbitMQ delivers a
//! message `limit + 1` times) and its `dead_letter` must be where the queue dead-letters
//! to (a queue `Q`: exchange `""` with key `Q`; `/exchanges/X/K`: exchange `X`, key
//! `K`); otherwise subscribing fails with `SubscribeError::BadOption` saying how they
//! differ. RabbitMQ 4 gives a quorum queue without `x-delivery-limit` a limit of 20 of
//! its own (RabbitMQ 3 none): the adapter reads the broker's version and refuses a
//! `max_attempts` above the queue's effective limit + 1, naming the fix (a policy's
//! limit is stated with [`QueueOptions::delivery_limit`]). By default a missing
//! queue is declared as a durable quorum queue from the mount's declaration (with its
//! dead-letter queue, also for an existing queue; `never_declare` checks that it
//! exists, and that a dead-letter exchange does); [`SubscribeOptions::declare`] picks the type (and refuses an
//! existing queue of another), [`SubscribeOptions::never_declare`] makes a missing
//! queue `SubscribeError::BadAddress`. An existing queue is never changed. Policies are not
//! arguments and cannot be seen: [`SubscribeOptions::queue`] says what a policy makes
//! the queue do. A user
//! without the configure permission on the queue cannot probe it: the subscription gets
//! the defaults of a classic queue (logged), unless those options say otherwise.
//!
//! ```no_run
//! use ruststream_lapin::{QueueType, SubscribeOptions};
//! use ruststream_core::{Address, SubscribeSpec};
//! use std::num::NonZeroU32;
//!
//! // A quorum queue that enforces max_attempts(3) and the dead letter itself:
//! // made with x-delivery-limit 2 and the default exchange keyed to "orders-dead".
//! let mut spec = SubscribeSpec::new("orders");
//! spec.declaration.max_attempts = NonZeroU32::new(3);
//! spec.declaration.dead_letter = Some(Address::from("orders-dead"));
//! spec.options.insert(SubscribeOptions::new().declare(QueueType::Quorum));
//! ```
//!
//! # Publishing
//!
//! Every publish is `mandatory` and persistent, on a channel with publisher confirms: it
//! resolves once the broker confirmed it. A `basic.nack`, a message returned unroutable
//! (no queue bound for it) and a missing exchange are `PublishErrorKind::Refused`, with
//! the message handed back. See [`LapinPublisher`].
//!
//! # Settings from configuration
//!
//! The broker URL's query (`amqp://h:5672/%2f?prefetch=64`: every subscription of the
//! broker) and the mount's settings (`RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>`) are read in
//! that order (a later key wins); typed [`SubscribeOptions`] win over every key. Keys:
//! `prefetch` (1 to 65535), `declare` (`classic`, `quorum`, `never`), `counts` and
//! `dead_letters` (`true`, `false`), `delivery_limit` (a whole number, negative: none;
//! see [`QueueOptions::delivery_limit`]). lapin's own query keys (`heartbeat`,
//! `connection_timeout`, `frame_max`, `channel_max`, `auth_mechanism`) stay with lapin.
//! A key not among them or a value that does not read is an error naming it.
//!
//! # Dead-letter tools
//!
//! The broker offers [`Inspect`] (the command line's `dead-letters` tools) on
//! **classic** queues: a browse gets the queue's messages with `basic.get`, holds
//! them unacknowledged, then gives them all back with one `basic.nack(requeue)`; a
//! classic queue puts each back where it was and counts nothing. Removing acknowledges
//! the messages asked for. Ids are a digest of payload and headers. A dead letter
//! RabbitMQ moved itself shows RabbitMQ's `x-death` / `x-first-death-*` headers as the
//! runtime's (where from, why, when, how often), so `replay` sends it back to its
//! queue. A quorum queue is refused: over AMQP 0-9-1 each message returned counts as a delivery (up to RabbitMQ
//! 4.2), so browsing would spend attempts and, at the delivery limit, drop messages;
//! `ruststream-amqp` browses quorum queues on RabbitMQ 4 without counting.
//!
//! # Reconnection
//!
//! A connection or channel error ends the subscription's consumer; the adapter opens a
//! new channel (and a new connection if needed) with back-off
//! ([`ConnectOptions::backoff`]) and consumes again. The subscription's stream yields
//! one `ConsumeError` and goes on; its `Attached` flag is detached in between. A publish
//! retries until [`ConnectOptions::publish_timeout`]. [`ConnectOptions::failover`] adds
//! other nodes of a cluster: a reconnection tries the node last reached, then the others.
//!
//! # Example
//!
//! ```no_run
//! use ruststream_lapin::{LapinBroker, SubscribeOptions};
//! use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
//! use futures_util::StreamExt;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = LapinBroker::connect("amqp://guest:guest@127.0.0.1:5672/%2f").await?;
//! broker.publisher().publish("orders".into(), Message::new("{}")).await?;
//!
//! let mut spec = SubscribeSpec::new("orders");
//! spec.options.insert(SubscribeOptions::new().prefetch(64));
//! let mut subscription = broker.subscribe(spec).await?;
//! if let Some(Ok(delivery)) = subscription.deliveries.next().await {
//!     delivery.settle(Settlement::Accept).await?;
//! }
//! broker.close().await;
//! # Ok(()) }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod acker;
mod acks;
mod address;
mod connection;
mod connector;
mod consumer;
mod deaths;
mod declare;
mod delay;
mod error;
mod gate;
mod inspect;
mod lost;
mod message;
mod options;
mod probe;
mod publisher;
mod queue;
mod retry;
mod server;
mod settings;
mod stream;
mod url;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::{
    Address, BoxFuture, Broker, Capabilities, Inspect, Publish, Replies, Setting, SubscribeError,
    SubscribeSpec, Subscription, split_query,
};

pub use connector::LapinConnector;
pub use delay::MAX_DELAY;
pub use error::ConnectError;
pub use options::{
    ConnectOptions, DEFAULT_COUNTED_PREFETCH, DEFAULT_PREFETCH, MAX_PREFETCH, SubscribeOptions,
};
pub use publisher::{LapinPublisher, PUBLISH_CHANNELS};
pub use queue::QueueType;
pub use ruststream_rabbitmq::QueueOptions;

use acker::Delayed;
use connection::Connector;
use consumer::ConsumeSpec;
use delay::Delays;
use queue::QueueInfo;

/// How long `close` lets the last acks land before closing the connection.
const ACK_GRACE: Duration = Duration::from_millis(250);

/// How long a request client's reply queue outlives its last reader (`x-expires`).
const REPLY_QUEUE_EXPIRES_MS: i32 = 600_000;

/// A connection to RabbitMQ over AMQP 0-9-1, implementing [`Broker`].
#[derive(Debug)]
pub struct LapinBroker {
    connector: Arc<Connector>,
    publisher: Arc<LapinPublisher>,
    /// The delay queues `retry_after` parks copies in.
    delays: Arc<Delays>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Subscription settings from the URL's query, under every mount's own.
    url_settings: Vec<Setting>,
    /// The broker's version (its queues' defaults depend on it).
    version: server::Version,
    /// The dead-letter queues it made classic.
    made: declare::Made,
}

impl LapinBroker {
    /// Connects with default [`ConnectOptions`]; a bad URL, an unreachable broker and
    /// refused credentials are errors.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(url, ConnectOptions::default()).await
    }

    /// Connects with `options`.
    pub async fn connect_with(url: &str, options: ConnectOptions) -> Result<Self, ConnectError> {
        let (url, url_settings) = split_query(url, |key| settings::CLIENT_KEYS.contains(&key));
        settings::options(&ruststream_core::Options::default(), &url_settings)
            .map_err(|e| ConnectError::BadUrl(e.to_string()))?;
        let mut urls = vec![url::BrokerUrl::parse(&url)?];
        for other in &options.failover {
            urls.push(url::BrokerUrl::parse(other)?);
        }
        let version = server::Version::new(urls.iter().map(|u| u.uri.clone()).collect());
        let connector = Arc::new(Connector::connect(urls, options).await?);
        let publisher = Arc::new(LapinPublisher::new(connector.clone()));
        Ok(Self {
            delays: Arc::new(Delays::new(connector.clone(), publisher.clone())),
            publisher,
            connector,
            tasks: Mutex::new(Vec::new()),
            url_settings,
            version,
            made: declare::Made::default(),
        })
    }

    /// The publisher, as its concrete type.
    pub fn lapin_publisher(&self) -> &Arc<LapinPublisher> {
        &self.publisher
    }

    async fn open_subscription(&self, spec: SubscribeSpec) -> Result<Subscription, SubscribeError> {
        if self.connector.is_closed() {
            return Err(SubscribeError::Closed);
        }
        let options = settings::options(&spec.options, &self.url_settings)?;
        let queue =
            address::queue(spec.address.as_str()).map_err(|e| SubscribeError::BadAddress(e.0))?;
        let info = self.find_out(&queue, &options, &spec).await?;
        let found = options.queue.facts(info.as_ref());
        let (counts, dead_letters) = (found.counts, found.dead_letters);
        let delays = retry::delays(
            info.as_ref(),
            dead_letters,
            &queue,
            &spec.address,
            &spec.declaration,
        );
        let capabilities = Capabilities {
            settles: true,
            requeues: found.requeues,
            counts,
            delays: delays.then_some(MAX_DELAY),
            dead_letters,
            moves: false,
        };
        tracing::info!(
            address = %spec.address, kind = ?info.as_ref().map(|q| q.kind.as_str()),
            delivery_limit = ?info.as_ref().and_then(|q| q.delivery_limit),
            counts = capabilities.counts, dead_letters = capabilities.dead_letters,
            delays = capabilities.delays.is_some(),
            "lapin: subscribing"
        );
        let prefetch = options
            .prefetch
            .unwrap_or_else(|| options::default_prefetch(spec.in_flight, counts));
        let delayed = delays.then(|| Delayed {
            delays: self.delays.clone(),
            queue: Arc::from(queue.as_str()),
            count: retry::CopyCount {
                counts,
                max_attempts: spec.declaration.max_attempts,
            },
        });
        let consume = ConsumeSpec {
            address: spec.address.clone(),
            queue,
            prefetch,
            in_flight: spec.in_flight,
            counts,
            delayed,
        };
        let (subscription, task) =
            consumer::subscribe(self.connector.clone(), consume, capabilities, spec.drain).await?;
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
        Ok(subscription)
    }

    /// What the queue is (see [`declare::find_out`]).
    async fn find_out(
        &self,
        queue: &str,
        options: &SubscribeOptions,
        spec: &SubscribeSpec,
    ) -> Result<Option<QueueInfo>, SubscribeError> {
        let connection = self
            .connector
            .connection()
            .await
            .map_err(SubscribeError::Disconnected)?;
        declare::find_out(
            &connection,
            queue,
            options,
            spec,
            (&self.version, &self.made),
        )
        .await
    }
}

impl Broker for LapinBroker {
    fn name(&self) -> &'static str {
        "lapin"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(self.open_subscription(spec))
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        self.publisher.clone()
    }

    /// A classic queue named after `address`, declared with `x-expires` of 10 minutes
    /// (RabbitMQ deletes it once nobody has read it for that long), then consumed as
    /// any queue.
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            if self.connector.is_closed() {
                return Err(SubscribeError::Closed);
            }
            let queue =
                address::queue(address.as_str()).map_err(|e| SubscribeError::BadAddress(e.0))?;
            let connection = self
                .connector
                .connection()
                .await
                .map_err(SubscribeError::Disconnected)?;
            let mut args = lapin::types::FieldTable::default();
            args.insert(
                "x-expires".into(),
                lapin::types::AMQPValue::LongInt(REPLY_QUEUE_EXPIRES_MS),
            );
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| SubscribeError::Disconnected(e.to_string()))?;
            channel
                .queue_declare(
                    queue.as_str().into(),
                    lapin::options::QueueDeclareOptions::default(),
                    args,
                )
                .await
                .map_err(|e| SubscribeError::Refused(format!("reply queue {queue}: {e}")))?;
            let _ = channel.close(200, "declared".into()).await;
            let mut spec = SubscribeSpec::new(address.clone());
            spec.in_flight = 256;
            // Just declared as a classic queue: probing it would only cost refusals.
            spec.options.insert(SubscribeOptions {
                reply_queue: true,
                ..SubscribeOptions::new()
            });
            let subscription = self.open_subscription(spec).await?;
            Ok(Replies {
                address,
                subscription,
            })
        })
    }

    /// Classic queues, browsed by `basic.get` and returned (see "Dead-letter tools").
    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(self)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Consumers are cancelled and their streams end; then the publisher's
            // channel and the connection close (settlements written before go first).
            self.connector.begin_close();
            let tasks: Vec<_> =
                std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
            let consumed = !tasks.is_empty();
            for task in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
            }
            if consumed {
                // RabbitMQ applies a quorum queue's acks after the fact, and a connection
                // closed right after them can overtake them (the messages come again): a
                // moment for the last acks to land.
                tokio::time::sleep(ACK_GRACE).await;
            }
            self.publisher.close().await;
            self.connector.close().await;
        })
    }
}
