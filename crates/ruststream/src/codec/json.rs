//! JSON decoding: a fast path for small, plain documents, with `serde_json` as the
//! reference and the fallback.
//!
//! [`from_slice`] first decodes with a small [`serde::Deserializer`] of this module
//! that handles a strict subset of JSON. On anything outside that subset, and on any
//! error at all (a syntax error, a missing field, a wrong type, a number out of range
//! for the target, whatever the target type's `Deserialize` impl refuses), it gives up
//! with its private "not mine" error, and the input is decoded again, from the start,
//! by [`serde_json::from_slice`], whose value or error is returned unchanged. So the
//! result is always the one `serde_json` gives.
//!
//! # The subset
//!
//! - Whitespace (space, `\t`, `\n`, `\r`), objects, arrays, `true`, `false`, `null`.
//! - Strings without a backslash escape and without a control character (below 0x20),
//!   valid UTF-8. A string equal to one of the field names of the struct being read (or
//!   to one of the variant names of the enum) is handed over as that `'static` name, the
//!   same text, which saves the UTF-8 check; any other string is checked with
//!   [`std::str::from_utf8`].
//! - Integers: an optional `-`, then `0` or digits not starting with `0`, with no
//!   fraction and no exponent, that fit a `u64` (non-negative) or an `i64` (negative;
//!   `-0` excluded, as `serde_json` reads `-0` as a float).
//! - At most 127 nested arrays and objects (`serde_json` refuses the 128th).
//! - Only whitespace after the value.
//! - A value the type skips (`deserialize_ignored_any`, as for an unknown field) is
//!   checked as `serde_json` checks one: fractions, exponents and `-0` pass there, and
//!   strings may have escapes (a `\u` with any four hex digits) and are not checked as
//!   UTF-8, as `serde_json` does not check them either.
//!
//! Requests the fast path refuses, whatever the input: `i128`, `u128`, `f32`, `f64`,
//! bytes, a newtype struct whose name starts with `$serde_json::` (`RawValue` and the
//! `arbitrary_precision` number, whose meaning depends on `serde_json`'s features), an
//! enum in the object form (`{"Variant": ...}`) or a string read as a newtype, tuple or
//! struct variant, map keys read as anything but a string or a newtype of one (numeric,
//! `bool`, enum keys), and a variant name read as anything but a string.
//!
//! # Why the result is `serde_json`'s
//!
//! On the subset, the fast path makes the same calls on the type's visitors, in the same
//! order and with the same arguments, as `serde_json`'s deserializer over a slice does
//! (`serde_json` 1.0.154 was read for this): `visit_borrowed_str` for strings (a map
//! key is read only when its seed asks for it, as in `serde_json`), `visit_u64` for
//! non-negative and `visit_i64` for negative integers, `visit_seq`/`visit_map` with
//! access objects that check commas, colons and the closing bracket at the same points
//! and give no size hint, `visit_unit` for `null` and for a skipped value,
//! `visit_none`/`visit_some` for options, `visit_newtype_struct` with itself, a
//! structure read from an array or an object as `serde_json` reads it, and a unit
//! variant from a string. It counts nesting as `serde_json` does. Where `serde_json`
//! fails, the fast path fails at the same point or before, and falls back.
//!
//! The features of `serde_json` do not change this: `arbitrary_precision` changes how
//! floats and integers past `u64`/`i64` are handed over (the fast path leaves those to
//! `serde_json`), `raw_value` and `arbitrary_precision` add the newtypes it refuses,
//! `preserve_order` changes the map type of `Value` (the visitor is the same), and
//! `float_roundtrip` concerns floats only.
//!
//! One consequence: on an input that falls back, the target type's `Deserialize` impl
//! runs twice (partly on the fast path, then in `serde_json`), so an impl with side
//! effects sees them twice. Derived impls and those of `std` and `serde_json` have
//! none.

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};

/// Decodes `bytes` as `serde_json::from_slice` does: the same value or the same error.
pub(super) fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match fast(bytes) {
        Some(value) => Ok(value),
        None => serde_json::from_slice(bytes),
    }
}

/// The fast path alone: `None` when it gives up.
#[inline]
fn fast<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let mut parser = Parser {
        bytes,
        pos: 0,
        remaining_depth: MAX_DEPTH,
    };
    let value = T::deserialize(&mut parser).ok()?;
    parser.at_end().then_some(value)
}

/// `serde_json`'s recursion budget: it takes one for each array or object it enters
/// and fails when none is left, so 127 levels pass and the 128th fails.
const MAX_DEPTH: u8 = 128;

/// The fast path's only error: "not mine, ask `serde_json`".
#[derive(Debug)]
struct Fallback;

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not handled by the JSON fast path")
    }
}

impl std::error::Error for Fallback {}

