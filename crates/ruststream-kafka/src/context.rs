//! The consumer's rebalance callbacks: the group's partitions follow its assignments,
//! and a partition taken away gets its last commit before it goes.

use std::sync::Arc;

use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;

use crate::group::Group;
use crate::said::Said;

/// The consumer type of a subscription.
pub(crate) type KafkaConsumer = rdkafka::consumer::StreamConsumer<Context>;

/// The context of a subscription's consumer.
pub(crate) struct Context {
    pub(crate) group: Arc<Group>,
    pub(crate) said: Said,
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, line: &str) {
        self.said.log(level, facility, line);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.said.error(&error, reason);
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let partitions = list
                .elements()
                .iter()
                .map(|e| e.partition())
                .collect::<Vec<_>>();
            let positions = self.group.revoke(partitions);
            if !positions.is_empty() {
                let list = offsets(&self.group.topic, &positions);
                if let Err(error) = consumer.commit(&list, CommitMode::Sync) {
                    tracing::warn!(topic = %self.group.topic, %error, "commit at a rebalance failed");
                }
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                self.group
                    .assign(list.elements().iter().map(|e| e.partition()));
                self.group.attached.attach();
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => {
                tracing::warn!(topic = %self.group.topic, %error, "rebalance failed");
                self.group.attached.detach();
            }
        }
    }
}

/// The offsets `positions` of `topic` as a partition list.
pub(crate) fn offsets(topic: &str, positions: &[(i32, i64)]) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for &(partition, offset) in positions {
        // Not reached with a valid offset: setting one on a new entry cannot fail.
        let _ = list.add_partition_offset(topic, partition, rdkafka::Offset::Offset(offset));
    }
    list
}
