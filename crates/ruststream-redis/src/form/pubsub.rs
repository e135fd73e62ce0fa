//! The Pub/Sub forms: a channel or a pattern, on a subscriber client of their own that
//! subscribes again after each reconnection. At most once.

use std::sync::Arc;

use fred::clients::SubscriberClient;
use fred::types::Message as PubsubMessage;
use ruststream_core::{Acker, Address, ConsumeError, Delivery, Tag};
use tokio::sync::broadcast::{self, error::TryRecvError};

use super::Reader;
use super::list::from_frame;
use super::reliable_recovery::AbortOnDrop;

/// Reads the messages of one subscriber client.
pub(crate) struct PubSubReader {
    pub(crate) client: SubscriberClient,
    pub(crate) messages: broadcast::Receiver<PubsubMessage>,
    /// `None`: deliveries carry the subscription's address; `Some`: a pattern, each
    /// delivery carries the channel it came on, less the broker's key prefix.
    pub(crate) pattern_prefix: Option<Arc<str>>,
    pub(crate) address: Address,
    pub(crate) count: usize,
    pub(crate) acker: Arc<dyn Acker>,
    pub(crate) seq: u64,
    pub(crate) _resubscribe: AbortOnDrop,
}

impl PubSubReader {
    fn delivery(&mut self, message: PubsubMessage) -> Delivery {
        self.seq += 1;
        let address = match &self.pattern_prefix {
            None => self.address.clone(),
            Some(prefix) => {
                let channel = message.channel.to_string();
                Address::new(channel.strip_prefix(&**prefix).unwrap_or(&channel))
            }
        };
        let payload = message.value.into_bytes().unwrap_or_default();
        from_frame(payload, &address, Tag::Seq(self.seq), self.acker.clone())
    }
}

impl Drop for PubSubReader {
    fn drop(&mut self) {
        let client = self.client.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = fred::interfaces::ClientLike::quit(&client).await;
            });
        }
    }
}

impl Reader for PubSubReader {
    async fn read(&mut self) -> Result<Vec<Delivery>, ConsumeError> {
        let first = loop {
            match self.messages.recv().await {
                Ok(message) => break message,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(n, "pub/sub reader lagged: messages lost");
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(ConsumeError("pub/sub client closed".into()));
                }
            }
        };
        let mut batch = vec![self.delivery(first)];
        while batch.len() < self.count {
            match self.messages.try_recv() {
                Ok(message) => batch.push(self.delivery(message)),
                Err(TryRecvError::Lagged(n)) => {
                    tracing::warn!(n, "pub/sub reader lagged: messages lost");
                }
                Err(_) => break,
            }
        }
        Ok(batch)
    }
}
