//! A three-node NATS cluster (`scripts/nats-cluster.sh`), an R3 stream, and the node
//! leading the stream killed mid-run: every message is received (0 lost); duplicates
//! are counted, and how long the consumer went without a delivery after the kill.
//! Needs the cluster: `RUSTSTREAM_NATS_CLUSTER_URL` (default: the script's three nodes).

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ruststream_core::{Broker, MESSAGE_ID, Message, Settlement};
use ruststream_nats::{JetStream, NatsBroker};
use support::{subscribe, try_next, unique};

const MESSAGES: u32 = 2_000;
/// Published at about this rate, so the kill falls mid-run.
const EVERY: Duration = Duration::from_millis(4);

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/nats-cluster.sh")
}

fn cluster(args: &[&str]) -> String {
    let out = Command::new(script())
        .args(args)
        .output()
        .expect("run scripts/nats-cluster.sh");
    assert!(
        out.status.success(),
        "scripts/nats-cluster.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn url() -> String {
    std::env::var("RUSTSTREAM_NATS_CLUSTER_URL").unwrap_or_else(|_| cluster(&["url"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_stream_leader_loses_nothing() {
    let url = url();
    let broker = match NatsBroker::connect(&url).await {
        Ok(broker) => broker,
        Err(error) => panic!(
            "the NATS cluster is not reachable at {url} ({error}). Start it with \
             `scripts/nats-cluster.sh`, or point RUSTSTREAM_NATS_CLUSTER_URL at one."
        ),
    };
    let subject = unique("cluster");
    let mut sub = subscribe(&broker, &subject, Some(JetStream::new().replicas(3))).await;
    let js = async_nats::jetstream::new(broker.client().clone());
    let stream_name = subject.replace('.', "_");

    // The consumer: every delivery recorded, then acknowledged (a failed settlement
    // comes back: a duplicate, never a loss).
    let seen: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let recorded = seen.clone();
    let consumer = tokio::spawn(async move {
        let mut distinct = std::collections::HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while distinct.len() < MESSAGES as usize && Instant::now() < deadline {
            let Some(delivery) = try_next(&mut sub, Duration::from_secs(1)).await else {
                continue;
            };
            let n: u32 = std::str::from_utf8(delivery.payload())
                .ok()
                .and_then(|text| text.parse().ok())
                .expect("a numbered message");
            distinct.insert(n);
            recorded.lock().expect("seen").push((n, Instant::now()));
            let _ = delivery.settle(Settlement::Accept).await;
        }
    });

    // The producer: numbered messages, each published until the server has it (the
    // message id makes a retried publish one message).
    let publisher = broker.publisher();
    let mut killed: Option<(String, Instant)> = None;
    let mut publish_retries = 0u32;
    for n in 0..MESSAGES {
        let message = Message::new(n.to_string()).with_header(MESSAGE_ID, format!("{subject}-{n}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(error) = publisher
            .publish(subject.as_str().into(), message.clone())
            .await
        {
            publish_retries += 1;
            assert!(Instant::now() < deadline, "publish {n}: {error}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if n == MESSAGES / 4 {
            let mut stream = js.get_stream(&stream_name).await.expect("stream");
            let info = stream.info().await.expect("stream info");
            let leader = info
                .cluster
                .as_ref()
                .and_then(|c| c.leader.clone())
                .expect("an R3 stream has a leader");
            assert_eq!(info.config.num_replicas, 3, "the stream has three replicas");
            cluster(&["kill", &leader]);
            eprintln!("killed {leader}, the stream leader, after message {n}");
            killed = Some((leader, Instant::now()));
        }
        tokio::time::sleep(EVERY).await;
    }
    let (leader, killed_at) = killed.expect("a node was killed");
    cluster(&["start", &leader]);
    consumer.await.expect("consumer");

    let seen = seen.lock().expect("seen").clone();
    let mut counts: HashMap<u32, u32> = HashMap::new();
    for (n, _) in &seen {
        *counts.entry(*n).or_default() += 1;
    }
    let lost: Vec<u32> = (0..MESSAGES).filter(|n| !counts.contains_key(n)).collect();
    let duplicates: u32 = counts.values().map(|c| c - 1).sum();
    let resumed = seen
        .iter()
        .map(|(_, at)| *at)
        .filter(|at| *at > killed_at)
        .min()
        .map(|at| at - killed_at);
    let longest_gap = seen
        .windows(2)
        .map(|w| w[1].1 - w[0].1)
        .max()
        .unwrap_or_default();
    eprintln!(
        "cluster: {MESSAGES} published ({publish_retries} publish retries), {} deliveries, \
         lost {}, duplicates {duplicates}, first delivery after the kill {resumed:?}, \
         longest gap between deliveries {longest_gap:?}",
        seen.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "lost {} messages: {lost:?}", lost.len());
    let _ = js.delete_stream(&stream_name).await;
    broker.close().await;
}
