//! Shared helpers for the runtime's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use ruststream::memory::{MemoryBroker, Snapshot};
use ruststream::testing::TestApp;
use ruststream_core::{
    AckError, Acker, Address, BoxFuture, Broker, Capabilities, Delivery, Headers, Message,
    Original, Plan, Publish, PublishError, PublishErrorKind, RETRY_COUNT, Settlement, Settling,
    SubscribeError, SubscribeSpec, Subscription, Tag,
};
use tokio::time::Instant;

/// A memory broker's capabilities with some switched off.
pub fn caps(
    settles: bool,
    requeues: bool,
    counts: bool,
    delays: bool,
    dead_letters: bool,
) -> Capabilities {
    Capabilities {
        settles,
        requeues,
        counts,
        delays: delays.then_some(ruststream::core::Capabilities::ANY_DELAY),
        dead_letters,
        moves: false,
    }
}

/// Settles only: every retry is a runtime copy.
pub const COPYING: Capabilities = Capabilities::SETTLES;

/// The plan's settlement of the original, if it settles now.
pub fn settled_with(plan: &Plan) -> Option<Settlement> {
    match plan.original {
        Original::Settle(s) => Some(s),
        _ => None,
    }
}

/// Logs to the test's output when `RUST_LOG` is set.
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// How long (on the test's clock, usually paused) a wait may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(3600);

/// [`TestApp::settled`], failing the test instead of hanging if it never settles.
pub async fn settle(app: &TestApp) {
    if tokio::time::timeout(PATIENCE, app.settled()).await.is_err() {
        panic!(
            "never settled; broker: {:?}",
            nonempty(&app.broker().snapshot())
        );
    }
}

/// Waits (on the test's clock) until `condition` holds; fails the test after [`PATIENCE`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Awaits `future`, failing the test after [`PATIENCE`] on the test's clock.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, future).await {
        Ok(value) => value,
        Err(_) => panic!("gave up waiting for {what}"),
    }
}

/// The queues of a snapshot that hold anything, as `(address, ready, unsettled, delayed)`,
/// sorted by address.
pub fn nonempty(snapshot: &[Snapshot]) -> Vec<(String, usize, usize, usize)> {
    let mut out: Vec<_> = snapshot
        .iter()
        .filter(|q| !q.is_empty())
        .map(|q| (q.address.to_string(), q.ready, q.unsettled, q.delayed))
        .collect();
    out.sort();
    out
}

/// The snapshot of one queue.
pub fn queue(broker: &MemoryBroker, address: &str) -> Snapshot {
    broker
        .snapshot()
        .into_iter()
        .find(|q| q.address.as_str() == address)
        .unwrap_or_else(|| panic!("no queue {address}"))
}

/// A JSON message with a header of the test's own, as a client would publish it.
pub fn json_message(payload: &str) -> Message {
    Message::new(payload.to_owned())
        .with_header("content-type", "application/json")
        .with_header("x-test", "as-published")
}

/// The retry-count header of `headers`, as a number, if present.
pub fn retry_count(headers: &Headers) -> Option<u32> {
    headers.get_str(RETRY_COUNT).map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("retry count {v:?} is not a number"))
    })
}

/// One handler call as the handler saw it.
#[derive(Clone, Debug)]
pub struct Call {
    /// The `Attempt` extractor's value.
    pub attempt: u32,
    /// The delivery's headers.
    pub headers: Headers,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// When the handler was called.
    pub at: Instant,
}

/// A shared log of handler calls.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    /// Records a call; returns how many calls there have been, this one included.
    pub fn record(&self, attempt: u32, headers: &Headers, payload: &[u8]) -> usize {
        let mut calls = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(Call {
            attempt,
            headers: headers.clone(),
            payload: payload.to_vec(),
            at: Instant::now(),
        });
        calls.len()
    }

    /// Every call so far.
    pub fn all(&self) -> Vec<Call> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many calls so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// The attempt numbers, in call order.
    pub fn attempts(&self) -> Vec<u32> {
        self.all().iter().map(|c| c.attempt).collect()
    }
}

/// Counts how many are running at once and the most there ever were.
#[derive(Clone, Default)]
pub struct Gauge {
    now: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
}

impl Gauge {
    /// One more is running; it stops running when the guard drops.
    pub fn enter(&self) -> GaugeGuard {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
        GaugeGuard(self.now.clone())
    }

    /// How many are running now.
    pub fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    /// The most that ever ran at once.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// How many ever started.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
}

/// Leaves a [`Gauge`] when dropped.
pub struct GaugeGuard(Arc<AtomicUsize>);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

