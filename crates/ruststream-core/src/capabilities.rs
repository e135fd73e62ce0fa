//! What a subscription form can do, as its adapter declares it.

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
    /// The broker enforces the attempt cap and the dead letter itself, declared to it
    /// when the subscription starts.
    pub dead_letters: bool,
}

impl Capabilities {
    /// A form that settles and nothing more: retries become copies made by the runtime.
    pub const SETTLES: Self = Self {
        settles: true,
        requeues: false,
        counts: false,
        delays: false,
        dead_letters: false,
    };

    /// A form that cannot settle (fire and forget): Pub/Sub, plain lists, pre-settled links.
    pub const NONE: Self = Self {
        settles: false,
        requeues: false,
        counts: false,
        delays: false,
        dead_letters: false,
    };
}
