//! The shared conformance suite (`ruststream-conformance`) on RabbitMQ 4: a quorum queue
//! (counts `modified`) and a classic queue (`counts(false)`: retries are copies). Needs
//! RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream_amqp::SubscribeOptions;
use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use support::{Queues, broker, name};

/// Queues of each kind declared for the binary; a check takes at most three.
const POOL: usize = 40;

fn topology(q: &mut Queues) {
    for i in 0..POOL {
        q.quorum(&format!("quorum-{i}"));
        q.classic(&format!("classic-{i}"));
    }
}

static TAKEN: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// RabbitMQ 4 with one kind of queue; `counts` says whether it counts `modified`.
struct Amqp {
    kind: &'static str,
    counts: bool,
}

const QUORUM: Amqp = Amqp {
    kind: "quorum",
    counts: true,
};

const CLASSIC: Amqp = Amqp {
    kind: "classic",
    counts: false,
};

impl Harness for Amqp {
    fn name(&self) -> &str {
        self.kind
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        Arc::new(broker().await)
    }

    fn fresh_address(&self) -> Address {
        let i = TAKEN[usize::from(!self.counts)].fetch_add(1, Ordering::Relaxed);
        assert!(i < POOL, "all {POOL} {} queues are taken", self.kind);
        Address::new(name(topology, &format!("{}-{i}", self.kind)))
    }

    fn mount(&self, address: Address) -> Mount {
        Mount::new(address).option(SubscribeOptions::new().counts(self.counts))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            settles: true,
            requeues: true,
            counts: self.counts,
            delays: false,
            max_delay: None,
            dead_letters: false,
        }
    }
}

mod quorum {
    ruststream_conformance::conformance_tests!(super::QUORUM);
}

mod classic {
    ruststream_conformance::conformance_tests!(super::CLASSIC);
}
