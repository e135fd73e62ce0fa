//! The dead-letter tools on a topic: what waits is what the tools' own consumer group
//! has not passed, and removing passes it.
//!
//! The group is [`TOOLS_GROUP`]; it never joins (it commits as a client of no
//! generation, as Kafka lets a group with no members do). A dead letter's id is
//! `<partition>:<offset>`. Browsing reads each partition from the group's committed
//! offset (the start of the log where none is committed, or where retention has passed
//! it) to its end, without committing. Removing commits: the offset moves past the
//! records removed at its head, and records removed further on are noted in the
//! commit's metadata ([`removed`]). A `replay` publishes its copies before it removes
//! their dead letters, so a crash between the two repeats, never loses. Two tools
//! removing from one topic at the same moment can undo each other's removals (a dead
//! letter comes back), never remove one that was not asked for.

mod removed;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message as _, Offset, TopicPartitionList};
use ruststream_core::{Address, BoxFuture, Inspect, InspectError, Message, Waiting};

use self::removed::Removed;
use crate::broker::KafkaBroker;
use crate::cluster::Cluster;
use crate::headers::from_kafka;
use crate::positions::{self, TIMEOUT};

/// The consumer group whose committed offsets mark what the tools removed.
pub const TOOLS_GROUP: &str = "ruststream.dead-letters";

impl Inspect for KafkaBroker {
    fn browse(
        &self,
        address: &Address,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>> {
        let cluster = self.cluster().clone();
        let topic = address.as_str().to_owned();
        Box::pin(blocking(move || browse(&cluster, &topic, max)))
    }

    fn remove<'a>(
        &'a self,
        address: &'a Address,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<usize, InspectError>> {
        let cluster = self.cluster().clone();
        let topic = address.as_str().to_owned();
        let ids = ids.to_vec();
        Box::pin(blocking(move || remove(&cluster, &topic, &ids)))
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, InspectError> + Send + 'static,
) -> Result<T, InspectError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| InspectError::Broker(format!("kafka: {error}")))?
}

fn failed(error: KafkaError) -> InspectError {
    InspectError::Broker(format!("kafka: {error}"))
}

fn tools(cluster: &Cluster) -> Result<BaseConsumer, InspectError> {
    positions::client(cluster, TOOLS_GROUP).map_err(failed)
}

/// Each partition of `topic`: its removed offsets (from the first waiting one) and the
/// end of its log.
fn partitions(
    consumer: &BaseConsumer,
    cluster: &Cluster,
    topic: &str,
) -> Result<Vec<(i32, Removed, i64)>, InspectError> {
    let standing = positions::standing(consumer, cluster, topic)
        .map_err(failed)?
        .ok_or_else(|| InspectError::Unsupported {
            address: topic.to_owned(),
            reason: "the cluster has no such topic".into(),
        })?;
    Ok(standing
        .into_iter()
        .map(|s| {
            let from = s.committed.map_or(s.low, |at| at.max(s.low));
            (s.partition, Removed::read(from, &s.metadata), s.high)
        })
        .collect())
}

/// Up to `max` dead letters waiting on `topic`, oldest first across its partitions.
fn browse(cluster: &Cluster, topic: &str, max: usize) -> Result<Vec<Waiting>, InspectError> {
    let consumer = tools(cluster)?;
    let parts = partitions(&consumer, cluster, topic)?;
    let mut start = TopicPartitionList::new();
    let mut read: HashMap<i32, Vec<(i64, Waiting)>> = HashMap::new();
    for (partition, removed, high) in &parts {
        if removed.from < *high && max > 0 {
            start
                .add_partition_offset(topic, *partition, Offset::Offset(removed.from))
                .map_err(failed)?;
            read.insert(*partition, Vec::new());
        }
    }
    if read.is_empty() {
        return Ok(Vec::new());
    }
    consumer.assign(&start).map_err(failed)?;
    let mut open: Vec<i32> = read.keys().copied().collect();
    let mut heard = Instant::now();
    while !open.is_empty() {
        if heard.elapsed() > TIMEOUT {
            return Err(InspectError::Broker(format!(
                "kafka: reading {topic} stalled (partitions {open:?})"
            )));
        }
        let Some(polled) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        heard = Instant::now();
        let (partition, done) = match polled {
            Ok(record) => {
                let partition = record.partition();
                let Some((_, removed, high)) = parts.iter().find(|(p, ..)| *p == partition) else {
                    continue;
                };
                let seen = read.entry(partition).or_default();
                if !removed.contains(record.offset()) && seen.len() < max {
                    seen.push(waiting(&record));
                }
                (partition, seen.len() >= max || record.offset() + 1 >= *high)
            }
            Err(KafkaError::PartitionEOF(partition)) => (partition, true),
            Err(error) => return Err(failed(error)),
        };
        if done && let Some(at) = open.iter().position(|p| *p == partition) {
            open.swap_remove(at);
            let mut paused = TopicPartitionList::new();
            paused.add_partition(topic, partition);
            let _ = consumer.pause(&paused);
        }
    }
    Ok(oldest_first(read.into_values().collect(), max))
}

