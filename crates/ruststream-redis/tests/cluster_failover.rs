//! A Redis Cluster with a replica per master (`scripts/redis-cluster.sh`) losing the
//! master of a stream mid-run: two producers publish numbered messages throughout, two
//! consumers read the stream with default options (one consumer group), each through a
//! broker of its own. The master serving the stream's slot is SIGKILLed a third of the
//! way; its replica takes over (cluster-node-timeout 5 s, then an election); the killed
//! node is started again once the slot moved (it rejoins as a replica), and the script
//! then puts the masters back as they were. Every message arrives (0 lost), or the test
//! says whether Redis itself lost writes it had acknowledged (replication is
//! asynchronous); duplicates are counted, and how long deliveries stopped.
//!
//! Needs the cluster of `scripts/redis-cluster.sh` (masters 127.0.0.1:7001-7003, replicas
//! 7004-7006; killing a node needs its pid file, so the same machine). Fails, saying how
//! to start it, without one.

mod support;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand, Value};
use futures_util::StreamExt;
use ruststream_core::{Address, Broker, Message, Settlement, SubscribeSpec};
use ruststream_redis::{RedisBroker, Settings};
use support::unique_prefix;
use tokio::sync::mpsc;

const MESSAGES: u32 = 2_000;
/// Each producer pauses this long between publishes, so the kill falls mid-run.
const EVERY: Duration = Duration::from_millis(4);
const URL: &str = "redis-cluster://127.0.0.1:7001?node=127.0.0.1:7002&node=127.0.0.1:7003";
const HOW_TO_START: &str = "Start it with `scripts/redis-cluster.sh` (masters 127.0.0.1:7001-7003 \
                            with replicas on 7004-7006; the test kills and restarts a node).";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster.sh")
}

