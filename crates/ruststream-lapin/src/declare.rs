//! Making the queues a mount implies, where it asks (`SubscribeOptions::declare`): the
//! queue itself and, for a quorum queue that dead-letters into a queue, that queue.

use ruststream_core::{SubscribeError, SubscribeSpec};

use crate::probe;
use crate::queue::{self, QueueInfo, QueueType};

/// Makes `queue`, of `kind`, with the arguments the mount's declaration implies on a
/// broker of `major` version (see [`queue::arguments`]), and a quorum queue's
/// dead-letter queue.
pub(crate) async fn declare(
    connection: &lapin::Connection,
    queue: &str,
    kind: QueueType,
    spec: &SubscribeSpec,
    major: Option<u32>,
) -> Result<QueueInfo, SubscribeError> {
    let args =
        queue::arguments(kind, &spec.declaration, major).map_err(SubscribeError::BadOption)?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| SubscribeError::Disconnected(e.to_string()))?;
    channel
        .queue_declare(
            queue.into(),
            lapin::options::QueueDeclareOptions::durable(),
            args.clone(),
        )
        .await
        .map_err(|e| SubscribeError::Refused(format!("declaring queue {queue}: {e}")))?;
    let _ = channel.close(200, "declared".into()).await;
    tracing::info!(queue, kind = kind.name(), "lapin: queue declared");
    if kind == QueueType::Quorum {
        declare_dead_letter_queue(connection, spec).await?;
    }
    Ok(QueueInfo::from_arguments(&args))
}

/// The queue a declared quorum queue dead-letters into, where the mount's dead letter is
/// a queue (the default exchange routes by its name): made if missing (durable, classic),
/// so that RabbitMQ's dead-lettering has somewhere to go. One that exists is left as it
/// is, whatever its arguments. An exchange (`/exchanges/X/K`) is the operator's: its
/// type and bindings are not the mount's to say.
async fn declare_dead_letter_queue(
    connection: &lapin::Connection,
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
    let passive = lapin::options::QueueDeclareOptions {
        passive: true,
        ..lapin::options::QueueDeclareOptions::default()
    };
    match channel
        .queue_declare(
            dead.as_str().into(),
            passive,
            lapin::types::FieldTable::default(),
        )
        .await
    {
        Ok(_) => {
            let _ = channel.close(200, "checked".into()).await;
            return Ok(());
        }
        Err(e) if probe::reply_code(&e) == Some(404) => {}
        Err(e) => {
            return Err(SubscribeError::Refused(format!(
                "dead-letter queue {dead}: {e}"
            )));
        }
    }
    // The 404 closed that channel.
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| SubscribeError::Disconnected(e.to_string()))?;
    channel
        .queue_declare(
            dead.as_str().into(),
            lapin::options::QueueDeclareOptions::durable(),
            lapin::types::FieldTable::default(),
        )
        .await
        .map_err(|e| SubscribeError::Refused(format!("declaring dead-letter queue {dead}: {e}")))?;
    let _ = channel.close(200, "declared".into()).await;
    tracing::info!(queue = %dead, "lapin: dead-letter queue declared");
    Ok(())
}
