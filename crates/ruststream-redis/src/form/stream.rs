//! The stream forms: a consumer group read with `XREADGROUP`, optionally claiming idle
//! pending entries and moving due copies back from a durable delay queue.

use std::sync::Arc;
use std::time::Duration;

use fred::clients::Pool;
use fred::interfaces::ClientLike;
use fred::interfaces::StreamsInterface;
use fred::types::Value;
use fred::types::config::Options as CommandOptions;
use ruststream_core::{Acker, Address, ConsumeError, Delivery, Tag};

use super::claiming::{self, Claimer};
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
    phase: Phase,
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
    ) -> Self {
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
            // A (re)started consumer first re-reads its own pending entries.
            phase: Phase::Pending(EntryId(0, 0)),
        }
    }

    async fn read_once(&mut self) -> Result<Vec<Delivery>, fred::error::Error> {
        if let Some(zset) = &self.delayed {
            delayed::move_due(&self.pool, &self.key, zset, delayed::MOVE_LIMIT).await?;
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
            let entries = reply::xread(value).map_err(protocol)?;
            match entries.last() {
                None => self.phase = Phase::New,
                Some(last) => {
                    self.phase = Phase::Pending(last.id);
                    return Ok(if self.claimer.is_some() {
                        self.counted(entries).await
                    } else {
                        self.uncounted(entries)
                    });
                }
            }
        }
        let mut block = self.block;
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
        Ok(if self.claimer.is_some() {
            // New entries: first delivery.
            entries
                .into_iter()
                .map(|e| self.delivery(e, Some(1)))
                .collect()
        } else {
            self.uncounted(entries)
        })
    }

    async fn counted(&self, entries: Vec<Entry>) -> Vec<Delivery> {
        let ids: Vec<EntryId> = entries.iter().map(|e| e.id).collect();
        let counts = claiming::delivery_counts(&self.pool, &self.key, &self.group, &ids).await;
        entries
            .into_iter()
            .zip(counts)
            .map(|(e, n)| self.delivery(e, Some(n)))
            .collect()
    }

    fn uncounted(&self, entries: Vec<Entry>) -> Vec<Delivery> {
        entries
            .into_iter()
            .map(|e| self.delivery(e, None))
            .collect()
    }

    fn delivery(&self, entry: Entry, attempt: Option<u32>) -> Delivery {
        let tag = Tag::Pair(entry.id.0, entry.id.1);
        let (decoded, gone) = match entry.fields {
            Some(fields) => (entry::decode(fields), false),
            None => (entry::decode(Vec::new()), true),
        };
        let mut delivery = Delivery::new(
            decoded.message.payload,
            decoded.message.headers,
            self.address.clone(),
            tag,
            self.acker.clone(),
        );
        if let Some(attempt) = attempt {
            delivery = delivery.with_broker_attempt(attempt);
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
            Err(e) => Err(consume_error("reading the stream", &e)),
        }
    }
}
