//! Looking at what waits at an address, and taking single messages out: the broker
//! capability behind the dead-letter tools.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

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

    /// Replaces the message `id` at `address` by `copy` at `to` in one step (one
    /// transaction: both or neither), where the broker can: a replay that never leaves
    /// both a dead letter and its copy. `Some(Ok(false))`: the id is no longer there
    /// (nothing was written). `None` (the default): the broker cannot, and a replay
    /// publishes the copy first and removes the dead letter after.
    fn replace<'a>(
        &'a self,
        address: &'a Address,
        id: &'a str,
        to: &'a Address,
        copy: &'a Message,
    ) -> Option<BoxFuture<'a, Result<bool, InspectError>>> {
        let _ = (address, id, to, copy);
        None
    }
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

/// An id for a message the broker keeps no id for: a digest (64-bit FNV-1a, as 16 hex
/// digits) of its payload and headers, so it does not change with the message's place in
/// the queue. Byte-identical messages share it.
///
/// ```
/// use ruststream_core::{Message, content_id};
///
/// let a = Message::new("ab").with_header("k", "v");
/// assert_eq!(content_id(&a), content_id(&a.clone()));
/// assert_ne!(content_id(&a), content_id(&Message::new("ab")));
/// ```
pub fn content_id(message: &Message) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut eat = |bytes: &[u8]| {
        // Each part ends with a byte no UTF-8 text has, so parts never run together.
        for b in bytes.iter().chain(&[0xff]) {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(PRIME);
        }
    };
    eat(&message.payload);
    for (name, value) in message.headers.iter() {
        eat(name.as_str().as_bytes());
        eat(value.as_bytes());
    }
    format!("{hash:016x}")
}

/// The ids an [`Inspect::remove`] was asked for, taken off one message at a time: an id
/// given twice removes two messages that share it. For an adapter that walks a queue
/// and removes what matches (shared by the walk's callbacks, so it takes `&self`).
///
/// ```
/// use ruststream_core::Wanted;
///
/// let ids = ["a".to_owned(), "a".to_owned()];
/// let wanted = Wanted::new(&ids);
/// assert!(wanted.take("a") && wanted.take("a"));
/// assert!(!wanted.take("a") && wanted.is_done());
/// assert_eq!(wanted.taken(), 2);
/// ```
#[derive(Debug)]
pub struct Wanted<'a> {
    counts: Mutex<HashMap<&'a str, usize>>,
    left: AtomicUsize,
    asked: usize,
}

impl<'a> Wanted<'a> {
    /// All of `ids`, none taken yet.
    pub fn new(ids: &'a [String]) -> Self {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for id in ids {
            *counts.entry(id.as_str()).or_default() += 1;
        }
        Self {
            counts: Mutex::new(counts),
            left: AtomicUsize::new(ids.len()),
            asked: ids.len(),
        }
    }

    /// Whether a message with `id` is still wanted; if so, it counts as taken.
    pub fn take(&self, id: &str) -> bool {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        match counts.get_mut(id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                self.left.fetch_sub(1, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// Whether every id asked for was taken.
    pub fn is_done(&self) -> bool {
        self.left.load(Ordering::Relaxed) == 0
    }

    /// How many were taken.
    pub fn taken(&self) -> usize {
        self.asked - self.left.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ids_tell_payloads_and_headers_apart() {
        let a = Message::new("ab").with_header("k", "v");
        assert_eq!(content_id(&a), content_id(&a.clone()));
        assert_eq!(content_id(&a).len(), 16);
        assert_ne!(
            content_id(&a),
            content_id(&Message::new("ab").with_header("k", "w"))
        );
        // Parts never run together.
        assert_ne!(
            content_id(&a),
            content_id(&Message::new("abk").with_header("", "v"))
        );
        assert_ne!(
            content_id(&Message::new("a")),
            content_id(&Message::new("b"))
        );
    }

    #[test]
    fn wanted_ids_are_taken_as_often_as_given() {
        let ids = ["a".to_owned(), "b".to_owned(), "a".to_owned()];
        let wanted = Wanted::new(&ids);
        assert!(!wanted.take("c"));
        assert!(wanted.take("a") && wanted.take("b") && !wanted.take("b"));
        assert!(!wanted.is_done());
        assert!(wanted.take("a") && wanted.is_done());
        assert_eq!(wanted.taken(), 3);
        assert!(Wanted::new(&[]).is_done());
    }
}
