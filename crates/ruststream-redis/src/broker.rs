//! The broker: connections, subscriptions by form, the publisher.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
use fred::types::Value;
use fred::types::config::Config;
use ruststream_core::{
    Acker, Address, BoxFuture, Broker, Capabilities, Publish, Replies, Setting, SubscribeError,
    SubscribeSpec, Subscription, split_query,
};
use tokio::sync::watch;

use crate::acker::{StreamAcker, StreamMode};
use crate::batch::Batcher;
use crate::form::claiming::Claimer;
use crate::form::group_recovery::Recovery;
use crate::form::handback::Tracker;
use crate::form::held::Held;
use crate::form::lease::{Lease, Leases, Owner, Refresh};
use crate::form::list::ListReader;
use crate::form::no_acker::NoAcker;
use crate::form::pubsub::PubSubReader;
use crate::form::reliable::ReliableReader;
use crate::form::reliable_recovery::AbortOnDrop;
use crate::form::stream::{StreamReader, ensure_group};
use crate::form::{self};
use crate::inflight::Inflight;
use crate::keys::{Keys, default_consumer};
use crate::options::{DelayedRetry, Form, Group};
use crate::publisher::RedisPublisher;
use crate::replicas::Replicas;
use crate::routes::Target;
use crate::routes::{Routes, mark};
use crate::{ConnectError, client, delayed, url};

/// Connection settings beyond the URL.
#[derive(Clone, Debug)]
pub struct Settings {
    key_prefix: String,
    pool_size: usize,
    wait_for_replicas: Option<Replicas>,
    #[cfg(feature = "tls")]
    tls: crate::tls::TlsSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            key_prefix: String::new(),
            pool_size: 2,
            wait_for_replicas: None,
            #[cfg(feature = "tls")]
            tls: crate::tls::TlsSettings::default(),
        }
    }
}

impl Settings {
    /// Prepends `prefix` to every key and channel this broker uses (default: none).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// How many connections settle and publish (default 2).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// A publish to a stream or a list is done only once `replicas` replicas have it
    /// (Redis's `WAIT replicas timeout` after the write, one round trip more), so that a
    /// master that dies right after it answered does not take the message with it
    /// (Redis replicates asynchronously). Default: off, a publish is done when the
    /// master has it. Fewer replicas within `timeout` is a publish error: the master has
    /// the message, and publishing it again may duplicate it, never lose it. `WAIT`
    /// narrows the window, it does not close it: a replica that acknowledged can still
    /// lose the write if it dies before it is promoted.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_redis::Settings;
    ///
    /// let settings = Settings::default().wait_for_replicas(1, Duration::from_millis(500));
    /// # let _ = settings;
    /// ```
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_for_replicas = (replicas > 0).then_some(Replicas { replicas, timeout });
        self
    }

    /// For `rediss://`: trusts the CA certificates in the PEM file at `path` as well as
    /// the system's roots (a company CA). May be given more than once. The file is read
    /// when connecting: one that cannot be read or holds no PEM certificate fails
    /// [`RedisBroker::connect_with`] with [`ConnectError::Tls`]. Not used for `redis://`.
    #[cfg(feature = "tls")]
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.ca_files.push(path.into());
        self
    }

    /// For `rediss://`: whether the system's root certificates are trusted (default
    /// `true`: the platform's store, or the files named by `SSL_CERT_FILE` /
    /// `SSL_CERT_DIR`, as fred reads them). With `false` only the
    /// [`tls_ca_file`](Self::tls_ca_file)s are.
    #[cfg(feature = "tls")]
    pub fn tls_system_roots(mut self, trust: bool) -> Self {
        self.tls.system_roots = trust;
        self
    }

    /// For `rediss://`: connects with this rustls configuration as it is (its roots,
    /// a client certificate for mutual TLS, protocol versions, crypto provider);
    /// [`tls_ca_file`](Self::tls_ca_file) and [`tls_system_roots`](Self::tls_system_roots)
    /// are then not used. [`rustls`](crate::rustls) is the version the client uses.
    #[cfg(feature = "tls")]
    pub fn tls_client_config(
        mut self,
        config: impl Into<Arc<crate::rustls::ClientConfig>>,
    ) -> Self {
        self.tls.client_config = Some(config.into());
        self
    }
}

