//! A subscription's own connection: connects (resuming its session), subscribes at each
//! CONNACK, hands every message on as a delivery, and reconnects with back-off.

use std::sync::Arc;
use std::time::Duration;

use rumqttc::Outgoing;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Publish, SubscribeReasonCode};
use rumqttc::v5::{AsyncClient, Event, EventLoop, Incoming, MqttOptions};
use ruststream_adapter::{Backoff, Outage};
use ruststream_core::{Acker, Address, Attached, ConsumeError, Delivery, SubscribeError, Tag};
use tokio::sync::{mpsc, oneshot, watch};

use crate::connection;
use crate::headers::from_properties;
use crate::ledger::{Ledger, Ticket};
use crate::writer::Written;

/// How often the reader looks whether an abandoned delivery asks for a new connection.
const TICK: Duration = Duration::from_millis(100);

/// How long a closing subscription waits for its PUBACKs to be written.
const FLUSH: Duration = Duration::from_secs(2);

/// A delivery, or why the subscription's connection was lost.
pub(crate) type Item = Result<Delivery, ConsumeError>;

/// Everything one subscription's connection needs.
pub(crate) struct Reader {
    pub(crate) options: MqttOptions,
    /// What is subscribed: the filter, or `$share/<group>/<filter>`.
    pub(crate) filter: String,
    /// The mount's address, for deliveries whose topic is not text.
    pub(crate) address: Address,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) acker: Arc<dyn Acker>,
    pub(crate) written: Arc<Written>,
    pub(crate) link: watch::Sender<Option<(u64, AsyncClient)>>,
    pub(crate) out: mpsc::UnboundedSender<Item>,
    pub(crate) attached: Attached,
    pub(crate) closed: watch::Receiver<bool>,
}

/// How a connection ended.
enum Ended {
    Closed,
    /// Made anew on purpose: abandoned deliveries come back on the next one.
    Renew,
    Lost(String),
    Refused(String),
}

impl Reader {
    /// Runs until the broker closes; `ready` answers once the first SUBACK is read (or
    /// the first connection fails).
    pub(crate) async fn run(self, ready: oneshot::Sender<Result<(), SubscribeError>>) {
        let mut ready = Some(ready);
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let mut closed = self.closed.clone();
        let mut outage = Outage::default();
        loop {
            let epoch = self.ledger.new_epoch();
            let (client, mut events) = AsyncClient::new(self.options.clone(), 1024);
            self.link.send_replace(Some((epoch, client.clone())));
            let ended = tokio::select! {
                ended = self.session(&client, &mut events, epoch, &mut ready, (&mut backoff, &mut outage)) => ended,
                () = connection::closing(&mut closed) => Ended::Closed,
            };
            if matches!(ended, Ended::Closed) {
                self.finish(&client, &mut events).await;
            }
            self.link.send_replace(None);
            drop(events);
            self.written.lost();
            let (why, refused) = match ended {
                Ended::Closed => return,
                Ended::Renew => continue,
                Ended::Lost(why) => (why, false),
                Ended::Refused(why) => (why, true),
            };
            self.attached.detach();
            if let Some(ready) = ready.take() {
                let error = if refused {
                    SubscribeError::Refused(why)
                } else {
                    SubscribeError::Disconnected(why)
                };
                let _ = ready.send(Err(error));
                return;
            }
            // An outage is said once (a WARN, and one error for the runtime), not once per
            // failed try.
            if outage.lost() {
                tracing::warn!(filter = %self.filter, error = %why, "mqtt subscription lost; connecting again");
                let _ = self
                    .out
                    .send(Err(ConsumeError(format!("mqtt {}: {why}", self.filter))));
            } else {
                tracing::debug!(filter = %self.filter, error = %why, "mqtt subscription: not made again yet");
            }
            tokio::select! {
                () = tokio::time::sleep(backoff.next_delay()) => {}
                () = connection::closing(&mut closed) => return,
            }
        }
    }

