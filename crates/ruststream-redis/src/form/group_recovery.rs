//! Taking back what nobody will settle: the pending entries of dead consumers (no alive
//! key, see [`super::lease`]), and the entries of this consumer's own pending list that
//! are not in hand ([`super::held`]).
//!
//! Every `heartbeat / 2` a subscription lists the group's consumers (`XINFO CONSUMERS`)
//! and runs [`TAKE_OVER`] for each other consumer: atomically, if its alive key is gone,
//! it claims up to a batch of its pending entries for this consumer (`XCLAIM`, which
//! counts a delivery), or deletes it from the group once it has none (`XGROUP
//! DELCONSUMER`). The script names both keys it touches, under the stream's hash tag, so
//! it runs on a Redis Cluster too. A consumer that beat again since the listing is left
//! alone.

use std::time::{Duration, Instant};

use fred::clients::Pool;
use fred::interfaces::{ClientLike, LuaInterface, StreamsInterface};
use fred::types::{ClusterHash, CustomCommand, Value};

use super::held::Held;
use crate::reply::{self, BadReply, Entry, EntryId};

/// `KEYS[1]` stream, `KEYS[2]` the other consumer's alive key; `ARGV`: group, that
/// consumer, this consumer, batch size. Returns `{0}` (alive), `{1}` (deleted, it had
/// nothing pending) or `{2, entries}` (claimed).
const TAKE_OVER: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return {0} end
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', tonumber(ARGV[4]), ARGV[2])
if #pending == 0 then
  redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
  return {1}
end
local ids = {}
for i, p in ipairs(pending) do ids[i] = p[1] end
return {2, redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, unpack(ids))}
";

/// When the next scan for dead consumers is due.
#[derive(Debug)]
pub(crate) struct Recovery {
    pub(crate) alive_prefix: String,
    every: Duration,
    next: Instant,
}

/// What one subscription scans for.
pub(crate) struct Scope<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) stream: &'a str,
    pub(crate) group: &'a str,
    pub(crate) consumer: &'a str,
    pub(crate) count: u64,
}

impl Recovery {
    /// Scans every `heartbeat / 2`, the first time at once.
    pub(crate) fn new(alive_prefix: String, heartbeat: Duration) -> Self {
        Self {
            alive_prefix,
            every: heartbeat / 2,
            next: Instant::now(),
        }
    }

    /// How long until the next scan is due.
    pub(crate) fn until_due(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// If a scan is due: the entries claimed from the first dead consumer that had any
    /// (the next read scans on), else nothing until the next scan.
    pub(crate) async fn scan(&mut self, s: &Scope<'_>) -> Result<Vec<Entry>, fred::error::Error> {
        if !self.until_due().is_zero() {
            return Ok(Vec::new());
        }
        let listed: Value = s.pool.xinfo_consumers(s.stream, s.group).await?;
        for name in consumer_names(listed) {
            if name == s.consumer {
                continue;
            }
            let keys = vec![s.stream.to_owned(), format!("{}{name}", self.alive_prefix)];
            let args = vec![
                Value::from(s.group),
                Value::from(name.as_str()),
                Value::from(s.consumer),
                Value::from(s.count.to_string()),
            ];
            let reply: Value = s.pool.next().eval(TAKE_OVER, keys, args).await?;
            let mut parts = reply.into_array().into_iter();
            match parts.next().and_then(|v| v.as_u64()) {
                Some(1) => tracing::info!(
                    stream = %s.stream, group = %s.group, consumer = %name,
                    "removed a dead consumer with nothing pending from the group"
                ),
                Some(2) => {
                    let entries =
                        reply::entries(parts.next().unwrap_or(Value::Null)).map_err(protocol)?;
                    tracing::warn!(
                        stream = %s.stream, group = %s.group, from = %name, consumer = %s.consumer,
                        n = entries.len(),
                        "took over pending entries of a dead consumer"
                    );
                    if !entries.is_empty() {
                        return Ok(entries);
                    }
                }
                _ => {}
            }
        }
        self.next = Instant::now() + self.every;
        Ok(Vec::new())
    }
}

/// The names in an `XINFO CONSUMERS` reply (RESP2 flat arrays or RESP3 maps).
fn consumer_names(value: Value) -> Vec<String> {
    value
        .into_array()
        .into_iter()
        .filter_map(|consumer| match consumer {
            Value::Map(map) => map
                .inner()
                .into_iter()
                .find(|(k, _)| k.as_str() == Some("name"))
                .and_then(|(_, v)| v.into_string()),
            Value::Array(flat) => {
                let mut it = flat.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    if k.as_str().as_deref() == Some("name") {
                        return v.into_string();
                    }
                }
                None
            }
            _ => None,
        })
        .collect()
}

/// Takes back this consumer's own pending entries that are not in hand, from `after`
/// on: the claimed entries (their delivery counted) and where to go on, `None` at the
/// end of the pending list.
pub(crate) async fn own(
    s: &Scope<'_>,
    held: &Held,
    mut after: Option<EntryId>,
) -> Result<(Vec<Entry>, Option<EntryId>), fred::error::Error> {
    loop {
        let start = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
        let page: Value = s
            .pool
            .custom(
                CustomCommand::new_static("XPENDING", ClusterHash::FirstKey, false),
                vec![
                    Value::from(s.stream),
                    Value::from(s.group),
                    Value::from(start),
                    Value::from_static_str("+"),
                    Value::from(s.count.to_string()),
                    Value::from(s.consumer),
                ],
            )
            .await?;
        let ids: Vec<EntryId> = page
            .into_array()
            .into_iter()
            .filter_map(|p| p.into_array().into_iter().next())
            .filter_map(|id| id.as_bytes().and_then(EntryId::parse))
            .collect();
        let Some(&last) = ids.last() else {
            return Ok((Vec::new(), None));
        };
        let full = ids.len() as u64 >= s.count;
        after = full.then_some(last);
        let stranded: Vec<Value> = ids
            .into_iter()
            .filter(|id| !held.contains(*id))
            .map(|id| Value::from(id.to_string()))
            .collect();
        if !stranded.is_empty() {
            let mut args = vec![
                Value::from(s.stream),
                Value::from(s.group),
                Value::from(s.consumer),
                Value::from(0),
            ];
            args.extend(stranded);
            let claimed: Value = s
                .pool
                .custom(
                    CustomCommand::new_static("XCLAIM", ClusterHash::FirstKey, false),
                    args,
                )
                .await?;
            let entries = reply::entries(claimed).map_err(protocol)?;
            if !entries.is_empty() {
                return Ok((entries, after));
            }
        }
        if after.is_none() {
            return Ok((Vec::new(), None));
        }
    }
}

fn protocol(error: BadReply) -> fred::error::Error {
    fred::error::Error::new(fred::error::ErrorKind::Protocol, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_either_protocol() {
        let resp2 = Value::Array(vec![Value::Array(vec![
            Value::from("name"),
            Value::from("a"),
            Value::from("pending"),
            Value::from(1),
        ])]);
        assert_eq!(consumer_names(resp2), ["a"]);
        let mut map = fred::types::Map::new();
        map.insert("pending".into(), Value::from(0));
        map.insert("name".into(), Value::from("b"));
        assert_eq!(consumer_names(Value::Array(vec![Value::Map(map)])), ["b"]);
    }
}
