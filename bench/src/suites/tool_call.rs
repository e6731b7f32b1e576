//! `tool/call` overhead: a PTC-Lisp program calling a loopback upstream, interleaved in the same
//! run with a raw reqwest + serde_json loop fetching the same bodies; and `pmap` over 64 calls to
//! an endpoint with 50 ms latency against the ideal number of waves at the configured
//! concurrency.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Query;
use axum::http::header;
use axum::response::IntoResponse;
use ptc_core::{Budgets, StartOptions, Upstreams, run_program};
use ptc_lisp::Limits;
use serde::Deserialize;
use serde_json::json;

use super::plan_compile::Memory;
use crate::measure::Budget;
use crate::report::Row;

/// Calls per sample for each body size: enough to amortise one evaluation's start-up.
const SIZES: &[(&str, usize, usize)] = &[
    ("100 B", 100, 200),
    ("5 KB", 5_000, 100),
    ("5 MB", 5_000_000, 4),
];
const LATENCY_MS: u64 = 50;
const PMAP_CALLS: usize = 64;
const CONCURRENCY: usize = 16;

/// A JSON array of records close to `n` bytes.
pub(crate) fn body(n: usize) -> Vec<u8> {
    let mut out = String::from("[");
    let mut i = 0;
    while out.len() + 60 < n && n > 200 {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"id\":{i},\"name\":\"item-{i:06}\",\"ok\":true,\"v\":{}.5}}",
            i % 97
        ));
        i += 1;
    }
    if i == 0 {
        out.push_str("{\"id\":0,\"name\":\"tiny\",\"pad\":\"");
        while out.len() + 3 < n {
            out.push('x');
        }
        out.push_str("\"}");
    }
    out.push(']');
    out.into_bytes()
}

#[derive(Deserialize)]
struct BodyQuery {
    size: usize,
}

#[derive(Deserialize)]
struct LatencyQuery {
    ms: u64,
}

/// The projection rows' answer: a 5 MB list of records under `items`, beside a cursor.
static ENVELOPE: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let mut out = b"{\"items\":".to_vec();
    out.extend(body(5_000_000));
    out.extend(b",\"next\":null}");
    out
});

async fn envelope_answer() -> axum::response::Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ENVELOPE.as_slice(),
    )
        .into_response()
}

pub(crate) async fn serve(bodies: Arc<Vec<(usize, Vec<u8>)>>) -> SocketAddr {
    let app = axum::Router::new()
        .route(
            "/body",
            axum::routing::get(move |Query(q): Query<BodyQuery>| {
                let bodies = bodies.clone();
                async move {
                    let b = bodies
                        .iter()
                        .find(|(n, _)| *n == q.size)
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default();
                    ([(header::CONTENT_TYPE, "application/json")], b).into_response()
                }
            }),
        )
        .route("/envelope", axum::routing::get(envelope_answer))
        .route("/envelope/whole", axum::routing::get(envelope_answer))
        .route("/envelope/checked", axum::routing::get(envelope_answer))
        .route(
            "/latency",
            axum::routing::get(|Query(q): Query<LatencyQuery>| async move {
                tokio::time::sleep(Duration::from_millis(q.ms)).await;
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    "{\"ok\":true}",
                )
                    .into_response()
            }),
        );
    crate::loopback::serve(app).await
}

pub(crate) fn document() -> Vec<u8> {
    let op = |id: &str, param: &str| {
        json!({"get": {"operationId": id, "parameters": [
            {"name": param, "in": "query", "required": true, "schema": {"type": "integer"}},
            {"name": "i", "in": "query", "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": {}}}}}}})
    };
    let mut projected = op("body", "size");
    projected["get"]["operationId"] = json!("projected");
    projected["get"]["x-ptc-result-path"] = json!("$.items");
    let mut whole = op("body", "size");
    whole["get"]["operationId"] = json!("whole");
    // The same answer with its items' schema, for the response-check rows.
    let mut checked = projected.clone();
    checked["get"]["operationId"] = json!("checked");
    checked["get"]["responses"]["200"]["content"]["application/json"]["schema"] = json!({
        "type": "object", "properties": {"items": {"type": "array", "items": {
            "type": "object", "required": ["id", "name"], "properties": {
                "id": {"type": "integer"}, "name": {"type": "string"},
                "ok": {"type": "boolean"}, "v": {"type": "number"}}}}}});
    json!({"openapi": "3.0.3", "info": {"title": "bench", "version": "1"},
        "paths": {"/body": op("body", "size"), "/latency": op("latency", "ms"),
                  "/envelope": projected, "/envelope/whole": whole,
                  "/envelope/checked": checked}})
    .to_string()
    .into_bytes()
}

