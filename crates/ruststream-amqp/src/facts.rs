//! Finding out about a subscription's queue at subscribe (and declaring it if asked).

use fe2o3_amqp_types::primitives::Value;
use ruststream_core::{Declaration, SubscribeError};

use crate::connection::Connector;
use crate::management::{Management, ManagementError, queue_path};
use crate::options::SubscribeOptions;
use crate::queue::{QueueInfo, QueueType, arguments};
use ruststream_rabbitmq::limit;

/// The queue behind `source` as RabbitMQ describes it, made first if `options` declares
/// it; `None` when there is nothing to find out (not a queue address, no management
/// node: the documented defaults apply). A queue that disagrees with the mount's
/// declaration is `SubscribeError::BadOption`.
pub(crate) async fn find_out(
    connector: &Connector,
    source: &str,
    options: &SubscribeOptions,
    declaration: &Declaration,
) -> Result<Option<QueueInfo>, SubscribeError> {
    let Some(name) = source
        .strip_prefix("/queues/")
        .filter(|n| !n.contains('/'))
        .and_then(|n| crate::url::decode(n).ok())
    else {
        if options.declare.is_some() {
            return Err(SubscribeError::BadOption(format!(
                "declare needs a queue address, not {source}"
            )));
        }
        return Ok(None);
    };
    let mut management = match Management::open(connector).await {
        Ok(m) => m,
        Err(e) if options.declare.is_some() => {
            return Err(SubscribeError::Refused(format!(
                "cannot declare queue {name}: {e}"
            )));
        }
        Err(e) => {
            tracing::info!(queue = %name, error = %e,
                "amqp: cannot find out what the queue is; using the default capabilities");
            return Ok(None);
        }
    };
    let major = connector.broker_major();
    let found = inspect(&mut management, &name, options, declaration, major).await;
    management.close().await;
    found
}

async fn inspect(
    management: &mut Management,
    name: &str,
    options: &SubscribeOptions,
    declaration: &Declaration,
    major: Option<u32>,
) -> Result<Option<QueueInfo>, SubscribeError> {
    let failed = |e: ManagementError| SubscribeError::Disconnected(format!("queue {name}: {e}"));
    let path = queue_path(name);
    let mut answer = management
        .request("GET", &path, None)
        .await
        .map_err(failed)?;
    if answer.status == 404
        && let Some(kind) = options.declare
    {
        let body = arguments(kind, declaration, major).map_err(SubscribeError::BadOption)?;
        let made = management
            .request("PUT", &path, Some(body))
            .await
            .map_err(failed)?;
        if !matches!(made.status, 200 | 201 | 204) {
            return Err(SubscribeError::Refused(format!(
                "declaring queue {name} failed ({}): {}",
                made.status,
                made.text()
            )));
        }
        tracing::info!(queue = %name, ?kind, "amqp: queue declared");
        answer = management
            .request("GET", &path, None)
            .await
            .map_err(failed)?;
    }
    match answer.status {
        200 => {}
        404 => return Err(SubscribeError::BadAddress(format!("no queue {name}"))),
        status if options.declare.is_some() => {
            return Err(SubscribeError::Refused(format!(
                "queue {name}: management answered {status}: {}",
                answer.text()
            )));
        }
        status => {
            // Not allowed to look (a user without access to management), or another
            // answer: consuming may still be allowed; the defaults apply.
            tracing::warn!(queue = %name, status, answer = %answer.text(),
                "amqp: management did not describe the queue; using the default capabilities");
            return Ok(None);
        }
    }
    let Some(info) = crate::queue::parse(&answer.body) else {
        tracing::info!(queue = %name, "amqp: unreadable queue description; using the default capabilities");
        return Ok(None);
    };
    let declared = options.declare.map(QueueType::name);
    let refused = |how: String| SubscribeError::BadOption(format!("queue {name} {how}"));
    if let Some(binding) =
        ruststream_rabbitmq::check(&info, declaration, declared, name).map_err(refused)?
    {
        // Dead-lettered messages keep their routing key (the queue's own name, for a
        // message sent to the queue) unless the queue sets one; a fanout binding usually
        // has none.
        let key = binding.key.as_deref().unwrap_or(name);
        let mut found = false;
        for key in [key, ""] {
            if bound(management, &binding.exchange, &binding.queue, key)
                .await
                .map_err(failed)?
            {
                found = true;
                break;
            }
        }
        if !found {
            return Err(refused(format!(
                "dead-letters through {}, which is not bound to dead_letter {}",
                binding.route(),
                binding.queue
            )));
        }
    }
    dead_letter_queue(management, declaration, options.declare, major).await?;
    if info.kind == "classic" && info.dlx.is_some() && declaration.is_declared() {
        tracing::warn!(queue = %name,
            "amqp: the classic queue has a dead-letter exchange: besides what drop() rejects, \
             it receives the original of every retry_after copy (rejected, then copied \
             after the delay); the mount's dead letters are published by the runtime");
    }
    match limit::check_queue(
        &info,
        options.queue.delivery_limit,
        major,
        declaration,
        name,
    ) {
        Err(how) => return Err(refused(how)),
        Ok(Some(warning)) => tracing::warn!(queue = %name, "amqp: {warning}"),
        Ok(None) => {}
    }
    Ok(Some(info))
}

