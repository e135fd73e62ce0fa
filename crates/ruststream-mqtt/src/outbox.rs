//! The publishing connection: QoS 1 publishes, each done when its PUBACK is read.
//!
//! rumqttc picks packet ids inside its event loop and tells them only in events: a publish
//! handed to the client is `Outgoing::Publish(pkid)` once written (or `AwaitAck(pkid)`
//! when that id is still in flight, then written after its PUBACK). Publishes are handed
//! over under one lock, so the n-th new id the events name is the n-th publish waiting.
//! A lost connection fails every publish not acknowledged (`Disconnected`: the runtime
//! tries again), and the next connection starts clean, so nothing is written twice by
//! the client itself.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rumqttc::Outgoing;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{PubAck, PubAckReason};
use rumqttc::v5::{AsyncClient, Event, EventLoop, Incoming};
use ruststream_adapter::{Backoff, Outage};
use ruststream_core::PublishErrorKind;
use tokio::sync::{oneshot, watch};

use crate::connection;
use crate::dropped::{self, Dropped};
use crate::settings::Url;

/// What a publish waits for: its PUBACK's answer.
pub(crate) type Waiter = oneshot::Sender<Result<(), PublishErrorKind>>;

/// How many requests the client's channel holds.
const CHANNEL: usize = 1024;

/// The publishes in flight on the publishing connection, and the broker's drop count it
/// reads ([`Dropped`]).
#[derive(Default)]
pub(crate) struct Outbox {
    state: Mutex<State>,
    pub(crate) dropped: Dropped,
}

#[derive(Default)]
struct State {
    /// The current connection's client; `None` while reconnecting or closed.
    client: Option<AsyncClient>,
    closed: bool,
    /// Handed to the client, no packet id known yet, in order.
    queued: VecDeque<Waiter>,
    /// Written, waiting for their PUBACK.
    sent: HashMap<u16, Waiter>,
    /// Their packet id was still in flight: written after that one's PUBACK.
    collided: HashMap<u16, Waiter>,
    /// The largest packet the server takes, as its last CONNACK said (none: MQTT's).
    max_packet: Option<usize>,
}

/// What handing a publish over came to.
pub(crate) enum Handed {
    /// It is on its way; the receiver answers once the broker acknowledges it.
    Sent(oneshot::Receiver<Result<(), PublishErrorKind>>),
    /// The client's channel is full, or no connection is up: try again shortly.
    NotNow,
    /// The broker is closed.
    Closed,
}

impl Outbox {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands one publish to the current client with `send`, in the order of the waiters.
    pub(crate) fn hand(&self, send: impl FnOnce(&AsyncClient) -> bool) -> Handed {
        let mut state = self.state();
        if state.closed {
            return Handed::Closed;
        }
        let Some(client) = state.client.as_ref() else {
            return Handed::NotNow;
        };
        if !send(client) {
            return Handed::NotNow;
        }
        let (tx, rx) = oneshot::channel();
        state.queued.push_back(tx);
        Handed::Sent(rx)
    }

    /// The largest packet the server takes (its CONNACK's Maximum Packet Size), where it
    /// said one.
    pub(crate) fn max_packet(&self) -> Option<usize> {
        self.state().max_packet
    }

    /// Whether nothing waits for a PUBACK.
    fn is_idle(&self) -> bool {
        let state = self.state();
        state.queued.is_empty() && state.sent.is_empty() && state.collided.is_empty()
    }

    fn written(&self, pkid: u16) {
        let mut state = self.state();
        if state.sent.contains_key(&pkid) {
            return;
        }
        let waiter = match state.collided.remove(&pkid) {
            Some(waiter) => Some(waiter),
            None => state.queued.pop_front(),
        };
        if let Some(waiter) = waiter {
            state.sent.insert(pkid, waiter);
        }
    }

    fn collided(&self, pkid: u16) {
        let mut state = self.state();
        if let Some(waiter) = state.queued.pop_front() {
            state.collided.insert(pkid, waiter);
        }
    }

    fn acknowledged(&self, ack: &PubAck, accept_unrouted: bool) {
        let mut state = self.state();
        if let Some(waiter) = state.sent.remove(&ack.pkid) {
            let _ = waiter.send(answer(ack, accept_unrouted));
        }
        if let Some(waiter) = state.collided.remove(&ack.pkid) {
            state.sent.insert(ack.pkid, waiter);
        }
    }

    /// The connection is gone: every publish not acknowledged fails.
    fn lost(&self, closed: bool) {
        let mut state = self.state();
        state.client = None;
        state.closed |= closed;
        let kind = if closed {
            PublishErrorKind::Closed
        } else {
            PublishErrorKind::Disconnected
        };
        let queued = std::mem::take(&mut state.queued);
        let sent = std::mem::take(&mut state.sent).into_values();
        let collided = std::mem::take(&mut state.collided).into_values();
        for waiter in queued.into_iter().chain(sent).chain(collided) {
            let _ = waiter.send(Err(kind.clone()));
        }
    }
}

