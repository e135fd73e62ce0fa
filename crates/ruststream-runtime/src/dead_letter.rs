//! What a dead letter the runtime publishes says about why it died.
//!
//! The payload and the headers stay as they arrived, with these added (names in
//! `ruststream_core`): the address it was received on, the attempt it was spent at, the
//! reason (`retry`, `decode`, `panic`, `timeout`), the failure's text (bounded), the time
//! and the service. Its `x-ruststream-retry-count` is taken off (the attempt is in
//! `x-ruststream-dead-letter-attempt`): a dead letter is a new message, attempt 1 for
//! whoever reads the dead-letter address, on every broker.

use std::time::{SystemTime, UNIX_EPOCH};

use ruststream_core::{
    Address, DEAD_LETTER_AT, DEAD_LETTER_ATTEMPT, DEAD_LETTER_ERROR, DEAD_LETTER_FROM,
    DEAD_LETTER_REASON, DEAD_LETTER_SERVICE, HeaderValue, Message, RETRY_COUNT,
};

use crate::settled::Cause;

/// The longest failure text a dead letter carries, in bytes.
const MAX_ERROR: usize = 256;

/// Why a delivery is spent: what the dead letter says.
pub(crate) struct Why<'a> {
    pub(crate) from: &'a Address,
    pub(crate) attempt: u32,
    pub(crate) cause: &'a Cause,
    /// The handler's reason (`Outcome::because`), if it gave one.
    pub(crate) reason: Option<&'a str>,
    pub(crate) service: &'a str,
}

/// Adds the dead-letter headers to `message`, a delivery as it arrived.
pub(crate) fn mark(message: &mut Message, why: &Why<'_>) {
    let headers = &mut message.headers;
    headers.remove(RETRY_COUNT);
    headers.insert(
        DEAD_LETTER_FROM,
        HeaderValue::from(why.from.as_str().to_owned()),
    );
    headers.insert(DEAD_LETTER_ATTEMPT, HeaderValue::from(why.attempt));
    let (reason, error) = match why.cause {
        Cause::Decode(error) => ("decode", Some(error.clone())),
        Cause::Panic(error) => ("panic", Some(error.clone())),
        Cause::Timeout(limit) => ("timeout", Some(format!("ran longer than {limit:?}"))),
        Cause::Layer => ("layer", None),
        Cause::Spent => (
            "retry",
            Some("delivered past max_attempts; the handler did not run again".to_owned()),
        ),
        _ => ("retry", why.reason.map(str::to_owned)),
    };
    headers.insert(DEAD_LETTER_REASON, HeaderValue::from_static(reason));
    if let Some(error) = error {
        headers.insert(DEAD_LETTER_ERROR, HeaderValue::from(bounded(error)));
    }
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    headers.insert(DEAD_LETTER_AT, HeaderValue::from(at.to_string()));
    headers.insert(
        DEAD_LETTER_SERVICE,
        HeaderValue::from(why.service.to_owned()),
    );
}

/// `text` cut to at most [`MAX_ERROR`] bytes, on a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_ERROR {
        let mut end = MAX_ERROR;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::bounded;

    #[test]
    fn error_text_is_bounded_on_a_character_boundary() {
        assert_eq!(bounded("short".into()), "short");
        let long = "é".repeat(200); // 400 bytes
        let cut = bounded(long);
        assert!(cut.len() <= 256 && cut.len() >= 255, "{}", cut.len());
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
