//! Topics the adapter makes and removes itself: a request client's reply topic, a
//! mount's dead-letter and delay topics.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;

use crate::cluster::Cluster;

/// How long the cluster may take to make or remove a topic.
const TIMEOUT: Duration = Duration::from_secs(10);

/// An admin client of `cluster`. Its metadata requests never make a
/// topic (librdkafka's producers would, where the broker auto-creates topics).
pub(crate) fn admin(cluster: &Cluster) -> Result<AdminClient<DefaultClientContext>, KafkaError> {
    cluster
        .config()
        .set("allow.auto.create.topics", "false")
        .create()
}

/// Whether the cluster has `topic` with at least one partition (blocking: a metadata
/// request).
pub(crate) fn exists(cluster: &Cluster, topic: &str) -> Result<bool, KafkaError> {
    Ok(partitions(cluster, topic)?.is_some())
}

/// How many partitions `topic` has; `None` if the cluster has no such topic (blocking:
/// a metadata request).
pub(crate) fn partitions(cluster: &Cluster, topic: &str) -> Result<Option<i32>, KafkaError> {
    let metadata = admin(cluster)?
        .inner()
        .fetch_metadata(Some(topic), TIMEOUT)?;
    Ok(metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
        .map(|t| i32::try_from(t.partitions().len()).unwrap_or(i32::MAX)))
}

/// The names of every topic of the cluster (blocking: a metadata request).
pub(crate) fn topics(cluster: &Cluster) -> Result<Vec<String>, KafkaError> {
    let metadata = admin(cluster)?.inner().fetch_metadata(None, TIMEOUT)?;
    Ok(metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .collect())
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(TIMEOUT))
}

/// Makes `topic` with one partition, the cluster's default replication.
pub(crate) async fn create(cluster: &Cluster, topic: &str) -> Result<(), String> {
    create_with(
        cluster,
        NewTopic::new(topic, 1, TopicReplication::Fixed(-1)),
    )
    .await
}

/// Makes `topic` with `partitions` partitions and the cluster's default replication; one
/// that exists already (another process made it first) is no error.
pub(crate) async fn create_partitioned(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
) -> Result<(), String> {
    match create_with(
        cluster,
        NewTopic::new(topic, partitions, TopicReplication::Fixed(-1)),
    )
    .await
    {
        Err(why) if why.contains("TopicAlreadyExists") => Ok(()),
        other => other,
    }
}

/// Kafka's `max.message.bytes` of a topic that does not set it (and of a broker whose
/// `message.max.bytes` is its default): the largest record batch a topic takes.
pub(crate) const KAFKA_MAX_MESSAGE: usize = 1_048_588;

/// What the dead-letter topic the adapter makes takes beyond its source topic's
/// `max.message.bytes`: room for the headers the runtime adds to a dead letter.
const DEAD_LETTER_ROOM: usize = 64 * 1024;

/// Makes the dead-letter topic `topic` of `source`: one partition, the cluster's
/// default replication, kept until removed (`retention.ms=-1`: a cluster's default
/// retention, 7 days, would delete dead letters nobody has looked at yet), taking
/// whatever `source` takes (its `max.message.bytes`, as the cluster describes it,
/// plus room for the runtime's headers).
pub(crate) async fn create_dead_letter(
    cluster: &Cluster,
    topic: &str,
    source: &str,
) -> Result<(), String> {
    let takes = max_message(cluster, source)
        .await
        .unwrap_or(KAFKA_MAX_MESSAGE)
        .saturating_add(DEAD_LETTER_ROOM)
        .to_string();
    create_with(
        cluster,
        NewTopic::new(topic, 1, TopicReplication::Fixed(-1))
            .set("retention.ms", "-1")
            .set("max.message.bytes", &takes),
    )
    .await
}

/// `topic`'s `max.message.bytes` as the cluster describes it (the broker's default
/// where the topic sets none); `None` where it cannot be read.
pub(crate) async fn max_message(cluster: &Cluster, topic: &str) -> Option<usize> {
    let admin = admin(cluster).ok()?;
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &options())
        .await
        .ok()?;
    described
        .into_iter()
        .flatten()
        .flat_map(|resource| resource.entries)
        .find(|entry| entry.name == "max.message.bytes")
        .and_then(|entry| entry.value)
        .and_then(|value| value.parse().ok())
}

/// Makes the topic `new` describes.
pub(crate) async fn create_with(cluster: &Cluster, new: NewTopic<'_>) -> Result<(), String> {
    let admin = admin(cluster).map_err(|error| error.to_string())?;
    let made = admin
        .create_topics(&[new], &options())
        .await
        .map_err(|error| error.to_string())?;
    made.into_iter().try_for_each(|result| {
        result
            .map(drop)
            .map_err(|(name, error)| format!("{name}: {error}"))
    })
}

/// Removes `topics`, leaving the ones that will not go (logged).
pub(crate) async fn delete(cluster: &Cluster, topics: &[String]) {
    if topics.is_empty() {
        return;
    }
    let Ok(admin) = admin(cluster) else { return };
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    match admin.delete_topics(&names, &options()).await {
        Ok(results) => {
            for (name, error) in results.into_iter().filter_map(Result::err) {
                tracing::warn!(topic = %name, %error, "cannot remove a reply topic");
            }
        }
        Err(error) => tracing::warn!(%error, "cannot remove the reply topics"),
    }
}

/// A topic name for `address`: Kafka takes ASCII letters, digits, `.`, `_` and `-`, up
/// to 249 of them; anything else becomes `_`.
pub(crate) fn topic_name(address: &str) -> String {
    address
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(249)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_topic_name_keeps_what_kafka_takes() {
        assert_eq!(super::topic_name("orders.reply/1:ü"), "orders.reply_1__");
    }
}
