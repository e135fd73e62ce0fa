//! Internal decoders, exposed for the fuzz targets in `fuzz/` (`--cfg fuzzing`, which `cargo fuzz` sets).
//! Not public API.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use fe2o3_amqp_types::messaging::message::__private::{Deserializable, Serializable};
use fe2o3_amqp_types::messaging::{Body, Message as AmqpMessage};
use fe2o3_amqp_types::primitives::Value;
use ruststream_core::{Headers, Message};
use tokio::io::{AsyncRead, ReadBuf};

use crate::transport::Patched;

/// A received message as the adapter reads it.
#[derive(Debug)]
pub struct Decoded {
    /// The payload.
    pub payload: Bytes,
    /// The headers.
    pub headers: Headers,
    /// The header section's delivery-count.
    pub delivery_count: Option<u32>,
    /// Why the message is defective, if it is.
    pub defect: Option<String>,
}

/// Reads an encoded AMQP message (its sections) with fe2o3's deserializer and then as
/// the adapter does; `None` when fe2o3 cannot read it.
///
/// From a slice, not through the `IoReader` fe2o3's receiver uses: that reader fills a
/// buffer of a value's declared length (up to 4 GiB) before reading it, which the fuzzer
/// reports as out-of-memory at once (see `RELIABILITY.md`).
pub fn decode(bytes: &[u8]) -> Option<Decoded> {
    let Deserializable(message): Deserializable<AmqpMessage<Body<Value>>> =
        serde_amqp::from_slice(bytes).ok()?;
    let d = crate::message::decode(message);
    Some(Decoded {
        payload: d.payload,
        headers: d.headers,
        delivery_count: d.delivery_count,
        defect: d.defect,
    })
}

/// The sections the adapter sends for `message`.
pub fn encode(message: &Message, durable: bool) -> Vec<u8> {
    serde_amqp::to_vec(&Serializable(crate::message::encode(message, durable))).unwrap_or_default()
}

/// What the connection reads from `chunks` (as they arrive from the socket), after the
/// frame patch.
pub fn read_patched(chunks: Vec<&[u8]>) -> Vec<u8> {
    let mut reader = Patched::new(Chunks(chunks, 0));
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(&mut reader).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) if read.filled().is_empty() => return out,
            Poll::Ready(Ok(())) => out.extend_from_slice(read.filled()),
            Poll::Ready(Err(_)) | Poll::Pending => return out,
        }
    }
}

struct Chunks<'a>(Vec<&'a [u8]>, usize);

impl AsyncRead for Chunks<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let at = self.1;
        if let Some(chunk) = self.0.get(at) {
            let n = chunk.len().min(out.remaining());
            out.put_slice(&chunk[..n]);
            if n == chunk.len() {
                self.1 += 1;
            } else {
                let rest = &chunk[n..];
                self.0[at] = rest;
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The size check the transport runs on a message's bytes before fe2o3-amqp decodes
/// them: `Err` with the reason when a value claims more than there is.
pub fn check_sizes(bytes: &[u8]) -> Result<(), String> {
    crate::sizes::check(bytes).map_err(|e| e.to_string())
}
