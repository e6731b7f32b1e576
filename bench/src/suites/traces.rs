//! Traces: a one-call program (one `tool/call` to a loopback upstream) with traces exported over
//! OTLP/HTTP beside the same program with traces off, sampled in alternation in the same process,
//! 200 ms of evaluations at a time (the exporter keeps running; off, no span is made and nothing is
//! propagated, which is what a host started without an endpoint does): evaluated in process through
//! the evaluator, and as a client's `lisp_eval` over Streamable HTTP carrying a `traceparent`. The
//! collector is a loopback sink on a thread and runtime of its own, and the client runs on a
//! runtime of its own (each is another process where ptc runs), so the rows hold ptc's side only:
//! making and ending the spans, encoding them and sending them from the batch processor's thread.
//! Target: at most 5 % over off for the program as a client sends it (over HTTP); in process the
//! row shows what the spans add to the evaluator alone, the shortest evaluation there is, without
//! a target (docs/performance.md).
//!
//! A row is measured in [`PROCESSES`] processes one after another (`ptc-bench --traces-process`),
//! each pooling [`ROUNDS`] rounds' samples, and reads as the process with the median ratio: one
//! process's figure moves by more than the difference measured, and part of that is the process
//! itself, which more rounds in one process do not average out.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::header;
use axum::response::IntoResponse;
use ptc_core::server::{EvalLimits, EvalRequest, Evaluator};
use ptc_core::telemetry::{self, TraceConfig, TraceParent, Traces};
use ptc_core::{StartOptions, Upstreams};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::plan_compile::Memory;
use crate::loopback::{self, Exports};
use crate::measure::{Budget, Samples, pair_rounds};
use crate::report::Row;

/// How long one sample evaluates for, one evaluation after another. With samples of 20
/// evaluations (11 ms) alternated, the row read about half of what longer stretches and separate
/// processes read, for reasons not yet found (docs/performance.md).
const SAMPLE: Duration = Duration::from_millis(200);
/// Rounds per row in one process, pooled: one round's figure moves by more than the difference
/// measured.
const ROUNDS: usize = 4;
/// Processes per row, one after another; the row reads as the one with the median ratio.
const PROCESSES: usize = 5;
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

/// The suite's rows, each from [`PROCESSES`] measuring processes, or why they could not run
/// (said on stderr). `quick`: each process measures with [`Budget::quick`].
pub fn run(quick: bool) -> Vec<Row> {
    match across_processes(quick) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("traces: skipped: {e}");
            Vec::new()
        }
    }
}

/// One measuring process (`ptc-bench --traces-process`): what it measured, as one JSON line on
/// stdout.
pub fn process_main(budget: Budget) -> ExitCode {
    let line = measure(budget).and_then(|m| serde_json::to_string(&m).map_err(|e| e.to_string()));
    match line {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// What one process measured.
#[derive(Serialize, Deserialize)]
struct Measured {
    in_process: Sides,
    over_http: Sides,
    /// Exports the sink received, and their bytes.
    exports: u64,
    export_bytes: u64,
}

/// One row's samples (nanoseconds per evaluation) with traces on and off, and each round's ratio.
#[derive(Serialize, Deserialize)]
struct Sides {
    on: Vec<u64>,
    off: Vec<u64>,
    rounds: Vec<f64>,
}

impl Sides {
    fn new((on, off, rounds): (Samples, Samples, Vec<f64>)) -> Self {
        let nanos = |s: &Samples| s.iter().map(|d| d.as_nanos() as u64).collect();
        Sides {
            on: nanos(&on),
            off: nanos(&off),
            rounds,
        }
    }

    fn samples(&self) -> (Samples, Samples) {
        let of = |v: &[u64]| Samples::new(v.iter().map(|n| Duration::from_nanos(*n)).collect());
        (of(&self.on), of(&self.off))
    }

    fn ratio(&self) -> f64 {
        let (on, off) = self.samples();
        on.median().as_secs_f64() / off.median().as_secs_f64()
    }
}

/// Runs [`PROCESSES`] measuring processes, one after another, and makes the rows of theirs.
fn across_processes(quick: bool) -> Result<Vec<Row>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is ptc-bench: {e}"))?;
    let mut runs = Vec::new();
    for n in 1..=PROCESSES {
        let mut cmd = Command::new(&exe);
        cmd.arg("--traces-process");
        if quick {
            cmd.arg("--quick");
        }
        let out = cmd
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot start measuring process {n}: {e}"))?;
        if !out.status.success() {
            return Err(format!("measuring process {n} failed ({})", out.status));
        }
        let m: Measured = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("measuring process {n} answered no measurement: {e}"))?;
        runs.push(m);
    }
    let (requests, bytes) = runs
        .iter()
        .fold((0, 0), |(r, b), m| (r + m.exports, b + m.export_bytes));
    let exports = format!(
        "; {requests} exports in the suite, {:.0} B each",
        bytes as f64 / requests.max(1) as f64
    );
    let row = |name: &str, sides: Vec<&Sides>, target| {
        let mut r = median_process(name, sides, target);
        r.note.push_str(&exports);
        r
    };
    Ok(vec![
        row(
            "lisp_eval of a one-call program in process, traces exported (OTLP/HTTP)",
            runs.iter().map(|m| &m.in_process).collect(),
            None,
        ),
        row(
            "lisp_eval of a one-call program over Streamable HTTP, traces exported (OTLP/HTTP)",
            runs.iter().map(|m| &m.over_http).collect(),
            Some(1.05),
        ),
    ])
}

