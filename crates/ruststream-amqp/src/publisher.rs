//! Publishing: one sending link per address, on a session of the broker's connection.
//!
//! A publish waits for the broker's outcome (`accepted`), so a copy the runtime
//! publishes before removing an original is in the queue when `publish` returns. The
//! link's lock is held only while the transfer is queued, not while the outcome comes
//! back, so concurrent publishes to one address are pipelined. When the connection is
//! lost, the publish re-attaches (reconnecting) and tries again until the publish
//! timeout; then the message comes back in the `PublishError`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::link::delivery::Sendable;
use fe2o3_amqp::link::{SendError, Sender, SenderAttachError, SessionStopReason};
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp_types::definitions::SenderSettleMode;
use fe2o3_amqp_types::definitions::{AmqpError, ErrorCondition};
use fe2o3_amqp_types::messaging::{Data, Message as AmqpMessage, Outcome};
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};
use tokio::sync::Mutex;

use crate::address::amqp_address;
use crate::connection::Connector;
use crate::error::ConnectError;
use crate::message::encode;

/// The broker's publisher; cheap to share.
#[derive(Debug)]
pub struct AmqpPublisher {
    connector: Arc<Connector>,
    session: Mutex<Option<SessionHandle<()>>>,
    // A session of its own for the first attach to an address: RabbitMQ ends the session
    // over an address it does not have, which must not take the links of every other
    // address down with it (their publishes would fail while the copies to a missing
    // dead-letter queue keep failing).
    probe: Mutex<Option<SessionHandle<()>>>,
    // Addresses that have been attached to once: attached on the shared session.
    known: std::sync::Mutex<std::collections::HashSet<String>>,
    // Addresses the broker said it does not have, and when: a publish to one within
    // `MISSING_FOR` fails at once, without asking again.
    missing: std::sync::Mutex<HashMap<String, (tokio::time::Instant, String)>>,
    links: std::sync::Mutex<HashMap<String, Arc<Mutex<Option<Sender>>>>>,
}

/// How long an address the broker said it does not have is taken as missing without
/// asking again (a dead letter to a queue that was never declared fails at once, not
/// after a session's round trips, for each spent delivery).
const MISSING_FOR: Duration = Duration::from_secs(1);

/// Why one attempt failed.
enum Failure {
    /// Worth another attempt once reconnected.
    Retry(String),
    /// Final.
    Fail(PublishErrorKind),
}

