//! Isolated stdio servers: what the sandbox (bubblewrap, a user namespace, prlimit) adds to
//! starting a server and to a call, beside the same server started with `"sandbox": false`,
//! sampled in alternation. The server is the Python peer (`fixtures/mcp/py_server.py`): a start
//! is the process, the Python runtime and the MCP handshake, as a user's servers are. Targets:
//! a start at most 1.2×, a call (alone, and 200 at once each waiting 200 ms in the server) at most
//! 1.02× the unsandboxed one.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ptc_core::credentials::redact::Redactor;
use ptc_core::wire::mcp::McpClient;
use ptc_plan::McpStdioPlan;

use crate::measure::{Budget, pair, pair_rounds};
use crate::report::Row;

fn fixtures() -> PathBuf {
    ptc_plan::paths::normalize(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp"))
}

/// The peer's upstream as a config names it, isolated (`sandbox` left out, the default) or not
/// (`"sandbox": false`), through the same loader as a user's config.
fn plan(isolated: bool) -> Result<McpStdioPlan, String> {
    let python = fixtures().join(".venv/bin/python");
    if !python.exists() {
        return Err(format!(
            "{} is missing (scripts/test installs it)",
            python.display()
        ));
    }
    let mut peer = serde_json::json!({"transport": "mcp_stdio", "command": python,
        "args": [fixtures().join("py_server.py"), "stdio"], "cwd": fixtures()});
    if !isolated {
        peer["sandbox"] = false.into();
    }
    let config = serde_json::json!({"upstreams": {"peer": peer}});
    let loaded = ptc_plan::load_str(
        &config.to_string(),
        Path::new("/bench/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .map_err(|d| d.to_string())?;
    match loaded
        .plan
        .upstreams
        .into_iter()
        .next()
        .map(|u| u.transport)
    {
        Some(ptc_plan::Transport::McpStdio(p)) => Ok(p),
        _ => Err("the config has no stdio upstream".into()),
    }
}

/// The rows, or why they were skipped (said on stderr).
pub fn run(budget: Budget) -> Vec<Row> {
    match measure(budget) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("sandbox: rows skipped: {e}");
            Vec::new()
        }
    }
}

fn measure(budget: Budget) -> Result<Vec<Row>, String> {
    let isolated = plan(true)?;
    let open = plan(false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let connect = |p: &McpStdioPlan| {
        rt.block_on(McpClient::connect_stdio(
            "peer",
            p,
            vec![],
            Redactor::default(),
        ))
        .map_err(|e| e.to_string())
    };
    let failures = std::cell::Cell::new(0usize);
    // A start: spawn, handshake, and the shutdown that ends it (inside the clock on both sides).
    let start = |p: &McpStdioPlan| {
        let began = Instant::now();
        match rt.block_on(McpClient::connect_stdio(
            "peer",
            p,
            vec![],
            Redactor::default(),
        )) {
            Ok(c) => rt.block_on(c.shutdown()),
            Err(_) => failures.set(failures.get() + 1),
        }
        began.elapsed()
    };
    // Starts take ~0.3 s: a few samples each, not the budget's minimum.
    let few = Budget {
        min_samples: 10,
        min_time: Duration::from_millis(1),
    };
    let (ours, base) = pair(few, || start(&isolated), || start(&open));
    if failures.get() > 0 {
        return Err(format!("{} starts failed", failures.get()));
    }
    let starts = Row::paired(
        "sandbox",
        "start a stdio server sandboxed (Python peer: process, runtime, handshake)",
        &ours,
        "the same server with \"sandbox\": false",
        &base,
        Some(1.2),
        "bubblewrap, a user namespace and prlimit before the server's own start".into(),
    );
    let sandboxed = connect(&isolated)?;
    let unsandboxed = connect(&open)?;
    let echo = |c: &McpClient| {
        let args = serde_json::json!({"message": "m"});
        let serde_json::Value::Object(args) = args else {
            unreachable!()
        };
        let began = Instant::now();
        if rt.block_on(c.call_tool("echo", args, None)).is_err() {
            failures.set(failures.get() + 1);
        }
        began.elapsed()
    };
    let (ours, base, ratios) = pair_rounds(budget, 5, || echo(&sandboxed), || echo(&unsandboxed));
    if failures.get() > 0 {
        return Err(format!("{} calls failed", failures.get()));
    }
    let spread = ratios
        .iter()
        .map(|r| format!("{r:.3}"))
        .collect::<Vec<_>>()
        .join(" ");
    let calls = Row::paired(
        "sandbox",
        "a call to a sandboxed stdio server (echo)",
        &ours,
        "the same call with \"sandbox\": false",
        &base,
        Some(1.02),
        format!("5 rounds' ratios: {spread}"),
    );
    // The shape agents give a server: many calls at once, each waiting in the server.
    let waiting = |c: &McpClient| {
        let began = Instant::now();
        let answered = rt.block_on(async {
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..WAITING {
                let c = c.clone();
                let serde_json::Value::Object(args) = serde_json::json!({"ms": WAIT_MS}) else {
                    unreachable!()
                };
                calls.spawn(async move { c.call_tool("sleep", args, None).await.is_ok() });
            }
            calls.join_all().await
        });
        let failed = answered.iter().filter(|ok| !**ok).count();
        failures.set(failures.get() + failed);
        began.elapsed()
    };
    let (ours, base) = pair(few, || waiting(&sandboxed), || waiting(&unsandboxed));
    if failures.get() > 0 {
        return Err(format!("{} waiting calls failed", failures.get()));
    }
    let concurrent = Row::paired(
        "sandbox",
        &format!(
            "{WAITING} calls at once to a sandboxed stdio server, each waiting {WAIT_MS} ms in it"
        ),
        &ours,
        "the same calls with \"sandbox\": false",
        &base,
        Some(1.02),
        "all answered within the default limits (128 processes and threads, 1024 files)".into(),
    );
    rt.block_on(sandboxed.shutdown());
    rt.block_on(unsandboxed.shutdown());
    Ok(vec![starts, calls, concurrent])
}

/// Calls at once in the concurrent row, and how long each waits in the server.
const WAITING: usize = 200;
const WAIT_MS: u64 = 200;
