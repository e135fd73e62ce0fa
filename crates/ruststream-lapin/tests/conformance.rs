//! The shared conformance suite (`ruststream-conformance`) on RabbitMQ 4 and on
//! RabbitMQ 3, every harness with **default** subscription options (the adapter finds
//! out what the queue does): a quorum queue (counts requeues), a classic queue (does
//! not: retries are copies), and a quorum queue that dead-letters itself
//! (`x-delivery-limit` and a dead-letter exchange). Each check's queues are declared
//! for it and expire 10 minutes after their last use.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream_conformance::Harness;
use ruststream_core::{Address, Broker, Capabilities};
use support::{QueueSpec, Rabbit, declare, unique};

#[derive(Clone, Copy)]
enum Kind {
    Quorum,
    Classic,
    SelfDl,
}

/// One kind of queue on one broker, default options.
struct Lapin {
    rabbit: Rabbit,
    kind: Kind,
    name: String,
    handed: AtomicUsize,
    /// The self-dead-lettering queue's dead-letter queue, handed out second.
    dead: String,
}

impl Lapin {
    fn new(rabbit: Rabbit, kind: Kind) -> Self {
        let kind_name = match kind {
            Kind::Quorum => "quorum",
            Kind::Classic => "classic",
            Kind::SelfDl => "quorum dead-lettering itself",
        };
        let version = match rabbit {
            Rabbit::V3 => "3",
            Rabbit::V4 => "4",
        };
        Self {
            rabbit,
            kind,
            name: format!("lapin rabbitmq {version} {kind_name}"),
            handed: AtomicUsize::new(0),
            dead: unique("selfdl-dead"),
        }
    }
}

impl Harness for Lapin {
    fn name(&self) -> &str {
        &self.name
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        Arc::new(support::broker(self.rabbit).await)
    }

    fn fresh_address(&self) -> Address {
        let n = self.handed.fetch_add(1, Ordering::Relaxed);
        let (name, spec) = match (self.kind, n) {
            // x-delivery-limit 2: the suite's max_attempts(3); the dead letter is the
            // address handed out next.
            (Kind::SelfDl, 0) => (
                unique("selfdl"),
                QueueSpec::self_dead_lettering(2, &self.dead),
            ),
            (Kind::SelfDl, 1) => (self.dead.clone(), QueueSpec::classic()),
            (Kind::Classic, _) => (unique("classic"), QueueSpec::classic()),
            _ => (unique("quorum"), QueueSpec::quorum()),
        };
        declare(self.rabbit, &[(name.clone(), spec)]);
        Address::new(name)
    }

    /// A queue that does not exist: a mandatory publish to it comes back. Not for the
    /// queue that dead-letters itself (the runtime publishes no dead letter there).
    fn unpublishable_address(&self) -> Option<Address> {
        match self.kind {
            // A queue that is missing would be declared at start-up (the mount's dead
            // letter is), an exchange that is missing refused: a key no queue is bound
            // to on an exchange that exists is returned unroutable.
            Kind::Quorum | Kind::Classic => Some(Address::new(format!(
                "/exchanges/amq.direct/{}",
                unique("unbound")
            ))),
            Kind::SelfDl => None,
        }
    }

    /// The subscription cancels its consumer at a graceful stop and yields what it had.
    fn drains(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities {
        let (counts, dead_letters) = match self.kind {
            Kind::Quorum => (true, false),
            Kind::Classic => (false, false),
            Kind::SelfDl => (true, true),
        };
        // Classic and quorum queues delay through delay queues; a queue that
        // dead-letters itself keeps the broker's count (the runtime holds the original).
        let delays = !dead_letters;
        Capabilities {
            settles: true,
            requeues: true,
            counts,
            delays: delays.then_some(ruststream_lapin::MAX_DELAY),
            dead_letters,
            moves: false,
        }
    }
}

mod rabbitmq4_quorum {
    ruststream_conformance::conformance_tests!(super::Lapin::new(
        super::Rabbit::V4,
        super::Kind::Quorum
    ));
}

mod rabbitmq4_classic {
    ruststream_conformance::conformance_tests!(super::Lapin::new(
        super::Rabbit::V4,
        super::Kind::Classic
    ));
}

mod rabbitmq4_quorum_dead_lettering_itself {
    ruststream_conformance::conformance_tests!(super::Lapin::new(
        super::Rabbit::V4,
        super::Kind::SelfDl
    ));
}

mod rabbitmq3_quorum {
    ruststream_conformance::conformance_tests!(super::Lapin::new(
        super::Rabbit::V3,
        super::Kind::Quorum
    ));
}

mod rabbitmq3_classic {
    ruststream_conformance::conformance_tests!(super::Lapin::new(
        super::Rabbit::V3,
        super::Kind::Classic
    ));
}

mod rabbitmq3_quorum_dead_lettering_itself {
    ruststream_conformance::conformance_tests!(super::Lapin::new(
        super::Rabbit::V3,
        super::Kind::SelfDl
    ));
}
