//! `Codec::Json.decode` against `serde_json::from_slice`: for every input of a corpus
//! and every target type, the same value or the same error message.
//!
//! The decoder has a fast path of its own for plain documents and falls back to
//! `serde_json` for everything else; these tests check that the difference never
//! shows. The fast path's own coverage (which inputs it takes) is tested beside it, in
//! `src/codec/json/tests.rs`.

#![cfg(feature = "json")]

mod json_types;

use std::collections::{BTreeMap, HashMap};

use json_types::*;
use serde::de::IgnoredAny;
use serde_json::Value;

/// Documents the fast path is meant for, and their neighbours.
const VALID: &[&str] = &[
    r#"{"id":123456,"qty":3}"#,
    r#"{"id":123456,"price":1003,"qty":3,"live":true}"#,
    r#"{"qty":3,"id":123456}"#,
    r#"{"id":0,"qty":0}"#,
    r#"{"id":18446744073709551615,"qty":4294967295}"#,
    r#"{"id":1,"qty":4294967296}"#,
    r#"{"id":1,"qty":-1}"#,
    r#"{"id":1}"#,
    r#"{"id":1,"qty":2,"extra":[1,{"a":[true,false,null]},"x",-5,1.5e3,-0,0.25]}"#,
    r#"{"id":1,"id":2,"qty":3}"#,
    r#"{"id":1,"qty":2,"qty":2}"#,
    r#"[123456,3]"#,
    r#"[123456,3,4]"#,
    r#"[123456]"#,
    r#"[1,2,true]"#,
    r#"[1,"two",true]"#,
    r#"[1,-2]"#,
    r#"{"name":"tea","note":null,"tags":["a","b"]}"#,
    r#"{"name":"tea","tags":[]}"#,
    r#"{"name":"thé","note":"crème brûlée","tags":["日本","🦀"]}"#,
    r#"{"a":1,"b":null,"c":[1,2,255]}"#,
    r#"{"a":null,"b":5,"c":[256]}"#,
    r#"{"a":1,"b":-9223372036854775808}"#,
    r#"{"order":{"id":1,"qty":2},"list":[{"id":3,"qty":4},{"qty":5,"id":6}],"inner":null}"#,
    r#"{"order":{"id":1,"qty":2},"list":[],"inner":{"order":{"id":7,"qty":8},"list":[],"inner":null}}"#,
    r#"{"kind":"A","kinds":["A","A"]}"#,
    r#"{"kind":"B","kinds":[]}"#,
    r#"{"kind":{"B":5},"kinds":[{"C":{"x":1}},"A"]}"#,
    r#"{"kind":"D","kinds":[]}"#,
    r#""A""#,
    r#""B""#,
    r#""C""#,
    r#"{"A":null}"#,
    r#"{"B":7}"#,
    r#"{"C":{"x":9}}"#,
    r#""Buy""#,
    r#""Sell""#,
    r#"{"Buy":1,"Sell":2}"#,
    r#"{"a":1,"b":"x"}"#,
    r#"{"type":"Start","id":5}"#,
    r#"{"id":5,"type":"Stop","reason":"done"}"#,
    r#"{"type":"Pause"}"#,
    r#"{"t":"A","c":3}"#,
    r#"{"t":"B","c":{"x":4}}"#,
    r#"{"t":"C"}"#,
    r#"{"c":3,"t":"A"}"#,
    r#"{"id":1,"source":"feed","seq":2,"more":[1,2]}"#,
    r#"{"id":1,"source":"feed"}"#,
    r#"{"qty":3}"#,
    r#"{"qty":3,"name":"x","id":9}"#,
    r#"{"id":1,"qty":2,"x":1}"#,
    r#"{"orderId":5,"isLive":false}"#,
    r#"{"order_id":5,"is_live":false}"#,
    r#"{"ident":4}"#,
    r#"{"qty":4}"#,
    r#"{"id":4,"ident":5}"#,
    r#"{"a\"b":1}"#,
    r#"{"c\\d":2}"#,
    r#"{"e\nf":3}"#,
    r#"{"":4}"#,
    r#"{"é":5}"#,
    r#"{"\u00e9":5}"#,
    r#"[1,2]"#,
    r#"42"#,
    r#"-42"#,
    r#"0"#,
    r#"255"#,
    r#"256"#,
    r#"-128"#,
    r#"-129"#,
    r#"65535"#,
    r#"65536"#,
    r#"2147483647"#,
    r#"-2147483648"#,
    r#"9223372036854775807"#,
    r#"9223372036854775808"#,
    r#"18446744073709551615"#,
    r#"18446744073709551616"#,
    r#"-9223372036854775808"#,
    r#"-9223372036854775809"#,
    r#"-18446744073709551615"#,
    r#"-18446744073709551616"#,
    r#"123456789012345678901234567890"#,
    r#"-0"#,
    r#"-00"#,
    r#"00"#,
    r#"01"#,
    r#"1e3"#,
    r#"1E3"#,
    r#"1e+3"#,
    r#"1e-3"#,
    r#"1.5"#,
    r#"-1.5"#,
    r#"1."#,
    r#".5"#,
    r#"1.0"#,
    r#"-"#,
    r#"+1"#,
    r#"true"#,
    r#"false"#,
    r#"null"#,
    r#"nul"#,
    r#"nulls"#,
    r#"tru"#,
    r#"True"#,
    r#""x""#,
    r#""xy""#,
    r#""é""#,
    r#""""#,
    r#""hello world""#,
    r#""192.168.0.1""#,
    r#""::1""#,
    r#"{"true":1,"false":2}"#,
    r#"{"1":2,"3":4}"#,
    r#"{"-1":2}"#,
    r#"{"01":2}"#,
    r#"{"1.5":2}"#,
    r#"{"x":1,"y":2}"#,
    r#"{"x":{"y":{"z":[1,[2,[3]]]}}}"#,
    r#"{"big":170141183460469231731687303715884105727,"huge":1,"ratio":0.5}"#,
    r#"{"big":1,"huge":2,"ratio":3}"#,
    r#"[]"#,
    r#"{}"#,
    r#"[[]]"#,
    r#"[{}]"#,
    r#"[null,1,null]"#,
    r#"[1,2,3,4,5,6,7,8,9,10]"#,
    r#"{"$serde_json::private::Number":"1"}"#,
    r#""A""#,
    r#"[]"#,
    r#"[,]"#,
    r#"[1,]"#,
    r#"[,1]"#,
    r#"{"a":1,"b":2}"#,
    r#"{"a":1,}"#,
    r#"{"a":}"#,
    r#"{"a"}"#,
    r#"{"a":1 "b":2}"#,
    r#"{"a"1}"#,
    r#"{"b":7,"a":1}"#,
    r#"{"$serde_json::private::RawValue":"[1]"}"#,
];

