//! Subscription forms and their options, passed in [`SubscribeSpec::options`].
//!
//! [`SubscribeSpec::options`]: ruststream_core::SubscribeSpec::options

use std::time::Duration;

/// How a subscription reads its address. Insert one of these (or one of the form types
/// themselves) into the spec's options; without one a subscription is a [`Stream`] with a
/// consumer group.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Form {
    /// A stream read with a consumer group.
    Stream(Stream),
    /// A stream read with a consumer group that reclaims idle pending entries.
    Claiming(Claiming),
    /// A list moved entry by entry into a processing list.
    ReliableList(ReliableList),
    /// A list popped entry by entry (at most once).
    List(List),
    /// A Pub/Sub channel (at most once).
    PubSub(PubSub),
    /// The Pub/Sub channels matching a glob pattern (at most once).
    Pattern(Pattern),
}

impl Default for Form {
    fn default() -> Self {
        Self::Stream(Stream::new())
    }
}

macro_rules! form_from {
    ($($variant:ident),*) => {$(
        impl From<$variant> for Form {
            fn from(form: $variant) -> Self {
                Self::$variant(form)
            }
        }
    )*};
}
form_from!(Stream, Claiming, ReliableList, List, PubSub, Pattern);

/// Where a new consumer group starts reading.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupStart {
    /// From the first entry in the stream (`0`): nothing written before the group existed
    /// is skipped. The default.
    #[default]
    Beginning,
    /// From entries added after the group is created (`$`).
    End,
    /// After this entry id.
    Id(String),
}

impl GroupStart {
    pub(crate) fn as_id(&self) -> &str {
        match self {
            Self::Beginning => "0",
            Self::End => "$",
            Self::Id(id) => id,
        }
    }
}

/// How a [`Stream`] subscription carries out `retry_after`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DelayedRetry {
    /// The runtime acks the original and publishes a copy when the delay is over, from
    /// the process: a stop before then loses the copy. The default.
    #[default]
    InProcess,
    /// The copy goes into a sorted set scored by its due time (ms, system clock), then the
    /// original is acked; each read first moves due copies (at most 128) back into the
    /// stream, atomically. Survives a crash; services sharing the stream need
    /// synchronised clocks.
    DurableZset,
}

/// Trimming of a stream on publish, always approximate (`~`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trim {
    /// `MAXLEN ~ n`: keep about the last `n` entries.
    MaxLen(u64),
    /// `MINID ~ now - age`: drop entries older than `age` (by their id's time).
    MaxAge(Duration),
}

/// Options shared by the consumer-group forms.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) group: String,
    pub(crate) consumer: Option<String>,
    pub(crate) start: GroupStart,
    pub(crate) block: Duration,
    pub(crate) count: Option<usize>,
    pub(crate) trim: Option<Trim>,
    pub(crate) heartbeat: Duration,
}

impl Default for Group {
    fn default() -> Self {
        Self {
            group: "ruststream".to_owned(),
            consumer: None,
            start: GroupStart::default(),
            block: DEFAULT_BLOCK,
            count: None,
            trim: None,
            heartbeat: DEFAULT_HEARTBEAT,
        }
    }
}

const DEFAULT_BLOCK: Duration = Duration::from_secs(1);
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);

