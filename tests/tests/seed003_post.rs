//! Seed 003's `postMcpCall` (a POST with a JSON body) compiled from the real document when the
//! config allow-lists it, gated per process, and run over loopback HTTP against a server that
//! answers as the document says, its 400/404/413/429 mapped by the status table.

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use ptc_core::{Budgets, StartOptions, Upstreams, WriteGate, run_program};
use ptc_lisp::Limits;
use serde_json::{Value, json};

/// The document's server, as far as the tests need it: `/mcp/call` runs `rz_run`, and answers
/// the document's error statuses for the tools named after them. It keeps every body it got.
fn resilient(rt: &tokio::runtime::Runtime) -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/mcp/call",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let json_body = headers
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
                let error = |status: StatusCode, message: &str| {
                    (
                        status,
                        [("content-type", "application/json"), ("retry-after", "3")],
                        json!({"status": "error", "error": message}).to_string(),
                    )
                        .into_response()
                };
                if body.len() > 256 {
                    return error(StatusCode::PAYLOAD_TOO_LARGE, "body over 256 bytes");
                }
                let Ok(call) = serde_json::from_slice::<Value>(&body) else {
                    return error(StatusCode::BAD_REQUEST, "malformed body");
                };
                seen.lock().unwrap().push(call.clone());
                if !json_body {
                    return error(StatusCode::BAD_REQUEST, "not JSON");
                }
                let tool = call
                    .get("tool")
                    .or_else(|| call.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match tool {
                    "" => error(StatusCode::BAD_REQUEST, "missing tool name"),
                    "rz_gone" => error(StatusCode::NOT_FOUND, "unsupported route"),
                    "rz_busy" => error(StatusCode::TOO_MANY_REQUESTS, "rate limit exceeded"),
                    "rz_down" => error(StatusCode::SERVICE_UNAVAILABLE, "restarting"),
                    "rz_auth" => error(StatusCode::UNAUTHORIZED, "token expired"),
                    _ => (
                        [("content-type", "application/json")],
                        json!({"status": "ok", "tool": tool, "mcp_tool": "resilient_run",
                               "stdout": "2\n", "stderr": "", "diagnostics": [],
                               "raw_mcp": {"content": [], "isError": false}})
                        .to_string(),
                    )
                        .into_response(),
                }
            }
        }),
    );
    let addr = support::loopback(rt, app);
    (format!("http://{addr}"), got)
}

/// Upstreams over the seed 003 document with `postMcpCall` granted as `grant`.
fn upstreams(
    rt: &tokio::runtime::Runtime,
    base: &str,
    grant: Value,
    gate: WriteGate,
) -> Arc<Upstreams> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/openapi/resilient-mcp-http.openapi.json");
    // Retries configured, and a credential to re-read on a 401: a read (or safe query) uses
    // them, a write never does.
    let config = json!({
        "credentials": {"rz": {"source": "literal", "value": "rz-token-5e1c"}},
        "upstreams": {"resilient": {
        "transport": "openapi", "base_url": base, "allow_insecure_http": true,
        "allow_insecure_auth": true, "auth": [{"scheme": "bearer", "binding": "rz"}],
        "max_retries": 2, "backoff_initial_ms": 1, "backoff_max_ms": 2,
        "schema_file": doc, "include_operations": ["getHealth", "postMcpCall"],
        "allow_writes": {"postMcpCall": grant}}}});
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        Path::new("/seed003/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let options = StartOptions {
        writes: gate,
        ..StartOptions::default()
    };
    Arc::new(
        rt.block_on(Upstreams::start(loaded.plan, loaded.secrets, options))
            .unwrap(),
    )
}

fn run(rt: &tokio::runtime::Runtime, up: &Arc<Upstreams>, src: &str) -> String {
    let run = run_program(
        up.clone(),
        rt.handle().clone(),
        src,
        Limits::default(),
        Budgets::default(),
        None,
    );
    match run.result {
        Ok(v) => v.to_string(),
        Err(e) => panic!("{src}: {e}"),
    }
}

fn call(tool: &str) -> String {
    format!(
        "(let [r (tool/call 'resilient/post-mcp-call {{:body {{:tool \"{tool}\" :input {{:source \"1+1\"}}}}}})]
           [(:ok r) (:reason r) (-> r :value :stdout) (:message r)])"
    )
}

