//! The test OTLP trace receiver (`fixtures/otlp-receiver/receiver.py`): a launcher that starts it
//! on a free port, and readers of what it decoded. See `fixtures/otlp-receiver/README.md`.

use serde_json::Value;

use crate::python_server::{self, PythonServer};

/// A running receiver, killed when dropped (see [`PythonServer`]).
pub struct Receiver {
    /// Its base URL, `http://127.0.0.1:PORT`: what an exporter is pointed at (spans go to
    /// `{url}/v1/traces`).
    pub url: String,
    server: PythonServer,
    http: reqwest::Client,
}

/// Starts `receiver.py` and waits until it says where it listens. `None` after [`crate::skip`]
/// says how to install the fixture's venv when it is missing.
pub fn start() -> Option<Receiver> {
    let server = python_server::start("otlp-receiver", "receiver.py", &[], "the OTLP receiver")?;
    Some(Receiver {
        url: server.url.clone(),
        server,
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
        self.server.stderr()
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
