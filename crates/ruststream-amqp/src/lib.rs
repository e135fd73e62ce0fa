//! AMQP 1.0 adapter for ruststream, over the `fe2o3-amqp` client, made for RabbitMQ 4.
//!
//! [`AmqpBroker::connect`] opens a connection (`amqp://user:pass@host:port[/vhost]`,
//! `amqps://` with the `tls` feature, see [TLS](#tls); SASL PLAIN with credentials,
//! ANONYMOUS without) and implements [`ruststream_core::Broker`]: one receiving link per
//! subscription, one sending link per address published to. Connections are re-opened
//! with back-off when they drop, and every subscription re-attaches and goes on by
//! itself.
//!
//! # Addresses
//!
//! An address starting with `/` is an AMQP node address as it is (RabbitMQ 4:
//! `/queues/NAME`, `/exchanges/NAME/KEY`); a bare name is a queue (`orders` is
//! `/queues/orders`).
//!
//! # Settlement
//!
//! At-least-once (the default) keeps each delivery unsettled until the runtime settles it:
//!
//! | settlement | disposition | the broker |
//! |---|---|---|
//! | `Accept` | `accepted` | the message leaves the queue |
//! | `Reject` | `rejected` | its dead-letter policy decides |
//! | `Requeue` | `modified{delivery-failed, !undeliverable-here}` | back to the queue, `delivery-count` + 1 (quorum queues) |
//! | `Remove` | `accepted` | a copy replaced it: `accepted` does not also dead-letter it |
//! | abandoned | `released` | back to the queue now, not counted; its credit comes back |
//! | none | — | back to the queue when the link detaches |
//!
//! `RequeueAfter` is never asked: AMQP has no delayed redelivery, the runtime copies.
//! With [`Settle::AtMostOnce`] deliveries come pre-settled and every settlement is
//! `AckError::Unsupported`.
//!
//! A settlement is done (its `Settling` completes, `after_settle` hooks run) once its
//! disposition is handed to the session, not when it is queued for the link task; one
//! whose link is lost first is `AckError::Disconnected`. A delivery the runtime drops
//! unsettled (abandons: `fail_fast`, a copy it could not publish, shutdown) is
//! `released`: delivered again now, without using up an attempt of the queue.
//!
//! A graceful stop drains an at-least-once subscription: the link is granted no more
//! credit (a flow with `drain` set: the broker sends what the credit already granted
//! allows, at most the window, then uses the rest up), the runtime handles and settles
//! what arrives, and the stream ends once the link has been quiet for 200 ms (2 s at
//! most). Without it, what a stopping service held went back to the queue when its link
//! detached, and RabbitMQ 4 counted those returns against a quorum queue's
//! `x-delivery-limit`: on a queue that dead-letters itself with a limit of 2, 22 of 24
//! messages no handler had seen were in the dead-letter queue after two stops
//! (conformance `stop_spends_no_attempt`).
//!
//! A delivery's broker attempt is `delivery-count + 1` where the queue counts and the
//! message has a header section; a copy the runtime published (it carries
//! `x-ruststream-retry-count`) is counted by that header alone.
//!
//! # Queues
//!
//! At subscribe the adapter asks RabbitMQ 4's management node (`GET /queues/{name}`,
//! HTTP over AMQP) what the queue is, and declares the capabilities from it: a classic
//! queue does not count `modified` (capped retries are copies), a quorum queue counts,
//! and dead-letters itself when it has `x-delivery-limit` and `x-dead-letter-exchange`;
//! a stream neither counts nor redelivers. A queue that disagrees with the mount (a
//! delivery limit other than `max_attempts − 1` where the broker enforces it, a
//! dead-letter target other than `dead_letter`, a limit that would drop messages before
//! the cap, RabbitMQ 4's own limit of 20 on a quorum queue without `x-delivery-limit`,
//! known from the version in the broker's `open` frame, under a larger cap) is refused
//! with `SubscribeError::BadOption` (a policy's limit is stated with
//! [`QueueOptions::delivery_limit`]); a missing queue is
//! `SubscribeError::BadAddress`. [`SubscribeOptions::declare`] makes a missing queue
//! from the mount's declaration. A broker without the management node gets the
//! defaults (no counting, no dead-lettering), logged; [`SubscribeOptions::queue`] states
//! what the queue does over what was found.
//!
//! ```no_run
//! use ruststream_amqp::{QueueType, SubscribeOptions};
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
//! # Settings from configuration
//!
//! A subscription's options can also come from configuration, as text: the broker
//! URL's query (`amqp://user:pass@host:5672/?declare=quorum&credit=64`: every
//! subscription of the broker) and the mount's settings (the runtime's per-mount table,
//! `RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>`), read in that order (a later key wins). Typed
//! [`SubscribeOptions`] on the mount win over every key; a typed [`Settle`] over
//! `settle`. The keys: `credit` (a whole number, at least 1), `settle` (`at_least_once`,
//! `at_most_once`), `declare` (`classic`, `quorum`, `stream`), `counts` and
//! `dead_letters` (`true`, `false`), `delivery_limit` (a whole number, negative: none;
//! see [`QueueOptions::delivery_limit`]). A key not among them or a value that does not read
//! is an error naming the setting and where it came from: at [`AmqpBroker::connect`]
//! for the URL ([`ConnectError::BadUrl`]), at subscribe for a mount's
//! (`SubscribeError::BadOption`).
//!
//! # Requests
//!
//! A request client's replies ([`Broker::replies`])
//! come on a classic queue named after the client's reply address, made through the
//! management node with `x-expires` of 10 minutes (RabbitMQ deletes it once nobody has
//! read it that long) and read at most once: a reply lost with a connection is the
//! request's timeout. RabbitMQ 4.0 has no dynamic receivers (a queue the broker names);
//! the user needs the right to declare queues.
//!
//! # Browsing (the dead-letter tools)
//!
//! [`AmqpBroker`] offers [`ruststream_core::Inspect`] through `Broker::inspect` for queues
//! on RabbitMQ 4: AMQP 1.0 has no browse for classic and quorum queues, so browsing
//! receives with credit and settles with `released` (not counted as a delivery; a quorum
//! queue, which puts released messages at its back, is received whole so its order stays
//! as it was), and removing settles the messages asked for with `accepted`. Ids are
//! digests of payload and headers. The message count comes from the management node.
//!
//! # Flow control
//!
//! Credit 256 by default ([`SubscribeOptions::credit`]). Each time half of it has been
//! settled (at-most-once: taken from the stream), credit is granted again, counted from
//! the transfers already received: `credit − held`, so the sender never runs dry while
//! the service settles and the service never holds more than `credit` deliveries.
//! Settlements do not wait behind the receive loop; those queued together go out as
//! ranged dispositions.
//!
//! # Reconnection
//!
//! When the connection drops (broker restart, network, idle timeout), every link is
//! re-attached on a new connection with back-off ([`ConnectOptions::backoff`]); the
//! subscription's stream yields one `ConsumeError` and goes on. Deliveries of the lost
//! link come back from the broker; settling one fails with `AckError::Disconnected`. A
//! publish retries until [`ConnectOptions::publish_timeout`], then hands the message back.
//!
//! # Known limits (fe2o3-amqp 0.18)
//!
//! * RabbitMQ 4.3 (4.3.6, Debian's `forky`) sends a quorum queue's consumer more
//!   transfers than its credit once the credit runs out with messages still waiting (a
//!   slow consumer behind a backlog, the default credit included): after its own flow
//!   reports `link-credit` 0 it goes on. fe2o3 refuses that transfer and loses the link
//!   (`transfer-limit-exceeded`); the subscription re-attaches, and what it held comes
//!   back from the broker (handled again). RabbitMQ 4.0 does not: `tests/flow.rs`'s slow
//!   consumers of a quorum queue, at credit 8 and at the default, and its at-most-once
//!   consumer keep to the credit on 4.0.5 and lose the link so on 4.3.6 (credits 16 and
//!   64 too); on 4.3 they check that it still does, so that they fail the day it does
//!   not. On 4.3 with quorum queues, prefer the AMQP 0-9-1 adapter until RabbitMQ fixes
//!   it.
//! * RabbitMQ's management node needs two links of the same name on one session, which
//!   fe2o3 refuses: the management link pair gets a connection of its own (opened at
//!   subscribe, closed after) whose stream gives the receiving link the sending link's
//!   name on the wire (one byte of the attach frame, both ways).
//! * Dead-lettered messages (`x-opt-deaths`, an array of maps) do not decode in fe2o3;
//!   the crate patches that annotation on the wire into an array of binaries (under
//!   `amqps://` too: the patch reads the frames inside TLS). Only the annotation sections
//!   whole in the first transfer frame of a delivery are read: the frames that continue
//!   a message split over several are payload and pass through untouched.
//!
//! # TLS
//!
//! With the `tls` feature, `amqps://host[:port]` (default port 5671) connects over TLS
//! with rustls (ring). The crate does the handshake itself, right after the TCP connect,
//! then speaks AMQP inside it: that is what RabbitMQ's TLS listener expects (it answers
//! the AMQP TLS protocol header that fe2o3-amqp would send first with a TLS alert). The
//! server certificate must name the URL's host (DNS name or IP address, in its
//! subjectAltName).
//!
//! By default the Mozilla roots of `webpki-roots` are trusted, as fe2o3-amqp does. For a
//! server whose certificate a private CA signed (a company CA, a test CA), add it with
//! `ConnectOptions::tls_ca_file` (PEM, may hold several certificates; the default roots
//! stay trusted unless `tls_default_roots(false)`), or hand over a whole rustls
//! configuration with `ConnectOptions::tls_client_config` (a client certificate for
//! mutual TLS, other versions or providers); `ruststream_amqp::rustls` is the rustls
//! version to build it with. A CA file that cannot be read or holds no PEM certificate,
//! and a handshake that fails (a server certificate not trusted), are
//! [`ConnectError::Tls`] from [`AmqpBroker::connect_with`]; reconnections reuse the
//! configuration built then.
//!
//! ```no_run
//! # #[cfg(feature = "tls")]
//! # async fn tls() -> Result<(), Box<dyn std::error::Error>> {
//! use ruststream_amqp::{AmqpBroker, ConnectOptions};
//!
//! let options = ConnectOptions::new().tls_ca_file("/etc/ssl/company-ca.pem");
//! let broker = AmqpBroker::connect_with("amqps://app:secret@rabbit.internal:5671", options).await?;
//! # let _ = broker;
//! # Ok(()) }
//! ```
//!
//! The crate's own TLS tests run against RabbitMQ 4 from `scripts/rabbitmq4.sh` (a TLS
//! listener on 127.0.0.1:5674 with a throwaway CA made by `scripts/tls-certs.sh`):
//! `cargo test -p ruststream-amqp --features tls --test tls`.
//!
//! # Example
//!
//! ```no_run
//! use ruststream_amqp::{AmqpBroker, SubscribeOptions};
//! use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
//! use futures_util::StreamExt;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = AmqpBroker::connect("amqp://guest:guest@127.0.0.1:5673").await?;
//! broker.publisher().publish("orders".into(), Message::new("{}")).await?;
//!
//! let mut spec = SubscribeSpec::new("orders");
//! spec.options.insert(SubscribeOptions::new().credit(64));
//! let mut subscription = broker.subscribe(spec).await?;
//! if let Some(Ok(delivery)) = subscription.deliveries.next().await {
//!     delivery.settle(Settlement::Accept).await?;
//! }
//! broker.close().await;
//! # Ok(()) }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod acker;
mod address;
mod connection;
mod connector;
mod credit;
mod deaths;
mod draining;
mod error;
mod facts;
mod inspect;
mod management;
mod message;
mod options;
mod publisher;
mod queue;
mod receiver;
mod replies;
mod settings;
mod sizes;
#[cfg(feature = "tls")]
mod tls;
mod transport;
mod url;

