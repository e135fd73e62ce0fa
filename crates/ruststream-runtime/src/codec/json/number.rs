//! Numbers, read as `serde_json` reads them: integers here, floats by `serde_json`.

use serde::de::Visitor;

use super::parser::Parser;
use super::{Fallback, Result};

/// A number as `serde_json` hands it to a visitor.
pub(super) enum Num {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
}

impl Num {
    #[inline]
    pub(super) fn visit<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Self::Unsigned(n) => visitor.visit_u64(n),
            Self::Signed(n) => visitor.visit_i64(n),
            Self::Float(n) => visitor.visit_f64(n),
        }
    }
}

/// Whether `serde_json` hands floats to visitors as `f64`s (`visit_f64`), as it does
/// unless its `arbitrary_precision` feature is on (then it keeps a number's text, and
/// the fast path leaves every float to it). Asked of `serde_json` itself, once.
pub(super) fn floats_are_f64() -> bool {
    static PLAIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PLAIN.get_or_init(|| {
        serde_json::from_str::<serde_json::Number>("1.50").is_ok_and(|n| n.to_string() == "1.5")
    })
}

/// The value (wrapping past `u64`) and the count of the ASCII digits `rest` starts
/// with.
#[inline]
pub(super) fn leading_digits(rest: &[u8]) -> (u64, usize) {
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
pub(super) fn checked_magnitude(digits: &[u8]) -> Result<u64> {
    digits.iter().try_fold(0u64, |magnitude, &digit| {
        magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(digit.wrapping_sub(b'0'))))
            .ok_or(Fallback)
    })
}

impl<'de> Parser<'de> {
    /// An integer as `serde_json` reads one into a `u64` or an `i64`; the current byte
    /// is `-` or a digit. Whatever `serde_json` would read as a float (a fraction, an
    /// exponent, `-0`, a value past `u64`/`i64`) or refuse (a leading zero) falls back.
    #[inline]
    pub(super) fn integer(&mut self) -> Result<Num> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        // The common case: a positive integer of at most 19 digits, which fits.
        if let Some(b'1'..=b'9') = rest.first() {
            let (magnitude, digits) = leading_digits(rest);
            if digits <= 19 && !matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
                self.pos += digits;
                return Ok(Num::Unsigned(magnitude));
            }
        }
        self.any_integer()
    }

    /// [`Parser::integer`] for the other cases: a sign, a zero, 20 digits or more, and
    /// what `serde_json` reads as a float.
    pub(super) fn any_integer(&mut self) -> Result<Num> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let (negative, rest) = match rest.split_first() {
            Some((b'-', tail)) => (true, tail),
            _ => (false, rest),
        };
        let (mut magnitude, digits) = leading_digits(rest);
        // No digit, or a leading zero: not a number `serde_json` takes.
        if digits == 0 || (digits > 1 && rest.first() == Some(&b'0')) {
            return Err(Fallback);
        }
        if matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
            return self.float();
        }
        // 19 digits always fit a u64; 20 may not (past it, `serde_json` reads a float).
        if digits > 19 {
            match checked_magnitude(rest.get(..digits).ok_or(Fallback)?) {
                Ok(fits) => magnitude = fits,
                Err(_) => return self.float(),
            }
        }
        if !negative {
            self.pos += digits;
            return Ok(Num::Unsigned(magnitude));
        }
        // As serde_json: a float unless the negation is negative (`-0` and magnitudes
        // past 2^63 are floats there).
        let negated = (magnitude as i64).wrapping_neg();
        if negated < 0 {
            self.pos += 1 + digits;
            Ok(Num::Signed(negated))
        } else {
            self.float()
        }
    }

    /// A number `serde_json` reads as a float (a fraction, an exponent, `-0`, an integer
    /// past `u64`/`i64`), read by `serde_json` itself from the number's own bytes: the
    /// same parser on the same text, so the same `f64` (and the same refusal of one out
    /// of range, which falls back).
    #[cold]
    pub(super) fn float(&mut self) -> Result<Num> {
        if !floats_are_f64() {
            return Err(Fallback);
        }
        let start = self.pos;
        self.skip_number()?;
        let text = self.bytes.get(start..self.pos).ok_or(Fallback)?;
        serde_json::from_slice::<f64>(text)
            .map(Num::Float)
            .map_err(|_| Fallback)
    }

    /// Skips a number as `serde_json` validates an ignored one (fraction and exponent
    /// included); the current byte is `-` or a digit.
    pub(super) fn skip_number(&mut self) -> Result<()> {
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

    /// A number for a visitor that asked for an integer type.
    #[inline]
    pub(super) fn number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        // `integer` refuses anything but `-` or a digit.
        self.peek()?;
        self.integer()?.visit(visitor)
    }
}
