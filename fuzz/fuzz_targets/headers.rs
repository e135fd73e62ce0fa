//! Headers and the retry count: never panic; a retry count is the number its header
//! holds (digits only, fitting a `u32`), or 0 when the header is absent or not such a
//! number, never another number.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ruststream_core::__fuzz::parse_u32;
use ruststream_core::{HeaderName, HeaderValue, Headers, RETRY_COUNT};

/// The reference: ASCII digits only, any number of them, the value fitting a `u32`.
fn reference(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse::<u32>().ok()
}

fuzz_target!(|data: &[u8]| {
    assert_eq!(parse_u32(data), reference(data), "parse_u32({data:?})");

    // Operations on headers driven by the input; the retry count always follows the
    // first value of its header.
    let mut headers = Headers::new();
    let mut model: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let len = usize::from(*len % 16).min(tail.len());
        let (value, tail) = tail.split_at(len);
        rest = tail;
        let name = match op % 3 {
            0 => RETRY_COUNT.to_owned(),
            1 => String::from_utf8_lossy(&value[..len.min(2)]).into_owned(),
            _ => "x".to_owned(),
        };
        match (op >> 2) % 4 {
            0 => {
                headers.insert(
                    HeaderName::from(name.clone()),
                    HeaderValue::from(value.to_vec()),
                );
                model.retain(|(n, _)| *n != name);
                model.push((name, value.to_vec()));
            }
            1 => {
                headers.append(name.clone(), HeaderValue::from(value.to_vec()));
                model.push((name, value.to_vec()));
            }
            2 => {
                headers.remove(&name);
                model.retain(|(n, _)| *n != name);
            }
            _ => {
                let copy = headers.clone();
                assert_eq!(copy, headers);
            }
        }
        let first = model
            .iter()
            .find(|(n, _)| n == RETRY_COUNT)
            .map(|(_, v)| v.as_slice());
        let expected = first.and_then(reference).unwrap_or(0);
        assert_eq!(headers.retry_count(), expected, "retry count of {first:?}");
        assert_eq!(headers.len(), model.len());
        let got: Vec<(String, Vec<u8>)> = headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, model);
    }
});
