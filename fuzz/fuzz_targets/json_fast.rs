//! `Codec::Json.decode` against `serde_json::from_slice` on any input, into every type
//! of the differential corpus (`crates/ruststream/tests/json_types`): the same value, or
//! the same error message.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/ruststream/tests/json_types/mod.rs"]
mod json_types;

fuzz_target!(|data: &[u8]| {
    json_types::all_types(data);
});
