//! `ptc-bench --load-client URL MODE ...`: the load suite's client, a process of its own so the
//! host it measures shares no runtime, allocator or CPU accounting with it. It opens its sessions
//! first, then fires, and prints one JSON line: wall time, errors and latency percentiles.
//!
//! - `io SESSIONS CALLS`: every session sends one `lisp_eval` at once, whose program makes
//!   `CALLS` sequential upstream calls.
//! - `light SESSIONS TOTAL`: the sessions share `TOTAL` evaluations of `(+ 1 2)`, each session
//!   sending its next when its last is answered.
//! - `mixed SESSIONS TOTAL WAITERS CALLS`: `light` while `WAITERS` more sessions each run one
//!   `io` program of `CALLS` calls; the percentiles are the light evaluations'.
//! - `busy HEAVY ROUNDS`: one session sends `(+ 1 2)` after `(+ 1 2)` while `HEAVY` more sessions
//!   each run one program computing `ROUNDS` loops of a million turns (no upstream); the
//!   percentiles are the light evaluations', until every heavy program is answered. `busy 0
//!   ROUNDS`: one heavy program alone, its wall time (to size `ROUNDS`).
//! - `ping SESSIONS TOTAL`: the baseline of `light` through the MCP layer, `TOTAL` MCP `ping`
//!   requests shared the same way: what a request costs before any evaluation.
//! - `kept SESSIONS CALLS`: `io` with a program that keeps its answer (`def`), so a host with
//!   sessions saves each session's state.
//! - `direct CLIENTS CALLS` (URL is the upstream's list-traces URL, the bearer token in
//!   `PTC_BENCH_TOKEN`): the baseline of `io`, the same calls straight to the upstream.
//! - `health CLIENTS TOTAL` (URL is the host's `/health`): the baseline of `light`, an HTTP round
//!   trip to the same host.
//!
//! With `PTC_BENCH_BEARERS` naming a file of bearer tokens (one per line), session `i` sends
//! token `i` (modulo their number): callers the host checks, one token each.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::mcp_session::Session;

/// The program of an `io` session: `calls` sequential upstream calls, answering how many
/// succeeded.
pub fn io_program(calls: usize) -> String {
    format!(
        "(count (filter true? (for [i (range {calls})] (:ok (tool/call 'observatory/list-traces \
         {{:org-id \"org_acme\" :limit 1}})))))"
    )
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1e3
}

async fn sessions(url: &str, n: usize) -> Vec<Arc<Session>> {
    let bearers: Vec<String> = std::env::var_os("PTC_BENCH_BEARERS")
        .and_then(|path| std::fs::read_to_string(path).ok())
        .map(|text| text.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let bearer = (!bearers.is_empty()).then(|| bearers[i % bearers.len()].clone());
        out.push(Arc::new(Session::open_as(url, bearer).await));
    }
    out
}

/// Runs one `lisp_eval` per session at once; latencies and errors.
async fn io(sessions: Vec<Arc<Session>>, program: Arc<String>) -> (Vec<Duration>, usize) {
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|s| {
            let program = program.clone();
            tokio::spawn(async move {
                let (took, ok) = s.call(1, &program).await;
                (vec![took], usize::from(!ok))
            })
        })
        .collect();
    joined(tasks).await
}

/// A program that computes `rounds` loops of a million turns (each loop under the language's
/// limit of iterations) and calls nothing.
pub fn heavy_program(rounds: usize) -> String {
    format!(
        "(reduce + (map (fn [k] (loop [i 0] (if (< i 999999) (recur (inc i)) i))) (range {rounds})))"
    )
}

/// `heavy` sessions each running [`heavy_program`] once, and one more sending `(+ 1 2)` after
/// `(+ 1 2)` until they are all answered; the light evaluations' latencies, and every error.
/// Without heavy sessions, one heavy program alone (its latency).
async fn busy(url: &str, heavy: usize, rounds: usize) -> (Vec<Duration>, usize) {
    let program = Arc::new(heavy_program(rounds));
    if heavy == 0 {
        return io(sessions(url, 1).await, program).await;
    }
    let h = sessions(url, heavy).await;
    let light = sessions(url, 1).await.remove(0);
    let background = tokio::spawn(io(h, program));
    let mut lat = Vec::new();
    let mut errors = 0;
    while !background.is_finished() {
        let (took, ok) = light.call(2 + lat.len() as u64, "(+ 1 2)").await;
        lat.push(took);
        errors += usize::from(!ok);
    }
    let (_, heavy_errors) = background.await.expect("the heavy programs");
    (lat, errors + heavy_errors)
}

/// `total` evaluations of `(+ 1 2)` shared by the sessions; latencies and errors.
async fn light(sessions: Vec<Arc<Session>>, total: usize) -> (Vec<Duration>, usize) {
    shared(sessions, total, Some("(+ 1 2)")).await
}

