//! Brokers, subscriptions and publishers.

use std::any::{Any, TypeId};
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;

use crate::{
    Address, Attached, Bindings, Capabilities, ConsumeError, Delivery, Drain, Inspect, Message,
    PublishError, PublishErrorKind, Setting, SubscribeError,
};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The deliveries of a subscription as a stream.
pub type DeliveryStream = Pin<Box<dyn Stream<Item = Result<Delivery, ConsumeError>> + Send>>;

/// A connected broker: opens subscriptions and publishes.
///
/// Adapters implement it; each offers its own `connect`. Reconnection is the adapter's
/// business: a subscription keeps yielding across a dropped connection.
pub trait Broker: Send + Sync + 'static {
    /// A short name for logs: `memory`, `redis`, `amqp`.
    fn name(&self) -> &'static str;

    /// Opens a subscription. The mount's [`Declaration`] comes along so that a broker
    /// that dead-letters itself can apply it at start-up.
    fn subscribe(&self, spec: SubscribeSpec)
    -> BoxFuture<'_, Result<Subscription, SubscribeError>>;

    /// A publisher sharing this broker's connections.
    fn publisher(&self) -> Arc<dyn Publish>;

    /// Closes connections once in-flight settlements are done. Open subscriptions end.
    fn close(&self) -> BoxFuture<'_, ()>;

    /// The facts a subscription of `spec` would declare, where the adapter can tell
    /// without subscribing; `None` (the default) where they are found out from the
    /// broker at subscribe. Descriptions of a service (its AsyncAPI document) show them.
    fn facts(&self, spec: &SubscribeSpec) -> Option<Capabilities> {
        let _ = spec;
        None
    }

    /// The protocol bindings of a subscription of `spec` (its channel and its receive
    /// operation), where the protocol has some; none by default. Descriptions of a
    /// service (its AsyncAPI document) show them.
    fn bindings(&self, spec: &SubscribeSpec) -> Bindings {
        let _ = spec;
        Bindings::default()
    }

    /// The protocol bindings of a publish to `to` (its channel and its send
    /// operation), where the protocol has some; none by default.
    fn publish_bindings(&self, to: &Address) -> Bindings {
        let _ = to;
        Bindings::default()
    }

    /// How many settlements a sequential mount lets trail behind its loop: under way
    /// while it handles the next deliveries, each reported once the broker has it.
    /// `None` (the default) takes the runtime's (64), enough where a settlement is a
    /// frame written or one round trip. A broker whose every settlement waits for a
    /// slower step shared by many (Kafka: a commit of offsets) declares more, or a
    /// sequential mount would wait on that step's latency every 64 deliveries.
    fn trailing(&self) -> Option<usize> {
        None
    }

    /// Opens the subscription a request client reads its replies from: `address` is
    /// unique to the client, and the broker may put its replies elsewhere (a queue the
    /// broker names), so the address to send as `reply-to` comes back with it.
    ///
    /// The default subscribes to `address` with nothing declared. Adapters override it
    /// where a reply address needs a form of its own (a Redis list, an AMQP queue that
    /// expires when nobody reads it).
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            let mut spec = SubscribeSpec::new(address.clone());
            spec.in_flight = 256;
            let subscription = self.subscribe(spec).await?;
            Ok(Replies {
                address,
                subscription,
            })
        })
    }

    /// How a mount on this broker keeps its `retry_after` copies durable, for a form
    /// that waits them out in the process (one without its own delayed redelivery):
    /// the option to name in the start-up warning such a mount gets. `None` (the
    /// default): the broker has no durable way.
    fn durable_delays(&self) -> Option<&'static str> {
        None
    }

    /// Browsing and removing waiting messages (the dead-letter tools), where the broker
    /// can; `None` by default.
    fn inspect(&self) -> Option<&dyn Inspect> {
        None
    }
}

/// A request client's reply subscription ([`Broker::replies`]).
#[derive(Debug)]
pub struct Replies {
    /// The address requests carry as `reply-to`.
    pub address: Address,
    /// The replies.
    pub subscription: Subscription,
}

/// Publishes messages to addresses.
pub trait Publish: Send + Sync + 'static {
    /// Publishes `message` to `to`; on failure the message comes back in the error.
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>>;

    /// What this publisher already knows it would refuse for good, without sending
    /// anything: a message over a size limit the broker announced, an address the
    /// broker can never take. `Ok(())` means nothing known against it, not a promise
    /// that the publish will succeed; that is the default.
    ///
    /// The runtime asks before it settles an original whose retry copy is published
    /// later from the process (`retry_after` where the broker has no delays of its
    /// own): a copy refused then would be lost, so the original stays with the broker
    /// instead.
    ///
    /// ```
    /// use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};
    ///
    /// /// A publisher whose broker takes at most 1,024 bytes.
    /// struct Small;
    ///
    /// impl Publish for Small {
    ///     fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
    ///         Box::pin(async move {
    ///             match self.check(&to, &message) {
    ///                 Ok(()) => Ok(()),
    ///                 Err(kind) => Err(PublishError { address: to.to_string(), kind, message }),
    ///             }
    ///         })
    ///     }
    ///
    ///     fn check(&self, _: &Address, message: &Message) -> Result<(), PublishErrorKind> {
    ///         match message.payload.len() {
    ///             size if size > 1024 => Err(PublishErrorKind::TooLarge { size, limit: 1024 }),
    ///             _ => Ok(()),
    ///         }
    ///     }
    /// }
    ///
    /// let large = Message::new(vec![0u8; 2048]);
    /// assert!(Small.check(&Address::new("orders"), &large).is_err());
    /// ```
    fn check(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        let _ = (to, message);
        Ok(())
    }
}

