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
//! message as sent. Only the first transfer frame of a delivery is looked at: the frames
//! that continue a message split over several (`more` set on the one before, per
//! channel) are payload bytes, never read as sections.
//!
//! It also keeps serde_amqp from allocating what a value only claims (see
//! [`crate::sizes`]): every frame's performative is checked before fe2o3-amqp decodes
//! it (a frame that fails ends the connection with an error), and so is every message.
//! A message split over several transfer frames is held back, with every frame after
//! it, until its last frame is here (fe2o3-amqp decodes it only then), up to
//! [`HOLD_BYTES`] and [`HOLD_FRAMES`]. A message that fails the check has its first
//! byte made an invalid format code, so fe2o3-amqp's decoder stops there at once: the
//! delivery reaches the subscription as undecodable, and the decode-failure policy
//! settles it.

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
/// A message split over frames is checked whole up to this many bytes; a larger one
/// passes unchecked (its claims then cost at most 4 GiB / `HOLD_BYTES` times its size).
pub(crate) const HOLD_BYTES: usize = 256 << 20;
/// … and this many frames (fe2o3-amqp's session window is 5,000 frames: a broker must
/// never wait on a window the held frames keep from being renewed).
pub(crate) const HOLD_FRAMES: usize = 2_000;
/// What a message that fails the check starts with: no AMQP format code.
const SPOILED: u8 = 0xff;

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
    /// Bytes at the front of `buf` read as whole frames (`ready` or more).
    scanned: usize,
    /// Messages split over frames whose last frame has not come yet.
    held: Vec<Held>,
    /// A frame whose performative fails the size check: the connection ends.
    failed: Option<crate::sizes::Bad>,
    /// Something did not look like AMQP framing: pass everything through.
    passthrough: bool,
    scratch: Box<[u8]>,
    patcher: FramePatcher,
    /// A management link pair whose two links get one name on the wire.
    pair: Option<Box<Pair>>,
}

impl<S> Patched<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(READ_CHUNK),
            ready: 0,
            scanned: 0,
            held: Vec::new(),
            failed: None,
            passthrough: false,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
            patcher: FramePatcher::default(),
            pair: None,
        }
    }

    /// A stream for a management connection: `pair` is renamed on the wire.
    pub(crate) fn paired(inner: S, pair: Pair) -> Self {
        let mut s = Self::new(inner);
        s.pair = Some(Box::new(pair));
        s
    }

    /// Marks every complete frame (or protocol header) in the buffer ready, patching and
    /// checking it; frames from the first of a message still coming stay held.
    fn scan(&mut self) {
        loop {
            if self.passthrough || self.failed.is_some() {
                self.held.clear();
                self.scanned = self.buf.len();
                self.ready = self.scanned;
                return;
            }
            let rest = &self.buf[self.scanned..];
            if rest.len() < 8 {
                return;
            }
            if rest.starts_with(b"AMQP") {
                self.scanned += 8;
                self.ready = self.release_point();
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
            let start = self.scanned;
            let frame = &mut self.buf[start..start + size];
            if let Err(bad) = check_performative(frame) {
                tracing::warn!(%bad, "amqp frame refused: the connection ends");
                self.failed = Some(bad);
                // The frames before it still go out; this one and the rest do not.
                self.buf.truncate(start);
                self.held.clear();
                self.ready = start;
                self.scanned = start;
                return;
            }
            let part = self.patcher.patch(frame);
            if let Some(pair) = &self.pair {
                // The broker's attach of the receiving link (role sender).
                rename_attach(frame, &pair.sending, &pair.receiving, false);
            }
            self.scanned += size;
            if let Some(part) = part {
                self.on_transfer(part, start + part.sections..start + size, start);
            }
            self.ready = self.release_point();
        }
    }

    /// Where the bytes that may go out end: at the first frame of the first held message.
    fn release_point(&self) -> usize {
        self.held
            .iter()
            .map(|h| h.frame)
            .min()
            .unwrap_or(self.scanned)
    }

    /// Checks a transfer's message bytes (`message`, in the frame at `frame`) or holds
    /// them until its message is whole.
    fn on_transfer(&mut self, part: Part, message: std::ops::Range<usize>, frame: usize) {
        let held = self.held.iter().position(|h| h.channel == part.channel);
        let Some(i) = held else {
            if !part.first {
                return; // a message already let through unchecked
            }
            if part.more {
                self.held.push(Held {
                    channel: part.channel,
                    frame,
                    parts: vec![message.clone()],
                    bytes: message.len(),
                });
            } else if let Err(bad) = crate::sizes::check(&self.buf[message.clone()]) {
                spoil(&mut self.buf, &[message], part.channel, bad);
            }
            return;
        };
        let h = &mut self.held[i];
        h.bytes += message.len();
        h.parts.push(message);
        if part.more {
            if h.bytes > HOLD_BYTES || h.parts.len() > HOLD_FRAMES {
                tracing::debug!(
                    channel = part.channel,
                    bytes = h.bytes,
                    "amqp message too large to hold: its sizes pass unchecked"
                );
                self.held.swap_remove(i);
            }
            return;
        }
        let h = self.held.swap_remove(i);
        let mut whole = Vec::with_capacity(h.bytes);
        for p in &h.parts {
            whole.extend_from_slice(&self.buf[p.clone()]);
        }
        if let Err(bad) = crate::sizes::check(&whole) {
            spoil(&mut self.buf, &h.parts, h.channel, bad);
        }
    }

    /// `n` bytes went out from the front of the buffer.
    fn advanced(&mut self, n: usize) {
        self.ready -= n;
        self.scanned -= n;
        for h in &mut self.held {
            h.frame -= n;
            for p in &mut h.parts {
                *p = p.start - n..p.end - n;
            }
        }
    }
}