fn plan(addr: SocketAddr) -> ptc_plan::Loaded {
    let config = json!({"upstreams": {"b": {
        "transport": "openapi",
        "base_url": format!("http://{addr}"),
        "allow_insecure_http": true,
        "schema_file": "/bench/openapi.json",
        "include_operations": ["body", "latency", "projected", "whole", "checked"],
        "max_response_bytes": 16_000_000u64,
        "pool_size": 64
    }}})
    .to_string();
    ptc_plan::load_str(
        &config,
        Path::new("/bench/upstreams.json"),
        &Memory(&document()),
    )
    .unwrap_or_else(|d| panic!("bench config: {d}"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs the suite.
pub fn run(budget: Budget) -> Vec<Row> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let bodies: Arc<Vec<(usize, Vec<u8>)>> =
        Arc::new(SIZES.iter().map(|(_, n, _)| (*n, body(*n))).collect());
    let addr = rt.block_on(serve(bodies.clone()));
    let loaded = plan(addr);
    let upstreams = Arc::new(
        rt.block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .expect("upstreams start"),
    );
    let client = ptc_core::wire::http_client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    let limits = Limits {
        timeout: Some(Duration::from_secs(120)),
        max_workers: CONCURRENCY,
        ..Limits::default()
    };
    let budgets = Budgets {
        max_calls: 1_000,
        max_bytes: u64::MAX,
        ..Budgets::default()
    };
    let mut rows = Vec::new();
    for &(label, size, calls) in SIZES {
        let program = format!("(dotimes [_ {calls}] (tool/call 'b/body {{:size {size}}}))");
        let url = format!("http://{addr}/body?size={size}");
        let ours_once = || {
            let run = run_program(
                upstreams.clone(),
                rt.handle().clone(),
                &program,
                limits.clone(),
                budgets,
                None,
            );
            if let Err(e) = run.result {
                panic!("bench program failed: {e}");
            }
        };
        let raw_once = || {
            rt.block_on(async {
                for _ in 0..calls {
                    let bytes = client
                        .get(&url)
                        .header("accept", "application/json")
                        .send()
                        .await
                        .expect("send")
                        .bytes()
                        .await
                        .expect("body");
                    std::hint::black_box(
                        serde_json::from_slice::<serde_json::Value>(&bytes).expect("json"),
                    );
                }
            })
        };
        // The executor alone (no Lisp): where the overhead lives.
        let executor_once = || {
            rt.block_on(async {
                for _ in 0..calls {
                    let mut args = serde_json::Map::new();
                    args.insert("size".into(), json!(size));
                    let out = upstreams
                        .call("b", "body", args, ptc_core::CallOptions::default())
                        .await
                        .expect("call");
                    std::hint::black_box(out);
                }
            })
        };
        // Warm every path (connections, allocations), then interleave the samples.
        ours_once();
        raw_once();
        executor_once();
        let (mut ours, mut raw, mut exec) = (Vec::new(), Vec::new(), Vec::new());
        let start = Instant::now();
        while ours.len() < budget.min_samples || start.elapsed() < budget.min_time {
            let t = Instant::now();
            ours_once();
            ours.push(t.elapsed() / calls as u32);
            let t = Instant::now();
            raw_once();
            raw.push(t.elapsed() / calls as u32);
            let t = Instant::now();
            executor_once();
            exec.push(t.elapsed() / calls as u32);
            if ours.len() >= 2_000 {
                break;
            }
        }
        let (o, r, x) = (median(ours), median(raw), median(exec));
        let delta = o.as_secs_f64() * 1e6 - r.as_secs_f64() * 1e6;
        let small = size <= 5_000;
        rows.push(Row::time(
            "tool_call",
            &format!("tool/call, {label} body (per call)"),
            o,
            "reqwest + serde_json",
            r,
            small.then_some(1.2),
            format!(
                "{:+.1} µs per call{}; executor alone (no Lisp, no decode) {:.1} µs; {} B body, \
                 {calls} calls per sample",
                delta,
                if small { " (goal ≤ +10 µs)" } else { "" },
                x.as_secs_f64() * 1e6,
                bodies
                    .iter()
                    .find(|(n, _)| *n == size)
                    .map_or(0, |(_, b)| b.len())
            ),
        ));
    }
    rows.push(projection_row(&rt, &upstreams, &limits, budgets, budget));
    rows.extend(response_check_rows(&rt, addr, &limits, budgets, budget));
    // pmap over 64 calls with 50 ms latency at the configured concurrency.
    let program = format!(
        "(count (filter :ok (pmap #(tool/call 'b/latency {{:ms {LATENCY_MS} :i %}}) (range {PMAP_CALLS}))))"
    );
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < budget.min_samples.min(5) || start.elapsed() < budget.min_time {
        let t = Instant::now();
        let run = run_program(
            upstreams.clone(),
            rt.handle().clone(),
            &program,
            limits.clone(),
            budgets,
            None,
        );
        let v = run.result.expect("pmap program");
        assert_eq!(
            v.to_string(),
            PMAP_CALLS.to_string(),
            "every call succeeded"
        );
        samples.push(t.elapsed());
        if samples.len() >= 50 {
            break;
        }
    }
    let waves = PMAP_CALLS.div_ceil(CONCURRENCY);
    let ideal = Duration::from_millis(LATENCY_MS * waves as u64);
    rows.push(Row::time(
        "tool_call",
        &format!("pmap over {PMAP_CALLS} calls, {LATENCY_MS} ms latency"),
        median(samples),
        &format!("{waves} waves at concurrency {CONCURRENCY}"),
        ideal,
        Some(1.25),
        format!("max_workers {CONCURRENCY}, pool_size 64"),
    ));
    rows
}

/// A call whose result path selects the list in a 5 MB answer, against the same call of the
/// same answer without one (the program then reads the whole decoded answer): the selection
/// runs over the decoded value, so it should cost next to nothing (goal ≤ 1.1×).
fn projection_row(
    rt: &tokio::runtime::Runtime,
    upstreams: &Arc<Upstreams>,
    limits: &Limits,
    budgets: Budgets,
    budget: Budget,
) -> Row {
    let run = |program: &str| {
        let t = Instant::now();
        let run = run_program(
            upstreams.clone(),
            rt.handle().clone(),
            program,
            limits.clone(),
            budgets,
            None,
        );
        let v = run.result.expect("projection program");
        (t.elapsed(), v.to_string())
    };
    let projected = "(count (:value (tool/call 'b/projected {:size 1})))";
    let whole = "(count (:items (:value (tool/call 'b/whole {:size 1}))))";
    let (_, a) = run(projected);
    let (_, b) = run(whole);
    assert_eq!(a, b, "both read the same items");
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while ours.len() < budget.min_samples || start.elapsed() < budget.min_time {
        ours.push(run(projected).0);
        base.push(run(whole).0);
        if ours.len() >= 200 {
            break;
        }
    }
    Row::time(
        "tool_call",
        "tool/call with a result path ($.items of a 5 MB answer)",
        median(ours),
        "the same call and answer without one",
        median(base),
        Some(1.1),
        format!("{} items; {} B answer", a, ENVELOPE.len()),
    )
}

/// The same 5 MB call with its answer checked against the output schema (sampled, then in
/// full) and unchecked, each on upstreams started with that setting.
fn response_check_rows(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    limits: &Limits,
    budgets: Budgets,
    budget: Budget,
) -> Vec<Row> {
    use ptc_core::call::response_check::ResponseCheck;
    let start = |check| {
        let loaded = plan(addr);
        let options = StartOptions {
            response_check: check,
            ..StartOptions::default()
        };
        Arc::new(
            rt.block_on(Upstreams::start(loaded.plan, loaded.secrets, options))
                .expect("upstreams start"),
        )
    };
    let off = start(ResponseCheck::Off);
    let program = "(count (:value (tool/call 'b/checked {:size 1})))";
    let run = |up: &Arc<Upstreams>| {
        let t = Instant::now();
        let run = run_program(
            up.clone(),
            rt.handle().clone(),
            program,
            limits.clone(),
            budgets,
            None,
        );
        run.result.expect("checked program");
        assert!(
            run.records.upstream_calls[0].drift.is_empty(),
            "the bench answer matches its schema"
        );
        t.elapsed()
    };
    let mut rows = Vec::new();
    for (check, target) in [
        (ResponseCheck::Sampled, Some(1.05)),
        (ResponseCheck::Full, None),
    ] {
        let on = start(check);
        run(&on);
        run(&off);
        let (mut ours, mut base) = (Vec::new(), Vec::new());
        let began = Instant::now();
        while ours.len() < budget.min_samples || began.elapsed() < budget.min_time {
            ours.push(run(&on));
            base.push(run(&off));
            if ours.len() >= 200 {
                break;
            }
        }
        rows.push(Row::time(
            "tool_call",
            &format!(
                "tool/call with a {} response check (5 MB answer)",
                check.as_str()
            ),
            median(ours),
            "the same call, unchecked",
            median(base),
            target,
            format!("{} B answer", ENVELOPE.len()),
        ));
    }
    rows
}
