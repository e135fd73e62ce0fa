//! The demo's `dead-letters` tools on the adapters opened by `amqp091://` (RabbitMQ 3.10
//! over AMQP 0-9-1, a classic dead-letter queue) and `nats://` (a JetStream stream):
//! dead letters made by `run`, then `list`, `show`, `replay --dry-run`, `replay` and
//! `purge`, with the server's state checked after each.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use ruststream::core::{Setting, SubscribeSpec};
use support::{demo, listed_ids, listed_messages, two_dead_letters, unique_prefix};

/// RabbitMQ 3 (`RUSTSTREAM_LAPIN_URL`) as an `amqp091://` URL.
fn lapin_url() -> String {
    let url = std::env::var("RUSTSTREAM_LAPIN_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    format!("amqp091://{rest}")
}

fn nats_url() -> String {
    std::env::var("RUSTSTREAM_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// Opens a subscription to each address with `url` (and `settings`) and closes it:
/// what the adapter makes for a subscription (a queue, a stream) is then there.
async fn made(url: &str, addresses: &[&str], settings: &[(&str, &str)]) {
    let broker = ruststream::connect(url)
        .await
        .unwrap_or_else(|e| panic!("{e}: is the broker running? (see scripts/test)"));
    for address in addresses {
        let mut spec = SubscribeSpec::new(*address);
        for (key, value) in settings {
            spec.options.configure(Setting::new(*key, *value, "test"));
        }
        broker.subscribe(spec).await.expect("subscribe");
    }
    broker.close().await;
}

/// `rabbitmqctl ARGS` on the machine's RabbitMQ 3.
fn rabbitmqctl(args: &[&str]) -> String {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("run rabbitmqctl");
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?} failed (is the machine's RabbitMQ 3 running?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many messages RabbitMQ 3's `queue` holds (ready + unacknowledged).
fn held(queue: &str) -> u64 {
    let listed = rabbitmqctl(&["-q", "list_queues", "name", "messages"]);
    listed_messages(&listed, queue).unwrap_or_else(|| panic!("no queue {queue}: {listed}"))
}

/// Deletes JetStream streams `names` (core NATS protocol: a request to
/// `$JS.API.STREAM.DELETE.<name>`), best effort.
fn delete_streams(names: &[String]) {
    let address = nats_url().trim_start_matches("nats://").to_owned();
    let Ok(mut server) = TcpStream::connect(address) else {
        return;
    };
    let _ = server.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::from("CONNECT {\"verbose\":false}\r\nSUB _INBOX.rs-cli 1\r\n");
    for name in names {
        line.push_str(&format!(
            "PUB $JS.API.STREAM.DELETE.{name} _INBOX.rs-cli 0\r\n\r\n"
        ));
    }
    line.push_str("PING\r\n");
    let _ = server.write_all(line.as_bytes());
    let mut answer = [0u8; 4096];
    let _ = server.read(&mut answer);
}

/// Deletes the test's queues on RabbitMQ 3 when the test ends, passed or failed.
struct Queues(Vec<String>);

impl Drop for Queues {
    fn drop(&mut self) {
        for queue in &self.0 {
            let _ = Command::new("rabbitmqctl")
                .args(["-q", "delete_queue", queue])
                .output();
        }
    }
}

/// Deletes the test's JetStream streams when the test ends, passed or failed.
struct Streams(Vec<String>);

impl Drop for Streams {
    fn drop(&mut self) {
        delete_streams(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_on_a_rabbitmq_classic_queue_over_amqp_0_9_1() {
    let url = lapin_url();
    let p = unique_prefix("lapin");
    let (orders, dead) = (format!("{p}demo.orders"), format!("{p}demo.orders.dead"));
    let _clean = Queues(vec![orders.clone(), dead.clone()]);
    made(&url, &[&orders, &dead], &[("declare", "classic")]).await;
    let url2 = url.clone();
    let p2 = p.clone();
    tokio::task::spawn_blocking(move || two_dead_letters(&url2, &p2))
        .await
        .expect("demo runs");
    assert_eq!(held(&dead), 2);
    let orders_before = held(&orders);

    let list = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    let ids = listed_ids(&list.stdout);
    assert_eq!(ids.len(), 2, "{}", list.stdout);
    assert!(ids.iter().all(|id| id.len() == 16), "digest ids: {ids:?}");
    assert!(list.stdout.contains(&orders), "{}", list.stdout);
    let again = demo(&url, &p, &["dead-letters", "list", &dead]).expect_ok("list");
    assert_eq!(listed_ids(&again.stdout), ids, "the same ids, in order");
    assert_eq!(held(&dead), 2, "list removes nothing");

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
    assert_eq!((held(&dead), held(&orders)), (2, orders_before));

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
    assert_eq!((held(&dead), held(&orders)), (1, orders_before + 1));
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
    assert_eq!(held(&dead), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_on_a_jetstream_stream() {
    let url = nats_url();
    let p = unique_prefix("nats");
    let (orders, dead) = (format!("{p}demo.orders"), format!("{p}demo.orders.dead"));
    let _clean = Streams(vec![orders.replace('.', "_"), dead.replace('.', "_")]);
    made(&url, &[&dead], &[]).await;
    let (url2, p2) = (url.clone(), p.clone());
    tokio::task::spawn_blocking(move || two_dead_letters(&url2, &p2))
        .await
        .expect("demo runs");
    let count = |address: &str| {
        let list = demo(&url, &p, &["dead-letters", "list", address]).expect_ok("list");
        listed_ids(&list.stdout)
    };

    let ids = count(&dead);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(
        ids.iter().all(|id| id.parse::<u64>().is_ok()),
        "stream sequences: {ids:?}"
    );
    assert_eq!(count(&dead), ids, "list removes nothing");
    let orders_before = count(&orders).len();

    let show = demo(&url, &p, &["dead-letters", "show", &dead, "--id", &ids[0]]).expect_ok("show");
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

    demo(&url, &p, &["dead-letters", "replay", &dead, "--dry-run"]).expect_ok("dry run");
    assert_eq!(count(&dead).len(), 2, "a dry run changes nothing");

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
    assert_eq!(count(&dead), [ids[1].clone()]);
    let stored = count(&orders);
    assert_eq!(stored.len(), orders_before + 1);
    let newest = stored.last().expect("the copy");
    let copy = demo(&url, &p, &["dead-letters", "show", &orders, "--id", newest]).expect_ok("show");
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

    let refused = demo(&url, &p, &["dead-letters", "purge", &dead]);
    assert!(!refused.ok, "purge without a filter needs --all");
    let purge = demo(&url, &p, &["dead-letters", "purge", &dead, "--all"]).expect_ok("purge");
    assert!(
        purge.stdout.contains("1 dead letter(s) purged"),
        "{}",
        purge.stdout
    );
    assert!(count(&dead).is_empty());
}