impl de::Error for Fallback {
    #[inline]
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Fallback
    }
}

type Result<T> = std::result::Result<T, Fallback>;

/// Bytes that end the plain run of a string: the quote, the backslash, and the control
/// characters.
static STRING_STOP: [bool; 256] = {
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

/// An integer as `serde_json` hands it to a visitor.
enum Int {
    Unsigned(u64),
    Signed(i64),
}

impl Int {
    #[inline]
    fn visit<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Self::Unsigned(n) => visitor.visit_u64(n),
            Self::Signed(n) => visitor.visit_i64(n),
        }
    }
}

/// The value (wrapping past `u64`) and the count of the ASCII digits `rest` starts
/// with.
#[inline]
fn leading_digits(rest: &[u8]) -> (u64, usize) {
    let mut magnitude: u64 = 0;
    let mut count = 0;
    for &byte in rest {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        magnitude = magnitude.wrapping_mul(10).wrapping_add(u64::from(digit));
        count += 1;
    }
    (magnitude, count)
}

/// `digits` as a `u64`, if it fits.
#[cold]
fn checked_magnitude(digits: &[u8]) -> Result<u64> {
    digits.iter().try_fold(0u64, |magnitude, &digit| {
        magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(digit.wrapping_sub(b'0'))))
            .ok_or(Fallback)
    })
}

#[inline]
fn utf8(raw: &[u8]) -> Result<&str> {
    std::str::from_utf8(raw).map_err(|_| Fallback)
}

/// One of a struct's field names when a key is exactly one, found without a UTF-8
/// check (for up to 64 fields; past that, the search could cost more than the check).
fn field_name(
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

struct Parser<'de> {
    bytes: &'de [u8],
    pos: usize,
    remaining_depth: u8,
}

impl<'de> Parser<'de> {
    /// The next byte after whitespace, not consumed; the end of input falls back.
    #[inline]
    fn peek(&mut self) -> Result<u8> {
        match self.bytes.get(self.pos) {
            Some(&byte) if byte > b' ' => Ok(byte),
            _ => self.peek_after_whitespace(),
        }
    }

    fn peek_after_whitespace(&mut self) -> Result<u8> {
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
    fn at_end(&mut self) -> bool {
        self.peek().is_err()
    }

    /// Consumes `word` (`null`, `true`, `false`) at the current position.
    #[inline]
    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
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
    fn expect(&mut self, byte: u8) -> Result<()> {
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
    fn raw_string(&mut self) -> Result<&'de [u8]> {
        let rest = self.bytes.get(self.pos + 1..).ok_or(Fallback)?;
        let len = rest
            .iter()
            .position(|&byte| STRING_STOP[usize::from(byte)])
            .ok_or(Fallback)?;
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
    fn next_field_key(
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
    fn string(&mut self) -> Result<&'de str> {
        utf8(self.raw_string()?)
    }

    /// An integer as `serde_json` reads one into a `u64` or an `i64`; the current byte
    /// is `-` or a digit. Whatever `serde_json` would read as a float (a fraction, an
    /// exponent, `-0`, a value past `u64`/`i64`) or refuse (a leading zero) falls back.
    #[inline]
    fn integer(&mut self) -> Result<Int> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        // The common case: a positive integer of at most 19 digits, which fits.
        if let Some(b'1'..=b'9') = rest.first() {
            let (magnitude, digits) = leading_digits(rest);
            if digits <= 19 && !matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
                self.pos += digits;
                return Ok(Int::Unsigned(magnitude));
            }
        }
        self.any_integer()
    }

