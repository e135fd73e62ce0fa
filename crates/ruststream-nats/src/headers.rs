//! Headers between ruststream and NATS, and the deduplication id of a publish.

use std::str::FromStr;

use async_nats::HeaderMap;
use ruststream_core::{
    DEAD_LETTER_ATTEMPT, HeaderName, HeaderValue, Headers, MESSAGE_ID, REPLAYED_AT, RETRY_COUNT,
};

/// The JetStream header naming a message for the stream's duplicate window.
pub const MSG_ID: &str = "Nats-Msg-Id";

/// The headers of a received message.
pub(crate) fn from_nats(headers: Option<&HeaderMap>) -> Headers {
    let mut out = Headers::new();
    for (name, values) in headers.into_iter().flat_map(HeaderMap::iter) {
        let name: &str = name.as_ref();
        for value in values {
            out.append(
                HeaderName::from(name.to_owned()),
                HeaderValue::from(value.as_str().to_owned()),
            );
        }
    }
    out
}

/// The headers to publish: every header (NATS carries text only: a value that is not
/// UTF-8, or holds a line break, is refused), with [`MSG_ID`] set from [`dedup_id`]
/// (and any `Nats-Msg-Id` the message carried taken off).
pub(crate) fn to_nats(headers: &Headers) -> Result<HeaderMap, String> {
    let mut out = HeaderMap::new();
    for (name, value) in headers.iter() {
        if name.as_str().eq_ignore_ascii_case(MSG_ID) {
            continue;
        }
        let nats_name = async_nats::header::HeaderName::from_str(name.as_str())
            .map_err(|_| format!("header name {:?} is not a NATS header name", name.as_str()))?;
        let text = value
            .to_str()
            .ok_or_else(|| format!("header {} is not UTF-8 text (NATS headers are text)", name))?;
        let nats_value = async_nats::HeaderValue::from_str(text)
            .map_err(|_| format!("header {name} holds a line break"))?;
        out.append(nats_name, nats_value);
    }
    if let Some(id) = dedup_id(headers) {
        out.insert(MSG_ID, id.as_str());
    }
    Ok(out)
}

/// The bytes of the header block `headers` is sent as (`NATS/1.0`, a line per value,
/// the blank line): what the server counts toward its `max_payload` besides the payload.
pub(crate) fn block_len(headers: &HeaderMap) -> usize {
    let lines: usize = headers
        .iter()
        .map(|(name, values)| {
            let name: &str = name.as_ref();
            values
                .iter()
                .map(|value| name.len() + value.as_str().len() + 4)
                .sum::<usize>()
        })
        .sum();
    "NATS/1.0\r\n\r\n".len() + lines
}

/// The id JetStream deduplicates a publish by: the message id (`message-id`, else a
/// `Nats-Msg-Id` it carried), with what makes a copy of it another message: its retry
/// count, the attempt it was dead-lettered at, when it was replayed. So a retry copy or
/// a dead letter is never taken for its original, and the same copy published twice
/// (a retried publish, a crash between a copy and its original's removal) is stored once.
pub(crate) fn dedup_id(headers: &Headers) -> Option<String> {
    let base = headers.get_str(MESSAGE_ID).or_else(|| {
        headers
            .iter()
            .find(|(name, _)| name.as_str().eq_ignore_ascii_case(MSG_ID))
            .and_then(|(_, value)| value.to_str())
    })?;
    let mut id = base.to_owned();
    for (header, mark) in [
        (RETRY_COUNT, "retry"),
        (DEAD_LETTER_ATTEMPT, "dead"),
        (REPLAYED_AT, "replayed"),
    ] {
        if let Some(value) = headers.get(header) {
            id.push('/');
            id.push_str(mark);
            id.push('-');
            id.push_str(&String::from_utf8_lossy(value.as_bytes()));
        }
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> Headers {
        pairs.iter().copied().collect()
    }

    #[test]
    fn round_trip() {
        let h = headers(&[("content-type", "application/json"), ("x-a", "1 ✓")]);
        let back = from_nats(Some(&to_nats(&h).expect("text headers")));
        assert_eq!(back.get_str("content-type"), Some("application/json"));
        assert_eq!(back.get_str("x-a"), Some("1 ✓"));
        assert_eq!(back.get_str(MSG_ID), None);
    }

    #[test]
    fn binary_and_broken_values_refused() {
        let mut h = Headers::new();
        h.insert("x-bin", HeaderValue::from(vec![0xff, 0x00]));
        assert!(to_nats(&h).expect_err("binary").contains("not UTF-8"));
        let h = headers(&[("x-line", "a\r\nb")]);
        assert!(to_nats(&h).expect_err("line").contains("line break"));
        let h = headers(&[("bad name", "v")]);
        assert!(
            to_nats(&h)
                .expect_err("name")
                .contains("not a NATS header name")
        );
    }

    #[test]
    fn copies_are_other_messages() {
        assert_eq!(dedup_id(&headers(&[])), None);
        let original = headers(&[(MESSAGE_ID, "m1")]);
        assert_eq!(dedup_id(&original).as_deref(), Some("m1"));
        let copy = headers(&[(MESSAGE_ID, "m1"), (RETRY_COUNT, "2")]);
        assert_eq!(dedup_id(&copy).as_deref(), Some("m1/retry-2"));
        let dead = headers(&[(MESSAGE_ID, "m1"), (DEAD_LETTER_ATTEMPT, "3")]);
        assert_eq!(dedup_id(&dead).as_deref(), Some("m1/dead-3"));
        let carried = headers(&[(MSG_ID, "n1"), (RETRY_COUNT, "1")]);
        assert_eq!(dedup_id(&carried).as_deref(), Some("n1/retry-1"));
        let out = to_nats(&carried).expect("text");
        assert_eq!(out.get(MSG_ID).map(|v| v.as_str()), Some("n1/retry-1"));
    }
}
