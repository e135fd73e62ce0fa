//! The shared conformance suite (`ruststream-conformance`) on Kafka with the adapter's
//! **default** options: each check's topics made fresh (three partitions), its services
//! in the default group. Needs a Kafka-protocol broker (`scripts/kafka.sh`;
//! `RUSTSTREAM_KAFKA_URL`, default `kafka://127.0.0.1:9092`).

mod support;

use std::sync::Arc;

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};
use ruststream_kafka::KafkaBroker;

/// Topics of the check's own, in the default group.
struct Kafka {
    prefix: String,
}

impl Harness for Kafka {
    fn name(&self) -> &str {
        "kafka"
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
        Mount::new(address)
    }

    /// A graceful stop reads nothing more and handles what the subscription holds.
    fn drains(&self) -> bool {
        true
    }

    // No `unpublishable_address`: a mount makes its dead-letter topic when it starts and
    // does not start where it cannot (a name Kafka does not take), so a started mount's
    // dead letter is never refused at once, and `failed_copy_is_owed` does not apply.

    /// Settles; a delayed retry waits in a delay topic of the group's.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            delays: Some(Capabilities::ANY_DELAY),
            ..Capabilities::SETTLES
        }
    }
}

mod kafka {
    ruststream_conformance::conformance_tests!(super::Kafka {
        prefix: "conf".into()
    });
}
