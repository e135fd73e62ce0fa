//! Carrying out a plan: the copy, then the original's settlement.

use std::sync::Arc;

use ruststream_core::{
    AckError, BoxFuture, Delivery, HeaderValue, Message, Original, Plan, RETRY_COUNT, Settlement,
    Settling,
};

use super::Runtime;
use crate::settled::SettleError;

/// The execution of a plan: a bare settlement (the common case, which allocates
/// nothing), or the slower path with a copy to publish.
pub(super) enum Execution {
    Settle(Settling),
    Copy(BoxFuture<'static, Result<(), SettleError>>),
    Done(Result<(), SettleError>),
}

impl Execution {
    pub(super) async fn finish(self) -> Result<(), SettleError> {
        match self {
            Self::Settle(settling) => settling.await.map_err(SettleError::Ack),
            Self::Copy(future) => future.await,
            Self::Done(result) => result,
        }
    }
}

/// Starts executing `plan` for `delivery`.
///
/// An immediate copy is published before the original is settled; if it cannot be
/// published the original is left unsettled, so a failure duplicates rather than
/// loses. A delayed copy is scheduled once the original is out of the way.
#[inline]
pub(super) fn execute(delivery: Delivery, plan: &Plan, runtime: &Arc<Runtime>) -> Execution {
    match (&plan.copy, plan.original) {
        (None, Original::Settle(settlement)) => Execution::Settle(delivery.settle(settlement)),
        (None, Original::Unsupported) => {
            tracing::debug!("settlement not supported by this subscription");
            Execution::Done(Err(AckError::Unsupported.into()))
        }
        (None, Original::Untouched) => Execution::Done(Ok(())),
        (None, Original::Hold(delay, settlement)) => {
            hold(delivery, delay, settlement, runtime);
            Execution::Done(Ok(()))
        }
        (Some(copy), original) => {
            let mut message: Message = delivery.to_message();
            if let Some(count) = copy.retry_count {
                message
                    .headers
                    .insert(RETRY_COUNT, HeaderValue::from(count));
            }
            let (to, delay) = (copy.to.clone(), copy.delay);
            let runtime = runtime.clone();
            Execution::Copy(Box::pin(async move {
                let Some(delay) = delay else {
                    runtime.publish.publish(to, message).await?;
                    return settle_original(delivery, original, &runtime).await;
                };
                settle_original(delivery, original, &runtime).await?;
                let publish = runtime.publish.clone();
                runtime.deferred.schedule(delay, move || async move {
                    if let Err(error) = publish.publish(to, message).await {
                        tracing::error!(%error, "delayed retry copy lost");
                    }
                });
                Ok(())
            }))
        }
    }
}

async fn settle_original(
    delivery: Delivery,
    original: Original,
    runtime: &Arc<Runtime>,
) -> Result<(), SettleError> {
    match original {
        Original::Settle(settlement) => Ok(delivery.settle(settlement).await?),
        Original::Hold(delay, settlement) => {
            hold(delivery, delay, settlement, runtime);
            Ok(())
        }
        Original::Unsupported => Err(AckError::Unsupported.into()),
        Original::Untouched => Ok(()),
    }
}

fn hold(delivery: Delivery, delay: std::time::Duration, settlement: Settlement, runtime: &Runtime) {
    runtime.deferred.schedule(delay, move || async move {
        if let Err(error) = delivery.settle(settlement).await {
            tracing::warn!(%error, "held delivery: settlement failed");
        }
    });
}
