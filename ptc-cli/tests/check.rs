//! `ptc check` end to end: the binary, its output and its exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../ptc-plan/tests/support/config_expect.rs"]
mod config_expect;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn ptc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptc"))
        .args(args)
        .output()
        .expect("ptc runs")
}

#[test]
fn prints_pinned_mcp_tools_with_their_pins_and_says_when_nothing_is_pinned() {
    let config = fixtures().join("configs/peers/upstreams.json");
    let out = ptc(&["check", config.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("everything (mcp_stdio, 3 pinned tools, pin_policy refuse) node "),
        "{stdout}"
    );
    let pins: ptc_plan::pins::ToolList = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("configs/peers/vendored/py.tools.json")).unwrap(),
    )
    .unwrap();
    let sum = pins.tool("get-sum").unwrap();
    assert!(
        stdout.contains(&format!(
            "  py/get-sum                 sha256 {}  required: a, b\n",
            &sum.sha256[..12]
        )),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("ok: 2 upstreams, 9 compiled tools\n"),
        "{stdout}"
    );
    let unpinned = ptc(&[
        "check",
        fixtures()
            .join("configs/valid/mixed.json")
            .to_str()
            .unwrap(),
    ]);
    let stdout = String::from_utf8(unpinned.stdout).unwrap();
    assert!(
        stdout.contains("tickets (mcp_http) https://tickets.example/mcp  [tools are listed when it connects; not pinned: `ptc vendor` pins them]"),
        "{stdout}"
    );
}

