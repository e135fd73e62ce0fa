//! The attempt a delayed copy carries on, and which subscriptions delay natively.
//!
//! A copy in a delay queue carries `x-ruststream-retry-count` = the attempt it replaces,
//! so it comes back as the next attempt. On a queue that counts (quorum,
//! `x-delivery-count`) the original's attempt is the broker's count + 1; a copy is
//! counted by its header alone (the consumer never adds `x-delivery-count` to it), and
//! the original's `x-delivery-count` is not carried over, so the count neither restarts
//! nor counts twice. A header claiming an attempt beyond the cap is not believed
//! ([`Facts::within`]), exactly as the runtime's own copies.

use std::num::NonZeroU32;

use ruststream_core::{Declaration, Facts, Headers, Message, RETRY_COUNT};

use crate::message::DELIVERY_COUNT;
use crate::queue::QueueInfo;

/// How the copies of one subscription's deliveries count their attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CopyCount {
    /// The queue counts deliveries in `x-delivery-count`.
    pub(crate) counts: bool,
    /// The mount's `max_attempts`.
    pub(crate) max_attempts: Option<NonZeroU32>,
}

impl CopyCount {
    /// The attempt of a delivery with `headers`, as the runtime reads it.
    pub(crate) fn attempt(&self, headers: &Headers) -> u32 {
        let copy = headers.get(RETRY_COUNT).is_some();
        let facts = if self.counts && !copy {
            let count = headers
                .get_str(DELIVERY_COUNT)
                .and_then(|n| n.parse::<u32>().ok());
            Facts {
                attempt: count.map_or(1, |n| n.saturating_add(1)),
                counts: true,
            }
        } else {
            Facts {
                attempt: headers.retry_count().saturating_add(1),
                counts: false,
            }
        };
        let declaration = Declaration {
            max_attempts: self.max_attempts,
            ..Declaration::default()
        };
        facts.within(&declaration).attempt
    }

    /// The copy of `message` that replaces it: the next attempt.
    pub(crate) fn copy_of(&self, mut message: Message) -> Message {
        let attempt = self.attempt(&message.headers);
        message.headers.remove(DELIVERY_COUNT);
        message.headers.insert(RETRY_COUNT, attempt);
        message
    }
}

/// Whether a subscription to `queue` delays natively: a classic or quorum queue whose
/// retries go back to it (no other retry address), that does not dead-letter itself
/// (there the broker's count must go on: the runtime holds the original, unsettled, for
/// the delay), and whose delay queues' names fit.
pub(crate) fn delays(
    info: Option<&QueueInfo>,
    dead_letters: bool,
    queue: &str,
    own: &ruststream_core::Address,
    declaration: &Declaration,
) -> bool {
    let kind = info.map(|i| i.kind.as_str());
    matches!(kind, Some("classic" | "quorum"))
        && !dead_letters
        && declaration.retry_to.as_ref().is_none_or(|to| to == own)
        && crate::delay::fits(queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (k, v) in pairs {
            h.insert((*k).to_owned(), (*v).to_owned());
        }
        h
    }

    #[test]
    fn a_quorum_original_carries_the_broker_count_on() {
        let count = CopyCount {
            counts: true,
            max_attempts: NonZeroU32::new(5),
        };
        assert_eq!(count.attempt(&headers(&[])), 1);
        assert_eq!(count.attempt(&headers(&[(DELIVERY_COUNT, "2")])), 3);
        let copy = count.copy_of(Message::new("m").with_header(DELIVERY_COUNT, "2"));
        assert_eq!(copy.headers.get_str(RETRY_COUNT), Some("3"));
        assert_eq!(copy.headers.get(DELIVERY_COUNT), None);
        // The copy of a copy: its header alone, never both.
        let again = count.copy_of(copy.with_header(DELIVERY_COUNT, "4"));
        assert_eq!(again.headers.get_str(RETRY_COUNT), Some("4"));
    }

    #[test]
    fn a_classic_delivery_counts_by_the_header_and_distrusts_claims_beyond_the_cap() {
        let count = CopyCount {
            counts: false,
            max_attempts: NonZeroU32::new(3),
        };
        assert_eq!(count.attempt(&headers(&[(DELIVERY_COUNT, "7")])), 1);
        assert_eq!(count.attempt(&headers(&[(RETRY_COUNT, "2")])), 3);
        assert_eq!(count.attempt(&headers(&[(RETRY_COUNT, "1000")])), 1);
    }
}
