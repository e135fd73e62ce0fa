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
    /// The form has its own delayed redelivery (Redis claiming through `min_idle`, a
    /// Redis stream with a durable delay queue, the memory broker).
    pub delays: bool,
    /// The longest delay the form's own delayed redelivery honours (`None`: any). A
    /// longer `retry_after` falls back to the runtime's copy, as on a form that does not
    /// delay. A delay shorter than the form's minimum (a claiming form's `min_idle`)
    /// still lasts the minimum.
    pub max_delay: Option<Duration>,
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
        delays: false,
        max_delay: None,
        dead_letters: false,
        moves: false,
    };

    /// A form that cannot settle (fire and forget): Pub/Sub, plain lists, pre-settled links.
    pub const NONE: Self = Self {
        settles: false,
        requeues: false,
        counts: false,
        delays: false,
        max_delay: None,
        dead_letters: false,
        moves: false,
    };

    /// Whether the form's own delayed redelivery can honour a delay of `delay`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_core::Capabilities;
    ///
    /// let claiming = Capabilities {
    ///     delays: true,
    ///     max_delay: Some(Duration::from_secs(30)),
    ///     ..Capabilities::SETTLES
    /// };
    /// assert!(claiming.delays_for(Duration::from_secs(1)));
    /// assert!(!claiming.delays_for(Duration::from_secs(3600)));
    /// assert!(!Capabilities::SETTLES.delays_for(Duration::from_secs(1)));
    /// ```
    #[inline]
    pub fn delays_for(&self, delay: Duration) -> bool {
        self.delays && self.max_delay.is_none_or(|max| delay <= max)
    }
}
