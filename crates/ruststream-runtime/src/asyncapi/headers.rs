//! The headers the framework reads and writes, as message header schemas.

use ruststream_core::{
    CONTENT_TYPE, CORRELATION_ID, DEAD_LETTER_AT, DEAD_LETTER_ATTEMPT, DEAD_LETTER_ERROR,
    DEAD_LETTER_FROM, DEAD_LETTER_REASON, DEAD_LETTER_SERVICE, MESSAGE_ID, REPLY_TO, RETRY_COUNT,
};
use serde_json::{Map, Value, json};

const DIGITS: &str = "^[0-9]+$";

/// The headers of every message the framework handles: the codec's media type, the
/// request/reply pair, the publisher's id and the runtime's retry count.
pub(crate) fn message() -> Value {
    object(common())
}

/// The headers of a dead letter: the message's own, and those the runtime adds.
pub(crate) fn dead_letter() -> Value {
    let mut properties = common();
    let added = [
        (
            DEAD_LETTER_FROM,
            json!({"type": "string", "description": "The address the message was received on."}),
        ),
        (
            DEAD_LETTER_ATTEMPT,
            json!({"type": "string", "pattern": DIGITS,
                   "description": "The attempt the message was spent at (the first delivery is 1)."}),
        ),
        (
            DEAD_LETTER_REASON,
            json!({"type": "string", "enum": ["retry", "decode", "panic", "timeout"],
                   "description": "Why: `retry` (the handler's outcome), or the failure policy that applied (`decode`, `panic`, `timeout`)."}),
        ),
        (
            DEAD_LETTER_ERROR,
            json!({"type": "string", "maxLength": 256,
                   "description": "The failure's text (at most 256 bytes), where there is one."}),
        ),
        (
            DEAD_LETTER_AT,
            json!({"type": "string", "pattern": DIGITS,
                   "description": "When, in milliseconds since the Unix epoch (the system clock)."}),
        ),
        (
            DEAD_LETTER_SERVICE,
            json!({"type": "string", "description": "The service that sent it to the dead letter."}),
        ),
    ];
    for (name, schema) in added {
        properties.insert(name.to_owned(), schema);
    }
    let mut headers = object(properties);
    headers["required"] = json!([
        DEAD_LETTER_FROM,
        DEAD_LETTER_ATTEMPT,
        DEAD_LETTER_REASON,
        DEAD_LETTER_AT
    ]);
    headers
}

/// Where a message's correlation id is.
pub(crate) fn correlation_id() -> Value {
    json!({
        "description": "Ties a reply to its request (the request's message id where it has no correlation id).",
        "location": format!("$message.header#/{CORRELATION_ID}"),
    })
}

fn common() -> Map<String, Value> {
    let headers = [
        (
            CONTENT_TYPE,
            json!({"type": "string", "description": "The codec's media type, set on publish."}),
        ),
        (
            CORRELATION_ID,
            json!({"type": "string", "description": "Ties a reply to its request."}),
        ),
        (
            REPLY_TO,
            json!({"type": "string", "description": "Where the handler's reply goes."}),
        ),
        (
            MESSAGE_ID,
            json!({"type": "string", "description": "The publisher's id for the message."}),
        ),
        (
            RETRY_COUNT,
            json!({"type": "string", "pattern": DIGITS,
                   "description": "How many times the runtime has copied the message for a retry (absent: 0)."}),
        ),
    ];
    headers
        .into_iter()
        .map(|(name, schema)| (name.to_owned(), schema))
        .collect()
}

fn object(properties: Map<String, Value>) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": {"type": "string"},
    })
}
