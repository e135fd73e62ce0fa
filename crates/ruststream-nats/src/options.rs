//! The mount options: which form a subscription takes, and its consumer's settings.

use std::time::Duration;

use ruststream_core::BrokerOption;

/// The JetStream form (the default): a durable pull consumer on the stream that holds
/// the mount's subject, at least once.
///
/// Every setting is optional. Without one the adapter finds the stream holding the
/// subject (or creates one named after it), and creates or checks a durable consumer
/// named after the subject, filtering it, with unlimited deliveries, the server's
/// `ack_wait` (30 s) and `max_ack_pending` four times the mount's in-flight count.
///
/// ```
/// use std::time::Duration;
/// use ruststream::Mount;
/// use ruststream_nats::JetStream;
///
/// let mount = Mount::new("orders.eu").option(JetStream::new().stream("ORDERS").consumer("billing"));
/// # let _ = mount;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JetStream {
    pub(crate) stream: Option<String>,
    pub(crate) consumer: Option<String>,
    pub(crate) ack_wait: Option<Duration>,
    pub(crate) max_ack_pending: Option<u32>,
    pub(crate) replicas: Option<usize>,
    pub(crate) confirm_acks: Option<bool>,
}

impl JetStream {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream to consume from: created with the mount's subject if it does not
    /// exist; refused at start if it exists and does not hold the subject.
    pub fn stream(mut self, name: impl Into<String>) -> Self {
        self.stream = Some(name.into());
        self
    }

    /// The durable consumer's name (default: `ruststream-` and the subject, with every
    /// character a name cannot hold as `_`). Services with the same name share the
    /// consumer's deliveries (competing consumers).
    pub fn consumer(mut self, name: impl Into<String>) -> Self {
        self.consumer = Some(name.into());
        self
    }

    /// The consumer's `ack_wait`: how long a delivery may go without a settlement or a
    /// progress signal before the server delivers it again. The adapter signals
    /// progress for a handler that runs long, so this bounds how soon a delivery held
    /// by a process that died comes back.
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = Some(ack_wait);
        self
    }

    /// The consumer's `max_ack_pending` (default: four times the mount's in-flight
    /// count, room for a pull batch in transit and deliveries waiting out a delay).
    pub fn max_ack_pending(mut self, max: u32) -> Self {
        self.max_ack_pending = Some(max);
        self
    }

    /// Whether each settlement waits for the server's answer (JetStream's "double ack",
    /// a round trip per delivery). Default `false`: a settlement is a plain
    /// acknowledgement, done once the client has taken it for writing; one the server
    /// never got (the connection lost meanwhile) is delivered again after `ack_wait`.
    /// Wins over the `confirm_acks` setting (URL query or mount setting).
    pub fn confirm_acks(mut self, confirm: bool) -> Self {
        self.confirm_acks = Some(confirm);
        self
    }

    /// Replicas of a stream the adapter creates (default: the server's, 1).
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = Some(replicas);
        self
    }
}

impl BrokerOption for JetStream {
    const BROKER: &'static str = "nats";
}

/// The core NATS form: a plain subscription to the subject (optionally in a queue
/// group), at most once. Nothing is stored: a message published while no one
/// subscribes is gone, and a delivery cannot be settled (`AckError::Unsupported`).
///
/// ```
/// use ruststream::Mount;
/// use ruststream_nats::Core;
///
/// let mount = Mount::new("prices.>").option(Core::new().queue_group("pricing"));
/// # let _ = mount;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Core {
    pub(crate) queue_group: Option<String>,
}

impl Core {
    /// A plain subscription.
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribes in a queue group: each message goes to one member of the group.
    pub fn queue_group(mut self, group: impl Into<String>) -> Self {
        self.queue_group = Some(group.into());
        self
    }
}

impl BrokerOption for Core {
    const BROKER: &'static str = "nats";
}
