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
//! - Floats (a fraction, an exponent, `-0`, an integer past `u64`/`i64`): the number's
//!   own bytes are handed to `serde_json` (`from_slice::<f64>`), the parser `serde_json`
//!   uses for them inside a document, with the features it was built with; the result
//!   goes to `visit_f64`, as there. Not when `serde_json` keeps numbers as text (its
//!   `arbitrary_precision` feature, asked of it once): floats then fall back.
//! - At most 127 nested arrays and objects (`serde_json` refuses the 128th).
//! - Only whitespace after the value.
//! - A value the type skips (`deserialize_ignored_any`, as for an unknown field) is
//!   checked as `serde_json` checks one: fractions, exponents and `-0` pass there, and
//!   strings may have escapes (a `\u` with any four hex digits) and are not checked as
//!   UTF-8, as `serde_json` does not check them either.
//!
//! Requests the fast path refuses, whatever the input: `i128`, `u128`, `f32` (which
//! `serde_json` parses in single precision under `float_roundtrip`), bytes, a newtype struct whose name starts with `$serde_json::` (`RawValue` and the
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
//! floats and integers past `u64`/`i64` are handed over (the fast path then leaves those
//! to `serde_json`), `raw_value` and `arbitrary_precision` add the newtypes it refuses,
//! `preserve_order` changes the map type of `Value` (the visitor is the same), and
//! `float_roundtrip` changes how floats are parsed (the fast path has `serde_json` parse
//! them, and leaves it `f32` requests).
//!
//! One consequence: on an input that falls back, the target type's `Deserialize` impl
//! runs twice (partly on the fast path, then in `serde_json`), so an impl with side
//! effects sees them twice. Derived impls and those of `std` and `serde_json` have
//! none.

use std::fmt;

use serde::de::{self, DeserializeOwned};

use parser::Parser;

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
pub(super) const MAX_DEPTH: u8 = 128;

/// The fast path's only error: "not mine, ask `serde_json`".
#[derive(Debug)]
pub(super) struct Fallback;

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

pub(super) type Result<T> = std::result::Result<T, Fallback>;

/// Methods that always fall back (the macros are defined before the modules that use them).
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

mod deserializer;
mod key;
mod number;
mod parser;

#[cfg(test)]
mod tests;
