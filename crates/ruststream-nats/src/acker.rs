//! Settling JetStream deliveries: each settlement is the consumer's acknowledgement,
//! by default published (done once the client has taken it for writing; the server
//! delivers again what it did not get), or, with `confirm_acks`, sent as a request
//! (JetStream's "double ack"), done once the server answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use async_nats::client::RequestErrorKind;
use async_nats::{Client, Subject};
use bytes::Bytes;
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};
use tokio::sync::watch;

use crate::connection::Connection;
use crate::link::Link;

/// The acknowledgement bodies JetStream knows.
const ACK: &[u8] = b"+ACK";
const NAK: &[u8] = b"-NAK";
const TERM: &[u8] = b"+TERM";
pub(crate) const PROGRESS: &[u8] = b"+WPI";

/// The acker of one JetStream subscription, holding the reply subject of every
/// delivery handed out and not yet settled, under a tag of its own.
///
/// The tag is a number the acker hands out, never the consumer sequence: a server
/// restarted from its store can deliver again under consumer sequences it had already
/// used (a SIGKILLed nats-server 2.9 came back eleven sequences behind), and two
/// deliveries under one key would settle each other's messages.
pub(crate) struct JsAcker {
    client: Client,
    link: watch::Receiver<Link>,
    /// Where the naks of abandoned deliveries are owed, for `close` to wait on.
    broker: Weak<Connection>,
    /// While the subscription stops: the deliveries abandoned meanwhile, given back by
    /// its pump once its pull subscription is gone (else the server would deliver them
    /// to it again, and they would wait out `ack_wait`).
    parked: Arc<Mutex<Parking>>,
    held: Mutex<HashMap<u64, Held>>,
    /// The next delivery's tag.
    next: AtomicU64,
    /// Whether settlements wait for the server's answer.
    confirmed: bool,
}

/// Where abandoned deliveries go: given back at once (`Open`: the pump pulls;
/// `PumpGone`: nothing pulls for this subscription any more), or kept for the pump to
/// give back once its pull subscription is gone (`Parked`).
enum Parking {
    Open,
    Parked(Vec<Subject>),
    PumpGone,
}

/// A delivery handed out: where its acknowledgement goes, and since when it was last
/// told to be in progress.
pub(crate) struct Held {
    pub(crate) reply: Subject,
    /// Its stream sequence.
    pub(crate) stream_seq: u64,
    pub(crate) since: Instant,
}

impl JsAcker {
    pub(crate) fn new(broker: &Arc<Connection>, confirmed: bool) -> Self {
        Self {
            client: broker.client.clone(),
            link: broker.link.subscribe(),
            broker: Arc::downgrade(broker),
            parked: Arc::new(Mutex::new(Parking::Open)),
            held: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            confirmed,
        }
    }

    /// Records a delivery handed out: the tag it is settled by.
    pub(crate) fn hold(&self, stream_seq: u64, reply: Subject) -> u64 {
        let held = Held {
            reply,
            stream_seq,
            since: Instant::now(),
        };
        let tag = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(tag, held);
        tag
    }

    /// Whether the delivery of stream message `stream_seq` is held.
    pub(crate) fn holds_stream_seq(&self, stream_seq: u64) -> bool {
        self.lock()
            .values()
            .any(|held| held.stream_seq == stream_seq)
    }

    fn take(&self, tag: &Tag) -> Option<Subject> {
        match tag {
            Tag::Seq(seq) => self.lock().remove(seq).map(|held| held.reply),
            _ => None,
        }
    }

    /// The reply subjects of deliveries held at least `age` since their last signal;
    /// their clocks start again.
    pub(crate) fn running_longer(&self, age: Duration) -> Vec<Subject> {
        let now = Instant::now();
        self.lock()
            .values_mut()
            .filter(|held| now.duration_since(held.since) >= age)
            .map(|held| {
                held.since = now;
                held.reply.clone()
            })
            .collect()
    }

    /// How many deliveries are held.
    pub(crate) fn held(&self) -> usize {
        self.lock().len()
    }

    /// From now on abandoned deliveries wait for [`unpark`](Self::unpark), unless the
    /// pump is already gone.
    pub(crate) fn park(&self) {
        let mut parked = lock(&self.parked);
        if let Parking::Open = *parked {
            *parked = Parking::Parked(Vec::new());
        }
    }

    /// What was abandoned since [`park`](Self::park); later ones are given back at once.
    pub(crate) fn unpark(&self) -> Vec<Subject> {
        let mut parked = lock(&self.parked);
        match std::mem::replace(&mut *parked, Parking::PumpGone) {
            Parking::Parked(replies) => replies,
            Parking::Open | Parking::PumpGone => Vec::new(),
        }
    }

