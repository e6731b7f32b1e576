//! `--otlp-endpoint` end to end: `ptc eval` and `ptc serve` export their spans to the test OTLP
//! receiver (`fixtures/otlp-receiver`) and flush them when they end (no span is lost at exit);
//! `eval` continues the trace of `TRACEPARENT`, `serve` that of the request; a protocol ptc does
//! not speak stops the start with a message naming the variable.
#![cfg(unix)]

use std::process::Command;

use ptc_tests::HostProcess;
use serde_json::{Value, json};

const PTC: &str = env!("CARGO_BIN_EXE_ptc");

/// `ptc` without the OTEL variables of the environment the tests run in.
fn ptc() -> Command {
    let mut cmd = Command::new(PTC);
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|k| k.starts_with("OTEL_") || k == "TRACEPARENT")
        {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// The spans of `trace_id` the receiver holds.
async fn trace(receiver: &ptc_tests::otlp::Receiver, trace_id: &str) -> Vec<Value> {
    receiver
        .spans()
        .await
        .into_iter()
        .filter(|s| s["trace_id"] == trace_id)
        .collect()
}

#[tokio::test]
async fn eval_exports_its_span_under_the_traceparent_of_its_environment_before_it_exits() {
    let Some(receiver) = ptc_tests::otlp::start() else {
        return;
    };
    let (trace_id, parent) = ("9a4c6e8f0b2d43c5a7e9f1b3d5f7a9c1", "5e6f708192031425");
    let out = ptc()
        .args(["eval", "--otlp-endpoint", &receiver.url, "-e", "(+ 1 2)"])
        .env("TRACEPARENT", format!("00-{trace_id}-{parent}-01"))
        .output()
        .expect("ptc runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    assert!(out.stderr.is_empty(), "no log lines: {out:?}");
    // Exported by the time the process ended.
    let spans = trace(&receiver, trace_id).await;
    let [eval] = spans.as_slice() else {
        panic!("{spans:#?}")
    };
    assert_eq!(eval["name"], "lisp_eval");
    assert_eq!(eval["parent_span_id"], parent);
    assert_eq!(eval["attributes"]["ptc.caller"], "local");
    assert_eq!(eval["attributes"]["ptc.outcome"], "ok");
    assert_eq!(eval["attributes"]["ptc.result.bytes"], 1);
    assert_eq!(eval["resource"]["service.name"], "ptc");
}

#[test]
fn a_protocol_other_than_http_protobuf_stops_eval_naming_the_variable() {
    let out = ptc()
        .args([
            "eval",
            "--otlp-endpoint",
            "http://127.0.0.1:4318",
            "-e",
            "1",
        ])
        .env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
        .output()
        .expect("ptc runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("ptc eval: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is `grpc`:"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn serve_continues_a_requests_trace_and_flushes_its_spans_on_sigterm() {
    let Some(receiver) = ptc_tests::otlp::start() else {
        return;
    };
    let dir = ptc_tests::fresh_dir("cli-traces");
    let config = dir.join("upstreams.json");
    std::fs::write(&config, r#"{"upstreams": {}}"#).unwrap();
    let mut host = HostProcess::serve(
        PTC,
        &[
            "--config",
            config.to_str().unwrap(),
            "--otlp-endpoint",
            &receiver.url,
        ],
    );
    let (trace_id, parent) = ("ab5d7f9102e454d6b8f0a2c4e6a8b0d2", "6f70819203142536");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "traces-test", "version": "1"}
    });
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": meta, "name": "lisp_eval", "arguments": {"program": "(* 6 7)"}}});
    let answer = ptc_tests::issuer::http_client()
        .post(format!("http://{}/mcp", host.addr))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "lisp_eval")
        .header("traceparent", format!("00-{trace_id}-{parent}-01"))
        .body(msg.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("42"));
    // The audit line is as it is without traces: no span in the logs (a span would prefix the
    // target, `lisp_eval: ptc::audit`; the line names the tool called as a field).
    let audit = host.line_with("ptc::audit");
    assert!(
        !audit.contains("lisp_eval:") && audit.contains("tool=\"lisp_eval\""),
        "{audit}"
    );
    assert!(host.terminate().success());
    let spans = trace(&receiver, trace_id).await;
    let [eval] = spans.as_slice() else {
        panic!("{spans:#?}")
    };
    assert_eq!(eval["parent_span_id"], parent);
    assert_eq!(eval["attributes"]["ptc.caller"], "local");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_mcp_stdio_upstreams_spans_join_the_trace_through_meta() {
    let Some(receiver) = ptc_tests::otlp::start() else {
        return;
    };
    // The upstream is another ptc host on stdio, exporting to the same receiver: its
    // `lisp_eval` continues the trace the call's `_meta` carries, and it exports its span when
    // the outer `eval` ends and closes its input.
    let dir = ptc_tests::fresh_dir("cli-traces-stdio");
    let inner = dir.join("inner.json");
    std::fs::write(&inner, r#"{"upstreams": {}}"#).unwrap();
    let outer = dir.join("upstreams.json");
    let config = json!({"upstreams": {"inner": {
        "transport": "mcp_stdio",
        "command": PTC,
        "args": ["serve", "--config", inner, "--otlp-endpoint", receiver.url],
        // It exports its spans to the receiver on the host's loopback.
        "sandbox": {"network": true},
    }}});
    std::fs::write(&outer, config.to_string()).unwrap();
    let (trace_id, parent) = ("c7e9a1b3d5f74816a8c0e2f4a6b8d0e2", "708192a3b4c5d6e7");
    let out = ptc()
        .args([
            "eval",
            "--config",
            outer.to_str().unwrap(),
            "--otlp-endpoint",
            &receiver.url,
            "-e",
            r#"(get (:value (tool/call 'inner/lisp_eval {:program "(* 6 7)"})) "result")"#,
        ])
        .env("TRACEPARENT", format!("00-{trace_id}-{parent}-01"))
        .output()
        .expect("ptc runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
    let spans = trace(&receiver, trace_id).await;
    let name = |n: &str| spans.iter().filter(|s| s["name"] == n).collect::<Vec<_>>();
    let (evals, calls) = (name("lisp_eval"), name("tool/call"));
    let ([a, b], [call]) = (evals.as_slice(), calls.as_slice()) else {
        panic!("{spans:#?}")
    };
    let (outer_eval, inner_eval) = if a["parent_span_id"] == parent {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(outer_eval["parent_span_id"], parent);
    assert_eq!(call["parent_span_id"], outer_eval["span_id"]);
    assert_eq!(call["attributes"]["ptc.transport"], "mcp_stdio");
    assert_eq!(call["attributes"]["ptc.outcome"], "ok");
    assert_eq!(
        inner_eval["parent_span_id"], call["span_id"],
        "the stdio upstream's span continues the call's"
    );
    assert_eq!(inner_eval["attributes"]["ptc.outcome"], "ok");
    let _ = std::fs::remove_dir_all(&dir);
}
