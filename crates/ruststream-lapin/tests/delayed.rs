//! `retry_after` through the delay queues (`QUEUE.delay.MS.quorum`), on a classic and a quorum
//! queue of both brokers, through the runtime (default subscription options):
//!
//! * the copy comes back after the delay as the next attempt, on a quorum queue after
//!   the broker's own count (requeues first: attempts 1 and 2 counted by
//!   `x-delivery-count`, 3 and 4 by the copies' header, never restarting), and at the
//!   cap the dead letter gets it;
//! * a consumer process killed with SIGKILL during the delay loses nothing: the copy is
//!   in RabbitMQ, which moves it back; another process gets it as attempt 2;
//! * a delay queue that cannot be declared holds the original for the delay instead.
//!
//! The killed consumer is this test binary itself, run again (`current_exe`) as the
//! ignored test `helper_process`.

mod support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream::{App, Attempt, Mount, Outcome, Settled, ack, retry, retry_after};
use ruststream_core::{Broker, Message, RETRY_COUNT, Settlement, SubscribeSpec};
use ruststream_lapin::{LapinBroker, MAX_DELAY};
use support::{QueueSpec, Rabbit, broker, declare, unique, waiting};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const DELAY: Duration = Duration::from_millis(1000);

/// How much later than asked a copy may come back (RabbitMQ expires queue heads on a
/// timer; the machine is shared).
const SLACK: Duration = Duration::from_secs(5);

fn spec_of(kind: &str) -> QueueSpec {
    match kind {
        "quorum" => QueueSpec::quorum(),
        _ => QueueSpec::classic(),
    }
}

type Seen = Arc<Mutex<Vec<(u32, Instant, Option<String>)>>>;

async fn wait_for_seen(
    seen: &Seen,
    n: usize,
    within: Duration,
) -> Vec<(u32, Instant, Option<String>)> {
    let end = Instant::now() + within;
    loop {
        let now = seen.lock().expect("seen").clone();
        if now.len() >= n || Instant::now() > end {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Attempts 1 and 2 retry at once, 3 and 4 `retry_after(DELAY)`; `max_attempts(5)`
/// sends attempt 5's retry to the dead letter.
async fn delayed_copies_count_on_and_the_cap_dead_letters(rabbit: Rabbit, kind: &str) {
    let (queue, dead) = (unique(&format!("delayed-{kind}")), unique("delayed-dead"));
    declare(
        rabbit,
        &[
            (queue.clone(), spec_of(kind)),
            (dead.clone(), QueueSpec::classic()),
        ],
    );
    let lapin = broker(rabbit).await;
    let seen: Seen = Arc::default();
    let dead_seen: Seen = Arc::default();
    let (record, record_dead) = (seen.clone(), dead_seen.clone());
    let mount = Mount::new(queue.as_str())
        .max_attempts(5)
        .dead_letter(dead.as_str());
    let app = App::new(lapin)
        .mount(
            mount,
            move |Attempt(a): Attempt, headers: ruststream_core::Headers, _n: u32| {
                let count = headers.get_str(RETRY_COUNT).map(str::to_owned);
                record
                    .lock()
                    .expect("seen")
                    .push((a, Instant::now(), count));
                std::future::ready(if a < 3 { retry() } else { retry_after(DELAY) })
            },
        )
        .mount(
            Mount::new(dead.as_str()),
            move |Attempt(a): Attempt, _n: u32| {
                record_dead
                    .lock()
                    .expect("dead")
                    .push((a, Instant::now(), None));
                std::future::ready(ack())
            },
        );
    let running = app.start().await.expect("starts");
    let publisher = broker(rabbit).await;
    publisher
        .publisher()
        .publish(queue.as_str().into(), Message::new("7"))
        .await
        .expect("sent");
    let got = wait_for_seen(&seen, 5, 4 * (DELAY + SLACK)).await;
    let attempts: Vec<u32> = got.iter().map(|s| s.0).collect();
    assert_eq!(attempts, [1, 2, 3, 4, 5], "{rabbit:?} {kind}: {got:?}");
    for later in [3, 4] {
        let waited = got[later].1.duration_since(got[later - 1].1);
        assert!(
            waited >= DELAY && waited <= DELAY + SLACK,
            "{rabbit:?} {kind}: attempt {} came {waited:?} after the retry_after({DELAY:?})",
            later + 1
        );
        assert_eq!(
            got[later].2.as_deref(),
            Some(later.to_string().as_str()),
            "{rabbit:?} {kind}: the copy carries the attempt it replaces"
        );
    }
    let dead_got = wait_for_seen(&dead_seen, 1, SLACK).await;
    assert_eq!(
        dead_got.len(),
        1,
        "{rabbit:?} {kind}: the dead letter has it"
    );
    tokio::time::sleep(DELAY + Duration::from_millis(500)).await;
    assert_eq!(
        seen.lock().expect("seen").len(),
        5,
        "{rabbit:?} {kind}: nothing more"
    );
    running.stop().await.expect("stops");
    // The copies went through RabbitMQ's delay queue, which is empty now.
    let delay_queue = format!("{queue}.delay.{}.quorum", DELAY.as_millis());
    assert_eq!(waiting(rabbit, &delay_queue).await, 0);
    assert_eq!(waiting(rabbit, &queue).await, 0);
    publisher.close().await;
}

async fn subscription_declares_native_delays(rabbit: Rabbit, kind: &str) {
    let queue = unique(&format!("caps-{kind}"));
    declare(rabbit, &[(queue.clone(), spec_of(kind))]);
    let lapin = broker(rabbit).await;
    let sub = lapin
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    assert_eq!(
        sub.capabilities.delays,
        Some(MAX_DELAY),
        "{rabbit:?} {kind}"
    );
    drop(sub);
    lapin.close().await;
}

async fn next(sub: &mut ruststream_core::Subscription) -> ruststream_core::Delivery {
    tokio::time::timeout(DELAY + SLACK, sub.deliveries.next())
        .await
        .expect("a delivery in time")
        .expect("open")
        .expect("a delivery")
}

/// A delay queue RabbitMQ will not declare (someone made it with other arguments): the
/// settlement is an error, and the original, held unsettled for the delay, comes back
/// after it; nothing is lost.
async fn an_undeclarable_delay_queue_holds_the_original(rabbit: Rabbit, kind: &str) {
    let queue = unique(&format!("undeclarable-{kind}"));
    let delay_queue = format!("{queue}.delay.{}.quorum", DELAY.as_millis());
    declare(
        rabbit,
        &[
            (queue.clone(), spec_of(kind)),
            (delay_queue.clone(), QueueSpec::classic()),
        ],
    );
    let lapin = broker(rabbit).await;
    lapin
        .publisher()
        .publish(queue.as_str().into(), Message::new("7"))
        .await
        .expect("sent");
    let mut sub = lapin
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    let d = next(&mut sub).await;
    let settled_at = Instant::now();
    let error = d
        .settle(Settlement::RequeueAfter(DELAY))
        .await
        .expect_err("the delay queue cannot be declared");
    assert!(error.to_string().contains(&delay_queue), "{error}");
    let d = next(&mut sub).await;
    assert!(
        settled_at.elapsed() >= DELAY,
        "{rabbit:?} {kind}: back after {:?}",
        settled_at.elapsed()
    );
    assert_eq!(d.payload().as_ref(), b"7");
    d.settle(Settlement::Accept).await.expect("acked");
    assert_eq!(waiting(rabbit, &delay_queue).await, 0, "no copy parked");
    drop(sub);
    lapin.close().await;
}

const HELPER: &str = "RUSTSTREAM_LAPIN_HELPER_QUEUE";
const HELPER_URL: &str = "RUSTSTREAM_LAPIN_HELPER_URL";
const CRASH_DELAY: Duration = Duration::from_secs(3);

/// Runs in the child process only: a service whose handler answers attempt 1 with
/// `retry_after(CRASH_DELAY)`; it says `helper:settled` once that is settled, and is
/// killed then.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn helper_process() {
    let (Ok(queue), Ok(url)) = (std::env::var(HELPER), std::env::var(HELPER_URL)) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let lapin = LapinBroker::connect(&url).await.expect("connect");
        let app = App::new(lapin)
            .mount(queue.as_str(), |Attempt(a): Attempt, _n: u32| {
                std::future::ready::<Outcome>(if a == 1 {
                    retry_after(CRASH_DELAY)
                } else {
                    ack()
                })
            })
            .after_settle(|settled: &Settled| {
                println!("helper:settled ok={}", settled.is_ok());
            });
        let _running = app.start().await.expect("starts");
        std::future::pending::<()>().await;
    });
}

