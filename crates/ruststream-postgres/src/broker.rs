//! The broker: a pool of connections, the adapter's tables, one `LISTEN` connection.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;
use ruststream_core::{
    Attached, BoxFuture, Broker, Capabilities, Inspect, Publish, SubscribeError, SubscribeSpec,
    Subscription, redact, split_query,
};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::{mpsc, watch};

use crate::ConnectError;
use crate::consumer::Consumer;
use crate::inner::Inner;
use crate::lease::Held;
use crate::pending::Pending;
use crate::publisher::Publisher;
use crate::schema::{self, Names};
use crate::settings;
use crate::wake::{self, Wake};

/// What every subscription declares: the row is settled, given back (now or at any
/// later time, durably), its own delivery count is the attempt, and a copy (a dead
/// letter, a retry to another queue) replaces its row in one statement.
pub const CAPABILITIES: Capabilities = Capabilities {
    settles: true,
    requeues: true,
    counts: true,
    delays: Some(ruststream_core::Capabilities::ANY_DELAY),
    dead_letters: false,
    moves: true,
};

/// How many settlements may trail behind a mount's handlers ([`Broker::trailing`]),
/// shared by `n` workers: enough that the loop handles the next rows while one commit
/// deletes 64 (with the runtime's 64 the loop waited for every commit).
pub const TRAILING: usize = 256;

/// The most claimed rows a subscription hands ahead of its handlers (fewer where the
/// mount holds fewer): the settlements trailing behind hold no row that waits, so this,
/// not [`TRAILING`], is what one consumer takes from the others.
pub const AHEAD: usize = 128;

/// PostgreSQL as a broker: queues are rows of one table in the adapter's schema.
#[derive(Clone)]
pub struct PostgresBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PostgresBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBroker")
            .field("schema", &self.inner.names.schema)
            .finish_non_exhaustive()
    }
}

impl PostgresBroker {
    /// Connects to `url` (`postgres://user@host:5432/db?schema=…`), creates or migrates
    /// the adapter's tables, and starts listening for publishes.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let (client_url, query) = split_query(url, settings::client_key);
        let configured = settings::connection(&query)?;
        crate::tls::check(&client_url)?;
        let options = PgConnectOptions::from_str(&client_url)
            .map_err(|error| ConnectError::BadUrl(error.to_string()))?;
        let unreachable = |error: sqlx::Error| ConnectError::Unreachable {
            url: redact(&client_url),
            reason: error.to_string(),
        };
        let pool = PgPoolOptions::new()
            .max_connections(configured.max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(unreachable)?;
        let names = Names::new(&configured.schema);
        schema::writable(&pool, &redact(&client_url)).await?;
        schema::migrate(&pool, &names).await?;
        schema::check(&pool, &names).await?;
        let mut listener = PgListener::connect_with(&pool).await.map_err(unreachable)?;
        listener.listen(&names.channel).await.map_err(unreachable)?;
        let (closed, watching) = watch::channel(false);
        let wake = Arc::new(Wake::default());
        tokio::spawn(wake::listen(listener, wake.clone(), watching));
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                names,
                claim: configured.claim,
                wake,
                closed,
                pending: Pending::default(),
            }),
        })
    }

    /// The connection pool, for the service's own statements next to the broker's.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The schema holding the adapter's tables.
    pub fn schema(&self) -> &str {
        &self.inner.names.schema
    }

    /// The outbox of the broker's schema (its table migrated at connect).
    pub fn outbox(&self) -> crate::Outbox {
        crate::Outbox::from_names(self.inner.names.clone())
    }
}

impl Broker for PostgresBroker {
    fn name(&self) -> &'static str {
        "postgres"
    }

    /// Every settlement waits for a commit shared by the rows settled at the same moment
    /// (`src/deletes.rs`): [`TRAILING`] settlements may trail behind a sequential loop,
    /// or between `n` workers, so that the handlers go on while a commit deletes the
    /// last rows, and a commit takes many rows rather than one per worker
    /// (`BENCHMARKS.md`: `workers(16)` was a third of the raw batched loop).
    fn trailing(&self) -> Option<usize> {
        Some(TRAILING)
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async move {
            if *self.inner.closed.borrow() {
                return Err(SubscribeError::Closed);
            }
            if spec.address.as_str().is_empty() {
                return Err(SubscribeError::BadAddress("an empty queue name".to_owned()));
            }
            spec.options.check(self.name())?;
            let claim = settings::claim(self.inner.claim, &spec.options)?;
            let (tx, mut rx) = mpsc::unbounded_channel();
            let attached = Attached::new();
            spec.drain.accept();
            let batch = claim.batch.unwrap_or(spec.in_flight).max(1);
            let held = Arc::new(Held::default());
            let taken = held.clone();
            let consumer = Consumer {
                inner: self.inner.clone(),
                notify: self.inner.wake.register(spec.address.as_str()),
                queue: spec.address,
                batch,
                ahead: batch.min(AHEAD),
                claim,
                held,
                drain: spec.drain,
                attached: attached.clone(),
                tx,
            };
            tokio::spawn(consumer.run());
            Ok(Subscription {
                deliveries: Box::pin(stream::poll_fn(move |cx| {
                    let next = rx.poll_recv(cx);
                    if let std::task::Poll::Ready(Some(Ok(_))) = &next {
                        taken.taken();
                    }
                    next
                })),
                capabilities: CAPABILITIES,
                attached,
            })
        })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(Publisher(self.inner.clone()))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Nothing more is claimed; what was given back goes out before the pool shuts.
            self.inner.closed.send_replace(true);
            self.inner.pending.idle(Duration::from_secs(5)).await;
            self.inner.pool.close().await;
        })
    }

    fn facts(&self, _spec: &SubscribeSpec) -> Option<Capabilities> {
        Some(CAPABILITIES)
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(&*self.inner)
    }
}
