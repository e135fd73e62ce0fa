//! The core NATS form: a plain (or queue group) subscription, at most once.

use std::sync::Arc;

use ruststream_core::{
    AckError, Acker, Attached, Capabilities, Message, Settlement, Settling, SubscribeError,
    SubscribeSpec, Subscription, Tag,
};

use crate::connection::Connection;
use crate::reader::Reader;
use crate::{Core, names};

/// The acker of a form that cannot settle.
pub(crate) struct NoAck;

impl Acker for NoAck {
    fn settle(&self, _: Tag, _: Message, _: Settlement) -> Settling {
        Settling::done(Err(AckError::Unsupported))
    }
}

pub(crate) async fn subscribe(
    inner: &Arc<Connection>,
    spec: SubscribeSpec,
    options: Core,
) -> Result<Subscription, SubscribeError> {
    let subject = spec.address.as_str();
    names::check_subject(subject, true).map_err(SubscribeError::BadAddress)?;
    let subscriber = match &options.queue_group {
        Some(group) => {
            if group.is_empty() || group.chars().any(char::is_whitespace) {
                return Err(SubscribeError::BadOption(format!(
                    "queue group {group:?} is empty or holds white space"
                )));
            }
            inner
                .client
                .queue_subscribe(subject.to_owned(), group.clone())
                .await
        }
        None => inner.client.subscribe(subject.to_owned()).await,
    }
    .map_err(|error| SubscribeError::Disconnected(format!("subscribing to {subject}: {error}")))?;
    // The subscription is registered once the server has it, so that a publish after
    // this returns reaches it: a round trip on this connection says so.
    in_place(&inner.client).await.map_err(|error| {
        SubscribeError::Disconnected(format!("subscribing to {subject}: {error}"))
    })?;
    if !names::is_wildcard(subject) {
        inner.route_core(spec.address.clone());
    }
    let attached = Attached::new();
    let reader = Reader::core(inner, spec.address, subscriber, attached.clone());
    Ok(Subscription {
        deliveries: Box::pin(reader.into_stream()),
        capabilities: Capabilities::NONE,
        attached,
    })
}

/// Returns once the server has handled what this connection sent before the call. The
/// client's `flush` only writes the buffer out; the server handles a connection's
/// operations in order, so a message this connection publishes to an inbox of its own
/// coming back means every `SUB` before it is in place.
async fn in_place(client: &async_nats::Client) -> Result<(), String> {
    use futures_util::StreamExt;

    let inbox = client.new_inbox();
    let mut probe = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| e.to_string())?;
    client
        .publish(inbox, bytes::Bytes::new())
        .await
        .map_err(|e| e.to_string())?;
    client.flush().await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(std::time::Duration::from_secs(10), probe.next()).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("the connection closed".into()),
        Err(_) => Err("no answer from the server in 10 s".into()),
    }
}
