//! The host's Streamable HTTP transport, over real HTTP on loopback: each security behaviour
//! (bearer token, non-loopback rule, Origin and Host checks, body limit, concurrency limits,
//! request timeout, health/ready, graceful shutdown) and both protocol eras.

use std::sync::Arc;
use std::time::Duration;

use ptc_core::server::{EvalLimits, Evaluator, HttpOptions, serve_http};
use ptc_core::{StartOptions, Upstreams};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A program that runs for seconds (nested loops) unless cancelled or timed out.
const LONG: &str = "(loop [i 0] (if (< i 900000) (do (loop [j 0] (if (< j 900000) (recur (inc j)) j)) (recur (inc i))) i))";
/// A program that runs a while and then answers on its own.
const FINITE: &str = "(loop [i 0] (if (< i 300) (do (loop [j 0] (if (< j 3000) (recur (inc j)) j)) (recur (inc i))) i))";

struct Host {
    url: String,
    base: String,
    evaluator: Arc<Evaluator>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<(), String>>,
}

async fn host(options: HttpOptions, limits: EvalLimits) -> Host {
    let plan = ptc_plan::Plan {
        credentials: vec![],
        upstreams: vec![],
    };
    let up = Upstreams::start(plan, Default::default(), StartOptions::default())
        .await
        .unwrap();
    let evaluator =
        Evaluator::new(Arc::new(up), tokio::runtime::Handle::current(), limits).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let options = HttpOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..options
    };
    let running = serve_http(evaluator.clone(), options, async {
        let _ = rx.await;
    })
    .await
    .unwrap();
    Host {
        url: format!("http://{}/mcp", running.addr),
        base: format!("http://{}", running.addr),
        evaluator,
        stop: Some(tx),
        done: running.done,
    }
}

fn client() -> reqwest::Client {
    ptc_core::http_client::builder()
        .build()
        .expect("an HTTP client")
}

/// The status of an `initialize` POSTed to `url` with `headers` added (Origin, Host).
async fn initialize_status(url: &str, headers: &[(&str, &str)]) -> reqwest::StatusCode {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mut r = client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(init.to_string());
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send().await.unwrap().status()
}

/// The JSON-RPC message with `id` in a JSON or SSE response body.
fn message_with_id(body: &str, id: i64) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v["id"] == json!(id))
}

struct Session {
    url: String,
    id: Option<String>,
    token: Option<&'static str>,
}

impl Session {
    async fn open(url: &str, token: Option<&'static str>) -> Session {
        let mut s = Session {
            url: url.to_string(),
            id: None,
            token,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "host-http-test", "version": "1"}}});
        let r = s.send(&init).await;
        assert_eq!(r.status(), 200, "initialize");
        s.id = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string());
        let _ = r.text().await;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = s.send(&note).await;
        assert!(r.status().is_success(), "initialized: {}", r.status());
        s
    }

    async fn send(&self, msg: &Value) -> reqwest::Response {
        let mut req = client()
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .body(msg.to_string());
        if let Some(id) = &self.id {
            req = req.header("mcp-session-id", id);
        }
        if let Some(t) = self.token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    async fn call(&self, id: i64, program: &str) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "lisp_eval", "arguments": {"program": program}}});
        let r = self.send(&msg).await;
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        message_with_id(&body, id).unwrap_or_else(|| panic!("no reply {id} in {body}"))
    }
}

