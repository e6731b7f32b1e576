//! Sides measured in another process: a worker answering one command per line (its own clock,
//! so process start-up is not counted and sides can still alternate), and whole-process runs
//! (wall time and peak RSS of a child, e.g. the released `jaq` binary against `ptc eval`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process that answers one line per command line.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// Starts `cmd` with piped stdin and stdout.
    pub fn spawn(mut cmd: Command) -> Result<Self, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Self {
            child,
            stdin,
            stdout,
        })
    }

    /// Sends `cmd` and returns the answer line.
    pub fn ask(&mut self, cmd: &str) -> Result<String, String> {
        let stdin = self.stdin.as_mut().ok_or("worker closed")?;
        writeln!(stdin, "{cmd}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("worker: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("worker: {e}"))?;
        if line.is_empty() {
            return Err(format!("worker exited before answering {cmd:?}"));
        }
        Ok(line.trim().to_string())
    }

    /// Sends a timing command; the answer's first field is nanoseconds.
    pub fn time(&mut self, cmd: &str) -> Duration {
        let answer = self.ask(cmd).unwrap_or_else(|e| panic!("{e}"));
        let ns = answer
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("worker answered {answer:?} to {cmd:?}"));
        Duration::from_nanos(ns)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing stdin ends the worker's loop.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Builds `bench/serde-plain` (its own workspace, so serde_json has no `preserve_order`) into
/// `target/serde-plain` and returns the binary's path. sonic-rs is built for the host CPU
/// (`-C target-cpu=native`), as its authors recommend for its SIMD paths.
pub fn serde_plain_binary() -> Result<PathBuf, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("serde-plain/Cargo.toml");
    let target = crate::data::dir().with_file_name("serde-plain");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building {} (release)", manifest.display());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .env("RUSTFLAGS", "-C target-cpu=native")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let bin = target.join("release/serde-plain");
    if status.success() && bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("cargo build of {} failed", manifest.display()))
    }
}

/// What one whole-process run took.
#[derive(Debug, Clone, Copy)]
pub struct ProcessRun {
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// Peak resident set size, bytes.
    pub max_rss: u64,
}

/// GNU time, which reports a command's own peak RSS.
const GNU_TIME: &str = "/usr/bin/time";

/// Runs `cmd` to completion (stdout captured and returned), timing it and reading its peak RSS.
///
/// The peak RSS comes from GNU time run in between (Debian package `time`): Linux carries a
/// process's RSS high-water mark across `exec`, so a child spawned straight from this bench,
/// which holds gigabytes of test data, would report at least the bench's own peak. GNU time is
/// small, and the command it forks starts from its memory. Without it `max_rss` is 0 and the RSS
/// rows are left out.
pub fn run_process(cmd: Command) -> Result<(ProcessRun, String), String> {
    let rss_file = std::env::temp_dir().join(format!("ptc-bench-rss-{}", std::process::id()));
    let timed = Path::new(GNU_TIME).is_file();
    let mut run = if timed {
        let mut t = Command::new(GNU_TIME);
        t.args(["-f", "%M", "-o"])
            .arg(&rss_file)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        t
    } else {
        cmd
    };
    let start = Instant::now();
    let out = run
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {:?}: {e}", run.get_program()))?;
    let wall = start.elapsed();
    if !out.status.success() {
        return Err(format!(
            "{:?} exited with {}: {}",
            run.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let max_rss = if timed {
        let kib = std::fs::read_to_string(&rss_file)
            .map_err(|e| format!("cannot read GNU time's report: {e}"))?;
        kib.trim()
            .lines()
            .last()
            .and_then(|l| l.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("GNU time reported {kib:?}, not a size"))?
            * 1024
    } else {
        0
    };
    Ok((
        ProcessRun { wall, max_rss },
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}
