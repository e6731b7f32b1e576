//! JSON decoding fuzzing: arbitrary bytes decode to a value or a clean error, the same whether
//! decoded whole or read as a stream; decoded values encode back to JSON that decodes to an
//! equal value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ptc_lisp::{Limits, Value};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let whole = Value::from_json_bytes(data, &limits);
    let streamed = Value::from_json_reader(data, &limits);
    assert_eq!(
        whole.as_ref().map(Value::to_string).map_err(|e| e.message().to_string()),
        streamed.as_ref().map(Value::to_string).map_err(|e| e.message().to_string())
    );
    if let Ok(v) = whole {
        if let Ok(text) = v.to_json_string() {
            let again = Value::from_json_bytes(text.as_bytes(), &limits).expect("encoded JSON decodes");
            assert_eq!(again.to_json_string().ok(), Some(text));
        }
    }
});
