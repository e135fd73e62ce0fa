//! The contract between ruststream's runtime and its broker adapters.
//!
//! An adapter implements [`Broker`] (subscriptions and a [`Publish`]er), hands out
//! [`Delivery`]s with an [`Acker`] that carries out [`Settlement`]s, and declares its
//! forms' [`Capabilities`]. The runtime decides what each handler outcome becomes with
//! [`decide`], a pure function, and adapters execute its [`Plan`] without re-deciding.
//!
//! This crate has no runtime and no broker in it; it is all an adapter depends on.

mod attached;
mod binding;
mod broker;
mod capabilities;
mod connector;
mod decision;
mod delivery;
mod drain;
mod error;
mod headers;
mod inspect;
mod message;
mod replay;
mod settings;
mod settlement;

/// Internal decoders, exposed for the fuzz targets in `fuzz/` (`--cfg fuzzing`, which
/// `cargo fuzz` sets; not an API, and no feature a user can turn on).
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod __fuzz {
    /// The retry-count parser behind [`crate::Headers::retry_count`].
    pub fn parse_u32(bytes: &[u8]) -> Option<u32> {
        crate::headers::parse_u32(bytes)
    }
}

pub use attached::Attached;
pub use binding::{Binding, BindingValue, Bindings};
pub use broker::{
    BoxFuture, Broker, BrokerOption, Declaration, DeliveryStream, Options, Publish, Replies,
    SubscribeSpec, Subscription,
};
pub use capabilities::Capabilities;
pub use connector::{ConnectFailure, Connector, Scheme, Server, opened, redact};
pub use decision::{Facts, Original, Plan, Republish, Verdict, decide};
pub use delivery::{Delivery, Settling};
pub use drain::{Drain, Requested};
pub use error::{AckError, ConsumeError, PublishError, PublishErrorKind, SubscribeError};
pub use headers::{
    CONTENT_TYPE, CORRELATION_ID, DEAD_LETTER_AT, DEAD_LETTER_ATTEMPT, DEAD_LETTER_ERROR,
    DEAD_LETTER_FROM, DEAD_LETTER_REASON, DEAD_LETTER_SERVICE, HeaderName, HeaderValue, Headers,
    MESSAGE_ID, REPLAYED_AT, REPLY_TO, RETRY_COUNT,
};
pub use inspect::{Inspect, InspectError, Waiting, Wanted, content_id};
pub use message::{Address, Message};
pub use replay::{replay_destination, replayed};
pub use settings::{Setting, split_query};
pub use settlement::{Acker, Settlement, Tag};
