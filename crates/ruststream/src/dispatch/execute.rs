//! Carrying out a plan: the copy, then the original's settlement.

use ruststream_core::{Delivery, HeaderValue, Message, Original, Plan, RETRY_COUNT};

use super::Runtime;
use crate::settled::SettleError;

/// Executes `plan` for `delivery`. An immediate copy is published before the original
/// is settled; if it cannot be published the original is left unsettled, so a failure
/// duplicates rather than loses. A delayed copy is scheduled once the original is out
/// of the way.
pub(super) async fn execute(
    delivery: Delivery,
    plan: &Plan,
    runtime: &Runtime,
) -> Result<(), SettleError> {
    let copy = plan.copy.as_ref().map(|copy| {
        let mut message: Message = delivery.to_message();
        if let Some(count) = copy.retry_count {
            message
                .headers
                .insert(RETRY_COUNT, HeaderValue::from(count));
        }
        (copy, message)
    });
    let delayed = match copy {
        Some((copy, message)) => match copy.delay {
            None => {
                runtime.publish.publish(copy.to.clone(), message).await?;
                None
            }
            Some(delay) => Some((delay, copy.to.clone(), message)),
        },
        None => None,
    };
    match plan.original {
        Original::Settle(settlement) => delivery.settle(settlement).await?,
        Original::Hold(delay, settlement) => {
            runtime.deferred.schedule(delay, move || async move {
                if let Err(error) = delivery.settle(settlement).await {
                    tracing::warn!(%error, "held delivery: settlement failed");
                }
            });
        }
        Original::Unsupported => {
            tracing::debug!("settlement not supported by this subscription");
            return Err(ruststream_core::AckError::Unsupported.into());
        }
        Original::Untouched => {}
    }
    if let Some((delay, to, message)) = delayed {
        let publish = runtime.publish.clone();
        runtime.deferred.schedule(delay, move || async move {
            if let Err(error) = publish.publish(to, message).await {
                tracing::error!(%error, "delayed retry copy lost");
            }
        });
    }
    Ok(())
}
