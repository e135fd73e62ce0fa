//! Replies: a handler's answer, published where the request or the mount says, before
//! the request is settled.

use ruststream_core::{
    Address, CONTENT_TYPE, CORRELATION_ID, Delivery, HeaderValue, Headers, MESSAGE_ID, Message,
    REPLY_TO,
};
use serde::Serialize;

use crate::extract::AppContext;
use crate::mount::Mount;
use crate::outcome::{IntoOutcome, Outcome, PendingReply, ack};

/// A handler's reply: encoded with the mount's codec and published, before the
/// request is settled, to the request's `reply-to` (or the mount's
/// [`reply_to`](crate::Mount::reply_to)), with the request's correlation id (or its
/// message id).
///
/// ```
/// use ruststream::Reply;
///
/// async fn price(item: String) -> Reply<u64> {
///     Reply::new(item.len() as u64)
/// }
/// # let _ = ruststream::Router::new().mount("prices", price);
/// ```
pub struct Reply<T> {
    value: T,
    outcome: Outcome,
}

impl<T> Reply<T> {
    /// A reply that acknowledges the request.
    pub fn new(value: T) -> Self {
        Self {
            value,
            outcome: ack(),
        }
    }

    /// A reply that settles the request with `outcome`.
    pub fn with_outcome(value: T, outcome: Outcome) -> Self {
        Self { value, outcome }
    }
}

impl<T: Serialize + Send + 'static> IntoOutcome for Reply<T> {
    fn reply_type() -> Option<(std::any::TypeId, &'static str)> {
        Some((std::any::TypeId::of::<T>(), std::any::type_name::<T>()))
    }

    fn into_outcome(self) -> Outcome {
        let value = self.value;
        let mut outcome = self.outcome;
        outcome.reply = Some(PendingReply::new(move |codec| codec.encode(&value)));
        outcome
    }
}

/// A reply that was not published: the request is settled as a retry.
pub(crate) struct NotPublished;

/// Publishes `reply` to `request`'s answer address. A reply that cannot be sent at all
/// (no address, an address the mount does not answer, a value that does not encode) is
/// logged and given up; one the broker did not take is `Err`, and the request is retried.
pub(crate) async fn send(
    reply: PendingReply,
    request: &Delivery,
    mount: &Mount,
    app: &AppContext,
) -> Result<(), NotPublished> {
    let message_id = || request.headers().get_str(MESSAGE_ID).unwrap_or("-");
    let to = match request.headers().get_str(REPLY_TO) {
        Some(to) => {
            if let Some(filter) = &mount.allow_reply_to
                && !(filter.0)(to)
            {
                tracing::warn!(address = %mount.address, message_id = message_id(), reply_to = to, "reply-to not allowed by the mount: no reply sent");
                return Ok(());
            }
            Address::new(to)
        }
        None => match &mount.reply_to {
            Some(to) => to.clone(),
            None => {
                tracing::warn!(address = %mount.address, message_id = message_id(), "reply without reply-to: not sent");
                return Ok(());
            }
        },
    };
    let payload = match reply.encode(mount.codec) {
        Ok(payload) => payload,
        Err(error) => {
            tracing::error!(address = %mount.address, message_id = message_id(), %error, "reply did not encode: not sent");
            return Ok(());
        }
    };
    let mut headers = Headers::new();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(mount.codec.content_type()),
    );
    let correlation = request
        .headers()
        .get(CORRELATION_ID)
        .or_else(|| request.headers().get(MESSAGE_ID));
    if let Some(id) = correlation {
        headers.insert(CORRELATION_ID, id.clone());
    }
    match app
        .publisher()
        .publish_message(to, Message { payload, headers })
        .await
    {
        Ok(()) => Ok(()),
        Err(error) => {
            tracing::warn!(address = %mount.address, message_id = message_id(), %error, "reply not published: the request is retried");
            Err(NotPublished)
        }
    }
}
