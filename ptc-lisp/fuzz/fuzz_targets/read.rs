//! Reader fuzzing: any text must read to a value or a clean error, and whatever reads must
//! print and re-read to an equal value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    if let Ok(v) = ptc_lisp::read_value(src) {
        let printed = v.to_string();
        if !printed.contains("##NaN") && !printed.contains("#function") && !printed.contains("#\"") {
            let again = ptc_lisp::read_value(&printed).expect("printed values read back");
            assert_eq!(again.to_string(), printed, "print/read round trip");
        }
    }
});
