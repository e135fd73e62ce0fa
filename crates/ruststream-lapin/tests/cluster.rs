//! A three-node RabbitMQ 4 cluster (`scripts/rabbitmq4-cluster.sh`) losing the node a
//! consumer is connected to, mid-run: a quorum queue replicated on all three, a producer
//! on node 2 publishing numbered messages throughout, a consumer on node 1 with nodes 2
//! and 3 as failover addresses. Node 1 is killed (SIGKILL) a third of the way; the
//! consumer detaches, reconnects to another node and goes on; node 1 is started again at
//! the end. Every message arrives (0 lost); duplicates are counted and shown.
//! Built with the `cluster` feature only: `cargo test -p ruststream-lapin --features
//! cluster --test cluster` after `sudo scripts/rabbitmq4-cluster.sh`.
#![cfg(feature = "cluster")]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ConnectionProperties};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_lapin::{ConnectOptions, LapinBroker};
use support::unique;

const MESSAGES: usize = 3000;

fn node_url(n: usize) -> String {
    format!("amqp://guest:guest@127.0.0.1:{}/%2f", 5680 + n)
}

fn cluster(args: &[&str]) {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rabbitmq4-cluster.sh");
    let out = std::process::Command::new(script)
        .args(args)
        .output()
        .expect("run the script");
    assert!(
        out.status.success(),
        "scripts/rabbitmq4-cluster.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn connect(n: usize) -> LapinBroker {
    let mut options =
        ConnectOptions::new().backoff(Duration::from_millis(200), Duration::from_secs(2));
    for other in (1..=3).filter(|m| *m != n) {
        options = options.failover(node_url(other));
    }
    LapinBroker::connect_with(&node_url(n), options)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the RabbitMQ 4 cluster is not reachable at {} ({e}). Start it with \
             `sudo scripts/rabbitmq4-cluster.sh` (nodes on 127.0.0.1:5681-5683).",
                node_url(n)
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_loses_nothing() {
    let queue = unique("cluster");
    let consumer = connect(1).await;
    let producer = connect(2).await;
    {
        let connection = Connection::connect(&node_url(2), ConnectionProperties::default())
            .await
            .expect("connect");
        let channel = connection.create_channel().await.expect("channel");
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString(LongString::from(b"quorum".to_vec())),
        );
        args.insert("x-quorum-initial-group-size".into(), AMQPValue::LongInt(3));
        args.insert("x-expires".into(), AMQPValue::LongInt(600_000));
        channel
            .queue_declare(queue.as_str().into(), QueueDeclareOptions::durable(), args)
            .await
            .expect("declare");
        let _ = connection.close(200, "declared".into()).await;
    }
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.in_flight = 64;
    let mut sub = consumer.subscribe(spec).await.expect("subscribe");
    let attached = sub.attached.clone();

    let publisher = producer.publisher();
    let to = queue.clone();
    let publishing = tokio::spawn(async move {
        for i in 0..MESSAGES {
            let message = Message::new(i.to_string());
            publisher
                .publish(to.as_str().into(), message)
                .await
                .expect("published");
            if i % 100 == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });

    let mut seen: HashMap<usize, u32> = HashMap::new();
    let mut killed = false;
    let mut errors = 0;
    while seen.len() < MESSAGES {
        let next = tokio::time::timeout(Duration::from_secs(60), sub.deliveries.next())
            .await
            .unwrap_or_else(|_| panic!("stalled with {} of {MESSAGES}", seen.len()))
            .expect("the subscription is open");
        let delivery = match next {
            Ok(d) => d,
            Err(e) => {
                errors += 1;
                eprintln!("consume error (expected once the node is killed): {e}");
                continue;
            }
        };
        let id: usize = std::str::from_utf8(delivery.payload())
            .expect("utf-8")
            .parse()
            .expect("a number");
        *seen.entry(id).or_default() += 1;
        let _ = delivery.settle(Settlement::Accept).await;
        if !killed && seen.len() == MESSAGES / 3 {
            killed = true;
            cluster(&["kill", "1"]);
        }
    }
    cluster(&["start-node", "1"]);
    publishing.await.expect("publisher");
    let duplicates: u32 = seen.values().map(|n| n - 1).sum();
    eprintln!(
        "{MESSAGES} messages, all received; {duplicates} duplicates; {errors} consume errors; \
         {} reconnects",
        attached.reconnects()
    );
    assert!((0..MESSAGES).all(|i| seen.contains_key(&i)), "0 lost");
    assert!(errors >= 1, "the loss of the node was reported");
    assert!(attached.reconnects() >= 1, "the consumer reconnected");
    consumer.close().await;
    producer.close().await;
}
