//! Observing a running service: Prometheus metrics scraped from its HTTP endpoint while
//! messages flow (memory broker and Redis), readiness flipped by cutting the broker's
//! connection (Redis, and RabbitMQ 4 with the `amqp` feature), retry copies waiting per
//! subscription, middleware order and short-circuits, and logs at trace level that never
//! show a password.
//!
//! Built with the features `http`, `logs` and `redis` (the workspace run has them: the
//! demo turns them on); Redis from
//! `RUSTSTREAM_REDIS_URL` (default `redis://127.0.0.1:6379`, `scripts/redis.sh` starts one).
#![cfg(all(feature = "http", feature = "logs", feature = "redis"))]

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ruststream::layer::{Layer, Middleware, Subscribed, Visit};
use ruststream::memory::MemoryBroker;
use ruststream::observe::Metrics;
use ruststream::{App, Delivery, Mount, Outcome, Settled, ack, retry};
use support::{redis, redis_url, unique};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// `GET path` on `addr`: the status and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr)
        .await
        .expect("the endpoint listens");
    let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("answered");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// The value of the series `name{labels}` in a scrape (0 where absent).
fn value(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.parse().expect("a number"))
}

fn series(name: &str, address: &str, extra: &str) -> String {
    format!("{name}{{messaging_destination_name=\"{address}\"{extra}}}")
}

/// Polls `/metrics` until `done` holds for the scrape (or fails after 30 s).
async fn scrape_until(addr: SocketAddr, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        if done(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never seen; last scrape:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Acks most, drops multiples of 3, retries multiples of 5 until they are spent.
async fn handle(n: u64) -> Outcome {
    tokio::time::sleep(Duration::from_millis(1)).await;
    if n.is_multiple_of(5) {
        retry()
    } else if n.is_multiple_of(3) {
        ruststream::drop()
    } else {
        ack()
    }
}

/// Publishes 60 numbers and 4 payloads that do not decode to `address`, scrapes while
/// they flow, and checks the counts: 60 + 4 + 12 second attempts received, 32 acks,
/// 16 + 4 drops, 24 retries, 12 dead letters, 4 decode failures, 64 sent.
async fn flow_and_check(app: App, address: &str) {
    let metrics = Metrics::new();
    let app = app
        .metrics(&metrics)
        .http("127.0.0.1:0".parse().expect("an address"))
        .mount(
            Mount::new(address)
                .max_attempts(2)
                .dead_letter(format!("{address}.dead")),
            handle,
        );
    let running = app.start().await.expect("starts");
    let addr = running.http_addr().expect("an endpoint");
    assert_eq!(get(addr, "/health").await, (200, "ok\n".to_owned()));
    assert_eq!(get(addr, "/ready").await, (200, "ready\n".to_owned()));
    let publisher = running.publisher();
    for n in 0..60u64 {
        publisher.publish(address, &n).await.expect("published");
    }
    for _ in 0..4 {
        publisher
            .publish(address, &"not a number")
            .await
            .expect("published");
    }
    let consumed = series("messaging_client_consumed_messages_total", address, "");
    // While they flow: some seen, not all.
    let during = scrape_until(addr, "a first delivery", |s| value(s, &consumed) >= 1.0).await;
    assert!(value(&during, &consumed) <= 76.0);
    let in_flight = series("ruststream_in_flight", address, "");
    let done = scrape_until(addr, "every delivery settled", |s| {
        value(s, &consumed) >= 76.0 && value(s, &in_flight) == 0.0
    })
    .await;
    let outcome = |v: &str| {
        value(
            &done,
            &series(
                "ruststream_outcomes_total",
                address,
                &format!(",verdict=\"{v}\""),
            ),
        )
    };
    let plan = |p: &str| {
        value(
            &done,
            &series(
                "ruststream_settlements_total",
                address,
                &format!(",plan=\"{p}\""),
            ),
        )
    };
    assert_eq!(value(&done, &consumed), 76.0, "{done}");
    assert_eq!(outcome("ack"), 32.0);
    assert_eq!(outcome("drop"), 20.0);
    assert_eq!(outcome("retry"), 24.0);
    assert_eq!(plan("dead_letter"), 12.0);
    assert_eq!(
        value(
            &done,
            &series("ruststream_decode_failures_total", address, "")
        ),
        4.0
    );
    assert_eq!(
        value(
            &done,
            &series("ruststream_settlement_errors_total", address, "")
        ),
        0.0
    );
    assert_eq!(
        value(
            &done,
            &series("messaging_process_duration_seconds_count", address, "")
        ),
        72.0,
        "every handler that returned"
    );
    assert_eq!(
        value(
            &done,
            &series("messaging_client_sent_messages_total", address, "")
        ),
        64.0
    );
    assert_eq!(
        value(&done, &series("ruststream_attached", address, "")),
        1.0
    );
    let readiness = running.readiness();
    running.stop().await.expect("stops");
    assert!(!readiness.is_ready(), "not ready once stopped");
}

#[tokio::test]
async fn metrics_count_what_was_sent_on_the_memory_broker() {
    let broker = MemoryBroker::new();
    flow_and_check(App::new(broker.clone()), "orders").await;
    assert_eq!(
        broker.ready("orders.dead"),
        12,
        "the dead letters are there"
    );
}

#[tokio::test]
async fn metrics_count_what_was_sent_on_redis() {
    let broker = redis(&redis_url()).await;
    flow_and_check(App::with_broker(broker), &unique("observe", "flow")).await;
}

/// A TCP forwarder that can be cut: while down, it closes every connection and refuses
/// new ones.
struct Cut {
    port: u16,
    down: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Cut {
    async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("bound").port();
        let down = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let (down, connections) = (down.clone(), connections.clone());
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if down.load(Ordering::SeqCst) {
                        continue; // dropped: refused
                    }
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        continue;
                    };
                    let task = tokio::spawn(async move {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    });
                    connections
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(task);
                }
            }
        });
        Self {
            port,
            down,
            connections,
            accept,
        }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            for task in self
                .connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drain(..)
            {
                task.abort();
            }
        }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.accept.abort();
        self.set_down(true);
    }
}

