//! Map keys and enum variant names: strings only.

use serde::de::{self, DeserializeSeed, Visitor};

use super::parser::{Parser, field_name, utf8};
use super::{Fallback, Result};

/// A map key or the name of a unit variant, positioned on its opening quote and read
/// only when asked for (as in `serde_json`): as a string, or (a map key only) through
/// a newtype struct or as an ignored value; any other request falls back.
///
/// A string that is exactly one of the struct's field names (the enum's variant
/// names) is handed over as that (`'static`) name rather than as a slice of the input:
/// the same text, without the cost of a UTF-8 check.
pub(super) struct Key<'a, 'de> {
    pub(super) parser: &'a mut Parser<'de>,
    pub(super) fields: &'static [&'static str],
    pub(super) next_field: &'a mut usize,
    /// A map key: `serde_json`'s `MapKey`, which reads an ignored key as a string and
    /// passes itself to a newtype. A variant name is read by `serde_json`'s full
    /// deserializer, which differs there, so those fall back.
    pub(super) map_key: bool,
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
pub(super) struct UnitVariant<'a, 'de> {
    pub(super) parser: &'a mut Parser<'de>,
    pub(super) variants: &'static [&'static str],
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
