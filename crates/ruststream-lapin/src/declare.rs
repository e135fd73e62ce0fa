//! Finding out what a mount's queue is, and making the queues the mount implies: by
//! default a missing queue becomes a durable quorum queue (`SubscribeOptions::declare`
//! picks the type, `never_declare` makes nothing), with its dead-letter queue.
//!
//! The first declaration is the one the mount implies (not passive): it makes a missing
//! queue and is accepted by a queue made the same way before, so a service's usual start
//! causes no refusal. A refusal closes the channel, and lapin 4.12 logs every channel
//! the server closes at ERROR (`Channel closed`, in its `on_channel_close_received`), so
//! a queue that differs from what the mount implies (made by hand, by a policy-less
//! tool) still costs one such line per differing argument: AMQP 0-9-1 tells a queue's
//! arguments only through refusals.

use lapin::Connection;
use ruststream_core::{SubscribeError, SubscribeSpec};

use crate::SubscribeOptions;
use crate::limit;
use crate::probe::{self, Found, ProbeError};
use crate::queue::{self, QueueInfo, QueueType};
use crate::server::Version;

/// What `queue` is (made first if the options let it and it is missing); `None` where
/// the broker's answer could not be read (the defaults apply).
pub(crate) async fn find_out(
    connection: &Connection,
    queue: &str,
    options: &SubscribeOptions,
    spec: &SubscribeSpec,
    version: &Version,
) -> Result<Option<QueueInfo>, SubscribeError> {
    let hints = queue::hints(&spec.declaration);
    let kind = (!options.never_declare).then(|| options.declare.unwrap_or(QueueType::Quorum));
    let declare = match kind {
        Some(kind) => {
            let major = version.major().await;
            Some(
                queue::arguments(kind, &spec.declaration, major)
                    .map_err(SubscribeError::BadOption)?,
            )
        }
        None => None,
    };
    let found = probe::describe(connection, queue, &hints, declare)
        .await
        .map_err(|e| match e {
            ProbeError::Connection(why) => SubscribeError::Disconnected(why),
            ProbeError::Refused(why) => SubscribeError::Refused(format!("queue {queue}: {why}")),
        })?;
    let info = match found {
        Found::Queue(info) => info,
        Found::Missing => {
            let why = if options.never_declare {
                "declare=never"
            } else {
                "no configure permission to declare it"
            };
            return Err(SubscribeError::BadAddress(format!(
                "no queue {queue} ({why})"
            )));
        }
        Found::Unreadable(why) | Found::Denied(why) if options.declare.is_some() => {
            return Err(SubscribeError::Refused(format!(
                "queue {queue}: cannot tell what it is ({why})"
            )));
        }
        Found::Unreadable(why) | Found::Denied(why) => {
            tracing::warn!(queue, reason = %why,
                "lapin: cannot tell what the queue is; using the default capabilities");
            return Ok(None);
        }
    };
    tracing::debug!(queue, kind = %info.kind, "lapin: queue found (made if it was missing)");
    queue::check(&info, &spec.declaration, options.declare, queue)
        .map_err(|how| SubscribeError::BadOption(format!("queue {queue} {how}")))?;
    if info.kind == "quorum" && info.dlx.is_some() && kind.is_some() {
        declare_dead_letter_queue(connection, spec).await?;
    }
    if info.kind == "quorum" || options.delivery_limit.is_some() {
        let major = version.major().await;
        let limit = limit::effective(
            &info.kind,
            info.delivery_limit,
            options.delivery_limit,
            major,
        );
        match limit::check(limit, &spec.declaration, queue, info.dlx.is_some()) {
            Err(how) => return Err(SubscribeError::BadOption(format!("queue {queue} {how}"))),
            Ok(Some(warning)) => tracing::warn!(queue, "lapin: {warning}"),
            Ok(None) => {}
        }
    }
    Ok(Some(info))
}

/// The queue a quorum queue the mount declares dead-letters into, where the mount's
/// dead letter is a queue (the default exchange routes by its name): made if missing
/// (durable, classic), so that RabbitMQ's dead-lettering has somewhere to go. The
/// declaration is not passive, so that a missing queue costs no refusal; one that exists
/// with other arguments refuses it (logged by lapin) and is left as it is. An exchange
/// (`/exchanges/X/K`) is the operator's: its type and bindings are not the mount's to say.
async fn declare_dead_letter_queue(
    connection: &Connection,
    spec: &SubscribeSpec,
) -> Result<(), SubscribeError> {
    let Some((exchange, Some(dead))) = spec
        .declaration
        .dead_letter
        .as_ref()
        .and_then(queue::dead_letter_target)
    else {
        return Ok(());
    };
    if !exchange.is_empty() {
        return Ok(());
    }
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| SubscribeError::Disconnected(e.to_string()))?;
    match channel
        .queue_declare(
            dead.as_str().into(),
            lapin::options::QueueDeclareOptions::durable(),
            lapin::types::FieldTable::default(),
        )
        .await
    {
        Ok(_) => {
            let _ = channel.close(200, "declared".into()).await;
            tracing::debug!(queue = %dead, "lapin: dead-letter queue declared (made if missing)");
            Ok(())
        }
        // It exists, with other arguments.
        Err(e) if probe::reply_code(&e) == Some(406) => Ok(()),
        Err(e) => Err(SubscribeError::Refused(format!(
            "declaring dead-letter queue {dead}: {e}"
        ))),
    }
}
