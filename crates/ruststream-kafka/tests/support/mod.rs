//! Shared test support: the broker under test (a real Kafka-protocol broker), unique
//! names, and plain rdkafka clients for watching from outside.
#![allow(dead_code, unreachable_pub)]

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;

/// How to start the broker a test needs.
pub const HOW: &str = "Start the Kafka-protocol broker with `scripts/kafka.sh` \
     (nisshi on 127.0.0.1:9092), or point RUSTSTREAM_KAFKA_URL at one.";

/// The broker under test: `RUSTSTREAM_KAFKA_URL`, default `kafka://127.0.0.1:9092`.
pub fn url() -> String {
    std::env::var("RUSTSTREAM_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".into())
}

/// The bootstrap servers of [`url`] (`host:port`), after checking that the first one
/// answers: librdkafka would retry for ever instead of failing.
pub fn bootstrap() -> String {
    let url = url();
    let servers = url
        .split_once("://")
        .map_or(url.as_str(), |(_, rest)| rest)
        .split(['?', '/'])
        .next()
        .unwrap_or_default()
        .to_owned();
    let first = servers.split(',').next().unwrap_or_default();
    let answers = first
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok());
    assert!(answers, "no Kafka broker answers at {url}. {HOW}");
    servers
}

static NAMES: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test run: `rstest-<prefix>-<pid>-<time>-<n>`.
pub fn unique(prefix: &str) -> String {
    let n = NAMES.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000_000)
        .unwrap_or(0);
    format!("rstest-{prefix}-{}-{t}-{n}", std::process::id())
}

/// A client configuration for the broker under test.
pub fn config() -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap());
    config
}

/// Creates `topic` with `partitions` partitions.
pub async fn create_topic(topic: &str, partitions: i32) {
    create_topic_on(config(), topic, partitions).await;
}

/// Creates `topic` with `partitions` partitions on the broker of `config` (a test's own).
pub async fn create_topic_on(config: ClientConfig, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = config.create().expect("admin client");
    let created = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create topics");
    for result in created {
        result.unwrap_or_else(|(name, error)| panic!("cannot create topic {name}: {error}"));
    }
}

/// [`create_topic`] from synchronous code (a harness's `fresh_address`), on a runtime of
/// its own.
pub fn create_topic_blocking(topic: &str, partitions: i32) {
    let topic = topic.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(create_topic(&topic, partitions));
    })
    .join()
    .expect("topic created");
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A Kafka-protocol broker of a test's own (nisshi on memory storage, a free port), to
/// stop and start again; killed when dropped. It may tell clients to connect to another
/// port (a proxy in front of it, started first: `ruststream_conformance::proxy::Proxy::start`, advertising its port).
pub struct OwnBroker {
    pub port: u16,
    advertised: u16,
    child: Option<std::process::Child>,
}

impl OwnBroker {
    /// The nisshi that `scripts/kafka.sh install` builds.
    fn binary() -> std::path::PathBuf {
        let cache =
            std::env::var("RUSTSTREAM_CACHE").unwrap_or_else(|_| "/var/cache/ruststream".into());
        let path = std::path::Path::new(&cache).join("nisshi-0.8.1/bin/nisshi");
        assert!(
            path.exists(),
            "no nisshi at {}: build it with `scripts/kafka.sh install`",
            path.display()
        );
        path
    }

    /// Starts one on a free port.
    pub fn start() -> Self {
        let port = free_port();
        Self::advertising(port, port)
    }

    /// Starts one on `port` that sends clients to `advertised`.
    pub fn advertising(port: u16, advertised: u16) -> Self {
        let mut broker = Self {
            port,
            advertised,
            child: None,
        };
        broker.resume();
        broker
    }

    /// Starts it again on its port (after [`kill`](Self::kill)).
    pub fn resume(&mut self) {
        let listener = format!("tcp://127.0.0.1:{}", self.port);
        let advertised = format!("tcp://127.0.0.1:{}", self.advertised);
        let child = std::process::Command::new(Self::binary())
            .args(["broker", "--listener-url", &listener])
            .args(["--advertised-listener-url", &advertised])
            .args(["--storage-engine", "memory://nisshi/"])
            .args(["--group-initial-rebalance-delay", "0s"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nisshi starts");
        self.child = Some(child);
        let at = ("127.0.0.1", self.port);
        for _ in 0..100 {
            if TcpStream::connect(at).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nisshi did not answer on port {}", self.port);
    }

    /// SIGKILLs it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Its URL (the advertised port's).
    pub fn url(&self) -> String {
        format!("kafka://127.0.0.1:{}", self.advertised)
    }

    /// A client configuration for it.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set(
            "bootstrap.servers",
            format!("127.0.0.1:{}", self.advertised),
        );
        config
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The next delivery of `deliveries`, within `within` (a panic naming what came instead).
pub async fn next(
    deliveries: &mut ruststream_core::DeliveryStream,
    within: Duration,
) -> ruststream_core::Delivery {
    use futures_util::StreamExt as _;
    match tokio::time::timeout(within, deliveries.next()).await {
        Ok(Some(Ok(delivery))) => delivery,
        other => panic!("no delivery within {within:?}: {other:?}"),
    }
}

/// Whether the broker returns the metadata committed with an offset (Kafka does; nisshi
/// 0.8.1 stores it and returns none: docs/kafka.md, "How nisshi differs from Kafka").
/// Commits offset 0 of `topic`'s partition 0 with metadata in a group of its own, and
/// reads it back (blocking).
pub fn returns_commit_metadata(topic: &str) -> bool {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    let mut config = config();
    config
        .set("group.id", unique("metadata-probe"))
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().expect("a client");
    let mut list = rdkafka::TopicPartitionList::new();
    let mut element = list.add_partition(topic, 0);
    element
        .set_offset(rdkafka::Offset::Offset(0))
        .expect("an offset");
    element.set_metadata("probe");
    consumer.commit(&list, CommitMode::Sync).expect("committed");
    let mut asked = rdkafka::TopicPartitionList::new();
    asked.add_partition(topic, 0);
    let read = consumer
        .committed_offsets(asked, Duration::from_secs(10))
        .expect("read back");
    read.find_partition(topic, 0)
        .is_some_and(|element| element.metadata() == "probe")
}
