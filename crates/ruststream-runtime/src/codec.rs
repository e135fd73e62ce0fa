//! Codecs: how payloads become typed values and back.

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How a subscription decodes payloads and a publisher encodes them.
///
/// The codec's media type is recorded in the `content-type` header on publish.
/// JSON is the default (feature `json`); MessagePack (`msgpack`) and CBOR (`cbor`) are
/// features; [`Codec::Raw`] passes bytes through.
///
/// JSON decodes plain documents (strings without escapes, numbers, literals, arrays,
/// objects) on a fast path of its own and everything else with `serde_json`, to which
/// the fast path hands any input it does not handle or any error it meets, so the value
/// or error is always `serde_json`'s.
///
/// ```
/// use ruststream::codec::Codec;
///
/// let bytes = Codec::Json.encode(&vec![1, 2, 3]).unwrap();
/// let back: Vec<u32> = Codec::Json.decode(&bytes).unwrap();
/// assert_eq!(back, [1, 2, 3]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// JSON (`application/json`).
    #[cfg(feature = "json")]
    Json,
    /// MessagePack (`application/msgpack`), struct fields by name.
    #[cfg(feature = "msgpack")]
    MsgPack,
    /// CBOR (`application/cbor`).
    #[cfg(feature = "cbor")]
    Cbor,
    /// Bytes as they are (`application/octet-stream`): decodes into types that take
    /// bytes or text (`String`, `serde_bytes::ByteBuf`), encodes what serializes as
    /// bytes or text. Handlers that want the bytes themselves take [`Raw`](crate::Raw).
    Raw,
}

impl Default for Codec {
    fn default() -> Self {
        #[cfg(feature = "json")]
        return Self::Json;
        #[cfg(not(feature = "json"))]
        return Self::Raw;
    }
}

/// A payload that did not decode, or a value that did not encode.
#[derive(Debug, thiserror::Error)]
#[error("{codec} codec: {reason}")]
pub struct CodecError {
    /// The codec's name.
    pub codec: &'static str,
    /// What went wrong.
    pub reason: String,
}

impl Codec {
    /// The media type recorded in `content-type`.
    pub fn content_type(self) -> &'static str {
        match self {
            #[cfg(feature = "json")]
            Self::Json => "application/json",
            #[cfg(feature = "msgpack")]
            Self::MsgPack => "application/msgpack",
            #[cfg(feature = "cbor")]
            Self::Cbor => "application/cbor",
            Self::Raw => "application/octet-stream",
        }
    }

    fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "json")]
            Self::Json => "json",
            #[cfg(feature = "msgpack")]
            Self::MsgPack => "msgpack",
            #[cfg(feature = "cbor")]
            Self::Cbor => "cbor",
            Self::Raw => "raw",
        }
    }

    fn error(self, reason: impl ToString) -> CodecError {
        CodecError {
            codec: self.name(),
            reason: reason.to_string(),
        }
    }

    /// Decodes `bytes` into a `T`.
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, CodecError> {
        match self {
            #[cfg(feature = "json")]
            Self::Json => json::from_slice(bytes).map_err(|e| self.error(e)),
            #[cfg(feature = "msgpack")]
            Self::MsgPack => rmp_serde::from_slice(bytes).map_err(|e| self.error(e)),
            #[cfg(feature = "cbor")]
            Self::Cbor => ciborium::from_reader(bytes).map_err(|e| self.error(e)),
            Self::Raw => T::deserialize(serde::de::value::BytesDeserializer::<
                serde::de::value::Error,
            >::new(bytes))
            .map_err(|e| self.error(e)),
        }
    }

    /// Encodes `value`.
    ///
    /// Small payloads are cut from a per-thread chunk of 8 KiB shared by the payloads
    /// encoded after each other, so encoding allocates once per chunk, not per payload,
    /// and a payload cloned for a copy or a reply costs a counter increment. A payload
    /// kept for long keeps its chunk's memory alive; over 4 KiB, a payload has its own.
    pub fn encode<T: Serialize + ?Sized>(self, value: &T) -> Result<Bytes, CodecError> {
        match self {
            #[cfg(feature = "json")]
            Self::Json => {
                chunk::encode(|out| serde_json::to_writer(out, value)).map_err(|e| self.error(e))
            }
            #[cfg(feature = "msgpack")]
            Self::MsgPack => chunk::encode(|out| rmp_serde::encode::write_named(out, value))
                .map_err(|e| self.error(e)),
            #[cfg(feature = "cbor")]
            Self::Cbor => {
                chunk::encode(|out| ciborium::into_writer(value, out)).map_err(|e| self.error(e))
            }
            Self::Raw => value.serialize(raw::BytesOnly).map_err(|e| self.error(e)),
        }
    }
}

mod chunk;
#[cfg(feature = "json")]
mod json;
mod raw;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Order {
        id: u64,
        item: String,
    }

    fn round_trip(codec: Codec) {
        let order = Order {
            id: 7,
            item: "tea".into(),
        };
        let bytes = codec.encode(&order).expect("encodes");
        assert_eq!(codec.decode::<Order>(&bytes).expect("decodes"), order);
        assert!(codec.decode::<Order>(b"\xff\x00garbage").is_err());
    }

    #[cfg(feature = "json")]
    #[test]
    fn json() {
        round_trip(Codec::Json);
    }

    #[cfg(feature = "msgpack")]
    #[test]
    fn msgpack() {
        round_trip(Codec::MsgPack);
    }

    #[cfg(feature = "cbor")]
    #[test]
    fn cbor() {
        round_trip(Codec::Cbor);
    }

    #[test]
    fn raw_takes_text_and_bytes_only() {
        let bytes = Codec::Raw.encode("hello").expect("text encodes");
        assert_eq!(&bytes[..], b"hello");
        assert_eq!(
            Codec::Raw.decode::<String>(b"hello").expect("utf-8"),
            "hello"
        );
        assert!(Codec::Raw.decode::<String>(b"\xff").is_err());
        assert!(Codec::Raw.encode(&42u32).is_err());
    }
}
