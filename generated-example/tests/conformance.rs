//! The official MCP conformance suite (npm's `@modelcontextprotocol/conformance`, pinned in
//! fixtures/conformance with the Node.js it needs) against `generated-example serve --http` on
//! loopback: the server scenarios each spec revision requires, 2025-11-25 (the `initialize`
//! handshake) and 2026-07-28 (stateless requests). The suite judges each run against
//! `fixtures/conformance/expected-failures.yml`: a failing check not listed there, or a listed one
//! that passes, fails the run and so the test.
//!
//! `scripts/test` installs the suite; elsewhere, without it, the tests that run it say they were
//! skipped (with CI=true a missing suite fails them).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use observatory_server::TokenSpec;

const BIN: &str = env!("CARGO_BIN_EXE_generated-example");
/// The requirement sets run: every revision the host serves.
const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];
/// The longest one scenario may take, in milliseconds (the suite's default is 30 s): a hung
/// scenario fails in that time instead of holding the test.
const SCENARIO_TIMEOUT_MS: &str = "20000";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/conformance")
}

fn baseline() -> PathBuf {
    fixture().join("expected-failures.yml")
}

/// The installed suite: its Node.js and its command line.
struct Suite {
    node: PathBuf,
    cli: PathBuf,
}

/// The suite, or `None` after [`ptc_tests::skip`] says how to install it.
fn suite() -> Option<Suite> {
    let modules = fixture().join("node_modules");
    let suite = Suite {
        node: modules.join(".bin/node"),
        cli: modules.join("@modelcontextprotocol/conformance/dist/index.js"),
    };
    for part in [&suite.node, &suite.cli] {
        if !part.exists() {
            ptc_tests::skip(&format!(
                "the MCP conformance suite is not installed ({} is missing; scripts/test \
                 installs it)",
                part.display()
            ));
            return None;
        }
    }
    Some(suite)
}

