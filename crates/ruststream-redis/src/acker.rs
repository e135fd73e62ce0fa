//! Settlement: each form's [`Acker`], carrying out the SPEC §4 table through the pool.
//!
//! | settlement | stream | claiming | stream + `DurableZset` | reliable list | list, Pub/Sub |
//! |---|---|---|---|---|---|
//! | `Accept`, `Reject`, `Remove` | `XACK` | `XACK` | `XACK` | `LREM` | `Unsupported` |
//! | `Requeue` | `Unsupported` | nothing: stays in the PEL | `Unsupported` | `Unsupported` | `Unsupported` |
//! | `RequeueAfter(d)` | `Unsupported` | nothing: back after `min_idle` | `ZADD` copy, then `XACK` | `Unsupported` | `Unsupported` |

use fred::clients::Pool;
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

use crate::batch::Batcher;
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

/// Settles stream entries of one group; acks are coalesced by a [`Batcher`].
pub(crate) struct StreamAcker {
    pub(crate) pool: Pool,
    pub(crate) acks: Batcher,
    pub(crate) mode: StreamMode,
}

impl Acker for StreamAcker {
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let Tag::Pair(ms, seq) = tag else {
            return Settling::done(Err(AckError::Refused("not a stream entry tag".into())));
        };
        let id = EntryId(ms, seq);
        let acks = self.acks.clone();
        match (settlement, &self.mode) {
            (Settlement::Accept | Settlement::Reject | Settlement::Remove, _) => {
                Settling::pending(async move { acks.ack(id).await })
            }
            (Settlement::Requeue | Settlement::RequeueAfter(_), StreamMode::Claiming) => {
                Settling::done(Ok(()))
            }
            (Settlement::RequeueAfter(delay), StreamMode::Durable(zset)) => {
                let (pool, zset) = (self.pool.clone(), zset.clone());
                Settling::pending(async move {
                    delayed::park(&pool, &zset, id, &message, delay)
                        .await
                        .map_err(|e| failure::ack(&e))?;
                    acks.ack(id).await
                })
            }
            _ => Settling::done(Err(AckError::Unsupported)),
        }
    }
}

/// The acker of forms that cannot settle: plain lists and Pub/Sub.
pub(crate) struct NoAcker;

impl Acker for NoAcker {
    fn settle(&self, _tag: Tag, _message: Message, _settlement: Settlement) -> Settling {
        Settling::done(Err(AckError::Unsupported))
    }
}
