//! The OAuth fixtures' own tests, so a fixture that drifts from the protocol fails here rather
//! than as a mystery in the suites that use it: `fixtures/auth-issuer/test_issuer.py` (the code
//! flow with PKCE, refresh rotation and reuse, revocation, registration) and
//! `fixtures/mcp/test_oauth_server.py` (the server's challenges, token checks and step-up), each
//! with its venv's Python.

use std::path::Path;
use std::process::Command;

fn run(fixture: &str, test: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(fixture);
    let python = dir.join(".venv/bin/python");
    if !python.exists() {
        ptc_tests::skip(&format!(
            "{} is missing (scripts/test installs it)",
            python.display()
        ));
        return;
    }
    let out = Command::new(&python)
        .args(["-m", "unittest", test])
        .current_dir(&dir)
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{fixture}/{test}:\n{stderr}");
    // unittest's summary, e.g. `Ran 22 tests in 1.0s` then `OK`: at least one test ran.
    assert!(
        stderr.contains("\nOK") && !stderr.contains("Ran 0 tests"),
        "{stderr}"
    );
}

#[test]
fn the_test_issuer_keeps_its_own_tests() {
    run("auth-issuer", "test_issuer.py");
}

#[test]
fn the_oauth_mcp_server_keeps_its_own_tests() {
    run("mcp", "test_oauth_server.py");
}
