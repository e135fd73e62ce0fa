//! Browsing and removing what waits at a stream or a list (the dead-letter tools).
//!
//! * **Stream**: `XRANGE key - + COUNT max`, oldest first; the id is the entry id;
//!   removing is `XDEL`. A stream keeps entries its consumer groups have acknowledged, so
//!   every entry it holds is listed, read or not.
//! * **List**: the oldest `max` elements (the right end: producers `LPUSH`, consumers
//!   take from the right), read with one Lua script; the id is the first 16 hex digits
//!   of the element's SHA-1, so it does not change as the list grows or shrinks. A
//!   processing-list wrapping an older version handed back is stripped before the frame
//!   is read. Removing is one Lua script per call that finds each id's element from the
//!   right and `LREM`s exactly one element of those bytes: atomic, so an element a
//!   consumer takes meanwhile is never removed twice nor its neighbour instead.
//!   Byte-identical elements share an id; removing it once removes one of them.
//!
//! A key that does not exist holds nothing. A channel, a pattern or a key of another
//! type is [`InspectError::Unsupported`].

use bytes::Bytes;
use fred::interfaces::{ClientLike, LuaInterface};
use fred::types::{ClusterHash, CustomCommand, Key, Value};
use ruststream_core::{Address, BoxFuture, Inspect, InspectError, Waiting};

use crate::keys::Keys;
use crate::reply::{EntryId, entries};
use crate::routes::real_kind;
use crate::{RedisBroker, entry, form, frame};

