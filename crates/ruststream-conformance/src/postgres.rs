//! The PostgreSQL the inbox's tests and check write to, and names no other test uses.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use ruststream_inbox::sqlx::PgPool;

/// The server: `RUSTSTREAM_POSTGRES_URL`, else the local one (as in CI).
pub fn url() -> String {
    std::env::var("RUSTSTREAM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A pool on [`url`]; a missing PostgreSQL fails the test saying how to get one.
pub async fn pool() -> PgPool {
    let url = url();
    PgPool::connect(&url).await.unwrap_or_else(|error| {
        panic!(
            "this test needs PostgreSQL at {url}: {error}\n\
             start one (PostgreSQL 15 on 127.0.0.1:5432, trust auth, database `test`, as in \
             CI) or set RUSTSTREAM_POSTGRES_URL"
        )
    })
}

/// `rs_<what>_<pid>_<n>_<nanos>`: a table name no other test of this run uses.
pub fn unique(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "rs_{what}_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
