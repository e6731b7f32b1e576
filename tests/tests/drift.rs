//! Live response drift over real HTTP: answers checked against the tool's output schema as the
//! program gets them, sampled or in full; drift counted per tool and field and named in the
//! call's record, or (strict) a `response_drift` failure.

mod support;

use std::path::Path;
use std::sync::Arc;

use ptc_core::call::response_check::ResponseCheck;
use ptc_core::{Budgets, StartOptions, Upstreams};
use serde_json::{Value, json};

/// 20 traces: the 3rd has a string cost, the 18th a status the document does not list.
fn traces() -> Value {
    let items: Vec<Value> = (0..20)
        .map(|i| {
            let status = if i == 17 { "cancelled" } else { "ok" };
            let cost = if i == 2 { json!("free") } else { json!(1.5) };
            json!({"id": format!("t{i}"), "status": status, "cost": cost})
        })
        .collect();
    json!({"traces": items})
}

fn document() -> Value {
    json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
      "paths": {"/traces": {"get": {"operationId": "list_traces", "x-ptc-result-path": "$.traces",
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
          "type": "object", "properties": {"traces": {"type": "array", "items": {
            "$ref": "#/components/schemas/Trace"}}}}}}}}}}},
      "components": {"schemas": {"Trace": {"type": "object", "required": ["id", "status"],
        "properties": {"id": {"type": "string"},
          "status": {"type": "string", "enum": ["ok", "error"]},
          "cost": {"type": "number"}}}}}})
}

fn upstreams(rt: &tokio::runtime::Runtime, check: ResponseCheck, strict: bool) -> Arc<Upstreams> {
    let app = axum::Router::new().route(
        "/traces",
        axum::routing::get(|| async { axum::Json(traces()) }),
    );
    let addr = support::loopback(rt, app);
    let dir = std::env::temp_dir().join(format!(
        "ptc-drift-{}-{check:?}-{strict}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.json"), document().to_string()).unwrap();
    let config = json!({"upstreams": {"t": {"transport": "openapi",
        "base_url": format!("http://{addr}"), "allow_insecure_http": true,
        "schema_file": "t.json", "include_operations": ["list_traces"]}}});
    let path = dir.join("upstreams.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let loaded = ptc_plan::load(Path::new(&path)).unwrap_or_else(|d| panic!("{d}"));
    let options = StartOptions {
        response_check: check,
        strict_responses: strict,
        ..StartOptions::default()
    };
    Arc::new(
        rt.block_on(Upstreams::start(loaded.plan, loaded.secrets, options))
            .unwrap(),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    support::runtime(1)
}

fn run(rt: &tokio::runtime::Runtime, up: &Arc<Upstreams>, src: &str) -> (String, Value) {
    let run = support::run(rt, up, src, Budgets::default());
    let calls = serde_json::to_value(&run.records.upstream_calls).unwrap();
    (run.result.unwrap().to_string(), calls)
}

const CALL: &str =
    "(let [r (tool/call 't/list-traces {})] [(:ok r) (:reason r) (count (:value r))])";

#[test]
fn sampled_checks_see_the_first_items_and_count_what_drifted() {
    let rt = runtime();
    let up = upstreams(&rt, ResponseCheck::Sampled, false);
    let (value, calls) = run(&rt, &up, CALL);
    // Not strict: the program gets the answer; the record names the drift.
    assert_eq!(value, "[true nil 20]");
    assert_eq!(
        calls[0]["drift"],
        json!(["/*/cost: expected number, got string"])
    );
    run(&rt, &up, CALL);
    assert_eq!(
        up.drift().counts(),
        [("t/list-traces".to_string(), "/*/cost".to_string(), 2)]
    );
}

#[test]
fn full_checks_see_every_item() {
    let rt = runtime();
    let up = upstreams(&rt, ResponseCheck::Full, false);
    let (_, calls) = run(&rt, &up, CALL);
    assert_eq!(
        calls[0]["drift"],
        json!([
            "/*/cost: expected number, got string",
            "/*/status: \"cancelled\" is not one of the documented values"
        ])
    );
}

#[test]
fn strict_checks_fail_the_call_and_off_checks_nothing() {
    let rt = runtime();
    let up = upstreams(&rt, ResponseCheck::Sampled, true);
    let (value, calls) = run(
        &rt,
        &up,
        "(let [r (tool/call 't/list-traces {})] [(:ok r) (:reason r) (:message r)])",
    );
    assert_eq!(
        value,
        "[false :response_drift \"t/list-traces: the response does not match its schema: /*/cost: expected number, got string\"]"
    );
    assert_eq!(calls[0]["reason"], "response_drift");
    let up = upstreams(&rt, ResponseCheck::Off, true);
    let (value, calls) = run(&rt, &up, CALL);
    assert_eq!(value, "[true nil 20]");
    assert!(calls[0].get("drift").is_none());
    assert!(up.drift().counts().is_empty());
}
