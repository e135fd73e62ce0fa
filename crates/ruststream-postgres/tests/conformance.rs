//! The shared conformance suite (`ruststream-conformance`) on PostgreSQL with the
//! **default** options, each check in a schema of its own (dropped after it). Needs
//! PostgreSQL (`RUSTSTREAM_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};

/// Queues in a schema of the check's own (its parent's, in a child process of a check).
struct Postgres {
    schema: String,
    /// Whether the schema is this harness's to drop (not a parent's).
    owned: bool,
    taken: AtomicUsize,
    sealed: AtomicUsize,
}

impl Postgres {
    fn new() -> Self {
        let (schema, owned) = match ruststream_conformance::child::parent() {
            Some(schema) => (schema, false),
            None => (support::unique_schema("conf"), true),
        };
        Self {
            schema,
            owned,
            taken: AtomicUsize::new(0),
            sealed: AtomicUsize::new(0),
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.owned {
            support::drop_schema(&self.schema);
        }
    }
}

impl Harness for Postgres {
    fn name(&self) -> &str {
        "postgres"
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        Arc::new(support::broker(&self.schema, "").await)
    }

    /// A killed consumer's rows come back once their lease is over, at the next look
    /// (the slow poll), both the adapter's defaults.
    fn after_a_kill(&self) -> std::time::Duration {
        ruststream_postgres::DEFAULT_LEASE + ruststream_postgres::DEFAULT_POLL
    }

    /// The check's schema.
    fn share(&self) -> Option<String> {
        Some(self.schema.clone())
    }

    fn fresh_address(&self) -> Address {
        Address::new(format!("q{}", self.taken.fetch_add(1, Ordering::Relaxed)))
    }

    fn mount(&self, address: Address) -> Mount {
        Mount::new(address)
    }

    /// A subscription drains at a graceful stop: it claims nothing more and hands out
    /// what it claimed.
    fn drains(&self) -> bool {
        true
    }

    /// A queue a trigger in the check's schema refuses rows for.
    fn unpublishable_address(&self) -> Option<Address> {
        if self.sealed.fetch_add(1, Ordering::Relaxed) == 0 {
            support::seal(&self.schema);
        }
        Some(Address::new(format!(
            "sealed{}",
            self.taken.fetch_add(1, Ordering::Relaxed)
        )))
    }

    fn capabilities(&self) -> Capabilities {
        ruststream_postgres::CAPABILITIES
    }
}

mod queue {
    ruststream_conformance::conformance_tests!(super::Postgres::new());
}
