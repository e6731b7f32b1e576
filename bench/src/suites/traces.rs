//! Traces: a one-call program (one `tool/call` to a loopback upstream) with traces exported over
//! OTLP/HTTP beside the same program with traces off, sampled in alternation in the same process,
//! 200 ms of evaluations at a time (the exporter keeps running; off, no span is made and nothing is
//! propagated, which is what a host started without an endpoint does): evaluated in process through
//! the evaluator, and as a client's `lisp_eval` over Streamable HTTP carrying a `traceparent`. The
//! collector is a loopback sink on a thread and runtime of its own (a collector is another process)
//! that reads each export and answers 200, so the rows hold ptc's side only: making and ending the
//! spans, encoding them and sending them from the batch processor's thread. Target: at most 5 %
//! over off for the program as a client sends it (over HTTP), judged on eight rounds' samples
//! pooled; in process the row shows what the spans add to the evaluator alone, the shortest
//! evaluation there is, without a target (docs/performance.md).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::header;
use axum::response::IntoResponse;
use ptc_core::server::{EvalLimits, EvalRequest, Evaluator};
use ptc_core::telemetry::{self, TraceConfig, TraceParent, Traces};
use ptc_core::{StartOptions, Upstreams};
use serde_json::json;

use super::plan_compile::Memory;
use crate::loopback::{self, Exports};
use crate::measure::{Budget, Samples, pair_rounds};
use crate::report::Row;

/// How long one sample evaluates for, one evaluation after another. With samples of 20
/// evaluations (11 ms) alternated, the row read about half of what longer stretches and separate
/// processes read, for reasons not yet found (docs/performance.md).
const SAMPLE: Duration = Duration::from_millis(200);
/// Rounds per row, pooled: one round's figure moves by more than the difference measured.
const ROUNDS: usize = 8;
/// The program: one upstream call.
const PROGRAM: &str = "(:ok (tool/call 'b/one {}))";

/// The upstream (`GET /one`, a small JSON answer), on the host's runtime.
async fn serve_upstream() -> SocketAddr {
    let upstream = axum::Router::new().route(
        "/one",
        axum::routing::get(|| async {
            (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"id":"tr_1","status":"ok","cost":0.25}"#,
            )
                .into_response()
        }),
    );
    loopback::serve(upstream).await
}

fn plan(addr: SocketAddr) -> ptc_plan::Loaded {
    let doc = json!({"openapi": "3.0.3", "info": {"title": "bench", "version": "1"},
        "paths": {"/one": {"get": {"operationId": "one",
            "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": {"type": "object"}}}}}}}}});
    let config = json!({"upstreams": {"b": {
        "transport": "openapi",
        "base_url": format!("http://{addr}"),
        "allow_insecure_http": true,
        "schema_file": "/bench/openapi.json",
        "include_operations": ["one"],
    }}});
    ptc_plan::load_str(
        &config.to_string(),
        Path::new("/bench/upstreams.json"),
        &Memory(doc.to_string().as_bytes()),
    )
    .unwrap_or_else(|d| panic!("bench config: {d}"))
}

/// The suite's rows, or why they could not run (said on stderr).
pub fn run(budget: Budget) -> Vec<Row> {
    match rows(budget) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("traces: skipped: {e}");
            Vec::new()
        }
    }
}

