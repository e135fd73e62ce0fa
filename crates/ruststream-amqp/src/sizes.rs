//! A check of AMQP 1.0 encoded bytes before fe2o3-amqp decodes them: every value's
//! declared size fits in the bytes that hold it.
//!
//! serde_amqp 0.18 allocates a value's *declared* length before it reads the value: a
//! `str32`, `vbin32`, `sym32`, `list32`, `map32` or `array32` whose length field says up to
//! 4 GiB makes its `IoReader` (the one fe2o3-amqp decodes a message split over several
//! transfer frames with, and every frame's performative) grow a buffer of zeros to that
//! length, and its `SliceReader` ask the allocator for it. A message of a few dozen bytes
//! could cost gigabytes. [`check`] walks the encoding without allocating and refuses:
//!
//! * a value whose declared size runs past the end of what holds it (the message, or the
//!   list, map or array it is in);
//! * a list, map or array that declares more elements than it has bytes (each element
//!   takes at least one byte, except in an array of a zero-width type, which is refused
//!   when it claims more elements than its size in bytes);
//! * a list, map or array whose elements end before its declared size does: serde_amqp
//!   reads its elements and goes on *after the last one*, so the bytes left in the size
//!   would be decoded as the values that follow, unchecked (an empty array is its count
//!   alone: serde_amqp reads no element constructor for it);
//! * nesting deeper than [`MAX_DEPTH`] (serde_amqp recurses once per level);
//! * a byte that is no AMQP format code.
//!
//! Whatever it refuses, serde_amqp could not have decoded either: the check only makes
//! the failure cheap.

use thiserror::Error;

/// The deepest nesting of lists, maps, arrays and described values accepted.
pub(crate) const MAX_DEPTH: usize = 64;

/// Why encoded bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub(crate) enum Bad {
    /// A value's declared size runs past the bytes that hold it.
    #[error("a value at byte {0} declares more bytes than there are")]
    Overrun(usize),
    /// A list, map or array declares more elements than it has bytes.
    #[error("a value at byte {0} declares more elements than it has bytes")]
    Count(usize),
    /// A list, map or array holds bytes past its last element.
    #[error("a value at byte {0} holds bytes past its last element")]
    Trailing(usize),
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("values nested deeper than {MAX_DEPTH} at byte {0}")]
    Depth(usize),
    /// No AMQP format code.
    #[error("no amqp format code at byte {0}")]
    Code(usize),
}

/// Checks a sequence of encoded values filling `bytes` (a message's sections).
pub(crate) fn check(bytes: &[u8]) -> Result<(), Bad> {
    let mut pos = 0;
    while pos < bytes.len() {
        pos = value(bytes, pos, bytes.len(), 0)?;
    }
    Ok(())
}

/// Checks the one encoded value at the start of `bytes` (a performative), returning where
/// it ends.
pub(crate) fn check_one(bytes: &[u8]) -> Result<usize, Bad> {
    value(bytes, 0, bytes.len(), 0)
}

/// The end of the value (constructor included) at `pos`, which must end by `end`.
fn value(b: &[u8], pos: usize, end: usize, depth: usize) -> Result<usize, Bad> {
    let code = byte(b, pos, end)?;
    if code != 0x00 {
        return body(b, code, pos, pos + 1, end, depth);
    }
    if depth >= MAX_DEPTH {
        return Err(Bad::Depth(pos));
    }
    let after_descriptor = value(b, pos + 1, end, depth + 1)?;
    value(b, after_descriptor, end, depth + 1)
}

/// The end of the value of type `code` (constructed at `at`) whose bytes start at `pos`.
fn body(b: &[u8], code: u8, at: usize, pos: usize, end: usize, depth: usize) -> Result<usize, Bad> {
    let fixed = |width: usize| {
        let next = pos + width;
        if next <= end {
            Ok(next)
        } else {
            Err(Bad::Overrun(at))
        }
    };
    match code {
        0x40..=0x45 => Ok(pos),
        0x50..=0x56 => fixed(1),
        0x60 | 0x61 => fixed(2),
        0x70..=0x74 => fixed(4),
        0x80..=0x84 => fixed(8),
        0x94 | 0x98 => fixed(16),
        0xa0 | 0xa1 | 0xa3 => sized(at, pos + 1, usize::from(byte(b, pos, end)?), end),
        0xb0 | 0xb1 | 0xb3 => sized(at, pos + 4, u32_at(b, pos, end)?, end),
        0xc0 | 0xc1 | 0xd0 | 0xd1 | 0xe0 | 0xf0 => {
            if depth >= MAX_DEPTH {
                return Err(Bad::Depth(at));
            }
            let wide = code >= 0xd0 && code != 0xe0;
            let (size, start) = if wide {
                (u32_at(b, pos, end)?, pos + 4)
            } else {
                (usize::from(byte(b, pos, end)?), pos + 1)
            };
            let inner_end = sized(at, start, size, end)?;
            let (count, first) = if wide {
                (u32_at(b, start, inner_end)?, start + 4)
            } else {
                (usize::from(byte(b, start, inner_end)?), start + 1)
            };
            let last = if matches!(code, 0xe0 | 0xf0) {
                array(b, at, first, count, inner_end, depth + 1)?
            } else {
                if count > inner_end - first {
                    return Err(Bad::Count(at));
                }
                let mut p = first;
                for _ in 0..count {
                    p = value(b, p, inner_end, depth + 1)?;
                }
                p
            };
            if last != inner_end {
                return Err(Bad::Trailing(at));
            }
            Ok(inner_end)
        }
        _ => Err(Bad::Code(at)),
    }
}

