//! Message headers: an ordered list of names and byte-string values.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// `content-type`: the codec's media type, set on publish.
pub const CONTENT_TYPE: &str = "content-type";
/// `correlation-id`: ties a reply to its request.
pub const CORRELATION_ID: &str = "correlation-id";
/// `reply-to`: where a handler's reply goes.
pub const REPLY_TO: &str = "reply-to";
/// `message-id`: the publisher's id for the message.
pub const MESSAGE_ID: &str = "message-id";
/// `x-ruststream-retry-count`: how many times the runtime has copied the message for a retry.
pub const RETRY_COUNT: &str = "x-ruststream-retry-count";
/// `x-ruststream-dead-letter-from`: on a dead letter, the address the message was
/// received on.
pub const DEAD_LETTER_FROM: &str = "x-ruststream-dead-letter-from";
/// `x-ruststream-dead-letter-attempt`: on a dead letter, the attempt it was spent at.
pub const DEAD_LETTER_ATTEMPT: &str = "x-ruststream-dead-letter-attempt";
/// `x-ruststream-dead-letter-reason`: on a dead letter, why: `retry` (the handler's
/// outcome), `decode`, `panic` or `timeout` (a failure policy).
pub const DEAD_LETTER_REASON: &str = "x-ruststream-dead-letter-reason";
/// `x-ruststream-dead-letter-error`: on a dead letter, the failure's text (at most 256
/// bytes), where there is one.
pub const DEAD_LETTER_ERROR: &str = "x-ruststream-dead-letter-error";
/// `x-ruststream-dead-letter-at`: on a dead letter, when (milliseconds since the Unix
/// epoch, the system clock).
pub const DEAD_LETTER_AT: &str = "x-ruststream-dead-letter-at";
/// `x-ruststream-dead-letter-service`: on a dead letter, the service that sent it there.
pub const DEAD_LETTER_SERVICE: &str = "x-ruststream-dead-letter-service";
/// `x-ruststream-replayed-at`: on a dead letter replayed to its address by the
/// `dead-letters replay` tool, when (milliseconds since the Unix epoch). The replayed
/// copy has no retry count and no dead-letter headers: it starts at attempt 1.
pub const REPLAYED_AT: &str = "x-ruststream-replayed-at";

/// A header name: text, shared cheaply. Names compare by their text, however stored.
#[derive(Clone)]
pub struct HeaderName(Name);

impl PartialEq for HeaderName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for HeaderName {}

impl std::hash::Hash for HeaderName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

#[derive(Clone)]
enum Name {
    Static(&'static str),
    Shared(Arc<str>),
}

impl HeaderName {
    /// A name from a string literal; costs no allocation.
    pub const fn from_static(name: &'static str) -> Self {
        Self(Name::Static(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Name::Static(s) => s,
            Name::Shared(s) => s,
        }
    }
}

impl From<&'static str> for HeaderName {
    fn from(name: &'static str) -> Self {
        Self::from_static(name)
    }
}

impl From<String> for HeaderName {
    fn from(name: String) -> Self {
        Self(Name::Shared(name.into()))
    }
}

impl From<Arc<str>> for HeaderName {
    fn from(name: Arc<str>) -> Self {
        Self(Name::Shared(name))
    }
}

impl fmt::Debug for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A header value: bytes, usually but not necessarily UTF-8 text.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct HeaderValue(Bytes);

impl HeaderValue {
    /// A value from a string literal; costs no allocation.
    pub const fn from_static(value: &'static str) -> Self {
        Self(Bytes::from_static(value.as_bytes()))
    }

    /// The value as text, if it is UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The raw bytes of the value.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The value as shared bytes.
    pub fn to_bytes(&self) -> Bytes {
        self.0.clone()
    }
}

impl From<&'static str> for HeaderValue {
    fn from(value: &'static str) -> Self {
        Self::from_static(value)
    }
}

impl From<String> for HeaderValue {
    fn from(value: String) -> Self {
        Self(Bytes::from(value))
    }
}

impl From<Bytes> for HeaderValue {
    fn from(value: Bytes) -> Self {
        Self(value)
    }
}

impl From<Vec<u8>> for HeaderValue {
    fn from(value: Vec<u8>) -> Self {
        Self(Bytes::from(value))
    }
}

impl From<u32> for HeaderValue {
    fn from(value: u32) -> Self {
        Self(Bytes::from(value.to_string()))
    }
}

impl fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_str() {
            Some(s) => fmt::Debug::fmt(s, f),
            None => fmt::Debug::fmt(&self.0, f),
        }
    }
}

/// The headers of a message: names and values in the order they were set.
///
/// Cloning is a reference-count increment, so a delivery can hand its headers to a
/// handler and keep them for a copy without allocating. Names compare exactly
/// (brokers differ on case; ruststream's own names are lower case).
///
/// ```
/// use ruststream_core::Headers;
///
/// let mut headers = Headers::new();
/// headers.insert("tenant", "acme");
/// assert_eq!(headers.get_str("tenant"), Some("acme"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers {
    entries: Option<Arc<Vec<(HeaderName, HeaderValue)>>>,
}

