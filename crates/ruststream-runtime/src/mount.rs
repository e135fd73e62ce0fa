//! A mount: a subscription's address and what the service declares about it.
//!
//! [`Mount`] and [`Concurrency`] (both also at the crate's root) declare a subscription;
//! per-mount settings can also come from the environment, in variables named with
//! [`MOUNT_ENV_PREFIX`] and [`mount_env_name`]. [`DelayedLimit`] bounds the retry copies
//! that wait for their delay in the process, for all mounts of a service
//! ([`App::delayed_limit`](crate::App::delayed_limit)).

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{Address, Declaration, Delivery, Options};

use crate::codec::Codec;
use crate::policy::Policy;

pub use crate::mount_settings::{MOUNT_ENV_PREFIX, mount_env_name};

/// How many deliveries of one subscription are handled at once.
#[derive(Clone)]
pub enum Concurrency {
    /// One at a time, in order (the default). The next delivery's handler does not wait
    /// for the broker to confirm the last one's bare settlement: up to 64 may be under
    /// way behind it.
    Sequential,
    /// Up to `n` at once, in no particular order.
    Workers(usize),
    /// `n` ordered lanes: deliveries with the same key are handled one at a time in
    /// order; different keys run concurrently.
    Lanes {
        /// How many lanes.
        lanes: usize,
        /// The key of a delivery; equal keys share a lane.
        key: Arc<dyn Fn(&Delivery) -> u64 + Send + Sync>,
    },
}

/// How many bare settlements may be under way behind a sequential mount's loop, which
/// does not wait for the broker to confirm one before it takes the next delivery, unless
/// the broker declares another number ([`Broker::trailing`](ruststream_core::Broker::trailing)).
pub(crate) const TRAILING: usize = 64;

impl Concurrency {
    /// How many deliveries can be held at once (unsettled) under this setting.
    pub fn in_flight(&self) -> usize {
        self.in_flight_with(None)
    }

    /// [`in_flight`](Self::in_flight) where the broker declares how many settlements may
    /// trail ([`Broker::trailing`](ruststream_core::Broker::trailing)).
    pub(crate) fn in_flight_with(&self, declared: Option<usize>) -> usize {
        match self {
            Self::Sequential | Self::Workers(_) => self.loops() * (1 + self.trailing(declared)),
            Self::Lanes { lanes, .. } => lanes.max(&1) * 2 + 1,
        }
    }

    /// How many loops handle the deliveries (the lanes' reader aside).
    fn loops(&self) -> usize {
        match self {
            Self::Sequential => 1,
            Self::Workers(n) => (*n).max(1),
            Self::Lanes { lanes, .. } => (*lanes).max(1),
        }
    }

    /// How many bare settlements may trail behind each loop: [`TRAILING`] (or what the
    /// broker declares) behind a sequential loop; behind each of `n` workers nothing,
    /// unless the broker declares a number, which they share (at least one each: a
    /// broker that declares one has settlements that wait for a step shared by many,
    /// and a worker waiting on each would be bound by that step's latency); nothing
    /// behind a lane, which keeps its key's settlements in order.
    pub(crate) fn trailing(&self, declared: Option<usize>) -> usize {
        match self {
            Self::Sequential => declared.unwrap_or(TRAILING),
            Self::Workers(n) => declared.map_or(0, |t| (t / (*n).max(1)).max(1)),
            Self::Lanes { .. } => 0,
        }
    }
}

impl fmt::Debug for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sequential => f.write_str("Sequential"),
            Self::Workers(n) => write!(f, "Workers({n})"),
            Self::Lanes { lanes, .. } => write!(f, "Lanes({lanes})"),
        }
    }
}

/// A subscription's address and declaration: the attempt cap, the dead letter, the
/// retry address, codec, concurrency, failure policies and adapter options.
///
/// ```
/// use ruststream::{Mount, Policy};
///
/// let mount = Mount::new("orders")
///     .max_attempts(3)
///     .dead_letter("orders.dead")
///     .on_decode_error(Policy::Skip)
///     .workers(4);
/// assert_eq!(mount.address().as_str(), "orders");
/// ```
#[derive(Debug, Clone)]
pub struct Mount {
    pub(crate) address: Address,
    pub(crate) declaration: Declaration,
    pub(crate) codec: Codec,
    pub(crate) concurrency: Concurrency,
    pub(crate) on_decode_error: Policy,
    pub(crate) on_panic: Policy,
    pub(crate) timeout: Option<Duration>,
    pub(crate) on_timeout: Policy,
    pub(crate) reply_to: Option<Address>,
    pub(crate) allow_reply_to: Option<ReplyFilter>,
    pub(crate) options: Options,
    pub(crate) layers: crate::layer::Layers,
    #[cfg(feature = "asyncapi")]
    pub(crate) payload: Option<crate::schema::PayloadSchema>,
    /// The reply's schema, declared with [`Mount::reply`].
    #[cfg(feature = "asyncapi")]
    pub(crate) reply: Option<crate::schema::PayloadSchema>,
    /// Set at start: the subscription accepted the graceful stop's drain, so its loops
    /// handle what its stream still yields after a stop (see `ruststream_core::Drain`).
    pub(crate) drains: bool,
}

