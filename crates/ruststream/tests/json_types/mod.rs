//! The differential corpus's target types and its check: `Codec::Json.decode` against
//! `serde_json::from_slice`, shared by `tests/json_fast.rs` and the `json_fast` fuzz
//! target in `fuzz/`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::net::IpAddr;

use ruststream::codec::Codec;
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Decodes `input` both ways and compares: equal values, or equal error messages.
pub(crate) fn same<T: DeserializeOwned + PartialEq + Debug>(input: &[u8]) {
    let ours = Codec::Json.decode::<T>(input);
    let reference = serde_json::from_slice::<T>(input);
    let shown = || {
        format!(
            "input {:?} into {}",
            String::from_utf8_lossy(input),
            std::any::type_name::<T>()
        )
    };
    match (ours, reference) {
        (Ok(ours), Ok(reference)) => assert_eq!(ours, reference, "{}", shown()),
        (Err(ours), Err(reference)) => {
            assert_eq!(ours.codec, "json", "{}", shown());
            assert_eq!(ours.reason, reference.to_string(), "{}", shown());
        }
        (ours, reference) => panic!("{}: ours {ours:?}, serde_json {reference:?}", shown()),
    }
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Order {
    id: u64,
    qty: u32,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Tick {
    id: u64,
    price: u32,
    qty: u32,
    live: bool,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Named {
    name: String,
    note: Option<String>,
    tags: Vec<String>,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Optional {
    a: Option<u32>,
    b: Option<Option<i64>>,
    c: Option<Vec<u8>>,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Nested {
    order: Order,
    list: Vec<Order>,
    inner: Option<Box<Nested>>,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) enum Kind {
    A,
    B(u32),
    C { x: u32 },
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct HasKind {
    kind: Kind,
    kinds: Vec<Kind>,
}

#[derive(Deserialize, PartialEq, Debug, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Side {
    Buy,
    Sell,
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(untagged)]
pub(crate) enum Untagged {
    Order(Order),
    Pair { a: u32, b: String },
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(String),
    List(Vec<u32>),
    Flag(bool),
    Nothing(()),
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(tag = "type")]
pub(crate) enum Internal {
    Start { id: u64 },
    Stop { id: u64, reason: String },
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(tag = "t", content = "c")]
pub(crate) enum Adjacent {
    A(u32),
    B { x: u32 },
    C,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Flat {
    id: u64,
    #[serde(flatten)]
    rest: HashMap<String, Value>,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Meta {
    source: String,
    seq: u32,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct WithMeta {
    id: u64,
    #[serde(flatten)]
    meta: Meta,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Defaults {
    #[serde(default)]
    id: u64,
    #[serde(default)]
    name: String,
    qty: u8,
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct Strict {
    id: u64,
    qty: u32,
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Camel {
    order_id: u64,
    is_live: bool,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Aliased {
    #[serde(alias = "ident", alias = "qty")]
    id: u64,
}

/// Field names that are not plain JSON string content: a key compared with them must
/// not be taken for them.
#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct OddNames {
    #[serde(rename = "a\"b")]
    quote: Option<u32>,
    #[serde(rename = "c\\d")]
    backslash: Option<u32>,
    #[serde(rename = "e\nf")]
    newline: Option<u32>,
    #[serde(rename = "")]
    empty: Option<u32>,
    #[serde(rename = "é")]
    accent: Option<u32>,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Pair(u32, u32);

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Wrapper(u64);

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Nothing;

#[derive(Deserialize, PartialEq, Debug, Eq, Hash)]
pub(crate) struct KeyName(String);

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Wide {
    big: i128,
    huge: u128,
    ratio: f32,
}

/// A value whose `Deserialize` never touches the deserializer: what follows it must
/// be checked as `serde_json` checks it (a comma, a colon, a key still unread).
#[derive(PartialEq, Debug, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Untouched;

impl<'de> Deserialize<'de> for Untouched {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(Untouched)
    }
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct HasUntouched {
    a: Untouched,
    b: u32,
}

#[derive(Deserialize, PartialEq, Debug)]
pub(crate) enum UntouchedVariant {
    A(Untouched),
    B,
}

/// Visitors that stop early: the rest of the array or object is left unread.
#[derive(PartialEq, Debug)]
pub(crate) struct Partial(Vec<String>);

pub(crate) struct PartialVisitor {
    entries: usize,
    key_only: bool,
}

impl<'de> Visitor<'de> for PartialVisitor {
    type Value = Partial;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("anything")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Partial, A::Error> {
        let mut read = Vec::new();
        for _ in 0..self.entries {
            match seq.next_element::<Value>()? {
                Some(value) => read.push(value.to_string()),
                None => break,
            }
        }
        Ok(Partial(read))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Partial, A::Error> {
        let mut read = Vec::new();
        for _ in 0..self.entries {
            match map.next_key::<String>()? {
                Some(key) => read.push(key),
                None => break,
            }
            if !self.key_only {
                read.push(map.next_value::<Value>()?.to_string());
            }
        }
        Ok(Partial(read))
    }
}

macro_rules! partial {
    ($name:ident, $entries:expr, $key_only:expr, $method:ident $(, $arg:expr)*) => {
        #[derive(PartialEq, Debug)]
        pub(crate) struct $name(Partial);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let visitor = PartialVisitor {
                    entries: $entries,
                    key_only: $key_only,
                };
                deserializer.$method($($arg,)* visitor).map($name)
            }
        }
    };
}

partial!(NoEntry, 0, false, deserialize_map);
partial!(FirstEntry, 1, false, deserialize_map);
partial!(FirstKey, 1, true, deserialize_map);
partial!(NoElement, 0, false, deserialize_seq);
partial!(FirstElement, 1, false, deserialize_seq);
partial!(
    StructFirstEntry,
    1,
    false,
    deserialize_struct,
    "S",
    &["id", "qty"]
);
partial!(AnyFirstEntry, 1, false, deserialize_any);

/// Text fields that a zero-copy decoder could borrow: here always owned.
#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Texts {
    name: Cow<'static, str>,
    note: Option<Cow<'static, str>>,
    boxed: Box<str>,
    list: Vec<Cow<'static, str>>,
}

/// Every integer width and both floats in one struct.
#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Numbers {
    a: u8,
    b: u16,
    c: u32,
    d: u64,
    e: i8,
    f: i16,
    g: i32,
    h: i64,
    i: f32,
    j: f64,
    k: u128,
    l: i128,
}

/// An internally tagged enum with a newtype variant and a unit variant.
#[derive(Deserialize, PartialEq, Debug)]
#[serde(tag = "kind")]
pub(crate) enum InternalNewtype {
    Order(Order),
    Empty,
}

/// A strict struct nested in a lenient one, with a flattened neighbour.
#[derive(Deserialize, PartialEq, Debug)]
pub(crate) struct Mixed {
    strict: Option<Strict>,
    #[serde(flatten)]
    kind: Option<Internal>,
    #[serde(default)]
    tags: BTreeMap<String, Vec<Option<i16>>>,
}

/// Every target type on one input.
pub(crate) fn all_types(input: &[u8]) {
    same::<Order>(input);
    same::<Tick>(input);
    same::<Named>(input);
    same::<Optional>(input);
    same::<Nested>(input);
    same::<HasKind>(input);
    same::<Kind>(input);
    same::<Side>(input);
    same::<Untagged>(input);
    same::<Internal>(input);
    same::<Adjacent>(input);
    same::<Flat>(input);
    same::<WithMeta>(input);
    same::<Defaults>(input);
    same::<Strict>(input);
    same::<Camel>(input);
    same::<Aliased>(input);
    same::<OddNames>(input);
    same::<Pair>(input);
    same::<Wrapper>(input);
    same::<Nothing>(input);
    same::<Wide>(input);
    same::<Texts>(input);
    same::<Numbers>(input);
    same::<InternalNewtype>(input);
    same::<Mixed>(input);
    same::<Cow<'static, str>>(input);
    same::<HashMap<String, Cow<'static, str>>>(input);
    same::<HashMap<String, u32>>(input);
    same::<HashMap<u32, u32>>(input);
    same::<HashMap<KeyName, u32>>(input);
    same::<HashMap<Side, u32>>(input);
    same::<HashMap<char, u32>>(input);
    same::<BTreeMap<bool, u32>>(input);
    same::<BTreeMap<String, Value>>(input);
    same::<BTreeMap<String, IgnoredAny>>(input);
    same::<Value>(input);
    same::<Vec<Value>>(input);
    same::<serde_json::Map<String, Value>>(input);
    same::<serde_json::Number>(input);
    same::<IgnoredAny>(input);
    same::<(u32, String, bool)>(input);
    same::<(u64, i64)>(input);
    same::<Vec<u64>>(input);
    same::<Vec<u8>>(input);
    same::<Vec<Option<u32>>>(input);
    same::<Option<u32>>(input);
    same::<Option<Order>>(input);
    same::<u8>(input);
    same::<i8>(input);
    same::<u16>(input);
    same::<i16>(input);
    same::<u32>(input);
    same::<i32>(input);
    same::<i64>(input);
    same::<u64>(input);
    same::<i128>(input);
    same::<u128>(input);
    same::<f32>(input);
    same::<f64>(input);
    same::<bool>(input);
    same::<char>(input);
    same::<String>(input);
    same::<Box<str>>(input);
    same::<()>(input);
    same::<IpAddr>(input);
    same::<Untouched>(input);
    same::<HasUntouched>(input);
    same::<UntouchedVariant>(input);
    same::<Vec<Untouched>>(input);
    same::<HashMap<String, Untouched>>(input);
    same::<BTreeMap<Untouched, u32>>(input);
    same::<NoEntry>(input);
    same::<FirstEntry>(input);
    same::<FirstKey>(input);
    same::<NoElement>(input);
    same::<FirstElement>(input);
    same::<StructFirstEntry>(input);
    same::<AnyFirstEntry>(input);
}
