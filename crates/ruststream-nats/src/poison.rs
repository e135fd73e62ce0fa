//! Stored messages the client cannot read. async-nats refuses a message whose header
//! block is not what it parses (not UTF-8, a line without `:`, a bad name) as a protocol
//! error and drops the connection, before the adapter sees the message; the server would
//! deliver it again after `ack_wait`, and the connection would drop again. After each
//! reconnect a JetStream subscription looks over its consumer's unacknowledged range,
//! reads the messages it does not hold through the stream's JSON API (which carries the
//! header block as base64, past the client's parser), and hands each unreadable one to
//! the runtime marked with a defect: the decode-failure policy settles it, through an
//! acknowledgement subject made for its stream sequence.

use std::sync::Arc;

use async_nats::{Subject, jetstream};
use base64::Engine;
use bytes::Bytes;
use ruststream_core::{Acker, Address, Delivery, Headers, Tag};

use crate::pump::{Item, Pump};

/// How many stream sequences one look covers at most.
pub(crate) const LIMIT: u64 = 1024;

/// A stored message the client cannot read.
pub(crate) struct Unreadable {
    /// The subject it was published to.
    pub(crate) subject: String,
    pub(crate) payload: Bytes,
    pub(crate) why: String,
}

/// Why async-nats would refuse `block` (a message's header block), if it would: the
/// checks of its parser, in its order.
pub(crate) fn unreadable(block: &[u8]) -> Option<String> {
    let Ok(text) = std::str::from_utf8(block) else {
        return Some("the header block is not UTF-8".into());
    };
    let mut lines = text.lines();
    let version = lines.next().unwrap_or_default();
    let Some(rest) = version.strip_prefix("NATS/1.0") else {
        return Some("the header block does not begin with NATS/1.0".into());
    };
    let status = rest.trim().split_once(' ').map_or(rest.trim(), |(s, _)| s);
    if !status.is_empty() && status.parse::<u16>().is_err() {
        return Some(format!(
            "the header block's status {status:?} is not a number"
        ));
    }
    let mut lines = lines.peekable();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let Some((name, _)) = line.split_once(':') else {
            return Some(format!("header line {line:?} has no ':'"));
        };
        if name
            .chars()
            .any(|c| c == ':' || (c as u32) < 33 || (c as u32) > 126)
        {
            return Some(format!("header name {name:?} is not a NATS header name"));
        }
        while lines
            .next_if(|l| l.starts_with(char::is_whitespace))
            .is_some()
        {}
    }
    None
}

/// The message at `seq` of `stream`, if it is stored and the client could not read it.
pub(crate) async fn check(js: &jetstream::Context, stream: &str, seq: u64) -> Option<Unreadable> {
    let answer: serde_json::Value = js
        .request(
            format!("STREAM.MSG.GET.{stream}"),
            &serde_json::json!({ "seq": seq }),
        )
        .await
        .ok()?;
    let message = answer.get("message")?;
    let decode = |field: &str| {
        message
            .get(field)
            .and_then(serde_json::Value::as_str)
            .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
    };
    let why = unreadable(&decode("hdrs")?)?;
    Some(Unreadable {
        subject: message
            .get("subject")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        payload: decode("data").map(Bytes::from).unwrap_or_default(),
        why,
    })
}

/// The acknowledgement subject of stream message `seq` for `consumer`: the server takes
/// the stream sequence from it (and the delivery's own numbers from its pending record).
pub(crate) fn ack_subject(stream: &str, consumer: &str, seq: u64) -> String {
    format!("$JS.ACK.{stream}.{consumer}.1.{seq}.0.0.0")
}

impl Pump {
    /// After a reconnect: the messages of the consumer's unacknowledged range that this
    /// subscription does not hold and that the client cannot read (what may have dropped
    /// the connection), as deliveries with a defect.
    pub(crate) async fn unreadable(&mut self, wildcard: bool, acker: &Arc<dyn Acker>) -> Vec<Item> {
        let Ok(info) = self.consumer.info().await.cloned() else {
            return Vec::new();
        };
        let (stream, consumer) = (info.stream_name, info.name);
        let (floor, last) = (
            info.ack_floor.stream_sequence,
            info.delivered.stream_sequence,
        );
        let mut found = Vec::new();
        for seq in (floor + 1)..=last.min(floor.saturating_add(LIMIT)) {
            if self.acker.holds_stream_seq(seq) {
                continue;
            }
            let Some(unreadable) = check(&self.inner.js, &stream, seq).await else {
                continue;
            };
            tracing::warn!(%stream, seq, why = %unreadable.why,
                "nats: a stored message the client cannot read: handed over with a defect");
            // Settled through an acknowledgement subject made for the stream sequence.
            let reply = Subject::from(ack_subject(&stream, &consumer, seq));
            let tag = self.acker.hold(seq, reply);
            let delivery = Delivery::new(
                unreadable.payload,
                Headers::new(),
                if wildcard {
                    Address::new(&unreadable.subject)
                } else {
                    self.address.clone()
                },
                Tag::Seq(tag),
                acker.clone(),
            )
            .with_defect(format!(
                "nats: stream {stream} message {seq} cannot be read: {}",
                unreadable.why
            ));
            found.push(Ok(delivery));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_client_reads() {
        assert_eq!(unreadable(b"NATS/1.0\r\nA: b\r\n\r\n"), None);
        assert_eq!(unreadable(b"NATS/1.0\r\nA: b\r\n  c\r\n\r\n"), None);
        assert_eq!(unreadable(b"NATS/1.0 503\r\n\r\n"), None);
    }

    #[test]
    fn what_it_refuses() {
        for block in [
            &b"NATS/1.0\r\nX-Bad: \xff\xfe\r\n\r\n"[..],
            b"NATS/1.0\r\nno colon\r\n\r\n",
            b"HTTP/1.1\r\n\r\n",
            b"NATS/1.0 abc\r\n\r\n",
            b"NATS/1.0\r\nbad name: v\r\n\r\n",
        ] {
            assert!(
                unreadable(block).is_some(),
                "{:?}",
                String::from_utf8_lossy(block)
            );
        }
    }

    #[test]
    fn ack_subjects_have_nine_tokens() {
        assert_eq!(ack_subject("S", "C", 7).split('.').count(), 9);
    }
}
