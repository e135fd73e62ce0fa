//! Settlement: each form's [`Acker`], carrying out the SPEC §4 table through the pool.
//!
//! | settlement | stream | claiming | stream + `DurableZset` | reliable list | list, Pub/Sub |
//! |---|---|---|---|---|---|
//! | `Accept`, `Reject`, `Remove` | `XACK` | `XACK` | `XACK` | `LREM` | `Unsupported` |
//! | `Requeue` | `Unsupported` | nothing: stays in the PEL | `Unsupported` | `Unsupported` | `Unsupported` |
//! | `RequeueAfter(d)` | `Unsupported` | nothing: back after `min_idle` | `ZADD` copy, then `XACK` | `Unsupported` | `Unsupported` |

use fred::clients::Pool;
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

use std::future::Future;
use std::sync::Arc;

use crate::batch::Batcher;
use crate::delayed;
use crate::failure;
use crate::form::held::Held;
use crate::form::lease::Lease;
use crate::inflight::Inflight;
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
///
/// Keeps the subscription's in-hand set ([`Held`]) and its lease: an entry leaves the
/// set once its settlement is done; one abandoned, or whose settlement failed, is given
/// back, so the reader takes it back from the pending list.
pub(crate) struct StreamAcker {
    pub(crate) pool: Pool,
    pub(crate) acks: Batcher,
    pub(crate) mode: StreamMode,
    pub(crate) held: Arc<Held>,
    pub(crate) inflight: Inflight,
    pub(crate) _lease: Arc<Lease>,
}

impl Acker for StreamAcker {
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let Tag::Pair(ms, seq) = tag else {
            return Settling::done(Err(AckError::Refused("not a stream entry tag".into())));
        };
        let id = EntryId(ms, seq);
        match (settlement, &self.mode) {
            (Settlement::Accept | Settlement::Reject | Settlement::Remove, _) => {
                let acks = self.acks.clone();
                self.pending(id, async move { acks.ack(id).await })
            }
            (Settlement::Requeue | Settlement::RequeueAfter(_), StreamMode::Claiming) => {
                // It stays pending: claimed again once idle `min_idle`.
                self.held.requeued(id);
                Settling::done(Ok(()))
            }
            (Settlement::RequeueAfter(delay), StreamMode::Durable(zset)) => {
                let (pool, zset, acks) = (self.pool.clone(), zset.clone(), self.acks.clone());
                self.pending(id, async move {
                    delayed::park(&pool, &zset, id, &message, delay)
                        .await
                        .map_err(|e| failure::ack(&e))?;
                    acks.ack(id).await
                })
            }
            _ => Settling::done(Err(AckError::Unsupported)),
        }
    }

    fn abandon(&self, tag: Tag, _message: Message) {
        if let Tag::Pair(ms, seq) = tag {
            self.held.give_back(EntryId(ms, seq));
        }
    }
}

impl StreamAcker {
    /// A settlement through the pool, counted until done for `close`.
    fn pending(
        &self,
        id: EntryId,
        work: impl Future<Output = Result<(), AckError>> + Send + 'static,
    ) -> Settling {
        let (held, guard) = (self.held.clone(), self.inflight.enter());
        Settling::pending(async move {
            let result = work.await;
            match &result {
                Ok(()) => held.settled(id),
                Err(_) => held.give_back(id),
            }
            drop(guard);
            result
        })
    }
}