/// A message split over frames, held until its last frame.
#[derive(Debug)]
struct Held {
    channel: u16,
    /// Where its first frame starts in the buffer.
    frame: usize,
    /// Its message bytes in each frame so far.
    parts: Vec<std::ops::Range<usize>>,
    bytes: usize,
}

/// Makes the message in `parts` undecodable: its first byte becomes no format code.
fn spoil(buf: &mut [u8], parts: &[std::ops::Range<usize>], channel: u16, bad: crate::sizes::Bad) {
    if let Some(first) = parts.iter().find(|p| !p.is_empty()) {
        buf[first.start] = SPOILED;
    }
    tracing::warn!(
        channel,
        %bad,
        "amqp message refused before decoding: it arrives undecodable"
    );
}

/// Checks the performative of a whole frame (AMQP or SASL); an empty frame passes.
fn check_performative(frame: &[u8]) -> Result<(), crate::sizes::Bad> {
    let doff = frame.get(4).map_or(0, |d| usize::from(*d) * 4);
    match frame.get(doff.max(8)..) {
        Some(body) if !body.is_empty() => crate::sizes::check_one(body).map(|_| ()),
        _ => Ok(()),
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
                this.advanced(n);
                return Poll::Ready(Ok(()));
            }
            if let Some(bad) = this.failed {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, bad)));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let filled = read.filled();
            if filled.is_empty() {
                // End of stream: hand out whatever partial frame is left, then EOF.
                if this.buf.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.held.clear();
                this.ready = this.buf.len();
                this.scanned = this.ready;
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

/// Patches the frames of one connection, in order, in place.
///
/// Only the first transfer frame of a delivery holds section boundaries: a transfer
/// that follows one with `more` set on the same channel continues the message's bytes,
/// which may look like anything, and is left as it is.
#[derive(Debug, Default)]
pub(crate) struct FramePatcher {
    /// Channels whose last transfer had `more` set (usually none, so no allocation).
    continuing: Vec<u16>,
}

impl FramePatcher {
    /// Patches one whole AMQP frame, saying what it is if it is a transfer. Anything
    /// unexpected leaves it as it is.
    pub(crate) fn patch(&mut self, frame: &mut [u8]) -> Option<Part> {
        let transfer = read_transfer(frame)?;
        let at = self.continuing.iter().position(|c| *c == transfer.channel);
        match (at, transfer.more) {
            (None, true) => self.continuing.push(transfer.channel),
            (Some(i), false) => {
                self.continuing.swap_remove(i);
            }
            _ => {}
        }
        if at.is_none() {
            let _ = patch_sections(frame, transfer.sections);
        }
        Some(Part {
            channel: transfer.channel,
            first: at.is_none(),
            more: transfer.more,
            sections: transfer.sections,
        })
    }
}

/// A transfer frame's place in its message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    pub(crate) channel: u16,
    /// The message starts in this frame.
    pub(crate) first: bool,
    /// The message goes on in the next transfer on the channel.
    pub(crate) more: bool,
    /// Where the message bytes start in the frame.
    pub(crate) sections: usize,
}

