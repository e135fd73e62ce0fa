//! Bad input on the wire: delivered with a defect (the runtime's decode policy applies),
//! never a panic; and bad URLs. The end-to-end checks write entries with a raw client
//! (fred) to a stream a service reads with a mount of default options and a dead letter.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use fred::prelude::*;
use fred::types::Key;
use ruststream::{App, Attempt, Headers, Mount, Policy, Running, ack, retry};
use ruststream_conformance::logs::logs;
use ruststream_core::{Broker, Settlement};
use ruststream_redis::{
    ConnectError, List, PubSub, RedisBroker, ReliableList, STREAM_FIELDS, Stream,
};
use serde::Deserialize;
use support::{Ctx, ctx, next};

#[tokio::test]
async fn stream_entry_without_payload_is_a_defect_and_can_be_settled() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "s",
            Stream::new().group("g").block(Duration::from_millis(100)),
            8,
        )
        .await;
    let _: String = ctx
        .admin
        .xadd(
            ctx.key("s"),
            false,
            None,
            "*",
            vec![("h:a", "1"), ("other", "x")],
        )
        .await
        .expect("xadd");
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("stream entry has no _payload field"));
    assert_eq!(d.headers().get_str("a"), Some("1"));
    // The default decode policy drops: XACK.
    d.settle(Settlement::Reject).await.expect("reject");
    assert_eq!(ctx.pending("s", "g").await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn stream_header_name_not_utf8_is_a_defect() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "s",
            Stream::new().group("g").block(Duration::from_millis(100)),
            8,
        )
        .await;
    let field = fred::types::Key::from(&b"h:\xff\xfe"[..]);
    let _: String = ctx
        .admin
        .xadd(
            ctx.key("s"),
            false,
            None,
            "*",
            vec![(fred::types::Key::from("_payload"), "body"), (field, "v")],
        )
        .await
        .expect("xadd");
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("header name is not utf-8"));
    assert_eq!(&d.payload()[..], b"body");
    ctx.cleanup().await;
}

#[tokio::test]
async fn truncated_list_frames_are_defects_on_both_list_forms() {
    let ctx = ctx().await;
    // Claims one header of 16 bytes name, then stops.
    let truncated = bytes::Bytes::from_static(b"\0\0\0\x01\0\0\0\x10ab");
    let _: i64 = ctx
        .admin
        .lpush(ctx.key("plain"), truncated.clone())
        .await
        .expect("lpush");
    let mut sub = ctx
        .subscribe("plain", List::new().block(Duration::from_millis(100)), 8)
        .await;
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("truncated frame"));
    assert_eq!(d.payload(), &truncated, "delivered whole, as it arrived");

    let _: i64 = ctx
        .admin
        .lpush(ctx.key("reliable"), truncated.clone())
        .await
        .expect("lpush");
    let mut sub = ctx
        .subscribe(
            "reliable",
            ReliableList::new()
                .consumer("c")
                .block(Duration::from_millis(100)),
            8,
        )
        .await;
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("truncated frame"));
    d.settle(Settlement::Reject).await.expect("LREM");
    assert_eq!(
        ctx.llen(&format!("{{{}}}:processing:c", ctx.key("reliable")))
            .await,
        0
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn pubsub_frame_with_non_utf8_header_name_is_a_defect() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("news", PubSub::new(), 8).await;
    let frame = bytes::Bytes::from_static(b"\0\0\0\x01\0\0\0\x01\xff\0\0\0\x01vpayload");
    let _: i64 = ctx
        .admin
        .publish(ctx.key("news"), frame)
        .await
        .expect("publish");
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("header name is not utf-8"));
    ctx.cleanup().await;
}

