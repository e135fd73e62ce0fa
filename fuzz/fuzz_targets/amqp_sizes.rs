//! The size check before fe2o3-amqp decodes a message: it never panics; what it lets
//! through, fe2o3-amqp's `IoReader` (the reader of messages split over frames, which
//! allocates a value's declared length) decodes or refuses within libFuzzer's
//! `-malloc_limit_mb` (run with `-malloc_limit_mb=64`: a larger allocation is reported as
//! a crash). The same bytes sent as a transfer frame through the transport come out the
//! same length, their first message byte made 0xff when the check refuses them and
//! unchanged otherwise, and no other byte changed but an array-of-maps constructor the
//! annotations patch makes a binary's (`0xc1` to `0xa0`, `0xd1` to `0xb0`).

#![no_main]

use fe2o3_amqp_types::messaging::message::__private::Deserializable;
use fe2o3_amqp_types::messaging::{Body, Message};
use fe2o3_amqp_types::primitives::Value;
use libfuzzer_sys::fuzz_target;
use ruststream_amqp::__fuzz::{check_sizes, read_patched};

fuzz_target!(|data: &[u8]| {
    let checked = check_sizes(data);
    if checked.is_ok() {
        let reader = serde_amqp::read::IoReader::new(data);
        let mut de = serde_amqp::de::Deserializer::new(reader);
        let _ = <Deserializable<Message<Body<Value>>> as serde::Deserialize>::deserialize(&mut de);
    }
    // As a single-frame transfer on channel 0.
    let mut body = vec![0x00, 0x53, 0x14, 0xc0, 0x08, 0x06, 0x43, 0x43];
    body.extend_from_slice(&[0xa0, 0x00, 0x43, 0x42, 0x42]);
    let at = 8 + body.len();
    body.extend_from_slice(data);
    let mut frame = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
    frame.extend_from_slice(&body);
    let read = read_patched(frame.chunks(7).collect());
    assert_eq!(read.len(), frame.len());
    if !data.is_empty() {
        // Past the first byte, the only change is the annotations patch: the element
        // constructor of an array of maps made the binary of the same extent.
        for (got, sent) in read[at + 1..].iter().zip(&frame[at + 1..]) {
            assert!(
                got == sent || matches!((sent, got), (0xc1, 0xa0) | (0xd1, 0xb0)),
                "byte {sent:#04x} became {got:#04x}"
            );
        }
        // A refused message starts with 0xff (no format code) after the transport; one
        // let through is unchanged (an input may start with 0xff already).
        if checked.is_err() {
            assert_eq!(read[at], 0xff);
        } else {
            assert_eq!(read[at], frame[at]);
        }
    }
});