/// Polls `/ready` until it answers `status` (or fails after 60 s).
async fn ready_becomes(addr: SocketAddr, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (now, body) = get(addr, "/ready").await;
        if now == status {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/ready stayed {now} ({body:?}), not {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `host:port` of a broker URL.
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

/// Runs a service on `url` through a [`Cut`], cuts it, restores it, and checks `/ready`,
/// `/health` and the attached gauge at each step, then that it consumes again.
/// `through(port)` is the URL that goes through the cut's port.
async fn readiness_flips(url: &str, through: impl Fn(u16) -> String) {
    let cut = Cut::start(host_of(url)).await;
    let through = through(cut.port);
    let broker = ruststream::connect(&through).await.unwrap_or_else(|error| {
        panic!("no broker at {url} ({error}): scripts/test prepares it (see its header)")
    });
    let metrics = Metrics::new();
    let address = unique("observe", "ready");
    let running = App::with_broker(broker)
        .metrics(&metrics)
        .http("127.0.0.1:0".parse().expect("an address"))
        .mount(address.as_str(), handle)
        .start()
        .await
        .expect("starts");
    let addr = running.http_addr().expect("an endpoint");
    ready_becomes(addr, 200).await;
    let reconnects = series("ruststream_reconnects_total", &address, "");
    assert_eq!(value(&metrics.render(), &reconnects), 0.0);

    cut.set_down(true);
    let body = ready_becomes(addr, 503).await;
    assert!(body.contains(&address), "names the subscription: {body}");
    assert_eq!(get(addr, "/health").await.0, 200, "still live");
    assert_eq!(
        value(
            &metrics.render(),
            &series("ruststream_attached", &address, "")
        ),
        0.0
    );

    cut.set_down(false);
    ready_becomes(addr, 200).await;
    assert!(value(&metrics.render(), &reconnects) >= 1.0);
    // And it consumes again.
    running
        .publisher()
        .publish(address.as_str(), &1u64)
        .await
        .expect("published");
    let consumed = series("messaging_client_consumed_messages_total", &address, "");
    scrape_until(addr, "the delivery after the reconnect", |s| {
        value(s, &consumed) >= 1.0
    })
    .await;
    running.stop().await.expect("stops");
}

#[tokio::test]
async fn readiness_flips_while_redis_is_cut_and_back_when_restored() {
    readiness_flips(&redis_url(), |port| format!("redis://127.0.0.1:{port}")).await;
}

/// The same on RabbitMQ 4 (AMQP 1.0): the subscription's link and connection go with
/// the cut, and `/ready` says so until the adapter has attached again.
#[cfg(feature = "amqp")]
#[tokio::test]
async fn readiness_flips_while_rabbitmq_is_cut_and_back_when_restored() {
    let url = std::env::var("RUSTSTREAM_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5673".into());
    let credentials = url
        .split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .map_or("guest:guest", |(user, _)| user)
        .to_owned();
    // The queue is made at subscribe (a classic one: the mount declares nothing).
    readiness_flips(&url, |port| {
        format!("amqp://{credentials}@127.0.0.1:{port}?declare=classic")
    })
    .await;
}

/// Each subscription's gauge counts its own retry copies waiting in the process: a
/// Redis stream of the default form keeps `retry_after` copies in the process.
#[tokio::test]
async fn delayed_copies_are_counted_per_subscription() {
    let broker = redis(&redis_url()).await;
    let metrics = Metrics::new();
    let (waiting, other) = (unique("observe", "waiting"), unique("observe", "other"));
    let running = App::with_broker(broker)
        .metrics(&metrics)
        .mount(waiting.as_str(), |n: u64| async move {
            if n < 3 {
                ruststream::retry_after(Duration::from_secs(60))
            } else {
                ack()
            }
        })
        .mount(other.as_str(), |_: u64| async { ack() })
        .start()
        .await
        .expect("starts");
    let publisher = running.publisher();
    for n in 0..5u64 {
        publisher
            .publish(waiting.as_str(), &n)
            .await
            .expect("published");
        publisher
            .publish(other.as_str(), &n)
            .await
            .expect("published");
    }
    let gauge = |address: &str| series("ruststream_delayed_copies", address, "");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let scrape = metrics.render();
        let handled = series("messaging_client_consumed_messages_total", &other, "");
        if value(&scrape, &gauge(&waiting)) == 3.0 && value(&scrape, &handled) == 5.0 {
            assert_eq!(value(&scrape, &gauge(&other)), 0.0, "{scrape}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "three copies never waited:\n{scrape}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A stop publishes them early: nothing waits any more.
    running.stop().await.expect("stops");
    assert_eq!(value(&metrics.render(), &gauge(&waiting)), 0.0);
}

/// Records the order middleware sees a delivery in, and settles `stop` at once.
#[derive(Clone)]
struct Mark(Arc<Marked>);

struct Marked(&'static str, Arc<Mutex<Vec<String>>>);

impl Mark {
    fn new(name: &'static str, seen: Arc<Mutex<Vec<String>>>) -> Self {
        Self(Arc::new(Marked(name, seen)))
    }
}

impl Layer for Mark {
    fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(self.clone())
    }
}

impl Middleware for Mark {
    fn visit(&self, _: &Delivery) -> Option<Arc<dyn Visit>> {
        Some(self.0.clone())
    }

    fn before(&self, delivery: &Delivery) -> Option<Outcome> {
        let Marked(name, seen) = &*self.0;
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("before {name}"));
        (*name == "mount" && delivery.payload().as_ref() == b"0").then(ruststream::drop)
    }
}

impl Visit for Marked {
    fn settled(&self, settled: &Settled) {
        self.1
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("settled {} {:?}", self.0, settled.cause()));
    }
}

#[tokio::test]
async fn layers_run_app_then_router_then_mount_and_can_settle_first() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let called = Arc::new(AtomicBool::new(false));
    let handler = {
        let called = called.clone();
        move |_: u64| {
            called.store(true, Ordering::SeqCst);
            async { ack() }
        }
    };
    let router = ruststream::Router::new()
        .mount(
            Mount::new("q").layer(Mark::new("mount", seen.clone())),
            handler,
        )
        .layer(Mark::new("router", seen.clone()));
    let broker = MemoryBroker::new();
    let running = App::new(broker.clone())
        .layer(Mark::new("app", seen.clone()))
        .router(router)
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .publish("q", &0u64)
        .await
        .expect("published");
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap_or_else(PoisonError::into_inner).len() < 6 {
        assert!(Instant::now() < deadline, "settled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.stop().await.expect("stops");
    assert!(
        !called.load(Ordering::SeqCst),
        "the mount's layer settled it first"
    );
    assert_eq!(
        *seen.lock().unwrap_or_else(PoisonError::into_inner),
        [
            "before app",
            "before router",
            "before mount",
            "settled mount Layer",
            "settled router Layer",
            "settled app Layer"
        ]
    );
}

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
    type Writer = Lines;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The framework's one-call set-up, JSON, at trace level for every crate (fred too):
/// a service connected with a password, its deliveries, a failed connection with
/// another, and the stop never write either password.
#[tokio::test]
async fn logs_at_trace_level_never_show_a_password() {
    let lines = Lines::default();
    ruststream::observe::init_logs_with(
        ruststream::observe::LogFormat::Json,
        "trace",
        lines.clone(),
    )
    .expect("the only global subscriber of this test binary");
    let url = redis_url();
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let host = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    // The default user of a server without a password takes any password.
    let secret = "pw-Zq81sEcReT";
    let broker = redis(&format!("redis://default:{secret}@{host}")).await;
    let address = unique("observe", "logs");
    let running = App::with_broker(broker)
        .mount(address.as_str(), handle)
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .publish(address.as_str(), &7u64)
        .await
        .expect("published");
    running
        .publisher()
        .publish(address.as_str(), &5u64)
        .await
        .expect("published");
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.stop().await.expect("stops");
    let other = "pw-Wr0ngPa55";
    let refused = ruststream::connect(&format!("redis://nobody:{other}@{host}")).await;
    if let Err(error) = &refused {
        tracing::error!(%error, "connect failed");
    }
    let text = String::from_utf8_lossy(&lines.0.lock().unwrap_or_else(PoisonError::into_inner))
        .into_owned();
    assert!(
        text.lines().count() > 20,
        "trace-level logs were written:\n{text}"
    );
    assert!(text.lines().all(|l| l.starts_with('{')), "JSON lines");
    assert!(
        text.contains("redis://default:***@"),
        "the URL is logged, redacted:\n{text}"
    );
    assert!(text.contains("handled"), "deliveries are logged");
    assert!(!text.contains(secret), "a password in the logs:\n{text}");
    assert!(!text.contains(other), "a password in the logs:\n{text}");
}

/// A dead letter that could not be published is not counted as one: `plan="dead_letter"`
/// counts the dead letters that went out, the failure counts as a settlement error, and
/// `/ready` answers 503 naming the copy that fails.
#[tokio::test]
async fn a_dead_letter_not_published_counts_as_an_error_and_readiness_says_so() {
    let metrics = Metrics::new();
    let memory = MemoryBroker::with_capabilities(ruststream_core::Capabilities::SETTLES);
    let running = App::new(support::Faulty::new(memory).refuse_publish_to("q.dead"))
        .shutdown_timeout(Duration::from_millis(200))
        .metrics(&metrics)
        .http("127.0.0.1:0".parse().expect("an address"))
        .mount(
            Mount::new("q").max_attempts(1).dead_letter("q.dead"),
            |_: u32| async { retry() },
        )
        .start()
        .await
        .expect("starts");
    let addr = running.http_addr().expect("an endpoint");
    running
        .publisher()
        .publish("q", &1)
        .await
        .expect("published");
    let errors = series("ruststream_settlement_errors_total", "q", "");
    let done = scrape_until(addr, "the failed dead letter", |s| value(s, &errors) == 1.0).await;
    let dead = series("ruststream_settlements_total", "q", ",plan=\"dead_letter\"");
    assert_eq!(value(&done, &dead), 0.0, "{done}");
    let (status, body) = get(addr, "/ready").await;
    assert_eq!(status, 503);
    assert!(
        body.contains("1 copy from q not published to q.dead"),
        "{body}"
    );
    running.stop().await.expect("stops");
}