#[cfg(fuzzing)]
#[doc(hidden)]
pub mod __fuzz;

use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{
    Address, BoxFuture, Broker, Capabilities, Publish, Replies, Setting, SubscribeError,
    SubscribeSpec, Subscription, split_query,
};

pub use address::amqp_address;
pub use connector::AmqpConnector;
pub use error::ConnectError;
pub use options::{ConnectOptions, DEFAULT_CREDIT, Settle, SubscribeOptions};
pub use publisher::AmqpPublisher;
pub use queue::QueueType;
pub use ruststream_rabbitmq::QueueOptions;
/// The rustls this crate does TLS with (feature `tls`), for
/// [`ConnectOptions::tls_client_config`].
#[cfg(feature = "tls")]
pub use tokio_rustls::rustls;

use connection::Connector;
use receiver::LinkSpec;

/// A connection to an AMQP 1.0 broker, implementing [`Broker`].
#[derive(Debug)]
pub struct AmqpBroker {
    connector: Arc<Connector>,
    publisher: Arc<AmqpPublisher>,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Subscription settings from the URL's query, under every mount's own.
    url_settings: Vec<Setting>,
}

impl AmqpBroker {
    /// Connects with default [`ConnectOptions`]; fails if the broker cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(url, ConnectOptions::default()).await
    }

    /// Connects with `options`.
    pub async fn connect_with(url: &str, options: ConnectOptions) -> Result<Self, ConnectError> {
        let (url, url_settings) = split_query(url, |_| false);
        settings::options(&ruststream_core::Options::default(), &url_settings).map_err(
            |e| match e {
                SubscribeError::BadOption(why) => ConnectError::BadUrl(why),
                other => ConnectError::BadUrl(other.to_string()),
            },
        )?;
        let url = url::BrokerUrl::parse(&url)?;
        let connector = Arc::new(Connector::connect(url, options).await?);
        Ok(Self {
            publisher: Arc::new(AmqpPublisher::new(connector.clone())),
            connector,
            tasks: std::sync::Mutex::new(Vec::new()),
            url_settings,
        })
    }

    /// The container id this connection announced.
    pub fn container_id(&self) -> &str {
        self.connector.container_id()
    }

    /// The publisher, as its concrete type.
    pub fn amqp_publisher(&self) -> &Arc<AmqpPublisher> {
        &self.publisher
    }

    async fn open_subscription(&self, spec: SubscribeSpec) -> Result<Subscription, SubscribeError> {
        if self.connector.is_closed() {
            return Err(SubscribeError::Closed);
        }
        let options = settings::options(&spec.options, &self.url_settings)?;
        let source = amqp_address(spec.address.as_str());
        let at_least_once = options.settle == Settle::AtLeastOnce;
        // At most once nothing is counted or redelivered: only a declaration asks.
        let info = if at_least_once || options.declare.is_some() {
            facts::find_out(&self.connector, &source, &options, &spec.declaration).await?
        } else {
            None
        };
        // Without a description: the documented defaults (a queue that does not count).
        let found = options.queue.facts(info.as_ref());
        let counts = at_least_once && found.counts;
        let capabilities = if at_least_once {
            Capabilities {
                settles: true,
                requeues: found.requeues,
                counts,
                delays: None,
                dead_letters: found.dead_letters,
                moves: false,
            }
        } else {
            Capabilities::NONE
        };
        match &info {
            Some(q) => tracing::info!(
                address = %spec.address, kind = %q.kind, delivery_limit = ?q.delivery_limit,
                dead_letter_exchange = ?q.dlx, counts = capabilities.counts,
                dead_letters = capabilities.dead_letters, "amqp: subscribing to queue"
            ),
            None => tracing::info!(
                address = %spec.address, counts = capabilities.counts,
                dead_letters = capabilities.dead_letters,
                "amqp: subscribing (queue not described)"
            ),
        }
        let link = LinkSpec {
            address: spec.address.clone(),
            source,
            settle: options.settle,
            credit: options.credit,
            counts,
            // At least once, a stop drains: a delivery given back unhandled is counted by
            // quorum queues against their delivery limit.
            drain: at_least_once.then(|| {
                spec.drain.accept();
                spec.drain.clone()
            }),
        };
        let (subscription, task) =
            receiver::subscribe(self.connector.clone(), link, capabilities).await?;
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task);
        Ok(subscription)
    }
}

