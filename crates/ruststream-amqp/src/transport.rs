//! The TCP stream under a connection: `TCP_NODELAY` set, and a frame reader that makes
//! dead-lettered messages decodable.
//!
//! fe2o3-amqp 0.18 does not set `TCP_NODELAY` (publishing then stalls ~45 ms per
//! batch), so the crate opens the socket itself. fe2o3-amqp 0.18 also fails to decode an
//! annotation whose value is an *array of maps*, which is how RabbitMQ writes
//! `x-opt-deaths` on dead-lettered messages: the whole delivery fails with
//! `InvalidValue` and its content is lost to the application. [`Patched`] reads whole
//! frames and, in the annotation sections of a transfer, rewrites the element
//! constructor of such an array from `map8`/`map32` to `vbin8`/`vbin32`. The two
//! encodings have the same layout (a size, then that many bytes), so one byte changes
//! and nothing moves: the annotation decodes as an array of binaries, the rest of the
//! message as sent.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::error::ConnectError;
use crate::pair::{Pair, rename_attach};

/// Frames larger than this are passed through without looking at them.
const MAX_PATCHED_FRAME: usize = 64 << 20;
const READ_CHUNK: usize = 64 << 10;

/// Opens a TCP connection with `TCP_NODELAY` set.
pub(crate) async fn connect_tcp(host: &str, port: u16) -> Result<TcpStream, ConnectError> {
    let addr = format!("{host}:{port}");
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|source| ConnectError::Tcp {
            addr: addr.clone(),
            source,
        })?;
    stream
        .set_nodelay(true)
        .map_err(|source| ConnectError::Tcp { addr, source })?;
    Ok(stream)
}

/// A stream whose reads come out whole-frame, with arrays of maps in message
/// annotations turned into arrays of binaries.
#[derive(Debug)]
pub(crate) struct Patched<S> {
    inner: S,
    buf: BytesMut,
    /// Bytes at the front of `buf` that are checked and may be handed out.
    ready: usize,
    /// Something did not look like AMQP framing: pass everything through.
    passthrough: bool,
    scratch: Box<[u8]>,
    /// A management link pair whose two links get one name on the wire.
    pair: Option<Box<Pair>>,
}

impl<S> Patched<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(READ_CHUNK),
            ready: 0,
            passthrough: false,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
            pair: None,
        }
    }

    /// A stream for a management connection: `pair` is renamed on the wire.
    pub(crate) fn paired(inner: S, pair: Pair) -> Self {
        let mut s = Self::new(inner);
        s.pair = Some(Box::new(pair));
        s
    }

    /// Marks every complete frame (or protocol header) in the buffer ready, patching it.
    fn scan(&mut self) {
        loop {
            let rest = &self.buf[self.ready..];
            if self.passthrough {
                self.ready = self.buf.len();
                return;
            }
            if rest.len() < 8 {
                return;
            }
            if rest.starts_with(b"AMQP") {
                self.ready += 8;
                continue;
            }
            let size = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if !(8..=MAX_PATCHED_FRAME).contains(&size) {
                self.passthrough = true;
                continue;
            }
            if rest.len() < size {
                return;
            }
            let start = self.ready;
            let frame = &mut self.buf[start..start + size];
            patch_frame(frame);
            if let Some(pair) = &self.pair {
                // The broker's attach of the receiving link (role sender).
                rename_attach(frame, &pair.sending, &pair.receiving, false);
            }
            self.ready += size;
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Patched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.ready > 0 {
                let n = this.ready.min(out.remaining());
                out.put_slice(&this.buf[..n]);
                this.buf.advance(n);
                this.ready -= n;
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let filled = read.filled();
            if filled.is_empty() {
                // End of stream: hand out whatever partial frame is left, then EOF.
                if this.buf.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.ready = this.buf.len();
                continue;
            }
            this.buf.extend_from_slice(filled);
            this.scan();
        }
    }
}

