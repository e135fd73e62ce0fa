//! The Redis stream entry mapping and the list/Pub/Sub frame: never panic, read what
//! was written, and a frame that decodes encodes back to the same bytes.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use ruststream_core::{HeaderValue, Headers, Message};
use ruststream_redis::STREAM_FIELDS;
use ruststream_redis::__fuzz::{entry_decode, entry_fields, frame_decode, frame_encode};

/// Cuts the fuzzer's bytes into short pieces.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    fn chunk(&mut self) -> Option<&'a [u8]> {
        let len = usize::from(self.byte()? % 48).min(self.0.len());
        let (chunk, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(chunk)
    }
}

fuzz_target!(|data: &[u8]| {
    frame_any(data);
    entry_any(data);
    round_trip(data);
});

/// Any bytes as a frame: an error, or a message that encodes back to these bytes.
fn frame_any(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    if let Ok(message) = frame_decode(&frame) {
        assert_eq!(
            frame_encode(&message),
            frame,
            "frame re-encodes differently"
        );
    }
}

/// Any field-value pairs as a stream entry: the last `_payload`, the `h:` fields with a
/// UTF-8 name in order, the rest in one `x-ruststream-stream-fields` header; a defect
/// when there is no `_payload` or a header name is not UTF-8. Written again (a copy, a
/// dead letter), it has every field it had, with `_payload` (empty when it had none)
/// first.
fn entry_any(data: &[u8]) {
    let mut input = Input(data);
    let mut pairs = Vec::new();
    while let (Some(kind), Some(field), Some(value)) = (input.byte(), input.chunk(), input.chunk())
    {
        let field = match kind % 4 {
            0 => b"_payload".to_vec(),
            1 => [b"h:", field].concat(),
            _ => field.to_vec(),
        };
        pairs.push((Bytes::from(field), Bytes::copy_from_slice(value)));
    }
    let mut payload = None;
    let mut headers = Vec::new();
    let mut bad_name = false;
    let mut header_fields = Vec::new();
    let mut other = Vec::new();
    for (field, value) in &pairs {
        if field.as_ref() == b"_payload" {
            payload = Some(value.clone());
            continue;
        }
        if let Some(name) = field.strip_prefix(b"h:") {
            match std::str::from_utf8(name) {
                Ok(name) => {
                    headers.push((name.to_owned(), value.to_vec()));
                    header_fields.push((field.clone(), value.clone()));
                    continue;
                }
                Err(_) => bad_name = true,
            }
        }
        other.push((field.clone(), value.clone()));
    }
    if !other.is_empty() {
        let mut packed = Vec::new();
        for (field, value) in &other {
            for bytes in [field, value] {
                packed.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                packed.extend_from_slice(bytes);
            }
        }
        headers.push((STREAM_FIELDS.to_owned(), packed));
    }
    let (message, defect) = entry_decode(pairs);
    let mut written = vec![(
        Bytes::from_static(b"_payload"),
        payload.clone().unwrap_or_default(),
    )];
    written.extend(header_fields);
    written.extend(other);
    // A header under the reserved name `x-ruststream-stream-fields` that came with the
    // entry is taken for the framework's own (its packed fields written back as fields,
    // replaced by the entry's unknown fields): such an entry is not written back as it
    // came. Every other one is.
    let reserved = format!("h:{STREAM_FIELDS}");
    let own = pairs_had(&written, reserved.as_bytes());
    if !own {
        assert_eq!(entry_fields(&message), written, "written again");
    }
    assert_eq!(
        defect.is_some(),
        payload.is_none() || bad_name,
        "defect {defect:?}"
    );
    assert_eq!(message.payload, payload.unwrap_or_default());
    if own {
        // Every other header is there, in order.
        let others = |h: Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
            h.into_iter().filter(|(n, _)| n != STREAM_FIELDS).collect()
        };
        assert_eq!(others(text(&message.headers)), others(headers));
    } else {
        assert_eq!(text(&message.headers), headers);
    }
}

/// A message built from the input survives both encodings unchanged.
fn round_trip(data: &[u8]) {
    let mut input = Input(data);
    let payload = Bytes::copy_from_slice(input.chunk().unwrap_or_default());
    let mut headers = Headers::new();
    while let (Some(name), Some(value)) = (input.chunk(), input.chunk()) {
        let name = String::from_utf8_lossy(name).into_owned();
        if name == STREAM_FIELDS {
            continue; // unpacked into fields when written, by design
        }
        headers.append(name, HeaderValue::from(value.to_vec()));
    }
    let message = Message { payload, headers };
    let (read, defect) = entry_decode(entry_fields(&message));
    assert_eq!(defect, None);
    assert_eq!(read, message, "stream entry round trip");
    let frame = frame_encode(&message);
    assert_eq!(
        frame_decode(&frame).as_ref(),
        Ok(&message),
        "frame round trip"
    );
}

fn text(headers: &Headers) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
        .collect()
}

/// Whether `fields` has a field named `name`.
fn pairs_had(fields: &[(Bytes, Bytes)], name: &[u8]) -> bool {
    fields.iter().any(|(field, _)| field.as_ref() == name)
}
