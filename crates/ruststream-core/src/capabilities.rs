//! What a subscription form can do, as its adapter declares it.

use std::time::Duration;

/// The facts about a subscription form that the settlement decision depends on.
///
/// Adapters declare these per subscription; the runtime never guesses them. See the
/// specification, §6, for what each one changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// The form can settle a delivery at all (not so: AMQP at-most-once, Redis plain
    /// lists, Pub/Sub).
    pub settles: bool,
    /// The broker can take a delivery back for redelivery (AMQP `modified`, Redis
    /// claiming, the memory broker).
    pub requeues: bool,
    /// The broker counts deliveries itself. A delivery counts when its form counts and
    /// it carries the broker's count ([`Delivery::broker_attempt`](crate::Delivery::broker_attempt)).
    pub counts: bool,
    /// The form's own delayed redelivery, and the longest delay it honours (`None`: the
    /// form has none; [`Capabilities::ANY_DELAY`]: any delay). Redis claiming through
    /// `min_idle` (bounded by it), a Redis stream with a durable delay queue, RabbitMQ's
    /// delay queues, JetStream's `-NAK` with a delay, the memory broker. A longer
    /// `retry_after` falls back to the runtime's copy, as on a form that does not delay.
    /// A delay shorter than the form's minimum (a claiming form's `min_idle`) still lasts
    /// the minimum.
    pub delays: Option<Duration>,
    /// The broker enforces the attempt cap and the dead letter itself, declared to it
    /// when the subscription starts.
    pub dead_letters: bool,
    /// The broker writes a copy and removes the delivery it replaces in one step (one
    /// transaction: [`Acker::replace`](crate::Acker::replace)), so a retry copy or a dead
    /// letter replaces its original exactly once, whatever moment a crash comes at.
    /// Without it the runtime publishes the copy first and removes the original after:
    /// a crash in between leaves a duplicate, never a loss.
    pub moves: bool,
}

impl Capabilities {
    /// A form that settles and nothing more: retries become copies made by the runtime.
    pub const SETTLES: Self = Self {
        settles: true,
        requeues: false,
        counts: false,
        delays: None,
        dead_letters: false,
        moves: false,
    };

    /// The bound of a form whose own delayed redelivery honours any delay.
    pub const ANY_DELAY: Duration = Duration::MAX;

    /// A form that cannot settle (fire and forget): Pub/Sub, plain lists, pre-settled links.
    pub const NONE: Self = Self {
        settles: false,
        requeues: false,
        counts: false,
        delays: None,
        dead_letters: false,
        moves: false,
    };

    /// The bound of the form's own delayed redelivery, where it has one and it is not
    /// [`Capabilities::ANY_DELAY`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_core::Capabilities;
    ///
    /// let bounded = Capabilities { delays: Some(Duration::from_secs(30)), ..Capabilities::SETTLES };
    /// assert_eq!(bounded.max_delay(), Some(Duration::from_secs(30)));
    /// let any = Capabilities { delays: Some(Capabilities::ANY_DELAY), ..Capabilities::SETTLES };
    /// assert_eq!(any.max_delay(), None);
    /// assert_eq!(Capabilities::SETTLES.max_delay(), None);
    /// ```
    #[inline]
    pub fn max_delay(&self) -> Option<Duration> {
        self.delays.filter(|&max| max != Self::ANY_DELAY)
    }

    /// Whether the form's own delayed redelivery can honour a delay of `delay`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_core::Capabilities;
    ///
    /// let claiming = Capabilities {
    ///     delays: Some(Duration::from_secs(30)),
    ///     ..Capabilities::SETTLES
    /// };
    /// assert!(claiming.delays_for(Duration::from_secs(1)));
    /// assert!(!claiming.delays_for(Duration::from_secs(3600)));
    /// assert!(!Capabilities::SETTLES.delays_for(Duration::from_secs(1)));
    /// ```
    #[inline]
    pub fn delays_for(&self, delay: Duration) -> bool {
        self.delays.is_some_and(|max| delay <= max)
    }
}
