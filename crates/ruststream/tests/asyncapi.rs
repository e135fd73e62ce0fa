//! The AsyncAPI document of a service that uses every feature the document describes.
//!
//! The documents are also written (JSON and YAML) to `$RUSTSTREAM_ASYNCAPI_OUT`
//! (default: `asyncapi/` in Cargo's test temporary directory), where `scripts/test`
//! validates them with `scripts/asyncapi/check` (the AsyncAPI 3.0.0 JSON schema and
//! `@asyncapi/parser`).

use std::path::PathBuf;
use std::time::Duration;

use ruststream::asyncapi::{AsyncApiError, AsyncApiInfo, Format};
use ruststream::core::{Capabilities, DEAD_LETTER_REASON, RETRY_COUNT};
use ruststream::memory::MemoryBroker;
use ruststream::{
    App, Attempt, Headers, Mount, Outcome, Policy, Reply, ack, publisher::PublishTarget,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An order, as placed.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    /// The order's id.
    id: u64,
    lines: Vec<Line>,
    note: Option<String>,
    #[serde(default)]
    priority: Priority,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Line {
    sku: String,
    qty: u32,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
enum Priority {
    #[default]
    Normal,
    Rush,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
enum Event {
    Shipped { id: u64 },
    Cancelled { id: u64, reason: String },
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Quote {
    sku: String,
}

async fn place(Attempt(_): Attempt, order: Order) -> Outcome {
    let _ = (order.id, order.lines.len(), order.note, order.priority);
    ack()
}

async fn spent(headers: Headers, order: Order) {
    let _ = (headers.get_str(DEAD_LETTER_REASON), order.id);
}

async fn price(quote: Quote) -> Reply<u64> {
    Reply::new(quote.sku.len() as u64)
}

/// A price, as replied.
#[derive(Serialize, JsonSchema)]
struct Price {
    cents: u64,
}

async fn stock(quote: Quote) -> Result<Reply<Price>, std::io::Error> {
    Ok(Reply::new(Price {
        cents: quote.sku.len() as u64,
    }))
}

async fn tick(headers: Headers) {
    let _ = headers.len();
}

async fn audit(line: String) {
    let _ = line;
}

fn service(app: App) -> App {
    app.name("every-feature")
        .mount(
            Mount::new("orders")
                .payload::<Order>()
                .max_attempts(5)
                .dead_letter("orders.dead")
                .workers(8)
                .timeout(Duration::from_secs(30))
                .on_timeout(Policy::RetryAfter(Duration::from_secs(5)))
                .on_decode_error(Policy::Skip),
            place,
        )
        .mount(Mount::new("orders.dead").payload::<Order>(), spent)
        .mount(
            Mount::new("/queues/prices")
                .payload::<Quote>()
                .reply::<u64>()
                .reply_to("prices.replies")
                .allow_reply_to(|to| to.starts_with("prices."))
                .lanes_by_header(4, "tenant")
                .on_panic(Policy::Drop),
            price,
        )
        .mount(
            Mount::new("ticks.*")
                .retry_to("ticks.retry")
                .dead_letter("ticks.dead"),
            tick,
        )
        // Replies to the request's reply-to only, a `Result` of a reply, documented.
        .mount(
            Mount::new("stock").payload::<Quote>().reply::<Price>(),
            stock,
        )
        // A payload not documented: the message names its type, with no schema.
        .mount(Mount::new("audit"), audit)
        .publishes(
            PublishTarget::new("orders.events")
                .payload::<Event>()
                .description("What became of an order."),
        )
        .publishes("audit")
}

fn info() -> AsyncApiInfo {
    AsyncApiInfo {
        title: Some("Every feature".into()),
        version: "1.2.3".into(),
        description: Some("A service that uses every feature the document describes.".into()),
        // As the AMQP 1.0 adapter describes `amqp://guest:s3cret@127.0.0.1:5673/vhost`.
        server: Some(
            ruststream::core::Server::from_url(
                "amqp://guest:s3cret@127.0.0.1:5673/vhost",
                "amqp",
                Some("1.0"),
                "AMQP 1.0 (RabbitMQ 4)",
            )
            .expect("server"),
        ),
    }
}

/// Writes `name.json` and `name.yaml` where `scripts/test` validates them.
fn write(name: &str, app: &App, info: &AsyncApiInfo) {
    let dir = std::env::var_os("RUSTSTREAM_ASYNCAPI_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asyncapi"));
    std::fs::create_dir_all(&dir).expect("output directory");
    for (format, extension) in [(Format::Json, "json"), (Format::Yaml, "yaml")] {
        let text = app.asyncapi_string(info, format).expect("document");
        std::fs::write(dir.join(format!("{name}.{extension}")), text).expect("write");
    }
}

fn channel_of<'a>(document: &'a Value, address: &str) -> (&'a String, &'a Value) {
    document["channels"]
        .as_object()
        .expect("channels")
        .iter()
        .find(|(_, c)| c["address"] == address)
        .unwrap_or_else(|| panic!("no channel for {address}"))
}

fn operation<'a>(document: &'a Value, id: &str) -> &'a Value {
    let op = &document["operations"][id];
    assert!(op.is_object(), "no operation {id}");
    op
}

