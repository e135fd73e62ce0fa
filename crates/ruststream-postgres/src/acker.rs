//! Settling a claimed row: delete it, or make it visible again (now or later).

use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{AckError, Acker, Address, Message, Settlement, Settling, Tag};

use crate::deletes::{Deletes, ack_error};
use crate::inner::Inner;
use crate::lease::Held;

/// Settles the rows of one subscription, each known by its id and the attempt it was
/// claimed at (so a row claimed again by another consumer is never settled by this one).
/// Deletes go together ([`Deletes`]: one statement, one commit, for the rows settled at
/// the same moment).
pub(crate) struct RowAcker {
    pub(crate) inner: Arc<Inner>,
    pub(crate) held: Arc<Held>,
    pub(crate) deletes: Deletes,
}

/// A row's tag: its id and the attempt of this claim.
pub(crate) fn tag(id: i64, attempts: i32) -> Tag {
    Tag::Pair(id as u64, attempts as u64)
}

fn untag(tag: &Tag) -> Option<(i64, i32)> {
    match tag {
        Tag::Pair(id, attempts) => Some((i64::try_from(*id).ok()?, i32::try_from(*attempts).ok()?)),
        _ => None,
    }
}

impl Acker for RowAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        let Some((id, attempts)) = untag(&tag) else {
            return Settling::done(Err(AckError::Unsupported));
        };
        let (inner, held) = (self.inner.clone(), self.held.clone());
        let deletes = self.deletes.clone();
        Settling::pending(async move {
            let done = match settlement {
                Settlement::Accept => deletes.delete(id, attempts, "accept").await,
                Settlement::Remove => deletes.delete(id, attempts, "remove").await,
                Settlement::Reject => deletes.delete(id, attempts, "reject").await,
                Settlement::Requeue => visible(&inner, id, attempts, Duration::ZERO).await,
                Settlement::RequeueAfter(delay) => visible(&inner, id, attempts, delay).await,
            };
            held.release(id, attempts);
            match done {
                Ok(false) => Err(AckError::Refused(
                    "lease lost: the row was claimed again or removed".to_owned(),
                )),
                Ok(true) => Ok(()),
                Err(error) => Err(error),
            }
        })
    }

    /// A copy and the original's removal (`Accept`, `Reject`, `Remove`) in one
    /// statement; nothing else in one step.
    fn replace(&self, tag: &Tag, to: Address, copy: Message, original: Settlement) -> Settling {
        let (Some((id, attempts)), Settlement::Accept | Settlement::Reject | Settlement::Remove) =
            (untag(tag), original)
        else {
            return Settling::done(Err(AckError::Unsupported));
        };
        let (inner, held) = (self.inner.clone(), self.held.clone());
        Settling::pending(async move {
            if to.as_str().is_empty() {
                return Err(AckError::Refused("an empty queue name".to_owned()));
            }
            let original = crate::moves::Original::Claimed { attempts };
            let moved = crate::moves::replace(&inner, id, original, &to, &copy).await;
            match moved.map_err(|error| ack_error(&error)) {
                Ok(true) => {
                    held.release(id, attempts);
                    Ok(())
                }
                // Claimed again or removed: not this consumer's to settle.
                Ok(false) => {
                    held.release(id, attempts);
                    Err(AckError::Refused(
                        "lease lost: the row was claimed again or removed".to_owned(),
                    ))
                }
                // Neither happened: the row is still held, for the copy published first.
                Err(error) => Err(error),
            }
        })
    }

    fn abandon(&self, tag: Tag, _message: Message) {
        let Some((id, attempts)) = untag(&tag) else {
            return;
        };
        let (inner, held) = (self.inner.clone(), self.held.clone());
        // Without a runtime the row comes back when its lease runs out.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            inner.pending.start();
            runtime.spawn(async move {
                if let Err(error) = visible(&inner, id, attempts, Duration::ZERO).await {
                    tracing::warn!(%error, id, "postgres: giving a row back failed; its lease runs out");
                }
                held.release(id, attempts);
                inner.pending.finish();
            });
        }
    }
}

/// Makes the row visible after `delay` and tells the queue's consumers.
async fn visible(inner: &Inner, id: i64, attempts: i32, delay: Duration) -> Result<bool, AckError> {
    let statement = format!(
        "WITH given AS (
            UPDATE {} SET visible_at = now() + $3 * interval '1 millisecond', leased = false
            WHERE id = $1 AND attempts = $2 RETURNING queue)
         SELECT pg_notify($4, queue) FROM given",
        inner.names.messages
    );
    let rows = sqlx::query(&statement)
        .bind(id)
        .bind(attempts)
        .bind(delay.as_millis() as f64)
        .bind(&inner.names.channel)
        .fetch_all(&inner.pool)
        .await
        .map_err(|error| ack_error(&error))?;
    Ok(!rows.is_empty())
}