macro_rules! group_setters {
    () => {
        /// The consumer group (default `ruststream`): each service reading a stream needs
        /// its own.
        pub fn group(mut self, group: impl Into<String>) -> Self {
            self.group.group = group.into();
            self
        }

        /// The consumer name. By default it is unique per subscription, process and
        /// host (`host-pid-n`), so two replicas never share one; what a consumer that
        /// died left pending is taken over by the group's live consumers once its
        /// heartbeat expires (see [`heartbeat`](Self::heartbeat)). A stable name (a pod
        /// name) lets a restarted process re-read its own pending entries at once.
        pub fn consumer(mut self, consumer: impl Into<String>) -> Self {
            self.group.consumer = Some(consumer.into());
            self
        }

        /// How long this consumer counts as alive without refreshing its alive key
        /// (default 10 s, at least 30 ms; refreshed every third of it). Every
        /// `heartbeat / 2` each consumer looks for consumers of the group whose key
        /// expired: it takes over their pending entries and removes them from the group
        /// once they have none. With the defaults, entries held by a process that was
        /// killed come back within about 15 s; a subscription closed normally gives its
        /// key up at once, so what it left comes back within 5 s.
        pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
            self.group.heartbeat = heartbeat.max(Duration::from_millis(30));
            self
        }

        /// Where a new group starts (default: the beginning of the stream).
        pub fn start(mut self, start: GroupStart) -> Self {
            self.group.start = start;
            self
        }

        /// How long one read waits for new entries (default 1 s).
        pub fn block(mut self, block: Duration) -> Self {
            self.group.block = block;
            self
        }

        /// How many entries one read takes at most (default: the runtime's in-flight
        /// limit, at most 1000).
        pub fn count(mut self, count: usize) -> Self {
            self.group.count = Some(count.max(1));
            self
        }

        /// Trims the stream when this broker publishes to it.
        pub fn trim(mut self, trim: Trim) -> Self {
            self.group.trim = Some(trim);
            self
        }
    };
}

/// A stream read with a consumer group (`XREADGROUP`): ack and drop are `XACK`, an
/// immediate retry is a copy (`XADD`) then `XACK`.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    pub(crate) group: Group,
    pub(crate) delayed_retry: DelayedRetry,
}

impl Stream {
    /// A stream subscription with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    group_setters!();

    /// How `retry_after` is carried out (default: in process).
    pub fn delayed_retry(mut self, delayed_retry: DelayedRetry) -> Self {
        self.delayed_retry = delayed_retry;
        self
    }
}

/// A stream read with a consumer group that also claims entries pending for at least
/// `min_idle` (`XAUTOCLAIM`), its own included: a retry leaves the entry in the pending
/// list and it comes back after `min_idle` with the same id and the server's delivery
/// counter + 1. A `retry_after` longer than `min_idle` is the runtime's copy instead
/// (the original acked, the copy published after the delay); a copy's attempt is its
/// `x-ruststream-retry-count` plus the server's counter, so attempts count on across
/// copies. Entries in hand are claimed again by their own consumer every `min_idle / 3`
/// (`XCLAIM … JUSTID`, not counted), so a handler may run longer than `min_idle`
/// without its entry being handled twice.
///
/// ```
/// use std::time::Duration;
/// use ruststream_redis::Claiming;
///
/// let form = Claiming::new(Duration::from_secs(30)).group("billing");
/// # let _ = form;
/// ```
#[derive(Clone, Debug)]
pub struct Claiming {
    pub(crate) group: Group,
    pub(crate) min_idle: Duration,
}

impl Default for Claiming {
    fn default() -> Self {
        Self::new(Duration::from_secs(30))
    }
}

impl Claiming {
    /// A claiming subscription that reclaims entries idle for `min_idle`.
    pub fn new(min_idle: Duration) -> Self {
        Self {
            group: Group::default(),
            min_idle,
        }
    }

    group_setters!();

    /// How long an entry stays pending before it is claimed again.
    pub fn min_idle(mut self, min_idle: Duration) -> Self {
        self.min_idle = min_idle;
        self
    }
}

/// A list read into a processing list of this consumer's own (a Lua take, each element
/// wrapped with an id of its own); ack and drop are `LREM` of that element from it. A
/// delivery dropped unsettled goes back to the list at once; a take replayed after a
/// reconnect returns what the first one took; a dropped subscription hands back what it
/// read and did not hand out. A live consumer hands entries stranded by a dead one (whose
/// heartbeat key expired) back to the list. See the crate docs, "Lists: nothing
/// stranded".
#[derive(Clone, Debug)]
pub struct ReliableList {
    pub(crate) consumer: Option<String>,
    pub(crate) block: Duration,
    pub(crate) heartbeat: Duration,
}

impl Default for ReliableList {
    fn default() -> Self {
        Self {
            consumer: None,
            block: DEFAULT_BLOCK,
            heartbeat: Duration::from_secs(10),
        }
    }
}