/// The elements of an array: one constructor (maybe described), then `count` bodies;
/// where they end. An empty array has no constructor.
fn array(
    b: &[u8],
    at: usize,
    pos: usize,
    count: usize,
    end: usize,
    depth: usize,
) -> Result<usize, Bad> {
    if count == 0 {
        return Ok(pos);
    }
    let mut p = pos;
    let mut code = byte(b, p, end)?;
    if code == 0x00 {
        p = value(b, p + 1, end, depth + 1)?;
        code = byte(b, p, end)?;
        if code == 0x00 {
            return Err(Bad::Code(p));
        }
    }
    p += 1;
    // Every element takes a byte or more, except those of a zero-width type, of which an
    // array may not claim more than its size in bytes either.
    if count > end - pos {
        return Err(Bad::Count(at));
    }
    for _ in 0..count {
        p = body(b, code, at, p, end, depth)?;
    }
    Ok(p)
}

/// `pos + size` when it is within `end`.
fn sized(at: usize, pos: usize, size: usize, end: usize) -> Result<usize, Bad> {
    match pos.checked_add(size) {
        Some(next) if next <= end => Ok(next),
        _ => Err(Bad::Overrun(at)),
    }
}

fn byte(b: &[u8], pos: usize, end: usize) -> Result<u8, Bad> {
    if pos < end {
        b.get(pos).copied().ok_or(Bad::Overrun(pos))
    } else {
        Err(Bad::Overrun(pos))
    }
}

