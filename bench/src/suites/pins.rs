//! Pinned MCP tools: what comparing a live `tools/list` with the pins adds to connecting. The
//! Python peer (`fixtures/mcp/py_server.py`) serves 100 tools over Streamable HTTP in one page;
//! ptc connects, lists and compares all 100 with their pins (`Upstreams::start` of a pinned
//! upstream), beside the same connection that only lists them (what `ptc vendor` does), sampled
//! in alternation. Target: at most 5 ms over the listing itself.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ptc_core::credentials::redact::Redactor;
use ptc_core::{StartOptions, Upstreams};
use ptc_plan::{Plan, Transport};

use crate::measure::{Budget, pair};
use crate::report::Row;

/// Tools the peer lists: its own 30 and this many more.
const TOOLS: usize = 100;
/// What the comparison may add to connecting and listing.
const OVER_LISTING: Duration = Duration::from_millis(5);

/// The peer's process, killed when dropped.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp")
}

/// The Python peer on a free port, serving 100 tools in one page.
fn start_peer() -> Result<(Peer, u16), String> {
    let python = fixtures().join(".venv/bin/python");
    if !python.exists() {
        return Err(format!(
            "{} is missing (scripts/test installs it)",
            python.display()
        ));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let own = 30;
    let extra: Vec<String> = (0..TOOLS.saturating_sub(own))
        .map(|i| format!("extra-{i:03}"))
        .collect();
    let child = Command::new(&python)
        .args(["py_server.py", "http", &port.to_string()])
        .current_dir(fixtures())
        .env("PTC_PAGE_SIZE", "1000")
        .env(
            "PTC_TOOLS_VARIANT",
            serde_json::json!({ "extra": extra }).to_string(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the peer: {e}"))?;
    let peer = Peer(child);
    let until = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > until {
            return Err(format!("the peer never listened on {port}"));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Ok((peer, port))
}

/// The plan of one `mcp_http` upstream at the peer, unpinned.
fn plan(port: u16) -> Result<Plan, String> {
    let config = serde_json::json!({"upstreams": {"peer": {
        "transport": "mcp_http",
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "allow_insecure_http": true,
    }}});
    ptc_plan::load_str(
        &config.to_string(),
        Path::new("/bench/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .map(|l| l.plan)
    .map_err(|d| d.to_string())
}

/// Pins every tool the peer lists (what `ptc vendor` would write) into `plan`.
async fn pinned(mut plan: Plan) -> Result<Plan, String> {
    let tools = ptc_core::list_live_tools(
        &plan,
        &ptc_plan::Secrets::default(),
        "peer",
        &Redactor::default(),
        None,
    )
    .await
    .map_err(|e| e.to_string())?;
    if tools.len() != TOOLS {
        return Err(format!("the peer lists {} tools, not {TOOLS}", tools.len()));
    }
    match &mut plan.upstreams[0].transport {
        Transport::McpHttp(p) => p.tools.pinned = Some(tools.iter().map(|t| t.pin()).collect()),
        other => return Err(format!("unexpected transport {}", other.tag())),
    }
    Ok(plan)
}

/// The row, or why it was skipped (said on stderr).
pub fn run(budget: Budget) -> Vec<Row> {
    match measure(budget) {
        Ok(row) => vec![row],
        Err(e) => {
            eprintln!("pins: row skipped: {e}");
            Vec::new()
        }
    }
}

fn measure(budget: Budget) -> Result<Row, String> {
    let (_peer, port) = start_peer()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let unpinned = plan(port)?;
    let pinned = rt.block_on(pinned(unpinned.clone()))?;
    let secrets = ptc_plan::Secrets::default();
    let failures = std::cell::Cell::new(0usize);
    let (ours, base) = pair(
        budget,
        || {
            // Closed inside the clock, as the listing side closes its session too.
            let start = Instant::now();
            match rt.block_on(Upstreams::start(
                pinned.clone(),
                secrets.clone(),
                StartOptions::default(),
            )) {
                Ok(up) => rt.block_on(up.shutdown()),
                Err(_) => failures.set(failures.get() + 1),
            }
            start.elapsed()
        },
        || {
            let start = Instant::now();
            let listed = rt.block_on(ptc_core::list_live_tools(
                &unpinned,
                &secrets,
                "peer",
                &Redactor::default(),
                None,
            ));
            let took = start.elapsed();
            if listed.is_err() {
                failures.set(failures.get() + 1);
            }
            took
        },
    );
    if failures.get() > 0 {
        return Err(format!("{} connections failed", failures.get()));
    }
    let base_us = base.median().as_secs_f64() * 1e6;
    let target = (base_us + OVER_LISTING.as_secs_f64() * 1e6) / base_us;
    let over = ours.median().saturating_sub(base.median());
    Ok(Row::paired(
        "pins",
        &format!("connect, list and compare {TOOLS} pinned tools (mcp_http)"),
        &ours,
        "connect and list them (what ptc vendor does)",
        &base,
        Some(target),
        format!(
            "{:.2} ms over the listing; target <= 5 ms over it (the ratio target is that, in this run)",
            over.as_secs_f64() * 1e3
        ),
    ))
}
