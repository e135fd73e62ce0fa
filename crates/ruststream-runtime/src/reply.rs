//! Replies: a handler's answer, published where the request or the mount says.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

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

/// Which `reply-to` addresses a mount answers (see
/// [`Mount::allow_reply_to`](crate::Mount::allow_reply_to)).
#[derive(Clone)]
pub(crate) struct ReplyFilter(pub(crate) Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl fmt::Debug for ReplyFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplyFilter")
    }
}
