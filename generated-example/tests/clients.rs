//! Real MCP clients against `generated-example serve`: the Python `mcp` SDK client (PyPI) in
//! both protocol eras and the MCP Inspector CLI (npm), over stdio and Streamable HTTP, calling
//! `lisp_eval` with Observatory and discovery programs. The Observatory test bed runs
//! in-process; the server is pointed at it with the operator overrides.
//!
//! `scripts/test` installs the clients into fixtures/host-clients; elsewhere, without them, each
//! test prints why it was skipped (with CI=true a missing client fails the test).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use observatory_server::TokenSpec;
use ptc_tests::bed::FlaggedBed;
use ptc_tests::host_clients;
use serde_json::{Value, json};

const TOKEN: &str = "obs_clients_test_5b0c1e77a9d2";
const BIN: &str = env!("CARGO_BIN_EXE_generated-example");

fn bed(name: &str) -> FlaggedBed {
    // The token may annotate traces too: the write the approval tests run.
    let mut token = TokenSpec::full_access("tok_clients", TOKEN);
    token.scopes.push("traces:write".into());
    ptc_tests::bed::start(&format!("clients-{name}"), token)
}

/// The programs every client sends, and what each must answer.
fn programs() -> Value {
    json!([
        {"program": "(count (:errors (:value (tool/call 'observatory/list-errors {:org-id \"org_acme\" :limit 7}))))"},
        {"program": "(apropos \"cost\")"},
        {"program": "(doc 'observatory/search-traces)"},
        {"program": "(+ data/a 1)", "context": {"a": 41}},
        {"program": "(fail {:why \"no data\"})"},
        // A declared program called as the tool it is, then through lisp_eval.
        {"tool": "errors-by-class", "arguments": {"org_id": "org_acme"}},
        {"program": ERRORS_BY_CLASS, "context": {"org_id": "org_acme"}}
    ])
}

const ERRORS_BY_CLASS: &str =
    include_str!("../../fixtures/observatory/programs/errors-by-class.clj");

/// The read programs the deployment declares (fixtures/observatory/upstreams.json), each a tool.
const PROGRAM_TOOLS: [&str; 5] = [
    "costs-by-model",
    "errors-by-class",
    "failed-run",
    "failed-steps",
    "trace-by-external-id",
];

fn check_calls(calls: &[Value]) {
    assert_eq!(calls.len(), 7, "{calls:?}");
    let s = |i: usize| &calls[i]["structured"];
    assert_eq!(calls[0]["is_error"], json!(false), "{}", calls[0]);
    assert_eq!(s(0)["result"], json!(7));
    assert_eq!(s(0)["upstream_calls"][0]["tool"], "list-errors");
    assert_eq!(s(0)["upstream_calls"][0]["status"], "ok");
    assert!(
        s(0)["ptc_metrics"]["upstream_result_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let hits = s(1)["result"].as_array().unwrap();
    assert!(
        hits.contains(&json!("observatory/costs - Aggregate costs server-side")),
        "{hits:?}"
    );
    let printed = s(2)["prints"].as_array().unwrap();
    assert!(
        printed
            .iter()
            .any(|l| l.as_str().unwrap().contains(":trace-id string (required)")),
        "{printed:?}"
    );
    assert_eq!(s(3)["result"], json!(42));
    assert_eq!(calls[3]["text"], "42");
    assert_eq!(calls[4]["is_error"], json!(true));
    assert_eq!(s(4)["reason"], "fail");
    assert_eq!(s(4)["value"], json!({"why": "no data"}));
    assert_eq!(s(4)["position"], json!({"line": 1, "column": 1}));
    // The program tool answers as the same program through lisp_eval.
    assert_eq!(calls[5]["is_error"], json!(false), "{}", calls[5]);
    assert!(
        !s(5)["result"].as_array().unwrap().is_empty(),
        "{}",
        calls[5]
    );
    assert_eq!(s(5)["result"], s(6)["result"]);
    assert_eq!(calls[5]["text"], calls[6]["text"]);
    assert_eq!(s(5)["upstream_calls"][0]["tool"], "list-errors");
}

fn check_tools(out: &Value) {
    let tools = out["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let mut expected = vec!["lisp_eval"];
    expected.extend(PROGRAM_TOOLS);
    assert_eq!(names, expected);
    for t in &tools[1..] {
        // Each with its parameters, its result inside the result contract, and read-only.
        assert!(
            t["inputSchema"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("org_id")),
            "{t}"
        );
        assert!(
            t["outputSchema"]["properties"]["result"]["anyOf"].is_array(),
            "{t}"
        );
        assert_eq!(t["annotations"]["readOnlyHint"], json!(true), "{t}");
        assert_eq!(t["annotations"]["destructiveHint"], json!(false), "{t}");
    }
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], json!(true));
    let d = tools[0]["description"].as_str().unwrap();
    assert!(
        d.contains("observatory/list-traces - List traces") && d.contains("(apropos"),
        "{d}"
    );
}

#[test]
fn python_sdk_over_stdio_in_both_eras() {
    let Some(py) = host_clients::python() else {
        return;
    };
    let b = bed("py-stdio");
    let mut args = vec![json!("serve")];
    args.extend(b.flags.iter().map(|f| json!(f)));
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let out = host_clients::run(
            &py,
            &json!({"transport": "stdio", "command": BIN, "args": args, "mode": mode,
                   "programs": programs()}),
        );
        assert_eq!(out["protocol_version"], version, "mode {mode}");
        check_tools(&out);
        check_calls(out["calls"].as_array().unwrap());
    }
}

