//! Shared helpers for the runtime's integration tests.
#![allow(dead_code, unreachable_pub)]

use ruststream_core::{Capabilities, Original, Plan, Settlement};

/// A memory broker's capabilities with some switched off.
pub fn caps(
    settles: bool,
    requeues: bool,
    counts: bool,
    delays: bool,
    dead_letters: bool,
) -> Capabilities {
    Capabilities {
        settles,
        requeues,
        counts,
        delays,
        dead_letters,
    }
}

/// Settles only: every retry is a runtime copy.
pub const COPYING: Capabilities = Capabilities::SETTLES;

/// The plan's settlement of the original, if it settles now.
pub fn settled_with(plan: &Plan) -> Option<Settlement> {
    match plan.original {
        Original::Settle(s) => Some(s),
        _ => None,
    }
}

/// Logs to the test's output when `RUST_LOG` is set.
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
