//! Finding out what a queue is over AMQP 0-9-1, which has no command that reads a
//! queue's arguments.
//!
//! A `queue.declare` of an existing queue with other arguments than it has is refused
//! with `PRECONDITION_FAILED`, and RabbitMQ's refusal names one argument and its current
//! value (`inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received '3'
//! but current is '2'`). The probe declares the queue as the mount implies (where it may
//! make it; else, after a passive declaration, as a quorum queue with no other
//! arguments), takes each refusal's current value into the next declaration (on a new
//! channel: the refusal closes the channel), and stops when RabbitMQ accepts one: a
//! declaration equivalent to the queue, which changes nothing, and whose arguments are
//! the queue's (those RabbitMQ compares: type, delivery limit, dead-letter exchange and
//! key, lengths, TTLs). Policies are not arguments and stay unseen. A user without the
//! configure permission on the queue cannot probe it (`ACCESS_REFUSED`): what it is stays
//! unknown.
//!
//! A refusal's text is at most 255 bytes, and RabbitMQ cuts a longer one: with a long
//! queue name and a long dead-letter key, the current value loses its end. Such a value
//! is taken from the caller's hints (the dead-letter exchange and key the mount
//! declares) when one begins with what is left, and the next declaration checks it: a
//! wrong guess is refused again and the queue stays unreadable.

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ErrorKind};

use crate::queue::{QueueInfo, integer};

/// At most this many declarations per queue (each learns one argument).
const TRIES: usize = 16;

/// What the probe found.
#[derive(Debug)]
pub(crate) enum Found {
    /// The queue, with the arguments RabbitMQ compares.
    Queue(QueueInfo),
    /// There is no such queue.
    Missing,
    /// The broker answered in a way the probe cannot read: why.
    Unreadable(String),
    /// The user may not declare the queue (no configure permission): why.
    Denied(String),
}

/// Why the probe could not run.
#[derive(Debug)]
pub(crate) enum ProbeError {
    /// The connection failed under it.
    Connection(String),
    /// The broker refused to show the queue (access, an exclusive queue of another
    /// connection).
    Refused(String),
}

/// Finds out what `queue` is, or declares it: with `declare`, the first declaration is
/// `declare` itself (durable, not passive), which makes a missing queue and is accepted
/// by one made the same way: no refusal, so nothing logged at error. Without (or where
/// the user may not configure the queue) a passive declaration first tells a missing
/// queue. `hints` are values some arguments may have (argument name, value), for a
/// refusal cut short.
pub(crate) async fn describe(
    connection: &Connection,
    queue: &str,
    hints: &[(&str, AMQPValue)],
    declare: Option<FieldTable>,
) -> Result<Found, ProbeError> {
    if let Some(args) = declare {
        let tried = args.inner().iter().map(|(k, v)| (k.as_str(), v.clone()));
        let tried: Vec<(&str, AMQPValue)> = tried
            .filter_map(|(k, v)| hints.iter().find(|(h, _)| *h == k).map(|(h, _)| (*h, v)))
            .collect();
        match learn(connection, queue, hints, args.clone(), tried).await? {
            // No configure permission: what a passive declaration can tell.
            Found::Denied(_) => {}
            found => return Ok(found),
        }
    }
    let channel = open(connection).await?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    if let Err(e) = channel
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
    {
        return match reply_code(&e) {
            Some(404) => Ok(Found::Missing),
            Some(_) => Err(ProbeError::Refused(e.to_string())),
            None => Err(ProbeError::Connection(e.to_string())),
        };
    }
    let _ = channel.close(200, "probed".into()).await;
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), text("quorum"));
    match learn(
        connection,
        queue,
        hints,
        args,
        vec![("x-queue-type", text("quorum"))],
    )
    .await?
    {
        Found::Denied(why) => Ok(Found::Unreadable(why)),
        found => Ok(found),
    }
}

