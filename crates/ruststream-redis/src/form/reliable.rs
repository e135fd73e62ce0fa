//! The reliable list form: entries move into this consumer's processing list, each
//! wrapped with an id of its own ([`wrap`](super::wrap)), and leave it on settlement
//! (`LREM`).
//!
//! A take is one Lua script (the right end of the list to the left end of the processing
//! list, up to the batch size) with a take id; it records the id and how many it moved.
//! A take the client replays after a reconnect (its answer lost), or sends again after a
//! read error, carries the same id and answers the elements the first one moved instead
//! of moving more: nothing is stranded in the processing list while the consumer runs.
//! When the list is empty the reader waits with `BLMOVE list list RIGHT RIGHT`, which
//! moves nothing (the last element goes back where it was): a replay or a cancelled wait
//! changes nothing.
//!
//! When the subscription is dropped, a take in flight is finished and what it took is
//! handed back, then the deliveries read but not handed out are (see
//! [`handback`](super::handback)).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use fred::clients::{Client, Pool};
use fred::interfaces::{ClientLike, LuaInterface};
use fred::types::config::Options as CommandOptions;
use fred::types::{ClusterHash, CustomCommand, Key, Value};
use ruststream_core::{Address, BoxFuture, ConsumeError, Delivery, Tag};

use super::handback::{HandBack, Tracker, spawn_tracked};
use super::list::{elements, from_frame};
use super::reliable_acker::ReliableAcker;
use super::reliable_recovery::{AbortOnDrop, Consumer};
use super::{Reader, consume_error, wrap};
use crate::keys::{Keys, default_consumer};
use crate::options::ReliableList;
use crate::routes::mark;