/// What a transfer frame says about itself.
struct Transfer {
    channel: u16,
    /// `more` set and `aborted` not: the next transfer on the channel continues this one.
    more: bool,
    /// Where the message bytes start.
    sections: usize,
}

/// The transfer performative of `frame`; `None` for any other frame or a malformed one.
fn read_transfer(frame: &[u8]) -> Option<Transfer> {
    let doff = usize::from(*frame.get(4)?) * 4;
    if *frame.get(5)? != 0 || doff < 8 {
        return None; // not an AMQP frame (SASL), or malformed
    }
    let channel = u16::from_be_bytes([*frame.get(6)?, *frame.get(7)?]);
    let mut pos = doff;
    if descriptor(frame, &mut pos)? != TRANSFER {
        return None;
    }
    let sections = skip_value(frame, pos)?; // the transfer performative's fields
    let (count, mut field) = match *frame.get(pos)? {
        0x45 => (0, pos + 1),
        0xc0 => (usize::from(*frame.get(pos + 2)?), pos + 3),
        0xd0 => (be_u32(frame, pos + 5)?, pos + 9),
        _ => return None,
    };
    let (mut more, mut aborted) = (false, false);
    // Fields: handle, delivery-id, delivery-tag, message-format, settled, more (5),
    // rcv-settle-mode, state, resume, aborted (9), batchable.
    for i in 0..count.min(10) {
        match i {
            5 => more = read_bool(frame, field)?,
            9 => aborted = read_bool(frame, field)?,
            _ => {}
        }
        field = skip_value(frame, field)?;
        if field > sections {
            return None;
        }
    }
    Some(Transfer {
        channel,
        more: more && !aborted,
        sections,
    })
}

/// A boolean field (null is false).
fn read_bool(frame: &[u8], pos: usize) -> Option<bool> {
    match *frame.get(pos)? {
        0x40 | 0x42 => Some(false),
        0x41 => Some(true),
        0x56 => Some(*frame.get(pos + 1)? != 0),
        _ => None,
    }
}

/// Patches the annotation sections of a message starting at `pos`.
fn patch_sections(frame: &mut [u8], mut pos: usize) -> Option<()> {
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
        let next = skip_value(frame, p)?;
        if next > end {
            return None;
        }
        if i % 2 == 1 {
            patch_array_of_maps(frame, p, next);
        }
        p = next;
    }
    Some(())
}

/// An array of maps at `pos` (ending before `end`) becomes an array of binaries (same
/// bytes).
fn patch_array_of_maps(frame: &mut [u8], pos: usize, end: usize) {
    let ctor = match frame.get(pos) {
        Some(0xe0) => pos + 3,
        Some(0xf0) => pos + 9,
        _ => return,
    };
    if ctor >= end {
        return;
    }
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
}
