//! Redis Sentinel (`scripts/redis-sentinel.sh`: a master, two replicas, three sentinels
//! with quorum 2) losing its master mid-run: two producers publish numbered messages
//! throughout, two consumers read a stream with default options (one consumer group),
//! each through a broker of its own on the `redis-sentinel://` URL. The master is
//! SIGKILLed a third of the way; the sentinels take it for down after 2 s
//! (`down-after-milliseconds`), elect a leader and promote a replica; the brokers find the
//! new master through the sentinels. The killed node is started again as a replica once
//! the sentinels name another master, and the script then makes it the master again.
//! Every message arrives (0 lost), or the test says whether Redis itself lost writes it
//! had acknowledged (replication is asynchronous); duplicates are counted, and how long
//! deliveries stopped. Also: a plain publish and delivery through the sentinels.
//!
//! Needs `scripts/redis-sentinel.sh` (Redis on 127.0.0.1:6501-6503, sentinels on
//! 26501-26503; killing a node needs its pid file, so the same machine). Fails, saying how
//! to start it, without one.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use fred::prelude::*;
use futures_util::StreamExt;
use ruststream_core::{Address, Broker, Message, Settlement, SubscribeSpec};
use ruststream_redis::{RedisBroker, Settings};
use support::failover::{self, Faults};
use support::unique_prefix;

const HOW_TO_START: &str = "Start it with `scripts/redis-sentinel.sh` (Redis on \
                            127.0.0.1:6501-6503, sentinels on 26501-26503; the test kills \
                            and restarts the master).";

fn url() -> String {
    std::env::var("RUSTSTREAM_REDIS_SENTINEL_URL").unwrap_or_else(|_| {
        "redis-sentinel://127.0.0.1:26501,127.0.0.1:26502,127.0.0.1:26503/ruststream".into()
    })
}

fn sentinel(args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-sentinel.sh");
    let out = Command::new(script)
        .args(args)
        .output()
        .expect("run scripts/redis-sentinel.sh");
    assert!(
        out.status.success(),
        "scripts/redis-sentinel.sh {args:?}: {}. {HOW_TO_START}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The port of the master the sentinels name.
fn master() -> u16 {
    sentinel(&["master"]).parse().expect("a port")
}

/// One run at a time on the machine (they kill each other's masters): a listener on
/// 127.0.0.1:6599, which the system frees when the process ends.
async fn exclusive() -> std::net::TcpListener {
    loop {
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", 6599)) {
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
    .build()
    .expect("client");
    match tokio::time::timeout(Duration::from_secs(5), client.init()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("no Redis on 127.0.0.1:{port} ({e}). {HOW_TO_START}"),
        Err(_) => panic!("no Redis on 127.0.0.1:{port} (timed out). {HOW_TO_START}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_goes_through_the_master_the_sentinels_name() {
    let _exclusive = exclusive().await;
    sentinel(&["start"]);
    let url = url();
    let prefix = unique_prefix();
    let broker = RedisBroker::connect_with(&url, Settings::default().key_prefix(prefix.clone()))
        .await
        .unwrap_or_else(|e| panic!("{url} is not reachable ({e}). {HOW_TO_START}"));
    let mut sub = broker
        .subscribe(SubscribeSpec::new("hello"))
        .await
        .expect("subscribe");
    broker
        .publisher()
        .publish(Address::new("hello"), Message::new("through the sentinels"))
        .await
        .expect("publish");
    let delivery = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
        .await
        .expect("a delivery within 10 s")
        .expect("the stream goes on")
        .expect("a delivery");
    assert_eq!(delivery.payload().as_ref(), b"through the sentinels");
    delivery.settle(Settlement::Accept).await.expect("acked");
    // It is the master's stream: a client of that node sees it.
    let key = format!("{prefix}hello");
    let length: u64 = node(master()).await.xlen(&key).await.expect("xlen");
    assert_eq!(length, 1);
    let _ = node(master()).await.del::<i64, _>(&key).await;
    broker.close().await;
}

/// Kills the master under the producers and consumers of brokers with `settings`.
async fn failover(name: &str, settings: impl Fn(Settings) -> Settings) {
    let _exclusive = exclusive().await;
    sentinel(&["reset"]);
    let url = url();
    let prefix = unique_prefix();
    let address = "failover";
    let key = format!("{prefix}{address}");
    let port = master();
    let faults = Faults {
        kill: Box::new(|| {
            sentinel(&["kill", &port.to_string()]);
        }),
        moved: Box::new(move || {
            Box::pin(async move { tokio::task::block_in_place(master) != port })
        }),
        restart: Box::new(|| {
            sentinel(&["start", &port.to_string()]);
        }),
    };
    let settings = settings(Settings::default().key_prefix(prefix.clone()));
    let run = failover::run(&url, settings, address, HOW_TO_START, faults).await;
    let survivor = node(master()).await;
    run.check(name, &survivor, &key).await;
    let _ = survivor.del::<i64, _>(&key).await;
    // The master back on 6501, for the next run.
    sentinel(&["reset"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_master_loses_nothing_redis_acknowledged() {
    failover("redis sentinel", |settings| settings).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_master_with_wait_for_replicas_loses_nothing_redis_acknowledged() {
    failover("redis sentinel, wait_for_replicas(1, 1 s)", |settings| {
        settings.wait_for_replicas(1, Duration::from_secs(1))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_replicas_refuses_a_publish_too_few_replicas_have_and_keeps_it() {
    let _exclusive = exclusive().await;
    sentinel(&["start"]);
    let url = url();
    let prefix = unique_prefix();
    let connect = |settings: Settings| {
        let url = url.clone();
        async move {
            RedisBroker::connect_with(&url, settings)
                .await
                .unwrap_or_else(|e| panic!("{url} is not reachable ({e}). {HOW_TO_START}"))
        }
    };
    // Two replicas: one or two are had, three are not.
    let broker = connect(
        Settings::default()
            .key_prefix(prefix.clone())
            .wait_for_replicas(2, Duration::from_secs(2)),
    )
    .await;
    broker
        .publisher()
        .publish(Address::new("waited"), Message::new("1"))
        .await
        .expect("both replicas have it");
    let broker = connect(
        Settings::default()
            .key_prefix(prefix.clone())
            .wait_for_replicas(3, Duration::from_millis(200)),
    )
    .await;
    let error = broker
        .publisher()
        .publish(Address::new("waited"), Message::new("2"))
        .await
        .expect_err("there are two replicas, not three");
    assert!(
        error.to_string().contains("2 of 3 replicas"),
        "the error says how many had it: {error}"
    );
    assert_eq!(
        error.message.payload.as_ref(),
        b"2",
        "the message is handed back"
    );
    // Written anyway: publishing again duplicates it, it never loses it.
    let key = format!("{prefix}waited");
    let master = node(master()).await;
    let length: u64 = master.xlen(&key).await.expect("xlen");
    assert_eq!(length, 2);
    let _ = master.del::<i64, _>(&key).await;
}
