//! `ptc replay`: run files read with `--config` and without, offline; a file that cannot be
//! replayed (corrupt, another format) exits 2 naming it; an MCP upstream the replay would have to
//! list is named when it cannot be reached.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn ptc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ptc"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(args)
        .output()
        .expect("ptc runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn observatory_config() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/observatory/upstreams.json")
        .display()
        .to_string()
}

/// A run file of `program` with `calls`, answered `answer_text`, under the default settings.
fn run_file(program: &str, calls: Value, answer_text: &str) -> Value {
    json!({
        "format": 1,
        "ptc_version": "0.1.0",
        "program": program,
        "context": null,
        "settings": {
            "timeout_ms": 10000, "memory_bytes": 1073741824, "max_calls": 50,
            "max_discovery": 25, "max_upstream_bytes": 67108864, "allow_writes": false,
            "response_check": "sampled", "strict_responses": false
        },
        "calls": calls,
        "prints": "",
        "answer": {"kind": "value", "text": answer_text, "json": null}
    })
}

#[test]
fn a_recorded_run_replays_with_and_without_a_config() {
    let dir = ptc_tests::fresh_dir("cli-replay-roundtrip");
    let file = dir.join("run.json");
    let f = file.to_str().unwrap();
    let out = ptc(&["eval", "--record", f, "-e", "(do (println \"n\") (* 6 7))"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let replay = ptc(&["replay", f]);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay.stderr));
    assert_eq!(replay.stdout, out.stdout);
    assert_eq!(text(&replay.stdout), "n\n42\n");
    // Written by hand, against the Observatory config: its upstream (127.0.0.1:8787, where
    // nothing listens in the test) is never called.
    let program = "(count (:errors (:value (tool/call 'observatory/list-errors {:org-id \"org_acme\" :limit 2}))))";
    let recorded = json!([{
        "server": "observatory", "tool": "list-errors",
        "args": {"org_id": "org_acme", "limit": 2},
        "outcome": {"kind": "json", "json": "{\"errors\":[{\"id\":1},{\"id\":2}]}", "bytes": 31},
        "duration_ms": 4
    }]);
    std::fs::write(&file, run_file(program, recorded, "2").to_string()).unwrap();
    let config = observatory_config();
    let replay = ptc(&["replay", f, "--config", &config, "--json"]);
    let stderr = text(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&replay.stdout), "2\n");
    assert!(
        stderr.contains(&format!(
            "ptc replay: the same answer as recorded; 1 upstream calls answered from {f}, none sent"
        )),
        "{stderr}"
    );
    // Without the config there is no such upstream: the program's call is refused before the
    // tape, and the recorded call is left over.
    let replay = ptc(&["replay", f]);
    assert_eq!(replay.status.code(), Some(1));
    assert!(
        text(&replay.stderr).contains(&format!(
            "ptc replay: diverged from {f}: the recording has 1 call the program did not make: \
             call 1: observatory/list-errors {{\"org_id\":\"org_acme\",\"limit\":2}}"
        )),
        "{}",
        text(&replay.stderr)
    );
}

#[test]
fn a_corrupt_run_file_or_one_of_another_format_exits_2() {
    let dir = ptc_tests::fresh_dir("cli-replay-bad");
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, b"{\"format\": 1, \"calls\": [").unwrap();
    let out = ptc(&["replay", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).starts_with(&format!(
            "ptc replay: {} is not a run file: it is not JSON (EOF while parsing a list at line 1",
            corrupt.display()
        )),
        "{}",
        text(&out.stderr)
    );
    let future = dir.join("future.json");
    let mut file = run_file("(+ 1 2)", json!([]), "3");
    file["format"] = json!(2);
    std::fs::write(&future, file.to_string()).unwrap();
    let out = ptc(&["replay", future.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "ptc replay: {} is a run file of format 2 (recorded by ptc 0.1.0); this ptc ({}) \
             reads format 1 only: replay it with the ptc that recorded it, or record it again\n",
            future.display(),
            env!("CARGO_PKG_VERSION")
        )
    );
    // Format 1 again, with a field missing.
    file["format"] = json!(1);
    file.as_object_mut().unwrap().remove("answer");
    std::fs::write(&future, file.to_string()).unwrap();
    let out = ptc(&["replay", future.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "ptc replay: {} is not a valid run file of format 1: missing field `answer`\n",
            future.display()
        )
    );
}

#[test]
fn an_mcp_upstream_the_replay_cannot_list_is_named() {
    let dir = ptc_tests::fresh_dir("cli-replay-mcp");
    let config = dir.join("upstreams.json");
    std::fs::write(
        &config,
        json!({
            "credentials": {},
            "upstreams": {"files": {
                "transport": "mcp_stdio",
                "command": dir.join("no-such-mcp-server").display().to_string(),
                "args": []
            }}
        })
        .to_string(),
    )
    .unwrap();
    let file = dir.join("run.json");
    let recorded = json!([{
        "server": "files", "tool": "read", "args": {"path": "a"},
        "outcome": {"kind": "text", "text": "hello", "bytes": 5}, "duration_ms": 1
    }]);
    std::fs::write(
        &file,
        run_file(
            "(:value (tool/call 'files/read {:path \"a\"}))",
            recorded,
            "\"hello\"",
        )
        .to_string(),
    )
    .unwrap();
    let out = ptc(&[
        "replay",
        file.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "ptc replay: diverged from {}: the program called a tool of MCP upstream `files`, \
             whose tools could not be listed: ",
            file.display()
        )) && stderr.contains("start the server where the config says"),
        "{stderr}"
    );
}
