//! OpenTelemetry tracing: a span per delivery and per publish, with the W3C trace
//! context carried in the messages' headers, the runtime's own copies included.

use std::sync::Arc;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use ruststream_core::{
    Address, BoxFuture, CORRELATION_ID, Delivery, Headers, MESSAGE_ID, Message, Publish,
    PublishError,
};

use super::names::{plan_name, verdict_name};
use crate::layer::{
    Layer, Middleware, PublishLayer, PublishMiddleware, Republish, Sent, Subscribed, Visit,
};
use crate::settled::{Cause, Settled};

/// Traces a service with OpenTelemetry: a `process` span per delivery, a `publish` span
/// per message the service publishes, a span per retry copy, delayed copy and dead
/// letter the runtime publishes, and the W3C `traceparent`/`tracestate` headers on every
/// one of those messages, so that one trace follows a message through its retries, its
/// dead letter and its reply.
///
/// Add it with [`App::tracing`](crate::App::tracing) (its layer around every mount and
/// its publish layer); made by [`init_tracing`](super::init_tracing) (OTLP over HTTP) or
/// over a tracer provider of your own ([`Tracing::new`]). Cheap to clone.
///
/// ```
/// use opentelemetry_sdk::trace::SdkTracerProvider;
/// use ruststream::observe::Tracing;
///
/// let tracing = Tracing::new(SdkTracerProvider::builder().build());
/// let app = ruststream::App::new(ruststream::memory::MemoryBroker::new()).tracing(&tracing);
/// # let _ = app;
/// ```
#[derive(Clone, Debug)]
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    system: Option<&'static str>,
}

impl Tracing {
    /// Tracing through `provider` (the tracer `ruststream`).
    pub fn new(provider: SdkTracerProvider) -> Self {
        let tracer = provider.tracer("ruststream");
        Self {
            provider,
            tracer,
            system: None,
        }
    }

    /// The tracer provider: flush it (`force_flush`) or shut it down before the process
    /// ends, so that the last spans are exported.
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }

    /// The same tracing, its publish spans naming `system` (the broker) as
    /// `messaging.system`.
    pub(crate) fn for_system(&self, system: &'static str) -> Self {
        Self {
            system: Some(system),
            ..self.clone()
        }
    }
}

impl Layer for Tracing {
    fn layer(&self, subscribed: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(Following {
            tracer: self.tracer.clone(),
            system: subscribed.system(),
        })
    }
}

impl PublishLayer for Tracing {
    fn layer(&self) -> Arc<dyn PublishMiddleware> {
        Arc::new(Publishing {
            tracer: self.tracer.clone(),
            system: self.system,
        })
    }
}

/// The middleware of one subscription: starts a visit (a span) per delivery.
struct Following {
    tracer: SdkTracer,
    system: &'static str,
}

impl Middleware for Following {
    fn visit(&self, delivery: &Delivery) -> Option<Arc<dyn Visit>> {
        let parent = TraceContextPropagator::new().extract(&Reading(delivery.headers()));
        let address = delivery.address().as_str();
        let mut attributes = vec![
            KeyValue::new("messaging.system", messaging_system(self.system)),
            KeyValue::new("messaging.destination.name", address.to_owned()),
            KeyValue::new("messaging.operation.type", "process"),
            KeyValue::new("messaging.operation.name", "process"),
            KeyValue::new(
                "messaging.message.body.size",
                delivery.payload().len() as i64,
            ),
            KeyValue::new("ruststream.attempt", i64::from(delivery.redelivery_count())),
        ];
        identify(delivery.headers(), &mut attributes);
        let span = self
            .tracer
            .span_builder(format!("process {address}"))
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        Some(Arc::new(Traced {
            cx: parent.with_span(span),
            tracer: self.tracer.clone(),
            system: self.system,
        }))
    }
}

/// One delivery's span, as the current context around its handler and its reply.
struct Traced {
    cx: Context,
    tracer: SdkTracer,
    system: &'static str,
}

impl Visit for Traced {
    fn enters(&self) -> bool {
        true
    }

    fn within(&self, f: &mut dyn FnMut()) {
        let _entered = self.cx.clone().attach();
        f();
    }

