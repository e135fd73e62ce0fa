//! The frame reader and the frame patch, on hand-made frames.

use super::*;

fn frame_with_annotations(annotations: &[u8]) -> Vec<u8> {
    let mut body = vec![0x00, 0x53, 0x14, 0x45]; // transfer, empty list
    body.extend_from_slice(&[0x00, 0x53, 0x70, 0x45]); // header
    body.extend_from_slice(&[0x00, 0x53, 0x72]);
    body.extend_from_slice(annotations);
    body.extend_from_slice(&[0x00, 0x53, 0x75, 0xa0, 0x02, b'h', b'i']); // data
    let mut frame = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn array_of_maps_becomes_array_of_binaries() {
    // map8 { sym "d": array8 [ map8 {}, map8 {} ] }
    let inner_map = [0x01, 0x00]; // size 1, count 0
    let mut array = vec![0xe0, 0, 2, 0xc1];
    array.extend_from_slice(&inner_map);
    array.extend_from_slice(&inner_map);
    array[1] = (array.len() - 2) as u8;
    let mut map = vec![0xc1, 0, 2, 0xa3, 1, b'd'];
    map.extend_from_slice(&array);
    map[1] = (map.len() - 2) as u8;
    let mut frame = frame_with_annotations(&map);
    let ctor = frame.iter().position(|b| *b == 0xe0).unwrap() + 3;
    assert_eq!(frame[ctor], 0xc1);
    FramePatcher::default().patch(&mut frame);
    assert_eq!(frame[ctor], 0xa0);
}

#[test]
fn fe2o3_fails_on_the_array_of_maps_and_reads_the_patched_one() {
    use fe2o3_amqp_types::messaging::MessageAnnotations;
    // map8 { sym "x-opt-deaths": array8 [ map8 { sym "count": ulong 1 } ] }
    let mut inner = vec![0x00, 0x02, 0xa3, 5];
    inner.extend_from_slice(b"count");
    inner.extend_from_slice(&[0x53, 0x01]);
    inner[0] = (inner.len() - 1) as u8; // map8 element: size, then count + items
    let mut array = vec![0xe0, 0, 1, 0xc1];
    array.extend_from_slice(&inner);
    array[1] = (array.len() - 2) as u8;
    let mut map = vec![0xc1, 0, 2, 0xa3, 12];
    map.extend_from_slice(b"x-opt-deaths");
    map.extend_from_slice(&array);
    map[1] = (map.len() - 2) as u8;
    let mut section = vec![0x00, 0x53, 0x72];
    section.extend_from_slice(&map);
    assert!(
        serde_amqp::from_slice::<MessageAnnotations>(&section).is_err(),
        "fe2o3 0.18 cannot decode an array of maps (the reason for the patch)"
    );
    let mut frame = frame_with_annotations(&map);
    FramePatcher::default().patch(&mut frame);
    let start = frame
        .windows(3)
        .position(|w| w == [0x00, 0x53, 0x72])
        .unwrap();
    let patched = &frame[start..start + section.len()];
    let decoded: MessageAnnotations = serde_amqp::from_slice(patched).unwrap();
    assert_eq!(decoded.0.len(), 1);
}

/// Reads `wire` through [`Patched`], `chunk` bytes at a time.
fn read_patched(wire: &[u8], chunk: usize) -> Vec<u8> {
    let chunks: Vec<&[u8]> = wire.chunks(chunk.max(1)).collect();
    let mut reader = Patched::new(Chunks(chunks));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(&mut reader).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) if read.filled().is_empty() => return out,
            Poll::Ready(Ok(())) => out.extend_from_slice(read.filled()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

struct Chunks<'a>(Vec<&'a [u8]>);

impl AsyncRead for Chunks<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.0.is_empty() {
            let chunk = self.0.remove(0);
            out.put_slice(chunk);
        }
        Poll::Ready(Ok(()))
    }
}

