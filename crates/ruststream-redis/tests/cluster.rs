//! The adapter on a Redis Cluster: every form that keeps keys (stream, claiming, stream
//! with a `DurableZset` delay queue, reliable list with recovery, plain list) and
//! Pub/Sub, publish → consume → settle, checked on the server. Addresses are chosen so
//! that different subscriptions live on different nodes, and each subscription's derived
//! keys (`{key}:delayed`, `{key}:processing:<consumer>`, …) are checked to live on the
//! node of its main key (one reliable list's address carries a hash tag of its own).
//!
//! Needs the cluster of `scripts/redis-cluster.sh` (127.0.0.1:7001-7003), or
//! `RUSTSTREAM_REDIS_CLUSTER_URL`. Without one every test here fails, saying so.

mod support;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::{
    Address, Broker, Declaration, Options, RETRY_COUNT, Settlement, SubscribeSpec, Verdict,
};
use ruststream_redis::{Claiming, DelayedRetry, List, Pattern, PubSub, ReliableList, Stream};
use support::{Ctx, assert_unsupported, complete, copy_after, msg, n_of, next, next_within};

const DEFAULT_URL: &str = "redis-cluster://127.0.0.1:7001?node=127.0.0.1:7002&node=127.0.0.1:7003";

fn cluster_url() -> String {
    std::env::var("RUSTSTREAM_REDIS_CLUSTER_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

fn no_cluster(why: impl std::fmt::Display) -> ! {
    panic!(
        "no Redis Cluster at {} (RUSTSTREAM_REDIS_CLUSTER_URL, default {DEFAULT_URL}): {why}. \
         Start one with: scripts/redis-cluster.sh",
        cluster_url()
    )
}

fn cmd(name: &'static str) -> CustomCommand {
    CustomCommand::new_static(name, ClusterHash::Random, false)
}

/// One master and the slots it serves.
struct Node {
    addr: String,
    slots: Vec<(u16, u16)>,
    client: Client,
}

/// A test's context on the cluster: the shared helpers' [`Ctx`] (its admin client is a
/// cluster client) plus a client of each master.
struct Cluster {
    ctx: Ctx,
    nodes: Vec<Node>,
}

/// Connects to the cluster, or fails saying how to start one.
async fn cluster() -> Cluster {
    let url = cluster_url();
    let config = Config::from_url(&url).unwrap_or_else(|e| no_cluster(e));
    if !config.server.is_clustered() {
        no_cluster("the URL is not a redis-cluster:// URL");
    }
    let probe = Builder::from_config(config)
        .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(5))
        .build()
        .unwrap_or_else(|e| no_cluster(e));
    match tokio::time::timeout(Duration::from_secs(5), probe.init()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => no_cluster(e),
        Err(_) => no_cluster("timed out connecting"),
    }
    let info: String = probe
        .custom(cmd("CLUSTER"), vec!["INFO"])
        .await
        .unwrap_or_else(|e| no_cluster(e));
    if !info.lines().any(|l| l.trim() == "cluster_state:ok") {
        no_cluster(format!("cluster_state is not ok: {}", info.trim()));
    }
    let slots: Value = probe
        .custom(cmd("CLUSTER"), vec!["SLOTS"])
        .await
        .unwrap_or_else(|e| no_cluster(e));
    let mut by_addr: HashMap<String, Vec<(u16, u16)>> = HashMap::new();
    for range in slots.into_array() {
        let range = range.into_array();
        let as_slot = |v: &Value| v.as_u64().and_then(|n| u16::try_from(n).ok());
        let (Some(start), Some(end)) = (as_slot(&range[0]), as_slot(&range[1])) else {
            panic!("unexpected CLUSTER SLOTS reply");
        };
        let master = range[2].clone().into_array();
        let host = master[0].as_string().expect("host");
        let port = master[1].as_u64().expect("port");
        by_addr
            .entry(format!("{host}:{port}"))
            .or_default()
            .push((start, end));
    }
    let _ = probe.quit().await;
    let mut nodes = Vec::new();
    let mut addrs: Vec<_> = by_addr.into_iter().collect();
    addrs.sort();
    for (addr, slots) in addrs {
        let client =
            Builder::from_config(Config::from_url(&format!("redis://{addr}")).expect("node url"))
                .build()
                .expect("node client");
        client.init().await.unwrap_or_else(|e| no_cluster(e));
        nodes.push(Node {
            addr,
            slots,
            client,
        });
    }
    assert!(
        nodes.len() >= 3,
        "the tests spread subscriptions over 3 masters; the cluster has {}",
        nodes.len()
    );
    Cluster {
        ctx: support::ctx_at(&url).await,
        nodes,
    }
}

impl Cluster {
    /// The master serving `key`.
    async fn node_of(&self, key: &str) -> usize {
        let slot: u64 = self
            .ctx
            .admin
            .custom(cmd("CLUSTER"), vec!["KEYSLOT", key])
            .await
            .expect("keyslot");
        let slot = u16::try_from(slot).expect("slot");
        self.nodes
            .iter()
            .position(|n| n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .expect("a node serves every slot")
    }

    /// An address `<base>-<i>` whose key (after the test's prefix) lives on node `node`.
    async fn address_on(&self, base: &str, node: usize) -> String {
        for i in 0.. {
            let address = format!("{base}-{i}");
            if self.node_of(&self.ctx.key(&address)).await == node {
                return address;
            }
        }
        unreachable!()
    }

    /// An address with a hash tag of its own, `{t<i>}.<base>`, whose key lives on node
    /// `node`: its derived keys take that tag rather than wrapping the whole key.
    async fn tagged_address_on(&self, base: &str, node: usize) -> String {
        for i in 0.. {
            let address = format!("{{t{i}}}.{base}");
            if self.node_of(&self.ctx.key(&address)).await == node {
                return address;
            }
        }
        unreachable!()
    }

    /// Asserts that `key` exists, and on master `node` itself (asked directly, not
    /// through the cluster client's routing).
    async fn assert_on(&self, key: &str, node: usize) {
        let n = &self.nodes[node];
        let exists: Result<u64, _> = n.client.exists(key).await;
        assert!(
            matches!(exists, Ok(1)),
            "{key} should exist on {} (slot owner): {exists:?}",
            n.addr
        );
    }

    /// Deletes every key under the test's prefix, node by node.
    async fn cleanup(&self) {
        for node in &self.nodes {
            for pattern in [
                format!("{}*", self.ctx.prefix),
                format!("{{{}*", self.ctx.prefix),
            ] {
                let keys: Value = node
                    .client
                    .custom(cmd("KEYS"), vec![pattern])
                    .await
                    .expect("keys");
                for key in keys.into_array() {
                    if let Some(key) = key.as_string() {
                        let _: Value = node.client.del(key).await.expect("del");
                    }
                }
            }
        }
    }
}

/// A key derived from `address`'s: `{key}:suffix`, or `key:suffix` when the key has a
/// hash tag already (as the adapter names them).
fn hashed(ctx: &Ctx, address: &str, suffix: &str) -> String {
    let key = ctx.key(address);
    if key.contains('{') {
        format!("{key}:{suffix}")
    } else {
        format!("{{{key}}}:{suffix}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_on_two_nodes_ack_retry_and_dead_letter() {
    let c = cluster().await;
    let ctx = &c.ctx;
    let a = c.address_on("orders", 0).await;
    let b = c.address_on("orders", 1).await;
    let dead = c.address_on("orders.dead", 2).await;
    let stream = || Stream::new().group("g").block(Duration::from_millis(100));
    let mut sub_a = ctx.subscribe(&a, stream(), 8).await;
    let mut sub_b = ctx.subscribe(&b, stream(), 8).await;
    let caps = sub_a.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish(&a, msg(1)).await;
    ctx.publish(&b, msg(2)).await;
    c.assert_on(&ctx.key(&a), 0).await;
    c.assert_on(&ctx.key(&b), 1).await;

    let da = next(&mut sub_a).await;
    let db = next(&mut sub_b).await;
    assert_eq!((n_of(&da), n_of(&db)), (1, 2));
    assert_eq!(ctx.pending(&a, "g").await, 1);
    assert_eq!(ctx.pending(&b, "g").await, 1);
    let none = Declaration::default();
    complete(da, caps, Verdict::Ack, &none, &*publisher)
        .await
        .expect("ack");
    assert_eq!(ctx.pending(&a, "g").await, 0, "XACK on node 0");
    assert_eq!(ctx.xlen(&a).await, 1);

    // Retry: a copy (XADD, count + 1), then XACK of the original.
    complete(db, caps, Verdict::Retry, &none, &*publisher)
        .await
        .expect("retry");
    assert_eq!(ctx.xlen(&b).await, 2, "the copy is in the stream");
    let copy = next(&mut sub_b).await;
    assert_eq!(n_of(&copy), 2);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(ctx.pending(&b, "g").await, 1, "only the copy is pending");

    // At the cap: the dead letter goes to a stream on the third node.
    let capped = Declaration {
        max_attempts: NonZeroU32::new(2),
        dead_letter: Some(Address::new(dead.as_str())),
        ..Declaration::default()
    };
    complete(copy, caps, Verdict::Retry, &capped, &*publisher)
        .await
        .expect("dead letter");
    assert_eq!(ctx.pending(&b, "g").await, 0);
    assert_eq!(ctx.xlen(&dead).await, 1);
    c.assert_on(&ctx.key(&dead), 2).await;
    c.cleanup().await;
}

#[tokio::test]
async fn claiming_requeue_comes_back_counted_and_a_silent_consumers_entry_is_claimed() {
    let c = cluster().await;
    let ctx = &c.ctx;
    let jobs = c.address_on("jobs", 1).await;
    let min_idle = Duration::from_millis(300);
    let claiming = || {
        Claiming::new(min_idle)
            .group("g")
            .block(Duration::from_millis(100))
    };
    let mut sub = ctx.subscribe(&jobs, claiming(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish(&jobs, msg(9)).await;
    c.assert_on(&ctx.key(&jobs), 1).await;
    let first = next(&mut sub).await;
    assert_eq!(first.broker_attempt(), Some(1));
    let started = Instant::now();
    complete(
        first,
        caps,
        Verdict::Retry,
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("requeue");
    assert_eq!(ctx.pending(&jobs, "g").await, 1, "left in the PEL");
    assert_eq!(ctx.xlen(&jobs).await, 1, "no copy");
    let second = next(&mut sub).await;
    assert!(started.elapsed() >= min_idle);
    assert_eq!(n_of(&second), 9);
    assert_eq!(second.redelivery_count(), 2, "the server's counter");
    assert_eq!(ctx.first_pending_counter(&jobs, "g").await, Some(2));
    complete(
        second,
        caps,
        Verdict::Ack,
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("ack");
    assert_eq!(ctx.pending(&jobs, "g").await, 0);

    // A silent consumer's entry is claimed by another one.
    ctx.publish(&jobs, msg(5)).await;
    let held = next(&mut sub).await;
    drop(held);
    let mut live = ctx.subscribe(&jobs, claiming(), 8).await;
    let claimed = next(&mut live).await;
    assert_eq!(n_of(&claimed), 5);
    assert_eq!(claimed.redelivery_count(), 2);
    claimed.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(ctx.pending(&jobs, "g").await, 0);
    c.cleanup().await;
}

#[tokio::test]
async fn durable_zset_parks_on_the_streams_node_and_moves_back() {
    let c = cluster().await;
    let ctx = &c.ctx;
    let mail = c.address_on("mail", 2).await;
    let zset = hashed(ctx, &mail, "delayed");
    let durable = Stream::new()
        .group("g")
        .block(Duration::from_millis(50))
        .delayed_retry(DelayedRetry::DurableZset);
    let mut sub = ctx.subscribe(&mail, durable, 8).await;
    let caps = sub.capabilities;
    assert!(caps.delays.is_some());
    let publisher = ctx.broker.publisher();
    ctx.publish(&mail, msg(1)).await;
    let d = next(&mut sub).await;
    let delay = Duration::from_millis(400);
    let started = Instant::now();
    complete(
        d,
        caps,
        Verdict::RetryAfter(delay),
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("parked");
    assert_eq!(ctx.zcard(&zset).await, 1, "ZADD of the copy");
    c.assert_on(&zset, 2).await;
    c.assert_on(&ctx.key(&mail), 2).await;
    assert_eq!(ctx.pending(&mail, "g").await, 0, "XACK of the original");
    assert_eq!(ctx.xlen(&mail).await, 1, "nothing back yet");
    let copy = next(&mut sub).await;
    assert!(started.elapsed() >= delay, "not before the delay");
    assert_eq!(n_of(&copy), 1);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(ctx.zcard(&zset).await, 0, "moved by the read's Lua script");
    assert_eq!(ctx.xlen(&mail).await, 2);
    copy.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(ctx.pending(&mail, "g").await, 0);

    // The broker's own move, without a subscription reading, on another node.
    let other = c.address_on("mail", 0).await;
    let mut sub = ctx
        .subscribe(
            &other,
            Stream::new()
                .group("g")
                .block(Duration::from_millis(50))
                .delayed_retry(DelayedRetry::DurableZset),
            8,
        )
        .await;
    ctx.publish(&other, msg(2)).await;
    let d = next(&mut sub).await;
    drop(sub);
    d.settle(Settlement::RequeueAfter(Duration::from_millis(10)))
        .await
        .expect("parked");
    let other_zset = hashed(ctx, &other, "delayed");
    assert_eq!(ctx.zcard(&other_zset).await, 1);
    c.assert_on(&other_zset, 0).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(ctx.broker.move_delayed(&other).await.expect("move"), 1);
    assert_eq!(ctx.zcard(&other_zset).await, 0);
    assert_eq!(ctx.xlen(&other).await, 2);
    c.cleanup().await;
}

fn reliable(consumer: &str) -> ReliableList {
    ReliableList::new()
        .consumer(consumer)
        .block(Duration::from_millis(100))
        .heartbeat(Duration::from_millis(600))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reliable_lists_on_two_nodes_settle_and_recover_a_dead_consumer() {
    let c = cluster().await;
    let ctx = &c.ctx;
    let publisher = ctx.broker.publisher();
    for (node, list) in [
        (0, c.address_on("tasks", 0).await),
        (2, c.tagged_address_on("tasks", 2).await),
    ] {
        let processing = |consumer: &str| hashed(ctx, &list, &format!("processing:{consumer}"));

        // Round trip: ack is LREM, retry pushes a copy back then LREM.
        let mut sub = ctx.subscribe(&list, reliable("c1"), 8).await;
        let caps = sub.capabilities;
        ctx.publish(&list, msg(1)).await;
        ctx.publish(&list, msg(2)).await;
        let a = next(&mut sub).await;
        let b = next(&mut sub).await;
        assert_eq!((n_of(&a), n_of(&b)), (1, 2), "FIFO");
        assert_eq!(ctx.llen(&processing("c1")).await, 2);
        c.assert_on(&processing("c1"), node).await;
        c.assert_on(&hashed(ctx, &list, "consumers"), node).await;
        c.assert_on(&hashed(ctx, &list, "alive:c1"), node).await;
        complete(a, caps, Verdict::Ack, &Declaration::default(), &*publisher)
            .await
            .expect("ack");
        assert_eq!(ctx.llen(&processing("c1")).await, 1);
        complete(
            b,
            caps,
            Verdict::Retry,
            &Declaration::default(),
            &*publisher,
        )
        .await
        .expect("retry");
        let copy = next(&mut sub).await;
        assert_eq!(n_of(&copy), 2);
        assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
        copy.settle(Settlement::Accept).await.expect("ack");
        assert_eq!(ctx.llen(&processing("c1")).await, 0);
        assert_eq!(ctx.llen(&ctx.key(&list)).await, 0);
        drop(sub);

        // Recovery: a dead consumer's processing list goes back to the list.
        let mut dead = ctx.subscribe(&list, reliable("dead"), 8).await;
        for n in 0..3 {
            ctx.publish(&list, msg(n)).await;
        }
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(next(&mut dead).await);
        }
        drop(dead);
        std::mem::forget(held);
        assert_eq!(ctx.llen(&processing("dead")).await, 3);
        c.assert_on(&processing("dead"), node).await;
        let mut live = ctx.subscribe(&list, reliable("live"), 8).await;
        let mut got = Vec::new();
        while got.len() < 3 {
            let d = next_within(&mut live, Duration::from_secs(5))
                .await
                .expect("recovered within a few heartbeats");
            got.push(n_of(&d));
            d.settle(Settlement::Accept).await.expect("ack");
        }
        assert_eq!(got, [0, 1, 2], "oldest first");
        assert_eq!(ctx.llen(&processing("dead")).await, 0);
        assert_eq!(ctx.llen(&processing("live")).await, 0);
        let still_listed: bool = ctx
            .admin
            .sismember(hashed(ctx, &list, "consumers"), "dead")
            .await
            .expect("sismember");
        assert!(!still_listed, "the dead consumer is unlisted");

        // A consumer restarted under its own name takes its own list back first.
        ctx.publish(&list, msg(7)).await;
        let held = next(&mut live).await;
        drop(live);
        std::mem::forget(held);
        let mut again = ctx.subscribe(&list, reliable("live"), 8).await;
        let d = next(&mut again).await;
        assert_eq!(n_of(&d), 7);
        d.settle(Settlement::Accept).await.expect("ack");
        assert_eq!(ctx.llen(&processing("live")).await, 0);
    }
    c.cleanup().await;
}

#[tokio::test]
async fn plain_list_round_trip() {
    let c = cluster().await;
    let ctx = &c.ctx;
    let plain = c.address_on("plain", 1).await;
    let mut sub = ctx
        .subscribe(&plain, List::new().block(Duration::from_millis(100)), 8)
        .await;
    let publisher = ctx.broker.publisher();
    ctx.publish(&plain, msg(1)).await;
    let d = next(&mut sub).await;
    assert_eq!(n_of(&d), 1);
    assert_eq!(ctx.llen(&ctx.key(&plain)).await, 0, "popped on receipt");
    let delay = Duration::from_millis(50);
    let copy = copy_after(&mut sub, d, delay, &Declaration::default(), &*publisher).await;
    assert_eq!(n_of(&copy), 1);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    assert_unsupported(copy).await;
    c.cleanup().await;
}

#[tokio::test]
async fn pubsub_channel_and_pattern() {
    let c = cluster().await;
    let ctx = &c.ctx;
    let publisher = ctx.broker.publisher();

    let mut sub = ctx.subscribe("news", PubSub::new(), 8).await;
    ctx.publish("news", msg(1).with_header("tenant", "acme"))
        .await;
    let d = next(&mut sub).await;
    assert_eq!(n_of(&d), 1);
    assert_eq!(d.headers().get_str("tenant"), Some("acme"));
    let delay = Duration::from_millis(20);
    let copy = copy_after(&mut sub, d, delay, &Declaration::default(), &*publisher).await;
    assert_eq!(n_of(&copy), 1);
    assert_eq!(copy.redelivery_count(), 2, "the runtime's copy");
    assert_unsupported(copy).await;

    let mut options = Options::default();
    options.insert(Pattern::new());
    let declaration = Declaration {
        retry_to: Some(Address::new("alerts.retry")),
        ..Declaration::default()
    };
    let spec = SubscribeSpec {
        address: Address::new("alerts.*"),
        declaration: declaration.clone(),
        in_flight: 8,
        options,
        drain: Default::default(),
    };
    let mut sub = ctx.broker.subscribe(spec).await.expect("psubscribe");
    ctx.broker
        .route("alerts.disk", ruststream_redis::Target::Channel);
    ctx.publish("alerts.disk", msg(3)).await;
    let d = next(&mut sub).await;
    assert_eq!(d.address().as_str(), "alerts.disk");
    let delay = Duration::from_millis(10);
    let copy = copy_after(&mut sub, d, delay, &declaration, &*publisher).await;
    assert_eq!(copy.address().as_str(), "alerts.retry");
    assert!(
        next_within(&mut sub, Duration::from_millis(200))
            .await
            .is_none()
    );
    c.cleanup().await;
}
