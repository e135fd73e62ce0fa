//! Publishing: QoS 1 on the broker's publishing connection, done once the PUBACK says the
//! broker has the message.

use std::sync::Arc;
use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::connection::MAX_PACKET;
use crate::headers::to_properties;
use crate::keeper::{self, Targets};
use crate::outbox::{Handed, Outbox, UNROUTED};
use crate::settings::Url;
use crate::topic;

/// The largest payload a publish takes: MQTT's largest packet less room for the topic
/// and properties.
pub const MAX_PAYLOAD: usize = MAX_PACKET as usize - 1_048_576;

/// How long a publish waits for a connection (or room in the client's channel).
const WAIT_FOR_CONNECTION: Duration = Duration::from_secs(10);

/// How long a copy for a mount's target (a dead letter, `retry_to`) that no subscription
/// matches waits for one before the target's session is kept (see `keeper`). A target
/// without a subscription is often one whose consumer is away for a moment: Mosquitto
/// forgets every shared subscription when it restarts (2.0.11 does not persist them),
/// until each client has connected again (within its back-off, at most 5 s here) and
/// subscribed. A consumer that names itself (its own `client_id`, as replicas do) never
/// reads the session kept under the name the publishing service's URL gives, and that
/// session stays in the group, taking its share of every later copy.
const WAIT_FOR_SUBSCRIBER: Duration = Duration::from_secs(10);

/// Publishes through the broker's one publishing connection.
#[derive(Clone)]
pub(crate) struct MqttPublisher {
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) url: Arc<Url>,
    /// The topics mounts send copies to: kept when nobody subscribes to them.
    pub(crate) targets: Arc<Targets>,
}

impl MqttPublisher {
    /// The message's properties, unless the publish would be refused for good before
    /// anything is sent: a bad topic, or a packet over MQTT's limit or the server's.
    fn admit(
        &self,
        to: &Address,
        message: &Message,
    ) -> Result<rumqttc::v5::mqttbytes::v5::PublishProperties, PublishErrorKind> {
        if let Some(why) = topic::name_problem(to.as_str()) {
            return Err(PublishErrorKind::BadAddress(why.into()));
        }
        if message.payload.len() > MAX_PAYLOAD {
            return Err(PublishErrorKind::TooLarge {
                size: message.payload.len(),
                limit: MAX_PAYLOAD,
            });
        }
        let properties = to_properties(&message.headers)
            .map_err(|error| PublishErrorKind::Refused(error.to_string()))?;
        // The server's Maximum Packet Size: a packet over it would be refused by the
        // client's codec, and that loses the connection with every publish on it.
        if let Some(limit) = self.outbox.max_packet()
            && upper_size(to, message) > limit
        {
            let size = rumqttc::v5::mqttbytes::v5::Publish::new(
                to.as_str(),
                QoS::AtLeastOnce,
                message.payload.clone(),
                Some(properties.clone()),
            )
            .size();
            if size > limit {
                return Err(PublishErrorKind::TooLarge { size, limit });
            }
        }
        Ok(properties)
    }

    async fn send(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        let properties = self.admit(to, message)?;
        let deadline = tokio::time::Instant::now() + WAIT_FOR_CONNECTION;
        let answer = loop {
            let handed = self.outbox.hand(|client| {
                client
                    .try_publish_with_properties(
                        to.as_str(),
                        QoS::AtLeastOnce,
                        false,
                        message.payload.clone(),
                        properties.clone(),
                    )
                    .is_ok()
            });
            match handed {
                Handed::Sent(answer) => break answer,
                Handed::Closed => return Err(PublishErrorKind::Closed),
                Handed::NotNow if tokio::time::Instant::now() >= deadline => {
                    return Err(PublishErrorKind::Disconnected);
                }
                Handed::NotNow => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        answer.await.unwrap_or(Err(PublishErrorKind::Disconnected))
    }
}

/// A bound on the size of the PUBLISH packet of `message` to `to` (fixed header, topic,
/// packet id, properties with five bytes of framing each, payload), counted without
/// building it: the exact size is worked out only when this bound is over a limit.
fn upper_size(to: &Address, message: &Message) -> usize {
    let headers: usize = message
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.as_bytes().len() + 5)
        .sum();
    5 + 2 + to.as_str().len() + 2 + 4 + headers + message.payload.len()
}

impl Publish for MqttPublisher {
    /// A bad topic, or a packet over MQTT's limit or over the Maximum Packet Size the
    /// server announced in its last CONNACK.
    fn check(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        self.admit(to, message).map(drop)
    }

    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            let mut sent = self.send(&to, &message).await;
            let unrouted = |sent: &Result<(), PublishErrorKind>| matches!(sent, Err(PublishErrorKind::BadAddress(why)) if why == UNROUTED);
            // A mount's dead letter or retry copy that no subscription matches: published
            // again until one does, for a while; then the topic's session is made (see
            // `keeper`), and the copy published again.
            if unrouted(&sent) && self.targets.declared(to.as_str()) {
                let deadline = tokio::time::Instant::now() + WAIT_FOR_SUBSCRIBER;
                let mut pause = Duration::from_millis(100);
                while unrouted(&sent) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                    sent = self.send(&to, &message).await;
                }
            }
            if unrouted(&sent) && self.targets.declared(to.as_str()) {
                match keeper::keep(&self.url, to.as_str()).await {
                    Ok(()) => sent = self.send(&to, &message).await,
                    Err(why) => tracing::warn!(topic = %to, error = %why,
                        "mqtt: cannot keep a session for this mount's target"),
                }
            }
            sent.map_err(|kind| PublishError {
                address: to.to_string(),
                kind,
                message,
            })
        })
    }
}
