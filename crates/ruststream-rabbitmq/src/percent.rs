//! Percent-encoding of names in URLs and RabbitMQ addresses (`/queues/a%20b`).

/// Why a percent-encoded text does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadEncoding {
    /// A `%` not followed by two hex digits.
    Escape,
    /// The decoded bytes are not UTF-8.
    Utf8,
}

impl std::fmt::Display for BadEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Escape => "bad percent-encoding",
            Self::Utf8 => "not UTF-8 once decoded",
        })
    }
}

/// Percent-decodes `text` (one URL component or address segment).
pub fn decode(text: &str) -> Result<String, BadEncoding> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or(BadEncoding::Escape)?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| BadEncoding::Utf8)
}

/// Percent-encodes `name` for an address path segment (RabbitMQ 4's v2 addresses): all
/// but ASCII letters, digits and `-._~`.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_encodes_segments() {
        assert_eq!(decode("a%20b%2Fc").as_deref(), Ok("a b/c"));
        assert_eq!(decode("gu%40st").as_deref(), Ok("gu@st"));
        assert_eq!(decode("%zz"), Err(BadEncoding::Escape));
        assert_eq!(decode("%4"), Err(BadEncoding::Escape));
        assert_eq!(decode("%ff"), Err(BadEncoding::Utf8));
        assert_eq!(encode("a.b-c_d~"), "a.b-c_d~");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(decode(&encode("é q/1")).as_deref(), Ok("é q/1"));
    }
}
