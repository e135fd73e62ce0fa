//! Internal decoders, exposed for the fuzz targets in `fuzz/` (`--cfg fuzzing`, which `cargo fuzz` sets).
//! Not public API.

use bytes::Bytes;
use ruststream_core::Message;

/// A stream entry read back from its field-value pairs: the message and its defect.
pub fn entry_decode(pairs: Vec<(Bytes, Bytes)>) -> (Message, Option<&'static str>) {
    let decoded = crate::entry::decode(pairs);
    (decoded.message, decoded.defect)
}

/// The field-value pairs `XADD` writes for `message`.
pub fn entry_fields(message: &Message) -> Vec<(Bytes, Bytes)> {
    crate::entry::fields(message)
        .chunks(2)
        .map(|pair| {
            let bytes = |i: usize| {
                pair.get(i)
                    .and_then(|v| v.as_bytes())
                    .map(Bytes::copy_from_slice)
                    .unwrap_or_default()
            };
            (bytes(0), bytes(1))
        })
        .collect()
}

/// The list and Pub/Sub frame of `message`.
pub fn frame_encode(message: &Message) -> Bytes {
    crate::frame::encode(message)
}

/// A list or Pub/Sub frame read back; the error's text when it cannot be.
pub fn frame_decode(frame: &Bytes) -> Result<Message, String> {
    crate::frame::decode(frame).map_err(|e| e.to_string())
}
