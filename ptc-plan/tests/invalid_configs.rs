//! Every file in fixtures/configs/invalid breaks one rule; its `.expect` sidecar lists every
//! problem the load must report, exactly (format: tests/support/config_expect.rs).

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use support::config_expect::{self, FIXTURE_COUNT, check_dir, fixtures, parse};

#[test]
fn every_invalid_config_fails_with_exactly_its_problems() {
    let failures = check_dir(&fixtures(), FIXTURE_COUNT);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn all_problems_are_reported_at_once_with_locations() {
    let diags = ptc_plan::load(&fixtures().join("multiple_errors.json")).unwrap_err();
    assert_eq!(diags.len(), 4, "{diags}");
    let pointers: Vec<&str> = diags.iter().map(|d| d.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/upstreams/api/static_headers/Cookie",
            "/upstreams/api/base_url",
            "/upstreams/api/include_operations",
            "/upstreams/other/transport",
        ]
    );
    for d in diags.iter() {
        assert!(
            d.upstream.is_some(),
            "every problem names its upstream: {d}"
        );
        assert!(d.help.is_some(), "every problem says how to fix it: {d}");
    }
}

// ---- the runner's own rules, each proven on a fixture folder built for it ----

/// A fresh folder holding the given `(file, text)` pairs.
fn temp_fixtures(files: &[(&str, &str)]) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ptc-expect-runner-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

const BAD_TRANSPORT: &str = r#"{"upstreams": {"x": {"transport": "smtp"}}}"#;
const BAD_TRANSPORT_EXPECT: &str = "#/upstreams/x/transport: upstream 'x': unsupported transport `smtp`\n  help: use \"openapi\", \"mcp_stdio\" or \"mcp_http\"\n";

fn failures_for(expect: &str) -> Vec<String> {
    let dir = temp_fixtures(&[("a.json", BAD_TRANSPORT), ("a.expect", expect)]);
    let failures = check_dir(&dir, 1);
    std::fs::remove_dir_all(&dir).ok();
    failures
}

#[test]
fn runner_accepts_an_exact_expect() {
    assert_eq!(failures_for(BAD_TRANSPORT_EXPECT), Vec::<String>::new());
}

#[test]
fn runner_rejects_an_empty_expect() {
    let f = failures_for("\n# nothing pinned\n");
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].contains("malformed .expect: pins no problem"), "{f:?}");
}

#[test]
fn runner_rejects_a_vague_fragment_without_pointer() {
    let f = failures_for("unsupported transport\n");
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].contains("names no JSON pointer"), "{f:?}");
}

#[test]
fn runner_rejects_a_pointer_without_message() {
    let f = failures_for("#/upstreams/x/transport\n");
    assert!(f[0].contains("has no message after the pointer"), "{f:?}");
}

#[test]
fn runner_rejects_a_partial_message() {
    let f = failures_for(
        "#/upstreams/x/transport: upstream 'x': unsupported transport\n  help: use \"openapi\", \"mcp_stdio\" or \"mcp_http\"\n",
    );
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].contains("expected 1 problem(s)") && f[0].contains("got 1"),
        "{f:?}"
    );
}

#[test]
fn runner_rejects_a_wrong_pointer() {
    let f = failures_for(&BAD_TRANSPORT_EXPECT.replace("/transport:", "/kind:"));
    assert_eq!(f.len(), 1, "{f:?}");
}

#[test]
fn runner_requires_the_help_when_the_problem_has_one() {
    let first_line = BAD_TRANSPORT_EXPECT.lines().next().unwrap();
    let f = failures_for(first_line);
    assert_eq!(f.len(), 1, "{f:?}");
}

#[test]
fn runner_pins_the_number_of_problems() {
    let twice = format!("{BAD_TRANSPORT_EXPECT}{BAD_TRANSPORT_EXPECT}");
    let f = failures_for(&twice);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].contains("expected 2 problem(s)") && f[0].contains("got 1"),
        "{f:?}"
    );
}

#[test]
fn runner_rejects_a_stray_help_line() {
    let f = failures_for("  help: do something\n");
    assert!(f[0].contains("`help:` before any problem line"), "{f:?}");
    let e = parse("#/a: m\n  help: x\n  help: y\n").unwrap_err();
    assert!(e.contains("second `help:`"), "{e}");
    let e = parse("#/a: m\n   helps: x\n").unwrap_err();
    assert!(e.contains("indented line"), "{e}");
    let e = parse("#a: m\n").unwrap_err();
    assert!(e.contains("not a JSON pointer"), "{e}");
}

#[test]
fn runner_floor_is_the_exact_fixture_count() {
    let dir = temp_fixtures(&[
        ("a.json", BAD_TRANSPORT),
        ("a.expect", BAD_TRANSPORT_EXPECT),
    ]);
    for count in [0, 2] {
        let f = check_dir(&dir, count);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].contains(&format!("expected exactly {count} invalid configs")),
            "{f:?}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn runner_rejects_a_valid_config_a_missing_sidecar_and_an_orphan() {
    let dir = temp_fixtures(&[
        ("ok.json", r#"{"upstreams": {}}"#),
        ("ok.expect", BAD_TRANSPORT_EXPECT),
        ("lonely.json", BAD_TRANSPORT),
        ("orphan.expect", BAD_TRANSPORT_EXPECT),
    ]);
    let f = check_dir(&dir, 2);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(f.len(), 3, "{f:?}");
    assert!(f.iter().any(|l| l.starts_with("orphan ")), "{f:?}");
    assert!(
        f.iter().any(|l| l == "lonely.json: has no .expect sidecar"),
        "{f:?}"
    );
    assert!(
        f.iter().any(|l| l == "ok.json: loaded, but must fail"),
        "{f:?}"
    );
}

#[test]
fn fixtures_placeholder_names_the_fixture_folder() {
    let root = config_expect::fixtures_root();
    let p = parse("#/a: cannot read `$FIXTURES/x.json`\n").unwrap();
    assert_eq!(
        p[0].message,
        format!("cannot read `{}/x.json`", root.display())
    );
    assert!(Path::new(&root).join("configs/invalid").is_dir());
}
