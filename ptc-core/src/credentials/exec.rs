//! The `exec` credential source: a command that prints a secret (a cloud CLI minting a token, a
//! vault agent). It runs without a shell, with a cleared environment plus the variables the
//! binding names, within its timeout, and its output is bounded; what it prints is used for the
//! binding's `cache_ttl_ms`, then the command runs again. A 401 makes the next read run it again
//! ([`forget`]). Errors name the command and what went wrong, never what it printed; the
//! credential reader ([`crate::credentials::binding`]) makes them credential errors.
//!
//! Reads are synchronous, like every credential read, and one binding's command runs once at a
//! time: calls that need it while it runs wait for its output. On a multi-thread runtime the
//! wait hands the worker's other tasks to the other workers first.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use ptc_plan::ExecSource;
use tokio::io::AsyncReadExt;

/// One binding's last output and when it was read.
#[derive(Default)]
struct Slot {
    value: Option<(String, Instant)>,
}

/// The slots, by binding and command: one lock per binding, so one slow command does not hold
/// up the others.
static SLOTS: LazyLock<Mutex<HashMap<String, Arc<Mutex<Slot>>>>> = LazyLock::new(Default::default);

fn slot(name: &str, src: &ExecSource) -> Arc<Mutex<Slot>> {
    let key = format!("{name}\0{}\0{}", src.command, src.args.join("\0"));
    SLOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_default()
        .clone()
}

/// The binding's secret: its cached output while fresh, else the command's output now.
pub(crate) fn read(name: &str, src: &ExecSource) -> Result<String, String> {
    let slot = slot(name, src);
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    let ttl = Duration::from_millis(src.cache_ttl_ms);
    if let Some((value, at)) = &slot.value
        && at.elapsed() < ttl
    {
        return Ok(value.clone());
    }
    let value = run(name, src)?;
    slot.value = Some((value.clone(), Instant::now()));
    Ok(value)
}

/// Drops the binding's cached output: its next read runs the command (after a 401).
pub(crate) fn forget(name: &str, src: &ExecSource) {
    slot(name, src)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .value = None;
}

/// Runs the command on a thread of its own and waits for it.
fn run(name: &str, src: &ExecSource) -> Result<String, String> {
    let (name_owned, src_owned) = (name.to_string(), src.clone());
    let work = move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(&name_owned, &src_owned, &format!("cannot start: {e}")))?;
        rt.block_on(run_async(&name_owned, &src_owned))
    };
    let joined = || {
        std::thread::spawn(work)
            .join()
            .unwrap_or_else(|_| Err(fail(name, src, "stopped unexpectedly")))
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(joined)
        }
        _ => joined(),
    }
}

fn fail(name: &str, src: &ExecSource, what: &str) -> String {
    format!("credential `{name}`: the command {} {what}", src.command)
}

