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

/// Runs `cmd` to completion (stdout captured and returned), timing it and reading its peak RSS
/// from `wait4`.
pub fn run_process(mut cmd: Command) -> Result<(ProcessRun, String), String> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        std::io::Read::read_to_string(&mut s, &mut out).map_err(|e| e.to_string())?;
    }
    if let Some(mut s) = child.stderr.take() {
        std::io::Read::read_to_string(&mut s, &mut err).map_err(|e| e.to_string())?;
    }
    let (status, max_rss) = wait4(child.id())?;
    let wall = start.elapsed();
    if status != 0 {
        return Err(format!(
            "{:?} exited with status {status}: {}",
            cmd.get_program(),
            err.trim()
        ));
    }
    Ok((ProcessRun { wall, max_rss }, out.trim().to_string()))
}

/// Waits for `pid`; its exit status and peak RSS in bytes. `std::process::Child::wait` does not
/// report resource usage, and `getrusage(RUSAGE_CHILDREN)` is a maximum over all children.
fn wait4(pid: u32) -> Result<(i32, u64), String> {
    let mut status = 0;
    // SAFETY: `rusage` is plain old data, zero is a valid value for every field.
    #[allow(unsafe_code)]
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet reaped; both pointers are valid for the call.
    #[allow(unsafe_code)]
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    if r < 0 {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Linux reports ru_maxrss in KiB.
    Ok((code, usage.ru_maxrss.max(0) as u64 * 1024))
}