    async fn session(
        &self,
        client: &AsyncClient,
        events: &mut EventLoop,
        epoch: u64,
        ready: &mut Option<oneshot::Sender<Result<(), SubscribeError>>>,
        (backoff, outage): (&mut Backoff, &mut Outage),
    ) -> Ended {
        let mut tick = tokio::time::interval(TICK);
        loop {
            // The poll is never cut off by the tick (rumqttc's poll is not cancel-safe
            // while it connects): it is dropped only when the connection is made anew.
            let poll = events.poll();
            tokio::pin!(poll);
            let event = loop {
                tokio::select! {
                    event = &mut poll => break event,
                    _ = tick.tick() => {
                        if self.ledger.wants_reconnect() {
                            tracing::debug!(filter = %self.filter, "mqtt reconnects for abandoned deliveries");
                            return Ended::Renew;
                        }
                    }
                }
            };
            match event {
                Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                    if client
                        .try_subscribe(self.filter.clone(), QoS::AtLeastOnce)
                        .is_err()
                    {
                        return Ended::Lost("the client took no subscribe".into());
                    }
                }
                Ok(Event::Incoming(Incoming::SubAck(ack))) => match ack.return_codes.first() {
                    Some(SubscribeReasonCode::Success(QoS::AtMostOnce)) => {
                        return Ended::Refused(format!(
                            "the broker grants only qos 0 on {}: messages could be lost",
                            self.filter
                        ));
                    }
                    Some(SubscribeReasonCode::Success(_)) => {
                        self.attached.attach();
                        backoff.reset();
                        if outage.back() {
                            tracing::info!(filter = %self.filter, "mqtt subscription resumed");
                        }
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(Ok(()));
                        }
                    }
                    other => {
                        return Ended::Refused(format!(
                            "the broker refused the subscription to {}: {other:?}",
                            self.filter
                        ));
                    }
                },
                Ok(Event::Incoming(Incoming::Publish(publish))) => self.deliver(publish, epoch),
                Ok(Event::Incoming(Incoming::Disconnect(disconnect))) => {
                    tracing::warn!(filter = %self.filter, reason = ?disconnect.reason_code, "mqtt broker disconnected the subscription");
                }
                Ok(Event::Outgoing(Outgoing::PubAck(pkid))) => self.written.written(pkid),
                Ok(_) => {}
                Err(error) => return Ended::Lost(error.to_string()),
            }
        }
    }

    fn deliver(&self, publish: Publish, epoch: u64) {
        if self.out.is_closed() {
            // Nobody reads the subscription any more (a stopping service): the message
            // stays unacknowledged in the session, for its next connection.
            return;
        }
        let seq = match publish.qos {
            QoS::AtMostOnce => None,
            _ => match self.ledger.arrive(epoch) {
                Some(seq) => Some(seq),
                None => return,
            },
        };
        let tag = Tag::Other(Box::new(Ticket {
            epoch,
            seq,
            pkid: publish.pkid,
        }));
        let headers = from_properties(publish.properties.as_ref());
        let topic = std::str::from_utf8(&publish.topic).map(Address::new);
        let address = topic.clone().unwrap_or_else(|_| self.address.clone());
        let mut delivery =
            Delivery::new(publish.payload, headers, address, tag, self.acker.clone());
        if topic.is_err() {
            delivery = delivery.with_defect("the topic is not utf-8");
        }
        let _ = self.out.send(Ok(delivery));
    }

    /// At close: reads on until the released PUBACKs are written (at most [`FLUSH`]),
    /// then disconnects, leaving the session to the broker.
    async fn finish(&self, client: &AsyncClient, events: &mut EventLoop) {
        let deadline = tokio::time::Instant::now() + FLUSH;
        while !self.written.is_empty() {
            match tokio::time::timeout_at(deadline, events.poll()).await {
                Ok(Ok(Event::Outgoing(Outgoing::PubAck(pkid)))) => self.written.written(pkid),
                Ok(Ok(_)) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
        let _ = client.try_disconnect();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while events.poll().await.is_ok() {}
        })
        .await;
    }
}
