//! A group consumer's lease: the key `{stream}:group:<group>:alive:<consumer>` exists
//! while the consumer runs (`SET … PX heartbeat`, refreshed every third of it) and is
//! deleted when its subscription is gone or the broker closes. A consumer without one is
//! dead: its pending entries are taken over ([`super::recovery`]).
//!
//! The same task keeps a claiming subscription's entries in hand from going idle: every
//! third of `min_idle` it claims them for itself again with `XCLAIM … JUSTID`, which
//! resets their idle time without counting a delivery, so a handler running longer than
//! `min_idle` keeps its entry.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fred::clients::Pool;
use fred::interfaces::{ClientLike, KeysInterface};
use fred::types::{ClusterHash, CustomCommand, Expiration, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::held::Held;
use crate::inflight::Inflight;

/// The alive keys of a broker's consumers, deleted when it closes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Leases(Arc<Mutex<Vec<String>>>);

impl Leases {
    fn add(&self, key: &str) {
        self.keys().push(key.to_owned());
    }

    fn remove(&self, key: &str) {
        let mut keys = self.keys();
        if let Some(at) = keys.iter().position(|k| k == key) {
            keys.swap_remove(at);
        }
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Deletes every alive key still held (the broker is closing).
    pub(crate) async fn release_all(&self, pool: &Pool) {
        let keys: Vec<String> = std::mem::take(&mut *self.keys());
        for key in keys {
            let _ = pool.del::<Value, _>(key).await;
        }
    }
}

/// Entries in hand to keep from going idle: a claiming subscription's.
pub(crate) struct Refresh {
    pub(crate) stream: String,
    pub(crate) group: String,
    pub(crate) held: Arc<Held>,
    pub(crate) every: Duration,
}

/// A consumer's lease, held while the subscription (its reader or a delivery) lives.
pub(crate) struct Lease {
    pool: Pool,
    key: String,
    leases: Leases,
    inflight: Inflight,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("key", &self.key).finish()
    }
}

/// What [`Lease::take`] needs from the broker.
pub(crate) struct Owner {
    pub(crate) pool: Pool,
    pub(crate) leases: Leases,
    pub(crate) inflight: Inflight,
    pub(crate) closed: watch::Receiver<bool>,
}

impl Lease {
    /// Sets the alive `key` of `consumer` for `ttl` and keeps it set until dropped or
    /// the broker closes; with `refresh`, keeps the entries in hand from going idle.
    pub(crate) async fn take(
        owner: Owner,
        key: String,
        consumer: String,
        ttl: Duration,
        refresh: Option<Refresh>,
    ) -> Result<Self, fred::error::Error> {
        beat(&owner.pool, &key, ttl).await?;
        owner.leases.add(&key);
        let task = tokio::spawn(keep(
            owner.pool.clone(),
            key.clone(),
            consumer,
            ttl,
            refresh,
            owner.closed,
        ));
        Ok(Self {
            pool: owner.pool,
            key,
            leases: owner.leases,
            inflight: owner.inflight,
            task,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
        self.leases.remove(&self.key);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (pool, key) = (self.pool.clone(), std::mem::take(&mut self.key));
            let guard = self.inflight.enter();
            handle.spawn(async move {
                let _ = pool.del::<Value, _>(key).await;
                drop(guard);
            });
        }
    }
}

async fn beat(pool: &Pool, key: &str, ttl: Duration) -> Result<(), fred::error::Error> {
    let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
    pool.set::<Value, _, _>(key, 1, Some(Expiration::PX(ttl)), None, false)
        .await
        .map(drop)
}

async fn keep(
    pool: Pool,
    key: String,
    consumer: String,
    ttl: Duration,
    refresh: Option<Refresh>,
    mut closed: watch::Receiver<bool>,
) {
    let mut beats = tokio::time::interval(ttl / 3);
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beats.tick().await;
    let mut refreshes = refresh.as_ref().map(|r| {
        let mut i = tokio::time::interval(r.every);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    });
    loop {
        if *closed.borrow() {
            return;
        }
        let refresh_due = async {
            match &mut refreshes {
                Some(i) => i.tick().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = closed.changed() => return,
            _ = beats.tick() => {
                if let Err(error) = beat(&pool, &key, ttl).await {
                    tracing::warn!(%error, %consumer, "redis consumer heartbeat failed");
                }
            }
            _ = refresh_due => {
                if let Some(r) = &refresh
                    && let Err(error) = touch(&pool, r, &consumer).await
                {
                    tracing::warn!(%error, %consumer, stream = %r.stream, "keeping entries in hand failed");
                }
            }
        }
    }
}

/// `XCLAIM stream group consumer 0 <ids in hand> JUSTID`: resets their idle time.
async fn touch(pool: &Pool, r: &Refresh, consumer: &str) -> Result<(), fred::error::Error> {
    let ids = r.held.snapshot();
    for chunk in ids.chunks(1000) {
        let mut args = Vec::with_capacity(5 + chunk.len());
        args.push(Value::from(r.stream.as_str()));
        args.push(Value::from(r.group.as_str()));
        args.push(Value::from(consumer));
        args.push(Value::from(0));
        args.extend(chunk.iter().map(|id| Value::from(id.to_string())));
        args.push(Value::from_static_str("JUSTID"));
        let cmd = CustomCommand::new_static("XCLAIM", ClusterHash::FirstKey, false);
        pool.custom::<Value, Value>(cmd, args).await?;
    }
    Ok(())
}
