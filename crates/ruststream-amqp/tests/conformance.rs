//! The shared conformance suite (`ruststream-conformance`) on RabbitMQ 4, every harness
//! with **default** subscription options (the adapter finds out what the queue does):
//! a quorum queue (counts `modified`), a classic queue (does not: retries are copies),
//! a quorum queue that dead-letters itself (`x-delivery-limit` and a dead-letter
//! exchange), and at-most-once on a classic queue. Needs RabbitMQ 4
//! (`scripts/rabbitmq4.sh`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream_amqp::Settle;
use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use support::{Queues, broker, name};

/// Queues of each kind declared for the binary; a check takes at most three.
const POOL: usize = 40;

fn topology(q: &mut Queues) {
    for i in 0..POOL {
        q.quorum(&format!("quorum-{i}"));
        q.classic(&format!("classic-{i}"));
        q.classic(&format!("once-{i}"));
        // x-delivery-limit 2: the suite's max_attempts(3). The dead-letter exchange is
        // the default one, keyed to the queue handed out after this one.
        let next = q.queue(&format!("selfdl-{i}-next"), "classic", "");
        q.queue(
            &format!("selfdl-{i}"),
            "quorum",
            &format!(
                r#", "x-delivery-limit": 2, "x-dead-letter-exchange": "",
                   "x-dead-letter-routing-key": "{next}""#
            ),
        );
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Quorum,
    Classic,
    SelfDl,
    AtMostOnce,
}

static TAKEN: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// RabbitMQ 4 with one kind of queue, default options.
struct Amqp {
    kind: Kind,
    /// The self-dead-lettering pair this check uses (that kind only), and how many
    /// addresses it took.
    pair: usize,
    handed: AtomicUsize,
}

impl Amqp {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            pair: match kind {
                Kind::SelfDl => TAKEN[2].fetch_add(1, Ordering::Relaxed),
                _ => 0,
            },
            handed: AtomicUsize::new(0),
        }
    }
}

impl Harness for Amqp {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Quorum => "amqp quorum",
            Kind::Classic => "amqp classic",
            Kind::SelfDl => "amqp quorum dead-lettering itself",
            Kind::AtMostOnce => "amqp at-most-once",
        }
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        Arc::new(broker().await)
    }

    fn fresh_address(&self) -> Address {
        let n = self.handed.fetch_add(1, Ordering::Relaxed);
        let role = match self.kind {
            // The first address dead-letters to the second.
            Kind::SelfDl => match n {
                0 => format!("selfdl-{}", self.pair),
                1 => format!("selfdl-{}-next", self.pair),
                _ => format!("quorum-{}", TAKEN[0].fetch_add(1, Ordering::Relaxed)),
            },
            Kind::Quorum => format!("quorum-{}", TAKEN[0].fetch_add(1, Ordering::Relaxed)),
            Kind::Classic => format!("classic-{}", TAKEN[1].fetch_add(1, Ordering::Relaxed)),
            Kind::AtMostOnce => format!("once-{}", TAKEN[3].fetch_add(1, Ordering::Relaxed)),
        };
        Address::new(name(topology, &role))
    }

    fn mount(&self, address: Address) -> Mount {
        match self.kind {
            // The form under test, not a tuning: settled on receipt.
            Kind::AtMostOnce => Mount::new(address).option(Settle::AtMostOnce),
            _ => Mount::new(address),
        }
    }

    /// A key no queue is bound to on an exchange that exists: RabbitMQ releases a publish
    /// to it at once (a missing queue as the dead letter is refused at start-up). Not for
    /// the queue that dead-letters itself (the runtime publishes no dead letter there).
    fn unpublishable_address(&self) -> Option<Address> {
        match self.kind {
            Kind::Quorum | Kind::Classic => Some(Address::new(format!(
                "/exchanges/amq.direct/{}",
                support::unique("unbound")
            ))),
            Kind::SelfDl | Kind::AtMostOnce => None,
        }
    }

    /// At least once, a subscription drains at a graceful stop: what the link received
    /// (and what the credit already granted brings) is handled and settled.
    fn drains(&self) -> bool {
        !matches!(self.kind, Kind::AtMostOnce)
    }

    fn capabilities(&self) -> Capabilities {
        let at_least_once = |counts, dead_letters| Capabilities {
            settles: true,
            requeues: true,
            counts,
            delays: None,
            dead_letters,
            moves: false,
        };
        match self.kind {
            Kind::Quorum => at_least_once(true, false),
            Kind::Classic => at_least_once(false, false),
            Kind::SelfDl => at_least_once(true, true),
            Kind::AtMostOnce => Capabilities::NONE,
        }
    }
}

mod quorum {
    ruststream_conformance::conformance_tests!(super::Amqp::new(super::Kind::Quorum));
}

mod classic {
    ruststream_conformance::conformance_tests!(super::Amqp::new(super::Kind::Classic));
}

mod quorum_dead_lettering_itself {
    ruststream_conformance::conformance_tests!(super::Amqp::new(super::Kind::SelfDl));
}

mod at_most_once {
    // SPEC §2: on a pre-settled link `ack()` is `AckError::Unsupported` (logged); the
    // suite expects exactly that where the form does not settle.
    ruststream_conformance::conformance_tests!(super::Amqp::new(super::Kind::AtMostOnce));
}