/// What a publish no subscription matches fails with (`BadAddress`).
pub(crate) const UNROUTED: &str = "no subscription matches the topic: the broker dropped the message \
     (unrouted=accept takes that as done)";

/// What a PUBACK's reason means to the publish.
fn answer(ack: &PubAck, accept_unrouted: bool) -> Result<(), PublishErrorKind> {
    match ack.reason {
        PubAckReason::Success => Ok(()),
        PubAckReason::NoMatchingSubscribers if accept_unrouted => Ok(()),
        PubAckReason::NoMatchingSubscribers => Err(PublishErrorKind::BadAddress(UNROUTED.into())),
        PubAckReason::TopicNameInvalid => Err(PublishErrorKind::BadAddress(
            "the broker refused the topic".into(),
        )),
        PubAckReason::NotAuthorized => Err(PublishErrorKind::Refused("not authorized".into())),
        PubAckReason::QuotaExceeded => Err(PublishErrorKind::Refused("quota exceeded".into())),
        reason => Err(PublishErrorKind::Refused(format!("puback {reason:?}"))),
    }
}

/// Runs the publishing connection until `closed`: connects, reads events, reconnects
/// with back-off.
pub(crate) async fn run(outbox: Arc<Outbox>, url: Url, mut closed: watch::Receiver<bool>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let id = connection::throwaway_id("pub");
    // An outage is one WARN, not one per failed try.
    let mut outage = Outage::default();
    loop {
        let options = connection::options(&url, &id, None, u16::MAX);
        let (client, mut events) = AsyncClient::new(options, CHANNEL);
        outbox.state().client = Some(client.clone());
        tokio::select! {
            error = session(&outbox, &client, &mut events, url.accept_unrouted, (&mut backoff, &mut outage)) => {
                if outage.lost() {
                    tracing::warn!(%error, "mqtt publishing connection lost; connecting again");
                } else {
                    tracing::debug!(%error, "mqtt publishing connection: not made again yet");
                }
                outbox.lost(false);
            }
            () = connection::closing(&mut closed) => {
                finish(&outbox, &client, &mut events, url.accept_unrouted).await;
                return;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = connection::closing(&mut closed) => {
                outbox.lost(true);
                return;
            }
        }
    }
}

/// Reads the connection's events until it fails; at each CONNACK, subscribes to the
/// broker's drop count.
async fn session(
    outbox: &Outbox,
    client: &AsyncClient,
    events: &mut EventLoop,
    accept_unrouted: bool,
    (backoff, outage): (&mut Backoff, &mut Outage),
) -> rumqttc::v5::ConnectionError {
    loop {
        match events.poll().await {
            Ok(event) => {
                if let Event::Incoming(Incoming::ConnAck(ack)) = &event {
                    backoff.reset();
                    if outage.back() {
                        tracing::info!("mqtt publishing connection made again");
                    }
                    // Refused or unknown on brokers that are not Mosquitto: nothing comes.
                    let _ = client.try_subscribe(dropped::TOPIC, QoS::AtMostOnce);
                    outbox.state().max_packet = ack
                        .properties
                        .as_ref()
                        .and_then(|p| p.max_packet_size)
                        .and_then(|size| usize::try_from(size).ok());
                }
                handle(outbox, &event, accept_unrouted);
            }
            Err(error) => return error,
        }
    }
}

fn handle(outbox: &Outbox, event: &Event, accept_unrouted: bool) {
    match event {
        Event::Outgoing(Outgoing::Publish(pkid)) => outbox.written(*pkid),
        Event::Outgoing(Outgoing::AwaitAck(pkid)) => outbox.collided(*pkid),
        Event::Incoming(Incoming::PubAck(ack)) => outbox.acknowledged(ack, accept_unrouted),
        Event::Incoming(Incoming::Publish(publish)) if publish.topic == dropped::TOPIC => {
            outbox.dropped.published(&publish.payload, publish.retain);
        }
        _ => {}
    }
}

/// At close: waits (up to five seconds) for what is in flight, then disconnects.
async fn finish(outbox: &Outbox, client: &AsyncClient, events: &mut EventLoop, unrouted: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !outbox.is_idle() {
        match tokio::time::timeout_at(deadline, events.poll()).await {
            Ok(Ok(event)) => handle(outbox, &event, unrouted),
            Ok(Err(_)) | Err(_) => break,
        }
    }
    outbox.lost(true);
    let _ = client.try_disconnect();
    let _ = tokio::time::timeout(Duration::from_secs(1), events.poll()).await;
}
