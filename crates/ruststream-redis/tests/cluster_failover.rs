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

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_redis::Settings;
use support::failover::{self, Faults};
use support::unique_prefix;
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
    let survivor = node(if port == 7001 { 7002 } else { 7001 }).await;
    let (survivor, slot_key) = (&survivor, key.as_str());
    let faults = Faults {
        kill: Box::new(|| cluster(&["kill", &port.to_string()])),
        moved: Box::new(move || {
            Box::pin(async move { master_of(survivor, slot_key).await != port })
        }),
        restart: Box::new(|| cluster(&["start", &port.to_string()])),
    };
    let settings = Settings::default().key_prefix(prefix.clone());
    let run = failover::run(URL, settings, address, HOW_TO_START, faults).await;
    run.check("redis cluster", &support::admin(URL).await, &key)
        .await;
    let _ = support::admin(URL).await.del::<i64, _>(&key).await;
    // The masters as they were (7001-7003), for the other cluster tests.
    cluster(&["start"]);
}