    /// [`Parser::integer`] for the other cases: a sign, a zero, 20 digits or more.
    fn any_integer(&mut self) -> Result<Int> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let (negative, rest) = match rest.split_first() {
            Some((b'-', tail)) => (true, tail),
            _ => (false, rest),
        };
        let (mut magnitude, digits) = leading_digits(rest);
        // No digit, a leading zero, or what makes a float.
        if digits == 0
            || (digits > 1 && rest.first() == Some(&b'0'))
            || matches!(rest.get(digits), Some(b'.' | b'e' | b'E'))
        {
            return Err(Fallback);
        }
        // 19 digits always fit a u64; 20 may not.
        if digits > 19 {
            magnitude = checked_magnitude(rest.get(..digits).ok_or(Fallback)?)?;
        }
        self.pos += usize::from(negative) + digits;
        if !negative {
            return Ok(Int::Unsigned(magnitude));
        }
        // As serde_json: a float unless the negation is negative (`-0` and magnitudes
        // past 2^63 are floats there).
        let negated = (magnitude as i64).wrapping_neg();
        if negated < 0 {
            Ok(Int::Signed(negated))
        } else {
            Err(Fallback)
        }
    }

    /// Skips a string as `serde_json` validates an ignored one: escapes allowed (a
    /// `\u` with any four hex digits), no control character, and no UTF-8 check. The
    /// current byte is the opening quote.
    fn skip_string(&mut self) -> Result<()> {
        let bytes = self.bytes;
        let mut pos = self.pos + 1;
        loop {
            let rest = bytes.get(pos..).ok_or(Fallback)?;
            pos += rest
                .iter()
                .position(|&byte| STRING_STOP[usize::from(byte)])
                .ok_or(Fallback)?;
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

    /// Skips a number as `serde_json` validates an ignored one (fraction and exponent
    /// included); the current byte is `-` or a digit.
    fn skip_number(&mut self) -> Result<()> {
        let bytes = self.bytes;
        let mut pos = self.pos;
        let digits = |pos: &mut usize| {
            let start = *pos;
            while let Some(b'0'..=b'9') = bytes.get(*pos) {
                *pos += 1;
            }
            *pos > start
        };
        if bytes.get(pos) == Some(&b'-') {
            pos += 1;
        }
        match bytes.get(pos) {
            Some(b'0') => {
                pos += 1;
                if let Some(b'0'..=b'9') = bytes.get(pos) {
                    return Err(Fallback);
                }
            }
            Some(b'1'..=b'9') => {
                digits(&mut pos);
            }
            _ => return Err(Fallback),
        }
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            if !digits(&mut pos) {
                return Err(Fallback);
            }
        }
        if let Some(b'e' | b'E') = bytes.get(pos) {
            pos += 1;
            if let Some(b'+' | b'-') = bytes.get(pos) {
                pos += 1;
            }
            if !digits(&mut pos) {
                return Err(Fallback);
            }
        }
        self.pos = pos;
        Ok(())
    }

    /// Takes one level of the recursion budget, as `serde_json` does on entering an
    /// array or an object.
    #[inline]
    fn enter(&mut self) -> Result<()> {
        match self.remaining_depth.checked_sub(1) {
            Some(remaining) if remaining > 0 => {
                self.remaining_depth = remaining;
                Ok(())
            }
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn leave(&mut self) {
        self.remaining_depth = self.remaining_depth.saturating_add(1);
    }

    /// An array for `visitor`; the current byte is `[`.
    #[inline]
    fn array<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.enter()?;
        self.pos += 1;
        let value = visitor.visit_seq(Seq {
            parser: &mut *self,
            first: true,
        })?;
        self.leave();
        self.expect(b']')?;
        Ok(value)
    }

    /// An object for `visitor`; the current byte is `{`. `fields` are the field names
    /// of the struct read, if it is one.
    #[inline]
    fn object<V: Visitor<'de>>(
        &mut self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.enter()?;
        self.pos += 1;
        let value = visitor.visit_map(Map {
            parser: &mut *self,
            first: true,
            fields,
            next_field: 0,
        })?;
        self.leave();
        self.expect(b'}')?;
        Ok(value)
    }

    /// A number for a visitor that asked for an integer type.
    #[inline]
    fn number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        // `integer` refuses anything but `-` or a digit.
        self.peek()?;
        self.integer()?.visit(visitor)
    }

    /// Skips one value, as `deserialize_ignored_any` does.
    fn skip(&mut self) -> Result<()> {
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

/// Methods that always fall back.
macro_rules! fall_back {
    ($($method:ident),* $(,)?) => {
        $(
            #[inline]
            fn $method<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
                Err(Fallback)
            }
        )*
    };
}

/// Integer methods: a number, handed over as `u64` or `i64`.
macro_rules! integers {
    ($($method:ident),* $(,)?) => {
        $(
            #[inline]
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                self.number(visitor)
            }
        )*
    };
}

/// Text methods: a string, handed over borrowed.
macro_rules! strings {
    ($($method:ident),* $(,)?) => {
        $(
            #[inline]
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                match self.peek()? {
                    b'"' => visitor.visit_borrowed_str(self.string()?),
                    _ => Err(Fallback),
                }
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for &mut Parser<'de> {
    type Error = Fallback;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            b'-' | b'0'..=b'9' => self.integer()?.visit(visitor),
            b'"' => visitor.visit_borrowed_str(self.string()?),
            b'[' => self.array(visitor),
            b'{' => self.object(&[], visitor),
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            _ => Err(Fallback),
        }
    }

    integers!(
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
    );

    fall_back!(
        deserialize_i128,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_bytes,
        deserialize_byte_buf,
    );

    strings!(
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_identifier,
    );

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    #[inline]
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name.starts_with("$serde_json::") {
            return Err(Fallback);
        }
        visitor.visit_newtype_struct(self)
    }

    #[inline]
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b'[' => self.array(visitor),
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    #[inline]
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    #[inline]
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b'{' => self.object(&[], visitor),
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek()? {
            b'{' => self.object(fields, visitor),
            b'[' => self.array(visitor),
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek()? {
            b'"' => visitor.visit_enum(UnitVariant {
                parser: self,
                variants,
            }),
            _ => Err(Fallback),
        }
    }

    #[inline]
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.skip()?;
        visitor.visit_unit()
    }
}

