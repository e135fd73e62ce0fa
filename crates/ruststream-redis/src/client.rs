//! Building the client's connections: the completion pool and each subscription's
//! dedicated reader, all reconnecting with back-off.

use std::time::Duration;

use fred::clients::{Client, Pool, SubscriberClient};
use fred::interfaces::{ClientLike, EventInterface};
use fred::types::Builder;
use fred::types::config::{Config, ReconnectPolicy};
use tokio::sync::broadcast::error::RecvError;

/// How long a completion or publish command may wait, reconnection included.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

fn builder(config: &Config) -> Builder {
    let mut builder = Builder::from_config(config.clone());
    // Retry for ever, 100 ms doubling up to 2 s between attempts.
    builder.set_policy(ReconnectPolicy::new_exponential(0, 100, 2_000, 2));
    builder.with_connection_config(|c| {
        c.connection_timeout = Duration::from_secs(5);
        c.max_command_attempts = 5;
        c.tcp.nodelay = Some(true);
        c.unresponsive.max_timeout = Some(Duration::from_secs(10));
    });
    builder
}

/// The pool that settles and publishes.
pub(crate) fn pool(config: &Config, size: usize) -> Result<Pool, fred::error::Error> {
    let mut builder = builder(config);
    builder.with_performance_config(|p| p.default_command_timeout = COMMAND_TIMEOUT);
    let pool = builder.build_pool(size.max(1))?;
    for client in pool.clients() {
        watch(client, "settling and publishing");
    }
    Ok(pool)
}

/// A connected client of its own for one subscription's blocking reads.
pub(crate) async fn reader(config: &Config) -> Result<Reader, fred::error::Error> {
    let client = builder(config).build()?;
    watch(&client, "a subscription's reads");
    client.init().await?;
    Ok(Reader(client))
}

/// A connected subscriber client for one Pub/Sub subscription.
pub(crate) async fn subscriber(config: &Config) -> Result<SubscriberClient, fred::error::Error> {
    let mut builder = builder(config);
    builder.with_performance_config(|p| p.broadcast_channel_capacity = 4096);
    let client = builder.build_subscriber_client()?;
    watch(&client, "a Pub/Sub subscription");
    client.init().await?;
    Ok(client)
}

/// Logs what happens to `client`'s connections: a WARN when one is lost (the server,
/// what the connection was for, the error), an INFO when it is back with how long it
/// was away. fred reconnects by itself and retries the commands under way, so without
/// these lines a reset or a server kill would pass without a word. The task ends with
/// the client.
fn watch(client: &impl EventInterface, role: &'static str) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (mut errors, mut reconnects) = (client.error_rx(), client.reconnect_rx());
    handle.spawn(async move {
        let mut lost: Option<std::time::Instant> = None;
        loop {
            tokio::select! {
                error = errors.recv() => match error {
                    Ok((error, server)) => {
                        let server = server.map(|s| s.to_string());
                        if lost.is_none() {
                            lost = Some(std::time::Instant::now());
                            tracing::warn!(server, role, %error, "redis connection lost; reconnecting (commands under way are retried)");
                        } else {
                            tracing::debug!(server, role, %error, "redis connection still away");
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
                server = reconnects.recv() => match server {
                    Ok(server) => {
                        if let Some(since) = lost.take() {
                            tracing::info!(server = %server, role, gap = ?since.elapsed(), "redis connection back");
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
            }
        }
    });
}

/// A reader's client, closed when the subscription is dropped.
pub(crate) struct Reader(pub(crate) Client);

impl Drop for Reader {
    fn drop(&mut self) {
        let client = self.0.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = client.quit().await;
            });
        }
    }
}

impl std::ops::Deref for Reader {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0
    }
}
