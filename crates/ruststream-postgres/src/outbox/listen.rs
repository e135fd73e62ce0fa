//! Waking a relay: a `LISTEN` connection of its own on the outbox's channel.

use std::sync::Arc;
use std::time::Duration;

use ruststream_adapter::Backoff;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::Notify;

/// Wakes `notify` on each insert notified on `channel`, and whenever notifications may
/// have been missed (connected, reconnected, a failed receive). Runs until aborted.
pub(super) async fn listen(pool: PgPool, channel: String, notify: Arc<Notify>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut listener = loop {
        match connect(&pool, &channel).await {
            Ok(listener) => break listener,
            Err(error) => {
                tracing::warn!(%error, "postgres outbox: listen failed; polling until it works");
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    };
    notify.notify_one();
    loop {
        match listener.try_recv().await {
            Ok(_) => notify.notify_one(),
            Err(error) => {
                tracing::warn!(%error, "postgres outbox: listen failed; retrying");
                notify.notify_one();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

async fn connect(pool: &PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(channel).await?;
    Ok(listener)
}
