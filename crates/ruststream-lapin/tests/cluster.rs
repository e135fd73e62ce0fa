//! A three-node RabbitMQ 4 cluster (`scripts/rabbitmq4-cluster.sh`, 127.0.0.1:5681-5683)
//! losing the node that leads a quorum queue, mid-run: two producers (on nodes 1 and 3)
//! publish numbered messages throughout, two consumers (on nodes 1 and 2) take them, every
//! connection with the other nodes as failover addresses. The queue's leader is SIGKILLed
//! a third of the way, and started again once the producers are done. Every message
//! arrives (0 lost); duplicates are counted, and how long deliveries stopped after the
//! kill. Needs the cluster (and root, to kill a node): `sudo scripts/rabbitmq4-cluster.sh`.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ConnectionProperties};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_lapin::{ConnectOptions, LapinBroker};
use support::unique;
use tokio::sync::mpsc;

const MESSAGES: u32 = 2_000;
/// Each producer pauses this long between publishes, so the kill falls mid-run.
const EVERY: Duration = Duration::from_millis(4);
const HOW_TO_START: &str = "Start it with `sudo scripts/rabbitmq4-cluster.sh` (three nodes on \
                            127.0.0.1:5681-5683; the test kills and restarts one, as root).";

fn node_url(n: usize) -> String {
    format!("amqp://guest:guest@127.0.0.1:{}/%2f", 5680 + n)
}

fn cluster(args: &[&str]) -> String {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rabbitmq4-cluster.sh");
    let out = Command::new(script)
        .args(args)
        .output()
        .expect("run scripts/rabbitmq4-cluster.sh");
    assert!(
        out.status.success(),
        "scripts/rabbitmq4-cluster.sh {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One run at a time on the machine: two runs would kill each other's nodes. The lock
/// is a listener on 127.0.0.1:5699, which the system frees when the process ends.
async fn exclusive() -> std::net::TcpListener {
    loop {
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", 5699)) {
            return listener;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Connects to node `n`, the other two as failover addresses (default options otherwise).
async fn connect(n: usize) -> LapinBroker {
    let mut options = ConnectOptions::new();
    for other in (1..=3).filter(|m| *m != n) {
        options = options.failover(node_url(other));
    }
    LapinBroker::connect_with(&node_url(n), options)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the RabbitMQ 4 cluster is not reachable at {} ({e}). {HOW_TO_START}",
                node_url(n)
            )
        })
}

/// A connection of its own to node `n` (to declare and delete the queue).
async fn raw(n: usize) -> Connection {
    Connection::connect(&node_url(n), ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}. {HOW_TO_START}", node_url(n)))
}

/// A quorum queue on all three nodes, declared on node 1.
async fn declare(queue: &str) {
    let connection = raw(1).await;
    let channel = connection.create_channel().await.expect("channel");
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from(b"quorum".to_vec())),
    );
    args.insert("x-quorum-initial-group-size".into(), AMQPValue::LongInt(3));
    args.insert("x-expires".into(), AMQPValue::LongInt(600_000));
    channel
        .queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
        .await
        .expect("declare");
    let _ = connection.close(200, "declared".into()).await;
}

