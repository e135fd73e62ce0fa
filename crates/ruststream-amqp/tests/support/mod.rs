//! Shared test support: the broker under test (a real RabbitMQ 4), unique queues, and
//! the runtime's part of settlement (decide, copy, settle) done as the runtime does it.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub mod raw;

use futures_util::StreamExt;
use ruststream_amqp::{AmqpBroker, ConnectOptions, Settle, SubscribeOptions};
use ruststream_core::{
    AckError, Address, Broker, Declaration, Delivery, Facts, Original, RETRY_COUNT, SubscribeSpec,
    Subscription, Verdict, decide,
};

/// The broker under test: `RUSTSTREAM_AMQP_URL`, or RabbitMQ 4 from `scripts/rabbitmq4.sh`.
pub fn url() -> String {
    std::env::var("RUSTSTREAM_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5673".to_owned())
}

/// Connects to the broker under test, or fails saying how to start it.
pub async fn broker() -> AmqpBroker {
    broker_with(ConnectOptions::new()).await
}

pub async fn broker_with(options: ConnectOptions) -> AmqpBroker {
    broker_at(&url(), options).await
}

pub async fn broker_at(url: &str, options: ConnectOptions) -> AmqpBroker {
    match AmqpBroker::connect_with(url, options).await {
        Ok(b) => b,
        Err(e) => panic!(
            "RabbitMQ 4 is not reachable at {url} ({e}). Start it with `sudo scripts/rabbitmq4.sh` \
             (RabbitMQ 4 on 127.0.0.1:5673), or point RUSTSTREAM_AMQP_URL at another RabbitMQ 4."
        ),
    }
}

static NAMES: AtomicU32 = AtomicU32::new(0);

/// A queue name unique to this test run.
pub fn unique(prefix: &str) -> String {
    let n = NAMES.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000_000)
        .unwrap_or(0);
    format!("rs-test-{prefix}-{}-{t}-{n}", std::process::id())
}

/// `scripts/rabbitmq4.sh` of this checkout.
pub fn script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rabbitmq4.sh")
}