/// The row of the process with the median ratio among `processes`, with its `target`; the note
/// gives every process's ratio and how far one round alone read.
fn median_process(name: &str, processes: Vec<&Sides>, target: Option<f64>) -> Row {
    let mut rated: Vec<(f64, &Sides)> = processes.into_iter().map(|p| (p.ratio(), p)).collect();
    rated.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (on, off) = rated[rated.len() / 2].1.samples();
    let extra = on.median().as_secs_f64() - off.median().as_secs_f64();
    let ratios: Vec<String> = rated.iter().map(|(r, _)| format!("{r:.3}×")).collect();
    let (low, high) = rated
        .iter()
        .flat_map(|(_, p)| &p.rounds)
        .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
    Row::paired(
        "traces",
        name,
        &on,
        "the same, traces off",
        &off,
        target,
        format!(
            "{:+.1} µs per evaluation (2 spans); the median of {} processes (each {ROUNDS} rounds \
             of {} ms samples pooled), which read {}; one round alone {low:.3}–{high:.3}×",
            extra * 1e6,
            rated.len(),
            SAMPLE.as_millis(),
            ratios.join(", ")
        ),
    )
}

/// Both rows measured in this process.
fn measure(budget: Budget) -> Result<Measured, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))?;
    // The client is another process where ptc runs: its requests and their connection's I/O
    // take no turn on the host's two workers. When they did, the row over HTTP read about twice
    // the spans' cost (+17-18 µs against a median of +9.5 µs apart, docs/performance.md).
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime for the client: {e}"))?;
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
    let in_process = Sides::new(pair_rounds(
        budget,
        ROUNDS,
        in_process(true),
        in_process(false),
    ));
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
    let client = ptc_core::wire::http_client::builder()
        .build()
        .map_err(|e| e.to_string())?;
    let over_http = |on: bool| {
        let (client, url, rt) = (&client, &url, &client_rt);
        move || {
            per_evaluation(rt, on, || async {
                let reply = lisp_eval(client, url).await;
                assert!(reply.contains(r#""result":true"#), "{reply}");
            })
        }
    };
    let over_http = Sides::new(pair_rounds(
        budget,
        ROUNDS,
        over_http(true),
        over_http(false),
    ));
    let _ = stop.send(());
    let _ = rt.block_on(host.done);
    telemetry::set_recording(false);
    traces.flush()?;
    let (exports, export_bytes) = (
        exports.requests.load(Ordering::Relaxed),
        exports.bytes.load(Ordering::Relaxed),
    );
    if exports == 0 {
        return Err("no span reached the sink".into());
    }
    Ok(Measured {
        in_process,
        over_http,
        exports,
        export_bytes,
    })
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
