//! Kafka: the form's topic, made as an operator would before the service starts; what is
//! left at the end of a run, asked with plain rdkafka clients; and the clean-up of a
//! run's topics and groups.
//!
//! The groups are the adapter's defaults (`crates/ruststream-kafka/src/settings.rs`,
//! `src/delay/`): `ruststream.<topic>` for a mount that names none, and
//! `ruststream.<topic>.delay` for the mover of its delay topics
//! `ruststream.<topic>.delay.<ms>`, where `retry_after` parks its copies.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::BoxError;
use crate::consume::dead_letter_of;
use crate::gaps::Found;
use crate::net::host_port;

/// The partitions of the form's topic: several, so that a group shares it among its
/// consumers and a rebalance moves partitions between them.
pub(crate) const PARTITIONS: i32 = 3;

/// How long one request to the cluster may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The adapter's group of a mount on `topic` that names none.
fn group_of(topic: &str) -> String {
    format!("ruststream.{topic}")
}

/// The group of the mover of `group`'s delay topics.
fn mover_of(group: &str) -> String {
    format!("{group}.delay")
}

/// Whether `topic` is a delay topic of `group` (`<group>.delay.<ms>`).
fn is_delay_topic(group: &str, topic: &str) -> bool {
    topic
        .strip_prefix(group)
        .and_then(|rest| rest.strip_prefix(".delay."))
        .is_some_and(|ms| !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit()))
}

/// A client of the cluster at `url` whose metadata requests make no topic.
fn config(url: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", host_port(url))
        .set("allow.auto.create.topics", "false");
    config
}

fn admin(url: &str) -> Result<AdminClient<DefaultClientContext>, BoxError> {
    Ok(config(url).create()?)
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(TIMEOUT))
}

/// Makes `topic` with [`PARTITIONS`] partitions and its dead letter with one (what the
/// adapter would make it with; the dead-letter consumer, started first, reads only a
/// topic that exists), both with the cluster's replication.
pub(crate) async fn declare(url: &str, topic: &str) -> Result<(), BoxError> {
    let dead = dead_letter_of(topic);
    let new = [
        NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(-1)),
        NewTopic::new(&dead, 1, TopicReplication::Fixed(-1)),
    ];
    for made in admin(url)?.create_topics(&new, &options()).await? {
        made.map_err(|(name, error)| format!("cannot make topic {name}: {error}"))?;
    }
    Ok(())
}

/// The records of `topics` past `group`'s committed offsets (from the low watermark
/// where it committed none: a new group starts at the earliest offset). Blocking.
fn lag(url: &str, group: &str, topics: &[(String, Vec<i32>)]) -> Result<u64, BoxError> {
    if topics.is_empty() {
        return Ok(0);
    }
    // A consumer that never subscribes: it asks for the group's offsets, it does not join.
    let consumer: BaseConsumer = config(url)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()?;
    let mut asked = TopicPartitionList::new();
    for (topic, partitions) in topics {
        for &partition in partitions {
            asked.add_partition(topic, partition);
        }
    }
    let committed = consumer.committed_offsets(asked, TIMEOUT)?;
    let mut total = 0;
    for entry in committed.elements() {
        let (low, high) = consumer.fetch_watermarks(entry.topic(), entry.partition(), TIMEOUT)?;
        let from = match entry.offset() {
            Offset::Offset(offset) => offset,
            _ => low,
        };
        total += u64::try_from(high - from).unwrap_or(0);
    }
    Ok(total)
}

/// The run's topics as the cluster has them, each with its partitions: the address, its
/// dead letter, and the delay topics of the address's group. Blocking.
fn topics(url: &str, address: &str) -> Result<Vec<(String, Vec<i32>)>, BoxError> {
    let consumer: BaseConsumer = config(url).create()?;
    let metadata = consumer.fetch_metadata(None, TIMEOUT)?;
    let (dead, group) = (dead_letter_of(address), group_of(address));
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.name() == address || t.name() == dead || is_delay_topic(&group, t.name()))
        .map(|t| {
            let partitions = t.partitions().iter().map(|p| p.id()).collect();
            (t.name().to_owned(), partitions)
        })
        .collect())
}

/// What is left of the run: the lag of the address's group and of its dead letter's, and
/// the copies in the delay topics not yet moved back (the mover group's lag). Blocking.
fn pending_now(url: &str, address: &str) -> Result<u64, BoxError> {
    let all = topics(url, address)?;
    let (dead, group) = (dead_letter_of(address), group_of(address));
    let of = |pick: &dyn Fn(&str) -> bool| -> Vec<(String, Vec<i32>)> {
        all.iter().filter(|(t, _)| pick(t)).cloned().collect()
    };
    Ok(lag(url, &group, &of(&|t| t == address))?
        + lag(url, &group_of(&dead), &of(&|t| t == dead))?
        + lag(url, &mover_of(&group), &of(&|t| is_delay_topic(&group, t)))?)
}

