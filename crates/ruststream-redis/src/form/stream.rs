//! The stream forms: a consumer group read with `XREADGROUP`, optionally claiming idle
//! pending entries and moving due copies back from a durable delay queue.
//!
//! Before each read the reader takes back, in this order: its own pending entries not in
//! hand after a reconnect, a failed read, an abandoned delivery or a failed settlement
//! ([`group_recovery::own`]); the entries of dead consumers ([`Recovery`]); with claiming, the
//! entries idle for `min_idle` ([`Claimer`]). A started reader first re-reads its own
//! pending entries (`XREADGROUP … 0`), then reads new ones (`>`).

use std::sync::Arc;
use std::time::Duration;

use fred::clients::Pool;
use fred::interfaces::{ClientLike, EventInterface, StreamsInterface};
use fred::types::Value;
use fred::types::config::Options as CommandOptions;
use ruststream_core::{Acker, Address, ConsumeError, Delivery, Tag};
use tokio::sync::broadcast::{self, error::TryRecvError};

use super::claiming::{self, Claimer};
use super::group_recovery::{self, Recovery, Scope};
use super::held::Held;
use super::lease::Lease;
use super::{Reader, consume_error};
use crate::reply::{self, Entry, EntryId};
use crate::{delayed, entry, failure};

/// Where the reader is: re-reading this consumer's own pending entries after `EntryId`,
/// or reading new ones.
#[derive(Debug, Clone, Copy)]
enum Phase {
    Pending(EntryId),
    New,
}

/// Reads a stream through a consumer group.
pub(crate) struct StreamReader {
    pub(crate) client: crate::client::Reader,
    pub(crate) pool: Pool,
    pub(crate) address: Address,
    pub(crate) key: String,
    pub(crate) group: String,
    pub(crate) consumer: String,
    pub(crate) block: Duration,
    pub(crate) count: u64,
    pub(crate) acker: Arc<dyn Acker>,
    pub(crate) claimer: Option<Claimer>,
    pub(crate) delayed: Option<String>,
    pub(crate) held: Arc<Held>,
    pub(crate) recovery: Recovery,
    pub(crate) _lease: Arc<Lease>,
    phase: Phase,
    /// Taking back own stranded entries, after this id (`None`: from the start).
    own: Option<Option<EntryId>>,
    reconnects: broadcast::Receiver<fred::types::config::Server>,
}