/// A Redis broker: a pool for settling and publishing, and a connection of its own for
/// each subscription's blocking reads.
#[derive(Clone)]
pub struct RedisBroker {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    /// Subscription settings from the URL's query, under every mount's own.
    url_settings: Vec<Setting>,
    pool: Pool,
    publisher: RedisPublisher,
    closed: Arc<watch::Sender<bool>>,
    /// List elements being handed back; `close` waits for them.
    hand_backs: Arc<Tracker>,
    /// Settlements and lease releases that `close` waits for.
    inflight: Inflight,
    leases: Leases,
}

impl std::fmt::Debug for RedisBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBroker")
            .field("server", &self.inner.config.server)
            .field("key_prefix", &self.inner.publisher.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisBroker {
    /// Connects to `url` (`redis://[user:password@]host[:port][/db]`, `rediss://` with
    /// the `tls` feature: system roots) with the default settings.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(url, Settings::default()).await
    }

    /// Connects with `settings`.
    pub async fn connect_with(url: &str, settings: Settings) -> Result<Self, ConnectError> {
        // The query's keys other than the cluster's `node` and the sentinels'
        // credentials are subscription settings.
        let (url, url_settings) = split_query(url, |key| {
            key == "node" || crate::url::SENTINEL_KEYS.contains(&key)
        });
        crate::settings::form(&ruststream_core::Options::default(), &url_settings).map_err(
            |e| match e {
                SubscribeError::BadOption(why) => ConnectError::BadUrl(why),
                other => ConnectError::BadUrl(other.to_string()),
            },
        )?;
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
        let (mut config, tls) = url::parse(&url)?;
        #[cfg(feature = "tls")]
        if tls {
            config.tls = Some(settings.tls.fred_config()?);
        }
        let pool = client::pool(&config, settings.pool_size)
            .map_err(|e| ConnectError::BadUrl(e.details().to_owned()))?;
        pool.init().await.map_err(|e| {
            let mut message = e.to_string();
            if tls && message.contains("InvalidCertificate") {
                // fred reports rustls' refusal as a debug-printed I/O error.
                message.push_str(
                    " (TLS: the server's certificate is not trusted or does not name the \
                     host; a private CA is added with Settings::tls_ca_file)",
                );
            }
            ConnectError::Connect(message)
        })?;
        let publisher = RedisPublisher {
            pool: pool.clone(),
            prefix: settings.key_prefix.into(),
            routes: Arc::new(Routes::default()),
            replicas: settings.wait_for_replicas,
        };
        let (closed, _) = watch::channel(false);
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                url_settings,
                pool,
                publisher,
                closed: Arc::new(closed),
                hand_backs: Arc::default(),
                inflight: Inflight::default(),
                leases: Leases::default(),
            }),
        })
    }

    /// Publishes to `address` as `target` from now on, whatever subscriptions say. The
    /// key's real type is checked on the next publish: a key of the other kind is a
    /// `PublishErrorKind::BadAddress` naming it (see the crate docs, "Publishing").
    pub fn route(&self, address: impl Into<Address>, target: Target) {
        self.inner.publisher.routes.route(address.into(), target);
    }

    /// The publisher, with [`RedisPublisher::publish_as`] for a one-off target.
    pub fn redis_publisher(&self) -> RedisPublisher {
        self.inner.publisher.clone()
    }

    /// Moves due copies (at most 128) from the delay queue of stream `address` back into
    /// it, as every read of a `DurableZset` subscription does first. Returns how many
    /// moved.
    pub async fn move_delayed(&self, address: &str) -> Result<u64, fred::error::Error> {
        let keys = self.keys(address);
        delayed::move_due(
            &self.inner.pool,
            keys.main(),
            &keys.delayed(),
            delayed::MOVE_LIMIT,
        )
        .await
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    pub(crate) fn keys(&self, address: &str) -> Keys {
        Keys::new(&self.inner.publisher.prefix, address)
    }

    async fn open(&self, spec: SubscribeSpec) -> Result<Subscription, SubscribeError> {
        if *self.inner.closed.borrow() {
            return Err(SubscribeError::Closed);
        }
        if spec.address.as_str().is_empty() {
            return Err(SubscribeError::BadAddress("empty address".into()));
        }
        let count = read_count(spec.in_flight);
        match crate::settings::form(&spec.options, &self.inner.url_settings)? {
            Form::Stream(stream) => {
                let durable = stream.delayed_retry == DelayedRetry::DurableZset;
                let mut caps = Capabilities::SETTLES;
                caps.delays = durable.then_some(Capabilities::ANY_DELAY);
                self.open_stream(spec, stream.group, None, durable, count, caps)
                    .await
            }
            Form::Claiming(claiming) => {
                if claiming.min_idle.is_zero() {
                    return Err(SubscribeError::BadOption(
                        "min_idle must be above zero".into(),
                    ));
                }
                let caps = Capabilities {
                    settles: true,
                    requeues: true,
                    counts: true,
                    // An entry comes back once idle `min_idle`: a longer delay is the
                    // runtime's copy.
                    delays: Some(claiming.min_idle),
                    dead_letters: false,
                    moves: false,
                };
                let claimer = Some(Claimer::new(claiming.min_idle));
                self.open_stream(spec, claiming.group, claimer, false, count, caps)
                    .await
            }
            Form::ReliableList(options) => {
                let connection = self.reader().await?;
                let reader = ReliableReader::open(
                    self.inner.pool.clone(),
                    connection,
                    self.keys(spec.address.as_str()),
                    spec.address.clone(),
                    options,
                    count,
                    self.inner.hand_backs.clone(),
                )
                .await
                .map_err(refused)?;
                self.subscribed(&spec.address, Target::List);
                Ok(self.subscription(reader, Capabilities::SETTLES))
            }
            Form::List(options) => {
                let connection = self.reader().await?;
                // At most once: what a pop took and no handler has is lost with the
                // process, so a pop takes no more than the runtime's own sequential
                // in-flight count, whatever the trailing settlements (which this form,
                // settled at once, never has) make the mount's count.
                let reader = ListReader::open(
                    self.inner.pool.clone(),
                    connection,
                    self.keys(spec.address.as_str()),
                    spec.address.clone(),
                    options.block,
                    count.min(LIST_POP),
                    self.inner.hand_backs.clone(),
                )
                .await;
                self.subscribed(&spec.address, Target::List);
                Ok(self.subscription(reader, Capabilities::NONE))
            }
            Form::PubSub(_) => self.open_pubsub(spec, false, count).await,
            Form::Pattern(_) => self.open_pubsub(spec, true, count).await,
        }
    }

    async fn open_stream(
        &self,
        spec: SubscribeSpec,
        group: Group,
        claimer: Option<Claimer>,
        durable: bool,
        count: usize,
        caps: Capabilities,
    ) -> Result<Subscription, SubscribeError> {
        let keys = self.keys(spec.address.as_str());
        if group.group.is_empty() {
            return Err(SubscribeError::BadOption("empty group name".into()));
        }
        ensure_group(
            &self.inner.pool,
            keys.main(),
            &group.group,
            group.start.as_id(),
        )
        .await
        .map_err(refused)?;
        let mode_counts = claimer.is_some();
        let mode = match (&claimer, durable) {
            (Some(_), _) => StreamMode::Claiming,
            (None, true) => StreamMode::Durable(keys.delayed()),
            (None, false) => StreamMode::Plain,
        };
        let consumer = group.consumer.unwrap_or_else(default_consumer);
        let held = Arc::new(Held::default());
        let alive_prefix = keys.group_alive_prefix(&group.group);
        let refresh = claimer.as_ref().map(|c: &Claimer| Refresh {
            stream: keys.main().to_owned(),
            group: group.group.clone(),
            held: held.clone(),
            every: (c.min_idle / 3).max(Duration::from_millis(10)),
        });
        let owner = Owner {
            pool: self.inner.pool.clone(),
            leases: self.inner.leases.clone(),
            inflight: self.inner.inflight.clone(),
            closed: self.inner.closed.subscribe(),
        };
        let lease = Lease::take(
            owner,
            format!("{alive_prefix}{consumer}"),
            consumer.clone(),
            group.heartbeat,
            refresh,
        )
        .await
        .map(Arc::new)
        .map_err(refused)?;
        let acks = Batcher::spawn(
            self.inner.pool.clone(),
            Bytes::copy_from_slice(keys.main().as_bytes()),
            Bytes::copy_from_slice(group.group.as_bytes()),
        );
        let acker: Arc<dyn Acker> = Arc::new(StreamAcker {
            pool: self.inner.pool.clone(),
            acks,
            mode,
            held: held.clone(),
            inflight: self.inner.inflight.clone(),
            _lease: lease.clone(),
        });
        let mut reader = StreamReader::new(
            self.reader().await?,
            self.inner.pool.clone(),
            spec.address.clone(),
            keys.main().to_owned(),
            group.group,
            consumer,
            group.block,
            group.count.unwrap_or(count) as u64,
            acker,
            held,
            Recovery::new(alive_prefix, group.heartbeat),
            lease,
        );
        reader.claimer = claimer;
        reader.delayed = durable.then(|| keys.delayed());
        self.subscribed(&spec.address, Target::Stream(group.trim));
        // The server counts each entry a read hands over; with claiming that count is the
        // attempt, so a stop drains what was read rather than leave it counted unhandled.
        let drain = (mode_counts).then(|| {
            spec.drain.accept();
            spec.drain.clone()
        });
        Ok(self.subscription_draining(reader, caps, drain))
    }

    async fn open_pubsub(
        &self,
        spec: SubscribeSpec,
        pattern: bool,
        count: usize,
    ) -> Result<Subscription, SubscribeError> {
        if pattern && spec.declaration.retry_to.is_none() {
            // Retry copies would otherwise go to a stream named like the pattern, which
            // nobody reads.
            return Err(SubscribeError::BadOption(format!(
                "pattern {} needs a retry address: set retry_to on the mount \
                 (Declaration::retry_to), a channel the pattern matches",
                spec.address
            )));
        }
        let keys = self.keys(spec.address.as_str());
        if !pattern {
            mark(&self.inner.pool, &keys, "channel").await;
        }
        if let Some(retry_to) = &spec.declaration.retry_to {
            let retry_keys = self.keys(retry_to.as_str());
            mark(&self.inner.pool, &retry_keys, "channel").await;
        }
        let channel = keys.main().to_owned();
        let client = client::subscriber(&self.inner.config)
            .await
            .map_err(disconnected)?;
        let resubscribe = client.manage_subscriptions();
        let messages = client.message_rx();
        let subscribed = if pattern {
            client.psubscribe(channel).await
        } else {
            client.subscribe(channel).await
        };
        subscribed.map_err(refused)?;
        // fred resolves (P)SUBSCRIBE when it is sent, not when the server has it: a
        // publish made right after could find no subscriber and be lost. The server
        // answers commands of one connection in order, so the reply to a PING sent
        // after the subscription means the subscription is in place.
        client.ping::<Value>(None).await.map_err(disconnected)?;
        let prefix = self.inner.publisher.prefix.clone();
        let reader = PubSubReader {
            client,
            messages,
            pattern_prefix: pattern.then_some(prefix),
            address: spec.address.clone(),
            count,
            acker: Arc::new(NoAcker),
            seq: 0,
            _resubscribe: AbortOnDrop(resubscribe),
        };
        if pattern {
            self.subscribed(&spec.address, Target::Pattern);
        } else {
            self.subscribed(&spec.address, Target::Channel);
        }
        if let Some(retry_to) = &spec.declaration.retry_to {
            self.subscribed(retry_to, Target::Channel);
        }
        Ok(self.subscription(reader, Capabilities::NONE))
    }

    fn subscribed(&self, address: &Address, target: Target) {
        self.inner
            .publisher
            .routes
            .subscribed(address.clone(), target);
    }

    async fn reader(&self) -> Result<client::Reader, SubscribeError> {
        client::reader(&self.inner.config)
            .await
            .map_err(disconnected)
    }

    fn subscription<R: form::Reader>(&self, reader: R, capabilities: Capabilities) -> Subscription {
        self.subscription_draining(reader, capabilities, None)
    }

    /// A subscription whose stream ends after what it read once `drain` is requested.
    fn subscription_draining<R: form::Reader>(
        &self,
        reader: R,
        capabilities: Capabilities,
        drain: Option<ruststream_core::Drain>,
    ) -> Subscription {
        let attached = ruststream_core::Attached::new();
        Subscription {
            deliveries: form::deliveries(
                reader,
                self.inner.closed.clone(),
                attached.clone(),
                drain,
            ),
            capabilities,
            attached,
        }
    }
}

