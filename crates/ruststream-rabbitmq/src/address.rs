//! Addresses as both RabbitMQ adapters read them: a bare name is a queue (reached
//! through the default exchange with the name as routing key); `/queues/NAME` is the
//! same queue; `/exchanges/NAME/KEY`, or `/exchanges/NAME` without a key, is an
//! exchange. Segments are percent-decoded, a bare name is taken as it is.

use std::fmt;

use ruststream_core::Address;

use crate::percent;

/// What an address names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A queue, by name.
    Queue(String),
    /// An exchange and the routing key, if the address gives one.
    Exchange {
        /// The exchange's name (never empty: the default exchange is reached by a queue's name).
        name: String,
        /// The routing key.
        key: Option<String>,
    },
}

/// Why an address cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadAddress(pub String);

impl fmt::Display for BadAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadAddress {}

/// What `address` names.
pub fn node(address: &str) -> Result<Node, BadAddress> {
    let decode =
        |segment: &str| percent::decode(segment).map_err(|e| BadAddress(format!("{address}: {e}")));
    if let Some(rest) = address.strip_prefix("/exchanges/") {
        let (name, key) = match rest.split_once('/') {
            Some((name, key)) => (decode(name)?, Some(decode(key)?)),
            None => (decode(rest)?, None),
        };
        if name.is_empty() {
            return Err(BadAddress(format!(
                "{address}: the default exchange is addressed by queue name"
            )));
        }
        return Ok(Node::Exchange { name, key });
    }
    let queue = match address.strip_prefix("/queues/") {
        Some(name) => decode(name)?,
        None if address.starts_with('/') => {
            return Err(BadAddress(format!(
                "{address}: not a queue (a name, or /queues/NAME) nor an exchange \
                 (/exchanges/NAME/KEY)"
            )));
        }
        None => address.to_owned(),
    };
    if queue.is_empty() {
        return Err(BadAddress("an empty queue name".into()));
    }
    Ok(Node::Queue(queue))
}

/// Where a dead letter to `address` goes, as an exchange and a routing key: a queue `Q`
/// is the default exchange (`""`) with key `Q`; `/exchanges/X/K` is `X`, `K` (no key:
/// `None`, the message's own). `None` if it is neither.
pub fn dead_letter_target(address: &Address) -> Option<(String, Option<String>)> {
    Some(match node(address.as_str()).ok()? {
        Node::Queue(queue) => (String::new(), Some(queue)),
        Node::Exchange { name, key } => (name, key),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(name: &str, key: Option<&str>) -> Node {
        Node::Exchange {
            name: name.into(),
            key: key.map(Into::into),
        }
    }

    #[test]
    fn names_queues_and_exchanges() {
        assert_eq!(node("orders"), Ok(Node::Queue("orders".into())));
        assert_eq!(node("a%20b"), Ok(Node::Queue("a%20b".into())));
        assert_eq!(node("/queues/a%2Fb"), Ok(Node::Queue("a/b".into())));
        assert_eq!(
            node("/exchanges/events/order.created"),
            Ok(exchange("events", Some("order.created")))
        );
        assert_eq!(node("/exchanges/fan"), Ok(exchange("fan", None)));
        assert_eq!(node("/exchanges/fan/"), Ok(exchange("fan", Some(""))));
    }

    #[test]
    fn refuses_what_is_not_an_address() {
        for (address, says) in [
            ("", "empty queue name"),
            ("/queues/", "empty queue name"),
            ("/queues/%zz", "/queues/%zz: bad percent-encoding"),
            ("/exchanges//k", "default exchange"),
            ("/topics/t", "not a queue"),
        ] {
            let error = node(address).expect_err(address).to_string();
            assert!(error.contains(says), "{address}: {error}");
        }
    }

    #[test]
    fn dead_letters_go_to_an_exchange_and_a_key() {
        let target = |a: &str| dead_letter_target(&Address::from(a));
        assert_eq!(target("dead"), Some((String::new(), Some("dead".into()))));
        assert_eq!(
            target("/queues/a%20b"),
            Some((String::new(), Some("a b".into())))
        );
        assert_eq!(target("/exchanges/dlx"), Some(("dlx".into(), None)));
        assert_eq!(
            target("/exchanges/dlx/k"),
            Some(("dlx".into(), Some("k".into())))
        );
        assert_eq!(target("/exchanges//k"), None);
    }
}
