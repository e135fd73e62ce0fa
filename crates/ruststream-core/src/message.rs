//! Addresses and outgoing messages.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::Headers;

/// Where messages go and come from: a queue, stream, list, channel or topic name.
///
/// The form of the text is the broker's (`orders`, `/queues/orders`, `news.*`). Cloning
/// is a reference-count increment.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address(Arc<str>);

impl Address {
    /// An address from text.
    pub fn new(address: impl AsRef<str>) -> Self {
        Self(Arc::from(address.as_ref()))
    }

    /// The address as text.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Address {
    fn from(address: &str) -> Self {
        Self::new(address)
    }
}

impl From<String> for Address {
    fn from(address: String) -> Self {
        Self(Arc::from(address))
    }
}

impl From<&Address> for Address {
    fn from(address: &Address) -> Self {
        address.clone()
    }
}

impl std::borrow::Borrow<str> for Address {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Address {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A message to publish: encoded payload bytes and headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The encoded body.
    pub payload: Bytes,
    /// The headers, framework ones (`content-type`, `x-ruststream-retry-count`…) included.
    pub headers: Headers,
}

impl Message {
    /// A message with a payload and no headers.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Self {
            payload: payload.into(),
            headers: Headers::new(),
        }
    }

    /// Sets a header and returns the message.
    pub fn with_header(
        mut self,
        name: impl Into<crate::HeaderName>,
        value: impl Into<crate::HeaderValue>,
    ) -> Self {
        self.headers.insert(name, value);
        self
    }
}