/// How long `close` waits for list elements being handed back.
const HAND_BACK_WAIT: Duration = Duration::from_secs(10);

fn refused(error: fred::error::Error) -> SubscribeError {
    if crate::failure::is_connection(&error) {
        SubscribeError::Disconnected(error.to_string())
    } else {
        SubscribeError::Refused(error.to_string())
    }
}

fn disconnected(error: fred::error::Error) -> SubscribeError {
    SubscribeError::Disconnected(error.to_string())
}

/// How many settlements may trail behind a mount's handlers ([`Broker::trailing`]),
/// shared by `n` workers.
pub const TRAILING: usize = 256;

/// The most entries a subscription reads ahead of its handlers where the trailing
/// settlements make its in-flight count larger: they hold no entry that waits, and a
/// read of more would take entries from the group's other consumers.
pub const AHEAD: usize = 128;

/// The most items one pop of the plain list form takes (the form is at most once: a
/// crash loses what was popped and not handled).
const LIST_POP: usize = 65;

/// How many entries one read takes for a mount holding `in_flight` deliveries: what the
/// handlers can hold beyond the [`TRAILING`] settlements, at least [`AHEAD`], never more
/// than `in_flight` nor 1,000.
fn read_count(in_flight: usize) -> usize {
    in_flight
        .saturating_sub(TRAILING)
        .max(AHEAD)
        .min(in_flight)
        .clamp(1, 1000)
}

