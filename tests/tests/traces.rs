//! Traces for real: the HTTP host evaluating programs against the Observatory test bed exports its
//! spans over OTLP/HTTP to the test receiver (`fixtures/otlp-receiver`, which decodes them with
//! the official protobuf definitions). The evaluation's span continues the caller's trace (the
//! `traceparent` header, or the request's `_meta`, which wins), has one child per upstream call
//! (`pmap`'s overlap in time), per page and per approval wait, and the test bed sees the call's
//! span as the parent of its request. No secret, argument or answer is ever exported.
//!
//! The exporter is process-wide, so every test here shares one exporter and one receiver
//! ([`exporting`]); each test reads only the spans of its own trace.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use observatory_server::{Faults, ServerConfig, ServerHandle, TokenSource, TokenSpec};
use ptc_core::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use ptc_core::program::program_hash;
use ptc_core::server::{EvalLimits, EvalRequest, Evaluator, HttpOptions};
use ptc_core::telemetry::{TraceConfig, TraceParent, Traces};
use ptc_core::{StartOptions, Upstreams, WriteGate};
use ptc_tests::otlp::Receiver;
use serde_json::{Value, json};

mod support;

/// The Observatory credential ptc holds: never exported.
const SECRET: &str = "obs_traces_secret_5d81f0c2";
/// The clients' bearer token of the host: never exported.
const HOST_TOKEN: &str = "host-token-never-exported-0123456789";
/// A string argument of a program: never exported.
const ARGUMENT: &str = "canary-argument-9b4e";
/// How long the test bed takes to answer each request: enough for `pmap`'s calls to overlap.
const LATENCY_MS: u64 = 150;

/// The exporter, pointed at the receiver, started once for the whole test binary.
struct Exporting {
    receiver: Receiver,
    traces: Traces,
}

/// The shared exporter; `None` (the test skips) when the receiver's venv is missing.
fn exporting() -> Option<&'static Exporting> {
    static ONCE: OnceLock<Option<Exporting>> = OnceLock::new();
    let mut started_here = false;
    let exporting = ONCE
        .get_or_init(|| {
            started_here = true;
            let receiver = ptc_tests::otlp::start()?;
            let config = TraceConfig {
                endpoint: Some(receiver.url.clone()),
                service: "ptc-traces-test".into(),
            };
            let traces = Traces::start(&config).expect("the exporter starts");
            Some(Exporting { receiver, traces })
        })
        .as_ref();
    if exporting.is_none() && !started_here {
        ptc_tests::skip("the fixtures/otlp-receiver Python venv is missing (see the first skip)");
    }
    exporting
}

impl Exporting {
    /// The spans of trace `trace_id` received once everything ended so far is exported.
    async fn trace(&'static self, trace_id: &str) -> Vec<Value> {
        tokio::task::spawn_blocking(|| self.traces.flush())
            .await
            .unwrap()
            .expect("the export succeeds");
        self.receiver
            .spans()
            .await
            .into_iter()
            .filter(|s| s["trace_id"] == trace_id)
            .collect()
    }
}

/// The test bed (answering after [`LATENCY_MS`]) and the HTTP host over the fixture config's
/// upstreams pointed at it; with `writes`, the gate open and a token that may annotate.
struct Bed {
    server: ServerHandle,
    token_file: std::path::PathBuf,
    host: support::Host,
}

