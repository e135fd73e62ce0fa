//! Addresses: where a publish goes and which queue a subscription reads.
//!
//! A bare name is a queue (published through the default exchange with the name as
//! routing key); `/queues/NAME` is the same queue; `/exchanges/NAME/KEY` (or
//! `/exchanges/NAME` with an empty key) publishes to an exchange. Segments are
//! percent-decoded.

use std::fmt;

/// Where a publish goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
}

/// Why an address cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadAddress(pub(crate) String);

impl fmt::Display for BadAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a publish to `address` goes.
pub(crate) fn target(address: &str) -> Result<Target, BadAddress> {
    if let Some(rest) = address.strip_prefix("/exchanges/") {
        let (exchange, key) = rest.split_once('/').unwrap_or((rest, ""));
        let exchange = decode(exchange, address)?;
        if exchange.is_empty() {
            return Err(BadAddress(format!(
                "{address}: the default exchange is addressed by queue name"
            )));
        }
        return Ok(Target {
            exchange: short(exchange, address)?,
            routing_key: short(decode(key, address)?, address)?,
        });
    }
    Ok(Target {
        exchange: String::new(),
        routing_key: queue(address)?,
    })
}

/// The queue a subscription to `address` reads.
pub(crate) fn queue(address: &str) -> Result<String, BadAddress> {
    let name = match address.strip_prefix("/queues/") {
        Some(name) => decode(name, address)?,
        None if address.starts_with('/') => {
            return Err(BadAddress(format!(
                "{address}: not a queue (a name, or /queues/NAME)"
            )));
        }
        None => address.to_owned(),
    };
    if name.is_empty() {
        return Err(BadAddress("an empty queue name".into()));
    }
    short(name, address)
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

fn decode(segment: &str, address: &str) -> Result<String, BadAddress> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| BadAddress(format!("{address}: bad percent-encoding")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| BadAddress(format!("{address}: not UTF-8 once decoded")))
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
