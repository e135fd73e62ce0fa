//! Finding out what a mount's queue is, and making the queues the mount implies: by
//! default a missing queue becomes a durable quorum queue (`SubscribeOptions::declare`
//! picks the type, `never_declare` makes nothing), and its dead-letter queue is made
//! too (checked with `never_declare`: a dead letter that cannot be routed would bring
//! every message at the cap back for ever).
//!
//! The first declaration is the one the mount implies (not passive): it makes a missing
//! queue and is accepted by a queue made the same way before, so a service's usual start
//! causes no refusal. A refusal closes the channel, and lapin 4.12 logs every channel
//! the server closes at ERROR (`Channel closed`, in its `on_channel_close_received`), so
//! a queue that differs from what the mount implies (made by hand, by a policy-less
//! tool) still costs one such line per differing argument: AMQP 0-9-1 tells a queue's
//! arguments only through refusals.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use lapin::Connection;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use ruststream_core::{SubscribeError, SubscribeSpec};

use crate::SubscribeOptions;
use crate::probe::{self, Found, ProbeError};
use crate::queue::{self, QueueInfo, QueueType};
use crate::server::Version;
use ruststream_rabbitmq::limit;

/// The dead-letter queues a broker made classic for mounts that name no type: a mount of
/// its own on one of them (a handler on the service's dead letters) then declares it as
/// it was made, and meets no refusal.
#[derive(Debug, Default)]
pub(crate) struct Made(Mutex<HashSet<String>>);

impl Made {
    fn insert(&self, queue: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(queue.to_owned());
    }

    fn contains(&self, queue: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(queue)
    }
}

/// What `queue` is (made first if the options let it and it is missing); `None` where
/// the broker's answer could not be read (the defaults apply).
pub(crate) async fn find_out(
    connection: &Connection,
    queue: &str,
    options: &SubscribeOptions,
    spec: &SubscribeSpec,
    (version, made): (&Version, &Made),
) -> Result<Option<QueueInfo>, SubscribeError> {
    if options.reply_queue {
        return Ok(Some(QueueInfo {
            kind: "classic".into(),
            ..QueueInfo::default()
        }));
    }
    let hints = queue::hints(&spec.declaration);
    let implied = if made.contains(queue) {
        QueueType::Classic
    } else {
        QueueType::Quorum
    };
    let kind = (!options.never_declare).then(|| options.declare.unwrap_or(implied));
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
    let refused = |how: String| SubscribeError::BadOption(format!("queue {queue} {how}"));
    let declared = options.declare.map(QueueType::name);
    if let Some(binding) =
        ruststream_rabbitmq::check(&info, &spec.declaration, declared, queue).map_err(refused)?
    {
        // AMQP 0-9-1 cannot read bindings: whether the exchange reaches the queue is not
        // known, so the mount must name the exchange itself.
        return Err(refused(format!(
            "dead-letters through {}, which cannot be checked against dead_letter {}: name \
             it as /exchanges/{}{}",
            binding.route(),
            binding.queue,
            binding.exchange,
            binding.key.map(|k| format!("/{k}")).unwrap_or_default()
        )));
    }
    // The dead-letter queue is of the type the mount names; a classic one where it names
    // none, which the dead-letter tools can browse over AMQP 0-9-1 (a quorum queue would
    // count every message browsed as a delivery).
    let dead_kind = match (kind, options.declare) {
        (None, _) => None,
        (Some(_), Some(named)) => Some((named, version.major().await)),
        (Some(_), None) => Some((QueueType::Classic, version.major().await)),
    };
    if let Some(dead) = dead_letter_exists(connection, spec, dead_kind).await?
        && options.declare.is_none()
    {
        made.insert(&dead);
    }
    if limit::applies(&info, options.queue.delivery_limit) {
        let major = version.major().await;
        match limit::check_queue(
            &info,
            options.queue.delivery_limit,
            major,
            &spec.declaration,
            queue,
        ) {
            Err(how) => return Err(refused(how)),
            Ok(Some(warning)) => tracing::warn!(queue, "lapin: {warning}"),
            Ok(None) => {}
        }
    }
    Ok(Some(info))
}

