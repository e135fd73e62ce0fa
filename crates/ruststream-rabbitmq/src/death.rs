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

impl Death {
    /// Fills the queue and the reason from RabbitMQ's summary headers
    /// (`x-last-death-*`, else `x-first-death-*`, read as text by `text`) where the
    /// detailed account left them unknown; `None` if nothing at all is known.
    pub fn completed(mut self, text: impl Fn(&str) -> Option<String>) -> Option<Self> {
        for prefix in ["x-last-death", "x-first-death"] {
            self.queue = self.queue.or_else(|| text(&format!("{prefix}-queue")));
            self.reason = self.reason.or_else(|| text(&format!("{prefix}-reason")));
        }
        (self != Self::default()).then_some(self)
    }
}

/// `message` as the dead-letter tools show it: a dead letter RabbitMQ moved itself
/// (`death` reads RabbitMQ's account of it) gets the runtime's headers and loses
/// `rabbitmq_headers`; one the runtime published and any other message stay as they are.
pub fn described(
    mut message: Message,
    death: impl FnOnce() -> Option<Death>,
    rabbitmq_headers: &[&str],
) -> Message {
    if is_runtime_dead_letter(&message) {
        return message;
    }
    if let Some(death) = death() {
        for name in rabbitmq_headers {
            message.headers.remove(name);
        }
        death.describe(&mut message);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_fills_what_the_account_left_unknown() {
        let headers = |key: &str| match key {
            "x-last-death-reason" => Some("rejected".to_owned()),
            "x-first-death-queue" => Some("first".to_owned()),
            "x-first-death-reason" => Some("expired".to_owned()),
            _ => None,
        };
        let death = Death::default().completed(headers).expect("a death");
        assert_eq!(death.queue.as_deref(), Some("first"));
        assert_eq!(death.reason.as_deref(), Some("rejected"));
        let counted = Death {
            count: Some(2),
            ..Death::default()
        };
        assert_eq!(counted.completed(|_| None).and_then(|d| d.count), Some(2));
        assert_eq!(Death::default().completed(|_| None), None);
    }

    #[test]
    fn only_rabbitmqs_dead_letters_are_described() {
        let moved = || {
            Some(Death {
                queue: Some("orders".into()),
                ..Death::default()
            })
        };
        let message = Message::new("x").with_header("x-death", "...");
        let shown = described(message, moved, &["x-death"]);
        assert_eq!(shown.headers.get_str(DEAD_LETTER_FROM), Some("orders"));
        assert_eq!(shown.headers.get_str("x-death"), None);
        let ours = Message::new("y").with_header(DEAD_LETTER_FROM, "billing");
        assert_eq!(described(ours.clone(), moved, &[]), ours);
        let plain = Message::new("z");
        assert_eq!(described(plain.clone(), || None, &["x-death"]), plain);
    }
}
