//! Browsing what a JetStream stream holds for a subject, and deleting single messages
//! from it (the dead-letter tools).
//!
//! A subject's messages are read from the stream that holds it (the one the server
//! names for the subject, as at subscribe), by **stream sequence**: `STREAM.MSG.GET`
//! with the next message for the subject from a sequence on, oldest first. Reading a
//! stored message touches no consumer: nothing is delivered, counted or acknowledged.
//! A message's id is its stream sequence (`42`), stable while it is stored.
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

use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::context::GetStreamByNameErrorKind;
use async_nats::jetstream::stream::{DeleteMessageErrorKind, LastRawMessageErrorKind, Stream};
use ruststream_core::{Address, BoxFuture, Inspect, InspectError, Message, Waiting};

use crate::broker::NatsBroker;
use crate::{headers, names};

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

impl NatsBroker {
    /// The stream holding `address`'s subject.
    async fn holder(&self, address: &Address) -> Result<Stream, InspectError> {
        let subject = address.as_str();
        let unsupported = |reason: String| InspectError::Unsupported {
            address: address.to_string(),
            reason,
        };
        names::check_subject(subject, true).map_err(unsupported)?;
        let js = &self.inner.js;
        let name = match js.stream_by_subject(subject).await {
            Ok(name) => name,
            Err(e) if e.kind() == GetStreamByNameErrorKind::NotFound => {
                return Err(unsupported(format!(
                    "no JetStream stream holds subject {subject} (a core subject stores nothing)"
                )));
            }
            Err(e) => return Err(failed(format!("looking up the stream of {subject}: {e}"))),
        };
        js.get_stream(&name)
            .await
            .map_err(|e| failed(format!("opening stream {name}: {e}")))
    }
}

/// The message for `subject` at sequence `from` or after, if any.
async fn next(
    stream: &Stream,
    subject: &str,
    from: u64,
) -> Result<Option<(u64, Message)>, InspectError> {
    match stream.get_first_raw_message_by_subject(subject, from).await {
        Ok(stored) => {
            let message = Message {
                payload: stored.payload,
                headers: headers::from_nats(Some(&stored.headers)),
            };
            Ok(Some((stored.sequence, message)))
        }
        Err(e) if no_message(e.kind()) => Ok(None),
        Err(e) => Err(failed(format!(
            "reading {subject} from sequence {from}: {e}"
        ))),
    }
}

/// Whether a get failed for want of a message (JetStream's "no message found").
fn no_message(kind: LastRawMessageErrorKind) -> bool {
    matches!(kind, LastRawMessageErrorKind::NoMessageFound)
}

/// Whether a delete failed because the message is gone (deleted meanwhile, by another
/// tool or the stream's limits).
fn gone(kind: &DeleteMessageErrorKind) -> bool {
    matches!(kind, DeleteMessageErrorKind::JetStream(e)
        if [ErrorCode::NO_MESSAGE_FOUND, ErrorCode::STREAM_MESSAGE_DELETE_FAILED]
            .contains(&e.error_code()))
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
                let Some((sequence, message)) = next(&stream, address.as_str(), from).await? else {
                    break;
                };
                seen.push(Waiting::new(sequence.to_string(), message));
                from = sequence + 1;
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
                match stream.get_raw_message(sequence).await {
                    Ok(stored) if subject_matches(address.as_str(), stored.subject.as_str()) => {}
                    Ok(_) => continue,
                    Err(e) if no_message(e.kind()) => continue,
                    Err(e) => return Err(failed(format!("reading sequence {sequence}: {e}"))),
                }
                match stream.delete_message(sequence).await {
                    Ok(true) => removed += 1,
                    Ok(false) => {}
                    Err(e) if gone(&e.kind()) => {}
                    Err(e) => return Err(failed(format!("deleting sequence {sequence}: {e}"))),
                }
            }
            Ok(removed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::subject_matches as matches;

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
