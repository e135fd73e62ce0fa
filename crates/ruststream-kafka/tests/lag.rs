//! A group's lag on each partition: records not yet done, read without joining the
//! group; the default group is the one a default mount joins.
//! Needs a Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use ruststream::{App, Mount, ack};
use ruststream_core::Broker;
use ruststream_kafka::{KafkaBroker, Lag, LagError};

async fn broker(query: &str) -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&format!("{}{query}", support::url()))
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

fn behind(lag: &[Lag]) -> Vec<(i32, Option<i64>, i64, i64)> {
    lag.iter()
        .map(|l| (l.partition, l.committed, l.end, l.behind))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lag_is_what_the_group_has_not_done() {
    let topic = support::unique("lag");
    support::create_topic(&topic, 2).await;
    let producer: FutureProducer = support::config().create().expect("producer");
    for partition in [0, 0, 0, 1, 1] {
        producer
            .send(
                FutureRecord::<(), _>::to(&topic)
                    .partition(partition)
                    .payload("\"x\""),
                Duration::from_secs(10),
            )
            .await
            .expect("sent");
    }
    let broker = broker("").await;
    let before = broker.lag(&topic, None).await.expect("lag");
    assert_eq!(behind(&before), [(0, None, 3, 3), (1, None, 2, 2)]);

    let handled = Arc::new(AtomicUsize::new(0));
    let count = handled.clone();
    let running = App::new(broker.clone())
        .mount(Mount::new(topic.as_str()), move |_: String| {
            count.fetch_add(1, Ordering::Relaxed);
            async { ack() }
        })
        .start()
        .await
        .expect("starts");
    for _ in 0..200 {
        if handled.load(Ordering::Relaxed) == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.stop().await.expect("a clean stop");
    let after = broker.lag(&topic, None).await.expect("lag");
    assert_eq!(behind(&after), [(0, Some(3), 3, 0), (1, Some(2), 2, 0)]);

    // Another group has done nothing; the URL's group is the default one.
    let other = broker.lag(&topic, Some("someone-else")).await.expect("lag");
    assert_eq!(behind(&other), [(0, None, 3, 3), (1, None, 2, 2)]);
    let named = self::broker("?group=someone-else").await;
    assert_eq!(named.lag(&topic, None).await.expect("lag"), other);

    let missing = broker.lag(&support::unique("lag-missing"), None).await;
    assert!(matches!(missing, Err(LagError::NoTopic(_))), "{missing:?}");
    named.close().await;
    broker.close().await;
}
