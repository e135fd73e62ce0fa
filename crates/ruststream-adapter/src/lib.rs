//! What ruststream's broker adapters share and the contract ([`ruststream_core`]'s
//! traits) does not need: written once here instead of once per adapter.
//!
//! Dependencies point one way: `ruststream-core` ← `ruststream-adapter` ← the adapters.
//! Nothing here knows a broker.
//!
//! * [`Backoff`]: the delays between reconnection (or re-publish) attempts, growing from
//!   a minimum to a maximum with jitter, reset after a success.
//! * [`rounded_delay_ms`]: the delay of a durable delay queue or topic, one per rounded
//!   delay.
//! * `tls` (feature `tls`): CA files read and parsed with errors that name the file,
//!   and a rustls client configuration on the process's crypto provider.
//!
//! [`ruststream_core`]: https://docs.rs/ruststream-core

mod backoff;
mod delay;
mod outage;

#[cfg(feature = "tls")]
pub mod tls;

pub use backoff::Backoff;
pub use delay::rounded_delay_ms;
pub use outage::Outage;
