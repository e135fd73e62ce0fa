//! The AMQP message mapping and the `x-opt-deaths` frame patch: never panic; the patch
//! changes no byte but the element constructor of an array of maps in an annotation
//! section whole in a delivery's first frame, so a user's payload comes through as sent
//! however the message is split into frames and the frames into reads.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use ruststream_amqp::__fuzz::{decode, encode, read_patched};
use ruststream_core::{HeaderValue, Headers, Message};

/// Cuts the fuzzer's bytes into short pieces.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((first, rest)) => {
                self.0 = rest;
                *first
            }
            None => 0,
        }
    }

    fn chunk(&mut self, max: usize) -> &'a [u8] {
        let len = (usize::from(self.byte()) % max).min(self.0.len());
        let (chunk, rest) = self.0.split_at(len);
        self.0 = rest;
        chunk
    }
}

fuzz_target!(|data: &[u8]| {
    // Any bytes as a message and as a stream of frames: no panic, no change of length.
    if let Some(d) = decode(data) {
        let _ = (d.payload.len(), d.headers.len(), d.delivery_count, d.defect);
    }
    let read = read_patched(data.chunks(7).collect());
    assert_eq!(read.len(), data.len());

    split_messages(data);
});

/// One delivery's bytes and where its patch may land.
struct Delivery {
    channel: u16,
    bytes: Vec<u8>,
    /// The constructor byte of the `x-opt-deaths` array and the end of its section.
    ctor: Option<(usize, usize)>,
    payload: Bytes,
}

fn delivery(input: &mut Input<'_>) -> Delivery {
    let channel = u16::from(input.byte() % 3);
    let flags = input.byte();
    let mut payload = input.chunk(200).to_vec();
    if flags & 0x40 != 0 {
        // Long enough for a vbin32 data section.
        payload = payload.repeat(300 / payload.len().max(1) + 1);
    }
    let payload = Bytes::from(payload);
    let mut headers = Headers::new();
    for _ in 0..input.byte() % 3 {
        let name = String::from_utf8_lossy(input.chunk(12)).into_owned();
        headers.append(name, HeaderValue::from(input.chunk(24).to_vec()));
    }
    let mut bytes = Vec::new();
    if flags & 1 != 0 {
        bytes.extend_from_slice(&[0x00, 0x53, 0x70, 0x45]); // header, all defaults
    }
    let mut ctor = None;
    if flags & 2 != 0 {
        // RabbitMQ writes one map per queue and reason, never none (fe2o3 0.18 cannot
        // decode an empty array in an annotation, patched or not).
        let maps = 1 + usize::from(input.byte() % 4);
        let (section, at) = deaths(maps, flags & 4 != 0);
        ctor = Some((bytes.len() + at, bytes.len() + section.len()));
        bytes.extend_from_slice(&section);
    }
    bytes.extend_from_slice(&encode(
        &Message {
            payload: payload.clone(),
            headers,
        },
        false,
    ));
    Delivery {
        channel,
        bytes,
        ctor,
        payload,
    }
}

/// A message-annotations section `{x-opt-deaths: [{count: n}, ...]}` as RabbitMQ writes
/// it (an array of maps), and the offset of the array's element constructor.
fn deaths(maps: usize, wide: bool) -> (Vec<u8>, usize) {
    let mut elements = Vec::new();
    for n in 0..maps {
        let mut items = vec![0xa3, 5];
        items.extend_from_slice(b"count");
        items.extend_from_slice(&[0x53, n as u8]);
        if wide {
            elements.extend_from_slice(&(items.len() as u32 + 4).to_be_bytes());
            elements.extend_from_slice(&2u32.to_be_bytes());
        } else {
            elements.extend_from_slice(&[items.len() as u8 + 1, 2]);
        }
        elements.extend_from_slice(&items);
    }
    let mut array = Vec::new();
    let ctor_at;
    if wide {
        array.push(0xf0);
        array.extend_from_slice(&(elements.len() as u32 + 5).to_be_bytes());
        array.extend_from_slice(&(maps as u32).to_be_bytes());
        ctor_at = array.len();
        array.push(0xd1);
    } else {
        array.extend_from_slice(&[0xe0, elements.len() as u8 + 2, maps as u8]);
        ctor_at = array.len();
        array.push(0xc1);
    }
    array.extend_from_slice(&elements);
    let mut entries = vec![0xa3, 12];
    entries.extend_from_slice(b"x-opt-deaths");
    let ctor_in_entries = entries.len() + ctor_at;
    entries.extend_from_slice(&array);
    let mut section = vec![0x00, 0x53, 0x72, 0xd1];
    section.extend_from_slice(&(entries.len() as u32 + 4).to_be_bytes());
    section.extend_from_slice(&2u32.to_be_bytes());
    let at = section.len() + ctor_in_entries;
    section.extend_from_slice(&entries);
    (section, at)
}

