//! Shared helpers for the integration tests: a real Redis (127.0.0.1:6379, or
//! `RUSTSTREAM_REDIS_URL`), a unique key prefix per test, and a stand-in for the runtime's
//! settlement (the decision from `ruststream_core::decide`, carried out).

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fred::prelude::*;
use fred::types::Value;
use futures_util::StreamExt;
use ruststream_core::{
    AckError, Address, Broker, Capabilities, Declaration, Delivery, Facts, Message, Options,
    Original, Publish, RETRY_COUNT, Settlement, SubscribeSpec, Subscription, Verdict, decide,
};
use ruststream_redis::{RedisBroker, Settings};

pub mod failover;
pub mod server;

/// The server under test.
pub fn url() -> String {
    std::env::var("RUSTSTREAM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

const HOW_TO_START: &str = "no Redis at RUSTSTREAM_REDIS_URL (default redis://127.0.0.1:6379). \
Start one with: redis-server --daemonize yes --port 6379 --save '' --appendonly no";

/// A unique key prefix: `rst:<pid>-<nanos>-<n>:`.
pub fn unique_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "rst:{}-{nanos}-{}:",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A test's broker, a plain client to inspect the server with, and the key prefix.
pub struct Ctx {
    pub broker: RedisBroker,
    pub admin: Client,
    pub prefix: String,
}

/// Connects to the server under test, or fails saying how to start one.
pub async fn ctx() -> Ctx {
    ctx_at(&url()).await
}

/// Connects to `url` with a fresh prefix.
pub async fn ctx_at(url: &str) -> Ctx {
    let prefix = unique_prefix();
    let admin = admin(url).await;
    let broker = RedisBroker::connect_with(url, Settings::default().key_prefix(prefix.clone()))
        .await
        .unwrap_or_else(|e| panic!("{HOW_TO_START}: {e}"));
    Ctx {
        broker,
        admin,
        prefix,
    }
}

/// A plain client to `url`.
pub async fn admin(url: &str) -> Client {
    let config = Config::from_url(url).expect("url");
    let mut builder = Builder::from_config(config);
    // The restart tests kill the server under this client too.
    builder.set_policy(ReconnectPolicy::new_constant(0, 100));
    builder.with_performance_config(|p| p.default_command_timeout = Duration::from_secs(10));
    let client = builder.build().expect("client");
    match tokio::time::timeout(Duration::from_secs(5), client.init()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("{HOW_TO_START}: {e}"),
        Err(_) => panic!("{HOW_TO_START}: timed out"),
    }
}

impl Ctx {
    /// The full key of `address`.
    pub fn key(&self, address: &str) -> String {
        format!("{}{address}", self.prefix)
    }

    /// A subscription on `address` with `form` and `declaration`.
    pub async fn subscribe<F: ruststream_core::BrokerOption>(
        &self,
        address: &str,
        form: F,
        in_flight: usize,
    ) -> Subscription {
        let mut options = Options::default();
        options.insert(form);
        let spec = SubscribeSpec {
            address: Address::new(address),
            declaration: Declaration::default(),
            in_flight,
            options,
            drain: Default::default(),
        };
        self.broker.subscribe(spec).await.expect("subscribe")
    }

    /// Publishes `payload` with the broker's publisher.
    pub async fn publish(&self, address: &str, message: Message) {
        self.broker
            .publisher()
            .publish(Address::new(address), message)
            .await
            .expect("publish");
    }

    /// Publishes message `n` to `address` as a list.
    pub async fn publish_list(&self, address: &str, n: usize) {
        self.broker
            .redis_publisher()
            .publish_as(
                Address::new(address),
                ruststream_redis::Target::List,
                msg(n),
            )
            .await
            .expect("publish to list");
    }

    pub async fn xlen(&self, address: &str) -> u64 {
        self.admin.xlen(self.key(address)).await.expect("xlen")
    }

    pub async fn llen(&self, key: &str) -> u64 {
        self.admin.llen(key).await.expect("llen")
    }

    pub async fn zcard(&self, key: &str) -> u64 {
        self.admin.zcard(key).await.expect("zcard")
    }

    /// How many entries the group has pending (`XPENDING key group`).
    pub async fn pending(&self, address: &str, group: &str) -> u64 {
        let v: Value = self
            .admin
            .xpending(self.key(address), group, ())
            .await
            .expect("xpending");
        match v {
            Value::Array(items) => items.first().and_then(Value::as_u64).unwrap_or(0),
            _ => 0,
        }
    }

    /// How many consumers the group has (`XINFO CONSUMERS`).
    pub async fn consumers(&self, address: &str, group: &str) -> usize {
        let v: Value = self
            .admin
            .xinfo_consumers(self.key(address), group)
            .await
            .expect("xinfo consumers");
        v.into_array().len()
    }

    /// The delivery counter of the first pending entry of the group, if any.
    pub async fn first_pending_counter(&self, address: &str, group: &str) -> Option<u64> {
        let v: Value = self
            .admin
            .xpending(self.key(address), group, ("-", "+", 1))
            .await
            .expect("xpending");
        let first = v.into_array().into_iter().next()?;
        first.into_array().get(3).and_then(Value::as_u64)
    }

    /// Deletes every key under this test's prefix.
    pub async fn cleanup(&self) {
        let keys: Value = self
            .admin
            .custom(
                fred::types::CustomCommand::new_static(
                    "KEYS",
                    fred::types::ClusterHash::Random,
                    false,
                ),
                vec![format!("{}*", self.prefix)],
            )
            .await
            .expect("keys");
        for key in keys.into_array() {
            if let Some(key) = key.as_string() {
                let _: Value = self.admin.del(key).await.expect("del");
            }
        }
        // Keys with a hash tag around the prefixed name.
        let keys: Value = self
            .admin
            .custom(
                fred::types::CustomCommand::new_static(
                    "KEYS",
                    fred::types::ClusterHash::Random,
                    false,
                ),
                vec![format!("{{{}*", self.prefix)],
            )
            .await
            .expect("keys");
        for key in keys.into_array() {
            if let Some(key) = key.as_string() {
                let _: Value = self.admin.del(key).await.expect("del");
            }
        }
    }
}

/// The next delivery, failing the test after 5 s.
pub async fn next(sub: &mut Subscription) -> Delivery {
    next_within(sub, Duration::from_secs(5))
        .await
        .expect("a delivery within 5 s")
}

/// The next delivery within `wait`, skipping reported read errors.
pub async fn next_within(sub: &mut Subscription, wait: Duration) -> Option<Delivery> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, sub.deliveries.next()).await {
            Ok(Some(Ok(d))) => return Some(d),
            Ok(Some(Err(e))) => eprintln!("read error (going on): {e}"),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// What the runtime does with a handler's verdict: decide, publish a copy (immediate ones
/// before the original is settled), settle the original.
/// On a form that cannot settle: `retry_after(delay)` leaves `delivery` as it is and
/// publishes a copy (to `decl`'s retry address, else back where it came from), which
/// is the next delivery of `sub`; returns it.
pub async fn copy_after(
    sub: &mut Subscription,
    delivery: Delivery,
    delay: Duration,
    decl: &Declaration,
    publisher: &dyn Publish,
) -> Delivery {
    let caps = sub.capabilities;
    complete(delivery, caps, Verdict::RetryAfter(delay), decl, publisher)
        .await
        .expect("the original untouched, a copy published");
    next(sub).await
}

/// Settling `delivery` is `AckError::Unsupported` (a form that cannot settle).
pub async fn assert_unsupported(delivery: Delivery) {
    let err = delivery
        .settle(Settlement::Accept)
        .await
        .expect_err("settling is unsupported");
    assert!(matches!(err, AckError::Unsupported), "{err}");
}

pub async fn complete(
    delivery: Delivery,
    caps: Capabilities,
    verdict: Verdict,
    decl: &Declaration,
    publisher: &dyn Publish,
) -> Result<(), AckError> {
    let own = delivery.address().clone();
    let plan = decide(verdict, Facts::of(&delivery, &caps), caps, decl, &own);
    let copy = plan.copy.map(|c| {
        let mut m = delivery.to_message();
        if let Some(n) = c.retry_count {
            m.headers.insert(RETRY_COUNT, n);
        }
        (c, m)
    });
    if let Some((c, m)) = &copy
        && c.delay.is_none()
    {
        publisher
            .publish(c.to.clone(), m.clone())
            .await
            .expect("publish copy");
    }
    let result = match plan.original {
        Original::Settle(s) => delivery.settle(s).await,
        Original::Hold(d, s) => {
            tokio::time::sleep(d).await;
            delivery.settle(s).await
        }
        Original::Unsupported => Err(AckError::Unsupported),
        Original::Untouched => Ok(()),
    };
    if let Some((c, m)) = copy
        && let Some(delay) = c.delay
    {
        tokio::time::sleep(delay).await;
        publisher
            .publish(c.to, m)
            .await
            .expect("publish delayed copy");
    }
    result
}

/// A JSON-ish message with a numbered body.
pub fn msg(n: usize) -> Message {
    Message::new(format!("{{\"n\":{n}}}")).with_header("content-type", "application/json")
}

/// The `n` of a body made by [`msg`].
pub fn n_of(d: &Delivery) -> usize {
    let text = std::str::from_utf8(d.payload()).expect("utf-8");
    text.trim_start_matches("{\"n\":")
        .trim_end_matches('}')
        .parse()
        .expect("a numbered body")
}
