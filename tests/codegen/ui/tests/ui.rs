//! Compile-time UI cases: every config problem reaches the user as a compile error in ptc-plan's
//! wording, and drift that keeps the config valid breaks the user's own code.
//!
//! Each `cases/NAME.rs` is a bin of this crate; the ones that must fail sit behind the `cases`
//! feature, and their errors must read as `cases/NAME.stderr` says (`PTC_UI_BLESS=1` writes the
//! files from what the compiler said). They are compiled by cargo in this workspace and its
//! target folder, with the workspace's features, so every dependency `cargo test --workspace`
//! built is reused: a harness building a crate of its own (trybuild) compiles the whole
//! dependency tree again, minutes on 2 cores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The cases that must compile: the drift cases change their documents and tool lists.
const MUST_BUILD: &[&str] = &[
    "mcp_v1_compiles_and_builds",
    "programs_v1_compiles_and_builds",
    "v1_compiles_and_builds",
];

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .expect("the workspace folder")
}

/// Every case name (`cases/*.rs`), sorted.
fn case_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(cases_dir())
        .expect("cases/ reads")
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    names
}

/// What compiling the cases said: errors by case, and the cases that built.
#[derive(Default)]
struct Compiled {
    errors: BTreeMap<String, Vec<String>>,
    built: Vec<String>,
}

fn compile(names: &[String]) -> Compiled {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`: the run's own target folder is its parent.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target folder");
    let mut cmd = ptc_tests::cargo();
    // `--workspace` resolves features as the test run did; `--keep-going` compiles every case
    // even when the first fails.
    cmd.current_dir(workspace())
        .args(["build", "--workspace", "--keep-going", "--offline"])
        .args(["--message-format=json", "--features", "ptc-ui-cases/cases"])
        .arg("--target-dir")
        .arg(target);
    for name in names {
        cmd.args(["--bin", name]);
    }
    let out = cmd.output().expect("cargo runs");
    let cases = cases_dir();
    let root = format!("{}/", workspace().display());
    let mut compiled = Compiled::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(src) = msg["target"]["src_path"].as_str() else {
            continue;
        };
        if !Path::new(src).starts_with(&cases) {
            continue;
        }
        let name = msg["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match msg["reason"].as_str() {
            Some("compiler-artifact") if msg["executable"].is_string() => {
                compiled.built.push(name);
            }
            Some("compiler-message") => {
                let m = &msg["message"];
                let summary = m["message"].as_str().unwrap_or_default();
                if m["level"] == "error" && !summary.starts_with("aborting due to") {
                    let rendered = m["rendered"].as_str().unwrap_or_default().trim_end();
                    compiled
                        .errors
                        .entry(name)
                        .or_default()
                        .push(normalize(rendered, &root));
                }
            }
            _ => {}
        }
    }
    if compiled.errors.is_empty() && compiled.built.is_empty() {
        panic!(
            "cargo compiled no case:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    compiled
}

/// The workspace's absolute path (in messages about files outside the crate) as `$WORKSPACE/`,
/// and no trailing spaces, so the expected text is the same on every machine.
fn normalize(rendered: &str, root: &str) -> String {
    rendered
        .replace(root, "$WORKSPACE/")
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn each_case_fails_as_its_stderr_says_and_the_baseline_builds() {
    let names = case_names();
    assert!(names.len() > 20, "the cases are found: {names:?}");
    let compiled = compile(&names);
    let bless = std::env::var_os("PTC_UI_BLESS").is_some();
    let mut problems = Vec::new();
    for name in &names {
        let expected_path = cases_dir().join(format!("{name}.stderr"));
        let errors = compiled.errors.get(name);
        if MUST_BUILD.contains(&name.as_str()) {
            if errors.is_some() || !compiled.built.contains(name) {
                problems.push(format!("{name} must build: {errors:#?}"));
            }
            continue;
        }
        let Some(errors) = errors else {
            let why = if compiled.built.contains(name) {
                "built, and must not"
            } else {
                "was not compiled (is it a [[bin]] of Cargo.toml with the `cases` feature?)"
            };
            problems.push(format!("{name} {why}"));
            continue;
        };
        let actual = format!("{}\n", errors.join("\n\n"));
        if bless {
            std::fs::write(&expected_path, &actual).expect("the .stderr writes");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            problems.push(format!(
                "{name}: the errors differ from {}\n--- expected\n{expected}--- actual\n{actual}",
                expected_path.display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\n(PTC_UI_BLESS=1 rewrites the .stderr files)",
        problems.join("\n\n")
    );
}