impl Headers {
    /// No headers; costs no allocation.
    pub const fn new() -> Self {
        Self { entries: None }
    }

    /// The first value set for `name`.
    pub fn get(&self, name: &str) -> Option<&HeaderValue> {
        self.iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, v)| v)
    }

    /// The first value set for `name`, if it is UTF-8 text.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(HeaderValue::to_str)
    }

    /// Sets `name` to `value`, replacing every earlier value of that name.
    pub fn insert(&mut self, name: impl Into<HeaderName>, value: impl Into<HeaderValue>) {
        let name = name.into();
        let entries = Arc::make_mut(self.entries.get_or_insert_with(Default::default));
        entries.retain(|(n, _)| *n != name);
        entries.push((name, value.into()));
    }

    /// Adds a value for `name`, keeping earlier ones.
    pub fn append(&mut self, name: impl Into<HeaderName>, value: impl Into<HeaderValue>) {
        let entries = Arc::make_mut(self.entries.get_or_insert_with(Default::default));
        entries.push((name.into(), value.into()));
    }

    /// Removes every value of `name`.
    pub fn remove(&mut self, name: &str) {
        if let Some(entries) = self.entries.as_mut()
            && entries.iter().any(|(n, _)| n.as_str() == name)
        {
            Arc::make_mut(entries).retain(|(n, _)| n.as_str() != name);
        }
    }

    /// The names and values in order.
    pub fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.entries
            .iter()
            .flat_map(|e| e.iter().map(|(n, v)| (n, v)))
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, |e| e.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The runtime's retry count (`x-ruststream-retry-count`); 0 when absent or not a number.
    pub fn retry_count(&self) -> u32 {
        self.get(RETRY_COUNT)
            .and_then(|v| parse_u32(v.as_bytes()))
            .unwrap_or(0)
    }
}

/// ASCII digits only, any number of them (leading zeros too), the value fitting a `u32`.
pub(crate) fn parse_u32(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() {
        return None;
    }
    bytes.iter().try_fold(0u32, |acc, b| {
        let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
        acc.checked_mul(10)?.checked_add(u32::from(digit))
    })
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<N: Into<HeaderName>, V: Into<HeaderValue>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let entries: Vec<_> = iter
            .into_iter()
            .map(|(n, v)| (n.into(), v.into()))
            .collect();
        if entries.is_empty() {
            Self::new()
        } else {
            Self {
                entries: Some(Arc::new(entries)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_replaces_and_append_keeps() {
        let mut h = Headers::new();
        h.insert("a", "1");
        h.append("a", "2");
        assert_eq!(h.len(), 2);
        h.insert("a", "3");
        assert_eq!(h.len(), 1);
        assert_eq!(h.get_str("a"), Some("3"));
        h.remove("a");
        assert!(h.is_empty());
    }

    #[test]
    fn insert_replaces_a_name_however_it_is_stored() {
        let mut h: Headers = [(HeaderName::from(String::from(RETRY_COUNT)), "1")]
            .into_iter()
            .collect();
        h.insert(RETRY_COUNT, "2");
        assert_eq!(h.len(), 1);
        assert_eq!(h.retry_count(), 2);
    }

    #[test]
    fn clones_are_independent() {
        let mut a = Headers::new();
        a.insert("x", "1");
        let mut b = a.clone();
        b.insert("x", "2");
        assert_eq!(a.get_str("x"), Some("1"));
        assert_eq!(b.get_str("x"), Some("2"));
    }

    #[test]
    fn retry_count_parses_digits_only() {
        let mut h = Headers::new();
        assert_eq!(h.retry_count(), 0);
        h.insert(RETRY_COUNT, "7");
        assert_eq!(h.retry_count(), 7);
        h.insert(RETRY_COUNT, "-1");
        assert_eq!(h.retry_count(), 0);
        h.insert(RETRY_COUNT, "99999999999");
        assert_eq!(h.retry_count(), 0);
        h.insert(RETRY_COUNT, HeaderValue::from(vec![0xff, 0xfe]));
        assert_eq!(h.retry_count(), 0);
    }

    #[test]
    fn retry_count_reads_leading_zeros_past_ten_digits() {
        // Found by the `headers` fuzz target: eleven digits were taken for no number.
        let mut h = Headers::new();
        h.insert(RETRY_COUNT, "00000000007");
        assert_eq!(h.retry_count(), 7);
        h.insert(RETRY_COUNT, "0000000004294967295");
        assert_eq!(h.retry_count(), u32::MAX);
        h.insert(RETRY_COUNT, "0000000004294967296");
        assert_eq!(h.retry_count(), 0);
    }

    #[test]
    fn non_utf8_values_are_kept_as_bytes() {
        let mut h = Headers::new();
        h.insert("bin", HeaderValue::from(vec![0xff]));
        assert_eq!(h.get_str("bin"), None);
        assert_eq!(h.get("bin").map(HeaderValue::as_bytes), Some(&[0xff][..]));
    }
}
