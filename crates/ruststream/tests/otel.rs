//! OpenTelemetry tracing (feature `otel`) on Redis: one trace follows a message through
//! its publish, its retries (an immediate copy, a delayed copy), its dead letter and the
//! dead letter's handling, and a request through its reply; on the memory broker, whose
//! redeliveries are its own, through those and its dead letter. The spans are exported
//! over OTLP/HTTP to a receiver in the test that decodes the collector's protocol
//! (`ExportTraceServiceRequest`, from `opentelemetry-proto`).
//!
//! Redis from `RUSTSTREAM_REDIS_URL` (default `redis://127.0.0.1:6379`,
//! `scripts/redis.sh` starts one).

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use ruststream::observe::Tracing;
use ruststream::{App, Attempt, Mount, Outcome, Publisher, Reply, retry, retry_after};
use support::{redis, redis_url, unique};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The spans an OTLP/HTTP receiver was sent.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Span>>>);

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// An OTLP/HTTP receiver on 127.0.0.1:0: `POST /v1/traces` with a protobuf
/// `ExportTraceServiceRequest`, answered with an empty `ExportTraceServiceResponse`.
async fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
    let received = Received::default();
    let spans = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let spans = spans.clone();
            tokio::spawn(async move { serve(stream, &spans).await });
        }
    });
    (endpoint, received)
}

