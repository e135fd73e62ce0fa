//! The pull requests of a JetStream subscription, sent and read by the adapter itself.
//!
//! async-nats's pull stream reads the status line of every message on its inbox before
//! anything else: a stored message whose header block begins with `NATS/1.0 409 …`
//! (any client can publish one with a raw `HPUB`) ended the stream for good, and one
//! with `100`, `404`, `408` or `503` was swallowed and came back after every
//! `ack_wait`. Here a message that carries a JetStream acknowledgement subject
//! (`$JS.ACK.…`) is a stored message whatever its header block says; only a message
//! without one is the server's status. Sending the requests itself also lets a
//! subscription stop pulling and still take in what its outstanding requests bring
//! (a drain, a stop): it knows when the last of them is over.

use std::pin::Pin;
use std::time::Duration;

use async_nats::{Client, HeaderMap, Message, StatusCode, Subject, Subscriber};
use futures_util::StreamExt;
use tokio::time::{Instant, Sleep};

/// A stored message's acknowledgement subject begins so.
pub(crate) const ACK_PREFIX: &str = "$JS.ACK.";

/// How long one pull request lasts, and the heartbeat the server sends while it waits.
/// A pull request outlives its subscription on the server (2.9 still delivers to it
/// after the unsubscribe, into nothing, until it expires), so what a stopping
/// subscription gives back is delayed by this much (`STALE_PULL`): kept short.
pub(crate) const EXPIRES: Duration = Duration::from_secs(2);

/// How long a stopping puller waits past the lifetime of its last request.
const STOP_MARGIN: Duration = Duration::from_secs(1);
/// How long a puller waits before it asks again after the server had no responder.
const NO_RESPONDERS_PAUSE: Duration = Duration::from_secs(1);

/// The pull requests of one consumer, on an inbox of their own.
pub(crate) struct Puller {
    client: Client,
    /// `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`.
    next_subject: String,
    inbox: Subject,
    subscriber: Subscriber,
    batch: usize,
    expires: Duration,
    heartbeat: Duration,
    /// Messages the outstanding requests may still bring.
    pending: usize,
    /// Whether requests are sent (false once stopped).
    pulling: bool,
    /// When the last request was sent.
    last_request: Option<Instant>,
    /// Until when requests from before a reset may still be alive on the server.
    unsure_until: Option<Instant>,
    /// Not before this time is the next request sent.
    pause_until: Option<Instant>,
    /// When the server last sent anything on the inbox (or a request went out).
    heard: Instant,
    /// The timer of [`wake_at`](Self::wake_at), armed again only when that moves
    /// earlier or it went off, not for every message.
    timer: Pin<Box<Sleep>>,
}

/// What the server sent that is not a stored message, as far as the subscription cares.
#[derive(Debug)]
pub(crate) enum Trouble {
    /// `409 Consumer Deleted`: to be confirmed by the consumer's info.
    ConsumerDeleted,
    /// No message, heartbeat or status for twice the heartbeat while requests wait.
    MissedHeartbeat,
    /// The request reached no JetStream (`503`).
    NoResponders,
    /// Another status that ends requests (`409 Consumer is push based`, an unknown one).
    Status(u16, String),
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ConsumerDeleted => f.write_str("the server says the consumer was deleted"),
            Self::MissedHeartbeat => f.write_str("missed idle heartbeats"),
            Self::NoResponders => f.write_str("no JetStream answered the pull request"),
            Self::Status(code, text) => write!(f, "the server sent status {code} {text}"),
        }
    }
}

/// What [`Puller::next`] gives.
pub(crate) enum Pulled {
    /// A stored message: it has an acknowledgement subject.
    Message(Box<Message>),
    /// The server's word on the requests.
    Trouble(Trouble),
    /// Stopped, and every outstanding request is over (or its time is up).
    Done {
        /// Whether every request is known to be over: none waits on the server.
        clean: bool,
    },
}