impl StreamReader {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: crate::client::Reader,
        pool: Pool,
        address: Address,
        key: String,
        group: String,
        consumer: String,
        block: Duration,
        count: u64,
        acker: Arc<dyn Acker>,
        held: Arc<Held>,
        recovery: Recovery,
        lease: Arc<Lease>,
    ) -> Self {
        let reconnects = client.reconnect_rx();
        Self {
            client,
            pool,
            address,
            key,
            group,
            consumer,
            block,
            count,
            acker,
            claimer: None,
            delayed: None,
            held,
            recovery,
            _lease: lease,
            // A (re)started consumer first re-reads its own pending entries.
            phase: Phase::Pending(EntryId(0, 0)),
            own: None,
            reconnects,
        }
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            pool: &self.pool,
            stream: &self.key,
            group: &self.group,
            consumer: &self.consumer,
            count: self.count,
        }
    }

    /// Whether the reading connection was re-established since the last read.
    fn reconnected(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.reconnects.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => any = true,
                Err(TryRecvError::Empty | TryRecvError::Closed) => return any,
            }
        }
    }

    async fn read_once(&mut self) -> Result<Vec<Delivery>, fred::error::Error> {
        if self.reconnected() {
            tracing::info!(
                stream = %self.key, group = %self.group, consumer = %self.consumer,
                "redis reader reconnected; taking back its own pending entries"
            );
            self.own = Some(None);
        }
        if self.held.take_reread() {
            self.own = Some(None);
        }
        if let Some(zset) = &self.delayed {
            delayed::move_due(&self.pool, &self.key, zset, delayed::MOVE_LIMIT).await?;
        }
        if let Some(after) = self.own {
            let (entries, next) = group_recovery::own(&self.scope(), &self.held, after).await?;
            self.own = next.map(Some);
            if !entries.is_empty() {
                tracing::info!(
                    stream = %self.key, group = %self.group, consumer = %self.consumer,
                    n = entries.len(),
                    "took back pending entries of its own that were not in hand"
                );
                return Ok(self.counted(entries).await);
            }
        }
        let scope = Scope {
            pool: &self.pool,
            stream: &self.key,
            group: &self.group,
            consumer: &self.consumer,
            count: self.count,
        };
        let taken = self.recovery.scan(&scope).await?;
        if !taken.is_empty() {
            return Ok(self.counted(taken).await);
        }
        if let Some(claimer) = &mut self.claimer {
            let claimed = claimer
                .claim(
                    &self.client,
                    &self.key,
                    &self.group,
                    &self.consumer,
                    self.count,
                )
                .await?;
            if !claimed.is_empty() {
                return Ok(self.counted(claimed).await);
            }
        }
        if let Phase::Pending(after) = self.phase {
            let value: Value = self
                .client
                .xreadgroup(
                    self.group.as_str(),
                    self.consumer.as_str(),
                    Some(self.count),
                    None,
                    false,
                    self.key.as_str(),
                    after.to_string(),
                )
                .await?;
            let mut entries = reply::xread(value).map_err(protocol)?;
            match entries.last() {
                None => self.phase = Phase::New,
                Some(last) => {
                    self.phase = Phase::Pending(last.id);
                    // Entries already in hand (taken over from a consumer that went away,
                    // or taken back, before this first pass reached them) are not handed
                    // out twice.
                    entries.retain(|e| !self.held.contains(e.id));
                    return Ok(self.counted(entries).await);
                }
            }
        }
        let mut block = self.block.min(self.recovery.until_due());
        if let Some(claimer) = &self.claimer {
            block = block.min(claimer.until_due());
        }
        let block_ms = u64::try_from(block.as_millis()).unwrap_or(u64::MAX).max(1);
        let options = CommandOptions {
            timeout: Some(block + Duration::from_secs(5)),
            ..CommandOptions::default()
        };
        let value: Value = self
            .client
            .with_options(&options)
            .xreadgroup(
                self.group.as_str(),
                self.consumer.as_str(),
                Some(self.count),
                Some(block_ms),
                false,
                self.key.as_str(),
                ">",
            )
            .await?;
        let entries = reply::xread(value).map_err(protocol)?;
        // New entries: first delivery.
        Ok(self.deliveries(entries, |_| 1))
    }

    /// Deliveries of entries already delivered before: with claiming, each counted by
    /// the server's delivery counter.
    async fn counted(&self, entries: Vec<Entry>) -> Vec<Delivery> {
        if self.claimer.is_none() {
            return self.deliveries(entries, |_| 1);
        }
        let ids: Vec<EntryId> = entries.iter().map(|e| e.id).collect();
        let counts = claiming::delivery_counts(&self.pool, &self.key, &self.group, &ids).await;
        let mut counts = counts.into_iter();
        self.deliveries(entries, |_| counts.next().unwrap_or(1))
    }

    fn deliveries(
        &self,
        entries: Vec<Entry>,
        mut count: impl FnMut(&Entry) -> u32,
    ) -> Vec<Delivery> {
        self.held.hold(entries.iter().map(|e| e.id));
        entries
            .into_iter()
            .map(|e| {
                let n = count(&e);
                self.delivery(e, n)
            })
            .collect()
    }

    /// One delivery; with claiming its attempt is the retry count a copy carries plus
    /// the server's delivery counter `pel_count`: one counter for the original, its
    /// copies and their redeliveries.
    fn delivery(&self, entry: Entry, pel_count: u32) -> Delivery {
        let tag = Tag::Pair(entry.id.0, entry.id.1);
        let (decoded, gone) = match entry.fields {
            Some(fields) => (entry::decode(fields), false),
            None => (entry::decode(Vec::new()), true),
        };
        let copies = decoded.message.headers.retry_count();
        let mut delivery = Delivery::new(
            decoded.message.payload,
            decoded.message.headers,
            self.address.clone(),
            tag,
            self.acker.clone(),
        );
        if self.claimer.is_some() {
            delivery = delivery.with_broker_attempt(copies.saturating_add(pel_count));
        }
        if gone {
            delivery = delivery.with_defect("stream entry was deleted before it was read");
        } else if let Some(defect) = decoded.defect {
            delivery = delivery.with_defect(defect);
        }
        delivery
    }
}

fn protocol(error: reply::BadReply) -> fred::error::Error {
    fred::error::Error::new(fred::error::ErrorKind::Protocol, error.to_string())
}

/// Creates the group (and the stream) if missing; an existing group is fine.
pub(crate) async fn ensure_group(
    pool: &Pool,
    key: &str,
    group: &str,
    start: &str,
) -> Result<(), fred::error::Error> {
    match pool
        .xgroup_create::<Value, _, _, _>(key, group, start, true)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.details().starts_with("BUSYGROUP") => Ok(()),
        Err(e) => Err(e),
    }
}

impl Reader for StreamReader {
    async fn read(&mut self) -> Result<Vec<Delivery>, ConsumeError> {
        match self.read_once().await {
            Ok(batch) => Ok(batch),
            Err(e) if failure::is_nogroup(&e) => {
                // The server lost the group (a restart without persistence, a deleted
                // key): everything in the stream is new to the group.
                tracing::warn!(key = %self.key, group = %self.group, "consumer group missing; recreating it");
                ensure_group(&self.pool, &self.key, &self.group, "0")
                    .await
                    .map_err(|e| consume_error("recreating the consumer group", &e))?;
                Ok(Vec::new())
            }
            Err(e) => {
                // The answer of a read may be lost with its connection while the server
                // counts its entries as delivered to this consumer.
                self.own = Some(None);
                Err(consume_error("reading the stream", &e))
            }
        }
    }
}
