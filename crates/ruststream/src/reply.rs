//! Replies: a handler's answer, published where the request or the mount says.

use std::fmt;

use bytes::Bytes;
use ruststream_core::{
    Address, CONTENT_TYPE, CORRELATION_ID, Delivery, HeaderValue, Headers, MESSAGE_ID, Message,
    REPLY_TO,
};
use serde::Serialize;

use crate::codec::{Codec, CodecError};
use crate::extract::AppContext;
use crate::mount::Mount;
use crate::outcome::{IntoOutcome, Outcome, ack};

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
    fn into_outcome(self) -> Outcome {
        let value = self.value;
        let mut outcome = self.outcome;
        outcome.reply = Some(PendingReply(Box::new(move |codec| codec.encode(&value))));
        outcome
    }
}

type Encode = Box<dyn FnOnce(Codec) -> Result<Bytes, CodecError> + Send>;

pub(crate) struct PendingReply(Encode);

impl fmt::Debug for PendingReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingReply")
    }
}

impl PendingReply {
    pub(crate) async fn send(self, request: &Delivery, mount: &Mount, app: &AppContext) {
        let to = match request.headers().get_str(REPLY_TO) {
            Some(to) => Address::new(to),
            None => match &mount.reply_to {
                Some(to) => to.clone(),
                None => {
                    tracing::warn!(address = %mount.address, "reply without reply-to: not sent");
                    return;
                }
            },
        };
        let payload = match (self.0)(mount.codec) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::error!(%error, "reply did not encode: not sent");
                return;
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
        if let Err(error) = app
            .publisher()
            .publish_message(to, Message { payload, headers })
            .await
        {
            tracing::error!(%error, "reply not published");
        }
    }
}