type Rule = Arc<dyn Fn(&Delivery) -> bool + Send + Sync>;

/// A broker wrapping the real memory broker that misbehaves on request: refuses some
/// settlements (`AckError::Refused`), marks some deliveries as defective at the transport
/// level, refuses publishes to some addresses. Everything else goes to the memory broker.
///
/// A refused settlement leaves the memory broker's delivery unsettled, as a broker that
/// refused it would: it comes back when the consumer goes away.
#[derive(Clone)]
pub struct Faulty {
    inner: MemoryBroker,
    refuse_settlement: Option<Rule>,
    lose_reply: Option<Rule>,
    defect: Option<Rule>,
    refuse_publish_to: Vec<Address>,
    too_large_for: Vec<Address>,
    outage: Arc<AtomicBool>,
    slow_settlement: Option<Duration>,
    trailing: Option<usize>,
}

impl Faulty {
    /// Wraps `inner`, misbehaving in no way yet.
    pub fn new(inner: MemoryBroker) -> Self {
        Self {
            inner,
            refuse_settlement: None,
            lose_reply: None,
            defect: None,
            refuse_publish_to: Vec::new(),
            too_large_for: Vec::new(),
            outage: Arc::new(AtomicBool::new(false)),
            slow_settlement: None,
            trailing: None,
        }
    }

    /// A switch that, while on, makes every publish fail as not connected (a broker
    /// outage, as publishers see it).
    pub fn outage(&self) -> Arc<AtomicBool> {
        self.outage.clone()
    }

    /// Settles only `after` the settlement was asked for, and only once its future is
    /// polled (as an adapter whose settlement is a command to the server).
    pub fn slow_settlement(mut self, after: Duration) -> Self {
        self.slow_settlement = Some(after);
        self
    }

    /// Declares `n` settlements trailing behind a sequential loop
    /// ([`Broker::trailing`]), as a broker whose settlements wait for a shared step.
    pub fn trailing(mut self, n: usize) -> Self {
        self.trailing = Some(n);
        self
    }

    /// Refuses the settlement of deliveries for which `rule` holds.
    pub fn refuse_settlement_if(
        mut self,
        rule: impl Fn(&Delivery) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.refuse_settlement = Some(Arc::new(rule));
        self
    }

    /// Carries out the settlement of deliveries for which `rule` holds, then reports it
    /// failed (`AckError::Disconnected`): a connection lost after the command reached
    /// the server and before its reply came back.
    pub fn lose_settlement_reply_if(
        mut self,
        rule: impl Fn(&Delivery) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.lose_reply = Some(Arc::new(rule));
        self
    }

    /// Marks deliveries for which `rule` holds with a transport-level defect.
    pub fn defect_if(mut self, rule: impl Fn(&Delivery) -> bool + Send + Sync + 'static) -> Self {
        self.defect = Some(Arc::new(rule));
        self
    }

    /// Refuses every publish to `address`.
    pub fn refuse_publish_to(mut self, address: &str) -> Self {
        self.refuse_publish_to.push(Address::new(address));
        self
    }

    /// Every publish to `address` is refused for good, as too large.
    pub fn too_large_for(mut self, address: &str) -> Self {
        self.too_large_for.push(Address::new(address));
        self
    }
}

/// The reason [`Faulty`] gives for a defective delivery.
pub const DEFECT: &str = "truncated frame";
/// The reason [`Faulty`] gives for a refused settlement.
pub const REFUSAL: &str = "refused by the test broker";

/// What [`FaultyAcker`] does with a delivery's settlement.
#[derive(Clone, Copy)]
enum Fault {
    None,
    Refuse,
    LoseReply,
}

struct FaultyAcker {
    slow: Option<Duration>,
    held: Mutex<HashMap<u64, (Delivery, Fault)>>,
    /// Deliveries whose settlement was refused: kept, so they stay unsettled with the
    /// memory broker (dropping one would hand it back at once).
    refused: Mutex<Vec<Delivery>>,
}

impl Acker for FaultyAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        let Tag::Seq(n) = tag else {
            return Settling::done(Err(AckError::Refused("not a test tag".into())));
        };
        let held = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&n);
        match held {
            None => Settling::done(Err(AckError::Refused("unknown delivery".into()))),
            // Refused: the memory broker's delivery stays unsettled.
            Some((inner, Fault::Refuse)) => {
                self.refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(inner);
                Settling::done(Err(AckError::Refused(REFUSAL.into())))
            }
            Some((inner, Fault::LoseReply)) => Settling::pending(async move {
                let _ = inner.settle(settlement).await;
                Err(AckError::Disconnected)
            }),
            Some((inner, Fault::None)) => match self.slow {
                Some(after) => Settling::pending(async move {
                    tokio::time::sleep(after).await;
                    inner.settle(settlement).await
                }),
                None => inner.settle(settlement),
            },
        }
    }

    /// Hands the memory broker's delivery back at once, as the contract asks.
    fn abandon(&self, tag: Tag, _message: Message) {
        if let Tag::Seq(n) = tag {
            let held = self
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&n);
            std::mem::drop(held);
        }
    }
}

