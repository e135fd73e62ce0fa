//! RabbitMQ 4's management over AMQP 1.0 ("HTTP over AMQP").
//!
//! A link pair on the node `/management`: a request is a message with `subject` the
//! method (`GET`, `PUT`), `to` the resource (`/queues/{name}`), `message-id` and
//! `reply-to: $me`; the answer comes back on the receiving link with `correlation-id`
//! the request's id, `subject` the status (`200`, `404`, …) and an `amqp-value` body
//! (a map describing the resource, or an error text).
//!
//! RabbitMQ pairs the two links by name and fe2o3-amqp refuses two links of one name on
//! a session, so the pair gets a connection of its own whose stream renames the
//! receiving link on the wire ([`Pair`]).

use std::time::Duration;

use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::link::{Receiver, Sender};
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::{Delivery, Session};
use fe2o3_amqp_types::definitions::{Fields, ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp_types::messaging::{
    AmqpValue, ApplicationProperties, Body, Message, MessageId, Properties,
};
use fe2o3_amqp_types::primitives::{SimpleValue, Symbol, Value};

use crate::connection::Connector;
use crate::transport::Pair;

const NODE: &str = "/management";
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why management could not answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManagementError {
    /// The broker has no management node (not RabbitMQ 4) or refused the link pair.
    #[error("no amqp management node: {0}")]
    Unavailable(String),
    /// The connection or a link failed, or no answer came in time.
    #[error("management request failed: {0}")]
    Failed(String),
}

/// A management answer.
#[derive(Debug)]
pub(crate) struct Response {
    /// The HTTP-like status (`200`, `201`, `404`, `409`, …).
    pub(crate) status: u16,
    /// The body: a map for a resource, a string for an error.
    pub(crate) body: Value,
}

impl Response {
    /// The body as error text, for messages.
    pub(crate) fn text(&self) -> String {
        match &self.body {
            Value::String(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }
}

/// An open management link pair on a connection of its own.
pub(crate) struct Management {
    connection: ConnectionHandle<()>,
    session: SessionHandle<()>,
    sender: Sender,
    receiver: Receiver,
    next: u64,
}

impl std::fmt::Debug for Management {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Management").finish_non_exhaustive()
    }
}

impl Management {
    /// Opens a connection and attaches the link pair.
    pub(crate) async fn open(connector: &Connector) -> Result<Self, ManagementError> {
        tokio::time::timeout(TIMEOUT, Self::open_inner(connector))
            .await
            .map_err(|_| ManagementError::Failed("opening timed out".into()))?
    }

    async fn open_inner(connector: &Connector) -> Result<Self, ManagementError> {
        let sending = format!("{}s", connector.link_name("mgmt"));
        let pair = Pair::new(&sending);
        let receiving = pair.receiving();
        let mut connection = connector
            .open_management(pair)
            .await
            .map_err(|e| ManagementError::Failed(e.to_string()))?;
        let mut session = match Session::begin(&mut connection).await {
            Ok(s) => s,
            Err(e) => {
                let _ = connection.close().await;
                return Err(ManagementError::Failed(format!("session: {e}")));
            }
        };
        let links = async {
            let sender = Sender::builder()
                .name(sending)
                .source(NODE)
                .target(NODE)
                .sender_settle_mode(SenderSettleMode::Settled)
                .receiver_settle_mode(ReceiverSettleMode::First)
                .properties(paired())
                .attach(&mut session)
                .await
                .map_err(|e| ManagementError::Unavailable(e.to_string()))?;
            connector.announced_max_message(sender.max_message_size());
            let receiver = Receiver::builder()
                .name(receiving)
                .source(NODE)
                .target(NODE)
                .sender_settle_mode(SenderSettleMode::Settled)
                .receiver_settle_mode(ReceiverSettleMode::First)
                .properties(paired())
                .attach(&mut session)
                .await
                .map_err(|e| ManagementError::Unavailable(e.to_string()))?;
            Ok::<_, ManagementError>((sender, receiver))
        };
        match links.await {
            Ok((sender, receiver)) => Ok(Self {
                connection,
                session,
                sender,
                receiver,
                next: 0,
            }),
            Err(e) => {
                let _ = session.end().await;
                let _ = connection.close().await;
                Err(e)
            }
        }
    }

    /// Sends `method path` (with `body` for `PUT`) and waits for the answer.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Response, ManagementError> {
        tokio::time::timeout(TIMEOUT, self.request_inner(method, path, body))
            .await
            .map_err(|_| ManagementError::Failed(format!("{method} {path}: no answer")))?
    }

    async fn request_inner(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Response, ManagementError> {
        self.next += 1;
        let id = format!("ruststream-{}", self.next);
        let message = Message::builder()
            .properties(Properties {
                message_id: Some(MessageId::String(id.clone())),
                to: Some(path.to_owned()),
                subject: Some(method.to_owned()),
                reply_to: Some("$me".to_owned()),
                ..Properties::default()
            })
            .value(body.unwrap_or(Value::Null))
            .build();
        self.sender
            .send(message)
            .await
            .map_err(|e| ManagementError::Failed(format!("{method} {path}: {e}")))?;
        loop {
            let delivery: Delivery<Body<Value>> = self
                .receiver
                .recv()
                .await
                .map_err(|e| ManagementError::Failed(format!("{method} {path}: {e}")))?;
            let message = delivery.into_message();
            let answers = message
                .properties
                .as_ref()
                .and_then(|p| p.correlation_id.as_ref())
                .is_some_and(|c| *c == MessageId::String(id.clone()));
            if !answers {
                continue; // an answer to a request that timed out
            }
            let status = status(&message);
            let body = match message.body {
                Body::Value(AmqpValue(v)) => v,
                _ => Value::Null,
            };
            return Ok(Response { status, body });
        }
    }

    /// Detaches the pair and closes its connection.
    pub(crate) async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            let _ = self.sender.close().await;
            let _ = self.receiver.close().await;
            let _ = self.session.end().await;
            let _ = self.connection.close().await;
        })
        .await;
    }
}

/// `paired: true`, which RabbitMQ requires of both links.
fn paired() -> Fields {
    let mut fields = Fields::new();
    fields.insert(Symbol::from("paired"), Value::Bool(true));
    fields
}

/// The status of an answer: its `subject`, or the `http:response` application property.
fn status<B>(message: &Message<B>) -> u16 {
    let subject = message
        .properties
        .as_ref()
        .and_then(|p| p.subject.as_deref())
        .and_then(|s| s.parse().ok());
    let property = || {
        let ApplicationProperties(map) = message.application_properties.as_ref()?;
        match map.get("http:response")? {
            SimpleValue::String(s) => s.parse().ok(),
            _ => None,
        }
    };
    subject.or_else(property).unwrap_or(0)
}

/// The percent-encoded path of a queue's management resource.
pub(crate) fn queue_path(name: &str) -> String {
    format!("/queues/{}", ruststream_rabbitmq::percent::encode(name))
}
