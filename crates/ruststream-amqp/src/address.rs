//! Addresses: ruststream names to AMQP 1.0 node addresses.

use ruststream_rabbitmq::percent;

/// The AMQP address for a ruststream address.
///
/// An address starting with `/` is used as it is (RabbitMQ 4 forms: `/queues/NAME`,
/// `/exchanges/NAME`, `/exchanges/NAME/KEY`; or any node address of another broker).
/// A bare name is a queue: `orders` becomes `/queues/orders`.
pub fn amqp_address(address: &str) -> String {
    if address.starts_with('/') {
        address.to_owned()
    } else {
        format!("/queues/{}", percent::encode(address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_are_queues() {
        assert_eq!(amqp_address("orders"), "/queues/orders");
        assert_eq!(amqp_address("a b"), "/queues/a%20b");
        assert_eq!(amqp_address("/exchanges/x/k"), "/exchanges/x/k");
    }
}
