//! Messages whose copy the broker will never take, and how long each is kept before it
//! is handed back.
//!
//! A retry or dead-letter copy refused for good ([`PublishErrorKind::is_transient`] is
//! false: a message over the broker's size limit, once the copy's headers are added)
//! leaves its original unsettled, so that nothing is lost. Handed back at once, it
//! would come back at once and be refused again, for ever: a consumer busy with one
//! message. So each refusal of the same message doubles how long it is kept before it
//! is handed back, from [`FIRST`] up to [`LONGEST`] (below RabbitMQ's 30-minute
//! consumer timeout, so a kept delivery does not close its channel), and each refusal
//! is logged as an error with the size and the limit.
//!
//! [`PublishErrorKind::is_transient`]: ruststream_core::PublishErrorKind::is_transient

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ruststream_core::{Address, MESSAGE_ID, Message};

/// How long a delivery whose copy was refused the first time is kept.
pub(crate) const FIRST: Duration = Duration::from_secs(1);
/// The longest it is kept.
pub(crate) const LONGEST: Duration = Duration::from_secs(300);
/// How many messages are remembered; the oldest is forgotten past that.
const REMEMBERED: usize = 1024;

/// The refusals of each message seen lately: (times refused, when last, as a tick).
#[derive(Default)]
pub(crate) struct Refused {
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    tick: u64,
    by_message: HashMap<u64, (u32, u64)>,
    hasher: std::collections::hash_map::RandomState,
}

impl Refused {
    /// Counts one more refusal of the copy of `message`, read from `from`, and returns
    /// how long the delivery is to be kept before it is handed back.
    pub(crate) fn keep_for(&self, from: &Address, message: &Message) -> Duration {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let key = seen.key(from, message);
        seen.tick += 1;
        let tick = seen.tick;
        if seen.by_message.len() >= REMEMBERED && !seen.by_message.contains_key(&key) {
            let oldest = seen
                .by_message
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(key, _)| *key);
            if let Some(oldest) = oldest {
                seen.by_message.remove(&oldest);
            }
        }
        let entry = seen.by_message.entry(key).or_insert((0, tick));
        entry.0 = entry.0.saturating_add(1);
        entry.1 = tick;
        keep_for(entry.0)
    }
}

impl Seen {
    /// The same message read again: its id where it has one, else its payload, from the
    /// same subscription.
    fn key(&self, from: &Address, message: &Message) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        from.as_str().hash(&mut hasher);
        match message.headers.get(MESSAGE_ID) {
            Some(id) => id.as_bytes().hash(&mut hasher),
            None => message.payload.hash(&mut hasher),
        }
        hasher.finish()
    }
}

/// How long a delivery refused `times` times is kept.
fn keep_for(times: u32) -> Duration {
    let doublings = times.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(LONGEST)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruststream_core::HeaderValue;

    fn message(id: &str, payload: &'static [u8]) -> Message {
        Message::new(payload).with_header(MESSAGE_ID, HeaderValue::from(id.to_owned()))
    }

    #[test]
    fn each_refusal_of_one_message_doubles_its_wait_up_to_the_longest() {
        let refused = Refused::default();
        let (from, m) = (Address::from("orders"), message("a", b"x"));
        let waits: Vec<u64> = (0..12)
            .map(|_| refused.keep_for(&from, &m).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }

    #[test]
    fn other_messages_and_other_subscriptions_count_apart() {
        let refused = Refused::default();
        let (orders, m) = (Address::from("orders"), message("a", b"x"));
        refused.keep_for(&orders, &m);
        assert_eq!(refused.keep_for(&orders, &m), FIRST * 2);
        assert_eq!(refused.keep_for(&orders, &message("b", b"x")), FIRST);
        assert_eq!(refused.keep_for(&Address::from("audit"), &m), FIRST);
    }

    #[test]
    fn a_message_without_an_id_is_known_by_its_payload() {
        let refused = Refused::default();
        let from = Address::from("orders");
        refused.keep_for(&from, &Message::new(&b"one"[..]));
        assert_eq!(
            refused.keep_for(&from, &Message::new(&b"one"[..])),
            FIRST * 2
        );
        assert_eq!(refused.keep_for(&from, &Message::new(&b"two"[..])), FIRST);
    }

    #[test]
    fn the_oldest_is_forgotten_past_the_bound() {
        let refused = Refused::default();
        let from = Address::from("orders");
        let first = message("first", b"x");
        refused.keep_for(&from, &first);
        for i in 0..REMEMBERED {
            refused.keep_for(&from, &message(&i.to_string(), b"x"));
        }
        assert_eq!(refused.keep_for(&from, &first), FIRST);
    }
}
