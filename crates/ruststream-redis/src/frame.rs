//! The list and Pub/Sub frame: headers and payload in one byte string.
//!
//! A big-endian `u32` header count, then for each header a big-endian `u32` name length,
//! the name, a big-endian `u32` value length and the value; then the payload to the end.

use bytes::{BufMut, Bytes, BytesMut};
use ruststream_core::{HeaderValue, Headers, Message};

/// Why a frame could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameError {
    /// The frame ends before its headers do.
    #[error("truncated frame")]
    Truncated,
    /// A header name is not UTF-8.
    #[error("header name is not utf-8")]
    NameNotUtf8,
}

/// Encodes `message` as a frame.
pub(crate) fn encode(message: &Message) -> Bytes {
    let headers_len: usize = message
        .headers
        .iter()
        .map(|(n, v)| 8 + n.as_str().len() + v.as_bytes().len())
        .sum();
    let mut out = BytesMut::with_capacity(4 + headers_len + message.payload.len());
    put_len(&mut out, message.headers.len());
    for (name, value) in message.headers.iter() {
        put_len(&mut out, name.as_str().len());
        out.put_slice(name.as_str().as_bytes());
        put_len(&mut out, value.as_bytes().len());
        out.put_slice(value.as_bytes());
    }
    out.put_slice(&message.payload);
    out.freeze()
}

fn put_len(out: &mut BytesMut, len: usize) {
    // Lengths above u32::MAX cannot be framed; Redis caps values at 512 MiB anyway.
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
}

/// Decodes a frame into headers and payload; the payload shares `frame`'s memory.
pub(crate) fn decode(frame: &Bytes) -> Result<Message, FrameError> {
    let mut at = 0usize;
    let count = read_u32(frame, &mut at)?;
    // Each header takes at least 8 bytes: a count larger than that is a broken frame.
    if count as usize > (frame.len() - at) / 8 {
        return Err(FrameError::Truncated);
    }
    let mut headers = Headers::new();
    for _ in 0..count {
        let name = read_chunk(frame, &mut at)?;
        let value = read_chunk(frame, &mut at)?;
        let name = std::str::from_utf8(&name).map_err(|_| FrameError::NameNotUtf8)?;
        headers.append(name.to_owned(), HeaderValue::from(value));
    }
    Ok(Message {
        payload: frame.slice(at..),
        headers,
    })
}

fn read_u32(frame: &Bytes, at: &mut usize) -> Result<u32, FrameError> {
    let end = at.checked_add(4).ok_or(FrameError::Truncated)?;
    let bytes: [u8; 4] = frame
        .get(*at..end)
        .and_then(|s| s.try_into().ok())
        .ok_or(FrameError::Truncated)?;
    *at = end;
    Ok(u32::from_be_bytes(bytes))
}

fn read_chunk(frame: &Bytes, at: &mut usize) -> Result<Bytes, FrameError> {
    let len = read_u32(frame, at)? as usize;
    let end = at.checked_add(len).ok_or(FrameError::Truncated)?;
    if end > frame.len() {
        return Err(FrameError::Truncated);
    }
    let chunk = frame.slice(*at..end);
    *at = end;
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_order_and_bytes() {
        let message = Message::new(&b"{\"a\":1}"[..])
            .with_header("content-type", "application/json")
            .with_header("bin", HeaderValue::from(vec![0, 255]));
        let frame = encode(&message);
        let decoded = decode(&frame).expect("decodes");
        assert_eq!(decoded.payload, message.payload);
        assert_eq!(text(&decoded), text(&message));
    }

    fn text(m: &Message) -> Vec<(String, Vec<u8>)> {
        m.headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn layout_is_big_endian_lengths() {
        let frame = encode(&Message::new(&b"P"[..]).with_header("k", "vv"));
        assert_eq!(&frame[..], b"\0\0\0\x01\0\0\0\x01k\0\0\0\x02vvP");
    }

    #[test]
    fn no_headers_is_four_zero_bytes() {
        let frame = encode(&Message::new(&b"x"[..]));
        assert_eq!(&frame[..], b"\0\0\0\0x");
    }

    #[test]
    fn truncated_frames_are_errors() {
        let frame = encode(&Message::new(&b""[..]).with_header("name", "value"));
        for cut in 0..frame.len() {
            assert_eq!(
                decode(&frame.slice(..cut)).err(),
                Some(FrameError::Truncated),
                "cut at {cut}"
            );
        }
        let huge = Bytes::from_static(b"\xff\xff\xff\xff");
        assert_eq!(decode(&huge).err(), Some(FrameError::Truncated));
    }

    #[test]
    fn non_utf8_name_is_an_error() {
        let frame = Bytes::from_static(b"\0\0\0\x01\0\0\0\x01\xff\0\0\0\0payload");
        assert_eq!(decode(&frame).err(), Some(FrameError::NameNotUtf8));
    }
}