impl Broker for RedisBroker {
    /// A settlement is an `XACK` (or `LREM`) sent with those of the same moment: with
    /// the runtime's 64 trailing, a sequential loop waited for each of those round trips
    /// every 64 deliveries; with [`TRAILING`] it handles the next entries meanwhile
    /// (`BENCHMARKS.md`: the default mount from 72–81 % to 99–103 % of the batched raw
    /// loop).
    fn trailing(&self) -> Option<usize> {
        Some(TRAILING)
    }

    fn name(&self) -> &'static str {
        "redis"
    }

    fn durable_delays(&self) -> Option<&'static str> {
        Some(
            "a stream with the delayed_retry=durable_zset setting \
             (DelayedRetry::DurableZset), or the Claiming form",
        )
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(self.open(spec))
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(self.inner.publisher.clone())
    }

    fn facts(&self, spec: &SubscribeSpec) -> Option<Capabilities> {
        crate::settings::form(&spec.options, &self.inner.url_settings)
            .ok()
            .and_then(|form| crate::options::facts_of(&form))
    }

    /// A [`List`](crate::List) on `address` (under the key prefix): replies wait in it
    /// even before the client reads, and its kind marker tells servers in other
    /// processes to push to a list.
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            let mut spec = SubscribeSpec::new(address.clone());
            spec.in_flight = 256;
            spec.options.insert(Form::List(crate::List::new()));
            let subscription = self.open(spec).await?;
            Ok(Replies {
                address,
                subscription,
            })
        })
    }

    fn inspect(&self) -> Option<&dyn ruststream_core::Inspect> {
        Some(self)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.closed.send_replace(true);
            // List elements being handed back (a stopped subscription's unread ones).
            let _ = tokio::time::timeout(HAND_BACK_WAIT, self.inner.hand_backs.idle()).await;
            // Settlements already asked for reach the server before QUIT; a lost
            // connection bounds the wait (each command times out).
            let settled = self.inner.inflight.idle();
            if tokio::time::timeout(client::COMMAND_TIMEOUT, settled)
                .await
                .is_err()
            {
                tracing::warn!("redis close: settlements still unanswered; closing anyway");
            }
            // What this broker's consumers left pending is taken over at once.
            self.inner.leases.release_all(&self.inner.pool).await;
            let _ = self.inner.pool.quit().await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::read_count;

    #[test]
    fn a_read_takes_what_the_handlers_can_hold_not_the_trailing_settlements() {
        // (in flight, entries per read)
        for (in_flight, count) in [
            // The default mount: 1 in hand + 256 trailing.
            (257, 128),
            // workers(16): 16 × (1 + 16).
            (272, 128),
            // workers(500): 500 × (1 + 1).
            (1000, 744),
            (5000, 1000),
            // A lane mount (nothing trails), a spec of 1.
            (9, 9),
            (1, 1),
            (0, 1),
        ] {
            assert_eq!(read_count(in_flight), count, "in flight {in_flight}");
        }
    }
}