/// Under each stdio upstream's line: how it is isolated, or that it is not.
#[test]
fn each_stdio_upstreams_isolation_is_shown_under_it() {
    let dir = ptc_tests::fresh_dir("check-sandbox");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let config = dir.join("upstreams.json");
    let text = serde_json::json!({"upstreams": {
        "a": {"transport": "mcp_stdio", "command": "server-a"},
        "b": {"transport": "mcp_stdio", "command": "server-b", "sandbox": false},
        "c": {"transport": "mcp_stdio", "command": "server-c",
              "sandbox": {"network": true, "read_paths": ["data", "/opt/c"], "write_paths": ["data"],
                          "memory_mb": 64, "processes": 8, "open_files": 32, "cpu_seconds": 5}},
    }});
    std::fs::write(&config, text.to_string()).unwrap();
    let out = ptc(&["check", config.to_str().unwrap()]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let data = dir.join("data").display().to_string();
    let expected = format!(
        "a (mcp_stdio) server-a  [tools are listed when it starts; not pinned: `ptc vendor` pins them]\n  \
         isolated: network none; reads its command and the system folders only; writes its temp folder only; \
         limits 1024 MiB memory, 128 processes, 1024 open files, 3600 s CPU\n\
         b (mcp_stdio) server-b  [tools are listed when it starts; not pinned: `ptc vendor` pins them]\n  \
         not isolated (\"sandbox\": false): it runs with the host's own rights\n\
         c (mcp_stdio) server-c  [tools are listed when it starts; not pinned: `ptc vendor` pins them]\n  \
         isolated: network the host's; reads /opt/c, {data}; writes {data}; \
         limits 64 MiB memory, 8 processes, 32 open files, 5 s CPU\n\
         ok: 3 upstreams, 0 compiled tools\n"
    );
    assert_eq!(stdout, expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn prints_the_observatory_catalog() {
    let config = fixtures().join("observatory/upstreams.json");
    let out = ptc(&["check", config.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("observatory (openapi, 8 tools) http://127.0.0.1:8787\n"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("observatory/get-trace-step "))
        .expect("get-trace-step listed");
    assert!(
        line.contains("GET /api/traces/{id}/steps/{step_id}"),
        "{line}"
    );
    assert!(line.ends_with("required: id, step_id, org_id"), "{line}");
    assert!(stdout.contains("observatory/get-trace-steps"));
    // The write shows its body argument and what it is.
    let write = stdout
        .lines()
        .find(|l| l.contains("observatory/annotate-trace "))
        .expect("annotate-trace listed");
    assert!(
        write.contains("POST /api/traces/{id}/annotations")
            && write.ends_with("required: id, org_id, body  [write, approval always]"),
        "{write}"
    );
    // The declared programs, each with what it needs and calls, and its effect.
    let program = stdout
        .lines()
        .find(|l| l.starts_with("  errors-by-class "))
        .expect("errors-by-class listed");
    assert!(
        program.contains("errors-by-class.clj")
            && program.ends_with("required: org_id  calls: observatory/list-errors  [read-only]"),
        "{program}"
    );
    assert!(
        stdout.contains("\nprograms (5, checked against the tools above)\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("ok: 1 upstream, 8 compiled tools, 5 checked programs\n"),
        "{stdout}"
    );
}

#[test]
fn json_flag_prints_the_plan() {
    let config = fixtures().join("observatory/upstreams.json");
    let out = ptc(&["check", "--json", config.to_str().unwrap()]);
    assert!(out.status.success());
    let plan: ptc_plan::Plan = serde_json::from_slice(&out.stdout).expect("the plan as JSON");
    assert_eq!(plan, ptc_plan::load(&config).unwrap().plan);
}

/// Splits `ptc check` stderr into problems (`error:` headline, `-->` location, optional help)
/// and the closing count line.
fn printed_problems(stderr: &str) -> (Vec<config_expect::Problem>, Vec<String>, String) {
    let mut problems: Vec<config_expect::Problem> = Vec::new();
    let mut locations = Vec::new();
    let mut lines = stderr.lines().peekable();
    let mut last = String::new();
    while let Some(line) = lines.next() {
        if let Some(headline) = line.strip_prefix("error: ") {
            let location = lines.next().unwrap_or_default();
            let (file_part, pointer) = match location.rsplit_once(" #") {
                Some((f, p)) => (f, p.to_string()),
                None => (location, String::new()),
            };
            locations.push(file_part.to_string());
            let help = lines
                .next_if(|l| l.starts_with("  = help: "))
                .map(|l| l["  = help: ".len()..].to_string());
            problems.push(config_expect::Problem {
                file: String::new(),
                pointer,
                message: headline.to_string(),
                help,
            });
        } else {
            last = line.to_string();
        }
    }
    (problems, locations, last)
}

#[test]
fn invalid_configs_exit_1_with_every_expected_line() {
    let dir = fixtures().join("configs/invalid");
    let configs = config_expect::configs(&dir);
    assert_eq!(configs.len(), config_expect::FIXTURE_COUNT);
    for path in &configs {
        let name = path.file_name().unwrap().to_string_lossy();
        let out = ptc(&["check", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(out.stdout.is_empty(), "nothing on stdout for {name}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        let text = std::fs::read_to_string(path.with_extension("expect")).unwrap();
        let expected = config_expect::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mut printed, locations, count_line) = printed_problems(&stderr);
        for p in &mut printed {
            p.message = config_expect::portable(&p.message, path);
            p.help = p.help.as_deref().map(|h| config_expect::portable(h, path));
        }
        assert_eq!(printed.len(), expected.len(), "{name}: {stderr}");
        for ((want, got), location) in expected.iter().zip(&printed).zip(&locations) {
            assert_eq!(got.message, want.message, "{name}: {stderr}");
            assert_eq!(got.pointer, want.pointer, "{name}: {stderr}");
            assert_eq!(got.help, want.help, "{name}: {stderr}");
            let file = if want.file.is_empty() {
                path.to_str().unwrap().to_string()
            } else {
                want.file.clone()
            };
            assert!(
                location.starts_with("  --> ") && location.contains(&file),
                "{name}: `{location}` does not name {file}"
            );
        }
        let n = expected.len();
        assert_eq!(
            count_line,
            format!("{n} error{} found", if n == 1 { "" } else { "s" }),
            "{name}"
        );
    }
}

/// An upstream named like a namespace of PTC-Lisp (`s` is clojure.string's alias) used to pass
/// `ptc check` and fail in every program that called it; now the check refuses it and says why.
#[test]
fn an_upstream_named_like_a_language_namespace_fails_the_check_with_the_reason() {
    let config = fixtures().join("configs/invalid/reserved_alias.json");
    let out = ptc(&["check", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with(
            "error: upstream 's': upstream name `s` is reserved by PTC-Lisp: `s` is PTC-Lisp's \
             alias for clojure.string, so `s/...` in a program means the language's names, \
             never an upstream's tools\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("  = help: rename the upstream; PTC-Lisp reserves core, str, string, s,"),
        "{stderr}"
    );
    assert!(
        stderr.contains("upstream name `repl` is reserved by PTC-Lisp: `repl` is PTC-Lisp's alias for clojure.repl"),
        "{stderr}"
    );
    assert!(stderr.ends_with("2 errors found\n"), "{stderr}");
}

#[test]
fn missing_config_is_a_clear_error() {
    let out = ptc(&["check", "/nonexistent/upstreams.json"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("cannot read config"), "{stderr}");
}

/// A config whose schema comes from the running Observatory service's `/openapi.json`.
fn schema_url_config(dir: &Path, url: &str, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("upstreams.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"upstreams": {{"observatory": {{"transport": "openapi", "base_url": "{url}",
                "allow_insecure_http": true, "schema_url": "{url}/openapi.json",
                "include_operations": ["list_traces", "get_trace"]{extra}}}}}}}"#
        ),
    )
    .unwrap();
    config
}

#[tokio::test]
async fn schema_url_documents_are_fetched() {
    let tokens = observatory_server::TokenSource::Inline(vec![]);
    let (addr, handle) = observatory_server::start(observatory_server::ServerConfig::new(tokens))
        .await
        .expect("service starts");
    let url = format!("http://{addr}");
    let dir = std::env::temp_dir().join(format!("ptc-check-url-{}", std::process::id()));
    let run = |config: PathBuf| {
        tokio::task::spawn_blocking(move || ptc(&["check", config.to_str().unwrap()]))
    };

    let out = run(schema_url_config(&dir.join("ok"), &url, ""))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("observatory/list-traces")
            && stdout.contains("ok: 1 upstream, 2 compiled tools"),
        "{stdout}"
    );

    let out = run(schema_url_config(
        &dir.join("cap"),
        &url,
        r#", "schema_max_bytes": 1000"#,
    ))
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("over the 1000-byte cap (schema_max_bytes)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("#/upstreams/observatory/schema_url"),
        "{stderr}"
    );

    let missing = format!("{url}/nope");
    let out = run(schema_url_config(&dir.join("404"), &url, ""))
        .await
        .unwrap();
    assert!(out.status.success());
    let config = dir.join("404/upstreams.json");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&format!("{url}/openapi.json"), &missing);
    std::fs::write(&config, text).unwrap();
    let out = run(config).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(&format!("schema_url `{missing}` answered 404")),
        "{stderr}"
    );

    handle.shutdown().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_error_sample_in_the_configuration_docs_is_the_real_output() {
    let docs = std::fs::read_to_string(fixtures().join("../docs/configuration.md")).unwrap();
    let marker = "```\n$ ptc check upstreams.json\n";
    let start = docs.find(marker).expect("the sample is in the docs") + marker.len();
    let sample = &docs[start..start + docs[start..].find("\n```").unwrap() + 1];
    let out = Command::new(env!("CARGO_BIN_EXE_ptc"))
        .current_dir(fixtures().join("configs/docs-sample"))
        .args(["check", "upstreams.json"])
        .output()
        .expect("ptc runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(String::from_utf8(out.stderr).unwrap(), sample);
}

#[test]
fn a_document_with_a_large_shared_recursive_schema_checks_and_its_plan_names_it() {
    let config = fixtures().join("configs/valid/design_tool.json");
    let out = ptc(&["check", config.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.ends_with("ok: 1 upstream, 8 compiled tools\n"),
        "{stdout}"
    );
    let out = ptc(&["check", "--json", config.to_str().unwrap()]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the plan as JSON");
    let design = &plan["upstreams"][0]["transport"];
    assert_eq!(
        design["tools"][0]["outputSchema"],
        serde_json::json!({"$ref": "#/$defs/FileResponse"})
    );
    assert!(design["definitions"]["Node"]["oneOf"].is_array());
}
