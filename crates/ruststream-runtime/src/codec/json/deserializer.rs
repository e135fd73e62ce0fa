//! The fast path's `Deserializer`, and its sequence and map access.

use serde::de::{self, DeserializeSeed, Visitor};

use super::key::{Key, UnitVariant};
use super::parser::Parser;
use super::{Fallback, Result};

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

    // `serde_json` reads an `f64` request as any other number request, handing over
    // whatever the text is: the visitor converts or refuses. (Not `f32`: with its
    // `float_roundtrip` feature, `serde_json` parses those in single precision.)
    integers!(deserialize_f64);

    fall_back!(
        deserialize_i128,
        deserialize_u128,
        deserialize_f32,
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

impl<'de> Parser<'de> {
    /// An array for `visitor`; the current byte is `[`.
    #[inline]
    pub(super) fn array<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
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
    pub(super) fn object<V: Visitor<'de>>(
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
}

/// The elements of an array, with `serde_json`'s checks: a comma between elements, none
/// before the first or the closing bracket.
pub(super) struct Seq<'a, 'de> {
    pub(super) parser: &'a mut Parser<'de>,
    pub(super) first: bool,
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
pub(super) struct Map<'a, 'de> {
    pub(super) parser: &'a mut Parser<'de>,
    pub(super) first: bool,
    pub(super) fields: &'static [&'static str],
    pub(super) next_field: usize,
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
