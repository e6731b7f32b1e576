//! What several test files here share (`mod support;`). Each file uses some of it.
#![allow(dead_code)]

use std::net::SocketAddr;

use serde_json::{Value, json};

/// Serves `app` on a loopback port, on `rt`; its address.
pub fn loopback(rt: &tokio::runtime::Runtime, app: axum::Router) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    rt.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// A multi-thread runtime with `workers` workers, for a test's servers and upstream I/O.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Runs `src` against `up` with the default limits and `budgets`.
pub fn run(
    rt: &tokio::runtime::Runtime,
    up: &std::sync::Arc<ptc_core::Upstreams>,
    src: &str,
    budgets: ptc_core::Budgets,
) -> ptc_core::ProgramRun {
    ptc_core::run_program(
        up.clone(),
        rt.handle().clone(),
        src,
        ptc_lisp::Limits::default(),
        budgets,
        None,
    )
}

/// A plan with no upstreams, started: for hosts whose tests need only the language.
pub async fn no_upstreams() -> std::sync::Arc<ptc_core::Upstreams> {
    let up = ptc_core::Upstreams::start(
        ptc_plan::Plan::default(),
        Default::default(),
        ptc_core::StartOptions::default(),
    )
    .await
    .expect("an empty plan starts");
    std::sync::Arc::new(up)
}

/// A host serving `evaluator` over Streamable HTTP on a loopback port.
pub struct Host {
    /// The MCP endpoint.
    pub url: String,
    /// `http://addr`, for `/health`, `/ready` and the other routes.
    pub base: String,
    pub evaluator: std::sync::Arc<ptc_core::server::Evaluator>,
    /// Sending (or dropping) it shuts the host down gracefully.
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Ends when the host has shut down.
    pub done: tokio::task::JoinHandle<Result<(), String>>,
}

/// Serves `evaluator` with `options` on 127.0.0.1 (any port).
pub async fn serve(
    evaluator: std::sync::Arc<ptc_core::server::Evaluator>,
    options: ptc_core::server::HttpOptions,
) -> Host {
    let options = ptc_core::server::HttpOptions {
        addr: "127.0.0.1:0".parse().expect("a loopback address"),
        ..options
    };
    serve_at(evaluator, options).await
}

/// Serves `evaluator` with `options` at `options.addr`; the URLs reach it on 127.0.0.1 when it
/// listens on every address (`0.0.0.0`), so the tests' traffic stays on loopback.
pub async fn serve_at(
    evaluator: std::sync::Arc<ptc_core::server::Evaluator>,
    options: ptc_core::server::HttpOptions,
) -> Host {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let running = ptc_core::server::serve_http(evaluator.clone(), options, async {
        let _ = rx.await;
    })
    .await
    .expect("the host listens");
    let mut addr = running.addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    Host {
        url: format!("http://{addr}/mcp"),
        base: format!("http://{addr}"),
        evaluator,
        stop: Some(tx),
        done: running.done,
    }
}

/// The HTTP client the tests speak to a host with.
pub fn client() -> reqwest::Client {
    ptc_core::wire::http_client::builder()
        .build()
        .expect("an HTTP client")
}

/// The JSON-RPC message with `id` in a JSON or SSE response body.
pub fn message_with_id(body: &str, id: i64) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v["id"] == json!(id))
}

/// A legacy-era (2025-11-25) MCP session over Streamable HTTP, spoken as raw JSON-RPC: what
/// a client sends, header by header.
pub struct Session {
    pub url: String,
    pub id: Option<String>,
    pub token: Option<String>,
}

impl Session {
    /// `initialize` and `notifications/initialized`, with the bearer `token` if any.
    pub async fn open(url: &str, token: Option<&str>) -> Session {
        let mut s = Session {
            url: url.to_string(),
            id: None,
            token: token.map(str::to_string),
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

    /// POSTs `msg` on the session.
    pub async fn send(&self, msg: &Value) -> reqwest::Response {
        let mut req = client()
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .body(msg.to_string());
        if let Some(id) = &self.id {
            req = req.header("mcp-session-id", id);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    /// Calls `lisp_eval` with `program`; the reply with `id`.
    pub async fn call(&self, id: i64, program: &str) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "lisp_eval", "arguments": {"program": program}}});
        let r = self.send(&msg).await;
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        message_with_id(&body, id).unwrap_or_else(|| panic!("no reply {id} in {body}"))
    }
}

/// The Observatory test bed, and the fixture config's upstreams started against it.
pub struct Bed {
    server: Option<observatory_server::ServerHandle>,
    token_file: std::path::PathBuf,
    /// The bed's address.
    pub addr: SocketAddr,
    /// The upstreams, pointed at the bed with its token.
    pub up: std::sync::Arc<ptc_core::Upstreams>,
}

impl Bed {
    /// A bed whose one token is `token` (its secret is what the upstreams send), with the
    /// `faults` spec (`""` for none, `"latency_ms=200"`), and the upstreams started with
    /// `options`. `name` keeps the token files of concurrent tests apart.
    pub async fn start(
        name: &str,
        token: observatory_server::TokenSpec,
        faults: &str,
        options: ptc_core::StartOptions,
    ) -> Bed {
        Self::start_with(name, token, faults, options, |_| {}).await
    }

    /// [`Bed::start`], with the plan changed by `change` before the upstreams start.
    pub async fn start_with(
        name: &str,
        token: observatory_server::TokenSpec,
        faults: &str,
        options: ptc_core::StartOptions,
        change: impl FnOnce(&mut ptc_plan::Plan),
    ) -> Bed {
        use observatory_server::{Faults, ServerConfig, TokenSource};
        let secret = token.secret.clone().expect("a token with its secret");
        let mut config = ServerConfig::new(TokenSource::Inline(vec![token]));
        config.faults = Faults::parse_over(&Faults::default(), faults).expect("a fault spec");
        let (addr, server) = observatory_server::start(config)
            .await
            .expect("the Observatory test bed starts");
        let (mut loaded, token_file) = observatory_plan(addr, &secret, name);
        change(&mut loaded.plan);
        let up = ptc_core::Upstreams::start(loaded.plan, loaded.secrets, options)
            .await
            .expect("the upstreams start");
        Bed {
            server: Some(server),
            token_file,
            addr,
            up: std::sync::Arc::new(up),
        }
    }

    /// The running bed (its audit records, its faults).
    pub fn server(&self) -> &observatory_server::ServerHandle {
        self.server.as_ref().expect("the bed runs until stopped")
    }

    /// Stops the bed and removes the token file.
    pub async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.token_file);
    }
}

/// The fixture config's Observatory upstream pointed at the test bed on `addr`, its credential
/// read from a fresh file holding `token` (named after `name`); the plan and the file's path.
pub fn observatory_plan(
    addr: SocketAddr,
    token: &str,
    name: &str,
) -> (ptc_plan::Loaded, std::path::PathBuf) {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/observatory/upstreams.json");
    let mut loaded = ptc_plan::load(&config).unwrap_or_else(|d| panic!("{d}"));
    let token_file = std::env::temp_dir().join(format!("ptc-{name}-{}.token", std::process::id()));
    std::fs::write(&token_file, token).unwrap();
    for c in &mut loaded.plan.credentials {
        c.source = ptc_plan::CredentialSource::File {
            path: token_file.to_string_lossy().into(),
        };
    }
    for u in &mut loaded.plan.upstreams {
        if let ptc_plan::Transport::Openapi(api) = &mut u.transport {
            api.base_url = format!("http://{addr}");
        }
    }
    (loaded, token_file)
}
