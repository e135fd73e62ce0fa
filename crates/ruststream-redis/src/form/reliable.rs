//! The reliable list form: entries move (`BLMOVE`) into this consumer's processing list
//! and leave it on settlement (`LREM`).
//!
//! Recovery: each consumer keeps a heartbeat key (`{list}:alive:<consumer>`, refreshed
//! every third of its time to live) and is listed in `{list}:consumers`. Every consumer
//! periodically reads that set, then for each other listed consumer runs one Lua script
//! that — if the consumer's heartbeat expired — hands its processing list back to the
//! right end of the list (oldest first, so they are read next) and unlists it. The script
//! is atomic (an entry is in exactly one list at any time) and names every key it touches
//! in `KEYS`, all under the list's hash tag, so it runs on a Redis Cluster too. A consumer
//! that beat again between the read of the set and the script is left alone; two
//! consumers recovering the same dead one move each entry once. A consumer restarted under
//! the same name hands its own processing list back before reading.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::{ClientLike, KeysInterface, LuaInterface, SetsInterface};
use fred::types::config::Options as CommandOptions;
use fred::types::{ClusterHash, CustomCommand, Expiration, Key, Value};
use ruststream_core::{Acker, Address, ConsumeError, Delivery, Tag};
use tokio::task::JoinHandle;

use super::list::{elements, from_frame};
use super::{Reader, consume_error};
use crate::keys::Keys;

