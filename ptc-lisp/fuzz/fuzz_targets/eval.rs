//! Evaluation fuzzing: arbitrary programs (seeded with the conformance corpus) run under tight
//! limits must return a value or a typed error — never panic, overflow the stack or hang.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use ptc_lisp::{Interpreter, Limits};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let limits = Limits {
        timeout: Some(Duration::from_millis(200)),
        max_memory_bytes: 64 << 20,
        max_loop_iterations: 10_000,
        max_steps: Some(1_000_000),
        stack_bytes: 64 << 20,
        ..Limits::default()
    };
    let mut interp = Interpreter::new(limits);
    if let Ok(v) = interp.eval_str(src) {
        let _ = v.to_string();
        let _ = v.to_json_string();
    }
});