/// Waits (yielding, bounded) until `n` evaluations are running.
async fn until_running(ev: &Evaluator, n: usize) {
    for _ in 0..20_000 {
        if ev.running() == n {
            return;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("never saw {n} running evaluations (now {})", ev.running());
}

fn reason(reply: &Value) -> &str {
    reply["result"]["structuredContent"]["reason"]
        .as_str()
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_required_and_compared_exactly_while_health_and_ready_are_open() {
    let h = host(
        HttpOptions {
            token: Some(TOKEN.into()),
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    for (path, body) in [("/health", "ok\n"), ("/ready", "ready\n")] {
        let r = client()
            .get(format!("{}{path}", h.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path} without a token");
        assert_eq!(r.text().await.unwrap(), body, "{path}");
    }
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |auth: Option<String>| {
        let mut r = client()
            .post(&h.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(init.to_string());
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        r.send()
    };
    let missing = post(None).await.unwrap();
    assert_eq!(missing.status(), 401);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    assert!(
        missing
            .text()
            .await
            .unwrap()
            .contains("missing bearer token")
    );
    // Same length, last character different; and a prefix of the token.
    let mut wrong = TOKEN.to_string();
    wrong.replace_range(31.., "0");
    for bad in [wrong, TOKEN[..31].to_string(), format!("{TOKEN}x")] {
        let r = post(Some(format!("Bearer {bad}"))).await.unwrap();
        assert_eq!(r.status(), 401, "token {bad}");
        assert!(r.text().await.unwrap().contains("wrong bearer token"));
    }
    let ok = post(Some(format!("Bearer {TOKEN}"))).await.unwrap();
    assert_eq!(ok.status(), 200);
    let s = Session::open(&h.url, Some(TOKEN)).await;
    let reply = s.call(1, "(+ 1 2)").await;
    assert_eq!(reply["result"]["structuredContent"]["result"], json!(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_off_loopback_needs_a_long_enough_token() {
    let public = HttpOptions {
        addr: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    };
    let e = public.validate().unwrap_err();
    assert!(
        e.contains("needs a bearer token") && e.contains("PTC_HTTP_TOKEN"),
        "{e}"
    );
    let short = HttpOptions {
        token: Some(TOKEN[..31].into()),
        ..public.clone()
    };
    let e = short.validate().unwrap_err();
    assert!(
        e.contains("31 characters") && e.contains("at least 32"),
        "{e}"
    );
    let at_min = HttpOptions {
        token: Some(TOKEN.into()),
        ..public.clone()
    };
    assert_eq!(at_min.validate(), Ok(()));
    // Long enough, but a space or a control character would not survive the header.
    for bad in [
        format!("{TOKEN} x"),
        format!("{TOKEN}\tx"),
        format!("{TOKEN}\u{7f}"),
    ] {
        let odd = HttpOptions {
            token: Some(bad),
            ..public.clone()
        };
        assert_eq!(
            odd.validate().unwrap_err(),
            "the bearer token must not contain spaces or control characters"
        );
    }
    // The replica id travels in every session id: checked with the other options.
    let replica = |id: &str| HttpOptions {
        replica_id: Some(id.into()),
        ..Default::default()
    };
    assert_eq!(replica(&"r".repeat(32)).validate(), Ok(()));
    assert_eq!(
        replica(&"r".repeat(33)).validate().unwrap_err(),
        format!(
            "the replica id `{}` must have 1 to 32 characters",
            "r".repeat(33)
        )
    );
    assert_eq!(
        replica("r-1").validate().unwrap_err(),
        "the replica id `r-1` contains '-'; use ASCII letters, digits and `_` only"
    );
    // Loopback needs no token.
    assert_eq!(HttpOptions::default().validate(), Ok(()));
    // serve refuses before binding.
    let up = Upstreams::start(
        ptc_plan::Plan {
            credentials: vec![],
            upstreams: vec![],
        },
        Default::default(),
        StartOptions::default(),
    )
    .await
    .unwrap();
    let ev = Evaluator::new(
        Arc::new(up),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    let e = serve_http(ev, public, async {}).await.err().unwrap();
    assert!(e.contains("needs a bearer token"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_is_checked_against_the_allow_list_and_host_against_loopback_names() {
    let h = host(
        HttpOptions {
            allowed_origins: vec!["http://localhost:6274".into()],
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    let post = |headers| initialize_status(&h.url, headers);
    assert_eq!(post(&[("origin", "http://evil.example")]).await, 403);
    assert_eq!(post(&[("origin", "http://localhost:6275")]).await, 403);
    assert_eq!(post(&[("origin", "http://localhost:6274")]).await, 200);
    assert_eq!(post(&[]).await, 200, "no Origin: not a browser");
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example.
    assert_eq!(post(&[("host", "evil.example")]).await, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_add_names_to_the_loopback_ones() {
    let h = host(
        HttpOptions {
            allowed_hosts: vec!["ptc.internal".into()],
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    assert_eq!(
        initialize_status(&h.url, &[("host", "ptc.internal")]).await,
        200
    );
    assert_eq!(
        initialize_status(&h.url, &[("host", "localhost")]).await,
        200,
        "loopback names stay allowed"
    );
    assert_eq!(
        initialize_status(&h.url, &[("host", "127.0.0.1")]).await,
        200
    );
    assert_eq!(
        initialize_status(&h.url, &[("host", "evil.example")]).await,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_body_limit_holds_at_its_boundary() {
    const LIMIT: usize = 2048;
    let h = host(
        HttpOptions {
            max_body_bytes: LIMIT,
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    let body = |len: usize| {
        let base = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        .to_string();
        assert!(base.len() < len);
        format!("{base}{}", " ".repeat(len - base.len()))
    };
    let post = |b: String| {
        client()
            .post(&h.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(b)
            .send()
    };
    assert_eq!(
        post(body(LIMIT)).await.unwrap().status(),
        200,
        "at the limit"
    );
    assert_eq!(
        post(body(LIMIT + 1)).await.unwrap().status(),
        413,
        "one past"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_limit_refuses_with_busy_and_cancellation_frees_the_slot() {
    let limits = EvalLimits {
        max_concurrent: 1,
        program_timeout: Duration::from_secs(120),
        ..EvalLimits::default()
    };
    let h = host(HttpOptions::default(), limits).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let b = Session::open(&h.url, None).await;
    let a2 = a.clone();
    let long = tokio::spawn(async move { a2.call(1, LONG).await });
    until_running(&h.evaluator, 1).await;
    let refused = b.call(2, "(+ 1 2)").await;
    assert_eq!(refused["result"]["isError"], json!(true));
    assert_eq!(reason(&refused), "busy", "{refused}");
    assert!(
        refused["result"]["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("1 evaluations are running, the limit")
    );
    // The client gives up on the long call: notifications/cancelled stops the program.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "test"}});
    assert!(a.send(&cancel).await.status().is_success());
    until_running(&h.evaluator, 0).await;
    long.abort();
    let ok = b.call(3, "(+ 1 2)").await;
    assert_eq!(
        ok["result"]["structuredContent"]["result"],
        json!(3),
        "{ok}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_limit_refuses_the_extra_eval_with_busy() {
    let limits = EvalLimits {
        max_per_session: 1,
        program_timeout: Duration::from_secs(120),
        ..EvalLimits::default()
    };
    let h = host(HttpOptions::default(), limits).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let a2 = a.clone();
    let long = tokio::spawn(async move { a2.call(1, LONG).await });
    until_running(&h.evaluator, 1).await;
    let refused = a.call(2, "(+ 1 2)").await;
    assert_eq!(reason(&refused), "busy", "{refused}");
    assert!(
        refused["result"]["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("this session already runs 1 evaluations")
    );
    // Another session is not limited by this one.
    let b = Session::open(&h.url, None).await;
    let ok = b.call(3, "(+ 40 2)").await;
    assert_eq!(
        ok["result"]["structuredContent"]["result"],
        json!(42),
        "{ok}"
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    a.send(&cancel).await;
    until_running(&h.evaluator, 0).await;
    long.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_budget_refuses_with_busy_when_committed() {
    // Two slots, but memory for one eval only.
    let limits = EvalLimits {
        max_concurrent: 2,
        memory_bytes: 8 << 20,
        memory_budget_bytes: (8 << 20) + (8 << 20) - 1,
        program_timeout: Duration::from_secs(120),
        ..EvalLimits::default()
    };
    let h = host(HttpOptions::default(), limits).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let b = Session::open(&h.url, None).await;
    let a2 = a.clone();
    let long = tokio::spawn(async move { a2.call(1, LONG).await });
    until_running(&h.evaluator, 1).await;
    let refused = b.call(2, "(+ 1 2)").await;
    assert_eq!(reason(&refused), "busy", "{refused}");
    assert!(
        refused["result"]["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("global memory budget")
    );
    a.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    until_running(&h.evaluator, 0).await;
    long.abort();
    let ok = b.call(3, "(+ 1 2)").await;
    assert_eq!(ok["result"]["structuredContent"]["result"], json!(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_answers_503_when_no_response_starts_in_time() {
    let h = host(
        HttpOptions {
            stateless: true,
            request_timeout: Duration::from_millis(300),
            ..Default::default()
        },
        EvalLimits {
            program_timeout: Duration::from_secs(120),
            ..EvalLimits::default()
        },
    )
    .await;
    let s = Session::open(&h.url, None).await;
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "lisp_eval", "arguments": {"program": LONG}}});
    let r = s.send(&msg).await;
    assert_eq!(r.status(), 503);
    assert!(r.text().await.unwrap().contains("longer than 300 ms"));
    // Dropping the request cancels the program.
    until_running(&h.evaluator, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_the_running_eval_and_refuses_new_ones() {
    let mut h = host(HttpOptions::default(), EvalLimits::default()).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let b = Session::open(&h.url, None).await;
    let a2 = a.clone();
    let running = tokio::spawn(async move { a2.call(1, FINITE).await });
    until_running(&h.evaluator, 1).await;
    h.stop.take().unwrap().send(()).unwrap();
    // Draining: not ready, new evals refused.
    for _ in 0..20_000 {
        if !h.evaluator.is_accepting() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let refused = b.call(2, "(+ 1 2)").await;
    assert_eq!(reason(&refused), "busy");
    assert!(
        refused["result"]["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down")
    );
    let ready = client()
        .get(format!("{}/ready", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let reply = running.await.unwrap();
    assert_eq!(
        reply["result"]["structuredContent"]["result"],
        json!(300),
        "{reply}"
    );
    h.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_protocol_eras_are_served() {
    let h = host(HttpOptions::default(), EvalLimits::default()).await;
    // Legacy era: initialize handshake and a session.
    let s = Session::open(&h.url, None).await;
    assert!(s.id.is_some(), "legacy sessions carry Mcp-Session-Id");
    let tools = s
        .send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        .await
        .text()
        .await
        .unwrap();
    let tools = message_with_id(&tools, 5).unwrap();
    let tool = &tools["result"]["tools"][0];
    assert_eq!(tool["name"], "lisp_eval");
    assert_eq!(tool["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(tool["annotations"]["openWorldHint"], json!(false));
    // Modern era (2026-07-28): no handshake; server/discover, then a call carrying its metadata.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let post = |msg: Value, method: &'static str, name: Option<&'static str>| {
        let mut r = client()
            .post(&h.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(msg.to_string());
        if let Some(n) = name {
            r = r.header("mcp-name", n);
        }
        r.send()
    };
    let discover = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        "server/discover",
        None,
    )
    .await
    .unwrap();
    assert_eq!(discover.status(), 200);
    let d = message_with_id(&discover.text().await.unwrap(), 1).unwrap();
    let versions = d["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{d}");
    assert!(versions.contains(&json!("2025-11-25")), "{d}");
    // What the server says of itself: its name, that it serves tools, how to start.
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "ptc",
        "{d}"
    );
    assert!(d["result"]["capabilities"]["tools"].is_object(), "{d}");
    let instructions = d["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("lisp_eval") && instructions.contains("(tool/servers)"),
        "{d}"
    );
    let call = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "_meta": meta, "name": "lisp_eval", "arguments": {"program": "(* 6 7)"}}}),
        "tools/call",
        Some("lisp_eval"),
    )
    .await
    .unwrap();
    assert_eq!(call.status(), 200);
    let c = message_with_id(&call.text().await.unwrap(), 2).unwrap();
    assert_eq!(c["result"]["structuredContent"]["result"], json!(42), "{c}");
}
