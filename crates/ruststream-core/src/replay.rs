//! What a replayed dead letter becomes: the message as it arrived, a fresh attempt count
//! and the time of the replay.

use crate::{DEAD_LETTER_FROM, Message, REPLAYED_AT, RETRY_COUNT};

/// The prefix of the runtime's dead-letter headers.
const DEAD_LETTER_PREFIX: &str = "x-ruststream-dead-letter-";

/// The copy `replay` publishes of `dead`: the same payload and headers, less the retry
/// count and every `x-ruststream-dead-letter-*` header (so its handler sees attempt 1),
/// plus `x-ruststream-replayed-at` = `now_ms`.
///
/// ```
/// use ruststream_core::{DEAD_LETTER_FROM, Message, REPLAYED_AT, RETRY_COUNT, replayed};
///
/// let dead = Message::new("x").with_header(RETRY_COUNT, "2").with_header(DEAD_LETTER_FROM, "orders");
/// let copy = replayed(&dead, 1_700_000_000_000);
/// assert_eq!(copy.headers.get_str(RETRY_COUNT), None);
/// assert_eq!(copy.headers.get_str(REPLAYED_AT), Some("1700000000000"));
/// ```
pub fn replayed(dead: &Message, now_ms: u64) -> Message {
    let mut copy = dead.clone();
    let stale: Vec<String> = copy
        .headers
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| *name == RETRY_COUNT || name.starts_with(DEAD_LETTER_PREFIX))
        .map(str::to_owned)
        .collect();
    for name in stale {
        copy.headers.remove(&name);
    }
    copy.headers.insert(REPLAYED_AT, now_ms.to_string());
    copy
}

/// Where a replay sends `dead` back to: `to` if given, else its
/// `x-ruststream-dead-letter-from`.
pub fn replay_destination<'a>(dead: &'a Message, to: Option<&'a str>) -> Option<&'a str> {
    to.or_else(|| dead.headers.get_str(DEAD_LETTER_FROM))
}

#[cfg(test)]
mod tests {
    use crate::{CONTENT_TYPE, DEAD_LETTER_ATTEMPT, DEAD_LETTER_REASON, DEAD_LETTER_SERVICE};

    use super::*;

    #[test]
    fn a_replay_keeps_the_message_and_starts_its_attempts_anew() {
        let dead = Message::new(&b"{\"id\":5}"[..])
            .with_header(CONTENT_TYPE, "application/json")
            .with_header("tenant", "acme")
            .with_header(RETRY_COUNT, "2")
            .with_header(DEAD_LETTER_FROM, "orders")
            .with_header(DEAD_LETTER_ATTEMPT, "3")
            .with_header(DEAD_LETTER_REASON, "retry")
            .with_header(DEAD_LETTER_SERVICE, "billing")
            .with_header(REPLAYED_AT, "1");
        let copy = replayed(&dead, 42);
        assert_eq!(copy.payload, dead.payload);
        let names: Vec<_> = copy.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [CONTENT_TYPE, "tenant", REPLAYED_AT]);
        assert_eq!(copy.headers.get_str(REPLAYED_AT), Some("42"));
        assert_eq!(copy.headers.retry_count(), 0);
    }

    #[test]
    fn the_destination_is_to_else_the_original_address() {
        let dead = Message::new("x").with_header(DEAD_LETTER_FROM, "orders");
        assert_eq!(replay_destination(&dead, None), Some("orders"));
        assert_eq!(
            replay_destination(&dead, Some("orders.v2")),
            Some("orders.v2")
        );
        assert_eq!(replay_destination(&Message::new("x"), None), None);
    }
}
