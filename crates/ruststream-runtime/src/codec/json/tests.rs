//! The fast path's coverage (what it takes, what it leaves to `serde_json`) and a
//! generated differential corpus. The hand-written corpus over many target types is
//! in `tests/json_fast.rs`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::{fast, from_slice};
use serde::de::DeserializeOwned;

#[derive(Deserialize, PartialEq, Debug)]
struct Order {
    id: u64,
    qty: u32,
}

#[derive(Deserialize, PartialEq, Debug)]
struct Tick {
    id: u64,
    price: u32,
    qty: u32,
    live: bool,
}

#[derive(Deserialize, PartialEq, Debug)]
struct Loose {
    id: Option<i64>,
    name: Option<String>,
    tags: Option<Vec<String>>,
    live: Option<bool>,
    inner: Option<Box<Loose>>,
    #[serde(default)]
    list: Vec<Value>,
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(deny_unknown_fields)]
struct Strict {
    id: u64,
    qty: u32,
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(untagged)]
enum Untagged {
    Order(Order),
    Number(i64),
    Text(String),
    List(Vec<Untagged>),
    Other(Value),
}

#[derive(Deserialize, PartialEq, Debug)]
struct Flat {
    id: u64,
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

#[derive(Deserialize, PartialEq, Debug)]
enum Side {
    Buy,
    Sell,
}

/// A newtype named like `serde_json`'s private ones (`RawValue`, the
/// `arbitrary_precision` number), whose meaning depends on its features.
#[derive(Deserialize, PartialEq, Debug)]
#[serde(rename = "$serde_json::private::RawValue")]
struct LooksRaw(String);

#[derive(Deserialize, PartialEq, Debug)]
struct Trade {
    side: Side,
    qty: u32,
}

/// Decodes `input` with [`from_slice`] and with `serde_json`, and asserts the same
/// value or the same error message; when the fast path alone takes the input, asserts
/// its value is `serde_json`'s too. Returns whether the fast path took it.
fn check<T: DeserializeOwned + PartialEq + Debug>(input: &[u8]) -> bool {
    let reference = serde_json::from_slice::<T>(input);
    let shown = || {
        format!(
            "input {:?} into {}",
            String::from_utf8_lossy(input),
            std::any::type_name::<T>()
        )
    };
    match (from_slice::<T>(input), &reference) {
        (Ok(ours), Ok(reference)) => assert_eq!(&ours, reference, "{}", shown()),
        (Err(ours), Err(reference)) => {
            assert_eq!(ours.to_string(), reference.to_string(), "{}", shown());
        }
        (ours, reference) => panic!("{}: ours {ours:?}, serde_json {reference:?}", shown()),
    }
    match fast::<T>(input) {
        Some(value) => {
            assert_eq!(reference.as_ref().ok(), Some(&value), "{}", shown());
            true
        }
        None => false,
    }
}

fn takes<T: DeserializeOwned + PartialEq + Debug>(input: &str) {
    assert!(
        check::<T>(input.as_bytes()),
        "the fast path should take {input:?} into {}",
        std::any::type_name::<T>()
    );
}

/// A document with a float: the fast path takes it unless `serde_json` keeps numbers as
/// text (`arbitrary_precision`); the result is `serde_json`'s either way.
fn takes_float<T: DeserializeOwned + PartialEq + Debug>(input: &str) {
    assert_eq!(
        check::<T>(input.as_bytes()),
        super::number::floats_are_f64(),
        "the fast path should take {input:?} into {} unless serde_json keeps numbers as text",
        std::any::type_name::<T>()
    );
}

fn declines<T: DeserializeOwned + PartialEq + Debug>(input: &[u8]) {
    assert!(
        !check::<T>(input),
        "the fast path should leave {:?} into {} to serde_json",
        String::from_utf8_lossy(input),
        std::any::type_name::<T>()
    );
}

#[test]
fn takes_plain_documents() {
    takes::<Order>(r#"{"id":123456,"qty":3}"#);
    takes::<Order>(r#"{"qty":3,"id":123456}"#);
    takes::<Order>(" {\n\t\"id\" : 123456 ,\r\n \"qty\" : 3 } \n");
    takes::<Order>(r#"{"id":1,"qty":2,"skip":[1.5,-0,2e10,{"a":null},"x\u00e9"]}"#);
    takes::<Order>(r#"[1,2]"#);
    takes::<Tick>(r#"{"id":123456,"price":1003,"qty":3,"live":true}"#);
    takes::<Strict>(r#"{"id":18446744073709551615,"qty":4294967295}"#);
    takes::<Trade>(r#"{"side":"Sell","qty":1}"#);
    takes::<Side>(r#""Buy""#);
    takes::<Loose>(
        r#"{"id":-9223372036854775808,"name":"thé 日本 🦀","tags":["a",""],"live":false,"inner":{"id":0},"list":[null,[],{}]}"#,
    );
    takes::<Loose>(r#"{"name":null,"extra":"\u0000 is an escape, skipped"}"#);
    takes::<Untagged>(r#"[{"id":1,"qty":2},-5,"x",[true]]"#);
    takes::<Flat>(r#"{"a":1,"id":2,"b":[3]}"#);
    takes::<Value>(r#"{"a":[1,-2,true,false,null,"s",{"b":{}}],"c":"é"}"#);
    takes::<HashMap<String, u32>>(r#"{"a":1,"b":2,"é":3}"#);
    takes::<BTreeMap<String, Value>>(r#"{"a":[1],"b":{"c":null}}"#);
    takes::<Vec<Option<u8>>>(r#"[1,null,255]"#);
    takes::<(u64, String, bool)>(r#"[1,"two",true]"#);
    takes::<i64>("-1");
    takes::<u64>("18446744073709551615");
    takes::<i8>("-128");
    takes::<char>(r#""é""#);
    takes::<String>(r#""""#);
    takes::<()>("null");
    takes::<Option<u32>>("null");
    takes::<IgnoredAny>(r#"[1.5e3,{"a":"b"},-0]"#);
    // Floats: read by serde_json from the number's own bytes.
    for number in [
        "1.5",
        "-2.25",
        "1e3",
        "1E3",
        "1e-3",
        "2.5E+10",
        "-0",
        "-0.0",
        "0.1",
        "1.7976931348623157e308",
        "5e-324",
        "18446744073709551616",
        "-9223372036854775809",
        "123456789012345678901",
    ] {
        takes_float::<Value>(number);
        takes_float::<f64>(number);
        takes_float::<serde_json::Number>(number);
    }
    takes::<f64>("1");
    takes::<f64>("-7");
    #[derive(Deserialize, PartialEq, Debug)]
    struct Priced {
        id: u64,
        price: f64,
        qty: u32,
    }
    takes_float::<Priced>(r#"{"id":1,"price":10.5,"qty":3}"#);
    takes::<Priced>(r#"{"id":1,"price":10,"qty":3}"#);
    takes_float::<Value>(r#"{"p":[0.5,-1e-7,3.0e2]}"#);
    // A skipped string is not checked as UTF-8 (nor by serde_json).
    assert!(check::<Order>(b"{\"id\":1,\"qty\":2,\"x\":\"\xff\"}"));
    // 127 nested arrays pass in serde_json.
    let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
    takes::<Value>(&deep);
}

#[test]
fn leaves_the_rest_to_serde_json() {
    // Escapes, control characters, bad UTF-8 in a string that is read.
    declines::<Value>(br#""a\"b""#);
    declines::<Value>(br#""\u00e9""#);
    declines::<Value>(b"\"tab\there\"");
    declines::<Value>(b"\"\xff\"");
    declines::<Value>(br#"{"a\nb":1}"#);
    // Numbers serde_json refuses; out-of-range floats; `f32` (single precision under
    // `float_roundtrip`), 128-bit integers.
    for number in ["01", "-01", "1.", ".5", "1e", "-", "1e400", "-1e400"] {
        declines::<Value>(number.as_bytes());
    }
    declines::<f32>(b"1");
    declines::<f32>(b"1.5");
    declines::<i128>(b"1");
    declines::<u128>(b"1");
    // Structure: trailing characters, commas, the recursion limit.
    declines::<Order>(br#"{"id":1,"qty":2}x"#);
    declines::<Order>(br#"{"id":1,"qty":2,}"#);
    declines::<Vec<u32>>(b"[1,]");
    declines::<Vec<u32>>(b"");
    let too_deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
    declines::<Value>(too_deep.as_bytes());
    declines::<IgnoredAny>(too_deep.as_bytes());
    // Errors of the type: missing, unknown or duplicate fields, wrong types, ranges.
    declines::<Order>(br#"{"id":1}"#);
    declines::<Order>(br#"{"id":1,"id":1,"qty":2}"#);
    declines::<Strict>(br#"{"id":1,"qty":2,"x":3}"#);
    declines::<Order>(br#"{"id":"1","qty":2}"#);
    declines::<Order>(br#"{"id":1,"qty":4294967296}"#);
    declines::<u32>(b"null");
    // Requests the fast path does not serve.
    declines::<HashMap<u32, u32>>(br#"{"1":2}"#);
    declines::<HashMap<bool, u32>>(br#"{"true":2}"#);
    declines::<Vec<Side>>(br#"[{"Buy":null}]"#);
    declines::<LooksRaw>(br#""[1]""#);
}

/// A seeded xorshift64*: the same corpus on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Random JSON text: mostly what the fast path takes, with a share of floats, escapes,
/// big numbers, odd whitespace and the like.
struct Generator {
    rng: Rng,
}

const KEYS: &[&str] = &[
    "id", "qty", "price", "live", "name", "tags", "inner", "list", "side", "a", "b", "é", "日本",
    "", "x y",
];

impl Generator {
    fn whitespace(&mut self, out: &mut String) {
        if self.rng.chance(15) {
            for _ in 0..=self.rng.below(3) {
                out.push(*self.rng.pick(&[' ', '\n', '\t', '\r']));
            }
        }
    }

    fn number(&mut self, out: &mut String) {
        let text = match self.rng.below(20) {
            0 => "0".to_string(),
            1 => "-0".to_string(),
            2 => u64::MAX.to_string(),
            3 => i64::MIN.to_string(),
            4 => "18446744073709551616".to_string(),
            5 => "-9223372036854775809".to_string(),
            6 => format!("{}.{}", self.rng.below(1000), self.rng.below(1000)),
            7 => format!("{}e{}", self.rng.below(100), self.rng.below(30)),
            8 => format!("-{}", self.rng.next() >> self.rng.below(64)),
            9 => (self.rng.next() >> self.rng.below(64)).to_string(),
            10 => "255".to_string(),
            11 => "-128".to_string(),
            12 => "4294967295".to_string(),
            13 => "4294967296".to_string(),
            _ => self.rng.below(100_000).to_string(),
        };
        out.push_str(&text);
    }

    fn string(&mut self, out: &mut String) {
        out.push('"');
        for _ in 0..self.rng.below(8) {
            let piece = match self.rng.below(40) {
                0 => "\\\"",
                1 => "\\n",
                2 => "\\u00e9",
                3 => "\\ud83e\\udd80",
                4 => "\\\\",
                5 => "é",
                6 => "日本",
                7 => "🦀",
                8 => "\u{7f}",
                _ => *self
                    .rng
                    .pick(&["a", "b", "id", "qty", " ", "Buy", "Sell", "x", "1"]),
            };
            out.push_str(piece);
        }
        out.push('"');
    }

    fn key(&mut self, out: &mut String) {
        if self.rng.chance(90) {
            out.push('"');
            out.push_str(self.rng.pick::<&str>(KEYS));
            out.push('"');
        } else {
            self.string(out);
        }
    }

    fn value(&mut self, out: &mut String, depth: usize) {
        self.whitespace(out);
        let kinds = if depth >= 4 { 6 } else { 9 };
        match self.rng.below(kinds) {
            0 => out.push_str("null"),
            1 => out.push_str(if self.rng.chance(50) { "true" } else { "false" }),
            2 | 3 => self.number(out),
            4 | 5 => self.string(out),
            6 => {
                out.push('[');
                for i in 0..self.rng.below(5) {
                    if i > 0 {
                        out.push(',');
                    }
                    self.value(out, depth + 1);
                }
                self.whitespace(out);
                out.push(']');
            }
            _ => self.object(out, depth + 1),
        }
        self.whitespace(out);
    }

    fn object(&mut self, out: &mut String, depth: usize) {
        out.push('{');
        for i in 0..self.rng.below(6) {
            if i > 0 {
                out.push(',');
            }
            self.whitespace(out);
            self.key(out);
            self.whitespace(out);
            out.push(':');
            self.value(out, depth);
        }
        self.whitespace(out);
        out.push('}');
    }

    /// An object shaped like `Order`/`Tick`, sometimes with a field missing, added,
    /// repeated or of the wrong type.
    fn record(&mut self, out: &mut String) {
        let mut fields: Vec<String> = vec![
            format!("\"id\":{}", self.rng.below(1_000_000)),
            format!("\"qty\":{}", self.rng.below(100)),
        ];
        if self.rng.chance(50) {
            fields.push(format!("\"price\":{}", self.rng.below(10_000)));
            fields.push(format!("\"live\":{}", self.rng.chance(50)));
        }
        if self.rng.chance(15) {
            let mut extra = String::new();
            self.key(&mut extra);
            extra.push(':');
            self.value(&mut extra, 1);
            fields.push(extra);
        }
        if self.rng.chance(10) {
            fields.remove(self.rng.below(fields.len()));
        }
        if self.rng.chance(5) {
            let repeated = fields[self.rng.below(fields.len())].clone();
            fields.push(repeated);
        }
        if self.rng.chance(10) {
            let mut wrong = String::new();
            self.number(&mut wrong);
            fields[0] = format!("\"id\":{wrong}");
        }
        if self.rng.chance(30) {
            let n = fields.len();
            fields.swap(self.rng.below(n), self.rng.below(n));
        }
        self.whitespace(out);
        out.push('{');
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            self.whitespace(out);
            out.push_str(field);
        }
        out.push('}');
        self.whitespace(out);
    }

    fn document(&mut self) -> String {
        let mut out = String::new();
        if self.rng.chance(40) {
            self.record(&mut out);
        } else {
            self.value(&mut out, 0);
        }
        out
    }

    /// `document` with one random edit: a byte replaced, removed or inserted, or the
    /// end cut off.
    fn mutate(&mut self, document: &[u8]) -> Vec<u8> {
        const BYTES: &[u8] = b"\"\\,:{}[]0-.eE ntf\x00\x01\x7f\xff\xc3\xa9\xe6";
        let mut bytes = document.to_vec();
        let at = self.rng.below(bytes.len() + 1);
        match self.rng.below(4) {
            0 if at < bytes.len() => bytes[at] = *self.rng.pick(BYTES),
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            2 => bytes.insert(at, *self.rng.pick(BYTES)),
            _ => bytes.truncate(at),
        }
        bytes
    }
}

/// Every type of the generated corpus on one input; the count of fast decodes.
fn check_all(input: &[u8]) -> [bool; 10] {
    [
        check::<Value>(input),
        check::<Order>(input),
        check::<Tick>(input),
        check::<Loose>(input),
        check::<Strict>(input),
        check::<Untagged>(input),
        check::<Flat>(input),
        check::<HashMap<String, Value>>(input),
        check::<Vec<Value>>(input),
        check::<IgnoredAny>(input),
    ]
}

#[test]
fn generated_corpus() {
    let mut generator = Generator {
        rng: Rng(0x005e_ed0f_7e57_da7a),
    };
    let documents = 4000;
    let mutations = 4;
    let mut fast_documents = [0usize; 10];
    let mut fast_mutations = [0usize; 10];
    for _ in 0..documents {
        let document = generator.document();
        for (count, took) in fast_documents
            .iter_mut()
            .zip(check_all(document.as_bytes()))
        {
            *count += usize::from(took);
        }
        for _ in 0..mutations {
            let mutated = generator.mutate(document.as_bytes());
            for (count, took) in fast_mutations.iter_mut().zip(check_all(&mutated)) {
                *count += usize::from(took);
            }
        }
    }
    eprintln!(
        "{documents} documents, {} mutations; fast-path decodes per type \
         (Value, Order, Tick, Loose, Strict, Untagged, Flat, HashMap, Vec, IgnoredAny): \
         documents {fast_documents:?}, mutations {fast_mutations:?}",
        documents * mutations
    );
    // The corpus reaches the fast path, not only the fallback.
    assert!(fast_documents[0] > documents / 2, "{fast_documents:?}");
    assert!(fast_documents[1] > documents / 5, "{fast_documents:?}");
    assert!(fast_documents[9] > documents / 2, "{fast_documents:?}");
    assert!(
        fast_mutations[0] > documents * mutations / 8,
        "{fast_mutations:?}"
    );
}

#[test]
fn random_bytes() {
    const ALPHABET: &[u8] = b"{}[]\",:0123456789-.eE \n\ttruefalsnl\\u\x00\xc3\xa9\xffabidqty";
    let mut rng = Rng(0x0bad_c0de_1234_5678);
    for _ in 0..20_000 {
        let len = rng.below(24);
        let input: Vec<u8> = (0..len).map(|_| *rng.pick(ALPHABET)).collect();
        check_all(&input);
    }
}
