//! Claiming: taking back entries pending for at least `min_idle` (`XAUTOCLAIM`), and the
//! server's delivery counter of each.

use std::time::{Duration, Instant};

use fred::clients::{Client, Pool};
use fred::interfaces::StreamsInterface;
use fred::types::Value;

use crate::reply::{self, Entry, EntryId};

/// The claiming state of one subscription: where the scan of the pending list is, and
/// when the next scan starts.
#[derive(Debug)]
pub(crate) struct Claimer {
    pub(crate) min_idle: Duration,
    cursor: String,
    next_scan: Instant,
}

impl Claimer {
    pub(crate) fn new(min_idle: Duration) -> Self {
        Self {
            min_idle,
            cursor: "0-0".to_owned(),
            next_scan: Instant::now(),
        }
    }

    /// How long until the next scan is due (zero when it is).
    pub(crate) fn until_due(&self) -> Duration {
        self.next_scan.saturating_duration_since(Instant::now())
    }

    /// Claims the next batch of idle entries if a scan is due; empty otherwise.
    pub(crate) async fn claim(
        &mut self,
        client: &Client,
        key: &str,
        group: &str,
        consumer: &str,
        count: u64,
    ) -> Result<Vec<Entry>, fred::error::Error> {
        if !self.until_due().is_zero() {
            return Ok(Vec::new());
        }
        let min_idle = u64::try_from(self.min_idle.as_millis()).unwrap_or(u64::MAX);
        let value: Value = client
            .xautoclaim(
                key,
                group,
                consumer,
                min_idle,
                self.cursor.as_str(),
                Some(count),
                false,
            )
            .await?;
        let (cursor, entries) = reply::autoclaim(value).map_err(|e| {
            fred::error::Error::new(fred::error::ErrorKind::Protocol, e.to_string())
        })?;
        if cursor == "0-0" {
            // A full pass is done: the next one when anything new could have gone idle.
            let pause =
                (self.min_idle / 2).clamp(Duration::from_millis(10), Duration::from_secs(5));
            self.next_scan = Instant::now() + pause;
        }
        self.cursor = cursor;
        Ok(entries)
    }
}

/// The server's delivery counter of each of `ids` (in this group's pending list), 1 where
/// it cannot be read.
pub(crate) async fn delivery_counts(
    pool: &Pool,
    key: &str,
    group: &str,
    ids: &[EntryId],
) -> Vec<u32> {
    let queries = ids.iter().map(|id| {
        let id = id.to_string();
        async move {
            pool.xpending::<Value, _, _, _>(key, group, (id.as_str(), id.as_str(), 1))
                .await
                .ok()
                .and_then(reply::pending_count)
                .unwrap_or(1)
        }
    });
    futures_util::future::join_all(queries).await
}