/// The oldest `ARGV[1]` elements, oldest first, each as its id and its bytes.
const BROWSE_LIST: &str = r"
local els = redis.call('LRANGE', KEYS[1], -tonumber(ARGV[1]), -1)
local out = {}
for i = #els, 1, -1 do
  out[#out + 1] = string.sub(redis.sha1hex(els[i]), 1, 16)
  out[#out + 1] = els[i]
end
return out
";

/// Removes one element per id in ARGV (found from the right); how many were removed.
const REMOVE_LIST: &str = r"
local els = redis.call('LRANGE', KEYS[1], 0, -1)
local removed = 0
for a = 1, #ARGV do
  for i = #els, 1, -1 do
    local el = els[i]
    if el and string.sub(redis.sha1hex(el), 1, 16) == ARGV[a] then
      removed = removed + redis.call('LREM', KEYS[1], -1, el)
      els[i] = false
      break
    end
  end
end
return removed
";

/// What a key is, for browsing.
enum Kind {
    Stream,
    List,
    Empty,
}

fn broker_error(error: &fred::error::Error) -> InspectError {
    InspectError::Broker(error.to_string())
}

impl RedisBroker {
    async fn kind(&self, address: &Address, keys: &Keys) -> Result<Kind, InspectError> {
        let kind = real_kind(self.pool(), keys)
            .await
            .map_err(|e| broker_error(&e))?;
        match kind.as_str() {
            "stream" => Ok(Kind::Stream),
            "list" => Ok(Kind::List),
            "none" | "marker:list" => Ok(Kind::Empty),
            other => Err(InspectError::Unsupported {
                address: address.to_string(),
                reason: format!(
                    "key {} is a {}: only streams and lists hold messages to browse",
                    keys.main(),
                    other.strip_prefix("marker:").unwrap_or(other)
                ),
            }),
        }
    }

    async fn browse_stream(&self, key: &str, max: usize) -> Result<Vec<Waiting>, InspectError> {
        let args = vec![
            Value::from(key),
            Value::from_static_str("-"),
            Value::from_static_str("+"),
            Value::from_static_str("COUNT"),
            Value::from(max.to_string()),
        ];
        let cmd = CustomCommand::new_static("XRANGE", ClusterHash::FirstKey, false);
        let reply: Value = self
            .pool()
            .custom(cmd, args)
            .await
            .map_err(|e| broker_error(&e))?;
        let found = entries(reply).map_err(|e| InspectError::Broker(e.to_string()))?;
        Ok(found
            .into_iter()
            .map(|e| {
                let decoded = entry::decode(e.fields.unwrap_or_default());
                Waiting {
                    id: e.id.to_string(),
                    message: decoded.message,
                    defect: decoded.defect.map(str::to_owned),
                }
            })
            .collect())
    }

    async fn browse_list(&self, key: &str, max: usize) -> Result<Vec<Waiting>, InspectError> {
        let reply: Value = self
            .pool()
            .next()
            .eval(
                BROWSE_LIST,
                vec![Key::from(key)],
                vec![Value::from(max.to_string())],
            )
            .await
            .map_err(|e| broker_error(&e))?;
        let Value::Array(flat) = reply else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(id), Some(element)) = (it.next(), it.next()) {
            let id = id.as_string().unwrap_or_default();
            let element = element.into_bytes().unwrap_or_default();
            out.push(read_element(id, &element));
        }
        Ok(out)
    }
}

/// A list element as a waiting message: unwrapped if wrapped, then its frame read.
fn read_element(id: String, element: &Bytes) -> Waiting {
    match frame::decode(&form::wrap::unwrap(element)) {
        Ok(message) => Waiting::new(id, message),
        Err(error) => Waiting {
            id,
            message: ruststream_core::Message::new(element.clone()),
            defect: Some(error.to_string()),
        },
    }
}

impl Inspect for RedisBroker {
    fn browse(
        &self,
        address: &Address,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>> {
        let address = address.clone();
        Box::pin(async move {
            let keys = self.keys(address.as_str());
            if max == 0 {
                return Ok(Vec::new());
            }
            match self.kind(&address, &keys).await? {
                Kind::Stream => self.browse_stream(keys.main(), max).await,
                Kind::List => self.browse_list(keys.main(), max).await,
                Kind::Empty => Ok(Vec::new()),
            }
        })
    }

    fn remove<'a>(
        &'a self,
        address: &'a Address,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<usize, InspectError>> {
        Box::pin(async move {
            let keys = self.keys(address.as_str());
            if ids.is_empty() {
                return Ok(0);
            }
            match self.kind(address, &keys).await? {
                Kind::Stream => {
                    let mut args = vec![Value::from(keys.main())];
                    args.extend(
                        ids.iter()
                            .filter(|id| EntryId::parse(id.as_bytes()).is_some())
                            .map(|id| Value::from(id.as_str())),
                    );
                    if args.len() == 1 {
                        return Ok(0);
                    }
                    let cmd = CustomCommand::new_static("XDEL", ClusterHash::FirstKey, false);
                    let removed: Value = self
                        .pool()
                        .custom(cmd, args)
                        .await
                        .map_err(|e| broker_error(&e))?;
                    Ok(removed.as_usize().unwrap_or(0))
                }
                Kind::List => {
                    let args: Vec<Value> = ids.iter().map(|id| Value::from(id.as_str())).collect();
                    let removed: Value = self
                        .pool()
                        .next()
                        .eval(REMOVE_LIST, vec![Key::from(keys.main())], args)
                        .await
                        .map_err(|e| broker_error(&e))?;
                    Ok(removed.as_usize().unwrap_or(0))
                }
                Kind::Empty => Ok(0),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_and_plain_elements_read_alike() {
        let message = ruststream_core::Message::new("body").with_header("k", "v");
        let plain = frame::encode(&message);
        let mut wrapped = b"\xffRSabc-1:0\0".to_vec();
        wrapped.extend_from_slice(&plain);
        for element in [plain, Bytes::from(wrapped)] {
            let waiting = read_element("id".into(), &element);
            assert_eq!(waiting.defect, None);
            assert_eq!(waiting.message, message);
        }
        let broken = read_element("id".into(), &Bytes::from_static(b"\0\0\0\x09x"));
        assert_eq!(broken.defect.as_deref(), Some("truncated frame"));
        assert_eq!(&broken.message.payload[..], b"\0\0\0\x09x");
    }
}
