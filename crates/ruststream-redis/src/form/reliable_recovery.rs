//! Recovery of a reliable list: heartbeats, and processing lists handed back.
//!
//! Each consumer keeps a heartbeat key (`{list}:alive:<consumer>`, refreshed every third
//! of its time to live) and is listed in `{list}:consumers`. Every consumer periodically
//! reads that set, then for each other listed consumer runs one Lua script that — if the
//! consumer's heartbeat expired — hands its processing list back to the right end of the
//! list (oldest first, so they are read next, unwrapped) and unlists it. The script is
//! atomic (an entry is in exactly one list at any time) and names every key it touches in
//! `KEYS`, all under the list's hash tag, so it runs on a Redis Cluster too. A consumer
//! that beat again between the read of the set and the script is left alone; two
//! consumers recovering the same dead one move each entry once. A consumer restarted
//! under the same name hands its own processing list back before reading.

use std::time::Duration;

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::{KeysInterface, LuaInterface, SetsInterface};
use fred::types::{Expiration, Key, Value};
use tokio::task::JoinHandle;

use crate::keys::Keys;

/// Hands processing list `KEYS[2]` of consumer `ARGV[1]` back to the right end of list
/// `KEYS[1]`, oldest entry rightmost, unwrapped, and forgets its last take `KEYS[5]`.
/// Unless `ARGV[2]` is 1 (a consumer's own list), only if its heartbeat `KEYS[4]`
/// expired, and then it is unlisted from `KEYS[3]` too.
const HAND_BACK: &str = concat!(
    lua_unwrap!(),
    r"
if ARGV[2] ~= '1' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
  redis.call('SREM', KEYS[3], ARGV[1])
end
redis.call('DEL', KEYS[5])
local moved = 0
while true do
  local w = redis.call('LPOP', KEYS[2])
  if not w then break end
  redis.call('RPUSH', KEYS[1], unwrap(w))
  moved = moved + 1
end
return moved
"
);

/// One consumer of a reliable list.
#[derive(Clone)]
pub(crate) struct Consumer {
    pub(crate) pool: Pool,
    pub(crate) keys: Keys,
    pub(crate) name: String,
    pub(crate) heartbeat: Duration,
}

impl Consumer {
    /// This consumer's processing list.
    pub(crate) fn processing(&self) -> String {
        format!("{}{}", self.keys.processing_prefix(), self.name)
    }

    /// The key recording this consumer's last take.
    pub(crate) fn last_take(&self) -> String {
        format!("{}{}", self.keys.take_prefix(), self.name)
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
            derived(self.keys.take_prefix()),
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
