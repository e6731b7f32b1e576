//! `lisp_eval`'s contract, through the evaluator and the envelope every transport uses: context,
//! output_schema, the result and error shapes, request limits at their boundary, the bounded text,
//! and the tool's description and annotations.

use std::path::Path;
use std::sync::Arc;

use ptc_core::catalog::policy::Grant;
use ptc_core::server::handler::parse_request;
use ptc_core::server::repl::Repl;
use ptc_core::server::{EvalLimits, EvalRequest, Evaluator, envelope, tool};
use ptc_core::{StartOptions, Upstreams};
use serde_json::{Value, json};

async fn evaluator(plan: ptc_plan::Plan, limits: EvalLimits) -> Arc<Evaluator> {
    let up = Upstreams::start(plan, Default::default(), StartOptions::default())
        .await
        .unwrap();
    Evaluator::new(Arc::new(up), tokio::runtime::Handle::current(), limits).unwrap()
}

fn empty() -> ptc_plan::Plan {
    ptc_plan::Plan::default()
}

async fn call(ev: &Evaluator, args: Value) -> Value {
    let Value::Object(m) = args else { panic!() };
    let req = parse_request(Some(m)).unwrap();
    let o = ev.eval(req, Default::default()).await;
    serde_json::to_value(envelope::to_result(&o, ev.limits().max_output_bytes)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_keys_become_data_and_results_come_as_clojure_text_and_json() {
    let ev = evaluator(empty(), EvalLimits::default()).await;
    let r = call(
        &ev,
        json!({"program": "(println \"hi\") {:sum (reduce + data/xs) :who data/name}",
                             "context": {"xs": [1, 2, 3], "name": "ada"}}),
    )
    .await;
    assert_eq!(r["isError"], json!(false));
    assert_eq!(r["content"][0]["text"], "hi\n{:sum 6 :who \"ada\"}");
    assert_eq!(
        r["structuredContent"]["result"],
        json!({"sum": 6, "who": "ada"})
    );
    assert_eq!(r["structuredContent"]["prints"], json!(["hi"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_schema_mismatch_is_an_error_naming_it() {
    let ev = evaluator(empty(), EvalLimits::default()).await;
    let schema = json!({"type": "object", "properties": {"count": {"type": "integer"}},
                        "required": ["count"]});
    let ok = call(
        &ev,
        json!({"program": "{:count 3}", "output_schema": schema}),
    )
    .await;
    assert_eq!(ok["isError"], json!(false), "{ok}");
    let bad = call(
        &ev,
        json!({"program": "{:count \"three\"}", "output_schema": schema}),
    )
    .await;
    assert_eq!(bad["isError"], json!(true));
    assert_eq!(bad["structuredContent"]["reason"], "output_mismatch");
    let m = bad["structuredContent"]["message"].as_str().unwrap();
    assert!(m.contains("count") && m.contains("integer"), "{m}");
    let missing = call(&ev, json!({"program": "{:n 1}", "output_schema": schema})).await;
    assert_eq!(missing["structuredContent"]["reason"], "output_mismatch");
    assert!(
        missing["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("count")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_reason_message_position_and_fail_value() {
    let ev = evaluator(empty(), EvalLimits::default()).await;
    let r = call(&ev, json!({"program": "(+ 1\n   (nosuch 2))"})).await;
    assert_eq!(r["isError"], json!(true));
    let s = &r["structuredContent"];
    assert_eq!(s["reason"], "unbound_var", "{s}");
    assert_eq!(s["position"]["line"], json!(2), "{s}");
    assert!(s["message"].as_str().unwrap().contains("nosuch"));
    let f = call(&ev, json!({"program": "(fail {:code 7})"})).await;
    assert_eq!(f["structuredContent"]["reason"], "fail");
    assert_eq!(f["structuredContent"]["value"], json!({"code": 7}));
    assert_eq!(f["structuredContent"]["prints"], json!([]));
    let text = f["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("fail: ") && text.ends_with("\nfail value: {\"code\":7}"),
        "nothing printed, so no printed section: {text}"
    );
    let p = call(&ev, json!({"program": "(println \"step 1\") (fail 2)"})).await;
    let text = p["content"][0]["text"].as_str().unwrap();
    assert!(
        text.ends_with("\nfail value: 2\nprinted before the error:\nstep 1\n"),
        "{text}"
    );
    assert_eq!(p["structuredContent"]["prints"], json!(["step 1"]));
}

/// `lisp_eval` pre-checks every program before it runs: a literal call of a tool that does not
/// exist fails it with nothing evaluated, not even what comes before the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_is_pre_checked_before_anything_runs() {
    let ev = evaluator(empty(), EvalLimits::default()).await;
    let r = call(
        &ev,
        json!({"program": "(println \"never\") (tool/call 'nosuch/tool {})"}),
    )
    .await;
    let s = &r["structuredContent"];
    assert_eq!(s["prints"], json!([]), "nothing ran: {s}");
    let m = s["message"].as_str().unwrap();
    assert!(
        m.starts_with("1 tool/call problem found before running (nothing was called):"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_problems_are_named() {
    let ev = evaluator(
        empty(),
        EvalLimits {
            max_program_bytes: 10,
            max_context_bytes: 20,
            ..EvalLimits::default()
        },
    )
    .await;
    for (args, needle) in [
        (json!({}), "`program` is required"),
        (json!({"program": 5}), "`program` must be a string"),
        (
            json!({"program": "1", "signature": "x"}),
            "unknown argument `signature`",
        ),
        (
            json!({"program": "1", "context": [1]}),
            "`context` must be a JSON object",
        ),
    ] {
        let Value::Object(m) = args else { panic!() };
        let e = parse_request(Some(m)).unwrap_err();
        assert!(e.contains(needle), "{e}");
    }
    let at = call(&ev, json!({"program": "(+ 1 2 3)"})).await; // 9 bytes
    assert_eq!(at["structuredContent"]["result"], json!(6));
    let at = call(&ev, json!({"program": "(+ 10 2 3)"})).await; // 10 bytes: the limit
    assert_eq!(at["structuredContent"]["result"], json!(15));
    let past = call(&ev, json!({"program": "(+ 10 20 3)"})).await; // 11 bytes
    assert_eq!(past["structuredContent"]["reason"], "invalid_request");
    assert!(
        past["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("11 bytes, over the limit of 10")
    );
    let blank = call(&ev, json!({"program": "  \n"})).await;
    assert!(
        blank["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("is empty")
    );
    // {"k":"123456789012"} is 20 bytes: at the limit; one more character is past it.
    let at = call(
        &ev,
        json!({"program": "data/k", "context": {"k": "123456789012"}}),
    )
    .await;
    assert_eq!(at["structuredContent"]["result"], "123456789012");
    let past = call(
        &ev,
        json!({"program": "data/k", "context": {"k": "1234567890123"}}),
    )
    .await;
    assert!(
        past["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("21 bytes of JSON, over the limit of 20")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_text_is_bounded_with_a_marker() {
    let ev = evaluator(
        empty(),
        EvalLimits {
            max_output_bytes: 12,
            ..EvalLimits::default()
        },
    )
    .await;
    // "\"1234567890\"" is 12 bytes: at the limit.
    let at = call(&ev, json!({"program": "\"1234567890\""})).await;
    assert_eq!(at["content"][0]["text"], "\"1234567890\"");
    // Its JSON form is the same 12 bytes: kept whole too.
    assert_eq!(at["structuredContent"]["result"], "1234567890");
    assert_eq!(at["structuredContent"].get("result_truncated"), None);
    let past = call(&ev, json!({"program": "\"12345678901\""})).await;
    let text = past["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("\"12345678901") && text.contains("[truncated: 12 of 13 bytes shown"),
        "{text}"
    );
    assert_eq!(past["structuredContent"]["result"], Value::Null);
    assert_eq!(past["structuredContent"]["result_truncated"], json!(true));
    assert_eq!(
        EvalLimits::default().max_output_bytes,
        64 * 1024,
        "the documented default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn description_lists_the_catalog_and_annotations_tell_the_truth() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let loaded = ptc_plan::load(&config).unwrap();
    let ev = evaluator(loaded.plan, EvalLimits::default()).await;
    let t = tool::definition(ev.upstreams().catalog(), &Grant::everything());
    let d = t.description.as_deref().unwrap();
    assert!(
        d.contains("(tool/call 'server/tool") && d.contains("(apropos"),
        "{d}"
    );
    for name in [
        "list-traces",
        "get-trace",
        "get-trace-steps",
        "get-trace-step",
        "search-traces",
        "costs",
        "list-errors",
    ] {
        assert!(
            d.contains(&format!("observatory/{name} - ")),
            "{name} in {d}"
        );
    }
    let a = t.annotations.unwrap();
    // Every Observatory operation is a GET: read-only, open world.
    assert_eq!(a.read_only_hint, Some(true));
    assert_eq!(a.open_world_hint, Some(true));
    let none = evaluator(empty(), EvalLimits::default()).await;
    let a = tool::annotations(none.upstreams().catalog(), &Grant::everything());
    assert_eq!(
        (a.read_only_hint, a.open_world_hint),
        (Some(true), Some(false))
    );
    assert!(
        tool::catalog_text(none.upstreams().catalog(), &Grant::everything())
            .contains("No upstreams")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_keeps_its_definitions_and_gives_each_entry_fresh_budgets() {
    let up = Upstreams::start(empty(), Default::default(), StartOptions::default())
        .await
        .unwrap();
    let (up, rt) = (Arc::new(up), tokio::runtime::Handle::current());
    // Host calls block on the runtime, so the REPL runs off its workers, as the binaries do.
    tokio::task::spawn_blocking(move || {
        let mut repl = Repl::new(up, rt, EvalLimits::default());
        let out = repl.eval("(def x 41) (println \"defined\") (inc x)");
        assert_eq!(
            (out.prints.as_str(), out.result),
            ("defined\n", Ok("42".to_string()))
        );
        assert_eq!(repl.eval("(+ *1 x)").result, Ok("83".to_string()));
        let e = repl.eval("(undefined-fn 1)").result.unwrap_err();
        assert!(
            e.starts_with("unbound_var: ") && e.contains("undefined-fn"),
            "{e}"
        );
        // Each entry gets the per-program discovery budget (25) afresh.
        let spend = |n: usize| format!("(last (map (fn [_] (tool/servers)) (range {n})))");
        for _ in 0..2 {
            assert_eq!(repl.eval(&spend(25)).result, Ok("[]".to_string()));
        }
        let spent = repl.eval(&spend(26)).result.unwrap();
        assert!(
            spent.contains(":reason :cap_exhausted")
                && spent.contains("budget of 25 discovery operations is spent"),
            "{spent}"
        );
        // The pre-check runs on every entry, before anything is evaluated.
        let out = repl.eval("(println \"never\") (tool/call 'nosuch/tool {})");
        assert_eq!(out.prints, "", "nothing ran");
        let e = out.result.unwrap_err();
        assert!(e.contains("nosuch"), "{e}");
    })
    .await
    .unwrap();
}

/// The REPL's host answers every question the interpreter asks the program host: the upstream
/// names reach `all-ns` and the unknown-namespace hint as they do in `lisp_eval`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_knows_the_upstream_names() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let plan = ptc_plan::load(&config).unwrap().plan;
    let up = Upstreams::start(plan, Default::default(), StartOptions::default())
        .await
        .unwrap();
    let (up, rt) = (Arc::new(up), tokio::runtime::Handle::current());
    tokio::task::spawn_blocking(move || {
        let mut repl = Repl::new(up, rt, EvalLimits::default());
        let all = repl
            .eval("(some #{\"observatory\"} (map str (all-ns)))")
            .result;
        assert_eq!(all, Ok("\"observatory\"".to_string()));
        let e = repl.eval("(dir observatry)").result.unwrap_err();
        assert!(e.contains("did you mean observatory?"), "{e}");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outcome_carries_the_evaluations_wall_clock_time() {
    let ev = evaluator(empty(), EvalLimits::default()).await;
    let req = EvalRequest {
        program: "(reduce + (range 10000))".into(),
        ..EvalRequest::default()
    };
    let started = std::time::Instant::now();
    let o = ev.eval(req, Default::default()).await;
    let outside = started.elapsed();
    assert_eq!(o.result.unwrap().text, "49995000");
    assert!(
        o.duration > std::time::Duration::ZERO && o.duration <= outside,
        "{:?} within {outside:?}",
        o.duration
    );
}

/// `ptc_ready_wait_seconds_count`: how many times a ready program got its evaluation thread.
fn turns_taken(ev: &Evaluator) -> f64 {
    let body = ev.metrics().render(Default::default()).unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix("ptc_ready_wait_seconds_count "))
        .and_then(|n| n.parse().ok())
        .expect("the ready wait is reported")
}

/// One evaluation thread, one party's four programs computing without end, and another party's
/// `(+ 1 2)` sent while they are mid-computation (each has taken turns on the thread): it is
/// answered while all four still compute, and they end only when cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_light_program_is_answered_while_heavy_ones_compute() {
    let limits = EvalLimits {
        eval_threads: 1,
        ..EvalLimits::default()
    };
    let ev = evaluator(empty(), limits).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut heavy = Vec::new();
    for _ in 0..4 {
        let (ev, cancel) = (ev.clone(), cancel.clone());
        heavy.push(tokio::spawn(async move {
            let req = EvalRequest {
                program: "(loop [i 0] (recur (inc i)))".into(),
                party: Some("heavy".into()),
                ..EvalRequest::default()
            };
            ev.eval(req, cancel).await
        }));
    }
    // Each of the four has started and let the others run at least a few times.
    while turns_taken(&ev) < 40.0 {
        tokio::task::yield_now().await;
    }
    let light = EvalRequest {
        program: "(+ 1 2)".into(),
        party: Some("light".into()),
        ..EvalRequest::default()
    };
    let answer = ev.eval(light, Default::default()).await;
    assert_eq!(answer.result.unwrap().text, "3");
    assert!(heavy.iter().all(|h| !h.is_finished()), "still computing");
    cancel.cancel();
    for h in heavy {
        let e = h.await.unwrap().result.unwrap_err();
        assert_eq!(e.reason.as_str(), "cancelled", "{}", e.message);
    }
}
