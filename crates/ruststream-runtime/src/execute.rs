//! Carrying out a plan: the copy, then the original's settlement.

use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{
    AckError, Address, Capabilities, Delivery, HeaderValue, Message, Original, Plan, PublishError,
    RETRY_COUNT, Settlement, Settling,
};

use crate::dead_letter::Why;
use crate::deferred::DelayedCopy;
use crate::layer::Visits;
use crate::runtime::Runtime;
use crate::settled::SettleError;

/// How long a delivery that could not be settled as planned (its copy was not published,
/// or the form cannot do what was asked) is kept unsettled before it is handed back to
/// the broker, so that a lasting failure neither loses it nor spins.
const HAND_BACK_AFTER: Duration = Duration::from_secs(1);

fn hand_back_later(delivery: Delivery, from: &Address, runtime: &Runtime) {
    hand_back_after(delivery, HAND_BACK_AFTER, from, runtime);
}

fn hand_back_after(delivery: Delivery, after: Duration, from: &Address, runtime: &Runtime) {
    runtime.deferred.schedule(from, after, move || async move {
        std::mem::drop(delivery);
    });
}

/// A copy the broker will never take (too large once its headers are added): the
/// original is kept unsettled, longer at each refusal of the same message
/// ([`Refused`](crate::refused::Refused)), and handed back, so that nothing is lost and
/// the consumer does not spin on it.
fn refused_for_good(delivery: Delivery, error: &PublishError, from: &Address, runtime: &Runtime) {
    let keep = runtime.refused.keep_for(from, &error.message);
    let what = if error.message.headers.get(RETRY_COUNT).is_some() {
        "retry copy"
    } else {
        "dead letter"
    };
    tracing::error!(
        subscription = %from,
        to = %error.address,
        message_id = %crate::deferred::message_id(&error.message),
        error = %error.kind,
        handed_back_in = ?keep,
        "{what} refused for good: the original is kept unsettled, then handed back to the broker"
    );
    hand_back_after(delivery, keep, from, runtime);
}

