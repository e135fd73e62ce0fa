//! Building the client's connections: the completion pool and each subscription's
//! dedicated reader, all reconnecting with back-off.

use std::time::Duration;

use fred::clients::{Client, Pool, SubscriberClient};
use fred::interfaces::ClientLike;
use fred::types::Builder;
use fred::types::config::{Config, ReconnectPolicy};

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
    builder.build_pool(size.max(1))
}

/// A connected client of its own for one subscription's blocking reads.
pub(crate) async fn reader(config: &Config) -> Result<Reader, fred::error::Error> {
    let client = builder(config).build()?;
    client.init().await?;
    Ok(Reader(client))
}

/// A connected subscriber client for one Pub/Sub subscription.
pub(crate) async fn subscriber(config: &Config) -> Result<SubscriberClient, fred::error::Error> {
    let mut builder = builder(config);
    builder.with_performance_config(|p| p.broadcast_channel_capacity = 4096);
    let client = builder.build_subscriber_client()?;
    client.init().await?;
    Ok(client)
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