/// Follows a local `$ref` (`#/a/b/c`) in `document`.
fn resolve<'a>(document: &'a Value, reference: &Value) -> &'a Value {
    let pointer = reference["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix('#'))
        .unwrap_or_else(|| panic!("not a local reference: {reference}"));
    document
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{pointer} does not resolve"))
}

#[test]
fn every_feature_is_described() {
    let app = service(App::new(MemoryBroker::new()));
    let document = app.asyncapi(&info()).expect("document");
    write("every-feature", &app, &info());

    assert_eq!(document["asyncapi"], "3.0.0");
    assert_eq!(document["info"]["title"], "Every feature");
    assert_eq!(document["info"]["version"], "1.2.3");
    assert_eq!(document["info"]["x-ruststream-service"], "every-feature");
    assert_eq!(document["info"]["x-ruststream-broker"], "memory");

    // The server: host and vhost, never the password.
    let server = &document["servers"]["broker"];
    assert_eq!(server["host"], "127.0.0.1:5673");
    assert_eq!(server["pathname"], "/vhost");
    assert_eq!(server["protocol"], "amqp");
    assert!(!document.to_string().contains("s3cret"));

    // One channel per address: subscriptions, retry address, dead letters, replies,
    // publish targets; an address used twice is one channel with both roles.
    // The replies of `stock` go where each request says: a channel with a null address.
    let channels = document["channels"].as_object().expect("channels");
    let mut addresses: Vec<&str> = channels
        .values()
        .filter_map(|c| c["address"].as_str())
        .collect();
    assert_eq!(channels.len(), addresses.len() + 1);
    addresses.sort_unstable();
    assert_eq!(
        addresses,
        [
            "/queues/prices",
            "audit",
            "orders",
            "orders.dead",
            "orders.events",
            "prices.replies",
            "stock",
            "ticks.*",
            "ticks.dead",
            "ticks.retry",
        ]
    );
    let (dead_id, dead) = channel_of(&document, "orders.dead");
    assert_eq!(
        dead["x-ruststream-roles"],
        json!(["dead-letter", "subscription", "retry"])
    );
    let (orders_id, orders) = channel_of(&document, "orders");
    assert_eq!(
        orders["x-ruststream-roles"],
        json!(["subscription", "retry"])
    );
    let (prices_id, _) = channel_of(&document, "/queues/prices");
    assert_eq!(prices_id, "queues_prices");
    assert_eq!(
        channel_of(&document, "ticks.retry").1["x-ruststream-roles"],
        json!(["retry"])
    );

    // The mount on `orders`: a receive operation with its declaration, settings and form.
    let receive = operation(&document, &format!("receive.{orders_id}"));
    assert_eq!(receive["action"], "receive");
    assert_eq!(resolve(&document, &receive["channel"])["address"], "orders");
    assert_eq!(
        receive["x-ruststream-declaration"],
        json!({"maxAttempts": 5, "deadLetter": "orders.dead", "retryTo": "orders"})
    );
    let settings = &receive["x-ruststream-mount"];
    assert_eq!(settings["concurrency"], json!({"workers": 8}));
    assert_eq!(settings["timeoutMs"], 30_000);
    assert_eq!(settings["onTimeout"], json!({"retry_after_ms": 5000}));
    assert_eq!(settings["onDecodeError"], "skip");
    assert_eq!(settings["onPanic"], "fail_fast");
    let form = &receive["x-ruststream-form"];
    assert_eq!(form["broker"], "memory");
    assert_eq!(form["facts"]["requeues"], true);
    assert_eq!(form["facts"]["deadLettersItself"], false);

    // Its message: the payload's schema by reference, content type, headers, correlation id.
    let message = resolve(&document, resolve(&document, &receive["messages"][0]));
    assert_eq!(message["contentType"], "application/json");
    assert_eq!(
        message["payload"],
        json!({"$ref": "#/components/schemas/Order"})
    );
    let order = resolve(&document, &message["payload"]);
    assert_eq!(order["required"], json!(["id", "lines"]));
    assert_eq!(order["properties"]["id"]["description"], "The order's id.");
    assert!(document["components"]["schemas"]["Line"].is_object());
    assert!(message["headers"]["properties"][RETRY_COUNT].is_object());
    assert_eq!(
        message["correlationId"]["location"],
        "$message.header#/correlation-id"
    );

    // Retry copies and the dead letter are sent by the service.
    let retry = operation(&document, &format!("retry.{orders_id}"));
    assert_eq!(retry["action"], "send");
    assert_eq!(
        retry["channel"],
        json!({"$ref": format!("#/channels/{orders_id}")})
    );
    let dead_letter = operation(&document, &format!("dead-letter.{orders_id}"));
    assert_eq!(
        dead_letter["channel"],
        json!({"$ref": format!("#/channels/{dead_id}")})
    );
    let spent = resolve(&document, resolve(&document, &dead_letter["messages"][0]));
    assert_eq!(
        spent["headers"]["properties"][DEAD_LETTER_REASON]["enum"],
        json!(["retry", "decode", "panic", "timeout"])
    );
    assert_eq!(spent["payload"], message["payload"]);

    // The request/reply mount, a pattern with its retry address, a publish target.
    let prices = operation(&document, &format!("receive.{prices_id}"));
    assert_eq!(prices["x-ruststream-mount"]["replyTo"], "prices.replies");
    assert_eq!(
        prices["x-ruststream-mount"]["concurrency"],
        json!({"lanes": 4})
    );
    let reply = operation(&document, &format!("reply.{prices_id}"));
    assert_eq!(
        resolve(&document, &reply["channel"])["address"],
        "prices.replies"
    );
    // The receive operation's reply: to the request's reply-to, else the default, with
    // the schema of what the handler replies with.
    assert_eq!(
        prices["reply"]["address"]["location"],
        "$message.header#/reply-to"
    );
    assert_eq!(
        resolve(&document, &prices["reply"]["channel"])["address"],
        "prices.replies"
    );
    let replied = resolve(
        &document,
        resolve(&document, &prices["reply"]["messages"][0]),
    );
    assert_eq!(replied["x-ruststream-payload-type"], "u64");
    assert_eq!(replied["payload"]["type"], "integer");
    // A handler that replies only where the request says: a channel without an address.
    let stock = operation(&document, "receive.stock");
    let stock_replies = resolve(&document, &stock["reply"]["channel"]);
    assert_eq!(stock_replies["address"], Value::Null);
    let stock_reply = resolve(
        &document,
        resolve(&document, &stock["reply"]["messages"][0]),
    );
    assert_eq!(
        stock_reply["payload"],
        json!({"$ref": "#/components/schemas/Price"})
    );
    assert!(stock.get("x-ruststream-reply").is_none());
    let (ticks_id, _) = channel_of(&document, "ticks.*");
    let ticks_retry = operation(&document, &format!("retry.{ticks_id}"));
    assert_eq!(
        resolve(&document, &ticks_retry["channel"])["address"],
        "ticks.retry"
    );
    let (events_id, _) = channel_of(&document, "orders.events");
    let send = operation(&document, &format!("send.{events_id}"));
    assert_eq!(send["description"], "What became of an order.");
    let event = resolve(&document, resolve(&document, &send["messages"][0]));
    assert_eq!(
        event["payload"],
        json!({"$ref": "#/components/schemas/Event"})
    );
    assert_eq!(
        document["components"]["schemas"]["Event"]["oneOf"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    // An undocumented payload: its type is named, no schema is made up.
    let audit = operation(&document, "receive.audit");
    let audit_message = resolve(&document, resolve(&document, &audit["messages"][0]));
    assert!(audit_message.get("payload").is_none());
    assert_eq!(
        audit_message["x-ruststream-payload-type"],
        "alloc::string::String"
    );
    assert!(
        audit["description"]
            .as_str()
            .is_some_and(|d| d.contains("Mount::payload"))
    );
    // `audit` is both subscribed and published to: one channel.
    assert_eq!(
        channel_of(&document, "audit").1["x-ruststream-roles"],
        json!(["subscription", "retry", "publish"])
    );
}

#[test]
fn the_same_service_gives_the_same_document() {
    let one = service(App::new(MemoryBroker::new()));
    let two = service(App::new(MemoryBroker::new()));
    for format in [Format::Json, Format::Yaml] {
        let a = one.asyncapi_string(&info(), format).expect("document");
        let b = two.asyncapi_string(&info(), format).expect("document");
        assert_eq!(a, b);
        assert_eq!(a, one.asyncapi_string(&info(), format).expect("document"));
    }
}

#[test]
fn the_text_is_the_document_with_info_first() {
    let app = service(App::new(MemoryBroker::new()));
    let document = app.asyncapi(&info()).expect("document");
    let json = app.asyncapi_string(&info(), Format::Json).expect("json");
    assert!(
        json.starts_with("{\n  \"asyncapi\": \"3.0.0\",\n  \"info\": {\n"),
        "{json}"
    );
    assert!(json.ends_with("}\n"));
    let back: Value = serde_json::from_str(&json).expect("json parses");
    assert_eq!(back, document);
    let yaml = app.asyncapi_string(&info(), Format::Yaml).expect("yaml");
    let order: Vec<&str> = yaml
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        order,
        [
            "\"asyncapi\"",
            "\"info\"",
            "\"servers\"",
            "\"defaultContentType\"",
            "\"channels\"",
            "\"operations\"",
            "\"components\""
        ]
    );
}

#[test]
fn facts_show_what_the_broker_declares() {
    let broker = MemoryBroker::with_capabilities(Capabilities {
        dead_letters: true,
        ..Capabilities::SETTLES
    });
    let app = App::new(broker).mount("orders", audit);
    let document = app.asyncapi(&AsyncApiInfo::default()).expect("document");
    let facts = &document["operations"]["receive.orders"]["x-ruststream-form"]["facts"];
    assert_eq!(
        *facts,
        json!({"settles": true, "requeues": false, "counts": false, "delays": false, "deadLettersItself": true})
    );
    // No version given: 0.0.0; no server given: none described.
    assert_eq!(document["info"]["version"], "0.0.0");
    assert!(document.get("servers").is_none());
}

#[test]
fn a_payload_documented_as_another_type_is_refused() {
    let app = App::new(MemoryBroker::new()).mount(Mount::new("orders").payload::<Quote>(), place);
    match app.asyncapi(&info()) {
        Err(AsyncApiError::Payload {
            address,
            documented,
            handled,
        }) => {
            assert_eq!(address, "orders");
            assert!(documented.ends_with("Quote"), "{documented}");
            assert!(handled.ends_with("Order"), "{handled}");
        }
        other => panic!("not refused: {other:?}"),
    }
    let app = App::new(MemoryBroker::new()).mount(Mount::new("ticks").payload::<Quote>(), tick);
    let error = app.asyncapi(&info()).expect_err("refused").to_string();
    assert!(error.contains("the handler takes no payload"), "{error}");
}

#[test]
fn a_reply_documented_as_another_type_or_without_a_reply_is_refused() {
    let app = App::new(MemoryBroker::new()).mount(Mount::new("prices").reply::<Price>(), price);
    match app.asyncapi(&info()) {
        Err(AsyncApiError::Reply {
            address,
            documented,
            handled,
        }) => {
            assert_eq!(address, "prices");
            assert!(documented.ends_with("Price"), "{documented}");
            assert_eq!(handled, "u64");
        }
        other => panic!("not refused: {other:?}"),
    }
    let app = App::new(MemoryBroker::new()).mount(Mount::new("ticks").reply::<Price>(), tick);
    let error = app.asyncapi(&info()).expect_err("refused").to_string();
    assert!(
        error.contains("the handler replies with no reply"),
        "{error}"
    );
}

#[test]
fn an_undocumented_reply_names_its_type_and_how_to_document_it() {
    let app = App::new(MemoryBroker::new()).mount("prices", price);
    let document = app.asyncapi(&info()).expect("document");
    let receive = operation(&document, "receive.prices");
    let replied = resolve(
        &document,
        resolve(&document, &receive["reply"]["messages"][0]),
    );
    assert!(replied.get("payload").is_none());
    assert_eq!(replied["x-ruststream-payload-type"], "u64");
    assert!(
        receive["x-ruststream-reply"]
            .as_str()
            .is_some_and(|d| d.contains("Mount::reply"))
    );
    // A handler that does not reply has no reply.
    let app = App::new(MemoryBroker::new()).mount("ticks", tick);
    let document = app.asyncapi(&info()).expect("document");
    assert!(operation(&document, "receive.ticks").get("reply").is_none());
}

#[test]
fn a_server_url_that_cannot_be_described_is_an_error() {
    let error = ruststream::broker::server("stomp://user:pw@h:61613")
        .expect_err("refused")
        .to_string();
    assert!(
        error.starts_with("unknown broker url scheme \"stomp\""),
        "{error}"
    );
    let error = ruststream::broker::server("memory")
        .expect_err("refused")
        .to_string();
    assert!(error.contains("unknown broker url scheme"), "{error}");
    assert!(!error.contains("pw"));
}

/// The server is what the URL's adapter says of it (`ruststream::broker::server`): the memory
/// broker's here, in the document as given.
#[test]
fn the_server_is_the_one_its_adapter_describes() {
    let app = App::new(MemoryBroker::new()).mount("ticks", tick);
    let info = AsyncApiInfo {
        server: Some(ruststream::broker::server("memory://").expect("memory")),
        ..info()
    };
    let document = app.asyncapi(&info).expect("document");
    assert_eq!(document["servers"]["broker"]["protocol"], "memory");
    assert_eq!(document["servers"]["broker"]["host"], "localhost");
}

#[test]
fn formats_are_named() {
    assert_eq!("yaml".parse::<Format>(), Ok(Format::Yaml));
    assert_eq!("JSON".parse::<Format>(), Ok(Format::Json));
    assert!("xml".parse::<Format>().is_err());
}