/// `generated-example serve --http 127.0.0.1:0`, its URL read from its stderr.
struct HttpServer {
    child: Child,
    url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server(b: &FlaggedBed) -> HttpServer {
    http_server_with(b, &[])
}

fn http_server_with(b: &FlaggedBed, extra: &[&str]) -> HttpServer {
    let mut child = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(&b.flags)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server says where it listens")
            .unwrap();
        if let Some(rest) = line.split("listening on ").nth(1)
            && line.starts_with("generated-example:")
        {
            break rest.trim().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    HttpServer { child, url }
}

#[test]
fn python_sdk_over_streamable_http_in_both_eras() {
    let Some(py) = host_clients::python() else {
        return;
    };
    let b = bed("py-http");
    let server = http_server(&b);
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let out = host_clients::run(
            &py,
            &json!({"transport": "http", "url": server.url, "mode": mode, "programs": programs()}),
        );
        assert_eq!(out["protocol_version"], version, "mode {mode}");
        check_tools(&out);
        check_calls(out["calls"].as_array().unwrap());
    }
}

fn run_inspector(inspector: &Path, target: &[&str], method: &[&str]) -> Value {
    let out = Command::new(inspector)
        .arg("--cli")
        .args(target)
        .args(method)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let start = stdout.find('{').expect("JSON on stdout");
    serde_json::from_str(&stdout[start..]).unwrap()
}

fn inspector_checks(inspector: &Path, target: &[&str]) {
    let list = run_inspector(inspector, target, &["--method", "tools/list"]);
    assert_eq!(list["tools"][0]["name"], "lisp_eval", "{list}");
    let call = run_inspector(
        inspector,
        target,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "lisp_eval",
            "--tool-arg",
            "program=(->> (:buckets (:value (tool/call 'observatory/costs {:org-id \"org_acme\" :group-by \"model\"}))) (map :key) (sort) (first))",
        ],
    );
    assert_eq!(call["isError"], json!(false), "{call}");
    assert_eq!(
        call["structuredContent"]["result"], "claude-haiku-4-5",
        "{call}"
    );
    assert_eq!(call["content"][0]["text"], "\"claude-haiku-4-5\"");
    let dir = run_inspector(
        inspector,
        target,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "lisp_eval",
            "--tool-arg",
            "program=(count (dir 'observatory))",
        ],
    );
    assert_eq!(dir["structuredContent"]["result"], json!(8), "{dir}");
}

#[test]
fn inspector_cli_over_stdio() {
    let Some(inspector) = host_clients::inspector() else {
        return;
    };
    let b = bed("insp-stdio");
    let mut target = vec![BIN, "serve"];
    target.extend(b.flags.iter().map(String::as_str));
    inspector_checks(&inspector, &target);
}

#[test]
fn inspector_cli_over_streamable_http() {
    let Some(inspector) = host_clients::inspector() else {
        return;
    };
    let b = bed("insp-http");
    let server = http_server(&b);
    inspector_checks(&inspector, &[server.url.as_str(), "--transport", "http"]);
}

