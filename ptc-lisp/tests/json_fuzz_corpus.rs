//! The json fuzz target's committed corpus, replayed on stable Rust with the target's own
//! property: every input decodes to a value or a clean error, and a decoded value encodes to JSON
//! that decodes to a value encoding to the same JSON. (`cargo fuzz run json` explores further; this keeps what it
//! found in every test run.)

use ptc_lisp::{Limits, Value};

#[test]
fn every_corpus_input_decodes_cleanly_and_round_trips() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/json");
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    assert!(entries.len() > 1000, "{} corpus files", entries.len());
    let limits = Limits::default();
    let mut decoded = 0;
    for path in &entries {
        let data = std::fs::read(path).expect("a corpus file");
        let Ok(v) = Value::from_json_bytes(&data, &limits) else {
            continue;
        };
        decoded += 1;
        if let Ok(text) = v.to_json_string() {
            let again = Value::from_json_bytes(text.as_bytes(), &limits)
                .unwrap_or_else(|e| panic!("{}: re-encoded JSON fails: {e}", path.display()));
            // (Not `again == v`: a number too large for a double decodes as ##Inf, which
            // encodes as null.)
            assert_eq!(
                again.to_json_string().ok(),
                Some(text),
                "{}",
                path.display()
            );
        }
    }
    assert!(decoded > 100, "only {decoded} inputs decoded");
}
