//! `ptc new` end to end: the scaffolded crate builds against this workspace, with no warning
//! from ptc's crates, and its own test (the binary over stdio lists `lisp_eval`) passes.
//!
//! The scaffold builds in this run's target folder, from the `Cargo.lock` `ptc new` writes (the
//! workspace's), with the workspace's profile settings: its dependency tree is the one `cargo
//! test --workspace` built (same versions, features and settings), so only the scaffold itself
//! is compiled. Built any other way, a fresh clone compiles the tree once more (minutes on 2
//! cores).

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

/// The target folder of this run: CARGO_TARGET_TMPDIR is `<target>/tmp`.
fn target() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target folder")
}

/// A folder of this test process for test `name`, removed first so a rerun starts clean.
fn run_folder(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ptc-new-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `ptc new DIR --config CONFIG`, which must succeed; what it said.
fn ptc_new(dir: &Path, config: &Path) -> String {
    let new = Command::new(env!("CARGO_BIN_EXE_ptc"))
        .arg("new")
        .arg(dir)
        .arg("--config")
        .arg(config)
        .output()
        .expect("ptc runs");
    let said = String::from_utf8_lossy(&new.stdout).into_owned();
    assert!(
        new.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&new.stderr)
    );
    said
}

/// `cargo test` in the scaffold at `dir`, offline, which must pass its one test; the build's
/// stderr.
fn cargo_test(dir: &Path) -> String {
    let test = ptc_tests::cargo()
        .args(["test", "--offline"])
        .args(workspace_profile())
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target())
        .output()
        .expect("cargo runs");
    let out = String::from_utf8_lossy(&test.stdout);
    let err = String::from_utf8_lossy(&test.stderr).into_owned();
    assert!(test.status.success(), "{out}{err}");
    assert!(out.contains("test result: ok. 1 passed"), "{out}");
    err
}

/// The lines of a build's stderr warning about one of ptc's crates or the deployment `name`
/// (whose code `ptc::upstreams!` wrote): cargo ends each crate's warnings with one naming it,
/// "warning: `ptc-core` (lib) generated 1 warning", also when the crate was built before.
fn ptc_warnings<'a>(stderr: &'a str, name: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("warning"))
        .filter(|l| {
            MEMBERS
                .iter()
                .chain([&name])
                .any(|c| l.contains(&format!("`{c}`")))
        })
        .collect()
}

#[test]
fn a_scaffolded_deployment_builds_and_passes_its_own_test() {
    let run = run_folder("ci");
    let dir = run.join("obs-deploy");
    let said = ptc_new(
        &dir,
        &workspace().join("fixtures/observatory/upstreams.json"),
    );
    assert!(said.contains("`obs-deploy`"), "{said}");
    let build = cargo_test(&dir);
    assert_eq!(
        ptc_warnings(&build, "obs-deploy"),
        Vec::<&str>::new(),
        "{build}"
    );
    let _ = std::fs::remove_dir_all(&run);
}

#[test]
fn a_deployment_of_vendored_mcp_upstreams_builds_without_warnings_and_lists_them() {
    if !ptc_tests::mcp_peers() {
        return;
    }
    let run = run_folder("mcp");
    let source = run.join("source");
    let config = ptc_tests::peers_config(|_, _| {});
    std::fs::create_dir_all(source.join("vendored")).expect("the source folder");
    std::fs::write(source.join("upstreams.json"), config.to_string()).expect("the config");
    let lists = workspace().join("fixtures/configs/peers/vendored");
    for upstream in ["everything", "py"] {
        let list = format!("{upstream}.tools.json");
        std::fs::copy(lists.join(&list), source.join("vendored").join(&list)).expect("copied");
    }
    let dir = run.join("mcp-deploy");
    ptc_new(&dir, &source.join("upstreams.json"));
    for upstream in ["everything", "py"] {
        let list = format!("{upstream}.tools.json");
        assert_eq!(
            std::fs::read(dir.join("vendored").join(&list)).expect("the scaffold's copy"),
            std::fs::read(lists.join(&list)).expect("the reviewed list"),
        );
    }

    let build = cargo_test(&dir);
    assert_eq!(
        ptc_warnings(&build, "mcp-deploy"),
        Vec::<&str>::new(),
        "{build}"
    );

    // `catalog` starts both servers and checks them against the pins the build compiled in.
    let catalog = Command::new(target().join("debug/mcp-deploy"))
        .arg("catalog")
        .output()
        .expect("the deployment runs");
    let listed = String::from_utf8_lossy(&catalog.stdout);
    assert!(
        catalog.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&catalog.stderr)
    );
    let servers: Vec<&str> = listed
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split(" — ").next())
        .collect();
    assert_eq!(servers, ["everything", "py"], "{listed}");
    for (upstream, spec) in config["upstreams"].as_object().expect("upstreams") {
        let mut tools: Vec<&str> = listed
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("  {upstream}/")))
            .filter_map(|l| l.split(" - ").next())
            .collect();
        tools.sort_unstable();
        let mut included: Vec<&str> = spec["include_tools"]
            .as_array()
            .expect("include_tools")
            .iter()
            .filter_map(|t| t.as_str())
            .collect();
        included.sort_unstable();
        assert_eq!(tools, included, "{listed}");
    }
    let _ = std::fs::remove_dir_all(&run);
}
