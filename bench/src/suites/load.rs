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
//!   p99 alone; and `(+ 1 2)` from one session, one after another, while `2 × cores` sessions
//!   each run a program computing for about 2 s, beside the same light programs on an idle host.
//! - Traces: the I/O-bound programs (one call each) to a host exporting its spans over OTLP/HTTP,
//!   beside the same programs to the host without traces.
//!
//! The host's peak RSS comes from `/proc/<pid>/status` (`VmHWM`) after the I/O-bound rows.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use observatory_server::{Faults, ServerConfig, TokenSource, TokenSpec};
use serde_json::Value;

use crate::loopback::{self, Exports};
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

/// Runs the load client on `args` with `env` set; what it reported, or why it reported nothing.
fn client(args: &[String], env: &[(&str, &str)]) -> Result<Report, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the bench itself: {e}"))?;
    let out = Command::new(exe)
        .arg("--load-client")
        .args(args)
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot start the load client: {e}"))?;
    report_of(&out)
}

/// The client's report in `out`, or what went wrong, with the last lines it wrote to stderr.
fn report_of(out: &std::process::Output) -> Result<Report, String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let said = match lines.len() {
        0 => "it wrote nothing to stderr".to_string(),
        n => format!(
            "its stderr ends: {}",
            lines[n.saturating_sub(3)..].join(" | ")
        ),
    };
    if !out.status.success() {
        return Err(format!("the load client failed ({}); {said}", out.status));
    }
    let line: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "the load client printed no report ({e}: {:?}); {said}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let number = |key: &str| {
        line[key]
            .as_f64()
            .ok_or_else(|| format!("the load client's report has no number `{key}`: {line}"))
    };
    Ok(Report {
        wall: Duration::from_secs_f64(number("wall_ms")? / 1e3),
        count: number("count")? as u64,
        errors: number("errors")? as u64,
        p50_ms: number("p50_ms")?,
        p99_ms: number("p99_ms")?,
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
    /// `ptc serve --http` with default flags and `extra`, over the Observatory at `upstream`.
    fn start(
        ptc: &Path,
        upstream: &str,
        token_file: &Path,
        extra: &[String],
    ) -> Option<HostProcess> {
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
            .args(extra)
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
    let rows = match HostProcess::start(&ptc, &upstream, &token_file, &[]) {
        Some(host) => {
            let mut rows = rows(&host, &upstream);
            match callers_row(&ptc, &upstream, &token_file, &host) {
                Ok(row) => rows.push(row),
                Err(e) => eprintln!("load: the callers row is skipped: {e}"),
            }
            match traces_row(&rt, &ptc, &upstream, &token_file, &host) {
                Ok(row) => rows.push(row),
                Err(e) => eprintln!("load: the traces row is skipped: {e}"),
            }
            rows
        }
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
        let ours = client(&args(&[&mcp, "io", "1000", calls]), &[]);
        let base = client(
            &args(&[&direct_url, "direct", "1000", calls]),
            &[("PTC_BENCH_TOKEN", TOKEN)],
        );
        let row = format!("the io row with {calls} call(s)");
        let (Some(ours), Some(base)) = (ran(&row, ours), ran(&format!("{row}'s baseline"), base))
        else {
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
    let light = client(&args(&[&mcp, "light", "64", "10000"]), &[]);
    let health = client(
        &args(&[&format!("{}/health", host.base), "health", "64", "10000"]),
        &[],
    );
    let light = ran("the light rows", light);
    if let (Some(light), Some(health)) = (&light, ran("the /health baseline", health)) {
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
    let ping = client(&args(&[&mcp, "ping", "64", "10000"]), &[]);
    if let (Some(light), Some(ping)) = (&light, ran("the MCP ping baseline", ping)) {
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
    let mixed = client(&args(&[&mcp, "mixed", "64", "10000", "1000", "10"]), &[]);
    if let (Some(mixed), Some(light)) = (ran("the mixed row", mixed), light) {
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
    rows.extend(busy_rows(&mcp));
    rows
}

/// Rounds (of a million loop turns) a first run of the heavy program is timed with, to size the
/// real one.
const PROBE_ROUNDS: usize = 5;
/// How long each heavy program of the busy rows computes, alone.
const HEAVY_SECONDS: f64 = 2.0;

/// Light programs beside computing ones: `(+ 1 2)` from one session, one after another, while
/// `2 × cores` sessions each run a program computing for about [`HEAVY_SECONDS`] (sized by a
/// timed run alone); beside the same light programs on an idle host.
fn busy_rows(mcp: &str) -> Vec<Row> {
    let probe = client(&args(&[mcp, "busy", "0", &PROBE_ROUNDS.to_string()]), &[]);
    let probe = match ran("the busy rows' probe", probe) {
        Some(p) if p.errors == 0 => p,
        Some(_) => {
            eprintln!("load: the busy rows' probe program failed: the rows are skipped");
            return Vec::new();
        }
        None => return Vec::new(),
    };
    let rounds =
        (PROBE_ROUNDS as f64 * HEAVY_SECONDS / probe.wall.as_secs_f64().max(1e-3)).ceil() as usize;
    let heavy = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
    let busy = client(
        &args(&[mcp, "busy", &heavy.to_string(), &rounds.to_string()]),
        &[],
    );
    let idle = client(&args(&[mcp, "light", "1", "1000"]), &[]);
    let (Some(busy), Some(idle)) = (ran("the busy row", busy), ran("the idle baseline", idle))
    else {
        return Vec::new();
    };
    if busy.errors > 0 {
        eprintln!(
            "load: the busy rows are skipped: {} of the programs failed (a heavy one past the \
             host's limits?)",
            busy.errors
        );
        return Vec::new();
    }
    let ms = |d: f64| Duration::from_secs_f64(d / 1e3);
    let extra = format!(
        "; {heavy} heavy programs of {rounds} million loop turns (~{HEAVY_SECONDS} s each alone); idle p99 \
         {:.2} ms; target: p99 <= 5 ms and <= 3x idle",
        idle.p99_ms
    );
    vec![
        Row::time(
            "load",
            &format!("p50 of (+ 1 2), one session, while {heavy} programs compute"),
            ms(busy.p50_ms),
            "p50 on an idle host",
            ms(idle.p50_ms),
            None,
            note(&busy, &extra),
        ),
        Row::time(
            "load",
            &format!("p99 of (+ 1 2), one session, while {heavy} programs compute"),
            ms(busy.p99_ms),
            "p99 on an idle host",
            ms(idle.p99_ms),
            Some(3.0),
            note(&busy, &extra),
        ),
    ]
}

/// `run`'s report, or `None` after saying on stderr why `what` did not run.
fn ran(what: &str, run: Result<Report, String>) -> Option<Report> {
    run.map_err(|e| eprintln!("load: {what} did not run: {e}"))
        .ok()
}

/// Runs of each host in the traces row, alternated (odd, so the median is one of them).
const TRACED_RUNS: usize = 7;

/// The I/O-bound programs with traces exported: 1,000 sessions at once, each program making one
/// call to the slow upstream, sent to a host exporting its spans over OTLP/HTTP to a loopback
/// sink, beside the same programs sent to the `plain` host by the same client (one run each to
/// warm up, then [`TRACED_RUNS`] runs each, alternated; the medians).
fn traces_row(
    rt: &tokio::runtime::Runtime,
    ptc: &Path,
    upstream: &str,
    token_file: &Path,
    plain: &HostProcess,
) -> Result<Row, String> {
    let exports = Arc::new(Exports::default());
    let sink = rt.block_on(async { loopback::serve(loopback::otlp_sink(exports.clone())).await });
    let endpoint = format!("http://{sink}");
    let traced = HostProcess::start(
        ptc,
        upstream,
        token_file,
        &args(&["--otlp-endpoint", &endpoint]),
    )
    .ok_or("`ptc serve --http --otlp-endpoint` did not start")?;
    let io = |host: &HostProcess| {
        client(
            &args(&[&format!("{}/mcp", host.base), "io", "1000", "1"]),
            &[],
        )
    };
    // The traced host starts cold where the plain one has served the rows before: one run each
    // first, not counted (the traced host's first runs were up to 15 % slower than its later
    // ones). Then alternated, the median of seven each: with three each the ratio moved by up
    // to seven points from one suite run to the next, more than the target's five.
    let warm = |host: &str, e: String| format!("the {host} host's warm-up run: {e}");
    io(&traced).map_err(|e| warm("traced", e))?;
    io(plain).map_err(|e| warm("plain", e))?;
    let mut runs = (Vec::new(), Vec::new());
    for _ in 0..TRACED_RUNS {
        let run = |host: &str, e: String| format!("a run of the {host} host: {e}");
        runs.0.push(io(&traced).map_err(|e| run("traced", e))?);
        runs.1.push(io(plain).map_err(|e| run("plain", e))?);
    }
    let median = |mut v: Vec<Report>| {
        v.sort_by_key(|r| r.wall);
        v.swap_remove(TRACED_RUNS / 2)
    };
    let (ours, base) = (median(runs.0), median(runs.1));
    let exported = exports.requests.load(Ordering::Relaxed);
    drop(traced);
    Ok(Row::time(
        "load",
        &format!(
            "1,000 sessions at once, each program making 1 call to a {LATENCY_MS} ms upstream, \
             traces exported (OTLP/HTTP): wall"
        ),
        ours.wall,
        "the same programs to the host without traces, same client",
        base.wall,
        Some(1.05),
        note(
            &ours,
            &format!("; {exported} exports during the run; target: <= 1.05x, 0 errors"),
        ),
    ))
}

/// The audience the callers' tokens name (the host checks it, not its address).
const AUDIENCE: &str = "http://127.0.0.1/bench-load/mcp";

/// Many callers, each checked and each with a kept session: 1,000 OAuth callers (a JWT each,
/// from the real test issuer), their sessions kept in a real `redis-server`, each program making
/// one call to the slow upstream and keeping its answer; beside the same programs sent to the
/// `plain` host (no identity, no sessions) by the same client.
fn callers_row(
    ptc: &Path,
    upstream: &str,
    token_file: &Path,
    plain: &HostProcess,
) -> Result<Row, String> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/auth-issuer/.venv");
    if !python.exists() {
        return Err("the fixtures/auth-issuer venv is missing (scripts/test installs it)".into());
    }
    let issuer = ptc_tests::issuer::start(&[]).ok_or("the issuer did not start")?;
    let redis = ptc_tests::redis::start().ok_or("redis-server is missing")?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let tokens: Vec<String> = (0..CALLERS)
        .map(|i| {
            rt.block_on(issuer.mint(serde_json::json!({"claims": {
                "sub": format!("agent-{i}"), "aud": AUDIENCE}})))
        })
        .collect();
    let bearers = std::env::temp_dir().join(format!("ptc-bench-bearers-{}", std::process::id()));
    std::fs::write(&bearers, tokens.join("\n")).map_err(|e| e.to_string())?;
    let extra = args(&[
        "--oauth-issuer",
        &issuer.url,
        "--oauth-audience",
        AUDIENCE,
        "--sessions",
        "--session-store",
        &redis.url,
    ]);
    let host = HostProcess::start(ptc, upstream, token_file, &extra)
        .ok_or("`ptc serve --http` with OAuth and Redis sessions did not start")?;
    let n = CALLERS.to_string();
    let base = client(
        &args(&[&format!("{}/mcp", plain.base), "kept", &n, "1"]),
        &[],
    );
    let bearer_path = bearers.display().to_string();
    let ours = client(
        &args(&[&format!("{}/mcp", host.base), "kept", &n, "1"]),
        &[("PTC_BENCH_BEARERS", &bearer_path)],
    );
    let _ = std::fs::remove_file(&bearers);
    let base = base.map_err(|e| format!("the plain host's run: {e}"))?;
    let ours = ours.map_err(|e| format!("the OAuth host's run: {e}"))?;
    let rss = host.peak_rss().map_or(String::new(), |b| {
        format!("; host peak RSS {:.0} MB", b as f64 / 1e6)
    });
    Ok(Row::time(
        "load",
        &format!(
            "{CALLERS} OAuth callers at once, each session kept in Redis, each program making 1 \
             call to a {LATENCY_MS} ms upstream: wall"
        ),
        ours.wall,
        "the same programs, no identity and no sessions, same client",
        base.wall,
        None,
        note(&ours, &format!("{rss}; target: <= 1.2x, 0 errors")),
    ))
}

/// Callers in the identity row: each with its own token and session.
const CALLERS: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn output(code: i32, stdout: &str, stderr: &str) -> std::process::Output {
        std::process::Output {
            status: std::process::ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    /// A load row that does not run says why: how the client ended and its last words, or what
    /// its report lacks.
    #[test]
    fn a_client_run_that_reports_nothing_says_why() {
        let ok = r#"{"wall_ms": 1500.0, "count": 10, "errors": 1, "p50_ms": 2.5, "p99_ms": 9.0}"#;
        let r = report_of(&output(0, ok, "")).unwrap();
        assert_eq!(
            (r.wall, r.count, r.errors, r.p50_ms, r.p99_ms),
            (Duration::from_millis(1500), 10, 1, 2.5, 9.0)
        );
        let failed = report_of(&output(
            101,
            "",
            "a\nb\n\nc\nthread panicked: connection refused\n",
        ));
        assert_eq!(
            failed.err().unwrap(),
            "the load client failed (exit status: 101); its stderr ends: b | c | thread panicked: connection refused"
        );
        let silent = report_of(&output(0, "not json", ""));
        assert!(
            silent
                .as_ref()
                .err()
                .unwrap()
                .starts_with("the load client printed no report (")
                && silent
                    .err()
                    .unwrap()
                    .ends_with("\"not json\"); it wrote nothing to stderr"),
        );
        let partial = report_of(&output(0, r#"{"wall_ms": 1.0}"#, ""));
        assert_eq!(
            partial.err().unwrap(),
            r#"the load client's report has no number `count`: {"wall_ms":1.0}"#
        );
    }
}