impl Broker for Faulty {
    fn name(&self) -> &'static str {
        "faulty-memory"
    }

    fn trailing(&self) -> Option<usize> {
        self.trailing
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async move {
            let inner = self.inner.subscribe(spec).await?;
            let acker = Arc::new(FaultyAcker {
                slow: self.slow_settlement,
                held: Mutex::new(HashMap::new()),
                refused: Mutex::new(Vec::new()),
            });
            let next = Arc::new(AtomicU64::new(0));
            let refuse = self.refuse_settlement.clone();
            let lose_reply = self.lose_reply.clone();
            let defect = self.defect.clone();
            let deliveries = inner.deliveries.map(move |item| {
                let delivery = item?;
                let n = next.fetch_add(1, Ordering::Relaxed);
                let fault = if refuse.as_ref().is_some_and(|rule| rule(&delivery)) {
                    Fault::Refuse
                } else if lose_reply.as_ref().is_some_and(|rule| rule(&delivery)) {
                    Fault::LoseReply
                } else {
                    Fault::None
                };
                let defective = defect.as_ref().is_some_and(|rule| rule(&delivery));
                let mut outer = Delivery::new(
                    delivery.payload().clone(),
                    delivery.headers().clone(),
                    delivery.address().clone(),
                    Tag::Seq(n),
                    acker.clone(),
                );
                if let Some(attempt) = delivery.broker_attempt() {
                    outer = outer.with_broker_attempt(attempt);
                }
                if defective {
                    outer = outer.with_defect(DEFECT);
                }
                acker
                    .held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(n, (delivery, fault));
                Ok(outer)
            });
            Ok(Subscription {
                deliveries: Box::pin(deliveries),
                capabilities: inner.capabilities,
                attached: inner.attached,
            })
        })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(FaultyPublish {
            inner: self.inner.publisher(),
            refuse: self.refuse_publish_to.clone(),
            too_large: self.too_large_for.clone(),
            outage: self.outage.clone(),
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

struct FaultyPublish {
    inner: Arc<dyn Publish>,
    refuse: Vec<Address>,
    too_large: Vec<Address>,
    outage: Arc<AtomicBool>,
}

impl Publish for FaultyPublish {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        if self.outage.load(Ordering::Acquire) {
            return Box::pin(async move {
                Err(PublishError {
                    address: to.to_string(),
                    kind: PublishErrorKind::Disconnected,
                    message,
                })
            });
        }
        if self.refuse.contains(&to) {
            return Box::pin(async move {
                Err(PublishError {
                    address: to.to_string(),
                    kind: PublishErrorKind::Refused("refused by the test broker".into()),
                    message,
                })
            });
        }
        if self.too_large.contains(&to) {
            return Box::pin(async move {
                Err(PublishError {
                    address: to.to_string(),
                    kind: PublishErrorKind::TooLarge {
                        size: message.payload.len(),
                        limit: 0,
                    },
                    message,
                })
            });
        }
        self.inner.publish(to, message)
    }

    /// The limit is known ahead, as a broker that announces it.
    fn check(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        if self.too_large.contains(to) {
            return Err(PublishErrorKind::TooLarge {
                size: message.payload.len(),
                limit: 0,
            });
        }
        self.inner.check(to, message)
    }
}

/// The Redis the tests that need one use: `RUSTSTREAM_REDIS_URL`, by default
/// `redis://127.0.0.1:6379` (`scripts/redis.sh` starts one).
pub fn redis_url() -> String {
    std::env::var("RUSTSTREAM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// An address no other run uses: `prefix-name-pid-nanos`.
pub fn unique(prefix: &str, name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{name}-{}-{nanos}", std::process::id())
}

/// A broker connected to `url`, or a failure saying how to start Redis.
#[cfg(feature = "redis")]
pub async fn redis(url: &str) -> Arc<dyn Broker> {
    ruststream::connect(url).await.unwrap_or_else(|error| {
        panic!("no Redis at {url} ({error}): start one with scripts/redis.sh or set RUSTSTREAM_REDIS_URL")
    })
}