/// `total` requests shared by the sessions, each sending its next when its last is answered:
/// `lisp_eval` of `program`, or an MCP `ping` when there is none.
async fn shared(
    sessions: Vec<Arc<Session>>,
    total: usize,
    program: Option<&'static str>,
) -> (Vec<Duration>, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|s| {
            let next = next.clone();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut errors = 0;
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let id = 2 + lat.len() as u64;
                    let (took, ok) = match program {
                        Some(p) => s.call(id, p).await,
                        None => s.ping(id).await,
                    };
                    lat.push(took);
                    errors += usize::from(!ok);
                }
                (lat, errors)
            })
        })
        .collect();
    joined(tasks).await
}

/// `clients` tasks sharing `total` GETs of `url` (each with `calls` sequential GETs when
/// `total` is `None`); latencies and errors.
async fn gets(
    url: &str,
    clients: usize,
    calls: usize,
    total: Option<usize>,
    token: Option<String>,
) -> (Vec<Duration>, usize) {
    let client = ptc_core::wire::http_client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .expect("an HTTP client");
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, url, token, next) =
                (client.clone(), url.to_string(), token.clone(), next.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut errors = 0;
                let mut done = 0;
                loop {
                    let more = match total {
                        Some(t) => next.fetch_add(1, Ordering::Relaxed) < t,
                        None => done < calls,
                    };
                    if !more {
                        break;
                    }
                    done += 1;
                    let mut req = client.get(&url);
                    if let Some(t) = &token {
                        req = req.bearer_auth(t);
                    }
                    let t = Instant::now();
                    let ok = match req.send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    lat.push(t.elapsed());
                    errors += usize::from(!ok);
                }
                (lat, errors)
            })
        })
        .collect();
    joined(tasks).await
}

/// Every task's latencies and errors, together.
async fn joined(
    tasks: Vec<tokio::task::JoinHandle<(Vec<Duration>, usize)>>,
) -> (Vec<Duration>, usize) {
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.expect("a client task");
        lat.extend(l);
        errors += e;
    }
    (lat, errors)
}

fn number(args: &[String], i: usize) -> Option<usize> {
    args.get(i)?.parse().ok()
}

/// The client's entry point: `args` are what follows `--load-client`.
pub fn main(args: &[String]) -> ExitCode {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let (Some(url), Some(mode)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ptc-bench --load-client URL io|light|mixed ...");
        return ExitCode::from(2);
    };
    let report = rt.block_on(async {
        match (mode.as_str(), number(args, 2), number(args, 3)) {
            ("io", Some(n), Some(calls)) => {
                let s = sessions(url, n).await;
                let start = Instant::now();
                let (lat, errors) = io(s, Arc::new(io_program(calls))).await;
                Some((start.elapsed(), lat, errors))
            }
            ("kept", Some(n), Some(calls)) => {
                let s = sessions(url, n).await;
                let start = Instant::now();
                let program = format!("(def answered {}) answered", io_program(calls));
                let (lat, errors) = io(s, Arc::new(program)).await;
                Some((start.elapsed(), lat, errors))
            }
            ("light", Some(n), Some(total)) => {
                let s = sessions(url, n).await;
                let start = Instant::now();
                let (lat, errors) = light(s, total).await;
                Some((start.elapsed(), lat, errors))
            }
            ("ping", Some(n), Some(total)) => {
                let s = sessions(url, n).await;
                let start = Instant::now();
                let (lat, errors) = shared(s, total, None).await;
                Some((start.elapsed(), lat, errors))
            }
            ("mixed", Some(n), Some(total)) => {
                let (waiters, calls) = (number(args, 4)?, number(args, 5)?);
                let w = sessions(url, waiters).await;
                let s = sessions(url, n).await;
                let background = tokio::spawn(io(w, Arc::new(io_program(calls))));
                let start = Instant::now();
                let (lat, errors) = light(s, total).await;
                let wall = start.elapsed();
                let (_, io_errors) = background.await.expect("the waiting programs");
                Some((wall, lat, errors + io_errors))
            }
            ("busy", Some(heavy), Some(rounds)) => {
                let start = Instant::now();
                let (lat, errors) = busy(url, heavy, rounds).await;
                Some((start.elapsed(), lat, errors))
            }
            ("direct", Some(n), Some(calls)) => {
                let token = std::env::var("PTC_BENCH_TOKEN").ok();
                let start = Instant::now();
                let (lat, errors) = gets(url, n, calls, None, token).await;
                Some((start.elapsed(), lat, errors))
            }
            ("health", Some(n), Some(total)) => {
                let start = Instant::now();
                let (lat, errors) = gets(url, n, 0, Some(total), None).await;
                Some((start.elapsed(), lat, errors))
            }
            _ => None,
        }
    });
    let Some((wall, mut lat, errors)) = report else {
        eprintln!("ptc-bench --load-client: unknown mode or missing counts: {args:?}");
        return ExitCode::from(2);
    };
    lat.sort();
    let line = json!({
        "wall_ms": wall.as_secs_f64() * 1e3,
        "count": lat.len(),
        "errors": errors,
        "p50_ms": percentile(&lat, 0.50),
        "p99_ms": percentile(&lat, 0.99),
    });
    println!("{line}");
    ExitCode::SUCCESS
}
