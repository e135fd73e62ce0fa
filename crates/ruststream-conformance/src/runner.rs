//! Running one check as a test: its own runtime and an overall deadline.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::Duration;

use crate::inbox::CHECK_LIMIT;

/// How long the runtime's tasks get to finish once the check is over. A task that never
/// yields (a broker redelivering at once, forever) is left behind rather than waited for.
const SHUTDOWN: Duration = Duration::from_secs(5);

/// Runs `check` (of the harness named `harness`) on a new multi-threaded runtime; fails
/// if it takes over [`CHECK_LIMIT`]; reports whether it applied to the form.
pub fn run(name: &str, harness: &str, check: impl Future<Output = ()>) {
    crate::report::begin();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot build a runtime for {name}: {error}"),
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(async {
            if tokio::time::timeout(CHECK_LIMIT, check).await.is_err() {
                panic!("check {name} did not finish within {CHECK_LIMIT:?}");
            }
        });
    }));
    runtime.shutdown_timeout(SHUTDOWN);
    if let Err(panic) = outcome {
        resume_unwind(panic);
    }
    crate::report::finish(harness, name);
}
