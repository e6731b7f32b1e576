//! `ptc eval` end to end: where results and printed output go, and the exit codes.

use std::process::Command;

fn ptc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptc"))
        .args(args)
        .output()
        .expect("ptc runs")
}

#[test]
fn json_stdout_is_only_the_json_result_and_printed_output_goes_to_stderr() {
    let out = ptc(&["eval", "--json", "-e", r#"(do (println "hi") {:a 1})"#]);
    assert_eq!(out.status.code(), Some(0));
    let value: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON value");
    assert_eq!(value, serde_json::json!({"a": 1}));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "hi\n");
}

#[test]
fn without_json_printed_output_stays_on_stdout_before_the_result() {
    let out = ptc(&["eval", "-e", r#"(do (println "hi") {:a 1})"#]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hi\n{:a 1}\n");
    assert!(out.stderr.is_empty());
}

#[test]
fn a_failing_program_exits_1_with_its_reason_on_stderr() {
    let out = ptc(&["eval", "--json", "-e", r#"(do (println "hi") (/ 1 0))"#]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("hi\narithmetic_error: divide by zero"),
        "{stderr}"
    );
}

#[test]
fn no_program_is_a_usage_error() {
    let out = ptc(&["eval"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("give a program with -e"), "{stderr}");
}

#[test]
fn the_runnable_headline_program_in_the_language_docs_prints_what_the_docs_show() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let docs = std::fs::read_to_string(format!("{root}/docs/ptc-lisp.md")).unwrap();
    let command = "```sh\nptc eval --context docs/examples/traces.json -e '";
    let start = docs
        .find(command)
        .expect("the runnable version is in the docs")
        + command.len();
    let program = &docs[start..start + docs[start..].find("'\n```").unwrap()];
    let shown = "prints (a test runs this command and compares):\n\n```clojure\n";
    let at = docs.find(shown).expect("the docs show the result") + shown.len();
    let expected = &docs[at..at + docs[at..].find("```").unwrap()];
    let out = Command::new(env!("CARGO_BIN_EXE_ptc"))
        .current_dir(root)
        .args([
            "eval",
            "--context",
            "docs/examples/traces.json",
            "-e",
            program,
        ])
        .output()
        .expect("ptc runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
}

#[test]
fn the_headline_program_file_is_the_program_the_language_docs_show() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let docs = std::fs::read_to_string(format!("{root}/docs/ptc-lisp.md")).unwrap();
    let open = "```clojure\n";
    let start = docs.find(open).expect("the headline program") + open.len();
    let shown = &docs[start..start + docs[start..].find("```").unwrap()];
    let file =
        std::fs::read_to_string(format!("{root}/docs/examples/failures-by-model.clj")).unwrap();
    assert_eq!(file, shown);
    assert!(file.contains("(tool/call 'observatory/list-traces"));
}

#[test]
fn without_a_config_a_tool_call_is_refused_before_running() {
    let out = ptc(&[
        "eval",
        "-e",
        "(do (println \"ran\") (tool/call 'obs/list {}))",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing ran");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("runtime_error: "), "{stderr}");
    assert!(stderr.contains("obs"), "{stderr}");
}

#[test]
fn the_context_is_decoded_within_memory_bytes() {
    let dir = std::env::temp_dir().join(format!("ptc-eval-context-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("context.json");
    let items: Vec<String> = (0..2000).map(|i| format!("item number {i}")).collect();
    std::fs::write(&file, serde_json::json!({ "items": items }).to_string()).unwrap();
    let path = file.to_string_lossy().into_owned();
    let run = |extra: &[&str]| {
        let mut args = vec!["eval", "--context", &path];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-e", "(count data/items)"]);
        ptc(&args)
    };
    let fits = run(&[]);
    assert_eq!(fits.status.code(), Some(0));
    assert_eq!(String::from_utf8(fits.stdout).unwrap(), "2000\n");
    let small = run(&["--memory-bytes", "10000"]);
    assert_eq!(
        small.status.code(),
        Some(2),
        "an unusable context is a start-up error"
    );
    let stderr = String::from_utf8(small.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!("ptc eval: {path}: ")) && stderr.contains("memory"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