impl Broker for AmqpBroker {
    fn name(&self) -> &'static str {
        "amqp"
    }

    fn durable_delays(&self) -> Option<&'static str> {
        Some(
            "a quorum queue that dead-letters itself (x-delivery-limit and a dead-letter \
             exchange): retry_after then holds the delivery unsettled at the broker",
        )
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

    /// A classic queue named after `address`, made through the management node with
    /// `x-expires` of 10 minutes (RabbitMQ deletes it once nobody has read it for that
    /// long), read at most once: a reply lost with a connection is a request's timeout.
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            if self.connector.is_closed() {
                return Err(SubscribeError::Closed);
            }
            replies::declare(&self.connector, address.as_str()).await?;
            let mut spec = SubscribeSpec::new(address.clone());
            spec.options.insert(
                SubscribeOptions::new()
                    .credit(DEFAULT_CREDIT)
                    .settle(Settle::AtMostOnce),
            );
            let subscription = self.open_subscription(spec).await?;
            Ok(Replies {
                address,
                subscription,
            })
        })
    }

    fn inspect(&self) -> Option<&dyn ruststream_core::Inspect> {
        Some(self)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Links send the settlements queued so far, then close; then the connection.
            self.connector.begin_close();
            let tasks: Vec<_> = std::mem::take(
                &mut *self
                    .tasks
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            for task in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
            }
            self.publisher.close().await;
            self.connector.close().await;
        })
    }
}