/// The node number (1-3) leading the quorum queue, from `rabbitmqctl list_queues`.
fn leader(queue: &str) -> usize {
    let listing = cluster(&[
        "ctl",
        "2",
        "-q",
        "list_queues",
        "--no-table-headers",
        "name",
        "leader",
    ]);
    let leader = listing
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(name, _)| *name == queue)
        .map(|(_, leader)| leader.trim().to_owned())
        .unwrap_or_else(|| panic!("no leader of {queue} in {listing}"));
    (1..=3)
        .find(|n| leader == format!("rs-cluster-{n}@localhost"))
        .unwrap_or_else(|| panic!("the leader {leader} is not a node of the cluster"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_queue_leader_loses_nothing() {
    let _exclusive = exclusive().await;
    let status = Command::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rabbitmq4-cluster.sh"),
    )
    .arg("status")
    .output()
    .expect("run scripts/rabbitmq4-cluster.sh status");
    assert!(
        status.status.success(),
        "the RabbitMQ 4 cluster is not running as three nodes ({}{}). {HOW_TO_START}",
        String::from_utf8_lossy(&status.stdout).trim(),
        String::from_utf8_lossy(&status.stderr).trim()
    );
    let queue = unique("cluster");
    declare(&queue).await;
    let leader = leader(&queue);

    // The consumers: every delivery sent to the test with its time, then acknowledged
    // (an ack lost with the node comes back: a duplicate, never a loss).
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<(u32, Instant)>();
    let errors = Arc::new(AtomicU32::new(0));
    let mut consumers = Vec::new();
    let mut subscribed = Vec::new();
    for node in [1, 2] {
        let broker = connect(node).await;
        let sub = broker
            .subscribe(SubscribeSpec::new(queue.as_str()))
            .await
            .expect("subscribe");
        let attached = sub.attached.clone();
        let mut deliveries = sub.deliveries;
        let (seen, errors) = (seen_tx.clone(), errors.clone());
        consumers.push(tokio::spawn(async move {
            while let Some(next) = deliveries.next().await {
                let delivery = match next {
                    Ok(delivery) => delivery,
                    Err(error) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("consumer on node {node}: {error}");
                        continue;
                    }
                };
                let n: u32 = std::str::from_utf8(delivery.payload())
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .expect("a numbered message");
                let _ = seen.send((n, Instant::now()));
                let _ = delivery.settle(Settlement::Accept).await;
            }
        }));
        subscribed.push((broker, attached));
    }
    drop(seen_tx);

    // The producers: message n from producer n % 2, each published until confirmed.
    let publish_retries = Arc::new(AtomicU32::new(0));
    let mut producers = Vec::new();
    let mut producer_brokers = Vec::new();
    for (k, node) in [(0u32, 1), (1, 3)] {
        let broker = connect(node).await;
        let publisher = broker.publisher();
        let (to, retries) = (queue.clone(), publish_retries.clone());
        producers.push(tokio::spawn(async move {
            let mut confirmed = Vec::new();
            for n in (k..MESSAGES).step_by(2) {
                let deadline = Instant::now() + Duration::from_secs(60);
                while let Err(error) = publisher
                    .publish(to.as_str().into(), Message::new(n.to_string()))
                    .await
                {
                    retries.fetch_add(1, Ordering::Relaxed);
                    assert!(Instant::now() < deadline, "publish {n}: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                confirmed.push((n, Instant::now()));
                tokio::time::sleep(EVERY).await;
            }
            confirmed
        }));
        producer_brokers.push(broker);
    }

    // Receive; kill the leader a third of the way, start it again once publishing is done.
    let mut seen: Vec<(u32, Instant)> = Vec::new();
    let mut counts: HashMap<u32, u32> = HashMap::new();
    let mut killed_at: Option<Instant> = None;
    let mut restarted: Option<Duration> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while counts.len() < MESSAGES as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Some((n, at))) = tokio::time::timeout(left, seen_rx.recv()).await else {
            panic!("stalled with {} of {MESSAGES} received", counts.len());
        };
        seen.push((n, at));
        *counts.entry(n).or_default() += 1;
        if killed_at.is_none() && counts.len() == MESSAGES as usize / 3 {
            killed_at = Some(Instant::now());
            cluster(&["kill", &leader.to_string()]);
            eprintln!(
                "killed rs-cluster-{leader}, the queue's leader, after {} messages",
                counts.len()
            );
        }
        if restarted.is_none() && killed_at.is_some() && producers.iter().all(|p| p.is_finished()) {
            let t0 = Instant::now();
            cluster(&["start-node", &leader.to_string()]);
            restarted = Some(t0.elapsed());
        }
    }
    let mut confirmed_at: HashMap<u32, Instant> = HashMap::new();
    for producer in producers {
        confirmed_at.extend(producer.await.expect("producer"));
    }
    if restarted.is_none() {
        let t0 = Instant::now();
        cluster(&["start-node", &leader.to_string()]);
        restarted = Some(t0.elapsed());
    }
    // Late duplicates (acks lost with the node) have a moment to arrive.
    let late = Instant::now() + Duration::from_secs(2);
    while let Ok(Some((n, at))) = tokio::time::timeout_at(late.into(), seen_rx.recv()).await {
        seen.push((n, at));
        *counts.entry(n).or_default() += 1;
    }

    let asked = killed_at.expect("a node was killed");
    let lost: Vec<u32> = (0..MESSAGES).filter(|n| !counts.contains_key(n)).collect();
    let duplicates: u32 = counts.values().map(|c| c - 1).sum();
    // Time to resume: the longest the consumers went without a delivery from the kill
    // on (a gap that began before the kill counts from the kill).
    let resumed = seen
        .windows(2)
        .filter(|w| w[1].1 > asked)
        .map(|w| w[1].1 - w[0].1.max(asked))
        .max()
        .unwrap_or_default();
    let publish_stall = {
        let mut times: Vec<Instant> = confirmed_at.values().copied().collect();
        times.sort();
        times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    };
    let longest_gap = seen
        .windows(2)
        .map(|w| w[1].1 - w[0].1)
        .max()
        .unwrap_or_default();
    let reconnects: u64 = subscribed.iter().map(|(_, a)| a.reconnects()).sum();
    eprintln!(
        "rabbitmq cluster: {MESSAGES} published ({} publish retries), {} deliveries, lost {}, \
         duplicates {duplicates}, longest time without a delivery from the \
         kill on {resumed:?}, longest gap between deliveries {longest_gap:?}, between confirms \
         {publish_stall:?}, consumer reconnects {reconnects}, consume errors \
         {}, killed node back in {restarted:?}",
        publish_retries.load(Ordering::Relaxed),
        seen.len(),
        lost.len(),
        errors.load(Ordering::Relaxed)
    );
    assert!(lost.is_empty(), "lost {} messages: {lost:?}", lost.len());

    for consumer in consumers {
        consumer.abort();
    }
    for (broker, _) in subscribed {
        broker.close().await;
    }
    for broker in producer_brokers {
        broker.close().await;
    }
    let connection = raw(leader % 3 + 1).await;
    if let Ok(channel) = connection.create_channel().await {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    let _ = connection.close(200, "done".into()).await;
}
