//! A master killed under load: two producers publish numbered messages throughout, two
//! consumers read one stream with default options (one consumer group), each through a
//! broker of its own on the deployment's URL. The deployment (a Redis Cluster, Redis
//! Sentinel) kills the master a third of the way, says when another node serves the
//! stream, and starts the killed node again. Every message must arrive, or the run says
//! whose loss it was (Redis replicates asynchronously); duplicates are counted, and how
//! long deliveries stopped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fred::prelude::*;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use ruststream_core::{Address, Broker, Message, Settlement, SubscribeSpec};
use ruststream_redis::{RedisBroker, Settings};
use tokio::sync::mpsc;

/// How many messages a run publishes.
pub const MESSAGES: u32 = 2_000;
/// Each producer pauses this long between publishes, so the kill falls mid-run.
const EVERY: Duration = Duration::from_millis(4);

/// What the run does to the deployment.
pub struct Faults<'a> {
    /// Kills the master serving the stream.
    pub kill: Box<dyn FnMut() + Send + 'a>,
    /// Whether another node serves the stream now.
    pub moved: Box<dyn FnMut() -> BoxFuture<'a, bool> + Send + 'a>,
    /// Starts the killed node again.
    pub restart: Box<dyn FnMut() + Send + 'a>,
}

/// What a run saw.
pub struct Run {
    pub lost: Vec<u32>,
    pub duplicates: u32,
    pub deliveries: usize,
    pub publish_retries: u32,
    pub consume_errors: u32,
    /// From the kill to the moment another node served the stream.
    pub failed_over: Option<Duration>,
    /// The longest time without a delivery from the kill on.
    pub resumed: Duration,
    pub longest_gap: Duration,
    /// When each message was acknowledged by Redis to its producer.
    pub acked_at: HashMap<u32, Instant>,
    /// When the master was gone.
    pub gone: Instant,
}

async fn connect(url: &str, settings: &Settings, how_to_start: &str) -> RedisBroker {
    RedisBroker::connect_with(url, settings.clone())
        .await
        .unwrap_or_else(|e| panic!("{url} is not reachable ({e}). {how_to_start}"))
}

/// Runs the producers and consumers on `url` (with `settings`) against `faults`.
pub async fn run(
    url: &str,
    settings: Settings,
    address: &'static str,
    how_to_start: &str,
    mut faults: Faults<'_>,
) -> Run {
    // The consumers: every delivery sent to the test with its time, then settled (an
    // XACK lost with the master comes back: a duplicate, never a loss).
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<(u32, Instant)>();
    let errors = Arc::new(AtomicU32::new(0));
    let mut consumers = Vec::new();
    let mut brokers = Vec::new();
    for _ in 0..2 {
        let broker = connect(url, &settings, how_to_start).await;
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

    // The producers: message n from producer n % 2, each published until Redis took it.
    let publish_retries = Arc::new(AtomicU32::new(0));
    let mut producers = Vec::new();
    for k in 0..2u32 {
        let broker = connect(url, &settings, how_to_start).await;
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

    // Receive; kill the master a third of the way; once another node serves the
    // stream, start the killed one again.
    let mut seen: Vec<(u32, Instant)> = Vec::new();
    let mut counts: HashMap<u32, u32> = HashMap::new();
    let mut killed_at: Option<(Instant, Instant)> = None;
    let mut failed_over: Option<Duration> = None;
    let deadline = Instant::now() + Duration::from_secs(90);
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
            (faults.kill)();
            killed_at = Some((asked, Instant::now()));
            eprintln!("killed the master after {} messages", counts.len());
        }
        if let (Some((asked, _)), None) = (killed_at, failed_over)
            && (faults.moved)().await
        {
            failed_over = Some(asked.elapsed());
            eprintln!("another node serves {:?} after the kill", asked.elapsed());
            (faults.restart)();
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
    for consumer in consumers {
        consumer.abort();
    }
    for broker in brokers {
        broker.close().await;
    }

    let (asked, gone) = killed_at.expect("the master was killed");
    // The longest the consumers went without a delivery from the kill on (a gap that
    // began before the kill counts from the kill).
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
    Run {
        lost: (0..MESSAGES).filter(|n| !counts.contains_key(n)).collect(),
        duplicates: counts.values().map(|c| c - 1).sum(),
        deliveries: seen.len(),
        publish_retries: publish_retries.load(Ordering::Relaxed),
        consume_errors: errors.load(Ordering::Relaxed),
        failed_over,
        resumed,
        longest_gap,
        acked_at,
        gone,
    }
}

impl Run {
    /// Prints the figures under `name`; fails on a loss, saying whose it was from what
    /// the stream (read through `survivor`, the new master) still holds.
    pub async fn check(&self, name: &str, survivor: &Client, key: &str) {
        eprintln!(
            "{name}: {MESSAGES} published ({} publish retries), {} deliveries, lost {}, \
             duplicates {}, served elsewhere after {:?}, longest time without a delivery \
             from the kill on {:?}, longest gap between deliveries {:?}, consume errors {}",
            self.publish_retries,
            self.deliveries,
            self.lost.len(),
            self.duplicates,
            self.failed_over,
            self.resumed,
            self.longest_gap,
            self.consume_errors
        );
        if !self.lost.is_empty() {
            // Whose loss: an entry the stream no longer has was acknowledged by the dead
            // master and never reached its replica (Redis replicates asynchronously).
            let stream: HashSet<u32> = survivor
                .xrange::<Vec<(String, HashMap<String, String>)>, _, _, _>(key, "-", "+", None)
                .await
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(_, fields)| fields.get("_payload").and_then(|p| p.parse().ok()))
                .collect();
            let (in_stream, not_in_stream): (Vec<u32>, Vec<u32>) =
                self.lost.iter().partition(|n| stream.contains(n));
            let before_kill = not_in_stream
                .iter()
                .filter(|n| self.acked_at.get(n).is_some_and(|a| *a <= self.gone))
                .count();
            panic!(
                "lost {} messages: {} are in the stream but were never delivered (the \
                 adapter's loss): {in_stream:?}; {} are not in the stream ({before_kill} of \
                 them acknowledged by the master before it died, so lost by Redis's \
                 asynchronous replication): {not_in_stream:?}",
                self.lost.len(),
                in_stream.len(),
                not_in_stream.len(),
            );
        }
        assert!(
            self.failed_over.is_some(),
            "no other node took over from the killed master"
        );
    }
}
