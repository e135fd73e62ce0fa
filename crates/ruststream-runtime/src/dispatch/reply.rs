//! Publishing a handler's reply before its request is settled.

use ruststream_core::{
    Address, CONTENT_TYPE, CORRELATION_ID, Delivery, HeaderValue, Headers, MESSAGE_ID, Message,
    REPLY_TO,
};

use crate::extract::AppContext;
use crate::mount::Mount;
use crate::outcome::PendingReply;

/// A reply that was not published: the request is settled as a retry.
pub(super) struct NotPublished;

/// Publishes `reply` to `request`'s answer address. A reply that cannot be sent at all
/// (no address, an address the mount does not answer, a value that does not encode) is
/// logged and given up; one the broker did not take is `Err`, and the request is retried.
pub(super) async fn send(
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
