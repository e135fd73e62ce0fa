//! Records a Kafka-protocol broker's fetch passed over, told apart from records the
//! adapter read and lost.
//!
//! nisshi 0.8.1 can hand a consumer a later batch of a partition before an earlier one
//! is readable (docs/kafka.md): the consumer goes on past records the broker stores and
//! acknowledges a moment later, its group commits past them, and nothing reads them.
//! The adapter says where its fetch passed over offsets (`ruststream_kafka::gap`, at
//! debug, which the consumers log to `consume.out`). An id counted lost whose latest
//! record lies in such a stretch was never handed to the adapter: the broker's loss,
//! reported apart. An id the adapter read and then lost, or committed past unread by
//! any other way, is not in one, and still fails the run.

use std::path::Path;

/// The adapter's target for the offsets its fetch passed over, which the consumers log.
pub(crate) const TARGET: &str = "ruststream_kafka::gap";

/// Offsets `from..to` of a partition that a consumer's fetch passed over.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) from: i64,
    pub(crate) to: i64,
}

/// A record of a lost id, where the run's topics hold it.
#[derive(Debug)]
pub(crate) struct Found {
    pub(crate) id: u64,
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    /// Milliseconds since the Unix epoch.
    pub(crate) timestamp: i64,
}

/// Every stretch the consumers' fetches passed over (`consume.out` in `dir`).
pub(crate) fn read(dir: &Path) -> Vec<Gap> {
    std::fs::read_to_string(dir.join("consume.out"))
        .unwrap_or_default()
        .lines()
        .filter_map(parse)
        .collect()
}

/// The gap one line of a consumer's log says, if it says one.
fn parse(line: &str) -> Option<Gap> {
    let (_, fields) = line.split_once(&format!(" {TARGET}: "))?;
    let field = |name: &str| {
        fields
            .split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.trim_matches('"'))
    };
    Some(Gap {
        topic: field("topic")?.to_owned(),
        partition: field("partition")?.parse().ok()?,
        from: field("from")?.parse().ok()?,
        to: field("to")?.parse().ok()?,
    })
}

/// The ids of `found` whose latest record (none of the id written later) lies in one
/// of `gaps`: never handed to a consumer.
pub(crate) fn passed_over(found: &[Found], gaps: &[Gap]) -> Vec<u64> {
    let mut ids: Vec<u64> = found.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.retain(|&id| {
        let records = || found.iter().filter(move |f| f.id == id);
        let latest = records().map(|f| f.timestamp).max();
        records().any(|f| {
            Some(f.timestamp) == latest
                && gaps.iter().any(|g| {
                    g.topic == f.topic
                        && g.partition == f.partition
                        && (g.from..g.to).contains(&f.offset)
                })
        })
    });
    ids
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::{Found, Gap, TARGET, parse, passed_over};

    /// A writer the fmt layer writes into, read back by the test.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("the buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_gap_is_read_from_the_line_the_consumers_log() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish();
        // The event as `ruststream-kafka`'s `gap.rs` says it: its fields and their types.
        tracing::subscriber::with_default(subscriber, || {
            let (topic, partition, from, to) = ("soak-1", 2_i32, 2023_i64, 2124_i64);
            tracing::debug!(target: TARGET, topic, partition, from, to,
                "kafka: the fetch passed over offsets");
            tracing::debug!(target: "other", topic, partition, from, to, "not a gap");
        });
        let text = String::from_utf8(buffer.0.lock().expect("the buffer").clone()).expect("text");
        let gaps: Vec<Gap> = text.lines().filter_map(parse).collect();
        assert_eq!(
            gaps,
            [Gap {
                topic: "soak-1".into(),
                partition: 2,
                from: 2023,
                to: 2124
            }],
            "{text}"
        );
    }

    fn found(id: u64, topic: &str, offset: i64, timestamp: i64) -> Found {
        Found {
            id,
            topic: topic.into(),
            partition: 0,
            offset,
            timestamp,
        }
    }

    #[test]
    fn only_an_id_whose_latest_record_was_passed_over_is_the_brokers() {
        let gaps = [Gap {
            topic: "t".into(),
            partition: 0,
            from: 10,
            to: 20,
        }];
        let found = [
            // 1: its retry copy, the latest, passed over.
            found(1, "t", 3, 100),
            found(1, "t", 15, 200),
            // 2: the original passed over, but a later copy exists: not explained.
            found(2, "t", 12, 100),
            found(2, "t", 30, 200),
            // 3: outside the stretch (20 is where the fetch went on).
            found(3, "t", 20, 100),
            // 4: another topic's offsets.
            found(4, "t.delay.50", 15, 100),
            // 5: its delayed copy and the copy moved back at the same millisecond.
            found(5, "t.delay.50", 40, 300),
            found(5, "t", 19, 300),
        ];
        assert_eq!(passed_over(&found, &gaps), [1, 5]);
        assert_eq!(passed_over(&found, &[]), [0_u64; 0]);
    }
}