impl Puller {
    /// Subscribes to a new inbox for the requests to `consumer` of `stream`; no request
    /// is sent before the first [`next`](Self::next).
    pub(crate) async fn new(
        client: &Client,
        stream: &str,
        consumer: &str,
        batch: usize,
        expires: Duration,
        heartbeat: Duration,
    ) -> Result<Self, async_nats::SubscribeError> {
        let inbox = Subject::from(client.new_inbox());
        let subscriber = client.subscribe(inbox.clone()).await?;
        Ok(Self {
            client: client.clone(),
            next_subject: format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
            inbox,
            subscriber,
            batch: batch.max(1),
            expires,
            heartbeat,
            pending: 0,
            pulling: true,
            last_request: None,
            unsure_until: None,
            pause_until: None,
            heard: Instant::now(),
            timer: Box::pin(tokio::time::sleep(heartbeat * 2)),
        })
    }

    /// Forgets what the outstanding requests may bring (after a reconnect: the server
    /// may have lost them); the next call sends a request. Requests from before stay
    /// possible for their lifetime.
    pub(crate) fn reset(&mut self) {
        self.pending = 0;
        self.heard = Instant::now();
        self.unsure_until = Some(Instant::now() + self.expires);
    }

    /// Sends no further request; [`next`](Self::next) yields what the outstanding ones
    /// bring, then [`Pulled::Done`].
    pub(crate) fn stop(&mut self) {
        self.pulling = false;
    }

    /// The next stored message or status worth a word; requests are sent as needed.
    pub(crate) async fn next(&mut self) -> Pulled {
        loop {
            if self.pulling {
                self.request().await;
            } else if let Some(done) = self.done() {
                return done;
            }
            let wait = self.wake_at();
            if self.timer.deadline() > wait || self.timer.is_elapsed() {
                self.timer.as_mut().reset(wait);
            }
            let message = tokio::select! {
                message = self.subscriber.next() => message,
                () = self.timer.as_mut() => {
                    if let Some(done) = self.done() {
                        return done;
                    }
                    if self.pending > 0 && self.heard + self.heartbeat * 2 <= Instant::now() {
                        self.reset();
                        return Pulled::Trouble(Trouble::MissedHeartbeat);
                    }
                    continue;
                }
            };
            // The inbox's subscription ends only with the connection.
            let Some(message) = message else {
                self.pulling = false;
                self.pending = 0;
                self.unsure_until = None;
                return Pulled::Done { clean: false };
            };
            self.heard = Instant::now();
            if let Some(pulled) = self.take(message) {
                return pulled;
            }
        }
    }

    /// Reads one message of the inbox: `None` for a status that needs no word.
    fn take(&mut self, message: Message) -> Option<Pulled> {
        if message
            .reply
            .as_ref()
            .is_some_and(|reply| reply.starts_with(ACK_PREFIX))
        {
            self.pending = self.pending.saturating_sub(1);
            return Some(Pulled::Message(Box::new(message)));
        }
        let description = message.description.clone().unwrap_or_default();
        match message.status {
            Some(StatusCode::IDLE_HEARTBEAT) => None,
            Some(StatusCode::TIMEOUT) | Some(StatusCode::NOT_FOUND) => {
                self.over(message.headers.as_ref());
                None
            }
            Some(StatusCode::REQUEST_TERMINATED) => {
                self.over(message.headers.as_ref());
                if description.eq_ignore_ascii_case("consumer deleted") {
                    Some(Pulled::Trouble(Trouble::ConsumerDeleted))
                } else if description.to_ascii_lowercase().contains("push based") {
                    Some(Pulled::Trouble(Trouble::Status(409, description)))
                } else {
                    // Exceeded MaxWaiting, MaxRequestBatch…: the request is over.
                    tracing::debug!(%description, "nats: a pull request ended early");
                    None
                }
            }
            Some(StatusCode::NO_RESPONDERS) => {
                self.pending = 0;
                self.pause_until = Some(Instant::now() + NO_RESPONDERS_PAUSE);
                Some(Pulled::Trouble(Trouble::NoResponders))
            }
            Some(status) => {
                self.over(message.headers.as_ref());
                Some(Pulled::Trouble(Trouble::Status(
                    status.as_u16(),
                    description,
                )))
            }
            None => {
                tracing::warn!(subject = %message.subject,
                    "nats: a message on the pull inbox without an acknowledgement subject: ignored");
                None
            }
        }
    }