/// The queue the mount's dead letter names (a queue, not an exchange) must exist, or
/// every message at the cap comes back for ever (a copy to a missing queue is refused
/// and the original handed back): made where the mount declares, durable and of the
/// mount's type (classic for a stream's: a stream keeps what is read, so the dead-letter
/// tools could not remove a letter), with the arguments a mount on it with default
/// options declares, so the service's own mount on its dead letters finds the queue as
/// it would make it. Else a missing one is `SubscribeError::BadAddress` with the fix.
async fn dead_letter_queue(
    management: &mut Management,
    declaration: &Declaration,
    declares: Option<QueueType>,
    major: Option<u32>,
) -> Result<(), SubscribeError> {
    let Some((exchange, Some(dead))) = declaration
        .dead_letter
        .as_ref()
        .and_then(ruststream_rabbitmq::dead_letter_target)
    else {
        return Ok(());
    };
    if !exchange.is_empty() {
        return Ok(());
    }
    let failed =
        |e: ManagementError| SubscribeError::Disconnected(format!("dead-letter queue {dead}: {e}"));
    let path = queue_path(&dead);
    let answer = management
        .request("GET", &path, None)
        .await
        .map_err(failed)?;
    if answer.status != 404 {
        return Ok(());
    }
    let Some(kind) = declares else {
        return Err(SubscribeError::BadAddress(format!(
            "no dead-letter queue {dead}: every message at the cap would come back; fix: make \
             it (`rabbitmqadmin declare queue name={dead} durable=true`), or let the service \
             declare it (declare=classic or declare=quorum)"
        )));
    };
    let kind = match kind {
        QueueType::Stream => QueueType::Classic,
        other => other,
    };
    let body =
        arguments(kind, &Declaration::default(), major).map_err(SubscribeError::BadOption)?;
    let made = management
        .request("PUT", &path, Some(body))
        .await
        .map_err(failed)?;
    if !matches!(made.status, 200 | 201 | 204) {
        return Err(SubscribeError::Refused(format!(
            "declaring dead-letter queue {dead} failed ({}): {}",
            made.status,
            made.text()
        )));
    }
    tracing::info!(queue = %dead, "amqp: dead-letter queue declared");
    Ok(())
}

/// Whether `exchange` is bound to `queue` with `key`.
async fn bound(
    management: &mut Management,
    exchange: &str,
    queue: &str,
    key: &str,
) -> Result<bool, ManagementError> {
    let enc = ruststream_rabbitmq::percent::encode;
    let path = format!(
        "/bindings?src={}&dstq={}&key={}",
        enc(exchange),
        enc(queue),
        enc(key)
    );
    let answer = management.request("GET", &path, None).await?;
    Ok(answer.status == 200
        && match &answer.body {
            Value::List(l) => !l.is_empty(),
            Value::Array(a) => !a.0.is_empty(),
            _ => false,
        })
}
