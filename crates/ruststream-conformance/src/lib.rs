//! The conformance suite every ruststream broker adapter runs.
//!
//! An adapter describes the broker and the subscription form under test with a
//! [`Harness`]; [`conformance_tests!`] expands into one test per check of [`checks`].
//! Each check runs real [`ruststream::App`]s with real handlers on the adapter's broker
//! and asserts what the handlers saw and what the broker did next, watched through a
//! second subscription or a later service (never through internal state). A check, or
//! a part of one, that does not apply to the form's
//! [`Capabilities`](ruststream_core::Capabilities) is reported as **not applicable**,
//! distinct from passed: each check prints `conformance: <harness>: <check>: <result>`,
//! and appends it to the file named by [`REPORT_ENV`] where that is set (`scripts/test`
//! counts them).
//!
//! ```ignore
//! // crates/<adapter>/tests/conformance.rs
//! use std::sync::Arc;
//! use ruststream_conformance::{Harness, Mount, conformance_tests};
//! use ruststream_core::{Address, Broker, Capabilities};
//!
//! struct MyBroker;
//!
//! impl Harness for MyBroker {
//!     fn name(&self) -> &str { "mybroker queue" }
//!     async fn broker(&self) -> Arc<dyn Broker> { Arc::new(connect().await) }
//!     fn fresh_address(&self) -> Address { unique_queue() }
//!     fn mount(&self, address: Address) -> Mount { Mount::new(address).option(MyOptions) }
//!     fn capabilities(&self) -> Capabilities { Capabilities::SETTLES }
//! }
//!
//! conformance_tests!(MyBroker);
//! // or, with a check that fails because of a bug in the adapter:
//! // conformance_tests!(MyBroker, ignore(fail_fast_redelivers = "adapter bug: ..."));
//! ```
//!
//! Every wait is bounded ([`WAIT`] for what must happen, [`Harness::quiet`] for what
//! must not), and a whole check is cut off after [`CHECK_LIMIT`], so a failing broker
//! fails the test instead of hanging it.

pub mod asyncapi;
pub mod checks;
pub mod child;
pub mod cpu;
mod harness;
mod inbox;
pub mod logs;
mod macros;
pub mod mosquitto;
mod observed;
pub mod postgres;
pub mod proxy;
mod recorder;
mod report;
mod runner;
mod service;

pub use harness::Harness;
pub use inbox::{CHECK_LIMIT, WAIT};
pub use report::REPORT_ENV;
/// The runtime the checks run, for harnesses of adapters that do not depend on it.
pub use ruststream;
pub use ruststream::Mount;

/// What the macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::child::this_test;
    pub use crate::runner::run;
}
