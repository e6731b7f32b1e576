//! Declared programs served as tools of the host, over Streamable HTTP on loopback against the
//! Observatory test bed: listed beside `lisp_eval` with their schemas and annotations, called
//! with arguments that are checked, answering what the same program answers through
//! `lisp_eval`.

use std::sync::Arc;

use ptc_core::StartOptions;
use ptc_core::server::{EvalLimits, Evaluator, HttpOptions};
use serde_json::{Value, json};

mod support;
use support::{Bed, Session, message_with_id};

const PROGRAM: &str = "errors-by-class";

async fn request(s: &Session, id: i64, method: &str, params: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let r = s.send(&msg).await;
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    message_with_id(&body, id).unwrap_or_else(|| panic!("no reply {id} in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_program_is_a_tool_answering_as_the_same_program_through_lisp_eval() {
    let token = observatory_server::TokenSpec::full_access("tok", "obs_programs_6b1d2e9f");
    // The fixture config declares the demo's read questions as programs.
    let bed = Bed::start("program-tools", token, "", StartOptions::default()).await;
    let evaluator = Evaluator::new(
        Arc::clone(&bed.up),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    let records = ptc_tests::fresh_dir("program-tools-records");
    evaluator.set_record_dir(
        ptc_core::program::record_replay::RecordDir::new(records.clone(), Default::default())
            .unwrap(),
    );
    let host = support::serve(evaluator, HttpOptions::default()).await;
    let session = Session::open(&host.url, None).await;

    let listed = request(&session, 1, "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "lisp_eval",
            "costs-by-model",
            "errors-by-class",
            "failed-run",
            "failed-steps",
            "trace-by-external-id"
        ]
    );
    let tool = &tools[2];
    assert_eq!(tool["name"], PROGRAM);
    assert_eq!(tool["inputSchema"]["required"], json!(["org_id"]));
    assert_eq!(
        tool["outputSchema"]["properties"]["result"]["anyOf"][0],
        bed.up.plan().program(PROGRAM).unwrap().output_schema
    );
    assert_eq!(tool["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(tool["annotations"]["destructiveHint"], json!(false));

    let called = request(
        &session,
        2,
        "tools/call",
        json!({"name": PROGRAM, "arguments": {"org_id": "org_acme"}}),
    )
    .await;
    let answer = &called["result"]["structuredContent"];
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    let classes = answer["result"].as_array().unwrap();
    assert!(!classes.is_empty(), "{answer}");
    // What it answers meets the outputSchema it lists (clients check it).
    let listed_output = tool["outputSchema"].clone();
    ptc_core::call::validate::check_args(
        ptc_core::call::validate::Schema {
            root: &listed_output,
            definitions: None,
        },
        &Default::default(),
        answer.as_object().unwrap().clone(),
    )
    .unwrap_or_else(|e| panic!("{e:?}: {answer}"));
    let calls = answer["upstream_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{answer}");
    assert_eq!(calls[0]["tool"], json!("list-errors"));

    // The run's recording names the program and holds its arguments as the context.
    let recorded: Vec<_> = std::fs::read_dir(&records).unwrap().collect();
    assert_eq!(recorded.len(), 1);
    let file =
        ptc_core::program::record_replay::RunFile::read(&recorded[0].as_ref().unwrap().path())
            .unwrap();
    assert_eq!(file.tool.as_deref(), Some(PROGRAM));
    assert_eq!(file.context.as_deref(), Some(r#"{"org_id":"org_acme"}"#));

    // The same program through lisp_eval, its argument as context: the same answer.
    let source = bed.up.plan().program(PROGRAM).unwrap().source.clone();
    let through_eval = request(
        &session,
        3,
        "tools/call",
        json!({"name": "lisp_eval", "arguments": {"program": source, "context": {"org_id": "org_acme"}}}),
    )
    .await;
    assert_eq!(
        through_eval["result"]["structuredContent"]["result"],
        answer["result"]
    );

    // Arguments are checked against the parameters before the program runs.
    let wrong = request(
        &session,
        4,
        "tools/call",
        json!({"name": PROGRAM, "arguments": {"org": "org_acme"}}),
    )
    .await;
    let refused = &wrong["result"]["structuredContent"];
    assert_eq!(refused["reason"], json!("invalid_request"), "{wrong}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with("errors-by-class: invalid arguments: unknown argument"),
        "{message}"
    );
    assert_eq!(
        refused["upstream_calls"],
        json!([]),
        "nothing was called: {refused}"
    );

    // The metrics count each run of the program by its name (the refused call too).
    let body = support::client()
        .get(format!("{}/metrics", host.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (series, n) in [
        (
            "ptc_program_runs_total{program=\"errors-by-class\",outcome=\"ok\"} ",
            "1",
        ),
        (
            "ptc_program_runs_total{program=\"errors-by-class\",outcome=\"error\"} ",
            "1",
        ),
    ] {
        assert!(
            body.lines().any(|l| l == format!("{series}{n}")),
            "{series}{n} in\n{body}"
        );
    }

    // A name that is neither says which tools there are.
    let unknown = request(
        &session,
        5,
        "tools/call",
        json!({"name": "nope", "arguments": {}}),
    )
    .await;
    let error = unknown["error"]["message"].as_str().unwrap();
    assert_eq!(
        error,
        "unknown tool `nope`; this server has lisp_eval, costs-by-model, errors-by-class, \
         failed-run, failed-steps, trace-by-external-id"
    );
    bed.stop().await;
}

/// A policy rule keeps its callers to the deployment's reviewed programs: it lists only the
/// programs it names, lisp_eval is neither listed nor callable, and another program is unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_keeps_callers_to_the_programs_it_names() {
    let token = observatory_server::TokenSpec::full_access("tok", "obs_programs_policy_8c2e");
    let bed = Bed::start("program-policy", token, "", StartOptions::default()).await;
    let evaluator = Evaluator::new(
        Arc::clone(&bed.up),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    evaluator.set_policy(
        ptc_core::catalog::policy::Policy::parse(
            r#"{"rules": [{"name": "reviewed", "tools": ["observatory/*"],
                "programs": ["errors-*"], "lisp_eval": false}]}"#,
        )
        .unwrap(),
    );
    let host = support::serve(evaluator, HttpOptions::default()).await;
    let session = Session::open(&host.url, None).await;

    let listed = request(&session, 1, "tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, [PROGRAM]);

    let called = request(
        &session,
        2,
        "tools/call",
        json!({"name": PROGRAM, "arguments": {"org_id": "org_acme"}}),
    )
    .await;
    assert_eq!(called["result"]["isError"], json!(false), "{called}");

    let own = request(
        &session,
        3,
        "tools/call",
        json!({"name": "lisp_eval", "arguments": {"program": "(+ 1 2)"}}),
    )
    .await;
    let refused = &own["result"]["structuredContent"];
    assert_eq!(refused["reason"], json!("forbidden"), "{own}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("policy rule `reviewed` does not allow programs of your own"),
        "{own}"
    );

    let other = request(
        &session,
        4,
        "tools/call",
        json!({"name": "failed-run", "arguments": {"org_id": "org_acme", "trace_id": "t"}}),
    )
    .await;
    assert_eq!(
        other["error"]["message"],
        json!("unknown tool `failed-run`; this server has errors-by-class")
    );
    bed.stop().await;
}
