//! Options: per subscription (read from `SubscribeSpec::options`) and per connection.

use std::time::Duration;

use ruststream_core::BrokerOption;

use ruststream_rabbitmq::QueueOptions;

use crate::queue::QueueType;

/// The most deliveries a subscription holds unsettled when the mount asks for more
/// (`basic.qos` takes a 16-bit prefetch count).
pub const MAX_PREFETCH: u16 = u16::MAX;

/// The least prefetch a subscription of a queue that does not count deliveries (a
/// classic queue) asks for unless [`SubscribeOptions::prefetch`] sets one: acks go out
/// together (`basic.ack multiple=true` over up to 64 deliveries), and RabbitMQ keeps
/// sending while a run of acks gathers only with room beyond the deliveries the handlers
/// hold. Measured on RabbitMQ 3.10 (see `BENCHMARKS.md`): with the sequential mount's
/// 65 the framework made 58–80 % of a raw `multiple=true` loop's rate, with 256 92–101 %.
pub const DEFAULT_PREFETCH: u16 = 256;

/// The least prefetch of a queue that counts deliveries (a quorum queue): smaller,
/// because RabbitMQ counts every delivery a lost connection returns, and a prefetch of
/// 256 spent attempts on up to 256 messages at each reset (the short soak's quorum
/// queue under resets: 149 dead-lettered at 256, 24 at 65, 20 at this default; the
/// soak dead-letters some 20 on purpose).
///
/// It costs throughput: a quorum queue works more per message with a smaller prefetch.
/// A raw lapin loop at this prefetch reads what the default mount does; with
/// [`SubscribeOptions::prefetch`]`(256)` the mount read 81–94 % of a raw loop at 256 on
/// RabbitMQ 3.10 and 93–113 % on 4.0 (`BENCHMARKS.md`; single runs move by some ten
/// points on the project's machine), for a service that values throughput over the
/// attempts a reset spends.
pub const DEFAULT_COUNTED_PREFETCH: u16 = 128;

/// The prefetch of a subscription whose handlers hold at most `in_flight` deliveries:
/// [`DEFAULT_PREFETCH`] or, on a queue that `counts` deliveries,
/// [`DEFAULT_COUNTED_PREFETCH`]; or `in_flight` where that is more.
pub(crate) fn default_prefetch(in_flight: usize, counts: bool) -> u16 {
    let least = if counts {
        DEFAULT_COUNTED_PREFETCH
    } else {
        DEFAULT_PREFETCH
    };
    u16::try_from(in_flight).unwrap_or(MAX_PREFETCH).max(least)
}

/// Options of one RabbitMQ subscription, put in `SubscribeSpec::options`
/// (`Mount::option` in the runtime).
///
/// ```
/// use ruststream_lapin::{QueueType, SubscribeOptions};
/// use ruststream_core::SubscribeSpec;
///
/// let mut spec = SubscribeSpec::new("orders");
/// spec.options.insert(SubscribeOptions::new().prefetch(64).declare(QueueType::Quorum));
/// ```
///
/// What the queue is (its type, delivery limit and dead-letter exchange) is found out
/// at subscribe (see [Queues](crate#queues)); [`queue`](Self::queue) states it over what
/// was found, for queues whose behaviour comes from a policy the adapter cannot see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubscribeOptions {
    pub(crate) prefetch: Option<u16>,
    pub(crate) declare: Option<QueueType>,
    pub(crate) never_declare: bool,
    pub(crate) queue: QueueOptions,
    /// A reply queue `replies` has just declared (classic, `x-expires`): not probed.
    pub(crate) reply_queue: bool,
}

impl SubscribeOptions {
    /// The default prefetch ([`DEFAULT_PREFETCH`] or [`DEFAULT_COUNTED_PREFETCH`], or the
    /// mount's `in_flight` where that is more); a missing queue declared as a durable
    /// quorum queue (an existing one is found out and checked, never changed).
    pub const fn new() -> Self {
        Self {
            prefetch: None,
            declare: None,
            never_declare: false,
            queue: QueueOptions::new(),
            reply_queue: false,
        }
    }

