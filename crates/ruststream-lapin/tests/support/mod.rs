//! Shared test support: the brokers under test (RabbitMQ 3.x on 5672, the machine's
//! own, and RabbitMQ 4 on 5673 from `scripts/rabbitmq4.sh`; `scripts/test` runs the
//! RabbitMQ 4 tests again on RabbitMQ 4.3, `scripts/rabbitmq43.sh`), queues declared for
//! a test, and closing a connection from the server side.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ConnectionProperties};
use ruststream_lapin::{ConnectOptions, LapinBroker};

/// One of the two RabbitMQ brokers the tests run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rabbit {
    /// RabbitMQ 3.10, the machine's own (127.0.0.1:5672).
    V3,
    /// RabbitMQ 4 from `scripts/rabbitmq4.sh` (127.0.0.1:5673).
    V4,
}

impl Rabbit {
    pub fn url(self) -> String {
        let (var, default) = match self {
            Rabbit::V3 => (
                "RUSTSTREAM_LAPIN_URL",
                "amqp://guest:guest@127.0.0.1:5672/%2f",
            ),
            Rabbit::V4 => (
                "RUSTSTREAM_LAPIN4_URL",
                "amqp://guest:guest@127.0.0.1:5673/%2f",
            ),
        };
        std::env::var(var).unwrap_or_else(|_| default.to_owned())
    }

    fn how_to_start(self) -> &'static str {
        match self {
            Rabbit::V3 => {
                "Start the machine's RabbitMQ 3 (`service rabbitmq-server start`, it listens on \
                 127.0.0.1:5672), or point RUSTSTREAM_LAPIN_URL at another RabbitMQ."
            }
            Rabbit::V4 => {
                "Start RabbitMQ 4 with `sudo scripts/rabbitmq4.sh` (127.0.0.1:5673), or point \
                 RUSTSTREAM_LAPIN4_URL at another RabbitMQ 4 (4.3: `sudo scripts/rabbitmq43.sh`, \
                 127.0.0.1:5675, with RABBITMQ4_RELEASE=4.3 so that the tests' rabbitmqctl \
                 calls reach it)."
            }
        }
    }

    /// `rabbitmqctl ARGS` for this broker (the 4's runs inside its root).
    pub fn ctl(self, args: &[&str]) -> String {
        let mut command = match self {
            Rabbit::V3 => std::process::Command::new("rabbitmqctl"),
            Rabbit::V4 => {
                let mut c = std::process::Command::new(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../../scripts/rabbitmq4.sh"),
                );
                c.arg("ctl");
                c
            }
        };
        let out = command.args(args).output().expect("run rabbitmqctl");
        assert!(
            out.status.success(),
            "rabbitmqctl {args:?} on RabbitMQ {self:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The broker's `dead_letter_worker_publisher_confirm_timeout`: how long its
    /// at-least-once dead-letter worker waits before it publishes again a copy whose
    /// move was cut (a restart).
    pub fn dead_letter_confirm_timeout(self) -> std::time::Duration {
        let out = self.ctl(&[
            "eval",
            "application:get_env(rabbit, dead_letter_worker_publisher_confirm_timeout).",
        ]);
        let ms = out
            .trim()
            .strip_prefix("{ok,")
            .and_then(|rest| rest.strip_suffix('}'))
            .and_then(|ms| ms.trim().parse().ok())
            .unwrap_or_else(|| panic!("RabbitMQ {self:?}: unexpected confirm timeout {out:?}"));
        std::time::Duration::from_millis(ms)
    }

    /// Whether this broker's quorum queues count a delivery handed back unhandled
    /// (`basic.nack` with requeue): RabbitMQ before 4.3 does; from 4.3 only a failed one
    /// (`basic.reject` with requeue, a channel closed over it) counts. Read from the
    /// broker (`rabbitmqctl version`), once per test binary and broker.
    pub fn counts_returns(self) -> bool {
        static READ: [std::sync::OnceLock<bool>; 2] =
            [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
        *READ[self as usize].get_or_init(|| {
            let version = self.ctl(&["-q", "version"]);
            let mut parts = version.trim().split('.');
            let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
            match (next(), next()) {
                (Some(major), Some(minor)) => (major, minor) < (4, 3),
                _ => panic!("RabbitMQ {self:?}: unreadable version {version:?}"),
            }
        })
    }

    /// Closes, from the server side, every connection named `name`
    /// ([`ConnectOptions::name`]); returns how many.
    pub fn close_connections(self, name: &str) -> usize {
        let listing = self.ctl(&[
            "list_connections",
            "-q",
            "--no-table-headers",
            "pid",
            "client_properties",
        ]);
        let names: Vec<String> = listing
            .lines()
            .filter(|line| line.contains(name))
            .filter_map(|line| line.split('\t').next().map(str::to_owned))
            .collect();
        for connection in &names {
            self.ctl(&["close_connection", connection, "closed by a test"]);
        }
        names.len()
    }
}

/// Connects to `rabbit`, or fails saying how to start it.
pub async fn broker(rabbit: Rabbit) -> LapinBroker {
    broker_with(rabbit, ConnectOptions::new()).await
}

pub async fn broker_with(rabbit: Rabbit, options: ConnectOptions) -> LapinBroker {
    let url = rabbit.url();
    match LapinBroker::connect_with(&url, options).await {
        Ok(b) => b,
        Err(e) => panic!(
            "RabbitMQ {rabbit:?} is not reachable at {url} ({e}). {}",
            rabbit.how_to_start()
        ),
    }
}

static NAMES: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test run.
pub fn unique(prefix: &str) -> String {
    let n = NAMES.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000_000)
        .unwrap_or(0);
    format!("rs-lapin-{prefix}-{}-{t}-{n}", std::process::id())
}

/// A queue to declare for a test: its type and arguments. Every one but a stream
/// expires 10 minutes after its last use.
#[derive(Clone, Debug, Default)]
pub struct QueueSpec {
    pub kind: &'static str,
    pub delivery_limit: Option<i64>,
    pub dead_letter_key: Option<String>,
}

impl QueueSpec {
    pub fn classic() -> Self {
        Self {
            kind: "classic",
            ..Self::default()
        }
    }

    pub fn quorum() -> Self {
        Self {
            kind: "quorum",
            ..Self::default()
        }
    }

    /// A quorum queue that dead-letters itself to `dead` (default exchange) after
    /// `limit + 1` deliveries.
    pub fn self_dead_lettering(limit: i64, dead: &str) -> Self {
        Self {
            kind: "quorum",
            delivery_limit: Some(limit),
            dead_letter_key: Some(dead.to_owned()),
        }
    }

    fn arguments(&self) -> FieldTable {
        let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), text(self.kind));
        if self.kind != "stream" {
            // Streams take no x-expires: the test deletes them.
            args.insert("x-expires".into(), AMQPValue::LongInt(600_000));
        }
        if let Some(limit) = self.delivery_limit {
            args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(limit));
        }
        if let Some(key) = &self.dead_letter_key {
            args.insert("x-dead-letter-exchange".into(), text(""));
            args.insert("x-dead-letter-routing-key".into(), text(key));
        }
        args
    }
}