async fn bed(name: &str, writes: bool) -> Bed {
    let mut token = TokenSpec::full_access("tok_traces", SECRET);
    if writes {
        token.scopes.push("traces:write".into());
    }
    let mut config = ServerConfig::new(TokenSource::Inline(vec![token]));
    config.faults =
        Faults::parse_over(&Faults::default(), &format!("latency_ms={LATENCY_MS}")).unwrap();
    let (addr, server) = observatory_server::start(config).await.unwrap();
    let (loaded, token_file) = support::observatory_plan(addr, SECRET, &format!("traces-{name}"));
    let options = StartOptions {
        writes: if writes {
            WriteGate::Open
        } else {
            WriteGate::Closed
        },
        ..StartOptions::default()
    };
    let up = Upstreams::start(loaded.plan, loaded.secrets, options)
        .await
        .unwrap();
    let evaluator = Evaluator::new(
        Arc::new(up),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    let options = HttpOptions {
        token: Some(HOST_TOKEN.into()),
        ..HttpOptions::default()
    };
    let host = support::serve(evaluator, options).await;
    Bed {
        server,
        token_file,
        host,
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.token_file);
    }
}

impl Bed {
    /// `lisp_eval` of `program` as one 2026-07-28 request, with `meta` added to its `_meta` and
    /// `headers` to the POST; the call's result.
    async fn eval(&self, program: &str, meta: Value, headers: &[(&str, &str)]) -> Value {
        let mut all_meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "traces-test", "version": "1"}
        });
        if let (Some(all), Value::Object(extra)) = (all_meta.as_object_mut(), meta) {
            all.extend(extra);
        }
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "_meta": all_meta, "name": "lisp_eval", "arguments": {"program": program}}});
        let mut post = support::client()
            .post(&self.host.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "lisp_eval")
            .bearer_auth(HOST_TOKEN)
            .body(msg.to_string());
        for (k, v) in headers {
            post = post.header(*k, *v);
        }
        let answer = post.send().await.unwrap();
        assert_eq!(answer.status(), 200);
        let body = answer.text().await.unwrap();
        let reply = support::message_with_id(&body, 1).unwrap_or_else(|| panic!("{body}"));
        reply["result"]["structuredContent"].clone()
    }

    /// The `traceparent` headers the test bed received, in order.
    fn traceparents_seen(&self) -> Vec<String> {
        self.server
            .audit_records()
            .into_iter()
            .filter_map(|r| r.traceparent)
            .collect()
    }
}

