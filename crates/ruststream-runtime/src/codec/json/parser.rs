//! The bytes of a document: whitespace, literals, strings, nesting, and skipping a
//! value.

use super::{Fallback, Result};

/// Bytes that end the plain run of a string: the quote, the backslash, and the control
/// characters.
pub(super) static STRING_STOP: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// How many bytes of `bytes` come before the first that ends a plain run
/// ([`STRING_STOP`]); `None` if none does. Eight bytes at a time: a long string costs
/// about one step a word instead of one a byte.
#[inline]
pub(super) fn plain_len(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // The high bit of each byte that is zero (exact for the lowest such byte; a borrow
    // may mark bytes above it, which are never looked at).
    let zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    let mut words = bytes.chunks_exact(8);
    let mut done = 0;
    for chunk in words.by_ref() {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        // Below 0x20, the quote, the backslash.
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        let stop = control
            | zero(word ^ (ONES * u64::from(b'"')))
            | zero(word ^ (ONES * u64::from(b'\\')));
        if stop != 0 {
            return Some(done + (stop.trailing_zeros() / 8) as usize);
        }
        done += 8;
    }
    let tail = words.remainder();
    tail.iter()
        .position(|&byte| STRING_STOP[usize::from(byte)])
        .map(|at| done + at)
}

#[inline]
pub(super) fn utf8(raw: &[u8]) -> Result<&str> {
    std::str::from_utf8(raw).map_err(|_| Fallback)
}

/// One of a struct's field names when a key is exactly one, found without a UTF-8
/// check (for up to 64 fields; past that, the search could cost more than the check).
pub(super) fn field_name(
    raw: &[u8],
    fields: &'static [&'static str],
    next: &mut usize,
) -> Option<&'static str> {
    if fields.len() > 64 {
        return None;
    }
    // Short names: a plain loop beats a call to `memcmp`.
    let same = |name: &str| name.len() == raw.len() && name.bytes().zip(raw).all(|(a, &b)| a == b);
    let index = fields.iter().position(|name| same(name))?;
    *next = index + 1;
    fields.get(index).copied()
}

pub(super) struct Parser<'de> {
    pub(super) bytes: &'de [u8],
    pub(super) pos: usize,
    pub(super) remaining_depth: u8,
}

impl<'de> Parser<'de> {
    /// The next byte after whitespace, not consumed; the end of input falls back.
    #[inline]
    pub(super) fn peek(&mut self) -> Result<u8> {
        match self.bytes.get(self.pos) {
            Some(&byte) if byte > b' ' => Ok(byte),
            _ => self.peek_after_whitespace(),
        }
    }

    pub(super) fn peek_after_whitespace(&mut self) -> Result<u8> {
        while let Some(&byte) = self.bytes.get(self.pos) {
            if !matches!(byte, b' ' | b'\n' | b'\t' | b'\r') {
                return Ok(byte);
            }
            self.pos += 1;
        }
        Err(Fallback)
    }

    /// Whether only whitespace is left.
    #[inline]
    pub(super) fn at_end(&mut self) -> bool {
        self.peek().is_err()
    }

