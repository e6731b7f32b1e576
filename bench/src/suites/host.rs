//! The MCP host: `lisp_eval` of `(+ 1 2)` over Streamable HTTP with kept-alive sessions (p50 and
//! evals/s at concurrency 1 and 16, beside the same eval in-process and an HTTP round trip of
//! `/health`), and the time from process start to answering `tools/list` for
//! `generated-example serve` (compiled-in plan) against `ptc serve` (config loaded at run time).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ptc_core::server::{EvalLimits, EvalRequest, Evaluator, HttpOptions, serve_http};
use ptc_core::{StartOptions, Upstreams};

use crate::mcp_session::Session;
use crate::measure::Budget;
use crate::report::Row;

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// p50 latency and evals/s with `clients` sessions each evaluating in a loop for `time`.
async fn load(url: &str, clients: usize, time: Duration) -> (Duration, f64) {
    let mut sessions = Vec::new();
    for _ in 0..clients {
        sessions.push(Arc::new(Session::open(url).await));
    }
    for s in &sessions {
        s.eval(1).await; // warm the connection
    }
    let start = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|s| {
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut id = 2;
                while start.elapsed() < time {
                    lat.push(s.eval(id).await);
                    id += 1;
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let rate = all.len() as f64 / start.elapsed().as_secs_f64();
    (p50(all), rate)
}

async fn health_p50(base: &str, clients: usize, time: Duration) -> Duration {
    let client = ptc_core::wire::http_client::builder()
        .build()
        .expect("an HTTP client");
    let url = format!("{base}/health");
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while start.elapsed() < time {
                    let t = Instant::now();
                    client.get(&url).send().await.unwrap().text().await.unwrap();
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    p50(all)
}

fn http_rows(budget: Budget) -> Vec<Row> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let plan = ptc_plan::Plan::default();
        let up = Upstreams::start(plan, Default::default(), StartOptions::default())
            .await
            .expect("no upstreams start");
        let limits = EvalLimits {
            max_concurrent: 16,
            memory_budget_bytes: 16 * EvalLimits::default().memory_bytes,
            ..EvalLimits::default()
        };
        let ev = Evaluator::new(Arc::new(up), tokio::runtime::Handle::current(), limits)
            .expect("limits");
        // In-process: the same evaluation without HTTP or MCP.
        let mut direct = Vec::new();
        let start = Instant::now();
        while direct.len() < budget.min_samples.max(100) || start.elapsed() < budget.min_time {
            let t = Instant::now();
            let req = EvalRequest {
                program: "(+ 1 2)".into(),
                ..Default::default()
            };
            let o = ev.eval(req, Default::default()).await;
            assert!(o.result.is_ok());
            direct.push(t.elapsed());
        }
        let direct = p50(direct);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let running = serve_http(
            ev,
            HttpOptions {
                addr: "127.0.0.1:0".parse().unwrap(),
                ..HttpOptions::default()
            },
            async {
                let _ = rx.await;
            },
        )
        .await
        .expect("serve");
        let base = format!("http://{}", running.addr);
        let url = format!("{base}/mcp");
        let mut rows = Vec::new();
        for clients in [1usize, 16] {
            let (lat, rate) = load(&url, clients, budget.min_time).await;
            let floor = health_p50(&base, clients, budget.min_time / 2).await;
            rows.push(Row::time(
                "host",
                &format!("lisp_eval (+ 1 2) over Streamable HTTP, {clients} session(s), p50"),
                lat,
                "GET /health round trip, same concurrency",
                floor,
                None,
                format!(
                    "{rate:.0} evals/s; in-process eval p50 {:.1} µs; targets: p50 <= 300 µs, \
                     >= 10 000 evals/s at 16",
                    direct.as_secs_f64() * 1e6
                ),
            ));
        }
        let _ = tx.send(());
        let _ = running.done.await;
        rows
    })
}

/// Time from spawning `cmd` to the `tools/list` reply on its stdout.
fn start_to_tools_list(cmd: &PathBuf, args: &[&str]) -> Option<Duration> {
    let t = Instant::now();
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"ptc-bench","version":"1"}}}"#;
    writeln!(stdin, "{init}").ok()?;
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .ok()?;
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).ok()?;
    let mut lines = BufReader::new(child.stdout.take()?).lines();
    let mut took = None;
    for line in lines.by_ref() {
        let line = line.ok()?;
        if line.contains("\"id\":2") && line.contains("lisp_eval") {
            took = Some(t.elapsed());
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    took
}

fn startup_rows(budget: Budget) -> Vec<Row> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
    else {
        return Vec::new();
    };
    let ge = dir.join("generated-example");
    let ptc = dir.join("ptc");
    if !ge.exists() || !ptc.exists() {
        eprintln!(
            "host: start-up row skipped: build the binaries first (cargo build --release -p \
             generated-example -p ptc-cli)"
        );
        return Vec::new();
    }
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/observatory/upstreams.json"
    );
    let samples = budget.min_samples.max(5);
    let measure = |cmd: &PathBuf, args: &[&str]| -> Option<Duration> {
        let mut v = Vec::new();
        for _ in 0..samples {
            v.push(start_to_tools_list(cmd, args)?);
        }
        Some(p50(v))
    };
    let (Some(ours), Some(base)) = (
        measure(&ge, &["serve"]),
        measure(&ptc, &["serve", "--config", config]),
    ) else {
        eprintln!("host: start-up row skipped: a server did not answer tools/list");
        return Vec::new();
    };
    vec![Row::time(
        "host",
        "process start to tools/list: generated-example serve",
        ours,
        "ptc serve --config (same plan, loaded at run time)",
        base,
        None,
        "target: generated-example <= 20 ms".into(),
    )]
}

/// The host suite's rows.
pub fn run(budget: Budget) -> Vec<Row> {
    let mut rows = http_rows(budget);
    rows.extend(startup_rows(budget));
    rows
}
