//! `ptc new` end to end: the scaffolded crate builds against this workspace and its own test
//! (the binary over stdio lists `lisp_eval`) passes.
//!
//! Build time is kept low by reusing what the workspace already built: the workspace's
//! `Cargo.lock` is copied in (the same versions, so the same artifacts) and the crate builds in
//! `target/ptc-new`, a folder kept between runs. Only the scaffold's own crate and the
//! dependencies whose features differ from the workspace's are compiled there; a rerun compiles
//! the scaffold's main.rs and test only.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn a_scaffolded_deployment_builds_and_passes_its_own_test() {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`: the target folder is its parent.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let target = tmp.parent().expect("the target folder").join("ptc-new");
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
    let test = Command::new(cargo)
        .args(["test", "--offline", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
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
