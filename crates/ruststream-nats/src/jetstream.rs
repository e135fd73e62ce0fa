//! The JetStream form: a durable pull consumer, checked or created at start-up.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, FromConsumer, pull};
use async_nats::jetstream::context::{ConsumerInfoErrorKind, GetStreamByNameErrorKind};
use async_nats::jetstream::{self, stream};
use ruststream_core::{Attached, Capabilities, SubscribeError, SubscribeSpec, Subscription};

use crate::acker::JsAcker;
use crate::connection::Connection;
use crate::pull::Puller;
use crate::pump::Pump;
use crate::reader::Reader;
use crate::{JetStream, names, progress};

/// What the JetStream form does: settles, requeues (`-NAK`), counts (the consumer's
/// delivery count), delays (`-NAK` with a delay, any length); the attempt cap and the
/// dead letter are the runtime's (JetStream does not dead-letter: the consumer's
/// `max_deliver` is left unlimited, so a message is never dropped without a word).
pub(crate) const CAPABILITIES: Capabilities = Capabilities {
    settles: true,
    requeues: true,
    counts: true,
    delays: Some(ruststream_core::Capabilities::ANY_DELAY),
    dead_letters: false,
    moves: false,
};

const HEARTBEAT: Duration = Duration::from_millis(900);

pub(crate) async fn subscribe(
    inner: &Arc<Connection>,
    spec: SubscribeSpec,
    options: JetStream,
    confirm_acks: bool,
) -> Result<Subscription, SubscribeError> {
    let subject = spec.address.as_str();
    names::check_subject(subject, true).map_err(SubscribeError::BadAddress)?;
    let stream = stream_for(&inner.js, subject, &options).await?;
    crate::dead::ensure(inner, &spec, &stream).await?;
    let consumer = consumer_for(&stream, subject, &options, spec.in_flight).await?;
    let ack_wait = consumer.cached_info().config.ack_wait;
    let (stream_name, consumer_name) = {
        let info = consumer.cached_info();
        (info.stream_name.clone(), info.name.clone())
    };
    let puller = Puller::new(
        &inner.client,
        &stream_name,
        &consumer_name,
        spec.in_flight.clamp(1, 1024),
        crate::pull::EXPIRES,
        HEARTBEAT,
    )
    .await
    .map_err(|error| {
        SubscribeError::Disconnected(format!("pulling from consumer of {subject}: {error}"))
    })?;
    // A graceful stop sends no further pull request and ends the stream after what the
    // outstanding ones bring (pump.rs).
    spec.drain.accept();
    let acker = Arc::new(JsAcker::new(inner, confirm_acks));
    progress::start(Arc::downgrade(&acker), ack_wait, inner.link.subscribe());
    let attached = Attached::new();
    let deliveries = Pump {
        inner: inner.clone(),
        address: spec.address.clone(),
        consumer,
        puller,
        acker: acker.clone(),
        attached: attached.clone(),
        drain: spec.drain.clone(),
    }
    .start();
    let reader = Reader::jetstream(inner, spec.address, deliveries, acker, attached.clone());
    Ok(Subscription {
        deliveries: Box::pin(reader.into_stream()),
        capabilities: CAPABILITIES,
        attached,
    })
}

/// The stream holding `subject`: the one the server names for it, else a new one (named
/// by the option, or after the subject) holding just the subject.
async fn stream_for(
    js: &jetstream::Context,
    subject: &str,
    options: &JetStream,
) -> Result<stream::Stream, SubscribeError> {
    let holder = match js.stream_by_subject(subject).await {
        Ok(name) => Some(name),
        Err(error) if error.kind() == GetStreamByNameErrorKind::NotFound => None,
        Err(error) => {
            return Err(crate::error::jetstream_error(
                "looking up the stream of",
                subject,
                error,
            ));
        }
    };
    let name = match (&options.stream, holder) {
        (Some(wanted), Some(name)) if *wanted != name => {
            return Err(SubscribeError::BadOption(format!(
                "subject {subject} is held by stream {name}, not by stream {wanted}"
            )));
        }
        (_, Some(name)) => {
            return js.get_stream(&name).await.map_err(|error| {
                crate::error::jetstream_error("opening the stream of", subject, error)
            });
        }
        (Some(wanted), None) => wanted.clone(),
        (None, None) => names::from_subject(subject),
    };
    if js.get_stream(&name).await.is_ok() {
        return Err(SubscribeError::BadOption(format!(
            "stream {name} exists and does not hold subject {subject}"
        )));
    }
    let config = stream::Config {
        name: name.clone(),
        subjects: vec![subject.to_owned()],
        num_replicas: options.replicas.unwrap_or(1),
        description: Some(crate::dead::CREATED.to_owned()),
        ..stream::Config::default()
    };
    tracing::info!(stream = %name, subject, "nats: creating stream");
    crate::create::create_stream(js, config)
        .await
        .map_err(|error| crate::error::jetstream_error("creating a stream for", subject, error))
}

/// The durable consumer: created if missing; if present, checked (it must filter the
/// subject and take explicit acknowledgements) and updated to the mount's settings.
async fn consumer_for(
    stream: &stream::Stream,
    subject: &str,
    options: &JetStream,
    in_flight: usize,
) -> Result<jetstream::consumer::PullConsumer, SubscribeError> {
    let name = options
        .consumer
        .clone()
        .unwrap_or_else(|| format!("ruststream-{}", names::from_subject(subject)));
    let mut config = match stream.consumer_info(&name).await {
        Ok(info) => {
            let config = info.config;
            if config.filter_subject != subject {
                return Err(SubscribeError::BadOption(format!(
                    "consumer {name} filters {:?}, not {subject}",
                    config.filter_subject
                )));
            }
            if config.ack_policy != AckPolicy::Explicit || config.deliver_subject.is_some() {
                return Err(SubscribeError::BadOption(format!(
                    "consumer {name} is not a pull consumer with explicit acknowledgements"
                )));
            }
            if config.max_deliver > 0 {
                tracing::warn!(consumer = %name, max_deliver = config.max_deliver,
                    "nats: the consumer's max_deliver is made unlimited: the runtime caps attempts and dead-letters");
            }
            pull::Config::try_from_consumer_config(config)
                .map_err(|error| SubscribeError::BadOption(format!("consumer {name}: {error}")))?
        }
        Err(error) if error.kind() == ConsumerInfoErrorKind::NotFound => pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: subject.to_owned(),
            ack_policy: AckPolicy::Explicit,
            ..pull::Config::default()
        },
        Err(error) => {
            return Err(crate::error::jetstream_error(
                "looking up the consumer of",
                subject,
                error,
            ));
        }
    };
    let in_flight = u32::try_from(in_flight).unwrap_or(u32::MAX);
    config.max_ack_pending = i64::from(
        options
            .max_ack_pending
            .unwrap_or(in_flight.saturating_mul(4).max(4)),
    );
    config.max_deliver = -1;
    if let Some(ack_wait) = options.ack_wait {
        config.ack_wait = ack_wait;
    }
    stream
        .create_consumer(config)
        .await
        .map_err(|error| crate::error::jetstream_error("creating the consumer of", subject, error))
}