#[tokio::test]
async fn bad_urls_and_unreachable_servers_are_clear_errors() {
    for url in [
        "localhost:6379",
        "http://localhost",
        "redis://",
        "redis://h/notadb",
    ] {
        let err = RedisBroker::connect(url).await.expect_err(url);
        assert!(matches!(err, ConnectError::BadUrl(_)), "{url}: {err}");
    }
    let err = RedisBroker::connect("rediss://localhost")
        .await
        .expect_err("tls");
    if cfg!(feature = "tls") {
        assert!(matches!(err, ConnectError::Connect(_)), "{err}");
    } else {
        assert!(matches!(err, ConnectError::TlsDisabled), "{err}");
    }
    // Nothing listens on port 1.
    let err = RedisBroker::connect("redis://127.0.0.1:1")
        .await
        .expect_err("refused");
    assert!(matches!(err, ConnectError::Connect(_)), "{err}");
    assert!(err.to_string().starts_with("cannot connect to redis"));
}

#[tokio::test]
async fn closing_ends_subscriptions() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "s",
            Stream::new().group("g").block(Duration::from_millis(100)),
            8,
        )
        .await;
    ctx.broker.close().await;
    let end = tokio::time::timeout(
        Duration::from_secs(2),
        futures_util::StreamExt::next(&mut sub.deliveries),
    )
    .await
    .expect("ends promptly");
    assert!(end.is_none());
    ctx.cleanup().await;
}

/// The payload the end-to-end services read.
#[derive(Deserialize)]
struct Job {
    n: u64,
}

/// One raw entry: field-value pairs as written, byte for byte.
type Entry = Vec<(Bytes, Bytes)>;

fn pair(field: &[u8], value: &[u8]) -> (Bytes, Bytes) {
    (Bytes::copy_from_slice(field), Bytes::copy_from_slice(value))
}

/// Writes `entry` to `address` with the raw client.
async fn xadd(ctx: &Ctx, address: &str, entry: &Entry) {
    let fields: Vec<(Key, Bytes)> = entry
        .iter()
        .map(|(f, v)| (Key::from(f.as_ref()), v.clone()))
        .collect();
    let _: String = ctx
        .admin
        .xadd(ctx.key(address), false, None, "*", fields)
        .await
        .expect("xadd");
}

/// Every entry of `address`, as field-value pairs.
async fn entries(ctx: &Ctx, address: &str) -> Vec<Entry> {
    let all: fred::types::Value = ctx
        .admin
        .xrange(ctx.key(address), "-", "+", None)
        .await
        .expect("xrange");
    all.into_array()
        .into_iter()
        .map(|e| {
            let mut e = e.into_array();
            let fields = e.pop().expect("fields").into_array();
            fields
                .chunks(2)
                .map(|p| {
                    let b = |v: &fred::types::Value| {
                        Bytes::copy_from_slice(v.as_bytes().expect("bytes"))
                    };
                    (b(&p[0]), b(&p[1]))
                })
                .collect()
        })
        .collect()
}

/// The unreadable entries, each with a message id unique to the test: without
/// `_payload` (and a field of no kind), with a header name that is not UTF-8, invalid
/// JSON, 20 MB that are not JSON.
fn unreadable(id: &dyn Fn(&str) -> String) -> Vec<(String, Entry)> {
    vec![
        (
            id("no-payload"),
            vec![
                pair(b"h:message-id", id("no-payload").as_bytes()),
                pair(b"h:a", b"1"),
                pair(b"other", b"x"),
            ],
        ),
        (
            id("bad-name"),
            vec![
                pair(b"_payload", b"{\"n\":1}"),
                pair(b"h:message-id", id("bad-name").as_bytes()),
                pair(b"h:\xff\xfe", b"v\xff"),
            ],
        ),
        (
            id("not-json"),
            vec![
                pair(b"_payload", b"{not json"),
                pair(b"h:message-id", id("not-json").as_bytes()),
            ],
        ),
        (
            id("20mb"),
            vec![
                pair(b"_payload", &vec![0xfe; 20 << 20]),
                pair(b"h:message-id", id("20mb").as_bytes()),
            ],
        ),
    ]
}

