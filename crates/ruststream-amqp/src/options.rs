//! Options: per subscription (read from `SubscribeSpec::options`) and per connection.

use std::time::Duration;

use ruststream_rabbitmq::QueueOptions;

use crate::queue::QueueType;

/// The default link credit of a subscription (SPEC §3).
pub const DEFAULT_CREDIT: u32 = 256;

/// How a subscription settles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Settle {
    /// Deliveries stay unsettled until the handler's outcome becomes a disposition (default).
    #[default]
    AtLeastOnce,
    /// The broker settles every delivery when it sends it (pre-settled); nothing can be
    /// settled afterwards (`AckError::Unsupported`).
    AtMostOnce,
}

/// Options of one AMQP subscription, put in `SubscribeSpec::options`.
///
/// ```
/// use ruststream_amqp::{QueueType, Settle, SubscribeOptions};
/// use ruststream_core::SubscribeSpec;
///
/// let mut spec = SubscribeSpec::new("/queues/orders");
/// spec.options.insert(SubscribeOptions::new().credit(64).declare(QueueType::Quorum));
/// # let _ = Settle::AtMostOnce;
/// ```
///
/// Whether the queue counts deliveries and dead-letters by itself is found out from
/// RabbitMQ at subscribe (see [Queues](crate#queues)); [`queue`](Self::queue) states it
/// over what was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscribeOptions {
    pub(crate) credit: u32,
    pub(crate) settle: Settle,
    pub(crate) declare: Option<QueueType>,
    pub(crate) queue: QueueOptions,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl SubscribeOptions {
    /// Credit 256, at-least-once; counting and dead-lettering as the queue does them;
    /// no declaration.
    pub const fn new() -> Self {
        Self {
            credit: DEFAULT_CREDIT,
            settle: Settle::AtLeastOnce,
            declare: None,
            queue: QueueOptions::new(),
        }
    }

    /// The link credit: at most this many deliveries are unsettled (at-least-once) or
    /// waiting to be taken (at-most-once) at a time. At least 1.
    pub const fn credit(mut self, credit: u32) -> Self {
        self.credit = if credit == 0 { 1 } else { credit };
        self
    }

    /// At-least-once (default) or at-most-once.
    pub const fn settle(mut self, settle: Settle) -> Self {
        self.settle = settle;
        self
    }

    /// Makes the queue at subscribe if it does not exist (RabbitMQ 4, through its
    /// management node): durable, of type `kind`, with `x-delivery-limit`
    /// `max_attempts − 1` (quorum) and the mount's dead letter as
    /// `x-dead-letter-exchange` / `x-dead-letter-routing-key`. A queue that exists
    /// already must agree with the declaration, or the subscription is refused with
    /// `SubscribeError::BadOption` naming the difference.
    pub const fn declare(mut self, kind: QueueType) -> Self {
        self.declare = Some(kind);
        self
    }

    /// What the queue does, stated over what was found out at subscribe (RabbitMQ 4,
    /// through its management node: quorum queues count and, with `x-delivery-limit` and a
    /// dead-letter exchange, dead-letter themselves; classic queues and streams do neither;
    /// a broker without RabbitMQ's management node: neither). See [`QueueOptions`] for each
    /// statement; the settings `counts`, `dead_letters` and `delivery_limit` set the same.
    pub const fn queue(mut self, queue: QueueOptions) -> Self {
        self.queue = queue;
        self
    }
}

/// Options of a connection, for [`AmqpBroker::connect_with`](crate::AmqpBroker::connect_with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    pub(crate) idle_timeout: Duration,
    pub(crate) container_id: Option<String>,
    pub(crate) durable: bool,
    pub(crate) backoff_min: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) publish_timeout: Duration,
    #[cfg(feature = "tls")]
    pub(crate) tls: crate::tls::TlsOptions,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30),
            container_id: None,
            durable: true,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            publish_timeout: Duration::from_secs(10),
            #[cfg(feature = "tls")]
            tls: crate::tls::TlsOptions::default(),
        }
    }
}

impl ConnectOptions {
    /// Idle timeout 30 s, durable messages, back-off 100 ms to 5 s, publish timeout 10 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// The idle timeout announced to the broker: a peer silent for longer is dead.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The container id; by default `ruststream-<pid>-<n>`, unique per process and broker.
    pub fn container_id(mut self, id: impl Into<String>) -> Self {
        self.container_id = Some(id.into());
        self
    }

    /// Whether published messages carry `durable = true` in their header section
    /// (default): they survive a broker restart on a durable queue.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Reconnection back-off: starts at `min`, doubles up to `max`, with jitter.
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min.max(Duration::from_millis(1));
        self.backoff_max = max.max(self.backoff_min);
        self
    }

    /// How long a publish waits for the broker (reconnection included) before handing
    /// the message back in a `PublishError`.
    pub fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.publish_timeout = timeout;
        self
    }

    /// For `amqps://`: trusts the CA certificates in the PEM file at `path` as well as
    /// the default roots (a company CA). May be given more than once. The file is read
    /// when connecting: one that cannot be read or holds no PEM certificate fails
    /// [`AmqpBroker::connect_with`](crate::AmqpBroker::connect_with) with
    /// [`ConnectError::Tls`](crate::ConnectError::Tls). Not used for `amqp://`.
    #[cfg(feature = "tls")]
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.ca_files.push(path.into());
        self
    }

    /// For `amqps://`: whether the default roots are trusted (default `true`: the Mozilla
    /// roots of `webpki-roots`, as fe2o3-amqp does). With `false` only the
    /// [`tls_ca_file`](Self::tls_ca_file)s are.
    #[cfg(feature = "tls")]
    pub fn tls_default_roots(mut self, trust: bool) -> Self {
        self.tls.default_roots = trust;
        self
    }

    /// For `amqps://`: connects with this rustls configuration as it is (its roots, a
    /// client certificate for mutual TLS, protocol versions, crypto provider);
    /// [`tls_ca_file`](Self::tls_ca_file) and
    /// [`tls_default_roots`](Self::tls_default_roots) are then not used.
    /// [`rustls`](crate::rustls) is the version this crate uses. Options holding a
    /// configuration compare equal only when they hold the same `Arc`.
    #[cfg(feature = "tls")]
    pub fn tls_client_config(
        mut self,
        config: impl Into<std::sync::Arc<crate::rustls::ClientConfig>>,
    ) -> Self {
        self.tls.client_config = Some(config.into());
        self
    }
}

impl ruststream_core::BrokerOption for SubscribeOptions {
    const BROKER: &'static str = "amqp";
}

impl ruststream_core::BrokerOption for Settle {
    const BROKER: &'static str = "amqp";
}
