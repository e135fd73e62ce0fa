//! What RabbitMQ says about a dead letter it moved itself, as the runtime's
//! dead-letter headers: each adapter reads RabbitMQ's annotations in its own encoding
//! (`x-death` over AMQP 0-9-1, `x-opt-deaths` over AMQP 1.0) into a [`Death`].

use ruststream_core::{DEAD_LETTER_AT, DEAD_LETTER_FROM, DEAD_LETTER_REASON, Message};

/// How many times RabbitMQ dead-lettered the message from that queue for that reason.
pub const DEAD_LETTER_COUNT: &str = "x-ruststream-dead-letter-count";

/// What RabbitMQ says about a dead letter it moved.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Death {
    /// The queue it was dead-lettered from.
    pub queue: Option<String>,
    /// RabbitMQ's reason: `delivery_limit`, `rejected`, `expired`, `maxlen`.
    pub reason: Option<String>,
    /// How many times it was dead-lettered so.
    pub count: Option<u64>,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: Option<u64>,
}

/// Whether the runtime published `message` as a dead letter (it says where from).
pub fn is_runtime_dead_letter(message: &Message) -> bool {
    message.headers.get_str(DEAD_LETTER_FROM).is_some()
}

impl Death {
    /// Writes what is known as the runtime's dead-letter headers on `message`.
    ///
    /// ```
    /// use ruststream_core::{DEAD_LETTER_FROM, Message};
    /// use ruststream_rabbitmq::Death;
    ///
    /// let mut message = Message::new("x");
    /// Death { queue: Some("orders".into()), ..Death::default() }.describe(&mut message);
    /// assert_eq!(message.headers.get_str(DEAD_LETTER_FROM), Some("orders"));
    /// ```
    pub fn describe(self, message: &mut Message) {
        let headers = &mut message.headers;
        if let Some(queue) = self.queue {
            headers.insert(DEAD_LETTER_FROM, queue);
        }
        if let Some(reason) = self.reason {
            headers.insert(DEAD_LETTER_REASON, reason);
        }
        if let Some(count) = self.count {
            headers.insert(DEAD_LETTER_COUNT, count.to_string());
        }
        if let Some(at) = self.at_ms {
            headers.insert(DEAD_LETTER_AT, at.to_string());
        }
    }
}
