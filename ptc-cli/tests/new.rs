//! `ptc new` end to end: the scaffolded crate builds against this workspace and its own test
//! (the binary over stdio lists `lisp_eval`) passes.
//!
//! The dependency tree is compiled once for this test and the trybuild UI tests
//! (`tests/codegen`), which build a scratch deployment crate the same way: the scaffold builds in
//! trybuild's target folder (`target/tests/trybuild`) the way trybuild builds (`--target` the
//! host, `--cfg trybuild`, no incremental, no debuginfo), from the workspace's `Cargo.lock` (the
//! same versions), so whichever of the two runs second finds every dependency built. Built any
//! other way, the tree is compiled once more in a fresh clone (2 to 9 minutes on 2 cores).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The rustflags trybuild builds its scratch crate with.
const TRYBUILD_FLAGS: &str = r#"["--cfg", "trybuild", "--verbose", "-A", "dead_code"]"#;

/// The host's target triple, which trybuild passes as `--target`.
fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn a_scaffolded_deployment_builds_and_passes_its_own_test() {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`: the target folder is its parent.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let target = tmp
        .parent()
        .expect("the target folder")
        .join("tests/trybuild");
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
    // The cargo running this test (the pinned toolchain), offline: every crate is in the cache.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let triple = host_triple();
    let test = Command::new(cargo)
        .args(["test", "--offline", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        // trybuild's way of building (trybuild/src/cargo.rs, rustflags.rs): an explicit
        // `--target` (so artifacts live under `<target>/<triple>/`), its rustflags for that
        // target, no incremental. Any difference puts every dependency in another folder or
        // changes its fingerprint, and the tree is built twice.
        .args(["--target", &triple])
        .arg(format!(
            "--config=target.{triple}.rustflags={TRYBUILD_FLAGS}"
        ))
        .arg(format!("--config=build.rustflags={TRYBUILD_FLAGS}"))
        .env("CARGO_INCREMENTAL", "0")
        // As tests/codegen/tests/ui.rs sets it for trybuild's cargo.
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
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