fn rows(budget: Budget) -> Result<Vec<Row>, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))?;
    let exports = Arc::new(Exports::default());
    // The collector is another process where ptc runs: its work takes no turn on the host's
    // runtime here either, or the row would count the collector's reading of every export.
    let collector = loopback::serve_apart(loopback::otlp_sink(exports.clone()))?;
    let addr = rt.block_on(serve_upstream());
    let traces = Traces::start(&TraceConfig {
        endpoint: Some(format!("http://{collector}")),
        service: "ptc-bench".into(),
    })?;
    let loaded = plan(addr);
    let upstreams = rt
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .map_err(|e| format!("the upstream does not start: {e}"))?;
    let ev = Evaluator::new(
        Arc::new(upstreams),
        rt.handle().clone(),
        EvalLimits::default(),
    )?;
    // A caller's trace, as a client that traces sends it.
    let req = EvalRequest {
        program: PROGRAM.into(),
        trace: Some(TraceParent {
            traceparent: TRACEPARENT.into(),
            tracestate: None,
        }),
        ..EvalRequest::default()
    };
    let in_process = |on: bool| {
        let (ev, req, rt) = (&ev, &req, &rt);
        move || {
            per_evaluation(rt, on, || async {
                match ev.eval(req.clone(), Default::default()).await.result {
                    Ok(v) => assert_eq!(v.text, "true"),
                    Err(e) => panic!("the bench program failed: {e:?}"),
                }
            })
        }
    };
    let mut rows = vec![rounds(
        "lisp_eval of a one-call program in process, traces exported (OTLP/HTTP)",
        pair_rounds(budget, ROUNDS, in_process(true), in_process(false)),
        None,
    )];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let host = rt.block_on(ptc_core::server::serve_http(
        ev.clone(),
        ptc_core::server::HttpOptions {
            addr: "127.0.0.1:0".parse().expect("an address"),
            ..Default::default()
        },
        async {
            let _ = stopped.await;
        },
    ))?;
    let url = format!("http://{}/mcp", host.addr);
    let client = ptc_core::http_client::builder()
        .build()
        .map_err(|e| e.to_string())?;
    let over_http = |on: bool| {
        let (client, url, rt) = (&client, &url, &rt);
        move || {
            per_evaluation(rt, on, || async {
                let reply = lisp_eval(client, url).await;
                assert!(reply.contains(r#""result":true"#), "{reply}");
            })
        }
    };
    rows.push(rounds(
        "lisp_eval of a one-call program over Streamable HTTP, traces exported (OTLP/HTTP)",
        pair_rounds(budget, ROUNDS, over_http(true), over_http(false)),
        Some(1.05),
    ));
    let _ = stop.send(());
    let _ = rt.block_on(host.done);
    telemetry::set_recording(false);
    traces.flush()?;
    let (requests, bytes) = (
        exports.requests.load(Ordering::Relaxed),
        exports.bytes.load(Ordering::Relaxed),
    );
    if requests == 0 {
        return Err("no span reached the sink".into());
    }
    for r in &mut rows {
        r.note.push_str(&format!(
            "; {requests} exports in the suite, {:.0} B each",
            bytes as f64 / requests as f64
        ));
    }
    Ok(rows)
}

/// One sample: with traces `on` or off, `one` evaluation after another for [`SAMPLE`]; the
/// time per evaluation.
fn per_evaluation<F: Future<Output = ()>>(
    rt: &tokio::runtime::Runtime,
    on: bool,
    mut one: impl FnMut() -> F,
) -> Duration {
    telemetry::set_recording(on);
    let t = Instant::now();
    let n = rt.block_on(async {
        let mut n = 0;
        while t.elapsed() < SAMPLE {
            one().await;
            n += 1;
        }
        n
    });
    t.elapsed() / n
}

/// A caller's trace context, sent with every evaluation.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// One `lisp_eval` of [`PROGRAM`] as a 2026-07-28 request carrying [`TRACEPARENT`]; the body.
async fn lisp_eval(client: &reqwest::Client, url: &str) -> String {
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "ptc-bench", "version": "1"}
        },
        "name": "lisp_eval", "arguments": {"program": PROGRAM}}});
    client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "lisp_eval")
        .header("traceparent", TRACEPARENT)
        .body(msg.to_string())
        .send()
        .await
        .expect("the host answers")
        .text()
        .await
        .expect("its body")
}

/// The row of `on` (traces exported) beside `off` with its `target` ratio, from the rounds of
/// [`pair_rounds`]: the samples of all rounds, and how far one round alone read.
fn rounds(name: &str, (on, off, ratios): (Samples, Samples, Vec<f64>), target: Option<f64>) -> Row {
    let extra = on.median().as_secs_f64() - off.median().as_secs_f64();
    let (low, high) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
    Row::paired(
        "traces",
        name,
        &on,
        "the same, traces off",
        &off,
        target,
        format!(
            "{:+.1} µs per evaluation (2 spans); samples of {} ms of evaluations, {ROUNDS} rounds \
             pooled, one round alone {low:.3}–{high:.3}×",
            extra * 1e6,
            SAMPLE.as_millis()
        ),
    )
}