/// Declares `queue` on `rabbit` durable and with no arguments at all, as a hand or an
/// older tool makes a queue.
pub fn declare_plain(rabbit: Rabbit, queue: &str) {
    declare_with(rabbit, &[(queue.to_owned(), FieldTable::default())]);
}

/// Declares the queues on `rabbit` from any context (a thread with a runtime of its own).
pub fn declare(rabbit: Rabbit, queues: &[(String, QueueSpec)]) {
    let queues: Vec<(String, FieldTable)> = queues
        .iter()
        .map(|(name, spec)| (name.clone(), spec.arguments()))
        .collect();
    declare_with(rabbit, &queues);
}

fn declare_with(rabbit: Rabbit, queues: &[(String, FieldTable)]) {
    let url = rabbit.url();
    let queues = queues.to_vec();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let connection = Connection::connect(&url, ConnectionProperties::default())
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "RabbitMQ {rabbit:?} at {url}: {e}. {}",
                        rabbit.how_to_start()
                    )
                });
            let channel = connection.create_channel().await.expect("channel");
            for (name, arguments) in &queues {
                channel
                    .queue_declare(
                        name.as_str().into(),
                        QueueDeclareOptions::durable(),
                        arguments.clone(),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("declare {name}: {e}"));
            }
            let _ = connection.close(200, "declared".into()).await;
        });
    })
    .join()
    .expect("declaring queues");
}

/// How many messages wait in `queue` (a passive declare).
pub async fn waiting(rabbit: Rabbit, queue: &str) -> u32 {
    let connection = Connection::connect(&rabbit.url(), ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = connection.create_channel().await.expect("channel");
    let options = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let q = channel
        .queue_declare(queue.into(), options, FieldTable::default())
        .await
        .expect("passive declare");
    let _ = connection.close(200, "counted".into()).await;
    q.message_count()
}

/// Waits up to `limit` for `check` to hold.
pub async fn until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// Deletes `queue` (for queues a test made without `x-expires`).
pub async fn delete(rabbit: Rabbit, queue: &str) {
    let connection = Connection::connect(&rabbit.url(), ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = connection.create_channel().await.expect("channel");
    channel
        .queue_delete(queue.into(), Default::default())
        .await
        .expect("delete");
    let _ = connection.close(200, "deleted".into()).await;
}

/// The subscription's next delivery, within 10 s; anything else fails the test.
pub async fn next(sub: &mut ruststream_core::Subscription) -> ruststream_core::Delivery {
    use futures_util::StreamExt;
    tokio::time::timeout(std::time::Duration::from_secs(10), sub.deliveries.next())
        .await
        .expect("a delivery within 10 s")
        .expect("the subscription is open")
        .expect("a delivery, not an error")
}
