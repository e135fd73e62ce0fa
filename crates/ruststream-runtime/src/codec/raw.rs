//! The raw codec's encoder: a serializer that takes bytes or text and nothing else.

use bytes::Bytes;
use serde::ser::{self, Impossible, Serialize};

#[derive(Debug)]
pub(super) struct NotBytes(String);

impl std::fmt::Display for NotBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotBytes {}

impl ser::Error for NotBytes {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

pub(super) struct BytesOnly;

fn refuse<T>(what: &str) -> Result<T, NotBytes> {
    Err(NotBytes(format!("takes bytes or text, not {what}")))
}

macro_rules! refuse_scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<Bytes, NotBytes> { refuse(stringify!($ty)) })*
    };
}

impl ser::Serializer for BytesOnly {
    type Ok = Bytes;
    type Error = NotBytes;
    type SerializeSeq = Impossible<Bytes, NotBytes>;
    type SerializeTuple = Impossible<Bytes, NotBytes>;
    type SerializeTupleStruct = Impossible<Bytes, NotBytes>;
    type SerializeTupleVariant = Impossible<Bytes, NotBytes>;
    type SerializeMap = Impossible<Bytes, NotBytes>;
    type SerializeStruct = Impossible<Bytes, NotBytes>;
    type SerializeStructVariant = Impossible<Bytes, NotBytes>;

    fn serialize_bytes(self, v: &[u8]) -> Result<Bytes, NotBytes> {
        Ok(super::chunk::copy(v))
    }
    fn serialize_str(self, v: &str) -> Result<Bytes, NotBytes> {
        Ok(super::chunk::copy(v.as_bytes()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Bytes, NotBytes> {
        value.serialize(self)
    }
    refuse_scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_unit_struct(&'static str),
    );
    fn serialize_none(self) -> Result<Bytes, NotBytes> {
        refuse("none")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Bytes, NotBytes> {
        refuse("an option")
    }
    fn serialize_unit(self) -> Result<Bytes, NotBytes> {
        refuse("unit")
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<Bytes, NotBytes> {
        refuse("an enum")
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Bytes, NotBytes> {
        refuse("an enum")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotBytes> {
        refuse("a sequence")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotBytes> {
        refuse("a tuple")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotBytes> {
        refuse("a tuple struct")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotBytes> {
        refuse("an enum")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotBytes> {
        refuse("a map")
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, NotBytes> {
        refuse("a struct")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotBytes> {
        refuse("an enum")
    }
}
