//! Publishing: one `INSERT` into the queue's rows and a `NOTIFY` of its consumers, in one
//! statement (the notification goes out when the row is committed).

use std::sync::Arc;

use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::inner::Inner;
use crate::row;

/// Publishes into the broker's table; a retry copy or a dead letter is a row like any.
pub(crate) struct Publisher(pub(crate) Arc<Inner>);

impl Publish for Publisher {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            let kind = if to.as_str().is_empty() {
                Err(PublishErrorKind::BadAddress(
                    "an empty queue name".to_owned(),
                ))
            } else {
                insert(&self.0, &to, &message).await
            };
            kind.map_err(|kind| PublishError {
                address: to.as_str().to_owned(),
                kind,
                message,
            })
        })
    }
}

async fn insert(inner: &Inner, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
    let (names, values) = row::columns(message);
    let statement = format!(
        "WITH put AS (
            INSERT INTO {} (queue, payload, header_names, header_values)
            VALUES ($1, $2, $3, $4) RETURNING queue)
         SELECT pg_notify($5, queue) FROM put",
        inner.names.messages
    );
    sqlx::query(&statement)
        .bind(to.as_str())
        .bind(message.payload.as_ref())
        .bind(names)
        .bind(values)
        .bind(&inner.names.channel)
        .fetch_all(&inner.pool)
        .await
        .map(drop)
        .map_err(|error| kind(&error))
}

/// What a failed statement means for a publish.
fn kind(error: &sqlx::Error) -> PublishErrorKind {
    match error {
        sqlx::Error::PoolClosed => PublishErrorKind::Closed,
        sqlx::Error::Database(db) => PublishErrorKind::Refused(db.message().to_owned()),
        _ => PublishErrorKind::Disconnected,
    }
}