/// The write a person is asked to approve: annotate org_acme's first failing trace. The note
/// carries the upstream's token, which the person must never see.
fn annotate_program() -> String {
    format!(
        "(let [t (-> (tool/call 'observatory/list-traces {{:org-id \"org_acme\" :status \"error\" :limit 1}}) :value first)
               r (tool/call 'observatory/annotate-trace
                   {{:id (:id t) :org-id \"org_acme\" :body {{:label \"needs-look\" :note \"seen with {TOKEN}\"}}}})]
           [(:ok r) (:reason r) (:mutation_state r) (-> r :value :label) (:message r)])"
    )
}

/// Flags of a server that runs writes and gives a person 2 s to answer.
const WRITES: [&str; 4] = [
    "--allow-writes",
    "--approval-timeout-ms",
    "2000",
    "--timeout-ms",
];

/// What one client run with `answer` got: the program's result, its records, and what the
/// person was shown.
fn approval_run(py: &Path, target: Value, answer: Option<&str>) -> (Value, Value, Vec<Value>) {
    let mut spec = target;
    spec["programs"] = json!([{"program": annotate_program()}]);
    if let Some(a) = answer {
        spec["elicitation"] = json!(a);
    }
    let era = if spec["mode"] == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    };
    let out = host_clients::run(py, &spec);
    assert_eq!(out["protocol_version"], era);
    assert!(
        !out.to_string().contains(TOKEN),
        "the token never reaches the client: {out}"
    );
    let call = &out["calls"][0]["structured"];
    (
        call["result"].clone(),
        call["upstream_calls"][1].clone(),
        out["elicitations"].as_array().cloned().unwrap_or_default(),
    )
}

/// Every answer a person (or a client) can give, over `target`, in both protocol eras: an
/// `elicitation/create` request in the 2025 era, `input_required` rounds in the 2026 one.
fn approval_answers(py: &Path, b: &FlaggedBed, target: Value) {
    for mode in ["legacy", "auto"] {
        let mut target = target.clone();
        target["mode"] = json!(mode);
        let before = b.server().unwrap().annotations().len();
        approval_answers_in(py, b, target, before);
    }
}

fn approval_answers_in(py: &Path, b: &FlaggedBed, target: Value, before: usize) {
    let annotations = || b.server().unwrap().annotations().len() - before;
    let (result, record, seen) = approval_run(py, target.clone(), Some("approve"));
    assert_eq!(result, json!([true, null, "applied", "needs-look", null]));
    assert_eq!(record["approval"], "approved", "{record}");
    assert_eq!(record["mutation_state"], "applied");
    assert_eq!(annotations(), 1, "the write happened once");
    assert_eq!(seen.len(), 1, "{seen:?}");
    let message = seen[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("A program wants to call observatory/annotate-trace (write).\nAnnotate a trace\nRequest: POST http://127.0.0.1:")
            && message.contains("/annotations?org_id=org_acme\nArguments:\n")
            && message.contains("\"label\": \"needs-look\"")
            && message.contains("seen with [REDACTED]"),
        "{message}"
    );
    assert_eq!(seen[0]["schema"]["required"], json!(["approve"]));

    for (answer, why) in [
        ("answer-no", "the person answered no"),
        ("decline", "the person declined"),
        ("cancel", "the person dismissed the request"),
        ("ignore", "nobody answered the approval request within 2 s"),
    ] {
        let (result, record, seen) = approval_run(py, target.clone(), Some(answer));
        assert_eq!(
            result,
            json!([
                false,
                "approval_declined",
                null,
                null,
                format!("observatory/annotate-trace: not called: {why}")
            ]),
            "{answer}"
        );
        assert_eq!(record["approval"], "declined", "{answer}");
        assert_eq!(seen.len(), 1, "{answer}");
    }
    // A client without elicitation is never a silent yes.
    let (result, record, seen) = approval_run(py, target, None);
    assert_eq!(
        result,
        json!([
            false,
            "approval_unavailable",
            null,
            null,
            "observatory/annotate-trace: not called: it needs a person's approval and the \
                MCP client did not declare elicitation support, so nobody can be asked"
        ])
    );
    assert_eq!(record["approval"], "unavailable");
    assert!(seen.is_empty());
    assert_eq!(annotations(), 1, "only the approved write happened");
    let audit: Vec<_> = b
        .server()
        .unwrap()
        .audit_records()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(audit.len(), before + 1, "{audit:?}");
    assert!(audit[before].idempotency_key.is_some());
}

#[test]
fn python_sdk_approves_writes_through_elicitation_over_stdio() {
    let Some(py) = host_clients::python() else {
        return;
    };
    let b = bed("py-approve-stdio");
    let mut args = vec![json!("serve")];
    args.extend(b.flags.iter().map(|f| json!(f)));
    args.extend(WRITES.iter().map(|f| json!(f)));
    args.push(json!("20000"));
    approval_answers(
        &py,
        &b,
        json!({"transport": "stdio", "command": BIN, "args": args}),
    );
}

#[test]
fn python_sdk_approves_writes_through_elicitation_over_http() {
    let Some(py) = host_clients::python() else {
        return;
    };
    let b = bed("py-approve-http");
    let mut flags = WRITES.to_vec();
    flags.push("20000");
    let server = http_server_with(&b, &flags);
    approval_answers(&py, &b, json!({"transport": "http", "url": server.url}));
}