impl Mount {
    /// A mount on `address` with nothing declared.
    pub fn new(address: impl Into<Address>) -> Self {
        Self {
            address: address.into(),
            declaration: Declaration::default(),
            codec: Codec::default(),
            concurrency: Concurrency::Sequential,
            on_decode_error: Policy::DECODE_DEFAULT,
            on_panic: Policy::PANIC_DEFAULT,
            timeout: None,
            on_timeout: Policy::TIMEOUT_DEFAULT,
            reply_to: None,
            allow_reply_to: None,
            options: Options::default(),
            layers: crate::layer::Layers::default(),
            #[cfg(feature = "asyncapi")]
            payload: None,
            #[cfg(feature = "asyncapi")]
            reply: None,
            drains: false,
        }
    }

    /// The address subscribed to.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Where retry copies go: the declared retry address, else the mount's own.
    pub fn retry_address(&self) -> &Address {
        self.declaration.retry_to.as_ref().unwrap_or(&self.address)
    }

    /// What is declared about retries.
    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// Caps the attempts: the first delivery is attempt 1; a retry at attempt `n` goes
    /// to the dead letter, or is rejected without one. `0` is taken as `1`.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.declaration.max_attempts = Some(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN));
        self
    }

    /// Where spent deliveries are published, as they arrived. Declared without a cap,
    /// it takes every retry.
    ///
    /// What reaches it: a `retry()` or `retry_after(d)` (from the handler, or from a
    /// failure policy of that name) at the cap, or any retry when no cap is declared. A
    /// `drop()` does **not**: it rejects the delivery, and the broker's own dead-letter
    /// policy (an AMQP queue's dead-letter exchange) decides; neither does `ack()`. On a
    /// broker that dead-letters itself the broker moves spent deliveries, not the runtime.
    pub fn dead_letter(mut self, address: impl Into<Address>) -> Self {
        self.declaration.dead_letter = Some(address.into());
        self
    }

    /// Where retry copies go (default: the address the delivery arrived on). A pattern
    /// subscription names its copies' address here.
    pub fn retry_to(mut self, address: impl Into<Address>) -> Self {
        self.declaration.retry_to = Some(address.into());
        self
    }

    /// The codec of payloads (default: JSON).
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// Handles up to `n` deliveries at once, unordered.
    pub fn workers(mut self, n: usize) -> Self {
        self.concurrency = Concurrency::Workers(n.max(1));
        self
    }

    /// Handles deliveries in `lanes` ordered lanes by `key`.
    pub fn lanes(
        mut self,
        lanes: usize,
        key: impl Fn(&Delivery) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.concurrency = Concurrency::Lanes {
            lanes: lanes.max(1),
            key: Arc::new(key),
        };
        self
    }

    /// Handles deliveries in `lanes` ordered lanes keyed by a header's value.
    pub fn lanes_by_header(self, lanes: usize, header: &'static str) -> Self {
        self.lanes(lanes, move |d| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            d.headers()
                .get(header)
                .map(|v| v.as_bytes())
                .hash(&mut hasher);
            hasher.finish()
        })
    }

    /// The policy for payloads that do not decode (default: [`Policy::Drop`]).
    pub fn on_decode_error(mut self, policy: Policy) -> Self {
        self.on_decode_error = policy;
        self
    }

    /// The policy for handlers that panic (default: [`Policy::FailFast`]).
    pub fn on_panic(mut self, policy: Policy) -> Self {
        self.on_panic = policy;
        self
    }

    /// Cancels a handler that runs longer than `limit` (default: no limit) and settles its
    /// delivery with the timeout policy ([`Mount::on_timeout`]), so a hung handler cannot
    /// stall the mount forever. The handler's future is dropped at the limit: what it had
    /// not done by then is not done.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// The policy for handlers cancelled by the [`timeout`](Mount::timeout) (default:
    /// [`Policy::Retry`], through the cap).
    pub fn on_timeout(mut self, policy: Policy) -> Self {
        self.on_timeout = policy;
        self
    }

    /// Where a handler's [`Reply`](crate::Reply) goes when the request has no
    /// `reply-to` header.
    pub fn reply_to(mut self, address: impl Into<Address>) -> Self {
        self.reply_to = Some(address.into());
        self
    }

    /// Answers only requests whose `reply-to` header `filter` allows (default: any).
    ///
    /// `reply-to` comes from whoever published the request: without a filter, any
    /// producer can make the service publish its replies to any address. A request whose
    /// `reply-to` is refused gets no reply (logged at warn) and is settled as the handler
    /// said. The mount's own [`reply_to`](Mount::reply_to) is always allowed.
    ///
    /// ```
    /// use ruststream::Mount;
    ///
    /// let mount = Mount::new("prices").allow_reply_to(|to| to.starts_with("replies."));
    /// # let _ = mount;
    /// ```
    pub fn allow_reply_to(mut self, filter: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.allow_reply_to = Some(ReplyFilter(Arc::new(filter)));
        self
    }

    /// Adds a middleware layer around this mount's handling, around those added before
    /// it (see [`Layer`](crate::layer::Layer)).
    pub fn layer(mut self, layer: impl crate::layer::Layer) -> Self {
        self.layers.wrap(Arc::new(layer));
        self
    }

    /// Documents the payload as `T` (feature `asyncapi`): its JSON schema goes in the
    /// service's AsyncAPI document. `T` must be the handler's payload type;
    /// [`App::asyncapi`](crate::App::asyncapi) refuses a mount whose handler takes
    /// another.
    ///
    /// ```
    /// use ruststream::Mount;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Order { id: u64 }
    ///
    /// let mount = Mount::new("orders").payload::<Order>();
    /// # let _ = mount;
    /// ```
    #[cfg(feature = "asyncapi")]
    pub fn payload<T: schemars::JsonSchema + 'static>(mut self) -> Self {
        self.payload = Some(crate::schema::PayloadSchema::of::<T>());
        self
    }

    /// Documents the handler's reply as `T` (feature `asyncapi`): the receive operation
    /// of the service's AsyncAPI document gets a reply with `T`'s JSON schema, sent to
    /// the request's `reply-to` (or to [`reply_to`](Self::reply_to)'s address). `T`
    /// must be what the handler replies with (`Reply<T>`);
    /// [`App::asyncapi`](crate::App::asyncapi) refuses a mount whose handler replies
    /// with another type or not at all.
    ///
    /// ```
    /// use ruststream::Mount;
    ///
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Price { cents: u64 }
    ///
    /// let mount = Mount::new("prices").reply::<Price>();
    /// # let _ = mount;
    /// ```
    #[cfg(feature = "asyncapi")]
    pub fn reply<T: schemars::JsonSchema + 'static>(mut self) -> Self {
        self.reply = Some(crate::schema::PayloadSchema::of::<T>());
        self
    }

    /// An adapter option (a Redis form, an AMQP credit…), by type.
    pub fn option<T: ruststream_core::BrokerOption>(mut self, option: T) -> Self {
        self.options.insert(option);
        self
    }
}

