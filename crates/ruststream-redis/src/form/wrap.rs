//! The reliable list's processing-list elements: each taken element wrapped with an id of
//! its own, so that two byte-identical messages in flight are two different elements and
//! settling one (or a replayed settlement) never removes the other.
//!
//! Layout: `\xffRS`, the take id and the element's index in the take (ASCII, no NUL),
//! a NUL, then the element as it was on the list. The Lua scripts of
//! [`reliable`](super::reliable), [`recovery`](super::recovery) and
//! [`handback`](super::handback) build and strip the same layout; an element without the
//! marker (left by an older version) is handed back as it is. A frame never starts with
//! `\xff` in practice (it would announce over four billion headers).

use bytes::Bytes;

/// The marker at the start of a wrapped element.
pub(crate) const MAGIC: &[u8] = b"\xffRS";

/// The element inside `wrapped`: a slice of it, no copy. An element without the marker
/// is its own content.
pub(crate) fn unwrap(wrapped: &Bytes) -> Bytes {
    if !wrapped.starts_with(MAGIC) {
        return wrapped.clone();
    }
    match wrapped[MAGIC.len()..].iter().position(|&b| b == 0) {
        Some(nul) => wrapped.slice(MAGIC.len() + nul + 1..),
        None => wrapped.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_to_the_element() {
        let w = Bytes::from_static(b"\xffRSabc-1:2\0\0\0\0\0body\0x");
        assert_eq!(&unwrap(&w)[..], b"\0\0\0\0body\0x");
        let plain = Bytes::from_static(b"\0\0\0\0body");
        assert_eq!(unwrap(&plain), plain);
        let no_nul = Bytes::from_static(b"\xffRSabc");
        assert_eq!(unwrap(&no_nul), no_nul);
    }
}
