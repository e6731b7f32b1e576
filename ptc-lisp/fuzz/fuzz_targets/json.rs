//! JSON decoding fuzzing: arbitrary bytes decode to a value or a clean error; decoded values
//! encode back to JSON that decodes to an equal value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ptc_lisp::{Limits, Value};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    if let Ok(v) = Value::from_json_bytes(data, &limits) {
        if let Ok(text) = v.to_json_string() {
            let again = Value::from_json_bytes(text.as_bytes(), &limits).expect("encoded JSON decodes");
            assert_eq!(again.to_json_string().ok(), Some(text));
        }
    }
});