impl ReliableList {
    /// A reliable list subscription with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The consumer name (default: unique per subscription, process and host). A
    /// restarted consumer with the same name hands its own processing list back first.
    pub fn consumer(mut self, consumer: impl Into<String>) -> Self {
        self.consumer = Some(consumer.into());
        self
    }

    /// How long one read waits (default 1 s).
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block;
        self
    }

    /// How long this consumer counts as alive without refreshing its heartbeat key
    /// (default 10 s; refreshed every third of it). Entries of a consumer silent for
    /// longer are handed back to the list.
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat.max(Duration::from_millis(30));
        self
    }
}

/// A list popped with `RPOP`/`BRPOP`: at most once, settlement is
/// `AckError::Unsupported`. Entries popped and not handed out when the subscription is
/// dropped (a graceful stop) are pushed back to the right end of the list, in order.
#[derive(Clone, Debug)]
pub struct List {
    pub(crate) block: Duration,
}

impl Default for List {
    fn default() -> Self {
        Self::new()
    }
}

impl List {
    /// A plain list subscription with the defaults.
    pub fn new() -> Self {
        Self {
            block: DEFAULT_BLOCK,
        }
    }

    /// How long one read waits (default 1 s).
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block;
        self
    }
}

/// A Pub/Sub channel: the address is the channel. At most once: messages received and
/// not handled when the subscription is dropped are lost.
#[derive(Clone, Debug, Default)]
pub struct PubSub {}

impl PubSub {
    /// A channel subscription.
    pub fn new() -> Self {
        Self {}
    }
}

/// The Pub/Sub channels matching the address as a glob pattern. At most once.
///
/// Retry copies cannot go to a pattern: the mount must declare where they go
/// ([`Declaration::retry_to`](ruststream_core::Declaration::retry_to), `Mount::retry_to`
/// in the runtime); the broker publishes to that address as a channel. A pattern
/// subscription without it is refused with `SubscribeError::BadOption`, since its copies
/// would otherwise go nowhere anyone reads. Each delivery's address is the channel it
/// came on.
#[derive(Clone, Debug, Default)]
pub struct Pattern {}

impl Pattern {
    /// A pattern subscription.
    pub fn new() -> Self {
        Self {}
    }
}

/// The typed form in a spec's options: a [`Form`], or one of the form types.
pub(crate) fn form_of(options: &ruststream_core::Options) -> Option<Form> {
    if let Some(form) = options.get::<Form>() {
        return Some(form.clone());
    }
    macro_rules! try_get {
        ($($t:ident),*) => {$(
            if let Some(f) = options.get::<$t>() {
                return Some(Form::$t(f.clone()));
            }
        )*};
    }
    try_get!(Stream, Claiming, ReliableList, List, PubSub, Pattern);
    None
}

/// The facts a subscription of `form` declares (`None` for one that is refused at
/// subscribe: a claiming form with a zero `min_idle`). The subscriptions `RedisBroker`
/// opens declare the same (tests/facts.rs checks it on a server).
pub(crate) fn facts_of(form: &Form) -> Option<ruststream_core::Capabilities> {
    use ruststream_core::Capabilities;
    Some(match form {
        Form::Stream(stream) => Capabilities {
            delays: (stream.delayed_retry == DelayedRetry::DurableZset)
                .then_some(Capabilities::ANY_DELAY),
            ..Capabilities::SETTLES
        },
        Form::Claiming(claiming) if claiming.min_idle.is_zero() => return None,
        Form::Claiming(claiming) => Capabilities {
            settles: true,
            requeues: true,
            counts: true,
            delays: Some(claiming.min_idle),
            dead_letters: false,
            moves: false,
        },
        Form::ReliableList(_) => Capabilities::SETTLES,
        Form::List(_) | Form::PubSub(_) | Form::Pattern(_) => Capabilities::NONE,
    })
}

macro_rules! redis_options {
    ($($t:ty),*) => {$(
        impl ruststream_core::BrokerOption for $t {
            const BROKER: &'static str = "redis";
        }
    )*};
}
redis_options!(Form, Stream, Claiming, ReliableList, List, PubSub, Pattern);