impl AmqpPublisher {
    pub(crate) fn new(connector: Arc<Connector>) -> Self {
        Self {
            connector,
            session: Mutex::new(None),
            probe: Mutex::new(None),
            known: std::sync::Mutex::new(std::collections::HashSet::new()),
            missing: std::sync::Mutex::new(HashMap::new()),
            links: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Publishes `message` to `to` and waits for the broker to accept it.
    pub async fn send(&self, to: &Address, message: Message) -> Result<(), PublishError> {
        let target = amqp_address(to.as_str());
        let amqp = Sendable::builder()
            .message(encode(&message, self.connector.options.durable))
            .build();
        let fail = |kind| PublishError {
            address: to.to_string(),
            kind,
            message: message.clone(),
        };
        if self.connector.is_closed() {
            return Err(fail(PublishErrorKind::Closed));
        }
        if let Some(why) = self.missing(&target) {
            return Err(fail(PublishErrorKind::BadAddress(why)));
        }
        let deadline = tokio::time::Instant::now() + self.connector.options.publish_timeout;
        let mut backoff = self.connector.backoff();
        loop {
            let attempt = tokio::time::timeout_at(deadline, self.attempt(to, &target, &amqp)).await;
            let reason = match attempt {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(Failure::Fail(kind))) => {
                    if let PublishErrorKind::BadAddress(why) = &kind {
                        self.missing
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(target.clone(), (tokio::time::Instant::now(), why.clone()));
                    }
                    return Err(fail(kind));
                }
                Ok(Err(Failure::Retry(reason))) => reason,
                Err(_) => "timed out".to_owned(),
            };
            if self.connector.is_closed() {
                return Err(fail(PublishErrorKind::Closed));
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(%to, %reason, "amqp: publish gave up");
                return Err(fail(PublishErrorKind::Disconnected));
            }
            tracing::debug!(%to, %reason, "amqp: publish retrying");
            let delay = backoff.next_delay();
            tokio::time::sleep(delay.min(deadline - tokio::time::Instant::now())).await;
        }
    }

    /// Why `target` was refused, if it was within the last [`MISSING_FOR`].
    fn missing(&self, target: &str) -> Option<String> {
        let mut missing = self
            .missing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match missing.get(target) {
            Some((at, why)) if at.elapsed() < MISSING_FOR => Some(why.clone()),
            Some(_) => {
                missing.remove(target);
                None
            }
            None => None,
        }
    }

    fn link(&self, target: &str) -> Arc<Mutex<Option<Sender>>> {
        let mut links = self
            .links
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        links.entry(target.to_owned()).or_default().clone()
    }

    async fn attempt(
        &self,
        to: &Address,
        target: &str,
        amqp: &Sendable<Data>,
    ) -> Result<(), Failure> {
        let link = self.link(target);
        let delivery = {
            let mut slot = link.lock().await;
            if slot.is_none() {
                *slot = Some(self.attach(to, target).await?);
            }
            let sender = slot.as_mut().ok_or(Failure::Retry("no link".into()))?;
            match sender.send_batchable_ref(amqp).await {
                Ok(delivery) => delivery,
                Err(e) => {
                    *slot = None;
                    if let SendError::MessageSizeExceeded(exceeded) = &e {
                        self.connector
                            .announced_max_message(Some(exceeded.max_size));
                    }
                    return Err(send_failure(e));
                }
            }
        };
        match delivery.await {
            Ok(Outcome::Accepted(_)) => Ok(()),
            Ok(Outcome::Rejected(r)) => Err(Failure::Fail(PublishErrorKind::Refused(format!(
                "rejected: {:?}",
                r.error.map(|e| e.condition)
            )))),
            Ok(Outcome::Released(_)) => Err(Failure::Fail(PublishErrorKind::Refused(
                "released (unroutable)".into(),
            ))),
            Ok(other) => Err(Failure::Fail(PublishErrorKind::Refused(format!(
                "outcome {other:?}"
            )))),
            Err(e) => {
                // The link went away before the outcome: send again (a duplicate is
                // possible, a loss is not).
                *link.lock().await = None;
                Err(send_failure(e))
            }
        }
    }

    /// A sending link to `target` on the shared session. An address not attached to
    /// before is tried first on a session of its own, so that a missing one ends that
    /// session only.
    async fn attach(&self, to: &Address, target: &str) -> Result<Sender, Failure> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(target);
        if !known {
            let probe = self.attach_on(&self.probe, to, target).await?;
            let _ = tokio::time::timeout(Duration::from_secs(2), probe.close()).await;
            self.known
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(target.to_owned());
        }
        self.attach_on(&self.session, to, target).await
    }

    async fn attach_on(
        &self,
        session: &Mutex<Option<SessionHandle<()>>>,
        to: &Address,
        target: &str,
    ) -> Result<Sender, Failure> {
        let mut session = session.lock().await;
        for _ in 0..2 {
            if session.is_none() {
                let s = self.connector.session(false).await.map_err(|e| match e {
                    ConnectError::Closed => Failure::Fail(PublishErrorKind::Closed),
                    other => Failure::Retry(other.to_string()),
                })?;
                *session = Some(s);
            }
            let Some(s) = session.as_mut() else { continue };
            let attached = Sender::builder()
                .name(self.connector.link_name("pub"))
                .target(target)
                .sender_settle_mode(SenderSettleMode::Unsettled)
                .attach(s)
                .await;
            match attached {
                Ok(sender) => {
                    self.connector
                        .announced_max_message(sender.max_message_size());
                    return Ok(sender);
                }
                Err(SenderAttachError::SessionStopped(
                    SessionStopReason::RemoteEndedWithError(error),
                )) if error.condition == ErrorCondition::AmqpError(AmqpError::NotFound) => {
                    // RabbitMQ 4 ends the session over an address it does not have; the
                    // connection stays. The next attach begins a new session.
                    *session = None;
                    let why = error.description.unwrap_or_else(|| "not found".into());
                    return Err(Failure::Fail(PublishErrorKind::BadAddress(format!(
                        "{to}: {why}"
                    ))));
                }
                Err(e) if is_refusal(&e) => {
                    return Err(Failure::Fail(PublishErrorKind::BadAddress(format!(
                        "{to}: {e}"
                    ))));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "amqp: publisher session lost");
                    *session = None; // begin a new session (reconnecting) and try again
                }
            }
        }
        Err(Failure::Retry("attach failed".into()))
    }

    /// Closes the publisher's links and session.
    pub(crate) async fn close(&self) {
        let links: Vec<_> = {
            let mut map = self
                .links
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            map.drain().map(|(_, l)| l).collect()
        };
        for link in links {
            if let Some(sender) = link.lock().await.take() {
                let _ = tokio::time::timeout(Duration::from_secs(2), sender.close()).await;
            }
        }
        for session in [&self.session, &self.probe] {
            if let Some(mut session) = session.lock().await.take() {
                let _ = tokio::time::timeout(Duration::from_secs(2), session.end()).await;
            }
        }
    }
}

