//! The acker of forms that cannot settle: plain lists and Pub/Sub.

use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

/// Refuses every settlement as unsupported (the form delivers at most once).
pub(crate) struct NoAcker;

impl Acker for NoAcker {
    fn settle(&self, _tag: Tag, _message: Message, _settlement: Settlement) -> Settling {
        Settling::done(Err(AckError::Unsupported))
    }
}
