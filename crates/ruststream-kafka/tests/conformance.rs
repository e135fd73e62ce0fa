//! The shared conformance suite (`ruststream-conformance`) on Kafka with the adapter's
//! **default** options (`kafka`), and again with key order (`kafka_key_order`: the
//! `KeyOrder` option, a form that retries in place and counts): each check's topics made
//! fresh (three partitions), its services in the default group. Needs a Kafka-protocol
//! broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`, default
//! `kafka://127.0.0.1:9092`).

mod support;

use std::sync::Arc;

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use ruststream_kafka::{KafkaBroker, KeyOrder};

/// Topics of the check's own, in the default group.
struct Kafka {
    prefix: String,
    key_order: bool,
}

impl Harness for Kafka {
    fn name(&self) -> &str {
        if self.key_order {
            "kafka key order"
        } else {
            "kafka"
        }
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        let url = support::url();
        support::bootstrap();
        match KafkaBroker::connect(&url).await {
            Ok(broker) => Arc::new(broker),
            Err(error) => panic!(
                "Kafka is not reachable at {url} ({error}). {}",
                support::HOW
            ),
        }
    }

    fn fresh_address(&self) -> Address {
        let topic = support::unique(&self.prefix);
        support::create_topic_blocking(&topic, 3);
        Address::new(topic)
    }

    fn mount(&self, address: Address) -> Mount {
        let mount = Mount::new(address);
        if self.key_order {
            mount.option(KeyOrder)
        } else {
            mount
        }
    }

    /// A graceful stop reads nothing more and handles what the subscription holds.
    fn drains(&self) -> bool {
        true
    }

    // No `unpublishable_address`: a mount makes its dead-letter topic when it starts and
    // does not start where it cannot (a name Kafka does not take), so a started mount's
    // dead letter is never refused at once, and `failed_copy_is_owed` does not apply.

    /// Under key order, the record key's header.
    fn key_header(&self) -> Option<&'static str> {
        self.key_order.then_some(ruststream_kafka::KEY)
    }

    /// Settles; a delayed retry waits in a delay topic of the group's. Under key order a
    /// retry is the record itself, after any delay, and attempts are counted.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            requeues: self.key_order,
            counts: self.key_order,
            delays: Some(Capabilities::ANY_DELAY),
            ..Capabilities::SETTLES
        }
    }
}

mod kafka {
    ruststream_conformance::conformance_tests!(super::Kafka {
        prefix: "conf".into(),
        key_order: false,
    });
}

mod kafka_key_order {
    ruststream_conformance::conformance_tests!(
        super::Kafka {
            prefix: "conf-ko".into(),
            key_order: true,
        },
        ignore(
            stop_during_delay = "nisshi 0.8.1 returns no commit metadata, where key order \
                keeps a waiting retry's attempt and due time for the next consumer: on \
                nisshi the retry comes back at once as attempt 1 (docs/kafka.md, How \
                nisshi differs from Kafka)"
        ),
    );
}
