//! Keeping what a mount sends to a topic nobody subscribes to yet: its dead letters and
//! retry copies.
//!
//! MQTT keeps a message only for the sessions whose subscriptions match it; a publish
//! that matches none is dropped, so the adapter fails it. A mount's dead letter whose
//! topic nobody has subscribed to yet would then be owed for ever, and, since PUBACKs go
//! in arrival order, hold back every later PUBACK of its subscription. So when such a copy
//! has found no subscription for a while (the publisher tries again for 10 s: a consumer
//! away for a moment, as after a broker restart, subscribes again meanwhile), the adapter
//! opens the session that a mount on that topic with the default options would have (its
//! client id and group, from this broker's URL), with no expiry, subscribes it, and leaves: the broker then keeps the copies there (within
//! its own limit per session: Mosquitto's `max_queued_messages`, 1,000 by default) until
//! that consumer connects (its own connect sets the session's expiry from then on), and
//! the copy is published again. No session is taken over: nobody was subscribed.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::SubscribeReasonCode;
use rumqttc::v5::{AsyncClient, Event, Incoming};
use ruststream_core::Options;

use crate::connection;
use crate::settings::{self, Url};

/// How long opening, subscribing and leaving a kept session may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A session expiry of `u32::MAX` seconds, which MQTT 5 reads as never (the consumer's
/// own connect sets its expiry later).
const NEVER: Duration = Duration::from_secs(u32::MAX as u64);

/// The topics this broker's mounts send copies to (dead letters, `retry_to`).
#[derive(Debug, Default)]
pub(crate) struct Targets(Mutex<HashSet<String>>);

impl Targets {
    /// Notes that a mount sends copies to `topic`.
    pub(crate) fn declare(&self, topic: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(topic.to_owned());
    }

    /// Whether a mount sends copies to `topic`.
    pub(crate) fn declared(&self, topic: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(topic)
    }
}

/// Opens the session a default mount on `topic` would have, subscribes it (QoS 1) and
/// disconnects, leaving the session with the broker.
pub(crate) async fn keep(url: &Url, topic: &str) -> Result<(), String> {
    let mounted = settings::mounted(topic, &url.settings, &Options::default())
        .map_err(|error| error.to_string())?;
    let filter = mounted.filter(topic);
    let options = connection::options(url, &mounted.client_id, Some(NEVER), 1);
    let (client, mut events) = AsyncClient::new(options, 4);
    let subscribed = tokio::time::timeout(TIMEOUT, async {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                    client
                        .try_subscribe(filter.clone(), QoS::AtLeastOnce)
                        .map_err(|error| error.to_string())?;
                }
                Ok(Event::Incoming(Incoming::SubAck(ack))) => {
                    return match ack.return_codes.first() {
                        Some(SubscribeReasonCode::Success(QoS::AtLeastOnce | QoS::ExactlyOnce)) => {
                            Ok(())
                        }
                        other => Err(format!("the broker refused {filter}: {other:?}")),
                    };
                }
                // A message for the session is left unacknowledged: it stays in the
                // session, for its consumer.
                Ok(_) => {}
                Err(error) => return Err(error.to_string()),
            }
        }
    })
    .await
    .map_err(|_| format!("no suback for {filter} within {TIMEOUT:?}"))?;
    let _ = client.try_disconnect();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while events.poll().await.is_ok() {}
    })
    .await;
    subscribed?;
    tracing::info!(topic, client_id = %mounted.client_id, filter = %filter,
        "mqtt: nobody subscribed to this mount's target; its copies are kept in the session a default mount on it would have");
    Ok(())
}
