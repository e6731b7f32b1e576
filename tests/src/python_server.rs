//! The Python fixture servers the tests start (`fixtures/auth-issuer`, `fixtures/otlp-receiver`,
//! `fixtures/mcp/oauth_server.py`): each runs from its folder's venv on a free loopback port,
//! prints `listening URL` as its first line and ends when its stdin closes.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long a server has to say where it listens (a cold Python start, key generation or
/// protobuf's import on a loaded 2-core machine take a few seconds at most).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running fixture server, killed when dropped. Its stdin is a pipe held open until then, and
/// it is started with `--exit-with-stdin`, so it also ends when the test process dies without
/// dropping it (one kept in a `static` for the whole test binary does).
pub struct PythonServer {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    child: Child,
    stderr: Arc<Mutex<String>>,
}

/// Starts `fixtures/<folder>/<script> --port 0 --exit-with-stdin args...` with the folder's venv
/// and waits until it says where it listens. `None` after [`crate::skip`] says how to install
/// the venv when it is missing. Panics, with the server's stderr, when it exits or stays silent
/// for 30 seconds. `what` names it in those messages.
pub fn start(folder: &str, script: &str, args: &[&str], what: &str) -> Option<PythonServer> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/{folder}"));
    let python = dir.join(".venv/bin/python");
    if !python.exists() {
        crate::skip(&format!(
            "the fixtures/{folder} Python venv is missing (scripts/test installs it)"
        ));
        return None;
    }
    let mut child = Command::new(&python)
        .arg(dir.join(script))
        .args(["--port", "0", "--exit-with-stdin"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    // stderr is read to the end in the background (so the pipe never fills), kept to show when
    // something goes wrong.
    let stderr = Arc::new(Mutex::new(String::new()));
    let stderr_reader = {
        let mut pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let mut kept = stderr.lock().unwrap_or_else(|e| e.into_inner());
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    // stdout: the first line goes to the channel; the rest (there should be none) is drained.
    let (tx, rx) = mpsc::channel();
    {
        let pipe = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            let mut lines = BufReader::new(pipe).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            lines.for_each(drop);
        });
    }
    let first = rx.recv_timeout(START_TIMEOUT);
    let url = first
        .as_deref()
        .ok()
        .and_then(|line| line.strip_prefix("listening "))
        .filter(|url| url.starts_with("http://127.0.0.1:"))
        .map(str::to_string);
    let Some(url) = url else {
        let _ = child.kill();
        let status = child.wait();
        let _ = stderr_reader.join();
        let said = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
        panic!(
            "{what} did not say where it listens within {START_TIMEOUT:?} (first stdout line: \
             {first:?}, exit: {status:?}); its stderr:\n{said}"
        );
    };
    Some(PythonServer { url, child, stderr })
}

impl PythonServer {
    /// What the server wrote to stderr so far (nothing, unless it hit a bug).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