/// A transfer frame on channel 0: `more` set or not, then `payload`.
fn transfer(more: bool, payload: &[u8]) -> Vec<u8> {
    // list8 [handle 0, delivery-id 0, tag "", format 0, settled false, more]
    let mut body = vec![0x00, 0x53, 0x14, 0xc0, 0x08, 0x06, 0x43, 0x43];
    body.extend_from_slice(&[0xa0, 0x00, 0x43, 0x42, if more { 0x41 } else { 0x42 }]);
    body.extend_from_slice(payload);
    let mut frame = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn continuation_frames_are_payload_and_never_patched() {
    // The second half of a data section that spans two frames starts with bytes
    // that look like message annotations holding an array of maps.
    let lookalike = [
        0x00, 0x53, 0x72, 0xc1, 0x08, 0x02, 0xa3, 0x01, b'd', 0xe0, 0x02, 0x01, 0xc1,
    ];
    let mut message = vec![0x00, 0x53, 0x75, 0xa0, 0x10, b'a', b'b', b'c'];
    message.extend_from_slice(&lookalike);
    let (first, rest) = message.split_at(8);
    let mut wire = transfer(true, first);
    wire.extend_from_slice(&transfer(false, rest));
    // A frame of another delivery after it is patched as usual.
    let map = [
        0xc1, 0x0a, 0x02, 0xa3, 0x01, b'd', 0xe0, 0x04, 0x01, 0xc1, 0x01, 0x00,
    ];
    let mut next = vec![0x00, 0x53, 0x72];
    next.extend_from_slice(&map);
    let next = transfer(false, &next);
    wire.extend_from_slice(&next);
    for chunk in [1, 7, 4096] {
        let read = read_patched(&wire, chunk);
        let split = wire.len() - next.len();
        assert_eq!(read[..split], wire[..split], "chunk {chunk}");
        let ctor = split + next.len() - 3;
        assert_eq!(read[ctor], 0xa0, "chunk {chunk}");
    }
}

/// Reads `wire` through [`Patched`] in chunks of `chunk` until the end or an error.
fn read_until_error(wire: &[u8], chunk: usize) -> (Vec<u8>, Option<io::Error>) {
    let chunks: Vec<&[u8]> = wire.chunks(chunk.max(1)).collect();
    let mut reader = Patched::new(Chunks(chunks));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(&mut reader).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) if read.filled().is_empty() => return (out, None),
            Poll::Ready(Ok(())) => out.extend_from_slice(read.filled()),
            Poll::Ready(Err(e)) => return (out, Some(e)),
            Poll::Pending => panic!("pending"),
        }
    }
}

/// A data section whose vbin32 claims `claimed` bytes and holds `held`.
fn data_claiming(claimed: u32, held: usize) -> Vec<u8> {
    let mut m = vec![0x00, 0x53, 0x75, 0xb0];
    m.extend_from_slice(&claimed.to_be_bytes());
    m.extend(std::iter::repeat_n(b'x', held));
    m
}

/// fe2o3-amqp's decode of a message from several frames (its `IoReader`).
fn fe2o3_reads(message: &[u8]) -> bool {
    use fe2o3_amqp_types::messaging::message::__private::Deserializable;
    use fe2o3_amqp_types::messaging::{Body, Message};
    use serde::Deserialize;
    let reader = serde_amqp::read::IoReader::new(message);
    let mut de = serde_amqp::de::Deserializer::new(reader);
    Deserializable::<Message<Body<fe2o3_amqp_types::primitives::Value>>>::deserialize(&mut de)
        .is_ok()
}

#[test]
fn a_message_claiming_more_than_it_has_is_spoiled_before_fe2o3_reads_it() {
    let message = data_claiming(0xb1b1_b1b1, 20);
    let wire = transfer(false, &message);
    let (read, error) = read_until_error(&wire, 7);
    assert!(error.is_none());
    assert_eq!(read.len(), wire.len(), "nothing added or taken");
    let at = wire.len() - message.len();
    assert_eq!(read[at], SPOILED);
    assert_eq!(read[at + 1..], wire[at + 1..]);
    assert!(!fe2o3_reads(&read[at..]), "fe2o3 fails at the first byte");
    // The same message whole is read as sent.
    let good = data_claiming(20, 20);
    let wire = transfer(false, &good);
    assert_eq!(read_until_error(&wire, 7).0, wire);
    assert!(fe2o3_reads(&good));
}

