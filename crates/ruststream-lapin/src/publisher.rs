//! Publishing with publisher confirms.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Confirmation, ExchangeKind};
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};
use tokio::sync::Semaphore;

use crate::address::{self, Target};
use crate::connection::Connector;
use crate::message;
use crate::probe::reply_code;

/// Publishes on confirm channels of the broker's connection, every message `mandatory`
/// and persistent. Each channel carries one publish at a time (up to
/// [`PUBLISH_CHANNELS`] at once): RabbitMQ may confirm several messages with one
/// `basic.ack`, and a `basic.return` says nothing of which publish it answers, so only
/// a channel with a single publish in flight ties a return to its message. A publish resolves when the broker confirmed it; a
/// `basic.nack`, a `basic.return` (no queue took it), a missing exchange, and a channel
/// the broker closed over the message are `PublishErrorKind::Refused`, except a message
/// over the broker's `max_message_size`, which is `TooLarge` with the broker's limit. A lost
/// connection is retried until the connection options' `publish_timeout`, then the
/// message is handed back as `Disconnected` (a message written before the connection
/// dropped may then be there twice).
#[derive(Debug)]
pub struct LapinPublisher {
    connector: Arc<Connector>,
    idle: Mutex<Vec<Channel>>,
    permits: Semaphore,
    exchanges: Mutex<HashSet<String>>,
    /// The broker's `max_message_size` as its last refusal of a message over it said (AMQP
    /// 0-9-1 announces none), or 0 while none has.
    max_message: AtomicUsize,
}

/// How many publishes are in flight at once, each on a confirm channel of its own.
pub const PUBLISH_CHANNELS: usize = 32;

enum Failure {
    Refused(String),
    TooLarge { size: usize, limit: usize },
    Retry(String),
}

impl LapinPublisher {
    pub(crate) fn new(connector: Arc<Connector>) -> Self {
        Self {
            connector,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(PUBLISH_CHANNELS),
            exchanges: Mutex::new(HashSet::new()),
            max_message: AtomicUsize::new(0),
        }
    }