/// A record as a dead letter, with its timestamp (milliseconds) to order it by.
fn waiting(record: &BorrowedMessage<'_>) -> (i64, Waiting) {
    let id = format!("{}:{}", record.partition(), record.offset());
    let payload = record.payload().unwrap_or_default().to_vec();
    let (headers, defect) = match from_kafka(record.headers(), record.key()) {
        Ok(headers) => (headers, None),
        Err(reason) => (Default::default(), Some(reason.to_owned())),
    };
    let mut message = Message::new(payload);
    message.headers = headers;
    let at = record.timestamp().to_millis().unwrap_or_default();
    (
        at,
        Waiting {
            id,
            message,
            defect,
        },
    )
}

/// The partitions' records merged by timestamp (each partition kept in its order),
/// the first `max`.
fn oldest_first(mut partitions: Vec<Vec<(i64, Waiting)>>, max: usize) -> Vec<Waiting> {
    for records in &mut partitions {
        records.reverse();
    }
    let mut out = Vec::new();
    while out.len() < max {
        let next = partitions
            .iter_mut()
            .filter(|records| !records.is_empty())
            .min_by_key(|records| records.last().map(|(at, _)| *at));
        match next.and_then(Vec::pop) {
            Some((_, waiting)) => out.push(waiting),
            None => break,
        }
    }
    out
}

/// Removes the dead letters `ids` names from `topic`; returns how many were there.
fn remove(cluster: &Cluster, topic: &str, ids: &[String]) -> Result<usize, InspectError> {
    let consumer = tools(cluster)?;
    let mut parts = partitions(&consumer, cluster, topic)?;
    let mut taken = 0;
    let mut touched = Vec::new();
    let mut asked = Vec::new();
    for id in ids {
        let Some((partition, offset)) = parse_id(id) else {
            continue;
        };
        let Some((_, removed, high)) = parts.iter_mut().find(|(p, ..)| *p == partition) else {
            continue;
        };
        if offset < *high && removed.remove(offset) {
            taken += 1;
            touched.push(partition);
            asked.push((partition, offset));
        }
    }
    if taken == 0 {
        return Ok(0);
    }
    let commit = commit_list(topic, &parts, &touched)?;
    consumer
        .commit(&commit, CommitMode::Sync)
        .map_err(|error| match error {
            KafkaError::ConsumerCommit(code) => InspectError::Broker(format!(
                "kafka: the removal was not committed ({code}); with many dead letters \
                 removed out of order the commit's metadata can exceed the broker's \
                 offset.metadata.max.bytes: remove the oldest first"
            )),
            other => failed(other),
        })?;
    kept(&consumer, cluster, topic, &parts, &asked)?;
    Ok(taken)
}

/// The tools' offsets and metadata of the `touched` partitions, to commit.
fn commit_list(
    topic: &str,
    parts: &[(i32, Removed, i64)],
    touched: &[i32],
) -> Result<TopicPartitionList, InspectError> {
    let mut commit = TopicPartitionList::new();
    for (partition, removed, _) in parts.iter().filter(|(p, ..)| touched.contains(p)) {
        commit
            .add_partition_offset(topic, *partition, Offset::Offset(removed.from))
            .map_err(failed)?;
        if let Some(mut element) = commit.find_partition(topic, *partition) {
            element.set_metadata(removed.metadata());
        }
    }
    Ok(commit)
}

/// Checks that the removals noted in the commit's metadata were kept: a broker may
/// store the offset and drop the metadata (nisshi 0.8.1 does). Then the dead letters
/// `asked` that are behind a partition's first waiting one stay, and the error says so.
fn kept(
    consumer: &BaseConsumer,
    cluster: &Cluster,
    topic: &str,
    written: &[(i32, Removed, i64)],
    asked: &[(i32, i64)],
) -> Result<(), InspectError> {
    if written.iter().all(|(_, removed, _)| removed.is_settled()) {
        return Ok(());
    }
    let read = partitions(consumer, cluster, topic)?;
    let stay: Vec<String> = asked
        .iter()
        .filter(|(partition, offset)| {
            read.iter()
                .any(|(p, removed, _)| p == partition && !removed.contains(*offset))
        })
        .map(|(partition, offset)| format!("{partition}:{offset}"))
        .collect();
    if stay.is_empty() {
        return Ok(());
    }
    Err(InspectError::Broker(format!(
        "kafka: the broker keeps no metadata with committed offsets, so dead letters \
         behind the first waiting one of their partition cannot be removed: {} stay \
         (remove the ones before them first); the rest were removed",
        stay.join(", ")
    )))
}

/// `<partition>:<offset>`.
fn parse_id(id: &str) -> Option<(i32, i64)> {
    let (partition, offset) = id.split_once(':')?;
    Some((partition.parse().ok()?, offset.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use ruststream_core::{Message, Waiting};

    use super::{oldest_first, parse_id};

    fn at(ms: i64, id: &str) -> (i64, Waiting) {
        (ms, Waiting::new(id, Message::new("x")))
    }

    #[test]
    fn partitions_merge_by_time_and_keep_their_order() {
        let merged = oldest_first(
            vec![
                vec![at(1, "0:0"), at(5, "0:1"), at(3, "0:2")],
                vec![at(2, "1:0"), at(4, "1:1")],
            ],
            4,
        );
        let ids: Vec<_> = merged.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids, ["0:0", "1:0", "1:1", "0:1"]);
    }

    #[test]
    fn ids_are_partition_and_offset() {
        assert_eq!(parse_id("2:17"), Some((2, 17)));
        for bad in ["", "2", "2:", ":17", "a:1", "1:b", "1:2:3"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }
}