/// Carries out `plan` for `delivery`.
///
/// The delivery's visits see the copy before it goes out, and are told whether it did.
/// An immediate copy is published before the original is settled; if it cannot be
/// published the original is left unsettled, so a failure duplicates rather than
/// loses. A delayed copy is scheduled once the original is out of the way, unless the
/// publisher already knows the broker will refuse it for good
/// ([`Publish::check`](ruststream_core::Publish::check)): then the original is kept, as
/// for an immediate copy refused.
///
/// An outcome the form cannot carry out ([`Original::Unsupported`]) leaves the delivery
/// as it is: on a form that settles, unsettled for a while and then handed back.
pub(crate) async fn execute(
    delivery: Delivery,
    plan: &Plan,
    capabilities: &Capabilities,
    runtime: &Arc<Runtime>,
    why: &Why<'_>,
    visits: &Visits,
) -> Result<(), SettleError> {
    let settles = capabilities.settles;
    let Some(copy) = &plan.copy else {
        return Ok(settle_now(delivery, plan.original, settles, why.from, runtime)?.await?);
    };
    let original = plan.original;
    let mut message: Message = delivery.to_message();
    match copy.retry_count {
        Some(count) => {
            message
                .headers
                .insert(RETRY_COUNT, HeaderValue::from(count));
        }
        None => crate::dead_letter::mark(&mut message, why),
    }
    let sents = visits.publishes(copy, &mut message);
    let (to, delay) = (copy.to.clone(), copy.delay);
    let moves = capabilities.moves;
    let subscription = why.from.clone();
    if let (true, None, Original::Settle(settlement)) = (moves, delay, original) {
        // The copy and the original's settlement in one step where the form can: both
        // are done or neither, and where neither was, the copy is published and the
        // original settled after, as on any form.
        match delivery
            .replace(to.clone(), message.clone(), settlement)
            .await
        {
            Ok(()) => {
                delivery.replaced();
                sents.tell(Ok(()));
                return Ok(());
            }
            Err(error) => {
                tracing::debug!(%subscription, %error, "the copy and the settlement in one step failed; publishing the copy first");
            }
        }
    }
    let Some(delay) = delay else {
        if let Err(error) = runtime.publish.publish(to.clone(), message).await {
            if !error.kind.is_transient() {
                sents.tell(Err(&error));
                refused_for_good(delivery, &error, &subscription, runtime);
                return Err(error.into());
            }
            // The copy is owed: tried again with back-off while the original stays
            // unsettled (the handler does not run again); the original is settled
            // once it is out, handed back if a stop gives up on it.
            let kind = error.kind.clone();
            let address = error.address.clone();
            let after = runtime.clone();
            runtime.deferred.owe_copy(
                    (subscription.clone(), to),
                    sents,
                    error,
                    runtime.publish.clone(),
                    move |published| async move {
                        if !published {
                            return std::mem::drop(delivery);
                        }
                        match settle_now(delivery, original, settles, &subscription, &after) {
                            Ok(settling) => {
                                if let Err(error) = settling.await {
                                    tracing::warn!(%subscription, %error, "settlement after an owed copy failed");
                                }
                            }
                            Err(error) => {
                                tracing::warn!(%subscription, %error, "settlement after an owed copy failed");
                            }
                        }
                    },
                );
            return Err(SettleError::Copy(PublishError {
                address,
                kind,
                message: Message::default(),
            }));
        }
        sents.tell(Ok(()));
        return Ok(settle_now(delivery, original, settles, &subscription, runtime)?.await?);
    };
    // Once the original is settled the delayed copy is the message: one the broker is
    // known to refuse for good would be lost. The original stays with the broker.
    if let Err(kind) = runtime.publish.check(&to, &message)
        && !kind.is_transient()
    {
        let error = PublishError {
            address: to.to_string(),
            kind,
            message,
        };
        sents.tell(Err(&error));
        refused_for_good(delivery, &error, &subscription, runtime);
        return Err(error.into());
    }
    let settled = match settle_now(delivery, original, settles, &subscription, runtime) {
        Ok(settling) => settling.await,
        Err(error) => Err(error),
    };
    // The copy is owed even when the settlement failed: a failure may come after the
    // broker carried it out (an `XACK` whose reply a lost connection took), and then
    // the copy is all that is left of the message. Where it was not carried out, the
    // original comes back as well: a duplicate, never a loss.
    let copy = DelayedCopy {
        subscription,
        to,
        message,
        sents,
    };
    runtime
        .deferred
        .schedule_copy(delay, copy, runtime.publish.clone());
    Ok(settled?)
}

/// Carries out `original` on the delivery: a settlement to await
/// (already finished where it was done at once), or why nothing was done.
fn settle_now(
    delivery: Delivery,
    original: Original,
    settles: bool,
    from: &Address,
    runtime: &Runtime,
) -> Result<Settling, AckError> {
    match original {
        Original::Settle(settlement) => Ok(delivery.settle(settlement)),
        Original::Hold(delay, settlement) => {
            hold(delivery, delay, settlement, from, runtime);
            Ok(Settling::done(Ok(())))
        }
        Original::Unsupported => {
            tracing::debug!("settlement not supported by this subscription");
            if settles {
                hand_back_later(delivery, from, runtime);
            }
            Err(AckError::Unsupported)
        }
        Original::Untouched => Ok(Settling::done(Ok(()))),
    }
}

fn hold(
    delivery: Delivery,
    delay: std::time::Duration,
    settlement: Settlement,
    from: &Address,
    runtime: &Runtime,
) {
    runtime.deferred.schedule(from, delay, move || async move {
        if let Err(error) = delivery.settle(settlement).await {
            tracing::warn!(%error, "held delivery: settlement failed");
        }
    });
}