/// Whitespace, escapes, control characters and other syntax that is not the fast
/// path's, or not JSON.
const ODD: &[&[u8]] = &[
    b"",
    b" ",
    b"\t\n\r ",
    b" {\"id\" : 1 , \"qty\" : 2 } ",
    b"\n{\n\t\"id\": 1,\n\t\"qty\": 2\n}\n",
    b"\r\n[ 1 , 2 ]\r\n",
    b"{ }",
    b"[ ]",
    b"[\n]",
    b"\x0c{\"id\":1,\"qty\":2}",
    b"{\"id\":1,\"qty\":2}\x0c",
    b"\xef\xbb\xbf{\"id\":1,\"qty\":2}",
    b"{\"id\":1,\"qty\":2}x",
    b"{\"id\":1,\"qty\":2}}",
    b"{\"id\":1,\"qty\":2},",
    b"{\"id\":1,\"qty\":2} {}",
    b"{\"id\":1,\"qty\":2}\x00",
    b"{\"id\":1,,\"qty\":2}",
    b"{\"id\":1,\"qty\":2,}",
    b"{,\"id\":1}",
    b"{\"id\" 1}",
    b"{\"id\"::1}",
    b"{id:1}",
    b"{'id':1}",
    b"{\"id\":1 \"qty\":2}",
    b"[1,]",
    b"[,1]",
    b"[1 2]",
    b"[1,,2]",
    b"{\"name\":\"a\\\"b\",\"tags\":[]}",
    b"{\"name\":\"line\\nbreak\",\"tags\":[]}",
    b"{\"name\":\"\\u00e9\",\"tags\":[]}",
    b"{\"name\":\"\\ud83e\\udd80\",\"tags\":[]}",
    b"{\"name\":\"\\ud83e\",\"tags\":[]}",
    b"{\"name\":\"\\x\",\"tags\":[]}",
    b"{\"name\":\"tab\there\",\"tags\":[]}",
    b"{\"name\":\"nul\x00here\",\"tags\":[]}",
    b"{\"name\":\"del\x7fhere\",\"tags\":[]}",
    b"{\"name\":\"bad \xff utf8\",\"tags\":[]}",
    b"{\"name\":\"overlong \xc0\xaf\",\"tags\":[]}",
    b"{\"name\":\"surrogate \xed\xa0\x80\",\"tags\":[]}",
    b"{\"name\":\"cut \xe6\x97\",\"tags\":[]}",
    b"{\"na\xffme\":\"x\",\"tags\":[]}",
    b"{\"id\":1,\"qty\":2,\"skipped\":\"bad \xff utf8\"}",
    b"{\"id\":1,\"qty\":2,\"skipped\":{\"k\xff\":\"\xfe\"}}",
    b"{\"id\":1,\"qty\":2,\"skipped\":\"ctl\x01\"}",
    b"{\"id\":1,\"qty\":2,\"skipped\":\"esc\\\"aped\"}",
    b"{\"id\":1,\"qty\":2}\xff",
    b"\xff",
    b"\"\xff\"",
    b"\"\\u0041\"",
    b"\"\\\"\"",
    b"\"a",
    b"\"",
    b"{\"id\":1\xff,\"qty\":2}",
    b"{\"\xce\xb1\":1}",
    b"{\"id\":+1,\"qty\":2}",
    b"{\"id\":0x1,\"qty\":2}",
    b"{\"id\":1.0,\"qty\":2}",
    b"{\"id\":1e2,\"qty\":2}",
    b"{\"id\":-0,\"qty\":2}",
    b"{\"id\":01,\"qty\":2}",
    b"{\"id\":NaN,\"qty\":2}",
    b"{\"id\":Infinity,\"qty\":2}",
    b"{\"id\":1,\"qty\":2,\"x\":1.}",
    b"{\"id\":1,\"qty\":2,\"x\":1.e5}",
    b"{\"id\":1,\"qty\":2,\"x\":1e}",
    b"{\"id\":1,\"qty\":2,\"x\":1e+}",
    b"{\"id\":1,\"qty\":2,\"x\":-}",
    b"{\"id\":1,\"qty\":2,\"x\":-a}",
    b"{\"id\":1,\"qty\":2,\"x\":01}",
    b"{\"id\":1,\"qty\":2,\"x\":-01}",
    b"{\"id\":1,\"qty\":2,\"x\":123456789012345678901234567890}",
    b"{\"id\":1,\"qty\":2,\"x\":[1,]}",
    b"{\"id\":1,\"qty\":2,\"x\":{\"a\":1,}}",
    b"{\"id\":1,\"qty\":2,\"x\":{\"a\"}}",
    b"{\"id\":1,\"qty\":2,\"x\":{1:1}}",
    b"{\"id\":1,\"qty\":2,\"x\":tru}",
    b"{\"id\":1,\"qty\":2,\"x\":[}",
    b"{\"id\":1,\"qty\":2,\"x\":]}",
    b"{\"a\"b\":1}",
    b"{\"c\\d\":2}",
    b"{\"e\nf\":3}",
    b"{\"\":4,\"\":5}",
];