/// Moves up to `ARGV[1]` entries from the right of `KEYS[1]` to the left of `KEYS[2]`.
const TAKE: &str = r"
local out = {}
for _ = 1, tonumber(ARGV[1]) do
  local e = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not e then break end
  out[#out + 1] = e
end
return out
";

/// Hands processing list `KEYS[2]` of consumer `ARGV[1]` back to the right end of list
/// `KEYS[1]`, oldest entry rightmost. Unless `ARGV[2]` is 1 (a consumer's own list), only
/// if its heartbeat `KEYS[4]` expired, and then it is unlisted from `KEYS[3]` too.
const HAND_BACK: &str = r"
if ARGV[2] ~= '1' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
  redis.call('SREM', KEYS[3], ARGV[1])
end
local moved = 0
while redis.call('LMOVE', KEYS[2], KEYS[1], 'LEFT', 'RIGHT') do moved = moved + 1 end
return moved
";

/// One consumer of a reliable list.
#[derive(Clone)]
pub(crate) struct Consumer {
    pub(crate) pool: Pool,
    pub(crate) keys: Keys,
    pub(crate) name: String,
    pub(crate) heartbeat: Duration,
}

impl Consumer {
    pub(crate) fn processing(&self) -> String {
        format!("{}{}", self.keys.processing_prefix(), self.name)
    }

    /// Hands back stranded entries: dead consumers' and, with `own`, this one's.
    pub(crate) async fn recover(&self, own: bool) -> Result<u64, fred::error::Error> {
        let mut moved = 0;
        if own {
            moved += self.hand_back(self.name.as_bytes(), true).await?;
        }
        let listed: Vec<Value> = self.pool.smembers(self.keys.consumers()).await?;
        for consumer in listed.into_iter().filter_map(Value::into_bytes) {
            if consumer != self.name.as_bytes() {
                moved += self.hand_back(&consumer, false).await?;
            }
        }
        Ok(moved)
    }

    /// Runs [`HAND_BACK`] for `consumer`: unconditionally with `own`, else only if its
    /// heartbeat expired.
    async fn hand_back(&self, consumer: &[u8], own: bool) -> Result<u64, fred::error::Error> {
        let derived = |prefix: String| {
            let mut key = prefix.into_bytes();
            key.extend_from_slice(consumer);
            Key::from(Bytes::from(key))
        };
        let keys = vec![
            Key::from(self.keys.main()),
            derived(self.keys.processing_prefix()),
            Key::from(self.keys.consumers()),
            derived(self.keys.alive_prefix()),
        ];
        let args = vec![
            Value::Bytes(Bytes::copy_from_slice(consumer)),
            Value::from_static_str(if own { "1" } else { "0" }),
        ];
        let moved: Value = self.pool.next().eval(HAND_BACK, keys, args).await?;
        Ok(moved.as_u64().unwrap_or(0))
    }

    /// Lists this consumer and refreshes its heartbeat.
    pub(crate) async fn beat(&self) -> Result<(), fred::error::Error> {
        let ttl = i64::try_from(self.heartbeat.as_millis()).unwrap_or(i64::MAX);
        self.pool
            .sadd::<Value, _, _>(self.keys.consumers(), self.name.as_str())
            .await?;
        self.pool
            .set::<Value, _, _>(
                format!("{}{}", self.keys.alive_prefix(), self.name),
                1,
                Some(Expiration::PX(ttl)),
                None,
                false,
            )
            .await?;
        Ok(())
    }

    /// Beats every third of the heartbeat and recovers dead consumers' entries every
    /// heartbeat, until aborted.
    pub(crate) fn spawn_heartbeat(self) -> JoinHandle<()> {
        tokio::spawn(async move {
            let period = self.heartbeat / 3;
            let mut beats = 0u32;
            loop {
                tokio::time::sleep(period).await;
                if let Err(error) = self.beat().await {
                    tracing::warn!(%error, consumer = %self.name, "redis heartbeat failed");
                }
                beats += 1;
                if beats.is_multiple_of(3) {
                    match self.recover(false).await {
                        Ok(0) => {}
                        Ok(n) => {
                            tracing::info!(n, list = %self.keys.main(), "recovered stranded entries")
                        }
                        Err(error) => tracing::warn!(%error, "redis recovery failed"),
                    }
                }
            }
        })
    }
}

/// Aborts a task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads a reliable list.
pub(crate) struct ReliableReader {
    pub(crate) client: crate::client::Reader,
    pub(crate) address: Address,
    pub(crate) key: String,
    pub(crate) processing: String,
    pub(crate) block: Duration,
    pub(crate) count: usize,
    pub(crate) acker: Arc<dyn Acker>,
    pub(crate) _heartbeat: AbortOnDrop,
}

impl ReliableReader {
    async fn read_once(&self) -> Result<Vec<Delivery>, fred::error::Error> {
        let keys = vec![self.key.clone(), self.processing.clone()];
        let taken: Value = self
            .client
            .eval(TAKE, keys, vec![self.count.to_string()])
            .await?;
        let mut elements = elements(taken);
        if elements.is_empty() {
            let options = CommandOptions {
                timeout: Some(self.block + Duration::from_secs(5)),
                ..CommandOptions::default()
            };
            // A custom command: the client's `blmove` turns the nil reply of a block that
            // timed out into an error.
            let blmove = CustomCommand::new_static("BLMOVE", ClusterHash::FirstKey, true);
            let args = vec![
                Value::from(self.key.as_str()),
                Value::from(self.processing.as_str()),
                Value::from_static_str("RIGHT"),
                Value::from_static_str("LEFT"),
                Value::from(format!("{:.3}", self.block.as_secs_f64().max(0.01))),
            ];
            let moved: Value = self
                .client
                .with_options(&options)
                .custom(blmove, args)
                .await?;
            elements = moved.into_bytes().into_iter().collect();
        }
        Ok(elements
            .into_iter()
            .map(|element: Bytes| {
                let tag = Tag::Bytes(element.clone());
                from_frame(element, &self.address, tag, self.acker.clone())
            })
            .collect())
    }
}

impl Reader for ReliableReader {
    async fn read(&mut self) -> Result<Vec<Delivery>, ConsumeError> {
        self.read_once()
            .await
            .map_err(|e| consume_error("reading the reliable list", &e))
    }
}
