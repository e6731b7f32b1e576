//! Many agents at once: the real host (`ptc serve --http`, default flags) in front of the
//! Observatory test bed answering every request after 200 ms, loaded by the bench's own client
//! in a process of its own (`--load-client`, see [`crate::load_client`]).
//!
//! - I/O-bound: 1,000 sessions at once, each program making 1 (then 10 sequential) upstream
//!   calls, beside the same calls made straight to the upstream by the same client.
//! - Light: 10,000 `(+ 1 2)` evaluations from 64 sessions, beside as many `GET /health` round
//!   trips to the same host, and beside as many MCP `ping`s through the same sessions (what the
//!   MCP layer costs without a tool).
//! - Mixed: the light evaluations' p99 while 1,000 programs wait on the upstream, beside their
//!   p99 alone.
//!
//! The host's peak RSS comes from `/proc/<pid>/status` (`VmHWM`) after the I/O-bound rows.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use observatory_server::{Faults, ServerConfig, TokenSource, TokenSpec};
use serde_json::Value;

use crate::measure::Budget;
use crate::report::Row;

const TOKEN: &str = "obs_bench_load_4c2e8a1f";
const LATENCY_MS: u64 = 200;

/// What one client run reported.
struct Report {
    wall: Duration,
    count: u64,
    errors: u64,
    p50_ms: f64,
    p99_ms: f64,
}

fn client(args: &[String], env_token: bool) -> Option<Report> {
    let exe = std::env::current_exe().ok()?;
    let mut cmd = Command::new(exe);
    cmd.arg("--load-client").args(args).stderr(Stdio::inherit());
    if env_token {
        cmd.env("PTC_BENCH_TOKEN", TOKEN);
    }
    let out = cmd.output().ok()?;
    let line: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(Report {
        wall: Duration::from_secs_f64(line["wall_ms"].as_f64()? / 1e3),
        count: line["count"].as_u64()?,
        errors: line["errors"].as_u64()?,
        p50_ms: line["p50_ms"].as_f64()?,
        p99_ms: line["p99_ms"].as_f64()?,
    })
}

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The host process, and its address once it listens.
struct HostProcess {
    child: Child,
    base: String,
}

impl HostProcess {
    fn start(ptc: &Path, upstream: &str, token_file: &Path) -> Option<HostProcess> {
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/observatory/upstreams.json"
        );
        let mut child = Command::new(ptc)
            .args(["serve", "--http", "127.0.0.1:0", "--log-format", "json"])
            .args(["--config", config])
            .arg(format!("--upstream-url=observatory={upstream}"))
            .arg(format!(
                "--credential-file=observatory-token={}",
                token_file.display()
            ))
            // The listening line, not an audit line per evaluation.
            .env("RUST_LOG", "info,ptc::audit=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let mut lines = BufReader::new(child.stderr.take()?).lines();
        let addr = lines.by_ref().map_while(Result::ok).find_map(|l| {
            let v: Value = serde_json::from_str(&l).ok()?;
            (v["message"] == "listening").then(|| v["addr"].as_str().map(String::from))?
        });
        // Keep reading what it logs, so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        let Some(addr) = addr else {
            let _ = child.kill();
            return None;
        };
        Some(HostProcess {
            child,
            base: format!("http://{addr}"),
        })
    }

    /// Peak resident set size so far, bytes.
    fn peak_rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(kb * 1024)
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn note(r: &Report, extra: &str) -> String {
    format!(
        "{} answered, {} errors; p50 {:.1} ms, p99 {:.1} ms{extra}",
        r.count, r.errors, r.p50_ms, r.p99_ms
    )
}

