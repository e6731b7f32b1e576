//! An MCP client session over Streamable HTTP, kept alive: what the host benchmarks (in-process
//! and the load client) call `lisp_eval` with.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One session.
pub struct Session {
    client: reqwest::Client,
    url: String,
    /// None when the host is stateless.
    id: Option<String>,
    /// The bearer token sent with every request, when the host checks callers.
    bearer: Option<String>,
}

impl Session {
    pub async fn open(url: &str) -> Session {
        Session::open_as(url, None).await
    }

    /// A session whose requests carry `bearer` (`Authorization: Bearer ...`).
    pub async fn open_as(url: &str, bearer: Option<String>) -> Session {
        let client = ptc_core::wire::http_client::builder()
            .build()
            .expect("an HTTP client");
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "ptc-bench", "version": "1"}}});
        let mut req = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(b) = &bearer {
            req = req.bearer_auth(b);
        }
        let r = req.body(init.to_string()).send().await.expect("initialize");
        let id = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string());
        let _ = r.text().await;
        let s = Session {
            client,
            url: url.to_string(),
            id,
            bearer,
        };
        s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        s
    }

    pub async fn post(&self, msg: &Value) -> String {
        let mut req = self
            .client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = &self.id {
            req = req.header("mcp-session-id", id);
        }
        if let Some(b) = &self.bearer {
            req = req.bearer_auth(b);
        }
        req.body(msg.to_string())
            .send()
            .await
            .expect("post")
            .text()
            .await
            .expect("body")
    }

    /// One `lisp_eval` of `(+ 1 2)`; panics unless the answer is 3.
    pub async fn eval(&self, id: u64) -> Duration {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "lisp_eval", "arguments": {"program": "(+ 1 2)"}}});
        let t = Instant::now();
        let body = self.post(&msg).await;
        let took = t.elapsed();
        assert!(body.contains("\"result\":3"), "unexpected reply: {body}");
        took
    }
}

impl Session {
    /// One MCP `ping`: its latency and whether it was answered.
    pub async fn ping(&self, id: u64) -> (Duration, bool) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
        let t = Instant::now();
        let body = self.post(&msg).await;
        (t.elapsed(), body.contains("\"result\""))
    }

    /// One `lisp_eval` of `program`: its latency and whether it answered without an error (a
    /// refusal before the tool, such as a 401, has no result).
    pub async fn call(&self, id: u64, program: &str) -> (Duration, bool) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "lisp_eval", "arguments": {"program": program}}});
        let t = Instant::now();
        let body = self.post(&msg).await;
        let ok = body.contains("\"result\"") && !body.contains("\"isError\":true");
        (t.elapsed(), ok)
    }
}