/// An evaluator over the upstreams `config` names, loaded as the host loads a config file.
async fn evaluator_of(config: &Value) -> Arc<Evaluator> {
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        std::path::Path::new("/traces-test/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let up = Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
        .await
        .unwrap();
    Evaluator::new(
        Arc::new(up),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap()
}

/// A W3C `traceparent` for trace `trace_id` whose parent span is `span_id`, sampled.
fn traceparent(trace_id: &str, span_id: &str) -> String {
    format!("00-{trace_id}-{span_id}-01")
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn int(span: &Value, key: &str) -> i64 {
    attr(span, key)
        .as_i64()
        .unwrap_or_else(|| panic!("{key} is not an integer in {span}"))
}

/// The one span named `name`.
fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    match named(spans, name).as_slice() {
        [s] => s,
        other => panic!("{} spans named {name} in {spans:#?}", other.len()),
    }
}

/// Checks the attributes every answered `list-traces` call's span has, a child of `parent`.
fn assert_answered_call(call: &Value, parent: &Value) {
    assert_eq!(call["parent_span_id"], parent["span_id"], "{call}");
    assert_eq!(call["trace_id"], parent["trace_id"], "{call}");
    assert_eq!(call["kind"], "SPAN_KIND_CLIENT", "{call}");
    assert_eq!(attr(call, "ptc.upstream"), "observatory", "{call}");
    assert_eq!(attr(call, "ptc.tool"), "list-traces", "{call}");
    assert_eq!(attr(call, "ptc.transport"), "openapi", "{call}");
    assert_eq!(attr(call, "ptc.outcome"), "ok", "{call}");
    assert_eq!(int(call, "http.response.status_code"), 200, "{call}");
    assert!(int(call, "ptc.bytes") > 0, "{call}");
    assert!(int(call, "ptc.duration_ms") >= LATENCY_MS as i64, "{call}");
    // Never retried, never failed.
    assert!(attr(call, "ptc.retries").is_null(), "{call}");
    assert!(attr(call, "ptc.reason").is_null(), "{call}");
    assert_eq!(call["status"]["code"], "STATUS_CODE_UNSET", "{call}");
    // Within its evaluation.
    let (start, end) = (call["start_ns"].as_u64(), call["end_ns"].as_u64());
    assert!(start >= parent["start_ns"].as_u64() && end <= parent["end_ns"].as_u64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eval_continues_the_callers_trace_with_a_span_per_call_and_pmap_calls_overlap() {
    let Some(e) = exporting() else { return };
    let bed = bed("header", false).await;
    let (trace_id, caller_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let program = format!(
        "(let [first (tool/call 'observatory/list-traces {{:org-id \"org_acme\" :limit 1 \
                                                            :model \"{ARGUMENT}\"}})
               both (pmap (fn [org] (tool/call 'observatory/list-traces {{:org-id org :limit 1}}))
                          [\"org_acme\" \"org_initech\"])]
           [(:ok first) (mapv :ok both) (count (mapcat :value both))])"
    );
    let tp = traceparent(trace_id, caller_span);
    let result = bed.eval(&program, json!({}), &[("traceparent", &tp)]).await;
    assert_eq!(result["result"], json!([true, [true, true], 2]), "{result}");

    let spans = e.trace(trace_id).await;
    let eval = one(&spans, "lisp_eval");
    assert_eq!(
        eval["parent_span_id"], caller_span,
        "continues the caller's span"
    );
    assert_eq!(eval["kind"], "SPAN_KIND_SERVER");
    assert_eq!(
        attr(eval, "ptc.program.sha256"),
        program_hash(&program).as_str()
    );
    assert_eq!(int(eval, "ptc.program.bytes"), program.len() as i64);
    assert_eq!(
        attr(eval, "ptc.caller"),
        "token",
        "the static token's caller"
    );
    assert_eq!(attr(eval, "ptc.outcome"), "ok");
    assert!(attr(eval, "ptc.reason").is_null());
    assert_eq!(int(eval, "ptc.upstream.calls"), 3);
    assert!(int(eval, "ptc.upstream.bytes") > 0);
    assert_eq!(
        int(eval, "ptc.result.bytes"),
        "[true,[true,true],2]".len() as i64
    );
    assert_eq!(int(eval, "ptc.prints.bytes"), 0);
    assert_eq!(eval["resource"]["service.name"], "ptc-traces-test");
    assert_eq!(eval["scope"]["name"], "ptc");

    let mut calls = named(&spans, "tool/call");
    assert_eq!(calls.len(), 3, "{spans:#?}");
    assert_eq!(spans.len(), 4, "the evaluation and its calls, nothing else");
    for c in &calls {
        assert_answered_call(c, eval);
    }
    calls.sort_by_key(|c| c["start_ns"].as_u64());
    let (t0, t1, t2) = (calls[0], calls[1], calls[2]);
    let at = |s: &Value, k: &str| s[k].as_u64().unwrap();
    assert!(
        at(t0, "end_ns") <= at(t1, "start_ns"),
        "the first call ends before pmap starts"
    );
    assert!(
        at(t1, "start_ns") < at(t2, "end_ns") && at(t2, "start_ns") < at(t1, "end_ns"),
        "pmap's two calls run at the same time: {t1} {t2}"
    );

    // The test bed's requests continue the call spans: one request per call, each its own.
    let mut seen = bed.traceparents_seen();
    let mut expected: Vec<String> = calls
        .iter()
        .map(|c| traceparent(trace_id, c["span_id"].as_str().unwrap()))
        .collect();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);

    // Neither the credential, the host's token, an argument, the program nor an answer's data.
    let everything = e.receiver.everything().await;
    assert!(
        everything.contains(&program_hash(&program)),
        "the search reads this evaluation's span"
    );
    for never in [SECRET, HOST_TOKEN, ARGUMENT, "org_initech", "mapcat"] {
        assert!(!everything.contains(never), "exported: {never}");
    }
    let ids: Vec<&str> = bed
        .server
        .dataset()
        .traces()
        .iter()
        .map(|t| t.id.as_str())
        .collect();
    assert!(!ids.is_empty());
    for id in ids {
        assert!(
            !everything.contains(id),
            "an answer's trace id was exported: {id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_in_meta_wins_over_the_header_and_its_state_is_kept() {
    let Some(e) = exporting() else { return };
    let bed = bed("meta", false).await;
    let (in_meta, meta_span) = ("5c0e2b8a4d6f4e1a9b3c7d5e6f708192", "1a2b3c4d5e6f7081");
    let in_header = "6d1f3c9b5e704f2bac4d8e6f70819203";
    let program = "(:ok (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1}))";
    let meta = json!({
        "traceparent": traceparent(in_meta, meta_span),
        "tracestate": "ptc-test=meta",
    });
    let header = traceparent(in_header, "2b3c4d5e6f708192");
    let result = bed.eval(program, meta, &[("traceparent", &header)]).await;
    assert_eq!(result["result"], json!(true), "{result}");

    let spans = e.trace(in_meta).await;
    let eval = one(&spans, "lisp_eval");
    assert_eq!(eval["parent_span_id"], meta_span);
    assert_eq!(
        eval["trace_state"], "ptc-test=meta",
        "the caller's tracestate goes on"
    );
    let call = one(&spans, "tool/call");
    assert_answered_call(call, eval);
    assert!(
        e.trace(in_header).await.is_empty(),
        "the header's trace is not used"
    );
    assert_eq!(
        bed.traceparents_seen(),
        [traceparent(in_meta, call["span_id"].as_str().unwrap())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_did_not_sample_its_trace_gets_no_spans_and_its_upstream_is_told_so() {
    let Some(e) = exporting() else { return };
    let bed = bed("unsampled", false).await;
    let (trace_id, caller_span) = ("7e2a4c6b8d0f4a1c9e3b5d7f9a1c3e50", "3c4d5e6f70819203");
    let program = "(:ok (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1}))";
    let unsampled = format!("00-{trace_id}-{caller_span}-00");
    let result = bed
        .eval(program, json!({}), &[("traceparent", &unsampled)])
        .await;
    assert_eq!(result["result"], json!(true), "{result}");
    // The default sampler follows the caller (`parentbased_always_on`).
    assert!(e.trace(trace_id).await.is_empty(), "no span is exported");
    let seen = bed.traceparents_seen();
    let [sent] = seen.as_slice() else {
        panic!("{seen:?}")
    };
    // The same trace goes on, under a span of ptc's, unsampled.
    assert!(sent.starts_with(&format!("00-{trace_id}-")), "{sent}");
    assert!(sent.ends_with("-00"), "{sent}");
    assert!(!sent.contains(caller_span), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_traceparent_an_eval_starts_a_trace_with_a_span_per_page_and_failed_call() {
    let Some(e) = exporting() else { return };
    let bed = bed("root", false).await;
    let program = "(let [pages (tool/pages 'observatory/list-traces {:org-id \"org_acme\" :limit 2}
                                         {:max-pages 2})
                         missing (tool/call 'observatory/get-trace {:id \"tr_missing\"
                                                                    :org-id \"org_acme\"})]
                     (fail {:pages (:pages pages) :reason (:reason missing)}))";
    let result = bed.eval(program, json!({}), &[]).await;
    assert_eq!(result["reason"], "fail", "{result}");
    assert_eq!(
        result["value"],
        json!({"pages": 2, "reason": "not_found"}),
        "{result}"
    );

    // Its trace is new: found by the program's hash.
    tokio::task::spawn_blocking(|| e.traces.flush())
        .await
        .unwrap()
        .unwrap();
    let hash = program_hash(program);
    let mine: Vec<Value> = e
        .receiver
        .spans()
        .await
        .into_iter()
        .filter(|s| s["name"] == "lisp_eval" && attr(s, "ptc.program.sha256") == hash.as_str())
        .collect();
    let [eval] = mine.as_slice() else {
        panic!("{mine:#?}")
    };
    assert_eq!(eval["parent_span_id"], "", "a root span");
    assert_eq!(attr(eval, "ptc.outcome"), "error");
    assert_eq!(attr(eval, "ptc.reason"), "fail");
    assert_eq!(
        eval["status"],
        json!({"code": "STATUS_CODE_ERROR", "message": "fail"})
    );
    let spans = e.trace(eval["trace_id"].as_str().unwrap()).await;
    let pages = named(&spans, "tool/pages");
    let numbers: Vec<i64> = pages.iter().map(|p| int(p, "ptc.page")).collect();
    assert_eq!(numbers, [1, 2]);
    for p in pages {
        assert_eq!(p["parent_span_id"], eval["span_id"]);
        assert_eq!(attr(p, "ptc.outcome"), "ok");
        assert_eq!(int(p, "http.response.status_code"), 200);
    }
    let missing = one(&spans, "tool/call");
    assert_eq!(missing["parent_span_id"], eval["span_id"]);
    assert_eq!(attr(missing, "ptc.tool"), "get-trace");
    assert_eq!(attr(missing, "ptc.outcome"), "error");
    assert_eq!(attr(missing, "ptc.reason"), "not_found");
    assert_eq!(int(missing, "http.response.status_code"), 404);
    assert_eq!(missing["status"]["code"], "STATUS_CODE_ERROR");
    assert_eq!(int(missing, "ptc.bytes"), 0);
    let seen = bed.traceparents_seen();
    assert_eq!(seen.len(), 3, "two pages and the failed call: {seen:?}");
    assert!(
        seen.iter()
            .all(|tp| tp.contains(eval["trace_id"].as_str().unwrap()))
    );
}

/// Approves every call.
struct Yes;

impl Approver for Yes {
    fn approve(&self, _: ApprovalRequest, _: Duration) -> DecisionFuture {
        Box::pin(std::future::ready(Decision::Approved))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waiting_for_approval_has_an_approval_span_under_its_call() {
    let Some(e) = exporting() else { return };
    let bed = bed("approval", true).await;
    let (trace_id, caller_span) = ("7e2a4c6b8d0f41a3b5c7d9e1f3a5b7c9", "3c4d5e6f70819203");
    let program =
        "(let [id (-> (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1})
                                :value first :id)
                         r (tool/call 'observatory/annotate-trace
                                      {:id id :org-id \"org_acme\" :body {:label \"traced\"}})]
                     (:mutation_state r))";
    let ev = &bed.host.evaluator;
    let req = EvalRequest {
        program: program.into(),
        trace: Some(TraceParent {
            traceparent: traceparent(trace_id, caller_span),
            tracestate: None,
        }),
        ..EvalRequest::default()
    };
    let outcome = ev
        .eval_within(
            req,
            Default::default(),
            ev.wait_until(),
            Some(Arc::new(Yes)),
        )
        .await;
    assert_eq!(outcome.result.unwrap().text, ":applied");

    let spans = e.trace(trace_id).await;
    let eval = one(&spans, "lisp_eval");
    assert_eq!(eval["parent_span_id"], caller_span);
    assert_eq!(attr(eval, "ptc.caller"), "local");
    let write = named(&spans, "tool/call")
        .into_iter()
        .find(|c| attr(c, "ptc.tool") == "annotate-trace")
        .expect("the write's span");
    assert_eq!(write["parent_span_id"], eval["span_id"]);
    assert_eq!(attr(write, "ptc.outcome"), "ok");
    assert_eq!(int(write, "http.response.status_code"), 201);
    let approval = one(&spans, "approval");
    assert_eq!(approval["parent_span_id"], write["span_id"]);
    assert_eq!(attr(approval, "ptc.approval"), "approved");
    assert!(approval["start_ns"].as_u64() >= write["start_ns"].as_u64());
    assert!(approval["end_ns"].as_u64() <= write["end_ns"].as_u64());
    assert!(
        !e.receiver.everything().await.contains("traced"),
        "the body is never exported"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_upstreams_own_spans_join_the_trace_through_meta() {
    let Some(e) = exporting() else { return };
    // The upstream is another ptc host: its `lisp_eval` continues what the call's `_meta` says.
    let inner = support::serve(
        Evaluator::new(
            support::no_upstreams().await,
            tokio::runtime::Handle::current(),
            EvalLimits::default(),
        )
        .unwrap(),
        HttpOptions::default(),
    )
    .await;
    let config = json!({"upstreams": {"inner": {
        "transport": "mcp_http",
        "url": inner.url,
        "allow_insecure_http": true,
    }}});
    let outer = evaluator_of(&config).await;
    let (trace_id, caller_span) = ("8f3b5d7e9a1c42b4a6c8e0f2a4b6c8d0", "4d5e6f7081920314");
    let inner_program = "(* 6 7)";
    let req = EvalRequest {
        program: format!("(:value (tool/call 'inner/lisp_eval {{:program \"{inner_program}\"}}))"),
        trace: Some(TraceParent {
            traceparent: traceparent(trace_id, caller_span),
            tracestate: None,
        }),
        ..EvalRequest::default()
    };
    let outcome = outer.eval(req, Default::default()).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);

    let spans = e.trace(trace_id).await;
    let evals = named(&spans, "lisp_eval");
    assert_eq!(evals.len(), 2, "{spans:#?}");
    let (outer_eval, inner_eval) = match evals[0]["parent_span_id"] == caller_span {
        true => (evals[0], evals[1]),
        false => (evals[1], evals[0]),
    };
    assert_eq!(outer_eval["parent_span_id"], caller_span);
    let call = one(&spans, "tool/call");
    assert_eq!(call["parent_span_id"], outer_eval["span_id"]);
    assert_eq!(attr(call, "ptc.transport"), "mcp_http");
    assert_eq!(attr(call, "ptc.upstream"), "inner");
    assert_eq!(attr(call, "ptc.tool"), "lisp_eval");
    assert_eq!(attr(call, "ptc.outcome"), "ok");
    assert_eq!(
        inner_eval["parent_span_id"], call["span_id"],
        "the upstream's span continues the call's"
    );
    assert_eq!(
        attr(inner_eval, "ptc.program.sha256"),
        program_hash(inner_program).as_str()
    );
    assert!(!e.receiver.everything().await.contains(inner_program));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_call_says_how_often_and_what_the_upstream_last_answered() {
    let Some(e) = exporting() else { return };
    // A test bed that answers every request 503, behind an upstream that retries twice.
    let token = TokenSpec::full_access("tok_traces", SECRET);
    let retry_twice = |plan: &mut ptc_plan::Plan| {
        for u in &mut plan.upstreams {
            if let ptc_plan::Transport::Openapi(api) = &mut u.transport {
                api.http.backoff = ptc_plan::Backoff {
                    max_retries: 2,
                    initial_ms: 1,
                    max_ms: 1,
                };
            }
        }
    };
    let bed = support::Bed::start_with(
        "traces-retries",
        token,
        "status=503",
        StartOptions::default(),
        retry_twice,
    )
    .await;
    let evaluator = Evaluator::new(
        bed.up.clone(),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    let (trace_id, caller_span) = ("1b3d5f7092a4c6e8b0d2f4a6c8e0a2b4", "5a6b7c8d9e0f1a2b");
    let req = EvalRequest {
        program: "(:reason (tool/call 'observatory/list-traces {:org-id \"org_acme\"}))".into(),
        trace: Some(TraceParent {
            traceparent: traceparent(trace_id, caller_span),
            tracestate: None,
        }),
        ..EvalRequest::default()
    };
    let outcome = evaluator.eval(req, Default::default()).await;
    let value = outcome.result.expect("the program answers");
    assert_eq!(value.text, ":upstream_unavailable");
    assert_eq!(
        bed.server().audit_records().len(),
        3,
        "two retries after the first attempt"
    );
    let spans = e.trace(trace_id).await;
    let call = one(&spans, "tool/call");
    assert_eq!(int(call, "ptc.retries"), 2, "{call}");
    assert_eq!(int(call, "http.response.status_code"), 503, "{call}");
    assert_eq!(attr(call, "ptc.reason"), "upstream_unavailable", "{call}");
    bed.stop().await;
}

/// Once the exporter has sent a batch, the batch processor's thread is in the idle scheduling
/// class: encoding and sending spans never takes a CPU an evaluation wants.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporters_thread_runs_only_when_nothing_else_wants_a_cpu() {
    let Some(exporting) = exporting() else { return };
    let span = ptc_core::telemetry::eval_span("lisp_eval", "(+ 1 2)", program_hash, "local", None);
    let records = ptc_core::program::run_report::RunRecords::new(Vec::new(), 1);
    ptc_core::telemetry::eval_ended(&span, None, &records, 0);
    tokio::task::spawn_blocking(|| exporting.traces.flush())
        .await
        .unwrap()
        .expect("the export succeeds");
    // `/proc/self/task/<tid>/stat`: the policy is field 41, counted from 1 (`SCHED_IDLE` is 5).
    let policies: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.starts_with("OpenTelemetry"))
        })
        .map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap();
            let after_name = stat.rsplit_once(')').unwrap().1;
            after_name
                .split_whitespace()
                .nth(41 - 3)
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(policies, vec!["5".to_string()], "the exporter's thread");
}

/// No OAuth material is exported: an upstream behind OAuth (the client credentials grant, ptc's
/// token discovered and obtained, then stepped up for more scope) answering with the very token
/// it was called with, traced end to end: the spans say the calls happened, and hold no token
/// (the issuer's are JWTs, `eyJ...`) and no client secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_oauth_token_or_client_secret_is_exported() {
    let Some(e) = exporting() else { return };
    let Some(issuer) = ptc_tests::issuer::start(&[]) else {
        return;
    };
    let Some(server) = ptc_tests::oauth_mcp::OAuthMcp::start(&issuer.url, &[]) else {
        return;
    };
    let (id, secret) = ptc_tests::issuer::client();
    let config = json!({
        "credentials": {"client": {"source": "literal", "value": secret}},
        "upstreams": {"hosted": {
            "transport": "mcp_http", "url": server.url,
            "allow_insecure_http": true, "allow_insecure_auth": true,
            "oauth": {"grant": "client_credentials", "client_id": id, "client_secret": "client"},
        }},
    });
    let evaluator = evaluator_of(&config).await;
    let trace_id = "5a0a7b1c2d3e4f506172839405a6b7c8";
    let req = EvalRequest {
        program: "[(tool/call 'hosted/echo_token {}) (tool/call 'hosted/admin_note {})]".into(),
        trace: Some(TraceParent {
            traceparent: traceparent(trace_id, "1a2b3c4d5e6f7081"),
            tracestate: None,
        }),
        ..EvalRequest::default()
    };
    let outcome = evaluator.eval(req, Default::default()).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);

    let spans = e.trace(trace_id).await;
    let calls = named(&spans, "tool/call");
    assert_eq!(calls.len(), 2, "{spans:#?}");
    assert!(
        calls.iter().all(|c| attr(c, "ptc.outcome") == "ok"),
        "{calls:#?}"
    );
    let everything = e.receiver.everything().await;
    assert!(!everything.contains("eyJ"), "a token was exported");
    assert!(
        !everything.contains(secret),
        "the client secret was exported"
    );
}