    fn publishes(&self, copy: &Republish, message: &mut Message) -> Option<Sent> {
        let (name, to) = (copy.as_str(), &copy.to);
        let mut attributes = vec![
            KeyValue::new("messaging.system", messaging_system(self.system)),
            KeyValue::new("messaging.destination.name", to.as_str().to_owned()),
            KeyValue::new("messaging.operation.type", "send"),
            KeyValue::new("messaging.operation.name", name),
            KeyValue::new("messaging.message.body.size", message.payload.len() as i64),
        ];
        identify(&message.headers, &mut attributes);
        let span = self
            .tracer
            .span_builder(format!("{name} {to}"))
            .with_kind(SpanKind::Producer)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.cx);
        let cx = self.cx.with_span(span);
        inject(&cx, &mut message.headers);
        Some(Box::new(move |result| end_publish(&cx, result)))
    }

    fn settled(&self, settled: &Settled) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            "ruststream.verdict",
            verdict_name(settled.verdict()),
        ));
        span.set_attribute(KeyValue::new("ruststream.plan", plan_name(settled.plan())));
        let cause = match settled.cause() {
            Cause::Handler => "handler",
            Cause::Decode(_) => "decode",
            Cause::Panic(_) => "panic",
            Cause::Timeout(_) => "timeout",
            Cause::Layer => "layer",
            Cause::Spent => "spent",
        };
        span.set_attribute(KeyValue::new("ruststream.cause", cause));
        if let Some(copy) = &settled.plan().copy {
            span.set_attribute(KeyValue::new("ruststream.copy_to", copy.to.to_string()));
        }
        let failure = match (settled.cause(), settled.error()) {
            (_, Some(error)) => Some(error.to_string()),
            (Cause::Decode(e) | Cause::Panic(e), None) => Some(format!("{cause}: {e}")),
            (Cause::Timeout(limit), None) => Some(format!("ran longer than {limit:?}")),
            _ => None,
        };
        if let Some(failure) = failure {
            span.set_attribute(KeyValue::new("error.type", cause));
            span.set_status(Status::error(failure));
        }
        span.end();
    }
}

/// The middleware of the service's publisher: a span per publish, its context in the
/// message's headers.
struct Publishing {
    tracer: SdkTracer,
    system: Option<&'static str>,
}

impl PublishMiddleware for Publishing {
    fn publish<'a>(
        &'a self,
        to: Address,
        mut message: Message,
        next: &'a dyn Publish,
    ) -> BoxFuture<'a, Result<(), PublishError>> {
        // The parent is the current context when the publish starts: the delivery's span
        // where a handler (or a reply) publishes.
        let mut attributes = vec![
            KeyValue::new("messaging.destination.name", to.as_str().to_owned()),
            KeyValue::new("messaging.operation.type", "send"),
            KeyValue::new("messaging.operation.name", "publish"),
            KeyValue::new("messaging.message.body.size", message.payload.len() as i64),
        ];
        if let Some(system) = self.system {
            attributes.push(KeyValue::new("messaging.system", messaging_system(system)));
        }
        identify(&message.headers, &mut attributes);
        let span = self
            .tracer
            .span_builder(format!("publish {to}"))
            .with_kind(SpanKind::Producer)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &Context::current());
        let cx = Context::current().with_span(span);
        inject(&cx, &mut message.headers);
        Box::pin(async move {
            let result = next.publish(to, message).await;
            end_publish(&cx, result.as_ref().map(|_| ()));
            result
        })
    }
}

/// Ends a publish span: an error status where the broker did not take the message.
fn end_publish(cx: &Context, result: Result<(), &PublishError>) {
    let span = cx.span();
    if let Err(error) = result {
        span.set_attribute(KeyValue::new("error.type", "publish"));
        span.set_status(Status::error(error.to_string()));
    }
    span.end();
}

/// The message id and conversation id of a message, as span attributes.
fn identify(headers: &Headers, attributes: &mut Vec<KeyValue>) {
    if let Some(id) = headers.get_str(MESSAGE_ID) {
        attributes.push(KeyValue::new("messaging.message.id", id.to_owned()));
    }
    if let Some(id) = headers.get_str(CORRELATION_ID) {
        attributes.push(KeyValue::new(
            "messaging.message.conversation_id",
            id.to_owned(),
        ));
    }
}

/// Writes `cx`'s span as `traceparent` (and `tracestate`) into `headers`, replacing
/// those a copied message arrived with.
fn inject(cx: &Context, headers: &mut Headers) {
    headers.remove("traceparent");
    headers.remove("tracestate");
    TraceContextPropagator::new().inject_context(cx, &mut Writing(headers));
}

struct Reading<'a>(&'a Headers);

impl Extractor for Reading<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get_str(key)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(name, _)| name.as_str()).collect()
    }
}

struct Writing<'a>(&'a mut Headers);

impl Injector for Writing<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

/// OpenTelemetry's `messaging.system` for a broker's name: the semantic conventions'
/// value where they have one (`rabbitmq` for both RabbitMQ adapters, `amqp` and
/// `lapin`), else the name (`redis`, `nats`, `memory`).
fn messaging_system(broker: &'static str) -> &'static str {
    match broker {
        "amqp" | "lapin" => "rabbitmq",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_rabbitmq_adapters_are_rabbitmq() {
        assert_eq!(super::messaging_system("amqp"), "rabbitmq");
        assert_eq!(super::messaging_system("lapin"), "rabbitmq");
        assert_eq!(super::messaging_system("redis"), "redis");
        assert_eq!(super::messaging_system("nats"), "nats");
    }
}
