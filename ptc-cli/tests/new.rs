//! `ptc new` end to end: the scaffolded crate builds against this workspace and its own test
//! (the binary over stdio lists `lisp_eval`) passes.
//!
//! The scaffold builds in this run's target folder, from the workspace's `Cargo.lock`, with the
//! workspace's profile settings: its dependency tree is the one `cargo test --workspace` built
//! (same versions, features and settings), so only the scaffold itself is compiled. Built any
//! other way, a fresh clone compiles the tree once more (minutes on 2 cores).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's crates the scaffold depends on. They are workspace members here but plain
/// path dependencies of the scaffold, so its build gets their profile settings from flags.
const MEMBERS: [&str; 8] = [
    "ptc",
    "ptc-app",
    "ptc-core",
    "ptc-lisp",
    "ptc-plan",
    "ptc-codegen",
    "ptc-macros",
    "ptc-names",
];

/// The workspace's `[profile.dev]` (Cargo.toml), as `--config` flags for the scaffold's build
/// (they take precedence over its `Cargo.toml`). The scaffold's optimised macro packages are set
/// back to the workspace's level: serde's derive built another way rebuilds every crate.
fn workspace_profile() -> Vec<String> {
    let mut flags = vec![
        r#"profile.dev.debug="line-tables-only""#.to_string(),
        r#"profile.dev.package."*".debug=false"#.to_string(),
    ];
    for package in ptc_codegen::build_profile::MACRO_PACKAGES {
        flags.push(format!("profile.dev.package.{package}.opt-level=0"));
    }
    for member in MEMBERS {
        flags.push(format!(
            r#"profile.dev.package.{member}.debug="line-tables-only""#
        ));
    }
    flags.into_iter().map(|f| format!("--config={f}")).collect()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn a_scaffolded_deployment_builds_and_passes_its_own_test() {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`: the target folder is its parent.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let target = tmp.parent().expect("the target folder");
    let dir = tmp
        .join(format!("ptc-new-ci-{}", std::process::id()))
        .join("obs-deploy");
    let _ = std::fs::remove_dir_all(&dir);

    let new = Command::new(env!("CARGO_BIN_EXE_ptc"))
        .arg("new")
        .arg(&dir)
        .arg("--config")
        .arg(workspace().join("fixtures/observatory/upstreams.json"))
        .output()
        .expect("ptc runs");
    let said = String::from_utf8_lossy(&new.stdout);
    assert!(
        new.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&new.stderr)
    );
    assert!(said.contains("`obs-deploy`"), "{said}");

    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).expect("lock copied");
    let test = ptc_tests::cargo()
        .args(["test", "--offline", "--quiet"])
        .args(workspace_profile())
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs");
    let out = String::from_utf8_lossy(&test.stdout);
    assert!(
        test.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(out.contains("test result: ok. 1 passed"), "{out}");
    let _ = std::fs::remove_dir_all(dir.parent().expect("the run's folder"));
}