    /// A request is over: what it still owed (`Nats-Pending-Messages`) is not coming.
    fn over(&mut self, headers: Option<&HeaderMap>) {
        let owed = headers
            .and_then(|headers| headers.get("Nats-Pending-Messages"))
            .and_then(|value| value.as_str().parse().ok())
            .unwrap_or(self.batch);
        self.pending = self.pending.saturating_sub(owed);
    }

    /// Sends a request if the outstanding ones bring at most half a batch.
    async fn request(&mut self) {
        if self.pending > self.batch / 2 {
            return;
        }
        let now = Instant::now();
        if self.pause_until.is_some_and(|until| now < until) {
            return;
        }
        let body = format!(
            "{{\"batch\":{},\"expires\":{},\"idle_heartbeat\":{}}}",
            self.batch,
            self.expires.as_nanos(),
            self.heartbeat.as_nanos()
        );
        match self
            .client
            .publish_with_reply(self.next_subject.clone(), self.inbox.clone(), body.into())
            .await
        {
            Ok(()) => {
                if self.pending == 0 {
                    self.heard = now;
                }
                self.pending += self.batch;
                self.last_request = Some(now);
            }
            Err(error) => {
                tracing::debug!(%error, "nats: a pull request was not sent");
                self.pause_until = Some(now + NO_RESPONDERS_PAUSE);
            }
        }
    }

    /// Once stopped: done if nothing more can come, or its time is up.
    fn done(&self) -> Option<Pulled> {
        if self.pulling {
            return None;
        }
        let now = Instant::now();
        let sure = self.unsure_until.is_none_or(|until| now >= until);
        if self.pending == 0 && sure {
            return Some(Pulled::Done { clean: true });
        }
        if now >= self.deadline() {
            return Some(Pulled::Done { clean: false });
        }
        None
    }

    /// When the last request is over at the latest, with a margin.
    fn deadline(&self) -> Instant {
        let last = self.last_request.unwrap_or_else(Instant::now);
        last + self.expires + STOP_MARGIN
    }

    /// When to look again without a message: the heartbeat check, a pause's end, the
    /// stop's deadline.
    fn wake_at(&self) -> Instant {
        let mut at = self.heard + self.heartbeat * 2;
        if !self.pulling {
            at = at.min(self.deadline());
            if let Some(until) = self.unsure_until.filter(|_| self.pending == 0) {
                at = at.min(until);
            }
        }
        if let Some(until) = self.pause_until.filter(|_| self.pulling) {
            at = at.min(until);
        }
        at.max(Instant::now() + Duration::from_millis(1))
    }
}

/// What a stored message's acknowledgement subject says: its stream, stream sequence and
/// delivery count. Both forms: `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.
/// <consumer seq>.<time>.<pending>` and the one with a domain and an account hash in
/// front (and a token after).
pub(crate) fn ack_info(reply: &str) -> Option<(&str, u64, u64)> {
    let rest = reply.strip_prefix(ACK_PREFIX)?;
    // Counted and read without collecting: this runs for every message.
    let at = match rest.split('.').count() {
        7 => 0,
        n if n >= 9 => 2,
        _ => return None,
    };
    let mut tokens = rest.split('.').skip(at);
    let stream = tokens.next()?;
    let delivered = tokens.nth(1)?.parse().ok()?;
    let stream_seq = tokens.next()?.parse().ok()?;
    Some((stream, delivered, stream_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgement_subjects_are_read() {
        assert_eq!(
            ack_info("$JS.ACK.ORDERS.c.3.17.20.1700000000.4"),
            Some(("ORDERS", 3, 17))
        );
        assert_eq!(
            ack_info("$JS.ACK.hub.ACCHASH.ORDERS.c.2.9.11.1700000000.0.xyz"),
            Some(("ORDERS", 2, 9))
        );
        assert_eq!(ack_info("$JS.ACK.ORDERS.c.x.17.20.1.4"), None);
        assert_eq!(ack_info("_INBOX.abc"), None);
        assert_eq!(ack_info("$JS.ACK.a.b"), None);
    }
}
