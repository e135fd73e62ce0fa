//! How far a subscription's consumer reads ahead of its mount.
//!
//! librdkafka fetches in the background until its queue for the consumer holds
//! `queued.min.messages` records (100,000 by default) or `queued.max.messages.kbytes`
//! (64 MB), and once past either it asks for nothing more for `fetch.queue.backoff.ms`
//! (1 s by default), however soon the application empties the queue. A mount takes
//! far fewer at a time (its in-flight count), so with those defaults a consumer read
//! 100,000 records ahead, the mount handled them in a quarter of a second, and then
//! waited the rest of the second with nothing to handle: on nisshi, 200,000 records
//! went at 150,000 a second, in bursts of 450,000 between stops of 0.8 s
//! (BENCHMARKS.md). So the consumer reads ahead a few times what its mount holds, and
//! looks again 10 ms after it stopped.

use rdkafka::ClientConfig;

/// How long librdkafka waits before it looks again whether to fetch, once its queue
/// was past the threshold (`fetch.queue.backoff.ms`).
const BACKOFF_MS: u32 = 10;

/// How many times its in-flight count a mount's consumer keeps read ahead.
const TIMES: usize = 4;

/// The fewest and the most records read ahead (librdkafka's default is the most).
const AHEAD: (usize, usize) = (1_000, 100_000);

/// Sets how far a consumer whose mount holds `in_flight` deliveries at once reads
/// ahead, and how soon it fetches again once its queue has room.
pub(crate) fn read_ahead(config: &mut ClientConfig, in_flight: usize) {
    let ahead = in_flight.saturating_mul(TIMES).clamp(AHEAD.0, AHEAD.1);
    config
        .set("queued.min.messages", ahead.to_string())
        .set("fetch.queue.backoff.ms", BACKOFF_MS.to_string());
}

#[cfg(test)]
mod tests {
    use rdkafka::ClientConfig;

    use super::read_ahead;

    fn ahead(in_flight: usize) -> (Option<String>, Option<String>) {
        let mut config = ClientConfig::new();
        read_ahead(&mut config, in_flight);
        (
            config.get("queued.min.messages").map(str::to_owned),
            config.get("fetch.queue.backoff.ms").map(str::to_owned),
        )
    }

    #[test]
    fn a_consumer_reads_a_few_times_its_mount_ahead_and_looks_again_soon() {
        // The default sequential mount on Kafka: one delivery and 1,024 trailing.
        assert_eq!(ahead(1_025), (Some("4100".into()), Some("10".into())));
        // A mount of lanes holds few; a huge one is held to librdkafka's default.
        assert_eq!(ahead(17).0.as_deref(), Some("1000"));
        assert_eq!(ahead(usize::MAX).0.as_deref(), Some("100000"));
    }
}
