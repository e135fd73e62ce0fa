//! How far a group is behind on each partition of a topic: the numbers to export as
//! gauges (Kafka's consumer lag).

use rdkafka::error::KafkaError;
use ruststream_core::Options;

use crate::broker::KafkaBroker;
use crate::positions;
use crate::settings;

/// One partition of a topic as a group stands on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lag {
    /// The partition.
    pub partition: i32,
    /// The group's committed offset: where its next consumer starts. `None` where it has
    /// committed nothing (a new group starts at the earliest record).
    pub committed: Option<i64>,
    /// The offset the partition's next record will get (its high watermark).
    pub end: i64,
    /// Records not yet done by the group: from its committed offset (or the first record
    /// the log holds) to the end.
    pub behind: i64,
}

/// Why the lag could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LagError {
    /// The cluster has no such topic.
    #[error("no topic {0}")]
    NoTopic(String),
    /// The group name is not one a mount takes.
    #[error("bad group: {0}")]
    Group(String),
    /// librdkafka failed or the cluster did not answer.
    #[error("kafka: {0}")]
    Kafka(#[from] KafkaError),
    /// The blocking read was cut off (the runtime is shutting down).
    #[error("reading the lag was cut off")]
    Cut,
}

impl KafkaBroker {
    /// How far `group` is behind on each partition of `topic`; `group` `None` is the
    /// group a mount on `topic` with default options joins (the URL's `?group=`, else
    /// `ruststream.<topic>`). Read without joining the group, so it can be asked from
    /// any process, as often as a metrics scrape.
    ///
    /// ```no_run
    /// # async fn demo(broker: ruststream_kafka::KafkaBroker) -> Result<(), ruststream_kafka::LagError> {
    /// for partition in broker.lag("orders", None).await? {
    ///     println!("orders/{}: {} behind", partition.partition, partition.behind);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lag(&self, topic: &str, group: Option<&str>) -> Result<Vec<Lag>, LagError> {
        let group = match group {
            Some(group) => group.to_owned(),
            None => settings::group(topic, self.settings(), &Options::default())
                .map_err(|error| LagError::Group(error.to_string()))?,
        };
        let (cluster, topic) = (self.cluster().clone(), topic.to_owned());
        tokio::task::spawn_blocking(move || {
            let consumer = positions::client(&cluster, &group)?;
            let standing = positions::standing(&consumer, &cluster, &topic)?
                .ok_or_else(|| LagError::NoTopic(topic.clone()))?;
            Ok(standing
                .into_iter()
                .map(|s| Lag {
                    partition: s.partition,
                    committed: s.committed,
                    end: s.high,
                    behind: s.high - s.committed.map_or(s.low, |at| at.max(s.low)),
                })
                .collect())
        })
        .await
        .map_err(|_| LagError::Cut)?
    }
}