/// [`pending_now`], off the runtime's threads.
pub(crate) async fn pending(url: &str, address: &str) -> Result<u64, BoxError> {
    let (url, address) = (url.to_owned(), address.to_owned());
    tokio::task::spawn_blocking(move || pending_now(&url, &address).map_err(|e| e.to_string()))
        .await?
        .map_err(Into::into)
}

/// The state of the run's consumer groups (the address's, its dead letter's, its delay
/// mover's) as the cluster reports them: each group's state and members, or why it
/// could not be read. A group that does not settle (a rebalance waiting on a member that
/// does not rejoin) holds its partitions' records back.
pub(crate) async fn groups(url: &str, address: &str) -> Vec<String> {
    let (url, address) = (url.to_owned(), address.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = match config(&url).create() {
            Ok(consumer) => consumer,
            Err(error) => return vec![format!("kafka groups: {error}")],
        };
        let group = group_of(&address);
        [
            group.clone(),
            group_of(&dead_letter_of(&address)),
            mover_of(&group),
        ]
        .iter()
        .map(
            |name| match consumer.fetch_group_list(Some(name), TIMEOUT) {
                Ok(list) => list
                    .groups()
                    .iter()
                    .map(|g| {
                        let members: Vec<String> = g
                            .members()
                            .iter()
                            .map(|m| {
                                format!("{} ({} at {})", m.id(), m.client_id(), m.client_host())
                            })
                            .collect();
                        format!(
                            "kafka group {}: state {}, members {members:?}",
                            g.name(),
                            g.state()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                Err(error) => format!("kafka group {name}: {error}"),
            },
        )
        .collect()
    })
    .await
    .unwrap_or_default()
}

/// Where the records of `ids` (ids counted lost) sit: every record of the run's topics
/// whose payload carries one of them, with its topic, partition, offset and headers, and
/// beside it the offset the group that reads that topic committed there. A record past
/// the commit was never taken; one below it was committed past; none at all, the broker
/// does not hold what it acknowledged. Blocking.
fn trace_now(url: &str, address: &str, ids: &[u64]) -> Result<(Vec<String>, Vec<Found>), BoxError> {
    use rdkafka::Message as _;
    use rdkafka::message::Headers as _;

    let all = topics(url, address)?;
    let (dead, group) = (dead_letter_of(address), group_of(address));
    let reader_of = |topic: &str| {
        if topic == address {
            group.clone()
        } else if topic == dead {
            group_of(&dead)
        } else {
            mover_of(&group)
        }
    };
    let mut found = Vec::new();
    let mut records = Vec::new();
    let mut seen = vec![false; ids.len()];
    for (topic, partitions) in &all {
        let committed: BaseConsumer = config(url)
            .set("group.id", reader_of(topic))
            .set("enable.auto.commit", "false")
            .create()?;
        let reader: BaseConsumer = config(url)
            .set("group.id", format!("{group}.trace"))
            .set("enable.auto.commit", "false")
            .create()?;
        for &partition in partitions {
            let mut one = TopicPartitionList::new();
            one.add_partition(topic, partition);
            let commit = committed
                .committed_offsets(one, TIMEOUT)?
                .elements()
                .first()
                .map(|e| format!("{:?}", e.offset()))
                .unwrap_or_default();
            let (low, high) = reader.fetch_watermarks(topic, partition, TIMEOUT)?;
            let mut from = TopicPartitionList::new();
            from.add_partition_offset(topic, partition, Offset::Offset(low))?;
            reader.assign(&from)?;
            let mut next = low;
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while next < high && std::time::Instant::now() < deadline {
                let Some(record) = reader.poll(Duration::from_millis(500)) else {
                    continue;
                };
                let record = record?;
                next = record.offset() + 1;
                let Some(id) = record
                    .payload()
                    .and_then(|p| serde_json::from_slice::<crate::consume::Numbered>(p).ok())
                    .map(|n| n.id)
                else {
                    continue;
                };
                let Some(at) = ids.iter().position(|&i| i == id) else {
                    continue;
                };
                seen[at] = true;
                records.push(Found {
                    id,
                    topic: topic.clone(),
                    partition,
                    offset: record.offset(),
                    timestamp: record.timestamp().to_millis().unwrap_or(-1),
                });
                let headers: Vec<String> = record
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| {
                                let value = h.value.map(String::from_utf8_lossy);
                                format!("{}={}", h.key, value.unwrap_or_default())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                found.push(format!(
                    "kafka trace: id {id} at {topic}/{partition}@{} (timestamp {:?}, \
                     headers {headers:?}); {} committed {commit} there, the partition \
                     holds {low}..{high}",
                    record.offset(),
                    record.timestamp(),
                    reader_of(topic),
                ));
            }
            if next < high {
                found.push(format!(
                    "kafka trace: {topic}/{partition} read only to {next} of {high}"
                ));
            }
        }
    }
    for (id, seen) in ids.iter().zip(seen) {
        if !seen {
            found.push(format!(
                "kafka trace: id {id} is in none of the run's topics"
            ));
        }
    }
    Ok((found, records))
}

/// [`trace_now`], off the runtime's threads: lines saying where the records of `ids`
/// are, and those records (an error becomes the one line, with no record).
pub(crate) async fn trace(url: &str, address: &str, ids: &[u64]) -> (Vec<String>, Vec<Found>) {
    let (url, address, ids) = (url.to_owned(), address.to_owned(), ids.to_vec());
    tokio::task::spawn_blocking(move || {
        trace_now(&url, &address, &ids)
            .unwrap_or_else(|e| (vec![format!("kafka trace: {e}")], Vec::new()))
    })
    .await
    .unwrap_or_default()
}

/// Deletes the run's topics (the address, its dead letter, the delay topics) and groups.
pub(crate) async fn clean(url: &str, address: &str) -> Result<(), BoxError> {
    let (owned_url, owned_address) = (url.to_owned(), address.to_owned());
    let names = tokio::task::spawn_blocking(move || {
        topics(&owned_url, &owned_address).map_err(|e| e.to_string())
    })
    .await??;
    let admin = admin(url)?;
    let names: Vec<&str> = names.iter().map(|(name, _)| name.as_str()).collect();
    if !names.is_empty() {
        for deleted in admin.delete_topics(&names, &options()).await? {
            deleted.map_err(|(name, error)| format!("cannot delete topic {name}: {error}"))?;
        }
    }
    let group = group_of(address);
    let groups = [
        group.clone(),
        group_of(&dead_letter_of(address)),
        mover_of(&group),
    ];
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    // A group the cluster does not know (the dead letter's mover never ran) is no error.
    let _ = admin.delete_groups(&groups, &options()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs the machine's Kafka-protocol broker: `scripts/kafka.sh start` (nisshi on
    /// 127.0.0.1:9092) or `RUSTSTREAM_KAFKA_URL`.
    #[tokio::test]
    async fn a_trace_finds_each_lost_id_and_the_commit_beside_it() {
        use rdkafka::producer::{FutureProducer, FutureRecord};

        let url = std::env::var("RUSTSTREAM_KAFKA_URL")
            .unwrap_or_else(|_| "kafka://127.0.0.1:9092".into());
        let topic = format!("soak-trace-{}", std::process::id());
        declare(&url, &topic).await.unwrap_or_else(|e| {
            panic!(
                "{e}: start the broker with `scripts/kafka.sh start` or set RUSTSTREAM_KAFKA_URL"
            )
        });
        let producer: FutureProducer = config(&url).create().expect("producer");
        for id in [7_u64, 8, 9] {
            let payload = serde_json::to_vec(&crate::consume::Numbered { id }).expect("json");
            let record = FutureRecord::<(), _>::to(&topic)
                .partition(1)
                .payload(&payload);
            producer
                .send(record, Duration::from_secs(10))
                .await
                .expect("stored");
        }
        // The group took 7 and 8 (committed 2); 9 waits past the commit.
        let committer: BaseConsumer = config(&url)
            .set("group.id", group_of(&topic))
            .create()
            .expect("consumer");
        let mut done = TopicPartitionList::new();
        done.add_partition_offset(&topic, 1, Offset::Offset(2))
            .expect("offset");
        committer
            .commit(&done, rdkafka::consumer::CommitMode::Sync)
            .expect("committed");
        let (lines, found) = trace(&url, &topic, &[8, 9, 10]).await;
        clean(&url, &topic).await.expect("cleaned");
        let of = |id: u64| {
            lines
                .iter()
                .find(|l| l.contains(&format!("id {id} ")))
                .unwrap_or_else(|| panic!("no line for {id}: {lines:?}"))
        };
        assert!(of(8).contains(&format!("at {topic}/1@1 ")), "{lines:?}");
        assert!(of(8).contains("committed Offset(2)"), "{lines:?}");
        assert!(of(9).contains(&format!("at {topic}/1@2 ")), "{lines:?}");
        assert!(of(10).contains("in none of the run's topics"), "{lines:?}");
        assert_eq!(lines.len(), 3, "{lines:?}");
        let at: Vec<(u64, &str, i32, i64)> = found
            .iter()
            .map(|f| (f.id, f.topic.as_str(), f.partition, f.offset))
            .collect();
        assert_eq!(at, [(8, topic.as_str(), 1, 1), (9, topic.as_str(), 1, 2)]);
        assert!(found.iter().all(|f| f.timestamp > 0), "{found:?}");
    }

    #[test]
    fn names_follow_the_adapter() {
        assert_eq!(
            group_of("soak-kafka-kill-1-2"),
            "ruststream.soak-kafka-kill-1-2"
        );
        assert_eq!(mover_of("ruststream.t"), "ruststream.t.delay");
        assert!(is_delay_topic("ruststream.t", "ruststream.t.delay.50"));
        assert!(!is_delay_topic("ruststream.t", "ruststream.t.delay."));
        assert!(!is_delay_topic("ruststream.t", "ruststream.t-dead"));
        assert!(!is_delay_topic("ruststream.t", "ruststream.t.delay.5x"));
    }
}
