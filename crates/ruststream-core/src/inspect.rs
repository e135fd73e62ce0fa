//! Looking at what waits at an address, and taking single messages out: the broker
//! capability behind the dead-letter tools.

use crate::{Address, BoxFuture, Message};

/// Browses the messages waiting at an address and removes chosen ones by id.
///
/// A broker that can offers it through [`Broker::inspect`](crate::Broker::inspect); the
/// command line's `dead-letters` tools use it. Browsing does not consume: what was
/// browsed stays where it was, in its order, and is not counted as a delivery attempt.
/// Ids are the adapter's, stable while the message waits (a stream entry id, a
/// position-free digest of a list element, a sequence number); byte-identical messages
/// may share an id, and removing it then removes one of them.
///
/// ```
/// use ruststream_core::{Address, BoxFuture, Inspect, InspectError, Message, Waiting};
///
/// struct Nothing;
///
/// impl Inspect for Nothing {
///     fn browse(&self, _: &Address, _: usize) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>> {
///         Box::pin(async { Ok(Vec::new()) })
///     }
///     fn remove<'a>(&'a self, _: &'a Address, _: &'a [String]) -> BoxFuture<'a, Result<usize, InspectError>> {
///         Box::pin(async { Ok(0) })
///     }
/// }
/// ```
pub trait Inspect: Send + Sync {
    /// Up to `max` messages waiting at `address`, oldest first, without consuming them.
    fn browse(
        &self,
        address: &Address,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>>;

    /// Removes the messages with these ids from `address` (one message per id given);
    /// returns how many were removed. An id no longer there is skipped.
    fn remove<'a>(
        &'a self,
        address: &'a Address,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<usize, InspectError>>;
}

/// A message waiting at an address, with the id that removes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The adapter's id for it.
    pub id: String,
    /// Its payload and headers, as stored.
    pub message: Message,
    /// Why it could not be read in full (a truncated frame), where it could not.
    pub defect: Option<String>,
}

impl Waiting {
    /// A message read in full.
    pub fn new(id: impl Into<String>, message: Message) -> Self {
        Self {
            id: id.into(),
            message,
            defect: None,
        }
    }
}

/// Why browsing or removing failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// The address is not something that holds messages to browse (a channel, an
    /// exchange, a key of another type).
    #[error("cannot browse {address}: {reason}")]
    Unsupported {
        /// The address asked for.
        address: String,
        /// What it is instead.
        reason: String,
    },
    /// The broker failed or refused.
    #[error("broker error: {0}")]
    Broker(String),
}