/// Declares `queue` with `args`, taking each refusal's value into the next declaration,
/// until one is accepted. `tried`: the hints declared so far (each is tried once).
async fn learn<'a>(
    connection: &Connection,
    queue: &str,
    hints: &'a [(&'a str, AMQPValue)],
    mut args: FieldTable,
    mut tried: Vec<(&'a str, AMQPValue)>,
) -> Result<Found, ProbeError> {
    let mut flags = QueueDeclareOptions::durable();
    for _ in 0..TRIES {
        let channel = open(connection).await?;
        let error = match channel
            .queue_declare(queue.into(), flags, args.clone())
            .await
        {
            Ok(_) => {
                let _ = channel.close(200, "probed".into()).await;
                return Ok(Found::Queue(crate::queue::from_arguments(&args)));
            }
            Err(e) => e,
        };
        match reply_code(&error) {
            Some(406) => {}
            // A user without the configure permission may still consume.
            Some(403) => return Ok(Found::Denied(error.to_string())),
            Some(_) => return Err(ProbeError::Refused(error.to_string())),
            None => return Err(ProbeError::Connection(error.to_string())),
        }
        let message = error.to_string();
        let Some((key, current)) = inequivalent(&message) else {
            return Ok(Found::Unreadable(message));
        };
        if let Current::Cut(start) = current {
            // A value cut short: a hint that begins with what is left and was not tried.
            let hint = hints.iter().find(|(name, value)| {
                *name == key
                    && begins(value, start)
                    && !tried.iter().any(|(k, v)| k == name && v == value)
            });
            let Some((name, value)) = hint else {
                return Ok(Found::Unreadable(format!(
                    "{message} (cut short by the broker, and no hint fits)"
                )));
            };
            tried.push((name, value.clone()));
            args.insert((*name).into(), value.clone());
            continue;
        }
        let learned = match key {
            "durable" => current.flag().map(|b| flags.durable = b),
            "auto_delete" => current.flag().map(|b| flags.auto_delete = b),
            "exclusive" => current.flag().map(|b| flags.exclusive = b),
            _ => current
                .value(args.inner().get(key))
                .map(|value| match value {
                    Some(value) => {
                        args.insert(key.into(), value);
                    }
                    None => {
                        let mut kept = FieldTable::default();
                        for (k, v) in &args {
                            if k.as_str() != key {
                                kept.insert(k.clone(), v.clone());
                            }
                        }
                        args = kept;
                    }
                }),
        };
        if learned.is_none() {
            return Ok(Found::Unreadable(message));
        }
    }
    Ok(Found::Unreadable(format!(
        "no equivalent declaration after {TRIES} tries"
    )))
}

/// Whether `value`, as RabbitMQ writes it, begins with `start`.
fn begins(value: &AMQPValue, start: &str) -> bool {
    match value {
        AMQPValue::LongString(s) => s.as_bytes().starts_with(start.as_bytes()),
        other => integer(other).is_some_and(|n| n.to_string().starts_with(start)),
    }
}

async fn open(connection: &Connection) -> Result<lapin::Channel, ProbeError> {
    connection
        .create_channel()
        .await
        .map_err(|e| ProbeError::Connection(e.to_string()))
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()))
}

/// The reply code of a channel or connection closed by the broker.
pub(crate) fn reply_code(error: &lapin::Error) -> Option<u16> {
    match error.kind() {
        ErrorKind::ProtocolError(e) => Some(e.get_id()),
        _ => None,
    }
}

/// A value as RabbitMQ writes it in a refusal.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Current<'a> {
    /// `none`: the queue does not have the argument.
    None,
    /// `the value 'V' of type 'T'`.
    Typed(&'a str, &'a str),
    /// `'V'`: of the type that was sent.
    Bare(&'a str),
    /// Cut short (the refusal was longer than 255 bytes): what is left of the value, or
    /// nothing.
    Cut(&'a str),
}

impl Current<'_> {
    fn flag(&self) -> Option<bool> {
        match self {
            Current::Bare(v) => v.parse().ok(),
            _ => None,
        }
    }

    /// The argument to declare next (`None`: leave it out), or `None` if unreadable.
    fn value(&self, sent: Option<&AMQPValue>) -> Option<Option<AMQPValue>> {
        Some(Some(match *self {
            Current::None => return Some(None),
            Current::Typed(v, "longstr") => text(v),
            Current::Typed(v, "bool") => AMQPValue::Boolean(v.parse().ok()?),
            Current::Typed(
                v,
                "long" | "signedint" | "short" | "byte" | "unsignedbyte" | "unsignedshort"
                | "unsignedint",
            ) => AMQPValue::LongLongInt(v.parse().ok()?),
            Current::Typed(..) | Current::Cut(_) => return None,
            Current::Bare(v) => match sent? {
                AMQPValue::LongString(_) | AMQPValue::ShortString(_) => text(v),
                AMQPValue::Boolean(_) => AMQPValue::Boolean(v.parse().ok()?),
                other if integer(other).is_some() => AMQPValue::LongLongInt(v.parse().ok()?),
                _ => return None,
            },
        }))
    }
}

