//! The dead letter of a JetStream mount has a stream: a dead letter published where no
//! stream holds its subject is refused, and the runtime would hand the message back and
//! run its handler again, without end.

use std::sync::Arc;

use async_nats::jetstream::context::GetStreamByNameErrorKind;
use async_nats::jetstream::stream;
use ruststream_core::{SubscribeError, SubscribeSpec};

use crate::connection::Connection;
use crate::error::jetstream_error;
use crate::names;

/// The description of a stream the adapter created.
pub(crate) const CREATED: &str = "created by ruststream";

/// Makes sure the mount's dead letter, if it declares one, is held by a stream: one
/// already does; else, where the adapter created the mount's stream (`mount`, marked
/// [`CREATED`]), it creates one for the dead letter too (named after its subject, with
/// the mount stream's replicas); else (the operator's stream) the subscription is
/// refused with the fix. A dead letter published with core NATS
/// (`NatsBroker::core`) needs none.
pub(crate) async fn ensure(
    inner: &Arc<Connection>,
    spec: &SubscribeSpec,
    mount: &stream::Stream,
) -> Result<(), SubscribeError> {
    let Some(dead) = &spec.declaration.dead_letter else {
        return Ok(());
    };
    if inner.is_core(dead) {
        return Ok(());
    }
    let subject = dead.as_str();
    names::check_subject(subject, false)
        .map_err(|why| SubscribeError::BadAddress(format!("dead letter {subject}: {why}")))?;
    match inner.js.stream_by_subject(subject).await {
        Ok(_) => return Ok(()),
        Err(error) if error.kind() == GetStreamByNameErrorKind::NotFound => {}
        Err(error) => {
            return Err(jetstream_error(
                "looking up the stream of dead letter",
                subject,
                error,
            ));
        }
    }
    let name = names::from_subject(subject);
    let config = &mount.cached_info().config;
    if config.description.as_deref() != Some(CREATED) {
        return Err(SubscribeError::BadAddress(format!(
            "dead letter {subject}: no JetStream stream holds it (stream {} is not the \
             adapter's): create one, `nats stream add {name} --subjects {subject}`, or route \
             it with NatsBroker::core",
            config.name
        )));
    }
    if inner.js.get_stream(&name).await.is_ok() {
        return Err(SubscribeError::BadAddress(format!(
            "dead letter {subject}: stream {name} exists and does not hold it"
        )));
    }
    tracing::info!(stream = %name, subject, "nats: creating the dead letter's stream");
    crate::create::create_stream(
        &inner.js,
        stream::Config {
            name,
            subjects: vec![subject.to_owned()],
            num_replicas: config.num_replicas,
            description: Some(CREATED.to_owned()),
            ..stream::Config::default()
        },
    )
    .await
    .map(drop)
    .map_err(|error| jetstream_error("creating a stream for dead letter", subject, error))
}