fn cluster(args: &[&str]) {
    let out = Command::new(script())
        .args(args)
        .output()
        .expect("run scripts/redis-cluster.sh");
    assert!(
        out.status.success(),
        "scripts/redis-cluster.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One run at a time on the machine: two runs would kill each other's masters. The lock
/// is a listener on 127.0.0.1:7099, which the system frees when the process ends.
async fn exclusive() -> std::net::TcpListener {
    loop {
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", 7099)) {
            return listener;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A client of the single node on `port`.
async fn node(port: u16) -> Client {
    let client = Builder::from_config(
        Config::from_url(&format!("redis://127.0.0.1:{port}")).expect("node url"),
    )
    .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(5))
    .build()
    .expect("client");
    match tokio::time::timeout(Duration::from_secs(5), client.init()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("no Redis Cluster node on 127.0.0.1:{port} ({e}). {HOW_TO_START}"),
        Err(_) => panic!("no Redis Cluster node on 127.0.0.1:{port} (timed out). {HOW_TO_START}"),
    }
}

async fn command(client: &Client, args: Vec<&str>) -> Value {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    client.custom(cmd, args).await.expect("CLUSTER command")
}

/// The port of the master serving `key`, asked of the node on `via`.
async fn master_of(via: &Client, key: &str) -> u16 {
    let slot = command(via, vec!["KEYSLOT", key])
        .await
        .as_u64()
        .expect("a slot");
    for range in command(via, vec!["SLOTS"]).await.into_array() {
        let range = range.into_array();
        let (start, end) = (range[0].as_u64(), range[1].as_u64());
        if start.is_some_and(|s| s <= slot) && end.is_some_and(|e| slot <= e) {
            let master = range[2].clone().into_array();
            return master[1]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .expect("a port");
        }
    }
    panic!("no master serves slot {slot}")
}

/// Whether the master has a replica (its `INFO replication`).
async fn has_replica(master: &Client) -> bool {
    let cmd = CustomCommand::new_static("INFO", ClusterHash::Random, false);
    let info: String = master.custom(cmd, vec!["replication"]).await.expect("info");
    info.lines()
        .any(|l| l.trim() == "connected_slaves:1" || l.trim() == "connected_slaves:2")
}

async fn connect(prefix: &str) -> RedisBroker {
    RedisBroker::connect_with(URL, Settings::default().key_prefix(prefix.to_owned()))
        .await
        .unwrap_or_else(|e| {
            panic!("the Redis Cluster at {URL} is not reachable ({e}). {HOW_TO_START}")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_master_of_a_stream_loses_nothing_redis_acknowledged() {
    let _exclusive = exclusive().await;
    let seed = node(7001).await;
    let prefix = unique_prefix();
    let address = "failover";
    let key = format!("{prefix}{address}");
    let port = master_of(&seed, &key).await;
    let master = node(port).await;
    assert!(
        has_replica(&master).await,
        "the master on {port} has no replica: the cluster was made without them. {HOW_TO_START}"
    );

    // The consumers: every delivery sent to the test with its time, then settled (an
    // XACK lost with the master comes back: a duplicate, never a loss).
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<(u32, Instant)>();
    let errors = Arc::new(AtomicU32::new(0));
    let mut consumers = Vec::new();
    let mut brokers = Vec::new();
    for _ in 0..2 {
        let broker = connect(&prefix).await;
        let sub = broker
            .subscribe(SubscribeSpec::new(address))
            .await
            .expect("subscribe");
        let mut deliveries = sub.deliveries;
        let (seen, errors) = (seen_tx.clone(), errors.clone());
        consumers.push(tokio::spawn(async move {
            while let Some(next) = deliveries.next().await {
                let delivery = match next {
                    Ok(delivery) => delivery,
                    Err(error) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("consumer: {error}");
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
        brokers.push(broker);
    }
    drop(seen_tx);

    // The producers: message n from producer n % 2, each published until Redis took it;
    // the entry id Redis answered is kept.
    let publish_retries = Arc::new(AtomicU32::new(0));
    let mut producers = Vec::new();
    for k in 0..2u32 {
        let broker = connect(&prefix).await;
        let publisher = broker.publisher();
        let retries = publish_retries.clone();
        producers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for n in (k..MESSAGES).step_by(2) {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    match publisher
                        .publish(Address::new(address), Message::new(n.to_string()))
                        .await
                    {
                        Ok(_) => break,
                        Err(error) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            assert!(Instant::now() < deadline, "publish {n}: {error}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
                acked.push((n, Instant::now()));
                tokio::time::sleep(EVERY).await;
            }
            acked
        }));
        brokers.push(broker);
    }

    // Receive; kill the master a third of the way; once another node serves the slot,
    // start the killed one again.
    let mut seen: Vec<(u32, Instant)> = Vec::new();
    let mut counts: HashMap<u32, u32> = HashMap::new();
    let mut killed_at: Option<(Instant, Instant)> = None;
    let mut failed_over: Option<Duration> = None;
    let deadline = Instant::now() + Duration::from_secs(90);
    let survivor = node(if port == 7001 { 7002 } else { 7001 }).await;
    while counts.len() < MESSAGES as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = left.min(Duration::from_millis(500));
        match tokio::time::timeout(wait, seen_rx.recv()).await {
            Ok(Some((n, at))) => {
                seen.push((n, at));
                *counts.entry(n).or_default() += 1;
            }
            Ok(None) => panic!("the consumers stopped"),
            Err(_) if left.is_zero() => break,
            Err(_) => {}
        }
        if killed_at.is_none() && counts.len() >= MESSAGES as usize / 3 {
            let asked = Instant::now();
            cluster(&["kill", &port.to_string()]);
            killed_at = Some((asked, Instant::now()));
            eprintln!(
                "killed the master on {port} after {} messages",
                counts.len()
            );
        }
        if let (Some((asked, _)), None) = (killed_at, failed_over)
            && master_of(&survivor, &key).await != port
        {
            failed_over = Some(asked.elapsed());
            eprintln!(
                "the slot moved off {port} {:?} after the kill",
                asked.elapsed()
            );
            cluster(&["start", &port.to_string()]);
        }
    }
    let mut acked_at: HashMap<u32, Instant> = HashMap::new();
    for producer in producers {
        acked_at.extend(producer.await.expect("producer"));
    }
    // Late duplicates have a moment to arrive.
    let late = Instant::now() + Duration::from_secs(2);
    while let Ok(Some((n, at))) = tokio::time::timeout_at(late.into(), seen_rx.recv()).await {
        seen.push((n, at));
        *counts.entry(n).or_default() += 1;
    }

    let (asked, gone) = killed_at.expect("the master was killed");
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
    let longest_gap = seen
        .windows(2)
        .map(|w| w[1].1 - w[0].1)
        .max()
        .unwrap_or_default();
    eprintln!(
        "redis cluster: {MESSAGES} published ({} publish retries), {} deliveries, lost {}, \
         duplicates {duplicates}, slot moved after {failed_over:?}, longest time without \
         a delivery from the kill on {resumed:?}, longest gap between \
         deliveries {longest_gap:?}, consume errors {}",
        publish_retries.load(Ordering::Relaxed),
        seen.len(),
        lost.len(),
        errors.load(Ordering::Relaxed)
    );
    if !lost.is_empty() {
        // Whose loss: an entry the stream no longer has was acknowledged by the dead
        // master and never reached its replica (Redis replicates asynchronously).
        let stream: HashSet<u32> = support::admin(URL)
            .await
            .xrange::<Vec<(String, HashMap<String, String>)>, _, _, _>(&key, "-", "+", None)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(_, fields)| fields.get("_payload").and_then(|p| p.parse().ok()))
            .collect();
        let (in_stream, not_in_stream): (Vec<u32>, Vec<u32>) =
            lost.iter().partition(|n| stream.contains(n));
        let before_kill: Vec<u32> = not_in_stream
            .iter()
            .copied()
            .filter(|n| acked_at.get(n).is_some_and(|a| *a <= gone))
            .collect();
        panic!(
            "lost {} messages: {} are in the stream but were never delivered (the \
             adapter's loss): {in_stream:?}; {} are not in the stream ({} of them \
             acknowledged by the master before it died, so lost by Redis's asynchronous \
             replication): {not_in_stream:?}",
            lost.len(),
            in_stream.len(),
            not_in_stream.len(),
            before_kill.len()
        );
    }
    assert!(
        failed_over.is_some(),
        "the slot never moved off the killed master"
    );

    for consumer in consumers {
        consumer.abort();
    }
    let _ = support::admin(URL).await.del::<i64, _>(&key).await;
    for broker in brokers {
        broker.close().await;
    }
    // The masters as they were (7001-7003), for the other cluster tests.
    cluster(&["start"]);
}
