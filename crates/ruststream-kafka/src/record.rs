//! A record read and not yet handed to the runtime, and the tag its delivery carries.

use std::sync::Arc;

use bytes::Bytes;
use ruststream_core::{Acker, Address, Delivery, Headers, Message, Tag};

use crate::headers;

/// One delivery's identity: its partition and offset, and the epoch of the assignment
/// it was read under (a settlement of an earlier assignment is too late).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) epoch: u64,
}

/// A record read from a partition (or one retried in place under key order), ready to
/// become a delivery.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) at: Position,
    pub(crate) payload: Bytes,
    pub(crate) headers: Headers,
    /// Why it could not be read, if it could not (a header name that is not UTF-8).
    pub(crate) defect: Option<&'static str>,
    /// Which attempt this is: 1 when read from Kafka, one more for each retry in place.
    pub(crate) attempt: u32,
}

/// What a delivery's tag holds: enough to settle it, and to hand it out again under key
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Read {
    pub(crate) at: Position,
    pub(crate) attempt: u32,
    pub(crate) defect: Option<&'static str>,
}

impl Read {
    /// The tag's contents, if it is a Kafka delivery's.
    pub(crate) fn of(tag: &Tag) -> Option<Self> {
        match tag {
            Tag::Other(any) => any.downcast_ref::<Self>().copied(),
            _ => None,
        }
    }
}

impl Record {
    /// An empty record at `at` with `key`, as read (tests).
    #[cfg(test)]
    pub(crate) fn keyed(at: Position, key: Option<&str>) -> Self {
        let mut headers = Headers::new();
        if let Some(key) = key {
            headers.insert(crate::KEY, key.to_owned());
        }
        Self {
            at,
            payload: Bytes::new(),
            headers,
            defect: None,
            attempt: 1,
        }
    }

    /// The record's key (its [`KEY`](crate::KEY) header), if it has one.
    pub(crate) fn key(&self) -> Option<&[u8]> {
        headers::key(&self.headers)
    }

    /// The record read again for attempt `read.attempt + 1`, from what its last delivery
    /// settled with.
    pub(crate) fn again(read: Read, message: Message) -> Self {
        Self {
            at: read.at,
            payload: message.payload,
            headers: message.headers,
            defect: read.defect,
            attempt: read.attempt.saturating_add(1),
        }
    }

    /// The delivery of this record on `address`, settled through `acker`; `counts`: it
    /// carries its attempt as the broker's count (key order counts attempts itself).
    pub(crate) fn delivery(
        self,
        address: &Address,
        acker: &Arc<dyn Acker>,
        counts: bool,
    ) -> Delivery {
        let read = Read {
            at: self.at,
            attempt: self.attempt,
            defect: self.defect,
        };
        let mut delivery = Delivery::new(
            self.payload,
            self.headers,
            address.clone(),
            Tag::Other(Box::new(read)),
            acker.clone(),
        );
        if counts {
            delivery = delivery.with_broker_attempt(self.attempt);
        }
        match self.defect {
            Some(reason) => delivery.with_defect(reason),
            None => delivery,
        }
    }
}