/// A transfer frame on `channel` carrying `part`.
fn transfer(channel: u16, id: u8, more: bool, part: &[u8]) -> Vec<u8> {
    let mut body = vec![0x00, 0x53, 0x14, 0xc0, 0x0b, 0x06];
    body.extend_from_slice(&[0x52, 0x00, 0x52, id, 0xa0, 0x01, id, 0x43, 0x42]);
    body.push(if more { 0x41 } else { 0x42 });
    let mut frame = ((body.len() + part.len() + 8) as u32)
        .to_be_bytes()
        .to_vec();
    frame.extend_from_slice(&[0x02, 0x00]);
    frame.extend_from_slice(&channel.to_be_bytes());
    frame.extend_from_slice(&body);
    frame.extend_from_slice(part);
    frame
}

/// Two deliveries split into frames, interleaved when on different channels, read in
/// chunks through the patch: every payload as sent, the patch only where expected.
fn split_messages(data: &[u8]) {
    let mut input = Input(data);
    let max = 1 + usize::from(input.byte() % 96);
    let deliveries = [delivery(&mut input), delivery(&mut input)];
    // (delivery, part start, part end, where the part starts in the wire)
    let mut frames: Vec<Vec<(usize, usize, usize)>> = Vec::new();
    for d in &deliveries {
        let mut parts = Vec::new();
        let mut at = 0;
        loop {
            let end = (at + max).min(d.bytes.len());
            parts.push((at, end, 0));
            at = end;
            if at >= d.bytes.len() {
                break;
            }
        }
        frames.push(parts);
    }
    let interleave = deliveries[0].channel != deliveries[1].channel && input.byte() & 1 != 0;
    let mut order = Vec::new();
    if interleave {
        let (mut a, mut b) = (0, 0);
        while a < frames[0].len() || b < frames[1].len() {
            if a < frames[0].len() {
                order.push((0, a));
                a += 1;
            }
            if b < frames[1].len() {
                order.push((1, b));
                b += 1;
            }
        }
    } else {
        order.extend((0..frames[0].len()).map(|i| (0, i)));
        order.extend((0..frames[1].len()).map(|i| (1, i)));
    }
    let mut wire = Vec::new();
    for &(d, i) in &order {
        let (start, end, _) = frames[d][i];
        let more = i + 1 < frames[d].len();
        let part = &deliveries[d].bytes[start..end];
        let frame = transfer(deliveries[d].channel, d as u8, more, part);
        frames[d][i].2 = wire.len() + frame.len() - part.len();
        wire.extend_from_slice(&frame);
    }
    let mut chunks = Vec::new();
    let mut rest = &wire[..];
    while !rest.is_empty() {
        let n = (1 + usize::from(input.byte()) * 8).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        chunks.push(chunk);
        rest = tail;
    }
    let read = read_patched(chunks);
    assert_eq!(read.len(), wire.len());

    for (d, delivery) in deliveries.iter().enumerate() {
        let mut got = Vec::new();
        for &(start, end, at) in &frames[d] {
            got.extend_from_slice(&read[at..at + end - start]);
        }
        let mut expected = delivery.bytes.clone();
        let first = frames[d][0].1;
        if let Some((ctor, section_end)) = delivery.ctor {
            if section_end <= first {
                expected[ctor] = if expected[ctor] == 0xc1 { 0xa0 } else { 0xb0 };
            }
        }
        assert_eq!(got, expected, "delivery {d} (first frame {first} bytes)");
        if delivery.ctor.is_none_or(|(_, end)| end <= first) {
            let decoded = decode(&got).expect("the patched message decodes");
            assert_eq!(decoded.payload, delivery.payload);
        }
    }
}
