//! The subscription's committer: one commit at a time, each of the highest position
//! per partition asked since the last, answered once the broker has it.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use ruststream_core::AckError;
use tokio::sync::{mpsc, oneshot};

use rdkafka::consumer::Consumer;

use crate::context::{KafkaConsumer, commit_sync};

/// A position to commit and who waits for it.
pub(crate) struct Ask {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) done: oneshot::Sender<Result<(), AckError>>,
}

/// Commits what `asks` brings, in order, until every sender is gone.
pub(crate) async fn commit(
    consumer: Weak<KafkaConsumer>,
    topic: Arc<str>,
    mut asks: mpsc::UnboundedReceiver<Ask>,
) {
    while let Some(first) = asks.recv().await {
        let mut batch = vec![first];
        while let Ok(more) = asks.try_recv() {
            batch.push(more);
        }
        let mut highest = BTreeMap::new();
        for ask in &batch {
            let offset = highest.entry(ask.partition).or_insert(ask.offset);
            *offset = (*offset).max(ask.offset);
        }
        let positions: Vec<(i32, i64)> = highest.into_iter().collect();
        let (consumer, topic) = (consumer.clone(), topic.clone());
        let result = tokio::task::spawn_blocking(move || {
            let consumer = consumer.upgrade().ok_or(AckError::Disconnected)?;
            let commits = consumer.context().group.commits(&positions);
            commit_sync(&*consumer, &topic, &commits).map_err(|error| {
                tracing::warn!(%topic, %error, "commit failed");
                AckError::Disconnected
            })
        })
        .await
        .unwrap_or(Err(AckError::Disconnected));
        for ask in batch {
            let _ = ask.done.send(result.clone());
        }
    }
}