#[test]
fn post_mcp_call_runs_as_an_allow_listed_safe_query_with_the_gate_open() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (base, got) = resilient(&rt);
    let up = upstreams(&rt, &base, json!({"effect": "safe_query"}), WriteGate::Open);
    let tool = up
        .catalog()
        .server("resilient")
        .unwrap()
        .tool("post-mcp-call")
        .unwrap();
    assert_eq!(tool.classified.effect, ptc_plan::Effect::SafeQuery);
    assert!(tool.disabled.is_none());
    // A safe query asks no one by default; its body is sent as JSON, as the program wrote it.
    assert_eq!(run(&rt, &up, &call("rz_run")), "[true nil \"2\\n\" nil]");
    assert_eq!(
        got.lock().unwrap().last(),
        Some(&json!({"tool": "rz_run", "input": {"source": "1+1"}}))
    );
    // The status table: 400 and 413 are the call's fault, 404 not found, 429 rate limited.
    assert_eq!(
        run(&rt, &up, &call("")),
        "[false :tool_error nil \"resilient/post-mcp-call: HTTP 400 Bad Request: missing tool name\"]"
    );
    assert_eq!(
        run(&rt, &up, &call("rz_gone")),
        "[false :not_found nil \"resilient/post-mcp-call: HTTP 404 Not Found: unsupported route\"]"
    );
    assert_eq!(
        run(&rt, &up, &call("rz_busy")),
        "[false :rate_limited nil \"resilient/post-mcp-call: HTTP 429 Too Many Requests; Retry-After: 3: rate limit exceeded\"]"
    );
    let big = format!(
        "(tool/call 'resilient/post-mcp-call {{:body {{:tool \"rz_run\" :input {{:source \"{}\"}}}}}})",
        "x".repeat(300)
    );
    assert_eq!(
        run(
            &rt,
            &up,
            &format!("(let [r {big}] [(:reason r) (:message r)])")
        ),
        "[:tool_error \"resilient/post-mcp-call: HTTP 413 Payload Too Large: body over 256 bytes\"]"
    );
    // The body is checked by the one validator before anything is sent.
    let before = got.lock().unwrap().len();
    let bad = run_program(
        up.clone(),
        rt.handle().clone(),
        "(tool/call 'resilient/post-mcp-call {:body {:tool 42}})",
        Limits::default(),
        Budgets::default(),
        None,
    );
    let e = bad.result.unwrap_err();
    assert!(
        e.message()
            .contains("invalid arguments: :body: :tool must be a string, got integer 42"),
        "{e}"
    );
    assert_eq!(got.lock().unwrap().len(), before, "nothing was sent");
}

#[test]
fn post_mcp_call_is_disabled_without_the_gate_and_never_sent() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (base, got) = resilient(&rt);
    let up = upstreams(&rt, &base, json!({"approval": "none"}), WriteGate::Closed);
    let answer = run(&rt, &up, &call("rz_run"));
    assert!(
        answer.starts_with("[false :write_disabled nil \"resilient/post-mcp-call: not called: it is a write and this process runs with writes off"),
        "{answer}"
    );
    assert!(got.lock().unwrap().is_empty());
    // The read beside it works as ever.
    let up = upstreams(&rt, &base, json!({"approval": "none"}), WriteGate::Open);
    assert_eq!(run(&rt, &up, &call("rz_run")), "[true nil \"2\\n\" nil]");
}

#[test]
fn a_write_is_sent_once_where_a_safe_query_is_retried() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (base, got) = resilient(&rt);
    let sent = |tool: &str| {
        got.lock()
            .unwrap()
            .iter()
            .filter(|b| b["tool"] == tool)
            .count()
    };
    let query = upstreams(&rt, &base, json!({"effect": "safe_query"}), WriteGate::Open);
    assert!(run(&rt, &query, &call("rz_down")).starts_with("[false :upstream_unavailable"));
    assert_eq!(sent("rz_down"), 3, "the safe query was retried twice");
    assert!(run(&rt, &query, &call("rz_auth")).starts_with("[false :auth_failed"));
    assert_eq!(
        sent("rz_auth"),
        2,
        "a 401 is retried once after a fresh credential read"
    );
    got.lock().unwrap().clear();
    let write = upstreams(&rt, &base, json!({"approval": "none"}), WriteGate::Open);
    let down = run(&rt, &write, &call("rz_down"));
    assert!(down.starts_with("[false :upstream_unavailable"), "{down}");
    assert_eq!(sent("rz_down"), 1, "a write is never retried");
    assert!(run(&rt, &write, &call("rz_auth")).starts_with("[false :auth_failed"));
    assert_eq!(sent("rz_auth"), 1, "not even after a 401");
}

#[test]
fn a_write_whose_connection_drops_is_not_sent_again() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A server that takes each connection and drops it before answering.
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(Mutex::new(0usize));
    let count = accepted.clone();
    rt.spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            drop(socket);
        }
    });
    let write = upstreams(&rt, &base, json!({"approval": "none"}), WriteGate::Open);
    let answer = run(&rt, &write, &call("rz_run"));
    assert!(
        answer.starts_with("[false :upstream_unavailable"),
        "{answer}"
    );
    assert_eq!(*accepted.lock().unwrap(), 1, "sent once");
    let query = upstreams(&rt, &base, json!({"effect": "safe_query"}), WriteGate::Open);
    run(&rt, &query, &call("rz_run"));
    assert_eq!(
        *accepted.lock().unwrap(),
        4,
        "a safe query is retried twice"
    );
}
