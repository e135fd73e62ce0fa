//! Settling reliable-list entries: `LREM` of the wrapped element from the consumer's
//! processing list; an abandoned one is handed back to the list at once.

use std::sync::Arc;

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::ListInterface;
use fred::types::{Key, Value};
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

use super::handback::HandBack;
use crate::failure;

/// Settles entries of one reliable-list consumer. The tag is the wrapped element, unique
/// in the processing list, so `LREM … 1` removes this delivery's element and nothing
/// else, replayed or not.
pub(crate) struct ReliableAcker {
    pub(crate) pool: Pool,
    pub(crate) processing: Key,
    pub(crate) hand_back: Arc<HandBack>,
}

impl Acker for ReliableAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        let Tag::Bytes(element) = tag else {
            return Settling::done(Err(AckError::Refused("not a list element tag".into())));
        };
        match settlement {
            Settlement::Accept | Settlement::Reject | Settlement::Remove => {
                let (pool, key) = (self.pool.clone(), self.processing.clone());
                Settling::pending(lrem(pool, key, element))
            }
            Settlement::Requeue | Settlement::RequeueAfter(_) => {
                Settling::done(Err(AckError::Unsupported))
            }
        }
    }

    /// Back on the right end of the list (read next) and out of the processing list, in
    /// one script, in the background.
    fn abandon(&self, tag: Tag, _message: Message) {
        if let Tag::Bytes(element) = tag {
            self.hand_back.give(element);
        }
    }
}

async fn lrem(pool: Pool, key: Key, element: Bytes) -> Result<(), AckError> {
    // From the tail, where the oldest entries are.
    pool.lrem::<i64, _, _>(key, -1, Value::Bytes(element))
        .await
        .map(drop)
        .map_err(|e| failure::ack(&e))
}