    /// An idle confirm channel, or a new one.
    async fn channel(&self) -> Result<Channel, Failure> {
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match idle {
                Some(channel) if channel.status().connected() => return Ok(channel),
                Some(_) => continue,
                None => break,
            }
        }
        let connection = self.connector.connection().await.map_err(Failure::Retry)?;
        let channel = connection.create_channel().await.map_err(retry)?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(retry)?;
        Ok(channel)
    }

    fn give_back(&self, channel: Channel) {
        if channel.status().connected() {
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(channel);
        }
    }

    /// A named exchange must exist: a publish to a missing one would close the shared
    /// channel under every publish on it. Checked once per exchange.
    async fn check_exchange(&self, exchange: &str) -> Result<(), Failure> {
        if exchange.is_empty() || self.known(exchange) {
            return Ok(());
        }
        let connection = self.connector.connection().await.map_err(Failure::Retry)?;
        let channel = connection.create_channel().await.map_err(retry)?;
        let passive = ExchangeDeclareOptions {
            passive: true,
            ..ExchangeDeclareOptions::default()
        };
        match channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Direct,
                passive,
                FieldTable::default(),
            )
            .await
        {
            Ok(()) => {
                let _ = channel.close(200, "checked".into()).await;
                self.exchanges
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(exchange.to_owned());
                Ok(())
            }
            Err(e) if reply_code(&e) == Some(404) => {
                Err(Failure::Refused(format!("no exchange {exchange:?}")))
            }
            Err(e) => Err(classify(e)),
        }
    }

    fn known(&self, exchange: &str) -> bool {
        self.exchanges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(exchange)
    }

    async fn attempt(
        &self,
        target: &Target,
        payload: &[u8],
        properties: &BasicProperties,
    ) -> Result<(), Failure> {
        self.check_exchange(&target.exchange).await?;
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Failure::Retry("closed".into()))?;
        let channel = self.channel().await?;
        let sent = self.publish_on(&channel, target, payload, properties).await;
        self.give_back(channel);
        sent
    }

    async fn publish_on(
        &self,
        channel: &Channel,
        target: &Target,
        payload: &[u8],
        properties: &BasicProperties,
    ) -> Result<(), Failure> {
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let confirm = channel
            .basic_publish(
                target.exchange.as_str().into(),
                target.routing_key.as_str().into(),
                options,
                payload,
                properties.clone(),
            )
            .await
            .map_err(classify)?;
        match confirm.await.map_err(classify)? {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) => Err(Failure::Refused(format!(
                "returned unroutable ({} {})",
                returned.reply_code, returned.reply_text
            ))),
            Confirmation::Nack(_) => {
                Err(Failure::Refused("the broker did not take it (nack)".into()))
            }
            Confirmation::NotRequested => {
                Err(Failure::Retry("the channel does not confirm".into()))
            }
        }
    }

    async fn send(&self, to: Address, message: Message) -> Result<(), PublishError> {
        let fail = |kind, message| {
            Err(PublishError {
                address: to.to_string(),
                kind,
                message,
            })
        };
        if self.connector.is_closed() {
            return fail(PublishErrorKind::Closed, message);
        }
        let target = match address::target(to.as_str()) {
            Ok(t) => t,
            Err(e) => return fail(PublishErrorKind::BadAddress(e.0), message),
        };
        self.send_to(&target, to, message).await
    }

    /// Publishes `message` to `target` (`to` names it in errors and logs), confirmed.
    pub(crate) async fn send_to(
        &self,
        target: &Target,
        to: Address,
        message: Message,
    ) -> Result<(), PublishError> {
        let fail = |kind, message| {
            Err(PublishError {
                address: to.to_string(),
                kind,
                message,
            })
        };
        if self.connector.is_closed() {
            return fail(PublishErrorKind::Closed, message);
        }
        let properties = match message::properties(&message.headers) {
            Ok(p) => p,
            Err(why) => return fail(PublishErrorKind::Refused(why), message),
        };
        let deadline = Instant::now().checked_add(self.connector.options().publish_timeout);
        let mut backoff = self.connector.backoff();
        loop {
            let attempt = self.attempt(target, &message.payload, &properties);
            // The confirm is waited for until the deadline too: a connection that takes
            // frames and never answers (a network that drops everything) is not noticed
            // before its heartbeat times out, minutes later.
            let attempted = match deadline {
                Some(at) => tokio::time::timeout_at(at.into(), attempt).await,
                None => Ok(attempt.await),
            };
            let Ok(attempted) = attempted else {
                tracing::warn!(address = %to, "lapin: publish gave up: no confirm within the publish timeout");
                return fail(PublishErrorKind::Disconnected, message);
            };
            match attempted {
                Ok(()) => return Ok(()),
                Err(Failure::Refused(why)) => return fail(PublishErrorKind::Refused(why), message),
                Err(Failure::TooLarge { size, limit }) => {
                    self.max_message.store(limit, Ordering::Relaxed);
                    return fail(PublishErrorKind::TooLarge { size, limit }, message);
                }
                Err(Failure::Retry(why)) => {
                    let delay = backoff.next_delay();
                    if self.connector.is_closed() {
                        return fail(PublishErrorKind::Closed, message);
                    }
                    let late = deadline
                        .is_some_and(|d| Instant::now().checked_add(delay).is_none_or(|at| at > d));
                    if late {
                        tracing::warn!(address = %to, error = %why, "lapin: publish gave up");
                        return fail(PublishErrorKind::Disconnected, message);
                    }
                    tracing::debug!(address = %to, error = %why, "lapin: publish retries");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    pub(crate) async fn close(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        for channel in idle {
            if channel.status().connected() {
                let _ = channel.close(200, "closing".into()).await;
            }
        }
    }
}

fn retry(e: lapin::Error) -> Failure {
    Failure::Retry(e.to_string())
}

/// The broker closing the channel over the message (a soft error) refuses it, for good
/// where it says the message is over its `max_message_size`; anything else (the
/// connection, a channel not open) is worth another try.
fn classify(e: lapin::Error) -> Failure {
    if !e.is_amqp_soft_error() {
        return Failure::Retry(e.to_string());
    }
    let why = e.to_string();
    match over_max_size(&why) {
        Some((size, limit)) => Failure::TooLarge { size, limit },
        None => Failure::Refused(why),
    }
}

/// The sizes in RabbitMQ's refusal of a message over its limit: `PRECONDITION_FAILED -
/// message size 16777217 is larger than configured max size 16777216` (3.8 to 4.x).
fn over_max_size(why: &str) -> Option<(usize, usize)> {
    let (_, rest) = why.split_once("message size ")?;
    let (size, rest) = rest.split_once(" is larger than configured max size ")?;
    let limit = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    Some((size.parse().ok()?, limit.parse().ok()?))
}

impl Publish for LapinPublisher {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(self.send(to, message))
    }

    /// A body over the broker's `max_message_size`, once a refusal has said it (RabbitMQ
    /// compares the body alone).
    fn check(&self, _: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        match self.max_message.load(Ordering::Relaxed) {
            0 => Ok(()),
            limit if message.payload.len() > limit => Err(PublishErrorKind::TooLarge {
                size: message.payload.len(),
                limit,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::over_max_size;

    #[test]
    fn rabbitmqs_refusal_of_a_large_message_gives_both_sizes() {
        let said = "protocol error: AMQP soft error: PRECONDITION-FAILED: PRECONDITION_FAILED \
                    - message size 16777217 is larger than configured max size 16777216";
        assert_eq!(over_max_size(said), Some((16_777_217, 16_777_216)));
        assert_eq!(
            over_max_size("PRECONDITION_FAILED - inequivalent arg 'x-max-length'"),
            None
        );
        assert_eq!(
            over_max_size("message size x is larger than configured max size 1"),
            None
        );
    }
}