/// What the runtime asks of a broker when a mount starts.
#[derive(Debug)]
pub struct SubscribeSpec {
    /// The address to consume from.
    pub address: Address,
    /// The mount's attempt cap and dead letter.
    pub declaration: Declaration,
    /// How many deliveries the runtime may hold at once (unsettled); adapters size
    /// prefetch or credit from it unless an option of theirs says otherwise.
    pub in_flight: usize,
    /// Adapter-specific options (a Redis form, an AMQP credit), by type.
    pub options: Options,
    /// The graceful stop's request to take nothing more from the broker, for an adapter
    /// that can end the stream after what it already received (see [`Drain`]).
    pub drain: Drain,
}

impl SubscribeSpec {
    /// A spec for `address` with nothing declared and one delivery in flight.
    pub fn new(address: impl Into<Address>) -> Self {
        Self {
            address: address.into(),
            declaration: Declaration::default(),
            in_flight: 1,
            options: Options::default(),
            drain: Drain::new(),
        }
    }
}

/// What a mount declares about retries: the attempt cap, the dead letter and where
/// retry copies go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declaration {
    /// `max_attempts`: the first delivery is attempt 1.
    pub max_attempts: Option<NonZeroU32>,
    /// `dead_letter`: where spent deliveries are published as they arrived.
    pub dead_letter: Option<Address>,
    /// Where retry copies go; the subscription's own address when `None`.
    pub retry_to: Option<Address>,
}

impl Declaration {
    /// Whether a cap or a dead letter is declared.
    pub fn is_declared(&self) -> bool {
        self.max_attempts.is_some() || self.dead_letter.is_some()
    }
}

/// An open subscription: its deliveries and what its form can do.
pub struct Subscription {
    /// The deliveries, in broker order. The stream ends when the broker closes.
    pub deliveries: DeliveryStream,
    /// What the form can do; the settlement decision reads it.
    pub capabilities: Capabilities,
    /// Whether the subscription is attached to its broker (readiness, reconnects): the
    /// adapter detaches it when it loses the connection and attaches it when it reads
    /// again. `Attached::new()` where the adapter cannot lose it.
    pub attached: Attached,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

/// An option that belongs to one broker adapter (a Redis form, an AMQP credit).
///
/// The runtime refuses, at start-up, a mount that carries an option of another broker
/// than the one it runs on: a Redis form on an AMQP mount would otherwise be ignored
/// without a word.
pub trait BrokerOption: Any + Send + Sync {
    /// The name of the broker it belongs to, as its [`Broker::name`] says.
    const BROKER: &'static str;
}

/// Adapter-specific options, one value per type.
///
/// ```
/// use ruststream_core::{BrokerOption, Options};
///
/// #[derive(Debug, PartialEq)]
/// struct Credit(u32);
/// impl BrokerOption for Credit {
///     const BROKER: &'static str = "amqp";
/// }
///
/// let mut options = Options::default();
/// options.insert(Credit(64));
/// assert_eq!(options.get::<Credit>(), Some(&Credit(64)));
/// assert!(options.check("amqp").is_ok());
/// assert!(options.check("redis").is_err());
/// assert_eq!(options.names().count(), 1);
/// ```
///
/// Besides typed options it carries [`Setting`]s, the text keys and values of a
/// subscription's configuration (see [`Options::configure`]).
#[derive(Clone, Default)]
pub struct Options {
    typed: Vec<Entry>,
    settings: Vec<Setting>,
}

#[derive(Clone)]
struct Entry {
    id: TypeId,
    broker: &'static str,
    name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl Options {
    /// Sets the option of type `T`, replacing an earlier one.
    pub fn insert<T: BrokerOption>(&mut self, value: T) {
        self.typed.retain(|entry| entry.id != TypeId::of::<T>());
        self.typed.push(Entry {
            id: TypeId::of::<T>(),
            broker: T::BROKER,
            name: std::any::type_name::<T>(),
            value: Arc::new(value),
        });
    }

    /// The option of type `T`, if set.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.typed
            .iter()
            .find(|entry| entry.id == TypeId::of::<T>())
            .and_then(|entry| entry.value.downcast_ref())
    }

    /// The type names of the options set, in the order they were set.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.typed.iter().map(|entry| entry.name)
    }

    /// Refuses options that belong to another broker than `broker`.
    pub fn check(&self, broker: &str) -> Result<(), SubscribeError> {
        match self.typed.iter().find(|entry| entry.broker != broker) {
            Some(entry) => Err(SubscribeError::BadOption(format!(
                "{} is an option of the {} broker, not of {broker}",
                entry.name, entry.broker
            ))),
            None => Ok(()),
        }
    }
}

impl Options {
    /// Adds a setting from configuration, after those added before: an adapter reads
    /// them in order, so a later one with the same key wins. Typed options win over
    /// settings of the same concern (the adapters' docs say which keys each covers).
    pub fn configure(&mut self, setting: Setting) {
        self.settings.push(setting);
    }

    /// The settings from configuration, in the order they were added.
    pub fn settings(&self) -> &[Setting] {
        &self.settings
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.typed.iter().map(|entry| entry.name))
            .entries(
                self.settings
                    .iter()
                    .map(|s| format!("{}={:?}", s.key, s.value)),
            )
            .finish()
    }
}
