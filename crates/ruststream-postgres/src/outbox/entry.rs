//! One message on its way into the outbox: its destination, key and headers.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use ruststream_core::{Address, CONTENT_TYPE, HeaderName, HeaderValue, MESSAGE_ID, Message};
use serde::Serialize;
use sqlx::{Executor, Postgres};

use super::{Outbox, OutboxError};
use crate::row;

/// A message being written by [`Outbox::message`] or [`Outbox::raw`].
#[must_use = "a message is written by `insert`"]
#[derive(Debug)]
pub struct Entry<'a> {
    outbox: &'a Outbox,
    to: Address,
    key: Option<String>,
    message: Result<Message, OutboxError>,
}

impl<'a> Entry<'a> {
    pub(super) fn new(
        outbox: &'a Outbox,
        to: Address,
        message: Result<Message, OutboxError>,
    ) -> Self {
        Self {
            outbox,
            to,
            key: None,
            message,
        }
    }

    /// `value` as JSON, with the runtime publisher's `content-type`.
    pub(super) fn json<T: Serialize + ?Sized>(outbox: &'a Outbox, to: Address, value: &T) -> Self {
        let message = serde_json::to_vec(value)
            .map(|payload| Message::new(payload).with_header(CONTENT_TYPE, "application/json"))
            .map_err(|error| OutboxError::Encode(error.to_string()));
        Self::new(outbox, to, message)
    }

    /// Orders the message after the earlier messages of `key` (an aggregate's id): they
    /// are published one after the other, in the order written.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets a header.
    pub fn header(mut self, name: impl Into<HeaderName>, value: impl Into<HeaderValue>) -> Self {
        if let Ok(message) = &mut self.message {
            message.headers.insert(name, value);
        }
        self
    }

    /// Writes the message on `executor` (the caller's transaction: `&mut *tx`) and
    /// returns the row's id; the relays are notified when it commits.
    ///
    /// A message without a `message-id` is given one (128 random bits, in hex), written
    /// with it: a relay that crashes after publishing publishes it again under the same
    /// id, so a consumer's [inbox](https://docs.rs/ruststream-inbox) runs its effects once.
    ///
    /// A keyed message waits for any uncommitted transaction that wrote the same key (so
    /// a key's ids are in commit order); two transactions writing the same two keys in
    /// opposite orders deadlock, and PostgreSQL aborts one of them.
    pub async fn insert<'e, E>(self, executor: E) -> Result<i64, OutboxError>
    where
        E: Executor<'e, Database = Postgres>,
    {
        let mut message = self.message?;
        if message.headers.get(MESSAGE_ID).is_none() {
            message.headers.insert(MESSAGE_ID, new_message_id());
        }
        if self.to.as_str().is_empty() {
            return Err(OutboxError::BadDestination);
        }
        if self.key.as_deref() == Some("") {
            return Err(OutboxError::BadKey);
        }
        let names = self.outbox.names();
        let (header_names, header_values) = row::columns(&message);
        // The lock is taken in the row's filter, before its id is drawn, and held until
        // the writer commits: the ids of one key are in commit order.
        let statement = format!(
            "WITH put AS (
                INSERT INTO {} (key, destination, payload, header_names, header_values)
                SELECT $1, $2, $3, $4, $5
                WHERE $1::text IS NULL
                   OR pg_advisory_xact_lock(hashtext($6), hashtext($1))::text IS NOT NULL
                RETURNING id)
             SELECT id, pg_notify($7, '') FROM put",
            names.outbox
        );
        let id = sqlx::query_scalar(&statement)
            .bind(self.key.as_deref())
            .bind(self.to.as_str())
            .bind(message.payload.as_ref())
            .bind(header_names)
            .bind(header_values)
            .bind(&names.outbox)
            .bind(&names.outbox_channel)
            .fetch_one(executor)
            .await?;
        Ok(id)
    }
}

/// A message id no other message has: 128 bits from two randomly keyed hashers (std's
/// `RandomState`, seeded from the system's randomness) over a process-wide counter.
fn new_message_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let (a, b) = (RandomState::new(), RandomState::new());
    format!("{:016x}{:016x}", a.hash_one(n), b.hash_one(n))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::new_message_id;

    #[test]
    fn message_ids_are_128_bits_of_hex_and_differ() {
        let ids: HashSet<String> = (0..10_000).map(|_| new_message_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }
}
