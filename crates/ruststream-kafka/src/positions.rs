//! Where a group stands on each partition of a topic: its committed offset (and the
//! metadata committed with it) beside the partition's log, read without joining the
//! group. The dead-letter tools and the lag read it.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::TopicPartitionListElem;
use rdkafka::{Offset, TopicPartitionList};

use crate::admin;
use crate::cluster::Cluster;

/// How long a request to the cluster may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// One partition: the group's committed offset and the log's first and next offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Standing {
    pub(crate) partition: i32,
    /// `None` where the group has committed nothing on it.
    pub(crate) committed: Option<i64>,
    /// The metadata committed with it (empty where none, or not UTF-8).
    pub(crate) metadata: String,
    /// The first offset the log still holds.
    pub(crate) low: i64,
    /// The offset the next record will get.
    pub(crate) high: i64,
}

/// A client of `group` that never joins it (no subscription; it may commit as a
/// client of no generation, which Kafka allows a group with no members).
pub(crate) fn client(cluster: &Cluster, group: &str) -> Result<BaseConsumer, KafkaError> {
    cluster
        .config()
        .set("group.id", group)
        .set("group.protocol", "classic")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        .create()
}

/// Every partition of `topic` as `consumer`'s group stands on it; `Ok(None)` if the
/// cluster has no such topic (blocking: requests to the cluster).
pub(crate) fn standing(
    consumer: &BaseConsumer,
    cluster: &Cluster,
    topic: &str,
) -> Result<Option<Vec<Standing>>, KafkaError> {
    let Some(count) = admin::partitions(cluster, topic)? else {
        return Ok(None);
    };
    let mut asked = TopicPartitionList::new();
    for partition in 0..count {
        asked.add_partition(topic, partition);
    }
    let committed = consumer.committed_offsets(asked, TIMEOUT)?;
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or_default());
    for partition in 0..count {
        let (low, high) = consumer.fetch_watermarks(topic, partition, TIMEOUT)?;
        let element = committed.find_partition(topic, partition);
        let offset = element.as_ref().map(TopicPartitionListElem::offset);
        out.push(Standing {
            partition,
            committed: match offset {
                Some(Offset::Offset(at)) => Some(at),
                _ => None,
            },
            metadata: element.as_ref().map(metadata).unwrap_or_default(),
            low,
            high,
        });
    }
    Ok(Some(out))
}

/// A commit's metadata; rdkafka panics on one that is not UTF-8 (not ours, then).
pub(crate) fn metadata(element: &TopicPartitionListElem<'_>) -> String {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        element.metadata().to_owned()
    }))
    .unwrap_or_default()
}