fn is_refusal(e: &SenderAttachError) -> bool {
    // The broker answered the attach without a target (no such node) or detached it
    // with an error: the address is wrong, trying again will not help.
    matches!(
        e,
        SenderAttachError::TargetAddressIsNoneWhenDynamicIsTrue
            | SenderAttachError::RemoteClosedWithError(_)
    ) || e.to_string().contains("not-found")
}

fn send_failure(e: SendError) -> Failure {
    match e {
        SendError::MessageSizeExceeded(m) => Failure::Fail(PublishErrorKind::TooLarge {
            size: usize::try_from(m.size).unwrap_or(usize::MAX),
            limit: usize::try_from(m.max_size).unwrap_or(usize::MAX),
        }),
        SendError::MessageEncodeError => {
            Failure::Fail(PublishErrorKind::Refused("message encoding failed".into()))
        }
        other => Failure::Retry(other.to_string()),
    }
}

impl Publish for AmqpPublisher {
    /// A message whose encoding is over the largest the broker's links announced (on
    /// RabbitMQ known from the first subscribe or publish on).
    fn check(&self, _: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        too_large(
            message,
            self.connector.options.durable,
            self.connector.max_message(),
        )
    }

    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move { self.send(&to, message).await })
    }
}

/// Whether `message`, encoded, is over `limit` (0: none known). Encoded exactly only near
/// the limit: below it, a bound on the sections' framing settles it.
fn too_large(message: &Message, durable: bool, limit: u64) -> Result<(), PublishErrorKind> {
    if limit == 0 {
        return Ok(());
    }
    let bound = message.payload.len()
        + message
            .headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.as_bytes().len() + 16)
            .sum::<usize>()
        + 256;
    if u64::try_from(bound).unwrap_or(u64::MAX) <= limit {
        return Ok(());
    }
    let size = encoded_size(&encode(message, durable)).unwrap_or(usize::MAX);
    match u64::try_from(size) {
        Ok(encoded) if encoded <= limit => Ok(()),
        _ => Err(PublishErrorKind::TooLarge {
            size,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        }),
    }
}

/// The size of `message` encoded as a transfer carries it: its sections one after the
/// other (the sections `encode` makes).
fn encoded_size(message: &AmqpMessage<Data>) -> Result<usize, serde_amqp::Error> {
    let mut size = serde_amqp::serialized_size(&message.body)?;
    if let Some(header) = &message.header {
        size += serde_amqp::serialized_size(header)?;
    }
    if let Some(properties) = &message.properties {
        size += serde_amqp::serialized_size(properties)?;
    }
    if let Some(application) = &message.application_properties {
        size += serde_amqp::serialized_size(application)?;
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use ruststream_core::{HeaderValue, Message, PublishErrorKind};

    use fe2o3_amqp_types::messaging::message::__private::Serializable;

    use super::too_large;
    use crate::message::encode;

    /// The size the check works out is the size the link sends: the encoded message.
    #[test]
    fn the_check_sizes_a_message_as_it_is_encoded() {
        let mut message = Message::new(vec![b'x'; 4000]);
        message
            .headers
            .insert("x-ruststream-retry-count", HeaderValue::from(3u32));
        message
            .headers
            .insert("message-id", HeaderValue::from("m-1"));
        for durable in [false, true] {
            // What the link sends: fe2o3-amqp's own encoding of the whole message.
            let whole = Serializable(encode(&message, durable));
            let encoded = serde_amqp::to_vec(&whole).expect("encodes").len();
            let limit = u64::try_from(encoded).expect("fits");
            assert_eq!(too_large(&message, durable, limit), Ok(()));
            assert_eq!(
                too_large(&message, durable, limit - 1),
                Err(PublishErrorKind::TooLarge {
                    size: encoded,
                    limit: encoded - 1
                })
            );
            assert_eq!(too_large(&message, durable, 0), Ok(()), "no limit known");
        }
    }
}
