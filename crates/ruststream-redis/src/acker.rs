//! Settlement: each form's [`Acker`], carrying out the SPEC §4 table through the pool.
//!
//! | settlement | stream | claiming | stream + `DurableZset` | reliable list | list, Pub/Sub |
//! |---|---|---|---|---|---|
//! | `Accept`, `Reject`, `Remove` | `XACK` | `XACK` | `XACK` | `LREM` | `Unsupported` |
//! | `Requeue` | `Unsupported` | nothing: stays in the PEL | `Unsupported` | `Unsupported` | `Unsupported` |
//! | `RequeueAfter(d)` | `Unsupported` | nothing: back after `min_idle` | `ZADD` copy, then `XACK` | `Unsupported` | `Unsupported` |

use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::{ClientLike, ListInterface};
use fred::types::{ClusterHash, CustomCommand, Key, Value};
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

use crate::delayed;
use crate::failure;
use crate::reply::EntryId;

/// How a stream subscription settles.
#[derive(Clone, Debug)]
pub(crate) enum StreamMode {
    /// `XACK` only.
    Plain,
    /// Requeues stay in the pending list.
    Claiming,
    /// Delays go to this sorted set.
    Durable(String),
}

/// Settles stream entries of one group.
pub(crate) struct StreamAcker {
    pub(crate) pool: Pool,
    pub(crate) key: Bytes,
    pub(crate) group: Bytes,
    pub(crate) mode: StreamMode,
}

impl StreamAcker {
    async fn xack(pool: Pool, key: Bytes, group: Bytes, id: EntryId) -> Result<(), AckError> {
        let cmd = CustomCommand::new_static("XACK", ClusterHash::FirstKey, false);
        let args = vec![
            Value::Bytes(key),
            Value::Bytes(group),
            Value::from(id.to_string()),
        ];
        pool.custom::<Value, Value>(cmd, args)
            .await
            .map(drop)
            .map_err(|e| failure::ack(&e))
    }
}

impl Acker for StreamAcker {
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let Tag::Pair(ms, seq) = tag else {
            return Settling::done(Err(AckError::Refused("not a stream entry tag".into())));
        };
        let id = EntryId(ms, seq);
        let (pool, key, group) = (self.pool.clone(), self.key.clone(), self.group.clone());
        match (settlement, &self.mode) {
            (Settlement::Accept | Settlement::Reject | Settlement::Remove, _) => {
                Settling::pending(Self::xack(pool, key, group, id))
            }
            (Settlement::Requeue | Settlement::RequeueAfter(_), StreamMode::Claiming) => {
                Settling::done(Ok(()))
            }
            (Settlement::RequeueAfter(delay), StreamMode::Durable(zset)) => {
                let zset = zset.clone();
                Settling::pending(async move {
                    delayed::park(&pool, &zset, id, &message, delay)
                        .await
                        .map_err(|e| failure::ack(&e))?;
                    Self::xack(pool, key, group, id).await
                })
            }
            _ => Settling::done(Err(AckError::Unsupported)),
        }
    }
}

/// Settles entries of a reliable list: `LREM` from the consumer's processing list.
pub(crate) struct ListAcker {
    pub(crate) pool: Pool,
    pub(crate) processing: Key,
}

impl Acker for ListAcker {
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
}

async fn lrem(pool: Pool, key: Key, element: Bytes) -> Result<(), AckError> {
    // From the tail: the oldest copy of an element equal to this one goes first.
    pool.lrem::<i64, _, _>(key, -1, Value::Bytes(element))
        .await
        .map(drop)
        .map_err(|e| failure::ack(&e))
}

/// The acker of forms that cannot settle: plain lists and Pub/Sub.
pub(crate) struct NoAcker;

impl Acker for NoAcker {
    fn settle(&self, _tag: Tag, _message: Message, _settlement: Settlement) -> Settling {
        Settling::done(Err(AckError::Unsupported))
    }
}