async fn run_async(name: &str, src: &ExecSource) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(&src.command);
    cmd.args(&src.args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for var in &src.env {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(name, src, &format!("cannot be run: {}", e.kind())))?;
    let Some(mut stdout) = child.stdout.take() else {
        return Err(fail(name, src, "has no output pipe"));
    };
    let limit = ExecSource::MAX_OUTPUT_BYTES;
    let timeout = Duration::from_millis(src.timeout_ms);
    let finished = tokio::time::timeout(timeout, async {
        let mut out = Vec::new();
        (&mut stdout)
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .await?;
        if out.len() > limit {
            return Ok((out, None));
        }
        child.wait().await.map(|status| (out, Some(status)))
    })
    .await;
    let (out, status) = match finished {
        // Dropping the child kills it.
        Err(_) => {
            return Err(fail(
                name,
                src,
                &format!(
                    "did not finish within {} ms and was stopped",
                    src.timeout_ms
                ),
            ));
        }
        Ok(Err(e)) => return Err(fail(name, src, &format!("could not be read: {}", e.kind()))),
        Ok(Ok(done)) => done,
    };
    let Some(status) = status else {
        return Err(fail(
            name,
            src,
            &format!("printed more than {limit} bytes and was stopped"),
        ));
    };
    if !status.success() {
        let how = status.code().map_or_else(
            || "was killed by a signal".to_string(),
            |c| format!("exited with status {c}"),
        );
        return Err(fail(name, src, &how));
    }
    let text = String::from_utf8(out)
        .map_err(|_| fail(name, src, "printed something that is not text"))?;
    Ok(text.trim_end().to_string())
}

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A script in a fresh folder; `$DIR` in `body` is that folder.
    pub(crate) fn script(name: &str, body: &str) -> (String, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ptc-exec-{name}-{}", std::process::id()));
        // A run count left by an earlier process with the same id (ids are reused) would
        // count on from it.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cmd.sh");
        let body = body.replace("$DIR", &dir.to_string_lossy());
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (path.to_string_lossy().into_owned(), dir)
    }

    pub(crate) fn source(command: &str, ttl: u64) -> ExecSource {
        ExecSource {
            command: command.into(),
            args: vec![],
            env: vec![],
            timeout_ms: 5_000,
            cache_ttl_ms: ttl,
        }
    }

    /// The script counts its runs in `$DIR/runs` and prints `token-<run>`.
    pub(crate) const COUNTING: &str =
        "n=$(cat $DIR/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > $DIR/runs; echo token-$n";

    #[test]
    fn output_is_cached_for_the_ttl_and_forgotten_after_a_401() {
        let (cmd, _dir) = script("cache", COUNTING);
        let src = source(&cmd, 3_600_000);
        assert_eq!(read("cache", &src).unwrap(), "token-1");
        assert_eq!(read("cache", &src).unwrap(), "token-1");
        forget("cache", &src);
        assert_eq!(read("cache", &src).unwrap(), "token-2");
        // TTL 0: every read runs the command.
        let (cmd, _dir) = script("nocache", COUNTING);
        let src = source(&cmd, 0);
        assert_eq!(read("nocache", &src).unwrap(), "token-1");
        assert_eq!(read("nocache", &src).unwrap(), "token-2");
    }

    #[test]
    fn the_environment_is_cleared_except_the_named_variables() {
        // Cargo runs tests with CARGO_MANIFEST_DIR set (the shell would make up a PATH).
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo");
        let (cmd, _dir) = script("env", "echo \"[$CARGO_MANIFEST_DIR][$CARGO_PKG_NAME]\"");
        assert_eq!(read("env", &source(&cmd, 0)).unwrap(), "[][]");
        let mut src = source(&cmd, 0);
        src.env = vec!["CARGO_MANIFEST_DIR".into()];
        assert_eq!(read("env2", &src).unwrap(), format!("[{dir}][]"));
    }

    #[test]
    fn failures_name_the_command_never_its_output() {
        let (cmd, _dir) = script(
            "fails",
            "echo leaked-secret-1; echo leaked-secret-2 >&2; exit 3",
        );
        let e = read("f", &source(&cmd, 0)).unwrap_err();
        assert_eq!(
            e,
            format!("credential `f`: the command {cmd} exited with status 3")
        );
        let e = read("m", &source("/nonexistent/ptc-cmd", 0))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "credential `m`: the command /nonexistent/ptc-cmd cannot be run: entity not found"
        );
        let (cmd, _dir) = script("slow", "echo partial-secret; exec sleep 30");
        let mut src = source(&cmd, 0);
        src.timeout_ms = 300;
        let started = Instant::now();
        let e = read("s", &src).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            e,
            format!(
                "credential `s`: the command {cmd} did not finish within 300 ms and was stopped"
            )
        );
    }

    #[test]
    fn output_is_bounded_at_its_limit() {
        let limit = ExecSource::MAX_OUTPUT_BYTES;
        // Exactly the limit (a line of `limit - 1` characters and its newline) is read.
        let (cmd, _dir) = script(
            "fits",
            &format!("head -c {} /dev/zero | tr '\\0' a; echo", limit - 1),
        );
        assert_eq!(read("fits", &source(&cmd, 0)).unwrap().len(), limit - 1);
        let (cmd, _dir) = script(
            "over",
            &format!("head -c {} /dev/zero | tr '\\0' a", limit + 1),
        );
        let e = read("over", &source(&cmd, 0)).unwrap_err();
        assert!(
            e.ends_with(&format!("printed more than {limit} bytes and was stopped")),
            "{e}"
        );
    }

    /// Called from a task on a current-thread runtime (no `block_in_place` there), the command
    /// still runs and answers.
    #[test]
    fn a_read_from_a_current_thread_runtime_answers() {
        let (cmd, _dir) = script("current", "echo token-c");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = rt.block_on(async { read("current", &source(&cmd, 0)) });
        assert_eq!(got.unwrap(), "token-c");
    }

    /// Called from a worker of a multi-thread runtime, a running command does not stall the
    /// worker's other tasks: with one worker, a task spawned beside the read gets to run while
    /// the command waits for it (the command gives up after about 5 s if it never does).
    #[test]
    fn a_running_command_does_not_stall_the_workers_other_tasks() {
        let (cmd, dir) = script(
            "stall",
            "i=0; while [ ! -f $DIR/go ]; do i=$((i+1)); [ $i -gt 100 ] && exit 7; sleep 0.05; done; echo token-s",
        );
        let go = dir.join("go");
        let _ = std::fs::remove_file(&go);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let got = rt.block_on(async move {
            let src = source(&cmd, 0);
            let reader = tokio::spawn(async move { read("stall", &src) });
            let writer = tokio::spawn(async move { std::fs::write(go, "").unwrap() });
            let got = reader.await.unwrap();
            writer.await.unwrap();
            got
        });
        assert_eq!(got.unwrap(), "token-s");
    }
}