/// Moves up to `ARGV[2]` entries from the right of `KEYS[1]` to the left of `KEYS[2]`,
/// wrapped with take id `ARGV[1]`, and records the take in `KEYS[3]` (expiring after
/// `ARGV[3]` ms). If the last take recorded has this id, it answers that take's
/// elements (oldest first) and moves nothing.
const TAKE: &str = r"
local last = redis.call('GET', KEYS[3])
if last then
  local n, id = string.match(last, '^(%d+) (.*)$')
  if id == ARGV[1] then
    local prefix = '\255RS' .. ARGV[1] .. ':'
    local held = redis.call('LRANGE', KEYS[2], 0, tonumber(n) - 1)
    local out = {}
    for i = #held, 1, -1 do
      if string.sub(held[i], 1, #prefix) == prefix then out[#out + 1] = held[i] end
    end
    return out
  end
end
local out = {}
for i = 1, tonumber(ARGV[2]) do
  local e = redis.call('RPOP', KEYS[1])
  if not e then break end
  local w = '\255RS' .. ARGV[1] .. ':' .. i .. '\0' .. e
  redis.call('LPUSH', KEYS[2], w)
  out[#out + 1] = w
end
if #out > 0 then
  redis.call('SET', KEYS[3], #out .. ' ' .. ARGV[1], 'PX', ARGV[3])
end
return out
";

/// How long a take is remembered for a replay: longer than any reconnection.
const TAKE_MEMORY: Duration = Duration::from_secs(3600);

/// A take-id prefix unique per subscription: process, time, counter.
fn take_nonce() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}.{nanos:x}.{n}", std::process::id())
}

type Take = BoxFuture<'static, Result<Value, fred::error::Error>>;

/// Reads a reliable list.
pub(crate) struct ReliableReader {
    /// The reading connection's client.
    pub(crate) client: Client,
    /// Closes that connection when dropped: kept until a take in flight is answered.
    pub(crate) connection: Option<crate::client::Reader>,
    pub(crate) address: Address,
    /// The list, the processing list, the last-take key.
    pub(crate) keys: [Key; 3],
    pub(crate) block: Duration,
    pub(crate) count: usize,
    pub(crate) acker: Arc<ReliableAcker>,
    pub(crate) hand_back: Arc<HandBack>,
    pub(crate) tracker: Arc<Tracker>,
    /// Unique per subscription; a take id is `nonce-n`.
    pub(crate) nonce: String,
    /// The `n` of the next take id: advanced only once a take's answer is read.
    pub(crate) next_take: u64,
    /// The take sent and not answered yet (kept when a read is cancelled).
    pub(crate) in_flight: Option<Take>,
    /// The wait just saw an element arrive on an empty list: the next take takes that
    /// one alone, as a blocking pop would have (what arrives next is the next batch).
    pub(crate) woken: bool,
    pub(crate) _heartbeat: AbortOnDrop,
}

impl ReliableReader {
    /// Opens the reader of a consumer of list `keys` with `options`: leaves the list's
    /// kind marker, hands back this consumer's own processing list (a restart under the
    /// same name), beats, hands back dead consumers' lists, starts the heartbeat.
    pub(crate) async fn open(
        pool: Pool,
        connection: crate::client::Reader,
        keys: Keys,
        address: Address,
        options: ReliableList,
        count: usize,
        tracker: Arc<Tracker>,
    ) -> Result<Self, fred::error::Error> {
        let consumer = Consumer {
            pool: pool.clone(),
            keys: keys.clone(),
            name: options.consumer.unwrap_or_else(default_consumer),
            heartbeat: options.heartbeat,
        };
        mark(&pool, &keys, "list").await;
        consumer.recover(true).await?;
        consumer.beat().await?;
        consumer.recover(false).await?;
        let processing = consumer.processing();
        let hand_back = Arc::new(HandBack::new(
            pool.clone(),
            keys.main(),
            &processing,
            tracker.clone(),
        ));
        let acker = Arc::new(ReliableAcker {
            pool,
            processing: processing.as_str().into(),
            hand_back: hand_back.clone(),
        });
        Ok(Self {
            client: (*connection).clone(),
            connection: Some(connection),
            address,
            keys: [
                keys.main().into(),
                processing.as_str().into(),
                consumer.last_take().into(),
            ],
            block: options.block,
            count,
            acker,
            hand_back,
            tracker,
            nonce: take_nonce(),
            next_take: 0,
            in_flight: None,
            woken: false,
            _heartbeat: AbortOnDrop(consumer.spawn_heartbeat()),
        })
    }

    fn take(&self) -> Take {
        let client = self.client.clone();
        let keys = self.keys.to_vec();
        let args = vec![
            Value::from(format!("{}-{}", self.nonce, self.next_take)),
            Value::from(if self.woken { 1 } else { self.count }.to_string()),
            Value::from(TAKE_MEMORY.as_millis().to_string()),
        ];
        Box::pin(async move { client.eval(TAKE, keys, args).await })
    }

    /// Waits until the list has an element, without moving it; whether one came.
    async fn wait(&mut self) -> Result<bool, fred::error::Error> {
        let options = CommandOptions {
            timeout: Some(self.block + Duration::from_secs(5)),
            ..CommandOptions::default()
        };
        // A custom command: the client's `blmove` turns the nil reply of a block that
        // timed out into an error.
        let blmove = CustomCommand::new_static("BLMOVE", ClusterHash::FirstKey, true);
        let list = Value::from(self.keys[0].clone());
        let args = vec![
            list.clone(),
            list,
            Value::from_static_str("RIGHT"),
            Value::from_static_str("RIGHT"),
            Value::from(format!("{:.3}", self.block.as_secs_f64().max(0.01))),
        ];
        self.client
            .with_options(&options)
            .custom::<Value, _>(blmove, args)
            .await
            .map(|element| !element.is_null())
    }

    async fn read_once(&mut self) -> Result<Vec<Delivery>, fred::error::Error> {
        if self.in_flight.is_none() {
            self.in_flight = Some(self.take());
        }
        let taken = match self.in_flight.as_mut() {
            Some(take) => take.await,
            None => return Ok(Vec::new()),
        };
        self.in_flight = None;
        let taken = elements(taken?);
        self.next_take += 1;
        self.woken = false;
        if taken.is_empty() {
            self.woken = self.wait().await?;
        }
        Ok(taken
            .into_iter()
            .map(|wrapped: Bytes| {
                let element = wrap::unwrap(&wrapped);
                from_frame(
                    element,
                    &self.address,
                    Tag::Bytes(wrapped),
                    self.acker.clone(),
                )
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

    /// Finishes a take in flight and hands back what it took (the newest entries), then
    /// hands back `unread` (dropped newest first: each is abandoned).
    fn stop(&mut self, unread: &mut VecDeque<Delivery>) {
        let Some(take) = self.in_flight.take() else {
            return;
        };
        let unread: Vec<Delivery> = unread.drain(..).collect();
        let hand_back = self.hand_back.clone();
        let connection = self.connection.take();
        spawn_tracked(&self.tracker, async move {
            match take.await {
                Ok(taken) => {
                    for wrapped in elements(taken).into_iter().rev() {
                        hand_back.give(wrapped);
                    }
                }
                Err(error) => {
                    // What it took stays in the processing list: handed back when this
                    // consumer's heartbeat expires.
                    tracing::warn!(%error, "redis take in flight at stop failed");
                }
            }
            drop(connection);
            for delivery in unread.into_iter().rev() {
                drop(delivery);
            }
        });
    }
}
