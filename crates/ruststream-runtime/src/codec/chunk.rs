//! Encoding into shared chunks: many small payloads, one allocation.
//!
//! Each thread encodes into a chunk of [`SIZE`] bytes and cuts every payload off it, so
//! small payloads share one reference-counted allocation: encoding allocates once per
//! chunk instead of twice per payload (a `Vec` and the `Bytes` header that shares it),
//! a payload is cloned (a retry copy, a reply) with a counter increment, and dropping
//! one frees nothing until the chunk's last payload goes. The price is that a payload
//! kept long keeps its chunk alive: at most [`SIZE`] bytes each. A payload that does
//! not fit a chunk gets an allocation of its own.

use std::cell::RefCell;
use std::io::{self, Write};

use bytes::buf::Writer;
use bytes::{BufMut, Bytes, BytesMut};

/// The size of a chunk.
pub(super) const SIZE: usize = 8 * 1024;

/// Room below which a chunk is not written to: a fresh one is taken instead.
const ROOM: usize = 512;

thread_local! {
    static CHUNK: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The bytes `write` writes, as one payload cut off this thread's chunk.
///
/// `write` must not return an error after a partial write it wants kept: on an error
/// what it wrote is discarded.
pub(super) fn encode<E>(
    write: impl FnOnce(&mut Writer<&mut BytesMut>) -> Result<(), E>,
) -> Result<Bytes, E> {
    CHUNK.with(|cell| {
        let Ok(mut chunk) = cell.try_borrow_mut() else {
            // Encoding from inside an encoding (a `Serialize` that encodes): on its own.
            let mut out = BytesMut::new();
            write(&mut (&mut out).writer())?;
            return Ok(out.freeze());
        };
        if chunk.capacity() < ROOM {
            // A fresh chunk, or the old one again once all its payloads are gone.
            chunk.reserve(SIZE);
        }
        let result = write(&mut (&mut *chunk).writer());
        let payload = chunk.split();
        if payload.len() > SIZE / 2 {
            // A large payload: it keeps its allocation to itself, and small ones do not
            // keep a large allocation alive.
            *chunk = BytesMut::new();
        }
        result.map(|()| payload.freeze())
    })
}

/// `bytes` copied into this thread's chunk.
pub(super) fn copy(bytes: &[u8]) -> Bytes {
    encode(|out| out.write_all(bytes)).unwrap_or_else(|_: io::Error| Bytes::copy_from_slice(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_cut_apart() {
        let a = copy(b"first");
        let b = copy(b"second");
        assert_eq!(&a[..], b"first");
        assert_eq!(&b[..], b"second");
        // One allocation, cut: the second payload starts where the first ends.
        assert_eq!(b.as_ptr(), a.as_ptr().wrapping_add(a.len()));
        drop(a);
        assert_eq!(&b[..], b"second");
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let failed: Result<Bytes, io::Error> = encode(|out| {
            out.write_all(b"partial")?;
            Err(io::Error::other("no"))
        });
        assert!(failed.is_err());
        assert_eq!(&copy(b"next")[..], b"next");
    }

    #[test]
    fn a_large_payload_is_whole_and_does_not_keep_the_chunk() {
        let large = vec![7u8; 3 * SIZE];
        let out = copy(&large);
        assert_eq!(&out[..], &large[..]);
        assert_eq!(&copy(b"small")[..], b"small");
    }

    #[test]
    fn many_small_payloads_survive_chunk_changes() {
        let all: Vec<Bytes> = (0..5_000u32)
            .map(|i| copy(i.to_string().as_bytes()))
            .collect();
        for (i, b) in all.iter().enumerate() {
            assert_eq!(&b[..], i.to_string().as_bytes());
        }
    }
}
