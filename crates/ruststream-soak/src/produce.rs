//! The producer: ids `0..n` as `{"id": n}`, at a set rate, each published until the
//! broker takes it.

use std::sync::Arc;
use std::time::Duration;

use ruststream::core::{Broker, Publish};
use ruststream::{Address, Message};
use ruststream_redis::{RedisBroker, Target};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::connect::connect_patiently;
use crate::consume::Numbered;
use crate::form::Form;
use crate::record::{EventLog, Kind};

/// What a producer did.
#[derive(Debug, Default)]
pub(crate) struct Produced {
    /// Messages the broker took (each id once).
    pub(crate) published: u64,
    /// Publishes that failed and were tried again.
    pub(crate) failures: u64,
}

impl Produced {
    fn count(&mut self, done: Result<u64, tokio::task::JoinError>) {
        if let Ok(failures) = done {
            self.published += 1;
            self.failures += failures;
        }
    }
}

/// The producer's connection: a Redis list is declared as one (`Target::List`) so that the
/// first publish does not make a stream of it.
pub(crate) async fn publisher(
    url: &str,
    form: Form,
    address: &str,
) -> Result<(Arc<dyn Broker>, Arc<dyn Publish>), Box<dyn std::error::Error>> {
    let broker: Arc<dyn Broker> = if form == Form::RedisList {
        let redis = RedisBroker::connect(url).await?;
        redis.route(address.to_owned(), Target::List);
        Arc::new(redis)
    } else {
        connect_patiently(url, form).await?
    };
    let publish = broker.publisher();
    Ok((broker, publish))
}

/// How many publishes may be under way at once.
const WINDOW: usize = 64;

/// Publishes `n` numbered messages at `rate` per second, up to [`WINDOW`] at a time (a
/// broker that confirms each publish, as AMQP does, would otherwise set the pace), with
/// one of `keys` keys each where given; notes each one the broker took in `log`, if
/// there is one.
pub(crate) async fn produce(
    publish: Arc<dyn Publish>,
    address: &str,
    n: u64,
    rate: u64,
    keys: Option<u64>,
    log: Option<Arc<EventLog>>,
) -> Produced {
    let window = Arc::new(Semaphore::new(WINDOW));
    let mut tasks = JoinSet::new();
    let mut produced = Produced::default();
    let start = Instant::now();
    let rate = rate.max(1);
    for id in 0..n {
        let due = start + Duration::from_micros(id * 1_000_000 / rate);
        tokio::time::sleep_until(due).await;
        let Ok(permit) = window.clone().acquire_owned().await else {
            break;
        };
        let (publish, address) = (publish.clone(), Address::from(address.to_owned()));
        let log = log.clone();
        tasks.spawn(async move {
            let failures = publish_one(publish.as_ref(), address, id, keys).await;
            if let Some(log) = log {
                // Without it the run is counted all the same, less the broker's losses.
                let _ = log.note(Kind::Accepted, id, 1);
            }
            drop(permit);
            failures
        });
        while let Some(done) = tasks.try_join_next() {
            produced.count(done);
        }
    }
    while let Some(done) = tasks.join_next().await {
        produced.count(done);
    }
    produced
}

/// Publishes one message (with the key `k<id % keys>`, where given) until the broker
/// takes it; returns the failed attempts.
async fn publish_one(publish: &dyn Publish, address: Address, id: u64, keys: Option<u64>) -> u64 {
    let payload = serde_json::to_vec(&Numbered { id }).unwrap_or_default();
    let mut message = Message::new(payload);
    if let Some(keys) = keys {
        message = message.with_header(ruststream::kafka::KEY, format!("k{}", id % keys.max(1)));
    }
    let mut failures = 0;
    while let Err(error) = publish.publish(address.clone(), message.clone()).await {
        failures += 1;
        if failures % 50 == 1 {
            eprintln!("soak: publish {id}: {error}; trying again");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    failures
}

/// Runs the producer process: prints `published N failures F` at the end, and notes each
/// publish the broker took in `log`.
pub(crate) async fn run(
    url: &str,
    form: Form,
    address: &str,
    n: u64,
    rate: u64,
    log: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let log = Arc::new(EventLog::create(log)?);
    let (broker, publish) = publisher(url, form, address).await?;
    let produced = produce(publish, address, n, rate, form.keys(), Some(log)).await;
    broker.close().await;
    println!(
        "published {} failures {}",
        produced.published, produced.failures
    );
    Ok(())
}
