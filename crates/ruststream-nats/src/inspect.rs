//! Browsing what a JetStream stream holds for a subject, and deleting single messages
//! from it (the dead-letter tools).
//!
//! A subject's messages are read from the stream that holds it (the one the server
//! names for the subject, as at subscribe), by **stream sequence**: `STREAM.MSG.GET`
//! with the next message for the subject from a sequence on, oldest first. Reading a
//! stored message touches no consumer: nothing is delivered, counted or acknowledged.
//! A message's id is its stream sequence (`42`), stable while it is stored. Messages are
//! read from the JSON API, which carries the header block as stored: headers come in
//! their stored order (the client's header map has none), and a block the client would
//! refuse (see `poison`) is read anyway, with the reason as the message's defect.
//!
//! Removing deletes by sequence (`STREAM.MSG.DELETE`), after reading the message
//! there to check that it is one of the address's subject: an id that is not a number,
//! a sequence already deleted and a sequence holding another subject's message are
//! skipped. A replay (publish the copy, then remove) thus deletes the original only
//! after the copy is stored.
//!
//! What a stream holds is not only what waits: a stream with limits retention (the
//! default, and the one the adapter creates) keeps messages its consumers have
//! acknowledged, until its limits remove them, so the tools list those too. A subject
//! no stream holds (a core NATS subject stores nothing) is
//! [`InspectError::Unsupported`].

use async_nats::jetstream::context::GetStreamByNameErrorKind;
use base64::Engine;
use bytes::Bytes;
use ruststream_core::{
    Address, BoxFuture, HeaderName, HeaderValue, Headers, Inspect, InspectError, Message, Waiting,
};
use serde_json::{Value, json};

use crate::broker::NatsBroker;
use crate::names;

/// JetStream's "no message found".
const NO_MESSAGE: u64 = 10037;
/// JetStream's "message delete failed" (the sequence holds no message).
const DELETE_FAILED: u64 = 10057;

fn failed(what: impl std::fmt::Display) -> InspectError {
    InspectError::Broker(what.to_string())
}

/// Whether `subject` is matched by `filter` (NATS wildcards: `*` one token, `>` the rest).
pub(crate) fn subject_matches(filter: &str, subject: &str) -> bool {
    let mut tokens = subject.split('.');
    for want in filter.split('.') {
        match (want, tokens.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {}
            (want, Some(got)) if want == got => {}
            _ => return false,
        }
    }
    tokens.next().is_none()
}

/// A message as the stream stores it.
struct Stored {
    sequence: u64,
    subject: String,
    waiting: Waiting,
}

/// The headers of a stored header block (`NATS/1.0` and `Name: value` lines), in their
/// stored order, and why the client could not read them, if it could not.
fn stored_headers(block: &[u8]) -> (Headers, Option<String>) {
    let mut headers = Headers::new();
    if block.is_empty() {
        return (headers, None);
    }
    let defect = crate::poison::unreadable(block);
    for line in String::from_utf8_lossy(block).split("\r\n").skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            headers.append(
                HeaderName::from(name.trim().to_owned()),
                HeaderValue::from(value.trim().to_owned()),
            );
        }
    }
    (headers, defect)
}

/// The answer of a JetStream API request, or its error (`None` for `ok_codes`).
async fn api(
    broker: &NatsBroker,
    subject: String,
    request: Value,
    ok_codes: &[u64],
) -> Result<Option<Value>, InspectError> {
    let answer: Value = broker
        .inner
        .js
        .request(subject.clone(), &request)
        .await
        .map_err(|e| failed(format!("{subject}: {e}")))?;
    match answer.get("error") {
        None => Ok(Some(answer)),
        Some(error) if ok_codes.contains(&error["err_code"].as_u64().unwrap_or(0)) => Ok(None),
        Some(error) => Err(failed(format!("{subject}: {}", error["description"]))),
    }
}

