//! The durable delay queue of a stream: a sorted set of copies scored by due time.
//!
//! A member is the original entry's id, a newline and the copy as a list frame, so the
//! member is unique per original (parking the same delivery twice after a crash keeps one
//! copy). Moving due copies back is one Lua script: atomic, so two consumers never move
//! one copy twice and a killed client never loses one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use fred::clients::Pool;
use fred::interfaces::{LuaInterface, SortedSetsInterface};
use fred::types::Value;
use ruststream_core::{Message, RETRY_COUNT};

use crate::frame;
use crate::reply::EntryId;

/// At most this many copies move back per read.
pub(crate) const MOVE_LIMIT: u32 = 128;

/// Moves due members of `KEYS[2]` into stream `KEYS[1]` (`ARGV[1]`: now in ms,
/// `ARGV[2]`: limit). A member that is not a well-formed frame goes back as an entry
/// without `_payload` (field `_raw`), so the decode policy sees it and nothing is lost.
const MOVE: &str = r#"
local function u32(s, i)
  if i + 3 > #s then return nil end
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function fields_of(m)
  local nl = string.find(m, '\n', 1, true)
  if not nl then return nil end
  local p = nl + 1
  local n = u32(m, p)
  if not n then return nil end
  p = p + 4
  local f = {'_payload', ''}
  for _ = 1, n do
    local nlen = u32(m, p)
    if not nlen then return nil end
    p = p + 4
    local name = string.sub(m, p, p + nlen - 1)
    p = p + nlen
    local vlen = u32(m, p)
    if not vlen or p + 4 + vlen - 1 > #m then return nil end
    p = p + 4
    f[#f + 1] = 'h:' .. name
    f[#f + 1] = string.sub(m, p, p + vlen - 1)
    p = p + vlen
  end
  f[2] = string.sub(m, p)
  return f
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  local f = fields_of(m)
  if f then
    redis.call('XADD', KEYS[1], '*', unpack(f))
  else
    redis.call('XADD', KEYS[1], '*', '_raw', m)
  end
  redis.call('ZREM', KEYS[2], m)
end
return #due
"#;

/// Milliseconds since the epoch, by the system clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The zset member for a copy of entry `id`: its retry count is one more than the
/// original's.
pub(crate) fn member(id: EntryId, message: &Message) -> Bytes {
    let mut copy = message.clone();
    let count = copy.headers.retry_count().saturating_add(1);
    copy.headers.insert(RETRY_COUNT, count);
    let frame = frame::encode(&copy);
    let id = id.to_string();
    let mut out = BytesMut::with_capacity(id.len() + 1 + frame.len());
    out.put_slice(id.as_bytes());
    out.put_u8(b'\n');
    out.put_slice(&frame);
    out.freeze()
}

/// Adds the copy, due in `delay`, to the delay queue.
pub(crate) async fn park(
    pool: &Pool,
    zset: &str,
    id: EntryId,
    message: &Message,
    delay: Duration,
) -> Result<(), fred::error::Error> {
    let due = now_ms().saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
    // Scores are doubles: exact for any millisecond time for the next 280 000 years.
    #[allow(clippy::cast_precision_loss)]
    let score = due as f64;
    let member = Value::Bytes(member(id, message));
    pool.zadd::<Value, _, _>(zset, None, None, false, false, vec![(score, member)])
        .await
        .map(drop)
}

/// Moves up to `limit` due copies from `zset` back into `stream`; returns how many moved.
pub(crate) async fn move_due(
    pool: &Pool,
    stream: &str,
    zset: &str,
    limit: u32,
) -> Result<u64, fred::error::Error> {
    let args: Vec<Value> = vec![
        Value::from(now_ms().to_string()),
        Value::from(i64::from(limit)),
    ];
    let moved: Value = pool
        .next()
        .eval(MOVE, vec![stream.to_owned(), zset.to_owned()], args)
        .await?;
    Ok(moved.as_u64().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_counts_one_more_retry_and_keeps_one_header() {
        // As decoded from the wire: a name that is not a static string.
        let mut message = Message::new(&b"p"[..]);
        message.headers.append(RETRY_COUNT.to_owned(), "2");
        let m = member(EntryId(5, 1), &message);
        let (id, frame) = m.split_at(4);
        assert_eq!(id, b"5-1\n");
        let copy = frame::decode(&Bytes::copy_from_slice(frame)).expect("frame");
        assert_eq!(copy.headers.len(), 1);
        assert_eq!(copy.headers.retry_count(), 3);
        assert_eq!(&copy.payload[..], b"p");
    }
}