/// Where the mount's dead letter goes must exist, or every message at the cap comes back
/// again (a dead letter RabbitMQ cannot route is refused, and the delivery handed back).
/// A queue (the default exchange routes by its name) is made if missing where the mount
/// declares, durable and of the type `declares` says, with the arguments a mount on it
/// with default options declares: so the service's own mount on its dead letters finds
/// the queue as it would make it, and costs no refusal. Not passive, so that a missing
/// queue costs no refusal either; one that exists with other arguments refuses it,
/// logged by lapin, and is left as it is. Else it is checked. An exchange
/// (`/exchanges/X/K`) is the operator's to make and bind, and only checked. A missing
/// one is `SubscribeError::BadAddress` with the fix. `Some(queue)`: the queue declared.
async fn dead_letter_exists(
    connection: &Connection,
    spec: &SubscribeSpec,
    declares: Option<(QueueType, Option<u32>)>,
) -> Result<Option<String>, SubscribeError> {
    let Some(address) = spec.declaration.dead_letter.as_ref() else {
        return Ok(None);
    };
    let Some((exchange, key)) = ruststream_rabbitmq::dead_letter_target(address) else {
        return Ok(None);
    };
    if !exchange.is_empty() {
        return exchange_exists(connection, &exchange).await.map(|()| None);
    }
    let Some(dead) = key else { return Ok(None) };
    if let Some((kind, major)) = declares {
        let arguments = queue::arguments(kind, &ruststream_core::Declaration::default(), major)
            .map_err(SubscribeError::BadOption)?;
        let channel = open(connection).await?;
        match channel
            .queue_declare(
                dead.as_str().into(),
                QueueDeclareOptions::durable(),
                arguments,
            )
            .await
        {
            Ok(_) => {
                let _ = channel.close(200, "declared".into()).await;
                tracing::debug!(queue = %dead, "lapin: dead-letter queue declared (made if missing)");
                return Ok(Some(dead));
            }
            // It exists, with other arguments.
            Err(e) if probe::reply_code(&e) == Some(406) => return Ok(None),
            // No configure permission: whether it exists, below.
            Err(e) if probe::reply_code(&e) == Some(403) => {}
            Err(e) => {
                return Err(SubscribeError::Refused(format!(
                    "declaring dead-letter queue {dead}: {e}"
                )));
            }
        }
    }
    let channel = open(connection).await?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    match channel
        .queue_declare(dead.as_str().into(), passive, FieldTable::default())
        .await
    {
        Ok(_) => {
            let _ = channel.close(200, "checked".into()).await;
            Ok(None)
        }
        Err(e) if probe::reply_code(&e) == Some(404) => {
            let how = if declares.is_some() {
                "the user may not declare it (no configure permission)"
            } else {
                "declare=never"
            };
            Err(SubscribeError::BadAddress(format!(
                "no dead-letter queue {dead} ({how}): every message at the cap would come \
                 back; fix: make it (`rabbitmqadmin declare queue name={dead} durable=true`), \
                 or let the service declare it (the default)"
            )))
        }
        Err(e) => Err(SubscribeError::Refused(format!(
            "dead-letter queue {dead}: {e}"
        ))),
    }
}

/// Whether the exchange a dead letter is published to exists.
async fn exchange_exists(connection: &Connection, exchange: &str) -> Result<(), SubscribeError> {
    let channel = open(connection).await?;
    let passive = lapin::options::ExchangeDeclareOptions {
        passive: true,
        ..lapin::options::ExchangeDeclareOptions::default()
    };
    match channel
        .exchange_declare(
            exchange.into(),
            lapin::ExchangeKind::Direct,
            passive,
            FieldTable::default(),
        )
        .await
    {
        Ok(()) => {
            let _ = channel.close(200, "checked".into()).await;
            Ok(())
        }
        Err(e) if probe::reply_code(&e) == Some(404) => Err(SubscribeError::BadAddress(format!(
            "no dead-letter exchange {exchange}: every message at the cap would come back; \
             fix: make it and bind the dead-letter queue to it (`rabbitmqadmin declare \
             exchange name={exchange} type=direct`, `rabbitmqadmin declare binding \
             source={exchange} destination=QUEUE routing_key=KEY`)"
        ))),
        Err(e) => Err(SubscribeError::Refused(format!(
            "dead-letter exchange {exchange}: {e}"
        ))),
    }
}

async fn open(connection: &Connection) -> Result<lapin::Channel, SubscribeError> {
    connection
        .create_channel()
        .await
        .map_err(|e| SubscribeError::Disconnected(e.to_string()))
}