/// What the handler saw of one job: its number, its `bin` header, its attempt, its
/// message id.
type Seen = (u64, Option<Vec<u8>>, u32, Option<String>);

/// Starts a service on `orders` (dead letter `orders.dead`) whose handler sends each
/// job's number, the bytes of its `bin` header and its attempt, then settles as
/// `outcome` says.
async fn service(
    ctx: &Ctx,
    mount: Mount,
    outcome: fn() -> ruststream::Outcome,
) -> (Running, tokio::sync::mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |headers: Headers, Attempt(attempt): Attempt, job: Job| {
        let _ = tx.send((
            job.n,
            headers.get("bin").map(|v| v.as_bytes().to_vec()),
            attempt,
            headers.get_str("message-id").map(str::to_owned),
        ));
        async move { outcome() }
    };
    let running = App::new(ctx.broker.clone())
        .mount(mount, handler)
        .start()
        .await
        .expect("the service starts");
    (running, rx)
}

/// Waits up to 20 s for the handler to see job `n`; returns what it saw on the way.
async fn until_job(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>, n: u64) -> Vec<Seen> {
    ruststream_conformance::logs::until(rx, Duration::from_secs(20), |job| job.0 == n).await
}

/// Waits up to 10 s for `check` to hold.
async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn unreadable_entries_get_the_decode_policy_and_the_service_goes_on() {
    let lines = logs();
    let ctx = ctx().await;
    let id = |name: &str| format!("{}{name}", ctx.prefix);
    let bad = unreadable(&id);
    for (_, entry) in &bad {
        xadd(&ctx, "orders", entry).await;
    }
    // Readable, with a header value that is not UTF-8; then the last good one.
    let bin = vec![pair(b"_payload", b"{\"n\":5}"), pair(b"h:bin", b"\xff\x00")];
    xadd(&ctx, "orders", &bin).await;
    xadd(&ctx, "orders", &vec![pair(b"_payload", b"{\"n\":42}")]).await;

    // Default options, plus a dead letter.
    let mount = Mount::new("orders").dead_letter("orders.dead");
    let (running, mut rx) = service(&ctx, mount, ack).await;
    let seen = until_job(&mut rx, 42).await;
    let handled: Vec<u64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(
        handled,
        [5, 42],
        "only the readable entries reach the handler"
    );
    assert_eq!(
        seen[0].1.as_deref(),
        Some(&b"\xff\x00"[..]),
        "value bytes kept"
    );

    // The decode policy (default: drop) settled each one: XACK, nothing pending, and
    // drop is no dead letter.
    eventually("nothing pending", async || {
        ctx.pending("orders", "ruststream").await == 0
    })
    .await;
    assert_eq!(ctx.xlen("orders.dead").await, 0);
    // One warning per unreadable entry names the subscription and the message id.
    for (id, _) in &bad {
        let line = lines
            .line_with(&["payload did not decode", "address=orders", id.as_str()])
            .unwrap_or_else(|| panic!("no log line for {id}:\n{}", lines.text()));
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains("Drop"), "{line}");
    }
    running.stop().await.expect("a graceful stop");
    ctx.cleanup().await;
}