/// Runs `scripts/rabbitmq4.sh ARGS` with `stdin`, failing the test if it fails.
pub fn rabbitmq4(args: &[&str], stdin: Option<String>) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(script())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run scripts/rabbitmq4.sh");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "scripts/rabbitmq4.sh {args:?} failed (is RabbitMQ 4 running? `sudo scripts/rabbitmq4.sh`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The broker's release, `(major, minor)`, from `rabbitmqctl version` through
/// `scripts/rabbitmq4.sh` (which `RABBITMQ4_RELEASE` points at 4.0 or 4.3), read once.
pub fn release() -> (u32, u32) {
    static READ: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *READ.get_or_init(|| {
        let version = rabbitmq4(&["ctl", "-q", "version"], None);
        let mut parts = version.trim().split('.');
        let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
        match (next(), next()) {
            (Some(major), Some(minor)) => (major, minor),
            _ => panic!("unreadable RabbitMQ version {version:?}"),
        }
    })
}

/// The queues and exchanges of one test binary, by role, declared once with
/// `rabbitmqctl import_definitions` (fe2o3-amqp cannot attach RabbitMQ's management link
/// pair: both links must share a name, which fe2o3 refuses). Names are unique to the run;
/// queues expire 10 minutes after their last use.
#[derive(Default)]
pub struct Queues {
    names: HashMap<String, String>,
    queues: Vec<String>,
    exchanges: Vec<String>,
    bindings: Vec<String>,
}

const EXPIRES_MS: u64 = 600_000;

impl Queues {
    pub fn quorum(&mut self, role: &str) {
        self.queue(role, "quorum", "");
    }

    pub fn classic(&mut self, role: &str) {
        self.queue(role, "classic", "");
    }

    /// A queue of `kind` with extra JSON arguments (`, "k": v` pairs).
    pub fn queue(&mut self, role: &str, kind: &str, extra: &str) -> String {
        let name = unique(role);
        self.queues.push(format!(
            r#"{{"name": "{name}", "vhost": "/", "durable": true, "auto_delete": false,
               "arguments": {{"x-queue-type": "{kind}", "x-expires": {EXPIRES_MS}{extra}}}}}"#
        ));
        self.names.insert(role.to_owned(), name.clone());
        name
    }

    /// A fanout exchange bound to the queues of `roles` (declared before it).
    pub fn fanout(&mut self, role: &str, roles: &[&str]) -> String {
        let name = unique(role);
        self.exchanges.push(format!(
            r#"{{"name": "{name}", "vhost": "/", "type": "fanout", "durable": true,
               "auto_delete": false, "internal": false, "arguments": {{}}}}"#
        ));
        for r in roles {
            let queue = &self.names[*r];
            self.bindings.push(format!(
                r#"{{"source": "{name}", "vhost": "/", "destination": "{queue}",
                   "destination_type": "queue", "routing_key": "", "arguments": {{}}}}"#
            ));
        }
        self.names.insert(role.to_owned(), name.clone());
        name
    }

    /// A quorum queue `role` dead-lettering to a fanout exchange bound to the classic
    /// queue `<role>-dead`; `limit`: `x-delivery-limit`.
    pub fn quorum_with_dlx(&mut self, role: &str, limit: Option<u32>) {
        let dead = format!("{role}-dead");
        self.classic(&dead);
        let dlx = self.fanout(&format!("{role}-dlx"), &[dead.as_str()]);
        let limit = limit
            .map(|l| format!(r#", "x-delivery-limit": {l}"#))
            .unwrap_or_default();
        let extra = format!(
            r#", "x-dead-letter-exchange": "{dlx}", "x-dead-letter-strategy": "at-most-once"{limit}"#
        );
        self.queue(role, "quorum", &extra);
    }

    fn declare(&self) {
        let json = format!(
            r#"{{"queues": [{}], "exchanges": [{}], "bindings": [{}]}}"#,
            self.queues.join(","),
            self.exchanges.join(","),
            self.bindings.join(",")
        );
        rabbitmq4(
            &["ctl", "-q", "import_definitions", "--format", "json"],
            Some(json),
        );
    }
}

static DECLARED: OnceLock<HashMap<String, String>> = OnceLock::new();

/// The name of `role` in the binary's topology, declared on first use.
pub fn name(topology: fn(&mut Queues), role: &str) -> String {
    let names = DECLARED.get_or_init(|| {
        let mut q = Queues::default();
        topology(&mut q);
        q.declare();
        q.names
    });
    names
        .get(role)
        .unwrap_or_else(|| panic!("role {role} is not in the topology"))
        .clone()
}

/// Asserts that `queue` is empty: a fresh subscription gets nothing for `millis`.
pub async fn empty(broker: &AmqpBroker, queue: &str, millis: u64) {
    let mut sub = subscribe(
        broker,
        spec(queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    nothing_for(&mut sub, millis).await;
}

/// A spec for `queue` with options and a declaration.
pub fn spec(queue: &str, options: SubscribeOptions, declaration: Declaration) -> SubscribeSpec {
    let mut spec = SubscribeSpec::new(queue);
    spec.options.insert(options);
    spec.declaration = declaration;
    spec
}

pub fn cap(n: u32) -> Declaration {
    Declaration {
        max_attempts: NonZeroU32::new(n),
        ..Declaration::default()
    }
}

pub fn at_most_once() -> SubscribeOptions {
    SubscribeOptions::new().settle(Settle::AtMostOnce)
}

/// The next delivery, failing the test after `secs`. Consume errors are skipped.
pub async fn next(sub: &mut Subscription, secs: u64) -> Delivery {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, sub.deliveries.next()).await {
            Ok(Some(Ok(d))) => return d,
            Ok(Some(Err(e))) => eprintln!("consume error: {e}"),
            Ok(None) => panic!("subscription ended"),
            Err(_) => panic!("no delivery within {secs} s"),
        }
    }
}

/// Asserts that nothing arrives for `millis`.
pub async fn nothing_for(sub: &mut Subscription, millis: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(millis);
    loop {
        match tokio::time::timeout_at(deadline, sub.deliveries.next()).await {
            Ok(Some(Ok(d))) => panic!("unexpected delivery: {d:?}"),
            Ok(Some(Err(e))) => eprintln!("consume error: {e}"),
            Ok(None) => panic!("subscription ended"),
            Err(_) => return,
        }
    }
}

/// What the runtime did with one delivery.
#[derive(Debug)]
pub struct Done {
    pub plan: ruststream_core::Plan,
    pub settled: Option<Result<(), AckError>>,
}

/// Does what the runtime does with `verdict`: decide, publish the copy (before settling,
/// or after its delay from a task), settle the original.
pub async fn run(
    broker: &AmqpBroker,
    sub: &Subscription,
    decl: &Declaration,
    delivery: Delivery,
    verdict: Verdict,
) -> Done {
    let own = delivery.address().clone();
    let plan = decide(
        verdict,
        Facts::of(&delivery, &sub.capabilities),
        sub.capabilities,
        decl,
        &own,
    );
    let publisher = broker.publisher();
    if let Some(copy) = &plan.copy {
        let mut message = delivery.to_message();
        if let Some(n) = copy.retry_count {
            message.headers.insert(RETRY_COUNT, n);
        }
        match copy.delay {
            None => publisher
                .publish(copy.to.clone(), message)
                .await
                .expect("publish copy"),
            Some(d) => {
                let to: Address = copy.to.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    publisher.publish(to, message).await.expect("delayed copy");
                });
            }
        }
    }
    let settled = match plan.original {
        Original::Settle(s) => Some(delivery.settle(s).await),
        Original::Hold(d, s) => {
            tokio::time::sleep(d).await;
            Some(delivery.settle(s).await)
        }
        // The runtime logs `AckError::Unsupported`; ask the acker to see it say so.
        Original::Unsupported => Some(delivery.settle(ruststream_core::Settlement::Accept).await),
        Original::Untouched => None,
    };
    Done { plan, settled }
}

/// Publishes `n` messages `"<prefix>-<i>"` to `to`.
pub async fn publish_n(broker: &AmqpBroker, to: &str, n: usize, prefix: &str) {
    let publisher = broker.publisher();
    for i in 0..n {
        publisher
            .publish(
                to.into(),
                ruststream_core::Message::new(format!("{prefix}-{i}")),
            )
            .await
            .expect("publish");
    }
}

/// Subscribes, failing the test with the error.
pub async fn subscribe(broker: &AmqpBroker, spec: SubscribeSpec) -> Subscription {
    broker.subscribe(spec).await.expect("subscribe")
}

/// A TCP proxy in front of the broker under test.
pub async fn proxy() -> Proxy {
    Proxy::to_url(&url()).await
}

pub use ruststream_conformance::proxy::Proxy;
