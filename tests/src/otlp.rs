//! The test OTLP trace receiver (`fixtures/otlp-receiver/receiver.py`): a launcher that starts it
//! on a free port, and readers of what it decoded. See `fixtures/otlp-receiver/README.md`.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::Value;

/// How long the receiver has to say where it listens (a cold Python start with protobuf's
/// import on a loaded 2-core machine takes a second or two).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running receiver, killed when dropped. Its stdin is a pipe held open until then, and it is
/// started with `--exit-with-stdin`, so it also ends when the test process dies without dropping
/// it (a receiver kept in a `static` for the whole test binary does).
pub struct Receiver {
    /// Its base URL, `http://127.0.0.1:PORT`: what an exporter is pointed at (spans go to
    /// `{url}/v1/traces`).
    pub url: String,
    child: Child,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

/// Starts `receiver.py --port 0` and waits until it says where it listens. `None` after
/// [`crate::skip`] says how to install the fixture's venv when it is missing. Panics, with the
/// receiver's stderr, when it exits or stays silent for 30 seconds.
pub fn start() -> Option<Receiver> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/otlp-receiver");
    let python = dir.join(".venv/bin/python");
    if !python.exists() {
        crate::skip(
            "the fixtures/otlp-receiver Python venv is missing (run `python3 -m venv \
             fixtures/otlp-receiver/.venv && fixtures/otlp-receiver/.venv/bin/pip install -r \
             fixtures/otlp-receiver/requirements.txt`)",
        );
        return None;
    }
    let mut child = Command::new(&python)
        .arg(dir.join("receiver.py"))
        .args(["--port", "0", "--exit-with-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    // Read to the end in the background (so the pipe never fills), kept to show on failure.
    let stderr = Arc::new(Mutex::new(String::new()));
    {
        let mut pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let mut kept = stderr.lock().unwrap_or_else(|e| e.into_inner());
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
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
        let said = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
        panic!(
            "the OTLP receiver did not say where it listens within {START_TIMEOUT:?} (first \
             stdout line: {first:?}, exit: {status:?}); its stderr:\n{said}"
        );
    };
    Some(Receiver {
        url,
        child,
        stderr,
        http: crate::issuer::http_client(),
    })
}

impl Receiver {
    /// Every span received so far, oldest first, as the receiver flattens them (`trace_id`,
    /// `span_id`, `parent_span_id`, `name`, `kind`, `start_ns`, `end_ns`, `attributes`,
    /// `status`, `resource`, ...).
    pub async fn spans(&self) -> Vec<Value> {
        match self.get("/spans").await {
            Value::Array(spans) => spans,
            other => panic!("GET /spans answered {other}"),
        }
    }

    /// Every export request received so far, whole (protobuf's JSON mapping), as one text: what
    /// a test searches for what must never be exported.
    pub async fn everything(&self) -> String {
        self.get("/requests").await.to_string()
    }

    /// What the receiver wrote to stderr so far (nothing, unless it hit a bug).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}; stderr:\n{}", self.stderr()));
        assert_eq!(r.status(), 200, "GET {path}; stderr:\n{}", self.stderr());
        r.json()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: not JSON: {e}"))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