async fn killed_during_the_delay_loses_nothing(rabbit: Rabbit, kind: &str) {
    let queue = unique(&format!("crash-{kind}"));
    declare(rabbit, &[(queue.clone(), spec_of(kind))]);
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "helper_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER, &queue)
        .env(HELPER_URL, rabbit.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn helper");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let lapin = broker(rabbit).await;
    lapin
        .publisher()
        .publish(queue.as_str().into(), Message::new("7"))
        .await
        .expect("sent");
    let line = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the helper settles in time")
            .expect("read")
            .expect("helper still running");
        if line.contains("helper:settled") {
            break line;
        }
    };
    let killed_at = Instant::now();
    child.kill().await.expect("SIGKILL");
    let _ = child.wait().await;
    assert!(line.contains("ok=true"), "{rabbit:?} {kind}: {line}");
    assert!(killed_at.elapsed() < CRASH_DELAY, "killed within the delay");
    // Another consumer, after the crash: the copy comes back from the delay queue.
    let mut sub = lapin
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    let d = tokio::time::timeout(CRASH_DELAY + SLACK, sub.deliveries.next())
        .await
        .unwrap_or_else(|_| panic!("{rabbit:?} {kind}: the delayed copy was lost with the process"))
        .expect("open")
        .expect("a delivery");
    assert_eq!(d.payload().as_ref(), b"7");
    assert_eq!(
        d.redelivery_count(),
        2,
        "{rabbit:?} {kind}: {:?}",
        d.headers()
    );
    d.settle(Settlement::Accept).await.expect("acked");
    let more = tokio::time::timeout(Duration::from_secs(1), sub.deliveries.next()).await;
    assert!(more.is_err(), "{rabbit:?} {kind}: a second copy: {more:?}");
    lapin.close().await;
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod rabbitmq3 {
            $(mod $name {
                #[tokio::test] async fn classic() { super::super::$name(super::super::Rabbit::V3, "classic").await; }
                #[tokio::test] async fn quorum() { super::super::$name(super::super::Rabbit::V3, "quorum").await; }
            })*
        }
        mod rabbitmq4 {
            $(mod $name {
                #[tokio::test] async fn classic() { super::super::$name(super::super::Rabbit::V4, "classic").await; }
                #[tokio::test] async fn quorum() { super::super::$name(super::super::Rabbit::V4, "quorum").await; }
            })*
        }
    };
}

on_both!(
    subscription_declares_native_delays,
    delayed_copies_count_on_and_the_cap_dead_letters,
    killed_during_the_delay_loses_nothing,
    an_undeclarable_delay_queue_holds_the_original
);
