//! Dead letters RabbitMQ moved itself (a quorum queue at its delivery limit, a reject
//! into a dead-letter exchange, an expiry, an overflow) carry none of the runtime's
//! `x-ruststream-dead-letter-*` headers, only RabbitMQ's own: `x-death` (an array of
//! tables, the most recent first: `queue`, `reason`, `count`, `time`, `exchange`,
//! `routing-keys`) and `x-first-death-*` (and on RabbitMQ 4 `x-last-death-*`) `queue`,
//! `reason`, `exchange`. The dead-letter tools read them as the runtime's: the queue it
//! came from, the reason (RabbitMQ's word: `delivery_limit`, `rejected`, `expired`,
//! `maxlen`), when, and how many times RabbitMQ dead-lettered it so (the attempt stays
//! unknown: RabbitMQ does not keep `x-delivery-count` on a dead letter). RabbitMQ's
//! headers are then left out of what the tools show and replay: a replayed copy starts
//! clean, as one of the runtime's dead letters does.

use lapin::types::{AMQPValue, FieldTable};
use ruststream_core::Message;
use ruststream_rabbitmq::Death;

/// RabbitMQ's dead-lettering headers, left out once read.
const RABBITMQ_HEADERS: &[&str] = &[
    "x-death",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-first-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
    "x-last-death-exchange",
];

/// RabbitMQ's account of the last dead-lettering in `table` (a message's headers):
/// `x-death`'s first entry, else `x-last-death-*`, else `x-first-death-*`; `None` if
/// there is none.
pub(crate) fn death(table: &FieldTable) -> Option<Death> {
    let headers = table.inner();
    let text = |t: &FieldTable, key: &str| match t.inner().get(key) {
        Some(AMQPValue::LongString(s)) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        Some(AMQPValue::ShortString(s)) => Some(s.as_str().to_owned()),
        _ => None,
    };
    let mut death = Death::default();
    if let Some(AMQPValue::FieldArray(entries)) = headers.get("x-death")
        && let Some(AMQPValue::FieldTable(last)) = entries.as_slice().first()
    {
        death.queue = text(last, "queue");
        death.reason = text(last, "reason");
        death.count = last
            .inner()
            .get("count")
            .and_then(crate::queue::integer)
            .and_then(|c| u64::try_from(c).ok());
        // Seconds since the Unix epoch.
        death.at_ms = match last.inner().get("time") {
            Some(AMQPValue::Timestamp(t)) => Some(t.saturating_mul(1000)),
            _ => None,
        };
    }
    death.completed(|key| text(table, key))
}

/// `message` as the dead-letter tools show it: a dead letter RabbitMQ moved itself
/// (`table`: its headers as they came) gets the runtime's headers from RabbitMQ's, and
/// loses RabbitMQ's; one the runtime published (it has `x-ruststream-dead-letter-from`)
/// and any other message stay as they are.
pub(crate) fn described(message: Message, table: Option<&FieldTable>) -> Message {
    ruststream_rabbitmq::described(message, || table.and_then(death), RABBITMQ_HEADERS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};
    use ruststream_core::{DEAD_LETTER_AT, DEAD_LETTER_FROM, DEAD_LETTER_REASON};
    use ruststream_rabbitmq::DEAD_LETTER_COUNT;

    fn text(s: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()))
    }

    /// The headers RabbitMQ 4.0.5 gave a message a quorum queue dead-lettered at its
    /// delivery limit (3.10.8: the same without `x-last-death-*`).
    fn moved() -> FieldTable {
        let mut entry = FieldTable::default();
        entry.insert("count".into(), AMQPValue::LongLongInt(1));
        entry.insert("exchange".into(), text(""));
        entry.insert("queue".into(), text("orders"));
        entry.insert("reason".into(), text("delivery_limit"));
        entry.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![text("orders")])),
        );
        entry.insert("time".into(), AMQPValue::Timestamp(1_796_165_174));
        let mut table = FieldTable::default();
        table.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(entry)])),
        );
        for prefix in ["x-first-death", "x-last-death"] {
            table.insert(format!("{prefix}-exchange").into(), text(""));
            table.insert(format!("{prefix}-queue").into(), text("orders"));
            table.insert(format!("{prefix}-reason").into(), text("delivery_limit"));
        }
        table
    }

    #[test]
    fn a_dead_letter_rabbitmq_moved_reads_as_the_runtimes() {
        let message = Message::new("x")
            .with_header("x-first-death-queue", "orders")
            .with_header("tenant", "acme");
        let shown = described(message, Some(&moved()));
        let h = &shown.headers;
        assert_eq!(h.get_str(DEAD_LETTER_FROM), Some("orders"));
        assert_eq!(h.get_str(DEAD_LETTER_REASON), Some("delivery_limit"));
        assert_eq!(h.get_str(DEAD_LETTER_COUNT), Some("1"));
        assert_eq!(h.get_str(DEAD_LETTER_AT), Some("1796165174000"));
        assert_eq!(h.get_str("x-first-death-queue"), None);
        assert_eq!(h.get_str("tenant"), Some("acme"));
    }

    #[test]
    fn other_messages_stay_as_they_are() {
        let ours = Message::new("x").with_header(DEAD_LETTER_FROM, "billing");
        assert_eq!(described(ours.clone(), Some(&moved())), ours);
        let plain = Message::new("y");
        assert_eq!(
            described(plain.clone(), Some(&FieldTable::default())),
            plain
        );
        assert_eq!(described(plain.clone(), None), plain);
        // Only the first-death headers (an older broker): source and reason.
        let mut table = FieldTable::default();
        table.insert("x-first-death-queue".into(), text("orders"));
        table.insert("x-first-death-reason".into(), text("rejected"));
        let d = death(&table).expect("a death");
        assert_eq!(d.queue.as_deref(), Some("orders"));
        assert_eq!(d.reason.as_deref(), Some("rejected"));
        assert_eq!(d.count, None);
    }
}