/// What one run of a requirement set printed, and whether it passed.
struct Run {
    passed: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The entries the suite printed under `heading` (its baseline verdict: "Unexpected
    /// failures", "Stale baseline entries", "Expected failures").
    fn listed_under(&self, heading: &str) -> BTreeSet<String> {
        let plain = strip_colours(&self.stdout);
        let mut lines = plain.lines().skip_while(|l| !l.starts_with(heading));
        lines.next();
        lines
            .map_while(|l| {
                l.strip_prefix("  ")
                    .and_then(|entry| entry.split_once(' '))
                    .map(|(_, entry)| entry.trim().to_string())
            })
            .collect()
    }

    /// The number of scenarios the run announced.
    fn scenarios(&self) -> usize {
        let line = self
            .stdout
            .lines()
            .find(|l| l.starts_with("Running requirements "))
            .unwrap_or_else(|| panic!("the run names its scenarios\n{}", self.stdout));
        line.split('(')
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a count in {line:?}"))
    }
}

impl Suite {
    /// Runs `revision`'s server scenarios against `url` with `baseline` as the expected failures;
    /// the results (one `checks.json` per scenario) go to `out`.
    fn run(&self, url: &str, revision: &str, baseline: &Path, out: &Path) -> Run {
        let output = Command::new(&self.node)
            .arg(&self.cli)
            .args(["server", "--url", url, "--requirements", revision])
            .arg("--expected-failures")
            .arg(baseline)
            .arg("--output-dir")
            .arg(out)
            .args(["--timeout", SCENARIO_TIMEOUT_MS])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.node.display()));
        Run {
            passed: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// `text` without its ANSI colour codes.
fn strip_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Every failing or warning check under `out` (`scenario:check-id status: message`), for a
/// failure message.
fn failing_checks(out: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(dirs) = std::fs::read_dir(out) else {
        return found;
    };
    for dir in dirs.flatten() {
        let Ok(text) = std::fs::read_to_string(dir.path().join("checks.json")) else {
            continue;
        };
        let checks: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let scenario = dir.file_name().to_string_lossy().into_owned();
        for check in checks.as_array().into_iter().flatten() {
            let status = check["status"].as_str().unwrap_or("");
            if status == "FAILURE" || status == "WARNING" {
                found.push(format!(
                    "{scenario}: {} {status}: {}",
                    check["id"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or("")
                ));
            }
        }
    }
    found.sort();
    found
}

/// The scenarios under `out` whose run recorded no check at all (or no `checks.json`): a
/// scenario that checked nothing proved nothing, so it counts as failed whatever its verdict.
fn scenarios_without_checks(out: &Path) -> Vec<String> {
    let mut empty: Vec<String> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|dir| dir.path().is_dir())
        .filter(|dir| {
            let checks = std::fs::read_to_string(dir.path().join("checks.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
            checks
                .as_ref()
                .and_then(serde_json::Value::as_array)
                .is_none_or(Vec::is_empty)
        })
        .map(|dir| dir.file_name().to_string_lossy().into_owned())
        .collect();
    empty.sort();
    empty
}

/// `generated-example serve --http 127.0.0.1:0` pointed at the Observatory test bed (nothing
/// the suite does should reach an upstream, and nothing may leave the machine), killed when
/// dropped; its stderr is read on a thread so it never blocks on a full pipe.
struct Server {
    child: Child,
    url: String,
    log: Option<JoinHandle<Vec<String>>>,
    _bed: ptc_tests::bed::FlaggedBed,
}

impl Server {
    fn start(name: &str) -> Server {
        let bed = ptc_tests::bed::start(
            &format!("conformance-{name}"),
            TokenSpec::full_access("tok_conformance", "obs_conformance_test_3f9a1c0d"),
        );
        let mut child = Command::new(BIN)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(&bed.flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("the server says where it listens")
                .expect("stderr reads");
            if let Some(rest) = line.split("listening on ").nth(1)
                && line.starts_with("generated-example:")
            {
                break rest.trim().to_string();
            }
        };
        let log = std::thread::spawn(move || lines.map_while(Result::ok).collect());
        Server {
            child,
            url,
            log: Some(log),
            _bed: bed,
        }
    }

    /// Stops the server; the last lines it logged.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let lines = self
            .log
            .take()
            .map(|log| log.join().unwrap_or_default())
            .unwrap_or_default();
        let tail = lines.len().saturating_sub(40);
        lines[tail..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The entries of the expected-failures file, each with its reason; panics on an entry without
/// one.
fn expected_failures(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('-'))
        .map(|l| {
            let (entry, reason) = l[1..]
                .split_once('#')
                .unwrap_or_else(|| panic!("`{l}` gives no reason (`- entry # reason`)"));
            let reason = reason.trim();
            assert!(!reason.is_empty(), "`{l}` gives an empty reason");
            (entry.trim().to_string(), reason.to_string())
        })
        .collect()
}

#[test]
fn every_expected_failure_names_one_check_once_with_its_reason() {
    let text = std::fs::read_to_string(baseline()).expect("the expected-failures file");
    let entries = expected_failures(&text);
    assert!(!entries.is_empty());
    let mut seen = BTreeSet::new();
    for (entry, _) in &entries {
        let (scenario, check) = entry
            .split_once(':')
            .unwrap_or_else(|| panic!("`{entry}` is a whole scenario; name its failing check"));
        assert!(
            !scenario.is_empty() && !check.is_empty() && !check.contains(' '),
            "`{entry}` is not `<scenario>:<check-id>`"
        );
        assert!(seen.insert(entry.clone()), "`{entry}` is listed twice");
    }
}

#[test]
fn the_required_server_scenarios_of_both_revisions_pass_but_the_expected_failures() {
    let Some(suite) = suite() else {
        return;
    };
    let server = Server::start("revisions");
    let mut failed = Vec::new();
    let mut outs = Vec::new();
    for revision in REVISIONS {
        let out = ptc_tests::fresh_dir(&format!("conformance-{revision}"));
        let run = suite.run(&server.url, revision, &baseline(), &out);
        assert!(
            run.scenarios() > 0,
            "{revision}: no scenario ran\n{}",
            run.stdout
        );
        let recorded = std::fs::read_dir(&out)
            .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
            .unwrap_or(0);
        assert_eq!(
            recorded,
            run.scenarios(),
            "{revision}: every scenario run leaves its checks under {}",
            out.display()
        );
        let unchecked = scenarios_without_checks(&out);
        if !unchecked.is_empty() {
            failed.push(format!(
                "{revision}: scenarios that recorded no check (a pass with 0 checks proves \
                 nothing): {unchecked:?}"
            ));
        }
        if !run.passed {
            failed.push(format!(
                "{revision}: unexpected failures {:?}, listed checks that pass (remove them from \
                 {}) {:?}\nfailing checks:\n{}\nstdout:\n{}\nstderr:\n{}",
                run.listed_under("Unexpected failures"),
                baseline().display(),
                run.listed_under("Stale baseline entries"),
                failing_checks(&out).join("\n"),
                strip_colours(&run.stdout),
                run.stderr
            ));
        }
        outs.push(out);
    }
    let log = server.stop();
    assert!(
        failed.is_empty(),
        "{}\nthe server's last lines:\n{log}",
        failed.join("\n\n")
    );
    for out in outs {
        let _ = std::fs::remove_dir_all(out);
    }
}

#[test]
fn a_scenario_with_no_check_is_found() {
    let out = ptc_tests::fresh_dir("conformance-unchecked");
    for (scenario, checks) in [
        ("checked", Some(r#"[{"id":"a","status":"SUCCESS"}]"#)),
        ("empty", Some("[]")),
        ("missing", None),
    ] {
        std::fs::create_dir_all(out.join(scenario)).unwrap();
        if let Some(c) = checks {
            std::fs::write(out.join(scenario).join("checks.json"), c).unwrap();
        }
    }
    assert_eq!(scenarios_without_checks(&out), ["empty", "missing"]);
    let _ = std::fs::remove_dir_all(out);
}

/// What the test above relies on: a run fails on a failure the file does not list and on a
/// listed check that passes, and names both.
#[test]
fn a_run_fails_on_an_unlisted_failure_and_on_a_listed_check_that_passes() {
    let Some(suite) = suite() else {
        return;
    };
    let dropped = "tools-call-simple-text:tools-call-simple-text";
    let passing = "ping:ping";
    let text = std::fs::read_to_string(baseline()).expect("the expected-failures file");
    assert!(text.contains(&format!("  - {dropped} #")));
    // The stale entry goes first in the `server:` list (the file's `client:` list follows it).
    let stale = format!("  - {passing} # passes: the run must call this entry stale");
    let edited: String = text
        .lines()
        .filter(|l| !l.contains(dropped))
        .flat_map(|l| match l == "server:" {
            true => vec![l, stale.as_str()],
            false => vec![l],
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(edited.contains(&format!("server:\n{stale}\n")));
    let dir = ptc_tests::fresh_dir("conformance-judged");
    let edited_baseline = dir.join("expected-failures.yml");
    std::fs::write(&edited_baseline, edited).unwrap();

    let server = Server::start("judged");
    let run = suite.run(
        &server.url,
        "2025-11-25",
        &edited_baseline,
        &dir.join("results"),
    );
    drop(server);
    assert!(!run.passed, "{}", run.stdout);
    // A scenario the file has no entry of is named whole.
    assert_eq!(
        run.listed_under("Unexpected failures"),
        BTreeSet::from(["tools-call-simple-text".to_string()]),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.listed_under("Stale baseline entries"),
        BTreeSet::from([passing.to_string()]),
        "{}",
        run.stdout
    );
    let _ = std::fs::remove_dir_all(dir);
}