#[test]
fn a_message_over_several_frames_is_held_until_whole_then_checked() {
    // Claims 4 GiB - 1 over three frames of 10 bytes; then a good message.
    let bad = data_claiming(u32::MAX, 22);
    let good = data_claiming(22, 22);
    for (message, spoiled) in [(&bad, true), (&good, false)] {
        let mut wire = Vec::new();
        let mut parts = message.chunks(10).peekable();
        while let Some(p) = parts.next() {
            wire.extend_from_slice(&transfer(parts.peek().is_some(), p));
        }
        let after = transfer(false, &data_claiming(1, 1));
        wire.extend_from_slice(&after);
        for chunk in [1, 5, 4096] {
            let (read, error) = read_until_error(&wire, chunk);
            assert!(error.is_none());
            assert_eq!(read.len(), wire.len());
            let first = 8 + 13; // frame header, transfer performative
            assert_eq!(read[first] == SPOILED, spoiled, "chunk {chunk}");
            assert_eq!(read[first + 1..], wire[first + 1..], "chunk {chunk}");
        }
    }
    assert!(!fe2o3_reads(&{
        let mut b = bad.clone();
        b[0] = SPOILED;
        b
    }));
}

#[test]
fn frames_of_a_held_message_wait_for_its_last_frame() {
    let message = data_claiming(22, 22);
    let first = transfer(true, &message[..10]);
    let mut reader = Patched::new(Waiting(Some(first)));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut buf = [0u8; 64];
    let mut read = ReadBuf::new(&mut buf);
    // The source has nothing more for now: the held frame does not come out.
    assert!(
        Pin::new(&mut reader)
            .poll_read(&mut cx, &mut read)
            .is_pending()
    );
    assert!(read.filled().is_empty());
    assert_eq!(reader.held.len(), 1);
}

/// Gives its bytes once, then waits forever.
struct Waiting(Option<Vec<u8>>);

impl AsyncRead for Waiting {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.0.take() {
            Some(bytes) => {
                out.put_slice(&bytes);
                Poll::Ready(Ok(()))
            }
            None => Poll::Pending,
        }
    }
}

#[test]
fn a_frame_whose_performative_claims_too_much_ends_the_connection() {
    let good = transfer(false, &data_claiming(1, 1));
    // An attach whose name is a str32 of 4 GiB - 1.
    let mut body = vec![
        0x00, 0x53, 0x12, 0xc0, 0x06, 0x01, 0xb1, 0xff, 0xff, 0xff, 0xff,
    ];
    body.push(b'n');
    let mut bad = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    bad.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
    bad.extend_from_slice(&body);
    let mut wire = good.clone();
    wire.extend_from_slice(&bad);
    wire.extend_from_slice(&good);
    let (read, error) = read_until_error(&wire, 3);
    assert_eq!(read, good, "the frames before it go out");
    assert_eq!(error.expect("an error").kind(), io::ErrorKind::InvalidData);
}

#[test]
fn other_frames_are_untouched() {
    let map = [0xc1, 0x05, 0x02, 0xa3, 0x01, b'd', 0x41];
    let frame = frame_with_annotations(&map);
    let mut patched = frame.clone();
    FramePatcher::default().patch(&mut patched);
    assert_eq!(frame, patched);
    // garbage must not panic
    let mut junk = vec![0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x14, 0xd0];
    FramePatcher::default().patch(&mut junk);
    let mut short = vec![0, 0, 0, 9, 1, 0, 0, 0, 0];
    FramePatcher::default().patch(&mut short);
}