impl<T: Into<Address>> From<T> for Mount {
    fn from(address: T) -> Self {
        Self::new(address)
    }
}

/// How many retry copies, and how many bytes of them, may wait for their delay in the
/// process at once. When either bound is reached the service takes no more deliveries
/// until a copy has gone out.
///
/// ```
/// use ruststream::mount::DelayedLimit;
///
/// let limit = DelayedLimit::default().copies(1_000).bytes(8 << 20);
/// assert_eq!(limit.max_copies(), 1_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayedLimit {
    copies: usize,
    bytes: usize,
}

impl Default for DelayedLimit {
    /// 10,000 copies, 64 MiB.
    fn default() -> Self {
        Self {
            copies: 10_000,
            bytes: 64 << 20,
        }
    }
}

impl DelayedLimit {
    /// At most `copies` waiting copies (at least 1).
    pub fn copies(mut self, copies: usize) -> Self {
        self.copies = copies.max(1);
        self
    }

    /// At most `bytes` of waiting copies, payloads and headers (at least 1). A single copy
    /// larger than the bound is still taken when nothing else waits.
    pub fn bytes(mut self, bytes: usize) -> Self {
        self.bytes = bytes.max(1);
        self
    }

    /// The bound on the number of copies.
    pub fn max_copies(&self) -> usize {
        self.copies
    }

    /// The bound on their bytes.
    pub fn max_bytes(&self) -> usize {
        self.bytes
    }
}

/// Which `reply-to` addresses a mount answers (see
/// [`Mount::allow_reply_to`](crate::Mount::allow_reply_to)).
#[derive(Clone)]
pub(crate) struct ReplyFilter(pub(crate) Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl fmt::Debug for ReplyFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplyFilter")
    }
}
