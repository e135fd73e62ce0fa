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
use pair::rename_attach;

pub(crate) use pair::Pair;
pub(crate) use server::{Announced, major, version_of_open};

mod pair;
mod patch;
mod server;
#[cfg(test)]
mod tests;

pub(crate) use patch::{FramePatcher, Part, be_u32, descriptor, skip_value};

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
    /// Where the version of the broker's `open` frame goes (until it has come).
    announced: Option<Announced>,
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
            announced: None,
        }
    }

    /// Keeps the version the broker announces in its `open` frame in `announced`.
    pub(crate) fn announced(mut self, announced: Announced) -> Self {
        self.announced = Some(announced);
        self
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
            if let Some(announced) = &self.announced
                && let Some(version) = version_of_open(frame)
            {
                let _ = announced.set(version);
                self.announced = None;
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
