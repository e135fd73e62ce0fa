//! Crash windows: a consumer process killed with SIGKILL mid-handler loses nothing, and
//! neither does one killed while moving due copies out of the delay queue.
//!
//! The consumer is this test binary itself, run again (`current_exe`) as the ignored test
//! `helper_process` with `RUSTSTREAM_REDIS_HELPER` saying what to do.

mod support;

use std::process::Stdio;
use std::time::Duration;

use ruststream_core::{Broker, Settlement};
use ruststream_redis::{Claiming, DelayedRetry, RedisBroker, ReliableList, Settings, Stream};
use support::{ctx, msg, n_of, next, next_within};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const HELPER: &str = "RUSTSTREAM_REDIS_HELPER";
const PREFIX: &str = "RUSTSTREAM_REDIS_HELPER_PREFIX";

/// Runs in the child process only: holds deliveries without settling them (or moves the
/// delay queue) until killed.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn helper_process() {
    let Ok(mode) = std::env::var(HELPER) else {
        return;
    };
    let prefix = std::env::var(PREFIX).expect("prefix");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let broker =
            RedisBroker::connect_with(&support::url(), Settings::default().key_prefix(prefix))
                .await
                .expect("connect");
        let mut options = ruststream_core::Options::default();
        match mode.as_str() {
            "stream" => options.insert(Stream::new().group("g").consumer("pod-1")),
            // Everything by default: the consumer name holds the process id.
            "stream-default" | "stream-default-ack" => options.insert(Stream::new().group("g")),
            // A long min_idle: the helper must not reclaim its own entries before the kill.
            "claiming" => options.insert(Claiming::new(Duration::from_secs(60)).group("g")),
            "reliable" => options.insert(
                ReliableList::new()
                    .consumer("doomed")
                    .heartbeat(Duration::from_millis(600)),
            ),
            "move" => {
                let mut first = true;
                loop {
                    broker.move_delayed("q").await.expect("move");
                    if first {
                        println!("helper:moved");
                        first = false;
                    }
                }
            }
            other => panic!("unknown helper mode {other}"),
        }
        let spec = ruststream_core::SubscribeSpec {
            address: "q".into(),
            declaration: Default::default(),
            in_flight: 16,
            options,
            drain: Default::default(),
        };
        let mut sub = broker.subscribe(spec).await.expect("subscribe");
        let mut held = Vec::new();
        loop {
            let Some(d) = support::next_within(&mut sub, Duration::from_secs(600)).await else {
                continue;
            };
            if mode.ends_with("-ack") {
                let n = n_of(&d);
                d.settle(Settlement::Accept).await.expect("ack");
                println!("helper:acked {n}");
            } else {
                println!("helper:held {}", n_of(&d));
                held.push(d); // the handler never finishes
            }
        }
    });
}

async fn spawn_helper(
    mode: &str,
    prefix: &str,
) -> (
    Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "helper_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER, mode)
        .env(PREFIX, prefix)
        .env("RUSTSTREAM_REDIS_URL", support::url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn helper");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (child, lines)
}

/// Waits for `count` occurrences of `prefix` in the helper's output.
async fn wait_for(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    prefix: &str,
    count: usize,
) {
    let mut seen = 0;
    while seen < count {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("helper output in time")
            .expect("read")
            .expect("helper still running");
        // libtest may print `test helper_process ... ` on the same line first.
        seen += line.matches(prefix).count();
    }
}

async fn sigkill(mut child: Child) {
    child.kill().await.expect("SIGKILL"); // tokio's kill is SIGKILL on Unix
    let status = child.wait().await.expect("wait");
    assert!(!status.success());
}

#[tokio::test]
async fn stream_consumer_killed_mid_handler_re_reads_its_pending_entries() {
    let ctx = ctx().await;
    for n in 0..5 {
        ctx.publish("q", msg(n)).await;
    }
    let (child, mut lines) = spawn_helper("stream", &ctx.prefix).await;
    wait_for(&mut lines, "helper:held", 5).await;
    sigkill(child).await;
    assert_eq!(
        ctx.pending("q", "g").await,
        5,
        "all five pending after the kill"
    );
    // The process comes back under the same consumer name: it re-reads them first.
    let mut sub = ctx
        .subscribe("q", Stream::new().group("g").consumer("pod-1"), 16)
        .await;
    let mut got = Vec::new();
    for _ in 0..5 {
        let d = next(&mut sub).await;
        got.push(n_of(&d));
        d.settle(Settlement::Accept).await.expect("ack");
    }
    assert_eq!(got, [0, 1, 2, 3, 4]);
    assert_eq!(ctx.pending("q", "g").await, 0);
    ctx.cleanup().await;
}

/// With default options a restarted process is a new consumer: it takes over what the
/// killed one held once that one's heartbeat expired (10 s, scanned every 5 s), and the
/// dead consumer leaves the group once it has nothing pending.
#[tokio::test]
async fn stream_consumer_killed_with_default_options_is_taken_over_by_the_next_process() {
    let ctx = ctx().await;
    for n in 0..5 {
        ctx.publish("q", msg(n)).await;
    }
    let (child, mut lines) = spawn_helper("stream-default", &ctx.prefix).await;
    wait_for(&mut lines, "helper:held", 5).await;
    sigkill(child).await;
    assert_eq!(ctx.pending("q", "g").await, 5, "stranded by the kill");
    assert_eq!(ctx.consumers("q", "g").await, 1);
    // The service started again: a new process, default options.
    let started = std::time::Instant::now();
    let (next_process, mut lines) = spawn_helper("stream-default-ack", &ctx.prefix).await;
    let mut acked = Vec::new();
    while acked.len() < 5 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("taken over within the documented 15 s")
            .expect("read")
            .expect("helper still running");
        if let Some(n) = line.split("helper:acked ").nth(1) {
            acked.push(n.trim().parse::<usize>().expect("a number"));
        }
    }
    eprintln!("taken over after {:?}", started.elapsed());
    acked.sort_unstable();
    assert_eq!(acked, [0, 1, 2, 3, 4]);
    assert_eq!(ctx.pending("q", "g").await, 0);
    // The next scan (5 s) removes the dead consumer: only the new process is left.
    let deadline = std::time::Instant::now() + Duration::from_secs(12);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let consumers = ctx.consumers("q", "g").await;
        if consumers == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{consumers} consumers: the dead one was not removed"
        );
    }
    sigkill(next_process).await;
    ctx.cleanup().await;
}