    /// Consumes `word` (`null`, `true`, `false`) at the current position.
    #[inline]
    pub(super) fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(())
        } else {
            Err(Fallback)
        }
    }

    /// Consumes `byte` after whitespace.
    #[inline]
    pub(super) fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek()? == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(Fallback)
        }
    }

    /// The content of a string without escapes or control characters, not yet checked
    /// as UTF-8; the current byte is its opening quote.
    #[inline]
    pub(super) fn raw_string(&mut self) -> Result<&'de [u8]> {
        let rest = self.bytes.get(self.pos + 1..).ok_or(Fallback)?;
        let len = plain_len(rest).ok_or(Fallback)?;
        let (raw, end) = rest.split_at_checked(len).ok_or(Fallback)?;
        if end.first() != Some(&b'"') {
            return Err(Fallback);
        }
        self.pos += len + 2;
        Ok(raw)
    }

    /// The key the current byte opens when it is exactly `fields[*next]` (the field
    /// after the one found last: keys tend to come in the order of the fields), checked
    /// in one pass over the input instead of a scan and a comparison.
    #[inline]
    pub(super) fn next_field_key(
        &mut self,
        fields: &'static [&'static str],
        next: &mut usize,
    ) -> Option<&'static str> {
        let name = *fields.get(*next)?;
        let rest = self.bytes.get(self.pos + 1..)?;
        let (candidate, after) = rest.split_at_checked(name.len())?;
        // Plain bytes equal to the name's, then the closing quote: the string is the
        // name.
        if after.first() != Some(&b'"') {
            return None;
        }
        for (&byte, &expected) in candidate.iter().zip(name.as_bytes()) {
            if byte != expected || STRING_STOP[usize::from(byte)] {
                return None;
            }
        }
        self.pos += name.len() + 2;
        *next += 1;
        Some(name)
    }

    /// A string without escapes or control characters; the current byte is its
    /// opening quote.
    #[inline]
    pub(super) fn string(&mut self) -> Result<&'de str> {
        utf8(self.raw_string()?)
    }

    /// Skips a string as `serde_json` validates an ignored one: escapes allowed (a
    /// `\u` with any four hex digits), no control character, and no UTF-8 check. The
    /// current byte is the opening quote.
    pub(super) fn skip_string(&mut self) -> Result<()> {
        let bytes = self.bytes;
        let mut pos = self.pos + 1;
        loop {
            let rest = bytes.get(pos..).ok_or(Fallback)?;
            pos += plain_len(rest).ok_or(Fallback)?;
            match bytes.get(pos) {
                Some(b'"') => {
                    self.pos = pos + 1;
                    return Ok(());
                }
                Some(b'\\') => match bytes.get(pos + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => pos += 2,
                    Some(b'u') => {
                        let hex = bytes.get(pos + 2..pos + 6).ok_or(Fallback)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return Err(Fallback);
                        }
                        pos += 6;
                    }
                    _ => return Err(Fallback),
                },
                _ => return Err(Fallback),
            }
        }
    }

    /// Takes one level of the recursion budget, as `serde_json` does on entering an
    /// array or an object.
    #[inline]
    pub(super) fn enter(&mut self) -> Result<()> {
        match self.remaining_depth.checked_sub(1) {
            Some(remaining) if remaining > 0 => {
                self.remaining_depth = remaining;
                Ok(())
            }
            _ => Err(Fallback),
        }
    }

    #[inline]
    pub(super) fn leave(&mut self) {
        self.remaining_depth = self.remaining_depth.saturating_add(1);
    }

    /// Skips one value, as `deserialize_ignored_any` does.
    pub(super) fn skip(&mut self) -> Result<()> {
        match self.peek()? {
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            b'"' => self.skip_string(),
            b'[' => {
                self.enter()?;
                self.pos += 1;
                if self.peek()? == b']' {
                    self.pos += 1;
                } else {
                    loop {
                        self.skip()?;
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b']' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(Fallback),
                        }
                    }
                }
                self.leave();
                Ok(())
            }
            b'{' => {
                self.enter()?;
                self.pos += 1;
                if self.peek()? == b'}' {
                    self.pos += 1;
                } else {
                    loop {
                        if self.peek()? != b'"' {
                            return Err(Fallback);
                        }
                        self.string()?;
                        self.expect(b':')?;
                        self.skip()?;
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b'}' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(Fallback),
                        }
                    }
                }
                self.leave();
                Ok(())
            }
            _ => Err(Fallback),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{STRING_STOP, plain_len};

    /// The word-at-a-time scan finds what a byte-by-byte one finds: every stop byte at
    /// every position of strings of 0 to 40 bytes, over plain bytes of every kind (ASCII
    /// just above the controls, `0x7f`, bytes with the high bit set), and two stops in
    /// one word (the first one counts).
    #[test]
    fn finds_the_first_stop_as_a_byte_by_byte_scan_does() {
        let slow = |bytes: &[u8]| bytes.iter().position(|&b| STRING_STOP[usize::from(b)]);
        let plain: [u8; 8] = [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xff];
        let stops: Vec<u8> = (0..=255u8)
            .filter(|&b| STRING_STOP[usize::from(b)])
            .collect();
        assert_eq!(stops.len(), 34);
        for len in 0..40 {
            for filler in plain {
                let base = vec![filler; len];
                assert_eq!(plain_len(&base), None);
                for at in 0..len {
                    for &stop in &stops {
                        let mut bytes = base.clone();
                        bytes[at] = stop;
                        assert_eq!(plain_len(&bytes), slow(&bytes), "{bytes:?}");
                        assert_eq!(plain_len(&bytes), Some(at));
                        if at + 1 < len {
                            bytes[at + 1] = b'"';
                            assert_eq!(plain_len(&bytes), Some(at), "{bytes:?}");
                        }
                    }
                }
            }
        }
    }

    /// Every byte value before and after a stop in the same word, against the slow scan.
    #[test]
    fn every_byte_value_around_a_stop() {
        let slow = |bytes: &[u8]| bytes.iter().position(|&b| STRING_STOP[usize::from(b)]);
        for value in 0..=255u8 {
            for at in 0..16 {
                let mut bytes = [b'a'; 16];
                bytes[at] = value;
                assert_eq!(plain_len(&bytes), slow(&bytes), "{value:#x} at {at}");
                bytes[(at + 3) % 16] = b'\\';
                assert_eq!(plain_len(&bytes), slow(&bytes), "{value:#x} at {at}");
            }
        }
    }
}
