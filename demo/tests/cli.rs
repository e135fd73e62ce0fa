//! The demo's command line against real brokers: dead letters made by `run`, then
//! `dead-letters list`, `show`, `replay --dry-run`, `replay` and `purge`, with the
//! server's state checked after each.

mod support;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand, Value};
use support::{
    amqp_url, demo, listed_ids, postgres_url, queue_settles_at, quorum_queues, redis_url,
    two_dead_letters, unique_prefix,
};

async fn redis() -> Client {
    let client = Client::new(
        Config::from_url(&redis_url()).expect("url"),
        None,
        None,
        None,
    );
    match tokio::time::timeout(std::time::Duration::from_secs(5), client.init()).await {
        Ok(Ok(_)) => client,
        _ => panic!(
            "no Redis at {} (RUSTSTREAM_REDIS_URL). Start it with scripts/redis.sh",
            redis_url()
        ),
    }
}

/// The fields of the newest entry of stream `key`, as text.
async fn newest_entry(redis: &Client, key: &str) -> Vec<(String, String)> {
    let reply: Value = redis
        .custom(
            CustomCommand::new_static("XREVRANGE", ClusterHash::FirstKey, false),
            vec![key, "+", "-", "COUNT", "1"],
        )
        .await
        .expect("xrevrange");
    let entries = reply.into_array();
    let entry = entries.into_iter().next().expect("an entry").into_array();
    let fields = entry.into_iter().nth(1).expect("fields").into_array();
    fields
        .chunks(2)
        .map(|p| {
            (
                p[0].as_string().unwrap_or_default(),
                p[1].as_string().unwrap_or_default(),
            )
        })
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn dead_letters_on_a_redis_stream() {
    let url = redis_url();
    let redis = redis().await;
    let p = unique_prefix("stream");
    let (orders, dead) = (format!("{p}demo.orders"), format!("{p}demo.orders.dead"));
    let xlen = |key: String| {
        let redis = redis.clone();
        async move { redis.xlen::<u64, _>(key).await.expect("xlen") }
    };
    two_dead_letters(&url, &p);
    assert_eq!(xlen(dead.clone()).await, 2);
    let orders_before = xlen(orders.clone()).await;

    let list = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    let ids = listed_ids(&list.stdout);
    assert_eq!(ids.len(), 2, "{}", list.stdout);
    assert!(
        ids.iter().all(|id| id.contains('-')),
        "stream entry ids: {ids:?}"
    );
    for row in list.stdout.lines().skip(1).take(2) {
        assert!(
            row.contains("retry") && row.contains(&orders) && row.contains(" 3 "),
            "{row}"
        );
    }
    assert!(
        list.stdout.contains("2 dead letter(s) listed"),
        "{}",
        list.stdout
    );
    assert_eq!(xlen(dead.clone()).await, 2, "list removes nothing");

    let show = demo(&url, &p, &["dead-letters", "show", &dead, "--id", &ids[0]]).expect_ok("show");
    assert!(
        show.stdout.contains(&format!("id: {}", ids[0])),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains(r#"{"id":5,"kind":"doomed"}"#),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout
            .contains(&format!("x-ruststream-dead-letter-from: {orders}")),
        "{}",
        show.stdout
    );
    assert!(!show.stdout.contains(&ids[1]), "only the id asked for");

    let dry = demo(&url, &p, &["dead-letters", "replay", &dead, "--dry-run"]).expect_ok("dry run");
    assert!(
        dry.stdout
            .contains(&format!("would replay {} to {orders}", ids[0])),
        "{}",
        dry.stdout
    );
    assert_eq!(xlen(dead.clone()).await, 2, "a dry run changes nothing");
    assert_eq!(xlen(orders.clone()).await, orders_before);

    let replay = demo(
        &url,
        &p,
        &["dead-letters", "replay", &dead, "--id", &ids[0]],
    )
    .expect_ok("replay");
    assert!(
        replay
            .stdout
            .contains(&format!("replayed {} to {orders}", ids[0])),
        "{}",
        replay.stdout
    );
    assert_eq!(xlen(dead.clone()).await, 1);
    assert_eq!(xlen(orders.clone()).await, orders_before + 1);
    let copy = newest_entry(&redis, &orders).await;
    assert_eq!(
        field(&copy, "_payload"),
        Some(r#"{"id":5,"kind":"doomed"}"#)
    );
    assert!(
        field(&copy, "h:x-ruststream-replayed-at").is_some(),
        "{copy:?}"
    );
    assert_eq!(field(&copy, "h:x-ruststream-retry-count"), None, "{copy:?}");
    assert!(
        copy.iter()
            .all(|(n, _)| !n.starts_with("h:x-ruststream-dead-letter-")),
        "{copy:?}"
    );

    let refused = demo(&url, &p, &["dead-letters", "purge", &dead]);
    assert!(!refused.ok, "purge without a filter needs --all");
    assert!(refused.stderr.contains("pass --all"), "{}", refused.stderr);
    demo(
        &url,
        &p,
        &["dead-letters", "purge", &dead, "--all", "--dry-run"],
    )
    .expect_ok("dry run");
    assert_eq!(xlen(dead.clone()).await, 1);
    let purge = demo(&url, &p, &["dead-letters", "purge", &dead, "--all"]).expect_ok("purge");
    assert!(
        purge.stdout.contains("1 dead letter(s) purged"),
        "{}",
        purge.stdout
    );
    assert_eq!(xlen(dead.clone()).await, 0);
    let list = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    assert!(listed_ids(&list.stdout).is_empty());

    let _: () = redis.del(vec![orders, dead]).await.expect("clean up");
}

#[tokio::test]
async fn dead_letters_on_a_redis_list() {
    let url = redis_url();
    let redis = redis().await;
    let p = unique_prefix("list");
    let (orders, dead) = (format!("{p}demo.orders"), format!("{p}demo.orders.dead"));
    // The kind marker a list consumer leaves: the runtime publishes dead letters there
    // as list elements (frames).
    let marker = format!("{{{dead}}}:kind");
    let _: () = redis
        .set(&marker, "list", None, None, false)
        .await
        .expect("marker");
    two_dead_letters(&url, &p);
    let llen = || {
        let redis = redis.clone();
        let dead = dead.clone();
        async move { redis.llen::<u64, _>(dead).await.expect("llen") }
    };
    assert_eq!(llen().await, 2);
    let orders_before: u64 = redis.xlen(&orders).await.expect("xlen");

    let list = demo(
        &url,
        &p,
        &["dead-letters", "list", &dead, "--reason", "retry"],
    )
    .expect_ok("list");
    let ids = listed_ids(&list.stdout);
    assert_eq!(ids.len(), 2, "{}", list.stdout);
    assert!(ids.iter().all(|id| id.len() == 16), "digest ids: {ids:?}");
    let none = demo(
        &url,
        &p,
        &["dead-letters", "list", &dead, "--reason", "panic"],
    )
    .expect_ok("list");
    assert!(listed_ids(&none.stdout).is_empty(), "{}", none.stdout);
    let show = demo(&url, &p, &["dead-letters", "show", &dead, "--limit", "1"]).expect_ok("show");
    assert!(
        show.stdout
            .contains("x-ruststream-dead-letter-reason: retry"),
        "{}",
        show.stdout
    );

    let dry = demo(
        &url,
        &p,
        &[
            "dead-letters",
            "replay",
            &dead,
            "--id",
            &ids[1],
            "--dry-run",
        ],
    )
    .expect_ok("dry run");
    assert!(dry.stdout.contains("would replay"), "{}", dry.stdout);
    assert_eq!(llen().await, 2);

    demo(
        &url,
        &p,
        &["dead-letters", "replay", &dead, "--id", &ids[1]],
    )
    .expect_ok("replay");
    assert_eq!(llen().await, 1);
    let orders_after: u64 = redis.xlen(&orders).await.expect("xlen");
    assert_eq!(orders_after, orders_before + 1);
    let copy = newest_entry(&redis, &orders).await;
    assert!(
        field(&copy, "h:x-ruststream-replayed-at").is_some(),
        "{copy:?}"
    );
    // The one left is the other id.
    let left = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    assert_eq!(listed_ids(&left.stdout), [ids[0].clone()]);

    demo(&url, &p, &["dead-letters", "purge", &dead, "--id", &ids[0]]).expect_ok("purge");
    assert_eq!(llen().await, 0);

    let _: () = redis
        .del(vec![orders, dead, marker])
        .await
        .expect("clean up");
}

#[test]
fn dead_letters_on_a_rabbitmq_quorum_queue() {
    let url = amqp_url();
    let p = unique_prefix("amqp");
    let (orders, dead) = (format!("{p}demo.orders"), format!("{p}demo.orders.dead"));
    quorum_queues(&[&orders, &dead]);
    two_dead_letters(&url, &p);
    queue_settles_at(&dead, 2);
    queue_settles_at(&orders, 0);

    let list = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    let ids = listed_ids(&list.stdout);
    assert_eq!(ids.len(), 2, "{}", list.stdout);
    assert!(list.stdout.contains(&orders), "{}", list.stdout);
    let again = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    assert_eq!(
        listed_ids(&again.stdout),
        ids,
        "the same ids, in the same order"
    );
    queue_settles_at(&dead, 2);

    let show = demo(&url, &p, &["dead-letters", "show", &dead, "--id", &ids[1]]).expect_ok("show");
    assert!(
        show.stdout.contains(r#"{"id":5,"kind":"doomed"}"#),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("x-ruststream-dead-letter-attempt: 3"),
        "{}",
        show.stdout
    );

    demo(&url, &p, &["dead-letters", "replay", &dead, "--dry-run"]).expect_ok("dry run");
    queue_settles_at(&dead, 2);
    queue_settles_at(&orders, 0);

    let replay = demo(
        &url,
        &p,
        &["dead-letters", "replay", &dead, "--id", &ids[0]],
    )
    .expect_ok("replay");
    assert!(
        replay.stdout.contains("1 dead letter(s) replayed"),
        "{}",
        replay.stdout
    );
    queue_settles_at(&dead, 1);
    queue_settles_at(&orders, 1);
    // The copy, browsed in the orders queue with the same tool.
    let copy = demo(&url, &p, &["dead-letters", "show", &orders]).expect_ok("show");
    assert!(
        copy.stdout.contains("x-ruststream-replayed-at: "),
        "{}",
        copy.stdout
    );
    assert!(
        !copy.stdout.contains("x-ruststream-dead-letter-"),
        "{}",
        copy.stdout
    );
    assert!(
        !copy.stdout.contains("x-ruststream-retry-count"),
        "{}",
        copy.stdout
    );

    let purge = demo(
        &url,
        &p,
        &["dead-letters", "purge", &dead, "--reason", "retry"],
    )
    .expect_ok("purge");
    assert!(
        purge.stdout.contains("1 dead letter(s) purged"),
        "{}",
        purge.stdout
    );
    queue_settles_at(&dead, 0);
    queue_settles_at(&orders, 1);
}

#[test]
fn errors_name_the_fix() {
    let p = unique_prefix("errors");
    let old_style = demo("memory://", &p, &["redis://127.0.0.1:6379"]);
    assert!(!old_style.ok);
    assert!(
        old_style.stderr.contains("--broker redis://127.0.0.1:6379"),
        "{}",
        old_style.stderr
    );
    let unknown = demo("kafka://h:9092", &p, &["dead-letters", "list", "x"]);
    assert!(!unknown.ok);
    assert!(
        unknown.stderr.contains("pass --broker URL"),
        "{}",
        unknown.stderr
    );
    let memory = demo("memory://", &p, &["dead-letters", "list", "x"]).expect_ok("list");
    assert!(
        memory.stderr.contains("memory:// holds only this process"),
        "{}",
        memory.stderr
    );
    let run = demo("memory://", &p, &[]).expect_ok("run on memory");
    assert!(
        run.stdout.contains("demo on the memory broker"),
        "{}",
        run.stdout
    );
}

/// `asyncapi` prints the service's document (JSON by default) or writes it where
/// `--out` says, in YAML with `--format yaml`; a format it does not know is refused. (The
/// documents' validity against the AsyncAPI 3.0 schema and parser is checked by
/// `scripts/test`, on the demo's own test output.)
#[test]
fn asyncapi_prints_the_document() {
    let p = unique_prefix("asyncapi");
    let json = demo("memory://", &p, &["asyncapi"]).expect_ok("asyncapi");
    let document: serde_json::Value =
        serde_json::from_str(&json.stdout).expect("the document is JSON on stdout");
    assert_eq!(document["asyncapi"], "3.0.0");
    assert_eq!(document["info"]["title"], "demo");
    let orders = format!("{p}demo.orders");
    let addresses: Vec<&str> = document["channels"]
        .as_object()
        .expect("channels")
        .values()
        .filter_map(|c| c["address"].as_str())
        .collect();
    assert!(addresses.contains(&orders.as_str()), "{addresses:?}");

    let out = std::env::temp_dir().join(format!("{p}asyncapi.yaml"));
    let bad = demo("memory://", &p, &["asyncapi", "--format", "xml"]);
    assert!(!bad.ok);
    assert!(bad.stderr.contains("json or yaml"), "{}", bad.stderr);
    let yaml = demo(
        "memory://",
        &p,
        &[
            "asyncapi",
            "--format",
            "yaml",
            "--out",
            out.to_str().expect("path"),
        ],
    )
    .expect_ok("asyncapi --out");
    assert!(yaml.stdout.is_empty(), "{}", yaml.stdout);
    let text = std::fs::read_to_string(&out).expect("written");
    assert!(text.starts_with("\"asyncapi\": \"3.0.0\""), "{text}");
    let _ = std::fs::remove_file(&out);
}

/// `--broker URL` goes before the command or after it (the README's first line puts it
/// before), and `--help` lists the schemes this build opens.
#[test]
fn the_broker_option_goes_before_or_after_the_command() {
    let p = unique_prefix("broker-first");
    for args in [
        &["--broker", "memory://", "dead-letters", "list", "x"][..],
        &["dead-letters", "list", "x", "--broker", "memory://"][..],
        &["dead-letters", "--broker", "memory://", "list", "x"][..],
    ] {
        let listed = demo("kafka://not-used:1", &p, args).expect_ok("list");
        assert!(
            listed.stdout.contains("dead letter(s) listed at x"),
            "{args:?}: {}",
            listed.stdout
        );
    }
    let help = demo("memory://", &p, &["--help"]).expect_ok("help");
    // Each of the demo's broker features opens these (as each adapter's docs list them).
    // The workspace may unify more features in (an adapter's TLS), whose schemes the line
    // then lists as well.
    let own = [
        "memory://",
        "redis://",
        "redis-cluster://",
        "redis-sentinel://",
        "amqp://",
        "amqp091://",
        "nats://",
        "tls://",
        "nats+tls://",
        "postgres://",
        "postgresql://",
        "kafka://",
        "mqtt://",
    ];
    let line = help
        .stdout
        .split("This build opens: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no list of schemes in {}", help.stdout));
    let opens: Vec<&str> = line.split(", ").collect();
    for scheme in own {
        assert!(opens.contains(&scheme), "{scheme} missing from {line}");
    }
    // The TLS forms of the adapters whose `tls` feature another member may turn on.
    let tls = [
        "rediss://",
        "rediss-cluster://",
        "rediss-sentinel://",
        "amqps://",
        "amqps091://",
        "mqtts://",
    ];
    for scheme in &opens {
        assert!(
            own.contains(scheme) || tls.contains(scheme),
            "{scheme} is neither a feature of the demo nor a TLS form: {line}"
        );
    }
}

/// `asyncapi` needs no broker: with nobody at the URL the document is still made (the
/// URL is its server), without the broker's facts, and a note says so.
#[test]
fn asyncapi_needs_no_broker() {
    let p = unique_prefix("asyncapi-offline");
    let made = demo("redis://127.0.0.1:1", &p, &["asyncapi"]).expect_ok("asyncapi offline");
    let document: serde_json::Value =
        serde_json::from_str(&made.stdout).expect("the document is JSON on stdout");
    assert_eq!(document["asyncapi"], "3.0.0");
    let servers = document["servers"].to_string();
    assert!(servers.contains("127.0.0.1:1"), "{servers}");
    assert!(
        made.stderr.contains("made without the broker's facts"),
        "{}",
        made.stderr
    );
    assert!(
        !made.stderr.contains('\u{1b}'),
        "colour codes in {:?}",
        made.stderr
    );
}

/// The dead-letter tools on PostgreSQL: a replay replaces each dead letter's row by its
/// copy in one statement (never both), and the copies wait in the queue they came from.
#[test]
fn dead_letters_on_postgres() {
    let p = unique_prefix("pg");
    let schema = format!(
        "rs_cli_{}",
        p.chars().filter(char::is_ascii_digit).collect::<String>()
    );
    let url = postgres_url(&schema);
    let (orders, dead) = (format!("{p}demo.orders"), format!("{p}demo.orders.dead"));
    two_dead_letters(&url, &p);
    let list = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    let ids = listed_ids(&list.stdout);
    assert_eq!(ids.len(), 2, "{}", list.stdout);
    let before = listed_ids(
        &demo(&url, &p, &["dead-letters", "list", &orders])
            .expect_ok("list orders")
            .stdout,
    )
    .len();
    let replay = demo(&url, &p, &["dead-letters", "replay", &dead]).expect_ok("replay");
    assert!(
        replay.stdout.contains("2 dead letter(s) replayed"),
        "{}",
        replay.stdout
    );
    let left = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list after");
    assert!(listed_ids(&left.stdout).is_empty(), "{}", left.stdout);
    let after = listed_ids(
        &demo(&url, &p, &["dead-letters", "list", &orders])
            .expect_ok("list orders after")
            .stdout,
    )
    .len();
    assert_eq!(after, before + 2, "the copies wait in {orders}");
}