#[tokio::test]
async fn claiming_consumer_killed_mid_handler_is_claimed_by_another() {
    let ctx = ctx().await;
    for n in 0..5 {
        ctx.publish("q", msg(n)).await;
    }
    let (child, mut lines) = spawn_helper("claiming", &ctx.prefix).await;
    wait_for(&mut lines, "helper:held", 5).await;
    sigkill(child).await;
    let mut sub = ctx
        .subscribe(
            "q",
            Claiming::new(Duration::from_millis(300)).group("g"),
            16,
        )
        .await;
    let mut got = Vec::new();
    for _ in 0..5 {
        let d = next(&mut sub).await;
        assert_eq!(
            d.redelivery_count(),
            2,
            "the server counted the first delivery"
        );
        got.push(n_of(&d));
        d.settle(Settlement::Accept).await.expect("ack");
    }
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3, 4]);
    assert_eq!(ctx.pending("q", "g").await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn reliable_list_consumer_killed_mid_handler_is_recovered() {
    let ctx = ctx().await;
    for n in 0..5 {
        ctx.publish_list("q", n).await;
    }
    let (child, mut lines) = spawn_helper("reliable", &ctx.prefix).await;
    wait_for(&mut lines, "helper:held", 5).await;
    sigkill(child).await;
    let processing = format!("{{{}}}:processing:doomed", ctx.key("q"));
    assert_eq!(
        ctx.llen(&processing).await,
        5,
        "stranded in the dead consumer's list"
    );
    let form = ReliableList::new()
        .consumer("survivor")
        .heartbeat(Duration::from_millis(600));
    let mut sub = ctx.subscribe("q", form, 16).await;
    let mut got = Vec::new();
    while got.len() < 5 {
        let d = next_within(&mut sub, Duration::from_secs(10))
            .await
            .expect("recovered after the heartbeat expires");
        got.push(n_of(&d));
        d.settle(Settlement::Accept).await.expect("ack");
    }
    assert_eq!(got, [0, 1, 2, 3, 4]);
    assert_eq!(ctx.llen(&processing).await, 0);
    assert_eq!(ctx.llen(&ctx.key("q")).await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn process_killed_while_moving_the_delay_queue_loses_and_duplicates_nothing() {
    let ctx = ctx().await;
    let total = 5000;
    let form = Stream::new()
        .group("g")
        .block(Duration::from_millis(50))
        .delayed_retry(DelayedRetry::DurableZset);
    let mut sub = ctx.subscribe("q", form, 1000).await;
    for n in 0..total {
        ctx.publish("q", msg(n)).await;
    }
    let mut held = Vec::new();
    for _ in 0..total {
        held.push(next(&mut sub).await);
    }
    drop(sub);
    for d in held {
        d.settle(Settlement::RequeueAfter(Duration::from_millis(1)))
            .await
            .expect("parked");
    }
    let zset = format!("{{{}}}:delayed", ctx.key("q"));
    assert_eq!(ctx.zcard(&zset).await, total as u64);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let (child, mut lines) = spawn_helper("move", &ctx.prefix).await;
    wait_for(&mut lines, "helper:moved", 1).await;
    sigkill(child).await;
    let left = ctx.zcard(&zset).await;
    let moved_by_child = ctx.xlen("q").await - total as u64;
    eprintln!("killed with {left} copies left, {moved_by_child} moved");
    assert!(left > 0, "the kill landed before the queue was empty");
    assert_eq!(
        left + moved_by_child,
        total as u64,
        "none lost, none doubled"
    );
    while ctx.broker.move_delayed("q").await.expect("move") > 0 {}
    assert_eq!(ctx.zcard(&zset).await, 0);
    assert_eq!(ctx.xlen("q").await, 2 * total as u64);
    ctx.cleanup().await;
}