    /// Whether the connection is up: an acknowledgement sent while it is down would wait
    /// in the client and reach the server after the reconnect, long after its
    /// settlement was reported failed.
    fn is_up(&self) -> bool {
        !matches!(*self.link.borrow(), Link::Down(_))
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long a delivery abandoned while its subscription pulls waits before it is given
/// back (see [`JsAcker::abandon`]).
const ABANDON_WAIT: Duration = Duration::from_millis(500);

fn lock(parked: &Mutex<Parking>) -> std::sync::MutexGuard<'_, Parking> {
    parked.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The acknowledgement body of a settlement.
pub(crate) fn body(settlement: Settlement) -> Bytes {
    match settlement {
        Settlement::Accept | Settlement::Remove => Bytes::from_static(ACK),
        Settlement::Reject => Bytes::from_static(TERM),
        Settlement::Requeue => Bytes::from_static(NAK),
        Settlement::RequeueAfter(delay) => {
            Bytes::from(format!("-NAK {{\"delay\": {}}}", delay.as_nanos()))
        }
    }
}

/// What a failed acknowledgement request means for the settlement.
fn ack_error(error: &async_nats::RequestError) -> AckError {
    match error.kind() {
        RequestErrorKind::NoResponders => {
            AckError::Refused("no JetStream consumer answers the acknowledgement".into())
        }
        RequestErrorKind::TimedOut | RequestErrorKind::Other => AckError::Disconnected,
    }
}

/// Sends `body` to `reply` and waits for the server's answer.
pub(crate) async fn acknowledge(
    client: Client,
    reply: Subject,
    body: Bytes,
) -> Result<(), AckError> {
    client
        .request(reply, body)
        .await
        .map(drop)
        .map_err(|error| ack_error(&error))
}

impl Acker for JsAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        let Some(reply) = self.take(&tag) else {
            return Settling::done(Err(AckError::Refused(format!(
                "{tag:?} is not a delivery of this subscription held unsettled"
            ))));
        };
        if !self.is_up() {
            // The server delivers it again after ack_wait.
            return Settling::done(Err(AckError::Disconnected));
        }
        if self.confirmed {
            return Settling::pending(acknowledge(self.client.clone(), reply, body(settlement)));
        }
        let client = self.client.clone();
        Settling::pending(async move {
            client
                .publish(reply, body(settlement))
                .await
                .map_err(|_| AckError::Disconnected)
        })
    }

    /// Negatively acknowledges, so that the server delivers it again soon: after
    /// [`ABANDON_WAIT`] while the subscription pulls (a stop may follow: then it goes
    /// back with the rest once the pulling stopped), at once, with a delay, once the
    /// pump is gone.
    fn abandon(&self, tag: Tag, _message: Message) {
        let Some(reply) = self.take(&tag) else {
            return;
        };
        if !self.is_up() {
            return;
        }
        let open = match &mut *lock(&self.parked) {
            Parking::Parked(parked) => {
                parked.push(reply);
                return;
            }
            Parking::Open => true,
            Parking::PumpGone => false,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                ?tag,
                "nats: delivery abandoned outside a runtime: it comes back after ack_wait"
            );
            return;
        };
        let (client, parked) = (self.client.clone(), self.parked.clone());
        let task = runtime.spawn(async move {
            // Abandoned while the subscription pulls is most often the first step of a
            // stop (a fail_fast): given back at once, the server would deliver it into
            // the stopping subscription again and count it twice.
            if open {
                tokio::time::sleep(ABANDON_WAIT).await;
            }
            // Once the pump is gone, a pull request of its may still wait on the
            // server, which would take a delivery given back at once: given back after
            // it has expired.
            let nak = match &mut *lock(&parked) {
                Parking::Parked(parked) => {
                    parked.push(reply);
                    return;
                }
                Parking::Open => Bytes::from_static(NAK),
                Parking::PumpGone => body(Settlement::RequeueAfter(crate::pull::EXPIRES)),
            };
            if let Err(error) = acknowledge(client, reply, nak).await {
                tracing::warn!(%error, "nats: abandoned delivery not given back: it comes back after ack_wait");
            }
        });
        if let Some(broker) = self.broker.upgrade() {
            broker.owe(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        assert_eq!(body(Settlement::Accept), ACK);
        assert_eq!(body(Settlement::Remove), ACK);
        assert_eq!(body(Settlement::Reject), TERM);
        assert_eq!(body(Settlement::Requeue), NAK);
        assert_eq!(
            body(Settlement::RequeueAfter(Duration::from_millis(1500))),
            &b"-NAK {\"delay\": 1500000000}"[..]
        );
    }
}