#[tokio::test]
async fn the_dead_letter_of_an_unreadable_entry_keeps_every_field() {
    let ctx = ctx().await;
    let id = |name: &str| format!("{}{name}", ctx.prefix);
    let bad = unreadable(&id);
    for (_, entry) in &bad {
        xadd(&ctx, "orders", entry).await;
    }
    xadd(&ctx, "orders", &vec![pair(b"_payload", b"{\"n\":42}")]).await;
    // A dead letter without a cap takes every retry: the policy `retry` sends each
    // unreadable entry there at once.
    let mount = Mount::new("orders")
        .dead_letter("orders.dead")
        .on_decode_error(Policy::Retry);
    let (running, mut rx) = service(&ctx, mount, ack).await;
    until_job(&mut rx, 42).await;
    eventually("every unreadable entry dead-lettered", async || {
        ctx.xlen("orders.dead").await == bad.len() as u64
    })
    .await;
    let dead = entries(&ctx, "orders.dead").await;
    for (id, arrived) in &bad {
        let letter: HashMap<Bytes, Bytes> = dead
            .iter()
            .find(|e| e.iter().any(|(_, v)| v.as_ref() == id.as_bytes()))
            .unwrap_or_else(|| panic!("no dead letter for {id}"))
            .iter()
            .cloned()
            .collect();
        for (field, value) in arrived {
            assert_eq!(
                letter.get(field),
                Some(value),
                "{id}: field {field:?} of {} bytes kept as it arrived",
                value.len()
            );
        }
        assert_eq!(
            letter.get(&Bytes::from_static(b"h:x-ruststream-dead-letter-reason")),
            Some(&Bytes::from_static(b"decode"))
        );
        assert!(
            !letter.contains_key(format!("h:{STREAM_FIELDS}").as_bytes()),
            "the fields header is unpacked into fields"
        );
    }
    assert_eq!(ctx.pending("orders", "ruststream").await, 0);
    running.stop().await.expect("a graceful stop");
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_retry_count_header_does_not_skip_retries() {
    let ctx = ctx().await;
    let id = |name: &str| format!("{}{name}", ctx.prefix);
    // Unreadable counts are no count; a count beyond the cap is not believed; a count
    // within it is (it is how copies count).
    let cases: [(&str, &[u8], usize); 7] = [
        ("abc", b"abc", 3),
        ("minus-one", b"-1", 3),
        ("huge", b"99999999999999999999", 3),
        ("empty", b"", 3),
        ("beyond-cap", b"1000", 3),
        ("not-utf8", b"\xff1", 3),
        ("copy", b"1", 2),
    ];
    for (n, (name, count, _)) in cases.iter().enumerate() {
        let payload = format!("{{\"n\":{n}}}");
        let entry = vec![
            pair(b"_payload", payload.as_bytes()),
            pair(b"h:message-id", id(name).as_bytes()),
            pair(b"h:x-ruststream-retry-count", count),
        ];
        xadd(&ctx, "orders", &entry).await;
    }
    let mount = Mount::new("orders")
        .max_attempts(3)
        .dead_letter("orders.dead");
    let (running, mut rx) = service(&ctx, mount, retry).await;
    let total: usize = cases.iter().map(|c| c.2).sum();
    let mut calls: HashMap<u64, Vec<u32>> = HashMap::new();
    for _ in 0..total {
        let (n, _, attempt, _) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} handler calls within 20 s, {total} expected: {calls:?}",
                    calls.values().map(Vec::len).sum::<usize>()
                )
            })
            .expect("running");
        calls.entry(n).or_default().push(attempt);
    }
    eventually("every message dead-lettered", async || {
        ctx.xlen("orders.dead").await == cases.len() as u64
    })
    .await;
    for (n, (name, _, expected)) in cases.iter().enumerate() {
        let attempts = &calls[&(n as u64)];
        assert_eq!(
            attempts.len(),
            *expected,
            "{name}: handler calls {attempts:?}"
        );
    }
    // The handler sees what the header claims, the retries count from 1.
    assert_eq!(calls[&4], [1001, 2, 3], "beyond-cap");
    assert_eq!(calls[&0], [1, 2, 3], "abc");
    let dead = entries(&ctx, "orders.dead").await;
    for letter in &dead {
        let attempt = letter
            .iter()
            .find(|(f, _)| f.as_ref() == b"h:x-ruststream-dead-letter-attempt")
            .map(|(_, v)| v.clone());
        assert_eq!(attempt.as_deref(), Some(&b"3"[..]), "{letter:?}");
    }
    // Nothing more comes: every message was spent at the cap.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rx.try_recv().is_err());
    running.stop().await.expect("a graceful stop");
    ctx.cleanup().await;
}