async fn serve(mut stream: TcpStream, received: &Received) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let (end, length) = loop {
        let n = stream.read(&mut buf).await.expect("reads");
        assert!(n > 0, "the request ended before its headers");
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            assert!(head.starts_with("post /v1/traces "), "{head}");
            assert!(
                head.contains("content-type: application/x-protobuf"),
                "{head}"
            );
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .expect("a content-length");
            break (end + 4, length);
        }
    };
    while raw.len() < end + length {
        let n = stream.read(&mut buf).await.expect("reads");
        assert!(n > 0, "the body was cut short");
        raw.extend_from_slice(&buf[..n]);
    }
    let request =
        ExportTraceServiceRequest::decode(&raw[end..end + length]).expect("a trace export");
    let spans = request
        .resource_spans
        .into_iter()
        .flat_map(|resource| resource.scope_spans)
        .flat_map(|scope| scope.spans);
    received
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(spans);
    let answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    stream.write_all(answer).await.expect("answers");
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.clone()),
            Value::IntValue(i) => Some(i.to_string()),
            other => Some(format!("{other:?}")),
        })
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exports what was ended so far until `done` holds for the spans received, or fails.
async fn wait_for(tracing: &Tracing, received: &Received, done: impl Fn(&[Span]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let provider = tracing.provider().clone();
        // Blocks until the batch is exported: off the runtime, which runs the receiver.
        let flushed = tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .expect("the flush task");
        flushed.expect("spans exported");
        let spans = received.spans();
        if done(&spans) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "spans missing after 30 s; received: {:#?}",
            spans
                .iter()
                .map(|s| (&s.name, hex(&s.span_id), hex(&s.parent_span_id)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Attempt 1 retries now, attempt 2 after 50 ms, attempt 3 retries past the cap.
async fn flaky(Attempt(attempt): Attempt, _: u64) -> Outcome {
    if attempt == 2 {
        retry_after(Duration::from_millis(50))
    } else {
        retry()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_follows_a_message_through_retries_and_its_dead_letter_on_redis() {
    let (endpoint, received) = receiver().await;
    let tracing = Tracing::otlp(&endpoint, "otel-test").expect("an exporter");
    let (orders, dead, audit) = (
        unique("otel", "orders"),
        unique("otel", "dead"),
        unique("otel", "audit"),
    );
    let audit_to = audit.clone();
    let running = App::with_broker(redis(&redis_url()).await)
        .tracing(&tracing)
        .mount(
            Mount::new(orders.as_str())
                .max_attempts(3)
                .dead_letter(dead.as_str()),
            flaky,
        )
        .mount(dead.as_str(), move |publisher: Publisher, id: u64| {
            // What the dead letter's handler publishes continues the trace too.
            let audit = audit_to.clone();
            async move {
                publisher
                    .publish(audit.as_str(), &id)
                    .await
                    .expect("published");
            }
        })
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .publish(orders.as_str(), &7u64)
        .await
        .expect("published");

    let named = |spans: &[Span], name: &str| -> Vec<Span> {
        spans.iter().filter(|s| s.name == name).cloned().collect()
    };
    let (process_orders, process_dead) = (format!("process {orders}"), format!("process {dead}"));
    let publish_audit = format!("publish {audit}");
    wait_for(&tracing, &received, |spans| {
        named(spans, &process_orders).len() >= 3
            && !named(spans, &process_dead).is_empty()
            && !named(spans, &publish_audit).is_empty()
    })
    .await;
    running.stop().await.expect("stops");
    let spans = received.spans();

    // Every span of the message shares one trace.
    let publish = named(&spans, &format!("publish {orders}"));
    assert_eq!(publish.len(), 1, "one publish span of the original");
    let trace = publish[0].trace_id.clone();
    let ours: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace).collect();
    let by_id: HashMap<Vec<u8>, &Span> = ours.iter().map(|s| (s.span_id.clone(), *s)).collect();
    let parent = |span: &Span| -> &Span {
        by_id.get(&span.parent_span_id).copied().unwrap_or_else(|| {
            panic!(
                "the parent of {} is not in the message's trace ({} spans)",
                span.name,
                ours.len()
            )
        })
    };
    let mut attempts: Vec<&Span> = ours
        .iter()
        .copied()
        .filter(|s| s.name == process_orders)
        .collect();
    attempts.sort_by_key(|s| attribute(s, "ruststream.attempt"));
    assert_eq!(
        attempts.len(),
        3,
        "three deliveries of the message in its trace"
    );
    for (n, span) in attempts.iter().enumerate() {
        assert_eq!(
            attribute(span, "ruststream.attempt"),
            Some((n + 1).to_string())
        );
        assert_eq!(
            attribute(span, "messaging.system").as_deref(),
            Some("redis")
        );
        assert_eq!(
            attribute(span, "messaging.destination.name"),
            Some(orders.clone())
        );
        assert_eq!(
            attribute(span, "messaging.operation.type").as_deref(),
            Some("process")
        );
    }
    // Attempt 1's parent is the publish; each later delivery's is the copy its
    // predecessor's delivery published, whose parent is that delivery.
    assert_eq!(parent(attempts[0]).span_id, publish[0].span_id);
    for (n, (copy, plan)) in [("retry", "copy"), ("delayed_retry", "delayed_copy")]
        .into_iter()
        .enumerate()
    {
        let made = parent(attempts[n + 1]);
        assert_eq!(made.name, format!("{copy} {orders}"), "attempt {}", n + 2);
        assert_eq!(
            attribute(made, "messaging.operation.name").as_deref(),
            Some(copy)
        );
        assert_eq!(parent(made).span_id, attempts[n].span_id);
        assert_eq!(
            attribute(attempts[n], "ruststream.plan").as_deref(),
            Some(plan)
        );
    }
    assert_eq!(
        attribute(attempts[2], "ruststream.plan").as_deref(),
        Some("dead_letter")
    );
    // The dead letter: published because of attempt 3, handled in the same trace.
    let handled: Vec<&Span> = ours
        .iter()
        .copied()
        .filter(|s| s.name == process_dead)
        .collect();
    assert_eq!(
        handled.len(),
        1,
        "the dead letter's delivery in the message's trace"
    );
    let letter = parent(handled[0]);
    assert_eq!(letter.name, format!("dead_letter {dead}"));
    assert_eq!(parent(letter).span_id, attempts[2].span_id);
    assert_eq!(
        attribute(handled[0], "ruststream.plan").as_deref(),
        Some("accept")
    );
    // And what its handler published is the dead letter's delivery's child.
    let audited: Vec<&Span> = ours
        .iter()
        .copied()
        .filter(|s| s.name == publish_audit)
        .collect();
    assert_eq!(audited.len(), 1);
    assert_eq!(parent(audited[0]).span_id, handled[0].span_id);
    tracing.provider().shutdown().expect("shuts down");
}

async fn price(item: String) -> Reply<u64> {
    Reply::new(item.len() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_continues_the_trace_of_its_request_on_redis() {
    let (endpoint, received) = receiver().await;
    let tracing = Tracing::otlp(&endpoint, "otel-test").expect("an exporter");
    let prices = unique("otel", "prices");
    let running = App::with_broker(redis(&redis_url()).await)
        .tracing(&tracing)
        .mount(prices.as_str(), price)
        .start()
        .await
        .expect("starts");
    let answer: u64 = running
        .publisher()
        .request(prices.as_str(), "apple", Duration::from_secs(10))
        .await
        .expect("a reply");
    assert_eq!(answer, 5);
    let process = format!("process {prices}");
    wait_for(&tracing, &received, |spans| {
        spans.iter().any(|s| s.name == process)
            && spans
                .iter()
                .filter(|s| s.name.starts_with("publish "))
                .count()
                >= 2
    })
    .await;
    running.stop().await.expect("stops");
    let spans = received.spans();
    let request = spans
        .iter()
        .find(|s| s.name == format!("publish {prices}"))
        .expect("the request's publish span");
    let handled = spans
        .iter()
        .find(|s| s.name == process)
        .expect("the request's delivery span");
    assert_eq!(handled.parent_span_id, request.span_id);
    assert_eq!(handled.trace_id, request.trace_id);
    let reply = spans
        .iter()
        .find(|s| s.name.starts_with("publish ") && s.parent_span_id == handled.span_id)
        .expect("the reply's publish span, the delivery's child");
    assert_eq!(reply.trace_id, request.trace_id);
    assert!(
        attribute(reply, "messaging.message.conversation_id").is_some(),
        "the reply names its conversation"
    );
    tracing.provider().shutdown().expect("shuts down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_retries_keep_the_trace_and_the_dead_letter_continues_it_on_memory() {
    // The memory broker requeues (and delays) itself: its redeliveries carry the headers
    // they arrived with, so each attempt's parent is the original publish; the dead
    // letter is the runtime's copy, the last attempt's child.
    let (endpoint, received) = receiver().await;
    let tracing = Tracing::otlp(&endpoint, "otel-test").expect("an exporter");
    let broker = ruststream::memory::MemoryBroker::new();
    let running = App::new(broker)
        .tracing(&tracing)
        .mount(
            Mount::new("orders").max_attempts(3).dead_letter("dead"),
            flaky,
        )
        .mount("dead", |_: u64| async {})
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .publish("orders", &7u64)
        .await
        .expect("published");
    wait_for(&tracing, &received, |spans| {
        spans.iter().any(|s| s.name == "process dead")
    })
    .await;
    running.stop().await.expect("stops");
    let spans = received.spans();
    let publish = spans
        .iter()
        .find(|s| s.name == "publish orders")
        .expect("the publish span");
    let attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "process orders")
        .collect();
    assert_eq!(attempts.len(), 3);
    let plans: Vec<Option<String>> = attempts
        .iter()
        .map(|s| attribute(s, "ruststream.plan"))
        .collect();
    for span in &attempts {
        assert_eq!(span.trace_id, publish.trace_id);
        assert_eq!(span.parent_span_id, publish.span_id, "a native redelivery");
        assert_eq!(
            attribute(span, "messaging.system").as_deref(),
            Some("memory")
        );
    }
    assert!(plans.contains(&Some("dead_letter".into())), "{plans:?}");
    let last = attempts
        .iter()
        .find(|s| attribute(s, "ruststream.plan").as_deref() == Some("dead_letter"))
        .expect("the last attempt");
    let letter = spans
        .iter()
        .find(|s| s.name == "dead_letter dead")
        .expect("the dead letter's span");
    assert_eq!(letter.parent_span_id, last.span_id);
    let handled = spans
        .iter()
        .find(|s| s.name == "process dead")
        .expect("the dead letter's delivery");
    assert_eq!(handled.parent_span_id, letter.span_id);
    assert_eq!(handled.trace_id, publish.trace_id);
    tracing.provider().shutdown().expect("shuts down");
}
