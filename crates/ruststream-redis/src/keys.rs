//! Key names: the address (after the broker's key prefix) and the keys derived from it.
//!
//! Derived keys share the main key's hash slot: `{main}:suffix`, or `main:suffix` when the
//! main key already has a hash tag, so one subscription's keys live on one cluster node.

use std::sync::atomic::{AtomicU64, Ordering};

/// The keys of one subscription or publish target.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    main: String,
    base: String,
}

impl Keys {
    /// The keys of `address` under `prefix`.
    pub(crate) fn new(prefix: &str, address: &str) -> Self {
        let main = format!("{prefix}{address}");
        let base = if has_hash_tag(&main) {
            main.clone()
        } else {
            format!("{{{main}}}")
        };
        Self { main, base }
    }

    /// The stream, list or channel itself.
    pub(crate) fn main(&self) -> &str {
        &self.main
    }

    /// The sorted set of delayed copies of a stream.
    pub(crate) fn delayed(&self) -> String {
        format!("{}:delayed", self.base)
    }

    /// The kind marker a list or Pub/Sub subscription leaves (`list`, `channel`), read
    /// when publishing to a key that does not exist.
    pub(crate) fn kind(&self) -> String {
        format!("{}:kind", self.base)
    }

    /// The set of consumers of a reliable list.
    pub(crate) fn consumers(&self) -> String {
        format!("{}:consumers", self.base)
    }

    /// The prefix of processing lists; the consumer name follows.
    pub(crate) fn processing_prefix(&self) -> String {
        format!("{}:processing:", self.base)
    }

    /// The prefix of the keys recording a consumer's last take (its id and size, so a
    /// take replayed after a lost answer returns the same elements); the consumer name
    /// follows.
    pub(crate) fn take_prefix(&self) -> String {
        format!("{}:take:", self.base)
    }

    /// The prefix of heartbeat keys; the consumer name follows.
    pub(crate) fn alive_prefix(&self) -> String {
        format!("{}:alive:", self.base)
    }

    /// The prefix of the alive keys of a stream's consumer `group`; the consumer name
    /// follows.
    pub(crate) fn group_alive_prefix(&self, group: &str) -> String {
        format!("{}:group:{group}:alive:", self.base)
    }
}

fn has_hash_tag(key: &str) -> bool {
    key.find('{')
        .and_then(|open| key[open + 1..].find('}'))
        .is_some_and(|len| len > 0)
}

/// A consumer name unique per subscription, process and host: `host-pid-n`.
pub(crate) fn default_consumer() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{host}-{}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_share_a_hash_tag() {
        let k = Keys::new("app:", "orders");
        assert_eq!(k.main(), "app:orders");
        assert_eq!(k.delayed(), "{app:orders}:delayed");
        let k = Keys::new("", "{tenant}.orders");
        assert_eq!(k.delayed(), "{tenant}.orders:delayed");
    }

    #[test]
    fn consumer_names_differ() {
        assert_ne!(default_consumer(), default_consumer());
        assert!(default_consumer().contains(&std::process::id().to_string()));
    }
}
