//! Every file in fixtures/configs/invalid breaks one rule; its `.expect` sidecar lists the
//! message fragments (one per line) the diagnostics must contain.

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/configs/invalid")
}

#[test]
fn every_invalid_config_fails_with_its_message() {
    let mut configs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    configs.sort();
    assert!(
        configs.len() >= 45,
        "expected one invalid config per rule, found {}",
        configs.len()
    );
    let mut failures = Vec::new();
    for config in &configs {
        let expect = config.with_extension("expect");
        let expected = std::fs::read_to_string(&expect)
            .unwrap_or_else(|_| panic!("{} has no .expect sidecar", config.display()));
        match ptc_plan::load(config) {
            Ok(_) => failures.push(format!("{}: loaded, but must fail", config.display())),
            Err(diags) => {
                let text = diags.to_string();
                for line in expected.lines().filter(|l| !l.trim().is_empty()) {
                    if !text.contains(line) {
                        failures.push(format!(
                            "{}: missing `{line}` in:\n{text}",
                            config.file_name().unwrap().to_string_lossy()
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_expect_file_has_its_config() {
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "expect") {
            assert!(
                path.with_extension("json").exists(),
                "orphan {}",
                path.display()
            );
        }
    }
}

#[test]
fn all_problems_are_reported_at_once_with_locations() {
    let diags = ptc_plan::load(&fixtures().join("multiple_errors.json")).unwrap_err();
    assert_eq!(diags.len(), 4, "{diags}");
    let pointers: Vec<&str> = diags.iter().map(|d| d.pointer.as_str()).collect();
    assert!(
        pointers.contains(&"/upstreams/api/base_url"),
        "{pointers:?}"
    );
    assert!(
        pointers.contains(&"/upstreams/api/include_operations"),
        "{pointers:?}"
    );
    assert!(
        pointers.contains(&"/upstreams/api/static_headers/Cookie"),
        "{pointers:?}"
    );
    assert!(
        pointers.contains(&"/upstreams/other/transport"),
        "{pointers:?}"
    );
    for d in diags.iter() {
        assert!(
            d.upstream.is_some(),
            "every problem names its upstream: {d}"
        );
        assert!(d.help.is_some(), "every problem says how to fix it: {d}");
    }
}