/// The load suite's rows (none, with a message, when `ptc` is not built next to the bench).
pub fn run(_budget: Budget) -> Vec<Row> {
    let Some(ptc) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("ptc")))
        .filter(|p: &PathBuf| p.exists())
    else {
        eprintln!("load: skipped: build the host first (cargo build --release -p ptc-cli)");
        return Vec::new();
    };
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let mut config = ServerConfig::new(TokenSource::Inline(vec![TokenSpec::full_access(
        "tok_bench",
        TOKEN,
    )]));
    config.faults = Faults::parse_over(&Faults::default(), &format!("latency_ms={LATENCY_MS}"))
        .expect("a fault spec");
    let (addr, server) = rt
        .block_on(observatory_server::start(config))
        .expect("the Observatory test bed starts");
    let token_file = std::env::temp_dir().join(format!("ptc-bench-load-{}", std::process::id()));
    std::fs::write(&token_file, TOKEN).expect("the token file");
    let upstream = format!("http://{addr}");
    let rows = match HostProcess::start(&ptc, &upstream, &token_file) {
        Some(host) => rows(&host, &upstream),
        None => {
            eprintln!("load: skipped: `ptc serve --http` did not start");
            Vec::new()
        }
    };
    rt.block_on(server.shutdown());
    let _ = std::fs::remove_file(&token_file);
    rows
}

fn rows(host: &HostProcess, upstream: &str) -> Vec<Row> {
    let mcp = format!("{}/mcp", host.base);
    let direct_url = format!("{upstream}/api/traces?org_id=org_acme&limit=1");
    let mut rows = Vec::new();
    for calls in ["1", "10"] {
        let ours = client(&args(&[&mcp, "io", "1000", calls]), false);
        let base = client(&args(&[&direct_url, "direct", "1000", calls]), true);
        let (Some(ours), Some(base)) = (ours, base) else {
            eprintln!("load: the io row with {calls} call(s) did not run");
            continue;
        };
        let rss = host.peak_rss().map_or(String::new(), |b| {
            format!("; host peak RSS {:.0} MB", b as f64 / 1e6)
        });
        let target = if calls == "1" {
            "; target: wall <= 600 ms, 0 errors"
        } else {
            "; target: 0 errors"
        };
        rows.push(Row::time(
            "load",
            &format!(
                "1,000 sessions at once, each program making {calls} call(s) to a {LATENCY_MS} ms \
                 upstream: wall"
            ),
            ours.wall,
            "the same calls straight to the upstream, same client",
            base.wall,
            None,
            note(&ours, &format!("{rss}{target}")),
        ));
    }
    let light = client(&args(&[&mcp, "light", "64", "10000"]), false);
    let health = client(
        &args(&[&format!("{}/health", host.base), "health", "64", "10000"]),
        false,
    );
    if let (Some(light), Some(health)) = (&light, health) {
        let rate = light.count as f64 / light.wall.as_secs_f64();
        rows.push(Row::time(
            "load",
            "10,000 (+ 1 2) evaluations from 64 sessions: wall",
            light.wall,
            "10,000 GET /health round trips to the same host, 64 clients",
            health.wall,
            None,
            note(
                light,
                &format!("; {rate:.0} evals/s; target: 0 refused, >= 15,000 evals/s"),
            ),
        ));
    }
    // The floor the MCP layer sets: an MCP `ping` is a request through the same sessions and
    // transport that runs no tool.
    let ping = client(&args(&[&mcp, "ping", "64", "10000"]), false);
    if let (Some(light), Some(ping)) = (&light, ping) {
        let rate = ping.count as f64 / ping.wall.as_secs_f64();
        rows.push(Row::time(
            "load",
            "10,000 (+ 1 2) evaluations from 64 sessions: wall (MCP floor)",
            light.wall,
            "10,000 MCP pings through the same sessions",
            ping.wall,
            None,
            note(
                light,
                &format!("; pings: {rate:.0}/s, p99 {:.1} ms", ping.p99_ms),
            ),
        ));
    }
    let mixed = client(&args(&[&mcp, "mixed", "64", "10000", "1000", "10"]), false);
    if let (Some(mixed), Some(light)) = (mixed, light) {
        rows.push(Row::time(
            "load",
            "p99 of (+ 1 2) from 64 sessions while 1,000 programs wait on the upstream",
            Duration::from_secs_f64(mixed.p99_ms / 1e3),
            "their p99 alone",
            Duration::from_secs_f64(light.p99_ms / 1e3),
            None,
            note(&mixed, "; target: p99 <= 5 ms"),
        ));
    }
    rows
}
