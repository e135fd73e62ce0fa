//! Addresses: where a publish goes and which queue a subscription reads.
//!
//! A bare name is a queue (published through the default exchange with the name as
//! routing key); `/queues/NAME` is the same queue; `/exchanges/NAME/KEY` (or
//! `/exchanges/NAME` with an empty key) publishes to an exchange. Segments are
//! percent-decoded.

use ruststream_rabbitmq::{Node, node};

pub(crate) use ruststream_rabbitmq::BadAddress;

/// Where a publish goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
}

/// Where a publish to `address` goes.
pub(crate) fn target(address: &str) -> Result<Target, BadAddress> {
    let (exchange, routing_key) = match node(address)? {
        Node::Exchange { name, key } => (name, key.unwrap_or_default()),
        Node::Queue(queue) => (String::new(), queue),
    };
    Ok(Target {
        exchange: short(exchange, address)?,
        routing_key: short(routing_key, address)?,
    })
}

/// The queue a subscription to `address` reads.
pub(crate) fn queue(address: &str) -> Result<String, BadAddress> {
    match node(address)? {
        Node::Queue(queue) => short(queue, address),
        Node::Exchange { .. } => Err(BadAddress(format!(
            "{address}: not a queue (a name, or /queues/NAME)"
        ))),
    }
}

/// AMQP 0-9-1 names are short strings: at most 255 bytes.
fn short(name: String, address: &str) -> Result<String, BadAddress> {
    if name.len() > 255 {
        return Err(BadAddress(format!(
            "{address}: longer than 255 bytes (an AMQP 0-9-1 name)"
        )));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(exchange: &str, key: &str) -> Target {
        Target {
            exchange: exchange.into(),
            routing_key: key.into(),
        }
    }

    #[test]
    fn names_queues_and_exchanges() {
        assert_eq!(target("orders"), Ok(t("", "orders")));
        assert_eq!(target("/queues/a%2Fb"), Ok(t("", "a/b")));
        assert_eq!(
            target("/exchanges/events/order.created"),
            Ok(t("events", "order.created"))
        );
        assert_eq!(target("/exchanges/fan"), Ok(t("fan", "")));
        assert_eq!(queue("orders").as_deref(), Ok("orders"));
        assert_eq!(queue("/queues/o%20x").as_deref(), Ok("o x"));
    }

    #[test]
    fn refuses_what_is_not_an_address() {
        assert!(queue("").is_err());
        assert!(queue("/exchanges/x/k").is_err());
        assert!(queue("/queues/%zz").is_err());
        assert!(target("/exchanges//k").is_err());
        assert!(queue(&"q".repeat(256)).is_err());
    }
}