/// Reads `inequivalent arg 'KEY' for queue ...: received ... but current is VALUE`.
pub(crate) fn inequivalent(message: &str) -> Option<(&str, Current<'_>)> {
    let rest = &message[message.find("inequivalent arg '")? + "inequivalent arg '".len()..];
    let (key, rest) = rest.split_once("' for ")?;
    // RabbitMQ ends a refusal it cut at 255 bytes with `...`.
    let cut = rest.trim_end().ends_with("...");
    let Some((_, current)) = rest.rsplit_once(" but current is ") else {
        return cut.then_some((key, Current::Cut("")));
    };
    let current = current.trim_end();
    if let Some(start) = current.strip_suffix("...") {
        return Some((
            key,
            Current::Cut(start.strip_prefix("the value '").unwrap_or("")),
        ));
    }
    let value = if current == "none" {
        Current::None
    } else if let Some(typed) = current.strip_prefix("the value '") {
        match typed.rsplit_once("' of type '") {
            Some((value, kind)) => Current::Typed(value, kind.strip_suffix('\'')?),
            None => Current::Cut(typed),
        }
    } else {
        Current::Bare(current.strip_prefix('\'')?.strip_suffix('\'')?)
    };
    Some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str =
        "protocol error: AMQP soft error: PRECONDITION-FAILED: PRECONDITION_FAILED - ";

    #[test]
    fn reads_rabbitmq_refusals() {
        let cases = [
            (
                "inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': received none but current is the value '' of type 'longstr'",
                ("x-dead-letter-exchange", Current::Typed("", "longstr")),
            ),
            (
                "inequivalent arg 'x-queue-type' for queue 'c' in vhost '/': received the value 'quorum' of type 'longstr' but current is none",
                ("x-queue-type", Current::None),
            ),
            (
                "inequivalent arg 'x-queue-type' for queue 'c' in vhost '/': received 'quorum' but current is 'classic'",
                ("x-queue-type", Current::Bare("classic")),
            ),
            (
                "inequivalent arg 'durable' for queue 'c' in vhost '/': received 'false' but current is 'true'",
                ("durable", Current::Bare("true")),
            ),
            (
                "inequivalent arg 'x-dead-letter-routing-key' for queue 'a but current is b' in vhost '/': received none but current is the value 'it's' of type 'longstr'",
                (
                    "x-dead-letter-routing-key",
                    Current::Typed("it's", "longstr"),
                ),
            ),
        ];
        for (message, want) in cases {
            assert_eq!(
                inequivalent(&format!("{PREFIX}{message}")),
                Some(want),
                "{message}"
            );
        }
        assert_eq!(inequivalent("NOT_FOUND - no queue 'q'"), None);
        for (tail, left) in [
            ("received none but current is the value 'q-dea...", "q-dea"),
            ("received none but current is the v...", ""),
            ("received no...", ""),
        ] {
            let cut = format!(
                "{PREFIX}inequivalent arg 'x-dead-letter-routing-key' for queue 'q' in vhost \
                 '/': {tail}"
            );
            assert_eq!(
                inequivalent(&cut),
                Some(("x-dead-letter-routing-key", Current::Cut(left))),
                "{tail}"
            );
        }
    }

    #[test]
    fn values_take_the_type_named_or_sent() {
        assert_eq!(Current::None.value(None), Some(None));
        assert_eq!(
            Current::Typed("2", "signedint").value(None),
            Some(Some(AMQPValue::LongLongInt(2)))
        );
        assert_eq!(
            Current::Bare("2").value(Some(&AMQPValue::LongInt(3))),
            Some(Some(AMQPValue::LongLongInt(2)))
        );
        assert_eq!(
            Current::Bare("classic").value(Some(&text("quorum"))),
            Some(Some(text("classic")))
        );
        assert_eq!(Current::Typed("x", "table").value(None), None);
        assert_eq!(Current::Bare("true").flag(), Some(true));
    }
}