    /// The prefetch (`basic.qos`): at most this many deliveries unsettled at a time,
    /// instead of the default. At least 1. A prefetch below the mount's `in_flight`
    /// leaves handlers idle; one close to it leaves RabbitMQ waiting while acks gather.
    pub const fn prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = Some(if prefetch == 0 { 1 } else { prefetch });
        self
    }

    /// Makes a missing queue of `kind` from the mount's declaration; an existing queue of
    /// another kind is refused at subscribe. Without it, a missing queue is made as a
    /// quorum queue and an existing one of any kind is taken as it is (checked against
    /// the mount).
    ///
    /// A quorum queue with a cap and a dead letter gets `x-delivery-limit` =
    /// `max_attempts − 1` and a dead-letter exchange, and dead-letters itself; its
    /// dead-letter queue is made too if missing. A classic queue gets no dead-letter
    /// exchange: the runtime dead-letters for it, and an exchange would also take what
    /// handlers drop.
    pub const fn declare(mut self, kind: QueueType) -> Self {
        self.declare = Some(kind);
        self.never_declare = false;
        self
    }

    /// Declares nothing: a missing queue (or dead-letter queue) is
    /// `SubscribeError::BadAddress` (setting `declare=never`), for a user who makes
    /// every queue beforehand.
    pub const fn never_declare(mut self) -> Self {
        self.declare = None;
        self.never_declare = true;
        self
    }

    /// What the queue does, stated over what was found out at subscribe (its type and
    /// arguments: quorum queues count and, with `x-delivery-limit` and
    /// `x-dead-letter-exchange`, dead-letter themselves; classic queues and streams do
    /// neither). For a queue whose limit and dead-letter exchange come from a policy, which
    /// the adapter cannot read. See [`QueueOptions`] for each statement; the settings
    /// `counts`, `dead_letters` and `delivery_limit` set the same.
    pub const fn queue(mut self, queue: QueueOptions) -> Self {
        self.queue = queue;
        self
    }
}

impl BrokerOption for SubscribeOptions {
    const BROKER: &'static str = "lapin";
}

/// Options of a connection, for [`LapinBroker::connect_with`](crate::LapinBroker::connect_with).
///
/// ```
/// use std::time::Duration;
/// use ruststream_lapin::ConnectOptions;
///
/// let options = ConnectOptions::new()
///     .backoff(Duration::from_millis(100), Duration::from_secs(5))
///     .publish_timeout(Duration::from_secs(10));
/// # let _ = options;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    pub(crate) backoff_min: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) publish_timeout: Duration,
    pub(crate) name: Option<String>,
    pub(crate) failover: Vec<String>,
    #[cfg(feature = "tls")]
    pub(crate) tls_ca_files: Vec<std::path::PathBuf>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectOptions {
    /// Back-off from 100 ms doubling to 5 s; publishes wait up to 30 s for a connection.
    pub const fn new() -> Self {
        Self {
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            publish_timeout: Duration::from_secs(30),
            name: None,
            failover: Vec::new(),
            #[cfg(feature = "tls")]
            tls_ca_files: Vec::new(),
        }
    }

    /// The back-off between reconnection attempts: from `min`, doubling up to `max`, with
    /// jitter.
    pub const fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = if max.as_nanos() < min.as_nanos() {
            min
        } else {
            max
        };
        self
    }

    /// How long a publish waits for a connection (and its confirm) before handing the
    /// message back as `Disconnected`.
    pub const fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.publish_timeout = timeout;
        self
    }

    /// Another node of the cluster to connect to when the URL's cannot be reached
    /// (`amqp://user:pass@host:port/vhost`, checked by `connect_with`). Reconnection
    /// tries the node it last reached first, then the others in order.
    pub fn failover(mut self, url: impl Into<String>) -> Self {
        self.failover.push(url.into());
        self
    }

    /// The connection name RabbitMQ shows (`connection_name` client property).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// For `amqps://` (feature `tls`): also trusts the CA certificates of this PEM file,
    /// besides the webpki roots. Read when the broker connects: a file that does not
    /// read is `ConnectError::Tls`.
    ///
    /// ```
    /// use ruststream_lapin::ConnectOptions;
    ///
    /// let options = ConnectOptions::new().tls_ca_file("/etc/ssl/private-ca.pem");
    /// # let _ = options;
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls_ca_files.push(path.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_COUNTED_PREFETCH, DEFAULT_PREFETCH, MAX_PREFETCH, default_prefetch};

    #[test]
    fn the_default_prefetch_is_by_queue_type_and_never_below_in_flight() {
        // A sequential mount (65), many workers, more than a 16-bit prefetch.
        assert_eq!(default_prefetch(65, false), DEFAULT_PREFETCH);
        assert_eq!(default_prefetch(65, true), DEFAULT_COUNTED_PREFETCH);
        assert_eq!(default_prefetch(1_000, true), 1_000);
        assert_eq!(default_prefetch(1 << 20, false), MAX_PREFETCH);
    }
}