impl<S: AsyncWrite + Unpin> Patched<S> {
    /// Writes the checked bytes of the pair's buffer through.
    fn drain_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(pair) = self.pair.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while pair.out_ready > 0 {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &pair.out[..pair.out_ready]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            pair.out.advance(n);
            pair.out_ready -= n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Patched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(pair) = this.pair.as_mut() else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        // A management connection: frames are checked whole before they go out.
        pair.out.extend_from_slice(buf);
        pair.scan_out();
        match this.drain_out(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(buf.len())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain_out(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pair.is_some() {
            let buf = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &**b);
            return Pin::new(this).poll_write(cx, buf);
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.pair.is_none() && self.inner.is_write_vectored()
    }
}

const TRANSFER: u64 = 0x14;
const DELIVERY_ANNOTATIONS: u64 = 0x71;
const MESSAGE_ANNOTATIONS: u64 = 0x72;

/// Patches one whole AMQP frame in place. Anything unexpected leaves it as it is.
pub(crate) fn patch_frame(frame: &mut [u8]) {
    let _ = try_patch_frame(frame);
}

fn try_patch_frame(frame: &mut [u8]) -> Option<()> {
    let doff = usize::from(*frame.get(4)?) * 4;
    if *frame.get(5)? != 0 || doff < 8 {
        return None; // not an AMQP frame (SASL), or malformed
    }
    let mut pos = doff;
    if descriptor(frame, &mut pos)? != TRANSFER {
        return None;
    }
    pos = skip_value(frame, pos)?; // the transfer performative's fields
    // Message sections, in order: header, delivery-annotations, message-annotations, ...
    while pos < frame.len() {
        let code = descriptor(frame, &mut pos)?;
        match code {
            0x70 => pos = skip_value(frame, pos)?,
            DELIVERY_ANNOTATIONS | MESSAGE_ANNOTATIONS => {
                patch_annotations(frame, pos)?;
                pos = skip_value(frame, pos)?;
            }
            _ => return Some(()), // the bare message: nothing to patch
        }
    }
    Some(())
}

/// Reads a section or performative descriptor (`0x00` then a ulong) at `pos`.
pub(crate) fn descriptor(frame: &[u8], pos: &mut usize) -> Option<u64> {
    if *frame.get(*pos)? != 0x00 {
        return None;
    }
    let code = match *frame.get(*pos + 1)? {
        0x53 => {
            let v = u64::from(*frame.get(*pos + 2)?);
            *pos += 3;
            v
        }
        0x80 => {
            let b = frame.get(*pos + 2..*pos + 10)?;
            *pos += 10;
            u64::from_be_bytes(b.try_into().ok()?)
        }
        0x44 => {
            *pos += 2;
            0
        }
        _ => return None,
    };
    Some(code)
}

/// Patches the top-level values of the annotation map at `pos`.
fn patch_annotations(frame: &mut [u8], pos: usize) -> Option<()> {
    let (count, mut p, end) = match *frame.get(pos)? {
        0xc1 => {
            let size = usize::from(*frame.get(pos + 1)?);
            (usize::from(*frame.get(pos + 2)?), pos + 3, pos + 2 + size)
        }
        0xd1 => {
            let size = be_u32(frame, pos + 1)?;
            (be_u32(frame, pos + 5)?, pos + 9, pos + 5 + size)
        }
        _ => return None,
    };
    if end > frame.len() {
        return None;
    }
    for i in 0..count {
        if i % 2 == 1 {
            patch_array_of_maps(frame, p);
        }
        p = skip_value(frame, p)?;
        if p > end {
            return None;
        }
    }
    Some(())
}

/// An array of maps at `pos` becomes an array of binaries (same bytes).
fn patch_array_of_maps(frame: &mut [u8], pos: usize) {
    let ctor = match frame.get(pos) {
        Some(0xe0) => pos + 3,
        Some(0xf0) => pos + 9,
        _ => return,
    };
    if let Some(c) = frame.get_mut(ctor) {
        match *c {
            0xc1 => *c = 0xa0,
            0xd1 => *c = 0xb0,
            _ => {}
        }
    }
}

pub(crate) fn be_u32(frame: &[u8], pos: usize) -> Option<usize> {
    let b = frame.get(pos..pos + 4)?;
    Some(u32::from_be_bytes(b.try_into().ok()?) as usize)
}

/// The position just after the encoded value at `pos`.
pub(crate) fn skip_value(frame: &[u8], pos: usize) -> Option<usize> {
    let code = *frame.get(pos)?;
    let next = match code {
        0x00 => {
            // described: descriptor value, then the value
            let after_descriptor = skip_value(frame, pos + 1)?;
            return skip_value(frame, after_descriptor);
        }
        0x40..=0x45 => pos + 1,
        0x50..=0x56 => pos + 2,
        0x60 | 0x61 => pos + 3,
        0x70..=0x74 => pos + 5,
        0x80..=0x84 => pos + 9,
        0x94 | 0x98 => pos + 17,
        0xa0 | 0xa1 | 0xa3 | 0xc0 | 0xc1 | 0xe0 => pos + 2 + usize::from(*frame.get(pos + 1)?),
        0xb0 | 0xb1 | 0xb3 | 0xd0 | 0xd1 | 0xf0 => pos + 5 + be_u32(frame, pos + 1)?,
        _ => return None,
    };
    (next <= frame.len()).then_some(next)
}

#[cfg(test)]
mod tests {
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
        patch_frame(&mut frame);
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
        patch_frame(&mut frame);
        let start = frame
            .windows(3)
            .position(|w| w == [0x00, 0x53, 0x72])
            .unwrap();
        let patched = &frame[start..start + section.len()];
        let decoded: MessageAnnotations = serde_amqp::from_slice(patched).unwrap();
        assert_eq!(decoded.0.len(), 1);
    }

    #[test]
    fn other_frames_are_untouched() {
        let map = [0xc1, 0x05, 0x02, 0xa3, 0x01, b'd', 0x41];
        let frame = frame_with_annotations(&map);
        let mut patched = frame.clone();
        patch_frame(&mut patched);
        assert_eq!(frame, patched);
        // garbage must not panic
        let mut junk = vec![0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x14, 0xd0];
        patch_frame(&mut junk);
        let mut short = vec![0, 0, 0, 9, 1, 0, 0, 0, 0];
        patch_frame(&mut short);
    }
}
