//! Browsing and removing the ready messages of a queue (the dead-letter tools).
//!
//! Ids are the queue's sequence numbers. Messages out for delivery or delayed are not
//! browsed; a topic has no queue of its own and cannot be browsed.

use ruststream_core::{Address, BoxFuture, Inspect, InspectError, Waiting};

use super::{MemoryBroker, lock};

impl MemoryBroker {
    fn inspected(
        &self,
        address: &Address,
    ) -> Result<Option<std::sync::Arc<super::Queue>>, InspectError> {
        let state = lock(&self.inner.state);
        if state.topics.contains_key(address) {
            return Err(InspectError::Unsupported {
                address: address.to_string(),
                reason: "a topic keeps no messages of its own".into(),
            });
        }
        Ok(state.queues.get(address).cloned())
    }
}

impl Inspect for MemoryBroker {
    fn browse(
        &self,
        address: &Address,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>> {
        let result = self.inspected(address).map(|queue| {
            queue.map_or_else(Vec::new, |q| {
                q.browse(max)
                    .into_iter()
                    .map(|(seq, message)| Waiting::new(seq.to_string(), message))
                    .collect()
            })
        });
        Box::pin(async move { result })
    }

    fn remove<'a>(
        &'a self,
        address: &'a Address,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<usize, InspectError>> {
        let result = self.inspected(address).map(|queue| {
            let seqs: Vec<u64> = ids.iter().filter_map(|id| id.parse().ok()).collect();
            queue.map_or(0, |q| q.remove(&seqs))
        });
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::{Broker, Message};

    use super::*;

    #[tokio::test]
    async fn browses_in_order_and_removes_by_id() {
        let broker = MemoryBroker::new();
        let publisher = broker.publisher();
        for text in ["a", "b", "c"] {
            publisher
                .publish("dead".into(), Message::new(text))
                .await
                .expect("publish");
        }
        let inspect = broker.inspect().expect("memory inspects");
        let address = Address::from("dead");
        let seen = inspect.browse(&address, 10).await.expect("browse");
        let payloads: Vec<_> = seen.iter().map(|w| &w.message.payload[..]).collect();
        assert_eq!(payloads, [b"a", b"b", b"c"]);
        assert_eq!(broker.ready("dead"), 3, "browsing consumes nothing");
        assert_eq!(inspect.browse(&address, 2).await.expect("browse").len(), 2);

        let removed = inspect
            .remove(&address, &[seen[1].id.clone(), "nope".into()])
            .await
            .expect("remove");
        assert_eq!(removed, 1);
        let left: Vec<_> = broker
            .messages("dead")
            .into_iter()
            .map(|m| m.payload)
            .collect();
        assert_eq!(left, [&b"a"[..], &b"c"[..]]);
        assert!(
            inspect
                .browse(&"never".into(), 5)
                .await
                .expect("empty")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn topics_cannot_be_browsed() {
        let broker = MemoryBroker::new().topic("news");
        let error = broker.browse(&"news".into(), 1).await.expect_err("a topic");
        assert!(matches!(error, InspectError::Unsupported { .. }));
    }
}
