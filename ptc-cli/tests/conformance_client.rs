//! The official MCP conformance suite's client scenarios against ptc's MCP client, through
//! scripts/mcp-conformance.sh client (fixtures/conformance/client/peer.sh points `ptc eval` at
//! each scenario's test server): both revisions' required scenarios, the auth suite and the
//! 2026-only auth scenarios among them, and the 2025-03-26 auth back-compat ones. The suite judges
//! each run against fixtures/conformance/expected-failures.yml.
//!
//! `scripts/test` installs the suite; elsewhere, without it, the tests say they were skipped
//! (with CI=true a missing suite fails them).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the script with `ptc` as the client's binary; `None` after saying the suite is missing.
fn run(ptc: &Path, name: &str) -> Option<Output> {
    let suite = root().join("fixtures/conformance/node_modules/@modelcontextprotocol/conformance");
    if !suite.exists() {
        ptc_tests::skip(&format!(
            "the MCP conformance suite is not installed ({} is missing; scripts/test installs it)",
            suite.display()
        ));
        return None;
    }
    let out = ptc_tests::fresh_dir(name);
    Some(
        Command::new(root().join("scripts/mcp-conformance.sh"))
            .arg("client")
            .arg(&out)
            .env("PTC_BIN", ptc)
            .output()
            .expect("scripts/mcp-conformance.sh runs"),
    )
}

#[test]
fn ptc_s_mcp_client_passes_the_suite_s_client_scenarios_but_the_listed_ones() {
    let Some(output) = run(Path::new(env!("CARGO_BIN_EXE_ptc")), "conformance-client") else {
        return;
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for run in ["2025-11-25", "2026-07-28", "backcompat"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{run}: ")))
            .unwrap_or_else(|| panic!("a line for {run} in\n{stdout}"));
        // Every failure is one the expected-failures file lists with its reason.
        let (_, tally) = line.split_once(": ").expect("`run: tally`");
        let numbers: Vec<u64> = tally
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        let [passed, failed, listed, scenarios] = numbers[..] else {
            panic!("{line}");
        };
        assert!(passed > 0 && scenarios > 0, "{line}");
        assert_eq!(failed, listed, "{line}");
    }
}

/// A client that cannot run fails every scenario, and the script says so: its verdict is not
/// a formality.
#[test]
fn a_client_that_does_nothing_fails_the_run() {
    let Some(output) = run(Path::new("/bin/false"), "conformance-client-false") else {
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("the suite's verdict failed"), "{stderr}");
}
