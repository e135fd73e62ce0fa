//! The checks, one async function each, generic over the [`Harness`].
//!
//! Each starts real services on the harness's broker, publishes, and asserts what the
//! handlers saw and what the broker did next. A check that needs something the form
//! cannot do (settle, at all) says so on stderr and passes.

mod capabilities;
mod failure;
mod forged;
mod moves;
mod once;
mod order;
mod owed_copy;
mod publish;
mod request;
mod retry;
mod roundtrip;
mod settlement;
mod shutdown;
mod stops;

pub use capabilities::declared_capabilities;
pub use failure::{decode_failure_drops, fail_fast_redelivers, panic_skip_acks};
pub use forged::forged_retry_count;
pub use moves::one_copy_after_a_kill;
pub use once::delivered_twice_handled_once;
pub use order::key_order_through_retries;
pub use owed_copy::failed_copy_is_owed;
pub use publish::publish_from_handler;
pub use request::request_reply;
pub use retry::{
    retry_after_beyond_native_bound, retry_after_delays, retry_attempts_then_dead_letter,
};
pub use roundtrip::roundtrip;
pub use settlement::{ack_removes, drop_not_redelivered};
pub use shutdown::graceful_stop;
pub use stops::{stop_during_delay, stop_spends_no_attempt};

use ruststream::Address;
use ruststream_core::Message;
use serde::{Deserialize, Serialize};

use crate::Harness;
use crate::inbox::within;
use crate::service::Service;

/// Whether the form settles; if not, reports `check` (a check's name: all of it; a
/// name with a part in parentheses: that part) as not applicable.
fn settles(h: &impl Harness, check: &str) -> bool {
    let settles = h.capabilities().settles;
    if !settles {
        crate::report::not_applicable(h.name(), check, "the form does not settle");
    }
    settles
}

/// A typed payload, JSON on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Numbered {
    n: u32,
}

/// Publishes `message` to `address` with the service's publisher.
async fn publish(h: &impl Harness, service: &Service, address: &Address, message: Message) {
    let publisher = service.publisher();
    sent(
        h,
        address,
        publisher.publish_message(address.clone(), message),
    )
    .await;
}

/// Awaits a publish to `to`, failing the check if it fails or hangs.
async fn sent<E: std::fmt::Display>(
    h: &impl Harness,
    to: &Address,
    send: impl std::future::Future<Output = Result<(), E>>,
) {
    if let Err(error) = within("publishing", send).await {
        panic!("{}: publish to {to} failed: {error}", h.name());
    }
}