/// The elements of an array, with `serde_json`'s checks: a comma between elements, none
/// before the first or the closing bracket.
struct Seq<'a, 'de> {
    parser: &'a mut Parser<'de>,
    first: bool,
}

impl<'de> de::SeqAccess<'de> for Seq<'_, 'de> {
    type Error = Fallback;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let byte = self.parser.peek()?;
        if byte == b']' {
            return Ok(None);
        }
        if self.first {
            self.first = false;
        } else if byte == b',' {
            self.parser.pos += 1;
            if self.parser.peek()? == b']' {
                return Err(Fallback);
            }
        } else {
            return Err(Fallback);
        }
        seed.deserialize(&mut *self.parser).map(Some)
    }
}

/// The entries of an object, with `serde_json`'s checks: a string key, a colon, a comma
/// between entries.
struct Map<'a, 'de> {
    parser: &'a mut Parser<'de>,
    first: bool,
    fields: &'static [&'static str],
    next_field: usize,
}

impl<'de> de::MapAccess<'de> for Map<'_, 'de> {
    type Error = Fallback;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let mut byte = self.parser.peek()?;
        if byte == b'}' {
            return Ok(None);
        }
        if self.first {
            self.first = false;
        } else if byte == b',' {
            self.parser.pos += 1;
            byte = self.parser.peek()?;
        } else {
            return Err(Fallback);
        }
        if byte != b'"' {
            return Err(Fallback);
        }
        seed.deserialize(Key {
            parser: &mut *self.parser,
            fields: self.fields,
            next_field: &mut self.next_field,
            map_key: true,
        })
        .map(Some)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        self.parser.expect(b':')?;
        seed.deserialize(&mut *self.parser)
    }
}

/// A map key or the name of a unit variant, positioned on its opening quote and read
/// only when asked for (as in `serde_json`): as a string, or (a map key only) through
/// a newtype struct or as an ignored value; any other request falls back.
///
/// A string that is exactly one of the struct's field names (the enum's variant
/// names) is handed over as that (`'static`) name rather than as a slice of the input:
/// the same text, without the cost of a UTF-8 check.
struct Key<'a, 'de> {
    parser: &'a mut Parser<'de>,
    fields: &'static [&'static str],
    next_field: &'a mut usize,
    /// A map key: `serde_json`'s `MapKey`, which reads an ignored key as a string and
    /// passes itself to a newtype. A variant name is read by `serde_json`'s full
    /// deserializer, which differs there, so those fall back.
    map_key: bool,
}

impl<'de> de::Deserializer<'de> for Key<'_, 'de> {
    type Error = Fallback;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if let Some(name) = self.parser.next_field_key(self.fields, self.next_field) {
            return visitor.visit_borrowed_str(name);
        }
        let raw = self.parser.raw_string()?;
        let key = match field_name(raw, self.fields, self.next_field) {
            Some(name) => name,
            None => utf8(raw)?,
        };
        visitor.visit_borrowed_str(key)
    }

    #[inline]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if !self.map_key {
            return Err(Fallback);
        }
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if !self.map_key || name.starts_with("$serde_json::") {
            return Err(Fallback);
        }
        visitor.visit_newtype_struct(self)
    }

    fall_back!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
    );

    #[inline]
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _visitor: V,
    ) -> Result<V::Value> {
        Err(Fallback)
    }

    #[inline]
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value> {
        Err(Fallback)
    }

    #[inline]
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        _visitor: V,
    ) -> Result<V::Value> {
        Err(Fallback)
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(Fallback)
    }

    #[inline]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(Fallback)
    }
}

/// An enum written as a string: the variant's name (read as a string, which is what
/// `serde_json`'s full deserializer does there; any other request falls back), and a
/// unit variant; any other kind of variant falls back.
struct UnitVariant<'a, 'de> {
    parser: &'a mut Parser<'de>,
    variants: &'static [&'static str],
}

impl<'de> de::EnumAccess<'de> for UnitVariant<'_, 'de> {
    type Error = Fallback;
    type Variant = Self;

    #[inline]
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        let variant = seed.deserialize(Key {
            parser: &mut *self.parser,
            fields: self.variants,
            next_field: &mut 0,
            map_key: false,
        })?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for UnitVariant<'_, 'de> {
    type Error = Fallback;

    #[inline]
    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value> {
        Err(Fallback)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value> {
        Err(Fallback)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(Fallback)
    }
}

#[cfg(test)]
mod tests;