/// The message `request` asks stream `stream` for (`STREAM.MSG.GET`: a sequence, or
/// the next of a subject from a sequence on), read from the JSON API, which carries the
/// header block as stored (base64), in its order and even where the client would refuse it.
async fn get(
    broker: &NatsBroker,
    stream: &str,
    request: Value,
) -> Result<Option<Stored>, InspectError> {
    let subject = format!("STREAM.MSG.GET.{stream}");
    let Some(answer) = api(broker, subject, request, &[NO_MESSAGE]).await? else {
        return Ok(None);
    };
    let message = &answer["message"];
    let decode = |field: &str| match message[field].as_str() {
        None => Ok(Vec::new()),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| failed(format!("stream {stream}: {field} is not base64: {e}"))),
    };
    let sequence = message["seq"]
        .as_u64()
        .ok_or_else(|| failed(format!("stream {stream}: no sequence in {answer}")))?;
    let (headers, defect) = stored_headers(&decode("hdrs")?);
    let payload = Bytes::from(decode("data")?);
    Ok(Some(Stored {
        sequence,
        subject: message["subject"].as_str().unwrap_or_default().to_owned(),
        waiting: Waiting {
            id: sequence.to_string(),
            message: Message { payload, headers },
            defect,
        },
    }))
}

impl NatsBroker {
    /// The name of the stream holding `address`'s subject.
    async fn holder(&self, address: &Address) -> Result<String, InspectError> {
        let subject = address.as_str();
        let unsupported = |reason: String| InspectError::Unsupported {
            address: address.to_string(),
            reason,
        };
        names::check_subject(subject, true).map_err(unsupported)?;
        match self.inner.js.stream_by_subject(subject).await {
            Ok(name) => Ok(name),
            Err(e) if e.kind() == GetStreamByNameErrorKind::NotFound => Err(unsupported(format!(
                "no JetStream stream holds subject {subject} (a core subject stores nothing)"
            ))),
            Err(e) => Err(failed(format!("looking up the stream of {subject}: {e}"))),
        }
    }
}

impl Inspect for NatsBroker {
    fn browse(
        &self,
        address: &Address,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>> {
        let address = address.clone();
        Box::pin(async move {
            let stream = self.holder(&address).await?;
            let mut seen = Vec::new();
            let mut from = 1;
            while seen.len() < max {
                let request = json!({ "seq": from, "next_by_subj": address.as_str() });
                let Some(stored) = get(self, &stream, request).await? else {
                    break;
                };
                from = stored.sequence + 1;
                seen.push(stored.waiting);
            }
            Ok(seen)
        })
    }

    fn remove<'a>(
        &'a self,
        address: &'a Address,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<usize, InspectError>> {
        Box::pin(async move {
            let stream = self.holder(address).await?;
            let mut removed = 0;
            for id in ids {
                let Ok(sequence) = id.parse::<u64>() else {
                    continue;
                };
                // The message at that sequence must be the address's.
                match get(self, &stream, json!({ "seq": sequence })).await? {
                    Some(stored) if subject_matches(address.as_str(), &stored.subject) => {}
                    _ => continue,
                }
                let subject = format!("STREAM.MSG.DELETE.{stream}");
                let request = json!({ "seq": sequence });
                // Gone meanwhile (another tool, the stream's limits): skipped.
                let answer = api(self, subject, request, &[NO_MESSAGE, DELETE_FAILED]).await?;
                if answer.is_some_and(|a| a["success"].as_bool() == Some(true)) {
                    removed += 1;
                }
            }
            Ok(removed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{stored_headers, subject_matches as matches};

    #[test]
    fn stored_headers_keep_their_order() {
        let (headers, defect) = stored_headers(b"NATS/1.0\r\nb: 2\r\na: 1\r\nb: 3\r\n\r\n");
        let read: Vec<_> = headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let want = [("b", "2"), ("a", "1"), ("b", "3")].map(|(n, v)| (n.to_owned(), v.to_owned()));
        assert_eq!(read, want);
        assert_eq!(defect, None);
        let (_, defect) = stored_headers(b"NATS/1.0\r\nno colon\r\n\r\n");
        assert!(defect.is_some_and(|d| d.contains("no ':'")));
        assert!(stored_headers(b"").0.is_empty());
    }

    #[test]
    fn wildcards_match_as_nats_does() {
        assert!(matches("a.b", "a.b"));
        assert!(!matches("a.b", "a.b.c"));
        assert!(!matches("a.b.c", "a.b"));
        assert!(matches("a.*", "a.b"));
        assert!(!matches("a.*", "a.b.c"));
        assert!(matches("a.>", "a.b.c"));
        assert!(!matches("a.>", "a"));
    }
}
