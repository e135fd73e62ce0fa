//! Reading the server's replies to stream commands.

use bytes::Bytes;
use fred::types::Value;

/// A stream entry id, `ms-seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct EntryId(pub(crate) u64, pub(crate) u64);

impl EntryId {
    pub(crate) fn parse(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let (ms, seq) = text.split_once('-')?;
        Some(Self(ms.parse().ok()?, seq.parse().ok()?))
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// One entry of a reply; `fields` is `None` for an entry deleted since it was delivered.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: EntryId,
    pub(crate) fields: Option<Vec<(Bytes, Bytes)>>,
}

/// A reply that is not shaped as expected.
#[derive(Debug, thiserror::Error)]
#[error("unexpected reply: {0}")]
pub(crate) struct BadReply(pub(crate) &'static str);

/// The entries of an `XREADGROUP` on one stream (nil when the block timed out).
pub(crate) fn xread(value: Value) -> Result<Vec<Entry>, BadReply> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(streams) => {
            let mut out = Vec::new();
            for stream in streams {
                let mut pair = array(stream)?;
                if pair.len() != 2 {
                    return Err(BadReply("stream reply is not [key, entries]"));
                }
                out.extend(entries(pair.pop().unwrap_or(Value::Null))?);
            }
            Ok(out)
        }
        Value::Map(map) => {
            let mut out = Vec::new();
            for (_, v) in map.inner() {
                out.extend(entries(v)?);
            }
            Ok(out)
        }
        _ => Err(BadReply("xreadgroup reply is not an array")),
    }
}

/// A list of `[id, [field, value, …]]`.
pub(crate) fn entries(value: Value) -> Result<Vec<Entry>, BadReply> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    array(value)?.into_iter().map(entry).collect()
}

fn entry(value: Value) -> Result<Entry, BadReply> {
    let mut parts = array(value)?.into_iter();
    let id = parts
        .next()
        .and_then(|v| v.as_bytes().and_then(EntryId::parse))
        .ok_or(BadReply("entry id"))?;
    let fields = match parts.next() {
        None | Some(Value::Null) => None,
        Some(Value::Map(map)) => Some(
            map.inner()
                .into_iter()
                .map(|(k, v)| (k.into_bytes(), v.into_bytes().unwrap_or_default()))
                .collect(),
        ),
        Some(v) => {
            let flat = array(v)?;
            let mut pairs = Vec::with_capacity(flat.len() / 2);
            let mut it = flat.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((
                    k.into_bytes().unwrap_or_default(),
                    v.into_bytes().unwrap_or_default(),
                ));
            }
            Some(pairs)
        }
    };
    Ok(Entry { id, fields })
}

/// `XAUTOCLAIM`: the next cursor and the claimed entries (deleted ones left out; the
/// server drops them from the pending list itself).
pub(crate) fn autoclaim(value: Value) -> Result<(String, Vec<Entry>), BadReply> {
    let mut parts = array(value)?.into_iter();
    let cursor = parts
        .next()
        .and_then(|v| v.as_string())
        .ok_or(BadReply("autoclaim cursor"))?;
    let entries = entries(parts.next().unwrap_or(Value::Null))?;
    Ok((cursor, entries))
}

/// The delivery counter from an `XPENDING key group id id 1` reply.
pub(crate) fn pending_count(value: Value) -> Option<u32> {
    let first = array(value).ok()?.into_iter().next()?;
    let count = array(first).ok()?.into_iter().nth(3)?;
    count.as_u64().and_then(|c| u32::try_from(c).ok())
}

fn array(value: Value) -> Result<Vec<Value>, BadReply> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(BadReply("expected an array")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_print() {
        let id = EntryId::parse(b"1700000000000-7").expect("id");
        assert_eq!(id, EntryId(1_700_000_000_000, 7));
        assert_eq!(id.to_string(), "1700000000000-7");
        assert_eq!(EntryId::parse(b"17"), None);
        assert_eq!(EntryId::parse(b"a-b"), None);
    }

    #[test]
    fn xread_reply() {
        let reply = Value::Array(vec![Value::Array(vec![
            Value::from("s"),
            Value::Array(vec![
                Value::Array(vec![
                    Value::from("1-0"),
                    Value::Array(vec![Value::from("_payload"), Value::from("x")]),
                ]),
                Value::Array(vec![Value::from("2-0"), Value::Null]),
            ]),
        ])]);
        let entries = xread(reply).expect("entries");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].id, EntryId(1, 0));
        assert_eq!(entries[0].fields.as_ref().map(Vec::len), Some(1));
        assert!(entries[1].fields.is_none());
        assert!(xread(Value::Null).expect("nil").is_empty());
        assert!(xread(Value::from(1)).is_err());
    }
}