fn u32_at(b: &[u8], pos: usize, end: usize) -> Result<usize, Bad> {
    match b.get(pos..pos + 4) {
        Some(s) if pos + 4 <= end => Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize),
        _ => Err(Bad::Overrun(pos)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp_types::messaging::message::__private::{Deserializable, Serializable};
    use fe2o3_amqp_types::messaging::{
        AmqpSequence, AmqpValue, ApplicationProperties, Body, Data, Message, Properties,
    };
    use fe2o3_amqp_types::primitives::{Binary, OrderedMap, SimpleValue, Value};

    fn encoded<T: serde::Serialize>(message: Message<T>) -> Vec<u8>
    where
        Serializable<Message<T>>: serde::Serialize,
    {
        serde_amqp::to_vec(&Serializable(message)).expect("encodes")
    }

    fn message<T>(body: T) -> Message<T> {
        Message {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: None,
            body,
            footer: None,
        }
    }

    #[test]
    fn what_fe2o3_writes_passes() {
        let mut app = OrderedMap::new();
        app.insert("a".to_owned(), SimpleValue::String("x".repeat(300)));
        app.insert("n".to_owned(), SimpleValue::Long(-5));
        let mut m = message(Data(Binary::from(vec![7u8; 70_000])));
        m.application_properties = Some(ApplicationProperties(app));
        m.properties = Some(Properties {
            message_id: Some("id-1".to_owned().into()),
            ..Properties::default()
        });
        assert_eq!(check(&encoded(m)), Ok(()));
        let nested = Value::List(vec![
            Value::Map(OrderedMap::from_iter([(
                Value::Symbol("k".into()),
                Value::Array(vec![Value::Int(1), Value::Int(2)].into()),
            )])),
            Value::Null,
        ]);
        assert_eq!(check(&encoded(message(AmqpValue(nested.clone())))), Ok(()));
        assert_eq!(check(&encoded(message(AmqpSequence(vec![nested])))), Ok(()));
        assert_eq!(check(&[]), Ok(()));
    }

    #[test]
    fn a_declared_length_past_the_end_is_refused() {
        // data section, vbin32 claiming 0xb1b1b1b1 bytes, three there.
        let bytes = [0x00, 0x53, 0x75, 0xb0, 0xb1, 0xb1, 0xb1, 0xb1, 1, 2, 3];
        assert_eq!(check(&bytes), Err(Bad::Overrun(3)));
        // str8 one byte too long, inside a list8 whose size is right.
        let bytes = [0xc0, 0x04, 0x01, 0xa1, 0x02, b'a'];
        assert_eq!(check(&bytes), Err(Bad::Overrun(3)));
        // a list8 whose size runs past the end.
        assert_eq!(check(&[0xc0, 0x09, 0x00]), Err(Bad::Overrun(0)));
        // a map32 whose size is 4 GiB.
        let bytes = [0xd1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert_eq!(check(&bytes), Err(Bad::Overrun(0)));
        // truncated length fields.
        assert_eq!(check(&[0xb1, 0x00]), Err(Bad::Overrun(1)));
        assert_eq!(check(&[0x70, 0x00]), Err(Bad::Overrun(0)));
    }

    #[test]
    fn a_value_running_past_its_list_is_refused_even_inside_the_message() {
        // list8 of size 3 holding a str8 of 5 bytes, then padding that would hold it.
        let bytes = [0xc0, 0x03, 0x01, 0xa1, 0x05, b'a', b'b', b'c', b'd', b'e'];
        assert_eq!(check(&bytes), Err(Bad::Overrun(3)));
    }

    #[test]
    fn element_counts_beyond_the_bytes_are_refused() {
        // list32 of size 4 claiming 4 billion elements.
        let bytes = [0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(check(&bytes), Err(Bad::Count(0)));
        // array8 of nulls (zero-width) claiming 200 of them in 2 bytes.
        let bytes = [0xe0, 0x02, 200, 0x40];
        assert_eq!(check(&bytes), Err(Bad::Count(0)));
        // an array8 of two ints is fine.
        let bytes = [0xe0, 0x0a, 0x02, 0x71, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(check(&bytes), Ok(()));
    }

    /// Found by the `amqp_sizes` fuzz target: an amqp-sequence holding an empty array8
    /// whose size says 35 bytes. serde_amqp reads the count (0) and goes on after it, so
    /// the other 33 bytes were decoded as values the check had skipped; one of them
    /// made serde_amqp's `IoReader` zero 2 GiB.
    #[test]
    fn bytes_past_the_last_element_are_refused() {
        let mut bytes = vec![0x00, 0x53, 0x76, 0xe0, 0x23, 0x00, 0xb3, 0x81, 0xff, 0x81];
        bytes.extend_from_slice(&[0xff; 8]);
        bytes.extend_from_slice(&[0xf8, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&[0x08, 0x23, 0x00, 0x00, 0x7b]);
        assert_eq!(bytes.len(), 40);
        assert_eq!(check(&bytes), Err(Bad::Trailing(3)));
        // An empty array is its count alone; with a constructor it is refused too.
        assert_eq!(check(&[0xe0, 0x01, 0x00]), Ok(()));
        assert_eq!(check(&[0xe0, 0x02, 0x00, 0x40]), Err(Bad::Trailing(0)));
        // A list8 of one null whose size leaves a byte over.
        assert_eq!(
            check(&[0xc0, 0x03, 0x01, 0x40, 0x40]),
            Err(Bad::Trailing(0))
        );
        // An array8 of one int with a byte over.
        let bytes = [0xe0, 0x07, 0x01, 0x71, 0, 0, 0, 1, 0];
        assert_eq!(check(&bytes), Err(Bad::Trailing(0)));
    }

    #[test]
    fn deep_nesting_and_unknown_codes_are_refused() {
        let mut bytes = Vec::new();
        for _ in 0..=MAX_DEPTH {
            bytes.extend_from_slice(&[0x00, 0x53, 0x01]);
        }
        bytes.push(0x40);
        assert!(matches!(check(&bytes), Err(Bad::Depth(_))));
        assert_eq!(check(&[0xff]), Err(Bad::Code(0)));
    }

    #[test]
    fn what_is_refused_fe2o3_cannot_decode_either() {
        let mut app = OrderedMap::new();
        app.insert("k".to_owned(), SimpleValue::String("value".into()));
        let mut m = message(Data(Binary::from(b"payload".to_vec())));
        m.application_properties = Some(ApplicationProperties(app));
        let good = encoded(m);
        for cut in 1..good.len() {
            let bytes = &good[..cut];
            let decoded =
                serde_amqp::from_slice::<Deserializable<Message<Body<Value>>>>(bytes).is_ok();
            if check(bytes).is_err() {
                assert!(!decoded, "refused a message fe2o3 reads: {bytes:02x?}");
            }
        }
    }

    #[test]
    fn one_value_reports_its_end() {
        assert_eq!(check_one(&[0x00, 0x53, 0x14, 0x45, 0xff]), Ok(4));
        assert!(check_one(&[0x00, 0x53, 0x14, 0xc0, 0x20]).is_err());
    }
}