#[test]
fn valid_documents_and_their_neighbours() {
    for input in VALID {
        all_types(input.as_bytes());
    }
}

#[test]
fn whitespace_escapes_control_characters_and_syntax_errors() {
    for input in ODD {
        all_types(input);
    }
}

#[test]
fn every_truncation() {
    let documents: &[&[u8]] = &[
        br#"{"id":123456,"qty":3}"#,
        br#"{"id":123456,"price":1003,"qty":3,"live":true}"#,
        r#"{"name":"thé","note":null,"tags":["a","日本"]}"#.as_bytes(),
        br#"{"order":{"id":1,"qty":2},"list":[{"id":3,"qty":4}],"inner":null}"#,
        br#"{"id":1,"qty":2,"extra":[1.5e3,-0,{"a":[true,false,null]},"x"]}"#,
        br#"[1,-2,"three",[4],{"five":5},true,false,null]"#,
        b" { \"id\" : 18446744073709551615 , \"qty\" : 4294967295 } ",
    ];
    for document in documents {
        for end in 0..=document.len() {
            let cut = &document[..end];
            all_types(cut);
            // And everything after the cut, which starts mid-document.
            all_types(&document[end..]);
        }
    }
}

#[test]
fn deep_nesting() {
    for depth in [1, 2, 100, 126, 127, 128, 129, 200] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        same::<Value>(arrays.as_bytes());
        same::<IgnoredAny>(arrays.as_bytes());
        let open = "[".repeat(depth);
        same::<Value>(open.as_bytes());
        let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        same::<Value>(objects.as_bytes());
        same::<IgnoredAny>(objects.as_bytes());
        // Deep inside a field the struct does not know (skipped).
        let skipped = format!(r#"{{"id":1,"qty":2,"deep":{arrays}}}"#);
        same::<Order>(skipped.as_bytes());
        same::<Value>(skipped.as_bytes());
        // Deep through nested structs.
        let mut nested = String::from(r#"{"order":{"id":1,"qty":2},"list":[],"inner":null}"#);
        for _ in 1..depth {
            nested = format!(r#"{{"order":{{"id":1,"qty":2}},"list":[],"inner":{nested}}}"#);
        }
        same::<Nested>(nested.as_bytes());
    }
}

#[test]
fn null_for_an_option_and_for_the_rest() {
    for input in ["null", " null ", "{\"a\":null,\"b\":null,\"c\":null}"] {
        all_types(input.as_bytes());
    }
}

#[test]
fn long_strings_and_many_keys() {
    let long = "x".repeat(10_000);
    let doc = format!(r#"{{"name":"{long}","note":"{long}é","tags":["{long}"]}}"#);
    same::<Named>(doc.as_bytes());
    same::<Value>(doc.as_bytes());
    let many: Vec<String> = (0..1000).map(|i| format!(r#""k{i}":{i}"#)).collect();
    let doc = format!("{{{}}}", many.join(","));
    same::<HashMap<String, u32>>(doc.as_bytes());
    same::<BTreeMap<String, Value>>(doc.as_bytes());
    same::<Value>(doc.as_bytes());
    same::<Order>(doc.as_bytes());
}
